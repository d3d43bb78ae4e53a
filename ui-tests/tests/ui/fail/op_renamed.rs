use et_core::ops::row_sum as sum_rows;
use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [R * 32, 32] }>, c: &mut Tensor<f32, { [R * 32] }>) {
    tile!(t[i] in [R] {
        sum_rows(a.tile([i, 0], [32, 32]), c.tile([i], [32]));
    });
}

fn main() {}
