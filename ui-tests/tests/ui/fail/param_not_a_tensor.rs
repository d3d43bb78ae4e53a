use et_core::prelude::*;
#[megakernel]
fn k(a: &Vec<f32>, b: &Tensor<f32, { [R, 4] }>) {
    tile!(t[i] in [R] {});
}

fn main() {}
