//! Range accesses: `e[k * 8 .. k * 8 + 8]` (a block of elements) and `e[..]` (all).
//! `part[p] = x[p] + x[p]`; `block[k]` sums its 8 parts after waiting on exactly them;
//! gather waits on every block, then copies the first one out.
use et_core::prelude::*;

#[megakernel]
pub fn block_sums(
    x: &Tensor<f32, { [K * 8, 16] }>,
    part: &mut Tensor<f32, { [K * 8, 16] }>,
    block: &mut Tensor<f32, { [K * 8, 1] }>,
    total: &mut Tensor<f32, { [8] }>,
) {
    let parts = event!([K * 8]);
    let blocks = event!([K]);
    tile!(double[p] in [K * 8] {
        add(x.tile([p, 0], [1, 16]), x.tile([p, 0], [1, 16]), part.tile([p, 0], [1, 16]));
        signal!(parts[p]);
    });
    tile!(sum[k] in [K] {
        wait!(parts[k * 8 .. k * 8 + 8]);
        row_sum(part.tile([k, 0], [8, 16]), block.tile([k, 0], [8, 1]));
        signal!(blocks[k]);
    });
    tile!(gather[z] in [1] {
        wait!(blocks[..]);
        row_sum(block.tile([0, 0], [8, 1]), total.tile([0], [8]));
    });
}

/// Runs on any backend and checks against a sequential reference.
pub fn check<B: Backend>(backend: &B, k: usize, chaos: Option<u64>) {
    let x = Tensor::<f32>::random(&[k * 8, 16], k as u64);
    let dx = backend.upload(&x).unwrap();
    let mut part = backend.upload(&Tensor::<f32>::poisoned(&[k * 8, 16])).unwrap();
    let mut dblock = backend.upload(&Tensor::<f32>::poisoned(&[k * 8, 1])).unwrap();
    let mut dtotal = backend.upload(&Tensor::<f32>::poisoned(&[8])).unwrap();
    let opts = LaunchOptions { chaos, ..Default::default() };
    block_sums::launch_with(backend, &opts, &dx, &mut part, &mut dblock, &mut dtotal).unwrap();
    let (block, total) = (backend.download(&dblock).unwrap(), backend.download(&dtotal).unwrap());
    for r in 0..k * 8 {
        let want: f32 = (0..16).map(|c| x.get(&[r, c]) + x.get(&[r, c])).sum();
        let close = |v: f32| (v - want).abs() <= 1e-5 * (1.0 + want.abs());
        assert!(close(block.get(&[r, 0])), "block row {r}: {} vs {want}", block.get(&[r, 0]));
        if r < 8 {
            assert!(close(total.get(&[r])), "total {r}");
        }
    }
}

#[allow(dead_code)]
fn main() {
    for k in [1, 3, 10] {
        for chaos in [None, Some(k as u64 + 1)] {
            check(&Cpu::new(), k, chaos);
        }
    }
}
