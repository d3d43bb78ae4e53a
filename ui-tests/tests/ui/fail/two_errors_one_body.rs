// Two bad statements in one tile body: both are reported.
use et_core::prelude::*;

#[megakernel]
fn k(x: &Tensor<f32, { [N] }>, y: &mut Tensor<f32, { [N] }>) {
    tile!(p[i] in [N] {
        let a = 1;
        add(x.tile([i], [1]), x.tile([i], [1]), y.tile([i], [1]));
        let b = 2;
    });
}

fn main() {}
