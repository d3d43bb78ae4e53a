use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [R] }>) {
    let done = event!([R]);
    tile!(p[i] in [R] {
        signal!(dome[i]);
    });
}

fn main() {}
