use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<bf16, { [R * 32, 128] }>, c: &mut Tensor<f32, { [R * 32] }>) {
    tile!(t[i] in [R] {
        row_sum(a.tile([i, 0], [32, 128]), c.tile([i], [32]));
    });
}

fn main() {}
