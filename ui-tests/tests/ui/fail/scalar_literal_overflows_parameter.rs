//! An integer literal scalar argument is checked against the op's parameter type at the
//! literal: 3000000000 does not fit an `i32` (rustc's `overflowing_literals`).
use et_core::prelude::*;

et_core::tile_op! { cuda = r#"
template <int R> __device__ void shifted(et::Tile<float, R> a, et::Tile<float, R> out, int by) {
    for (int k = threadIdx.x; k < out.numel(); k += blockDim.x) out.flat(k) = a.flat(k) + (float)by;
}"#;
    contract { same(a, out) => "same extents" }
    /// `out = a + by`.
    pub fn shifted<const R: usize>(a: TileRef<'_, f32, R>, mut out: TileMut<'_, f32, R>, by: i32) {
        et_core::tile::for_each_index(out.shape(), |i| out.set(i, a.get(i) + by as f32));
    }
}

#[megakernel]
pub fn shift(x: &Tensor<f32, { [N] }>, y: &mut Tensor<f32, { [N] }>) {
    tile!(p[i] in [N] {
        shifted(x.tile([i], [1]), y.tile([i], [1]), 3000000000);
    });
}

fn main() {}
