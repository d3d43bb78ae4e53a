use et_core::prelude::*;
// the symbolic call is checked at launch; the constant one still fails here
#[megakernel(dims(B <= 16))]
fn k(x: &Tensor<f32, { [B, 32] }>, y: &mut Tensor<f32, { [B, 32] }>, s: &mut Tensor<f32, { [16] }>) {
    tile!(t[i] in [1] {
        add(x.tile([0, 0], [B, 32]), x.tile([0, 0], [B, 32]), y.tile([0, 0], [B, 32]));
        row_sum(x.tile([0, 0], [1, 32]), s.tile([0], [16]));
    });
}

fn main() {}
