use et_core::prelude::*;
// `refill` overwrites the scratch tile `s` without waiting for `consume` to read it
#[megakernel]
fn k(x: &Tensor<f32, { [16] }>, s: &mut Tensor<f32, { [16] }>, y: &mut Tensor<f32, { [16] }>) {
    let filled = event!([1]);
    tile!(fill[z] in [1] {
        add(x.tile([0], [16]), x.tile([0], [16]), s.tile([0], [16]));
        signal!(filled[0]);
    });
    tile!(consume[z] in [1] {
        wait!(filled[0]);
        add(s.tile([0], [16]), x.tile([0], [16]), y.tile([0], [16]));
    });
    tile!(refill[z] in [1] {
        wait!(filled[0]);
        add(x.tile([0], [16]), x.tile([0], [16]), s.tile([0], [16]));
    });
}

fn main() {}
