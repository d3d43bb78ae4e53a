use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [N * 4] }>) {
    let e = event!([N * 4]);
    tile!(p[i] in [N] {
        signal!(e[i * 4 .. i * 4 + 3]);
    });
    tile!(t[z] in [1] {
        wait!(e[..]);
    });
}

fn main() {}
