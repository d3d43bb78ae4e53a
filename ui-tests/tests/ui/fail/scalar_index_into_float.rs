//! A tile index passed to a float parameter: an integer scalar argument converts only to
//! an integer parameter, and rustc says so at the argument.
use et_core::prelude::*;

et_core::tile_op! { cuda = r#"
template <int R> __device__ void offset(et::Tile<float, R> a, et::Tile<float, R> out, float by) {
    for (int k = threadIdx.x; k < out.numel(); k += blockDim.x) out.flat(k) = a.flat(k) + by;
}"#;
    contract { same(a, out) => "same extents" }
    /// `out = a + by`.
    pub fn offset<const R: usize>(a: TileRef<'_, f32, R>, mut out: TileMut<'_, f32, R>, by: f32) {
        et_core::tile::for_each_index(out.shape(), |i| out.set(i, a.get(i) + by));
    }
}

#[megakernel]
pub fn shift(x: &Tensor<f32, { [N] }>, y: &mut Tensor<f32, { [N] }>) {
    tile!(p[i] in [N] {
        offset(x.tile([i], [1]), y.tile([i], [1]), i);
    });
}

fn main() {}
