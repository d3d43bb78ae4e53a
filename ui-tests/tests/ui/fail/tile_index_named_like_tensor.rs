// A tile index with the name of a tensor parameter: `x.tile(..)` and `x` in an index
// would name different things.
use et_core::prelude::*;

#[megakernel]
fn k(x: &Tensor<f32, { [N * 4] }>, y: &mut Tensor<f32, { [N * 4] }>) {
    tile!(p[x] in [N] {
        add(y.tile([x], [4]), y.tile([x], [4]), y.tile([x], [4]));
    });
}

fn main() {}
