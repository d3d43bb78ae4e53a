use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [R] }>) {
    let e = event!([R]);
    wait!(e[0]);
    tile!(p[i] in [R] {
        signal!(e[i]);
    });
}

fn main() {}
