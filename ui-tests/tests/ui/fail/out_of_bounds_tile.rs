use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [R * 32, 128] }>, c: &mut Tensor<f32, { [R * 32] }>) {
    tile!(t[i, j] in [R, 4] {
        row_sum(a.tile([i, j + 1], [32, 32]), c.tile([i], [32]));
    });
}

fn main() {}
