use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [R] }>) {
    let done = event!([R]);
    tile!(p[row] in [R] {
        signal!(done[rwo]);
    });
}

fn main() {}
