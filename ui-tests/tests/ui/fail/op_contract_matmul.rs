use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [R * 32, 16] }>, b: &Tensor<f32, { [32, 32] }>, c: &mut Tensor<f32, { [R * 32, 32] }>) {
    tile!(t[i] in [R] {
        matmul(a.tile([i, 0], [32, 16]), b.tile([0, 0], [32, 32]), c.tile([i, 0], [32, 32]));
    });
}

fn main() {}
