use et_core::prelude::*;
#[megakernel]
fn k(a: &Tensor<f32, { [R * 32, 128] }>, c: &mut Tensor<f32, { [R * 32] }>) {
    let done = event!([R]);
    tile!(p[i, j] in [R, 4] {
        signal!(done[i, j]);
    });
    tile!(t[i] in [R] {
        wait!(done[i]);
        row_sum(a.tile([i, 0], [32, 128]), c.tile([i], [32]));
    });
}

fn main() {}
