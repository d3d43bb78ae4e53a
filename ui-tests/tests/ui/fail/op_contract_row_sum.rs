use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [R * 32, 32] }>, c: &mut Tensor<f32, { [R * 16] }>) {
    tile!(t[i] in [R] {
        row_sum(a.tile([i, 0], [32, 32]), c.tile([i], [16]));
    });
}

fn main() {}
