use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [R * 32, 128] }>) {
    let done = event!([R], count = 3);
    tile!(p[i, j] in [R, 4] {
        signal!(done[i]);
    });
    tile!(t[i] in [R] {
        wait!(done[i]);
    });
}

fn main() {}
