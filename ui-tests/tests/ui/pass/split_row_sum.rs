//! Point accesses, static schedule: the design brief's split-K row sum.
use et_core::prelude::*;

#[megakernel]
pub fn split_row_sum(
    a: &Tensor<f32, { [R * 32, 128] }>,
    part: &mut Tensor<f32, { [R * 32, 4] }>,
    c: &mut Tensor<f32, { [R * 32] }>,
) {
    let done = event!([R]);
    tile!(partial[i, j] in [R, 4] {
        row_sum(a.tile([i, j], [32, 32]), part.tile([i, j], [32, 1]));
        signal!(done[i]);
    });
    tile!(total[i] in [R] {
        wait!(done[i]);
        row_sum(part.tile([i, 0], [32, 4]), c.tile([i], [32]));
    });
}

/// Runs on any backend and checks against a sequential reference.
pub fn check<B: Backend>(backend: &B, rows: usize, chaos: Option<u64>) {
    let a = Tensor::<f32>::random(&[rows * 32, 128], rows as u64);
    let da = backend.upload(&a).unwrap();
    let mut part = backend.upload(&Tensor::<f32>::poisoned(&[rows * 32, 4])).unwrap();
    let mut dc = backend.upload(&Tensor::<f32>::poisoned(&[rows * 32])).unwrap();
    let opts = LaunchOptions { chaos, ..Default::default() };
    split_row_sum::launch_with(backend, &opts, &da, &mut part, &mut dc).unwrap();
    let c = backend.download(&dc).unwrap();
    for r in 0..rows * 32 {
        let want: f32 = (0..4).map(|j| (0..32).map(|k| a.get(&[r, j * 32 + k])).sum::<f32>()).sum();
        assert!((c.get(&[r]) - want).abs() <= 1e-4 * (1.0 + want.abs()), "row {r}: {} vs {want}", c.get(&[r]));
    }
}

#[allow(dead_code)]
fn main() {
    for rows in [1, 2, 7] {
        for chaos in [None, Some(rows as u64), Some(99)] {
            check(&Cpu::new(), rows, chaos);
        }
    }
}
