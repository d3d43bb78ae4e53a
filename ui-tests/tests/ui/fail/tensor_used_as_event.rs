use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [R] }>) {
    tile!(p[i] in [R] {
        signal!(a[i]);
    });
}

fn main() {}
