use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [R] }>) {
    let done = event!([R]);
    tile!(p[i] in [R] {
        signal!(done[0]);
    });
    tile!(t[i] in [R] {
        wait!(done[i]);
    });
}

fn main() {}
