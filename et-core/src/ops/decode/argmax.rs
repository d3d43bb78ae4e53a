//! Greedy sampling over a large vocabulary as a split reduction: [`argmax_partial`] per
//! chunk of the logits (many tasks stream the vocabulary at once), [`argmax_merge`] per
//! batch once every chunk is done. Ties go to the smallest index, as `torch.argmax`;
//! NaN logits are never chosen.

use super::decode_cuda;
use crate::dtype::Element;
use crate::tile::{TileMut, TileRef};

crate::tile_op! { cuda = decode_cuda!(r#"
// (value, index) of the larger, the smaller index on ties
__device__ __forceinline__ void better(float& v, int& i, float ov, int oi) {
    if (ov > v || (ov == v && oi < i)) { v = ov; i = oi; }
}
// A warp per row, its lanes over the row's columns, then a shuffle reduction: no CTA
// barrier, and a warp's rows are in flight together (a CTA-wide reduction per row, two
// barriers a row, took a third of an LM-head task at batch 64: RESULTS run 20).
template <class X, class BV, class BI>
__device__ void argmax_partial(X x, long long start, BV best, BI index) {
    const int B = x.shape[0], C = x.shape[1], lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int b = warp; b < B; b += warps) {
        float v = __int_as_float(0xff800000);
        int i = 0x7fffffff;
#pragma unroll 8
        for (int c = lane; c < C; c += 32) better(v, i, et::to_float(x(b, c)), c);
        for (int off = 16; off > 0; off >>= 1)
            better(v, i, __shfl_xor_sync(0xffffffffu, v, off), __shfl_xor_sync(0xffffffffu, i, off));
        if (lane == 0) {
            best(b, 0) = v;
            index(b, 0) = i == 0x7fffffff ? -1 : (int)(start + i);
        }
    }
}
"#);
    contract {
        best[0] == x[0] && best[1] == 1 => "best must be [x's rows, 1]",
        index[0] == x[0] && index[1] == 1 => "index must be [x's rows, 1]",
    }
    /// For each row `b` of the chunk `x` (`B x C` logits whose first column is vocabulary
    /// entry `start`): `best[b, 0]` = the largest logit and `index[b, 0]` = its vocabulary
    /// index (`start + c`; -1 and `-inf` when every logit is NaN).
    pub fn argmax_partial<T: Element>(
        x: TileRef<'_, T, 2>,
        start: i64,
        mut best: TileMut<'_, f32, 2>,
        mut index: TileMut<'_, i32, 2>,
    ) {
        let [b, c] = x.shape();
        for bi in 0..b {
            let (mut v, mut i) = (f32::NEG_INFINITY, None);
            for ci in 0..c {
                let x = x.get([bi, ci]).to_f32();
                if x > v || (x == v && i.is_none()) {
                    (v, i) = (x, Some(ci));
                }
            }
            best.set([bi, 0], v);
            index.set([bi, 0], i.map_or(-1, |i| (start + i as i64) as i32));
        }
    }
}

crate::tile_op! { cuda = decode_cuda!(r#"
// the larger of two (value, index) pairs where index -1 marks "no number", the smaller
// index on ties
__device__ __forceinline__ void better_of(float& v, int& i, float ov, int oi) {
    if (oi >= 0 && (i < 0 || ov > v || (ov == v && oi < i))) { v = ov; i = oi; }
}
// A warp per row, its lanes over the row's chunks, then a shuffle reduction (the merge
// ends the decode step, on its critical path). Where the chunk count is static (up to
// 1024), a lane loads all of its chunks of the row before comparing them: one memory
// round trip a row, where four loads at a time took 35 us for 64 rows of 501 chunks
// (RESULTS run 21).
template <class BV, class BI, class Y>
__device__ void argmax_merge(BV best, BI index, Y out) {
    constexpr int SS = BV::template static_extent<1>();
    const int B = best.shape[0], S = best.shape[1];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int b = warp; b < B; b += warps) {
        float v = __int_as_float(0xff800000);
        int i = -1;
        if constexpr (SS > 0 && SS <= 1024) {
            constexpr int N = (SS + 31) / 32;
            float vs[N];
            int is[N];
#pragma unroll
            for (int u = 0; u < N; ++u) {
                const int s = lane + 32 * u;
                vs[u] = s < SS ? best(b, s) : __int_as_float(0xff800000);
                is[u] = s < SS ? index(b, s) : -1;
            }
#pragma unroll
            for (int u = 0; u < N; ++u) better_of(v, i, vs[u], is[u]);
        } else {
#pragma unroll 4
            for (int s = lane; s < S; s += 32) better_of(v, i, best(b, s), index(b, s));
        }
        for (int off = 16; off > 0; off >>= 1)
            better_of(v, i, __shfl_xor_sync(0xffffffffu, v, off), __shfl_xor_sync(0xffffffffu, i, off));
        if (lane == 0) out(b) = i;
    }
}
"#);
    contract {
        index[0] == best[0] && index[1] == best[1] => "index must have best's extents",
        out[0] == best[0] => "out must have one element per row of best",
    }
    /// `out[b]` = the index of the largest of the `S` chunk maxima `best[b, s]` (index
    /// `index[b, s]`), the smallest index on ties; -1 when no chunk had a number.
    pub fn argmax_merge(best: TileRef<'_, f32, 2>, index: TileRef<'_, i32, 2>, mut out: TileMut<'_, i32, 1>) {
        let [b, s] = best.shape();
        for bi in 0..b {
            let (mut v, mut i) = (f32::NEG_INFINITY, -1);
            for si in 0..s {
                let (ov, oi) = (best.get([bi, si]), index.get([bi, si]));
                if oi >= 0 && (i < 0 || ov > v || (ov == v && oi < i)) {
                    (v, i) = (ov, oi);
                }
            }
            out.set([bi], i);
        }
    }
}
