use et_core::prelude::*;
// `partial` signals before the write it publishes
#[megakernel]
fn split_row_sum(
    a: &Tensor<f32, { [R * 32, 128] }>,
    part: &mut Tensor<f32, { [R * 32, 4] }>,
    c: &mut Tensor<f32, { [R * 32] }>,
) {
    let done = event!([R]);
    tile!(partial[i, j] in [R, 4] {
        signal!(done[i]);
        row_sum(a.tile([i, j], [32, 32]), part.tile([i, j], [32, 1]));
    });
    tile!(total[i] in [R] {
        wait!(done[i]);
        row_sum(part.tile([i, 0], [32, 4]), c.tile([i], [32]));
    });
}

fn main() {}
