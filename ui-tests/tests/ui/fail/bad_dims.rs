use et_core::prelude::*;
#[megakernel(dims(H = 0, B))]
fn k(a: &Tensor<f32, { [B, H] }>) {
    let e = event!([B]);
    tile!(p[i] in [B] {
        signal!(e[i]);
    });
}

fn main() {}
