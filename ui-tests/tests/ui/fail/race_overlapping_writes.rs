use et_core::prelude::*;
// two groups write overlapping tiles of `y` with nothing ordering them
#[megakernel]
fn k(x: &Tensor<f32, { [N * 16] }>, y: &mut Tensor<f32, { [N * 16] }>) {
    tile!(wide[i] in [N] {
        add(x.tile([i], [16]), x.tile([i], [16]), y.tile([i], [16]));
    });
    tile!(narrow[i] in [N * 2] {
        add(x.tile([i], [8]), x.tile([i], [8]), y.tile([i], [8]));
    });
}

fn main() {}
