use et_core::prelude::*;
#[megakernel(dims(B <= 16))]
fn k(x: &Tensor<f32, { [B, 8] }>) {
    let e = event!([8]);
    tile!(p[b] in [B] {
        signal!(e[b]);
    });
}

fn main() {}
