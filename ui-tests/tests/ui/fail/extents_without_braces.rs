use et_core::prelude::*;
#[megakernel]
fn k(b: &Tensor<f32, R>) {
    tile!(t[i] in [R] {});
}

fn main() {}
