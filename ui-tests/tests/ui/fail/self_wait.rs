use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [N] }>) {
    let e = event!([N]);
    tile!(step[i] in [N] {
        wait!(e[i]);
        signal!(e[i]);
    });
}

fn main() {}
