use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [R] }>) {
    let e = event!([R]);
    tile!(p[i] in [R] {
        signal!(e[i]);
    });
    tile!(q[i] in [R] {
        signal!(e[0]);
    });
    tile!(t[z] in [1] {
        wait!(e[..]);
    });
}

fn main() {}
