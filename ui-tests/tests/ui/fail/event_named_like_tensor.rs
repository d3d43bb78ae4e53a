// An event named like a tensor parameter: `y.tile(..)` and `signal!(y[i])` would name
// different things.
use et_core::prelude::*;
#[megakernel]
fn k(x: &Tensor<f32, { [N * 8] }>, y: &mut Tensor<f32, { [N * 8] }>) {
    let y = event!([N]);
    tile!(p[i] in [N] {
        row_sum(x.tile([i], [8]), y.tile([i], [8]));
        signal!(y[i]);
    });
    tile!(q[i] in [N] {
        wait!(y[i]);
    });
}

fn main() {}
