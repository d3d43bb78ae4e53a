//! Symbolic tile extents: one compiled megakernel serves every table length `T`, batch
//! `B`, column count `N` and depth `L`. A task reads a whole `[T, 4]` table, tasks over
//! column blocks add `[B, 64]` tiles, and tasks over layers add `[1, 2 * B, 32]` tiles (the
//! symbolic extent sits behind a layer index, its own index fixed at 0). A second
//! megakernel pairs extents `B` and `C` in one `add`, whose contract holds only where they
//! are equal: a launch checks it and returns an error where they differ.
use et_core::LaunchReport;
use et_core::ops::{add, row_sum};
use et_core::prelude::*;

#[megakernel(dims(B <= 16, T <= 1024))]
pub fn symbolic_extents(
    table: &Tensor<f32, { [T, 4] }>,
    sums: &mut Tensor<f32, { [T] }>,
    x: &Tensor<f32, { [B, 64 * N] }>,
    y: &Tensor<f32, { [B, 64 * N] }>,
    z: &mut Tensor<f32, { [B, 64 * N] }>,
    h: &Tensor<f32, { [L, 2 * B, 32] }>,
    doubled: &mut Tensor<f32, { [L, 2 * B, 32] }>,
) {
    tile!(whole_table[i] in [1] {
        row_sum(table.tile([0, 0], [T, 4]), sums.tile([0], [T]));
    });
    tile!(columns[j] in [N] {
        add(x.tile([0, j], [B, 64]), y.tile([0, j], [B, 64]), z.tile([0, j], [B, 64]));
    });
    tile!(layers[l] in [L] {
        add(h.tile([l, 0, 0], [1, 2 * B, 32]), h.tile([l, 0, 0], [1, 2 * B, 32]), doubled.tile([l, 0, 0], [1, 2 * B, 32]));
    });
}

#[megakernel(dims(B <= 16, C <= 16))]
pub fn paired_extents(a: &Tensor<f32, { [B, 8] }>, b: &Tensor<f32, { [C, 8] }>, out: &mut Tensor<f32, { [B, 8] }>) {
    tile!(pair[i] in [1] {
        add(a.tile([0, 0], [B, 8]), b.tile([0, 0], [C, 8]), out.tile([0, 0], [B, 8]));
    });
}

fn close(got: f32, want: f32) -> bool {
    (got - want).abs() <= 1e-5 * (1.0 + want.abs())
}

/// Runs `symbolic_extents` at table length `t`, batch `b`, `n` column blocks and `l`
/// layers on any backend, checks every output against a sequential reference, and
/// returns the launch's report.
pub fn check<Bk: Backend>(backend: &Bk, t: usize, b: usize, n: usize, l: usize) -> LaunchReport {
    let seed = (t * 1000 + b * 100 + n * 10 + l) as u64;
    let table = Tensor::<f32>::random(&[t, 4], seed);
    let x = Tensor::<f32>::random(&[b, 64 * n], seed + 1);
    let y = Tensor::<f32>::random(&[b, 64 * n], seed + 2);
    let h = Tensor::<f32>::random(&[l, 2 * b, 32], seed + 3);
    let (dtable, dx, dy, dh) = (
        backend.upload(&table).unwrap(),
        backend.upload(&x).unwrap(),
        backend.upload(&y).unwrap(),
        backend.upload(&h).unwrap(),
    );
    let mut sums = backend.upload(&Tensor::<f32>::poisoned(&[t])).unwrap();
    let mut z = backend.upload(&Tensor::<f32>::poisoned(&[b, 64 * n])).unwrap();
    let mut doubled = backend.upload(&Tensor::<f32>::poisoned(&[l, 2 * b, 32])).unwrap();
    let report = symbolic_extents::launch(backend, &dtable, &mut sums, &dx, &dy, &mut z, &dh, &mut doubled)
        .unwrap_or_else(|e| panic!("T = {t}, B = {b}, N = {n}, L = {l}: {e}"));
    let (sums, z, doubled) =
        (backend.download(&sums).unwrap(), backend.download(&z).unwrap(), backend.download(&doubled).unwrap());
    for r in 0..t {
        let want: f32 = (0..4).map(|c| table.get(&[r, c])).sum();
        assert!(close(sums.get(&[r]), want), "T = {t}: row {r} sums to {}, want {want}", sums.get(&[r]));
    }
    for r in 0..b {
        for c in 0..64 * n {
            let want = x.get(&[r, c]) + y.get(&[r, c]);
            assert_eq!(z.get(&[r, c]), want, "B = {b}, N = {n}: z[{r}, {c}]");
        }
    }
    for k in 0..l {
        for r in 0..2 * b {
            for c in 0..32 {
                let want = h.get(&[k, r, c]) + h.get(&[k, r, c]);
                assert_eq!(doubled.get(&[k, r, c]), want, "L = {l}, B = {b}: doubled[{k}, {r}, {c}]");
            }
        }
    }
    report
}

/// Runs `paired_extents` with `b` rows in `a` and `c` rows in `b`: where they are equal the
/// sum is checked, where they differ the launch must return the contract's error.
pub fn check_paired<Bk: Backend>(backend: &Bk, b: usize, c: usize) {
    let a = Tensor::<f32>::random(&[b, 8], 7);
    let other = Tensor::<f32>::random(&[c, 8], 8);
    let (da, dother) = (backend.upload(&a).unwrap(), backend.upload(&other).unwrap());
    let mut out = backend.upload(&Tensor::<f32>::poisoned(&[b, 8])).unwrap();
    let result = paired_extents::launch(backend, &da, &dother, &mut out);
    if b == c {
        result.unwrap_or_else(|e| panic!("B = C = {b}: {e}"));
        let out = backend.download(&out).unwrap();
        for r in 0..b {
            for k in 0..8 {
                assert_eq!(out.get(&[r, k]), a.get(&[r, k]) + other.get(&[r, k]));
            }
        }
        return;
    }
    let err = result.expect_err("extents that break the contract must not launch").to_string();
    for part in [
        "megakernel `paired_extents`",
        "tile op `et_core::ops::elementwise::add`",
        "tile group `pair`",
        &format!("extents [{b}, 8], [{c}, 8], [{b}, 8]"),
        "a, b and out must have the same extents",
    ] {
        assert!(err.contains(part), "missing {part:?} in: {err}");
    }
}

#[allow(dead_code)]
fn main() {
    let cpu = Cpu::new();
    for (t, b, n, l) in [(1, 1, 1, 1), (5, 3, 2, 4), (1024, 16, 3, 2), (77, 8, 1, 7)] {
        check(&cpu, t, b, n, l);
    }
    check_paired(&cpu, 4, 4);
    check_paired(&cpu, 3, 2);
}
