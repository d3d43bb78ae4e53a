use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [R * 32, 128] }>) {
    let done = event!([R]);
    tile!(p[i] in [R] {
        signal!(done[i + 1]);
    });
}

fn main() {}
