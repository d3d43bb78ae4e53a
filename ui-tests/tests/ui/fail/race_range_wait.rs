use et_core::prelude::*;
// `sum[k]` reads 8 rows of `part` but its range wait covers only 7 of them
#[megakernel]
fn block_sums(
    x: &Tensor<f32, { [K * 8, 16] }>,
    part: &mut Tensor<f32, { [K * 8, 16] }>,
    block: &mut Tensor<f32, { [K * 8, 1] }>,
) {
    let parts = event!([K * 8]);
    tile!(double[p] in [K * 8] {
        add(x.tile([p, 0], [1, 16]), x.tile([p, 0], [1, 16]), part.tile([p, 0], [1, 16]));
        signal!(parts[p]);
    });
    tile!(sum[k] in [K] {
        wait!(parts[k * 8 .. k * 8 + 7]);
        row_sum(part.tile([k, 0], [8, 16]), block.tile([k, 0], [8, 1]));
    });
}

fn main() {}
