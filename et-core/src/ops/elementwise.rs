use crate::dtype::Element;
use crate::tile::{TileMut, TileRef, for_each_index};

crate::tile_op! { cuda = r#"
template <class T, int R>
__device__ void add(et::Tile<T, R> a, et::Tile<T, R> b, et::Tile<T, R> out) {
    const int n = min(out.numel(), min(a.numel(), b.numel()));
    for (int k = threadIdx.x; k < n; k += blockDim.x)
        out.flat(k) = et::from_float<T>(et::to_float(a.flat(k)) + et::to_float(b.flat(k)));
}
"#;
    contract { same(a, out) && same(b, out) => "a, b and out must have the same extents" }
    /// `out = a + b`, elementwise, computed in f32 and rounded once.
    pub fn add<T: Element, const R: usize>(a: TileRef<'_, T, R>, b: TileRef<'_, T, R>, mut out: TileMut<'_, T, R>) {
        for_each_index(out.shape(), |i| out.set(i, T::from_f32(a.get(i).to_f32() + b.get(i).to_f32())));
    }
}
