use et_core::prelude::*;
// `diff[i]` also reads row `i + 1`, written by `square[i + 1]`, which it does not wait
// for: a race that needs two rows (N >= 2) to show
#[megakernel]
fn k(x: &Tensor<f32, { [N, 16] }>, y: &mut Tensor<f32, { [N, 16] }>, d: &mut Tensor<f32, { [N, 16] }>) {
    let done = event!([N]);
    tile!(square[i] in [N] {
        add(x.tile([i, 0], [1, 16]), x.tile([i, 0], [1, 16]), y.tile([i, 0], [1, 16]));
        signal!(done[i]);
    });
    tile!(diff[i] in [N - 1] {
        wait!(done[i]);
        add(y.tile([i, 0], [1, 16]), y.tile([i + 1, 0], [1, 16]), d.tile([i, 0], [1, 16]));
    });
}

fn main() {}
