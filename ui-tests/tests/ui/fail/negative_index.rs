use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [N] }>) {
    let e = event!([N]);
    tile!(p[i] in [N] {
        signal!(e[i]);
    });
    tile!(q[i] in [N] {
        wait!(e[i - 1]);
    });
}

fn main() {}
