use crate::dtype::Element;
use crate::tile::{TileMut, TileRef};

crate::tile_op! { cuda = r#"
template <int D>
__device__ void row_sum(et::Tile<float, 2> src, et::Tile<float, D> dst) {
    // one warp per row, lanes stride over the columns
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    const int rows = min(src.shape[0], dst.shape[0]);
    for (int r = warp; r < rows; r += warps) {
        float acc = 0.0f;
        for (int c = lane; c < src.shape[1]; c += 32) acc += src(r, c);
        acc = et::warp_sum(acc);
        if (lane == 0) dst.row(r) = acc;
    }
}
"#;
    contract {
        dst[0] == src[0] => "dst must have as many rows as src",
        numel(dst) == dst[0] => "dst's extents after the first must be 1",
    }
    /// `dst[r] = Σ_c src[r, c]`: sums each row of a rank-2 tile into position `r` of
    /// dimension 0 of `dst` (of any rank, other extents 1).
    pub fn row_sum<const D: usize>(src: TileRef<'_, f32, 2>, mut dst: TileMut<'_, f32, D>) {
        let [rows, cols] = src.shape();
        for r in 0..rows {
            let acc: f32 = (0..cols).map(|c| src.get([r, c])).sum();
            dst.set_row(r, acc);
        }
    }
}

crate::tile_op! { cuda = r#"
template <class O>
__device__ void sum_splits(et::Tile<float, 2> parts, et::Tile<O, 2> out) {
    const int rows = out.shape[0], cols = min(out.shape[1], parts.shape[1]), splits = parts.shape[0] / rows;
    for (int k = threadIdx.x; k < rows * cols; k += blockDim.x) {
        const int r = k / cols, c = k % cols;
        float acc = 0.0f;
        for (int s = 0; s < splits; ++s) acc += parts(s * rows + r, c);
        out(r, c) = et::from_float<O>(acc);
    }
}
"#;
    contract {
        parts[1] == out[1] => "parts and out must have the same columns",
        out[0] > 0 && parts[0] % out[0] == 0 => "parts must stack whole tiles of out: its rows a multiple of out's",
    }
    /// `out[r, c] = Σ_s parts[s * rows + r, c]` in f32, rounded once to `O`: the reduce
    /// step of split-K, where `parts` stacks the `S` partial tiles of `out` vertically
    /// (`S * rows` rows).
    pub fn sum_splits<O: Element>(parts: TileRef<'_, f32, 2>, mut out: TileMut<'_, O, 2>) {
        let ([stacked, cols], rows) = (parts.shape(), out.shape()[0]);
        for r in 0..rows {
            for c in 0..cols {
                let acc: f32 = (0..stacked / rows).map(|s| parts.get([s * rows + r, c])).sum();
                out.set([r, c], O::from_f32(acc));
            }
        }
    }
}
