//! Waiters whose conditions imply their producer's: `up[e]` runs where `e < counts[e]`
//! and signals `d[e]`; `fin[e]` runs where `e + 1 < counts[e]` and `eq[e]` where
//! `e + 2 == counts[e]`, so each of their tasks finds its producer active, and both wait
//! `d[e]` after the guard `g[e]`, which every task signals. Run on the CPU backend with
//! counts that make every group partly active, against a sequential reference.
use et_core::prelude::*;

#[megakernel]
pub fn stronger(
    counts: &Tensor<i32, { [E] }>,
    x: &Tensor<f32, { [E] }>,
    y: &mut Tensor<f32, { [E] }>,
    z: &mut Tensor<f32, { [E] }>,
    q: &mut Tensor<f32, { [E] }>,
) {
    let g = event!([E]);
    let d = event!([E]);
    tile!(s[e] in [E] {
        signal!(g[e]);
    });
    tile!(up[e] in [E] if e < counts[e] {
        wait!(g[e]);
        add(x.tile([e], [1]), x.tile([e], [1]), y.tile([e], [1]));
        signal!(d[e]);
    });
    tile!(fin[e] in [E] if e + 1 < counts[e] {
        wait!(g[e]);
        wait!(d[e]);
        add(y.tile([e], [1]), x.tile([e], [1]), z.tile([e], [1]));
    });
    tile!(eq[e] in [E] if e + 2 == counts[e] {
        wait!(g[e]);
        wait!(d[e]);
        add(y.tile([e], [1]), y.tile([e], [1]), q.tile([e], [1]));
    });
}

/// Runs on any backend with `counts[e] = e + (e * seed) % 4`, and checks every active
/// task's output against the reference.
pub fn check<B: Backend>(backend: &B, size: usize, seed: usize, chaos: Option<u64>) {
    let counts: Vec<i32> = (0..size).map(|e| (e + (e * seed + seed) % 4) as i32).collect();
    let x = Tensor::<f32>::random(&[size], seed as u64);
    let c = Tensor::from_vec(&[size], counts.clone()).unwrap();
    let (dc, dx) = (backend.upload(&c).unwrap(), backend.upload(&x).unwrap());
    let mut dy = backend.upload(&Tensor::<f32>::poisoned(&[size])).unwrap();
    let mut dz = backend.upload(&Tensor::<f32>::poisoned(&[size])).unwrap();
    let mut dq = backend.upload(&Tensor::<f32>::poisoned(&[size])).unwrap();
    let opts = LaunchOptions { chaos, ..Default::default() };
    stronger::launch_with(backend, &opts, &dc, &dx, &mut dy, &mut dz, &mut dq)
        .unwrap_or_else(|e| panic!("E = {size}, counts {counts:?}: {e}"));
    let (y, z, q) = (backend.download(&dy).unwrap(), backend.download(&dz).unwrap(), backend.download(&dq).unwrap());
    for (e, &n) in counts.iter().enumerate() {
        let (xe, n) = (x.get(&[e]), n as usize);
        if e < n {
            assert_eq!(y.get(&[e]), xe + xe, "y[{e}], counts {counts:?}");
        }
        if e + 1 < n {
            assert_eq!(z.get(&[e]), (xe + xe) + xe, "z[{e}], counts {counts:?}");
        }
        if e + 2 == n {
            assert_eq!(q.get(&[e]), (xe + xe) + (xe + xe), "q[{e}], counts {counts:?}");
        }
    }
}

#[allow(dead_code)]
fn main() {
    for size in [1, 3, 8] {
        for seed in 0..4 {
            for chaos in [None, Some(size as u64 + seed as u64)] {
                check(&Cpu::new(), size, seed, chaos);
            }
        }
    }
}
