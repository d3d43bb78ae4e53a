use et_core::prelude::*;
#[megakernel(threads = 100)]
fn k(a: &Tensor<f32, { [R] }>) {
    let e = event!([R]);
    tile!(p[i] in [R] {
        signal!(e[i]);
    });
}

fn main() {}
