//! Point accesses, static schedule: the design brief's split-K row sum.
use et_core::prelude::*;

#[megakernel]
pub fn split_row_sum(a: &Tensor<f32, { [R * 32, 128] }>, part: &mut Tensor<f32, { [R * 32, 4] }>, c: &mut Tensor<f32, { [R * 32] }>) {
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

pub fn check(backend: &impl Backend<Tensor<f32> = Tensor<f32>>, rows: usize, chaos: Option<u64>) {
    let a = Tensor::<f32>::random(&[rows * 32, 128], rows as u64);
    let mut part = Tensor::poisoned(&[rows * 32, 4]);
    let mut c = Tensor::poisoned(&[rows * 32]);
    let opts = LaunchOptions { chaos, ..Default::default() };
    split_row_sum::launch_with(backend, &opts, &a, &mut part, &mut c).unwrap();
    for r in 0..rows * 32 {
        let want: f32 = (0..4).map(|j| (0..32).map(|k| a.get(&[r, j * 32 + k])).sum::<f32>()).sum();
        assert_eq!(c.get(&[r]), want, "row {r}");
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
