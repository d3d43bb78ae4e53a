use et_core::prelude::*;
#[megakernel(dims(B <= 16))]
fn k(a: &Tensor<f32, { [R] }>) {
    let e = event!([B]);
    tile!(p[i] in [B] {
        signal!(e[i]);
    });
}

fn main() {}
