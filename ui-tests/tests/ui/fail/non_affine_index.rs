use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [R, C] }>) {
    let e = event!([R * C]);
    tile!(p[i, j] in [R, C] {
        signal!(e[i * j]);
    });
}

fn main() {}
