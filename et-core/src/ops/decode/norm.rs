//! RMSNorm, alone and fused with the residual add that precedes it in a transformer block.
//!
//! The CTA's warps share the tile's rows (`row_groups`: a warp a row from 16 rows on, the
//! whole CTA on a single row), so that every row's loads are in flight together. Each
//! thread takes 8 consecutive elements per piece (a 16-byte load where the row allows) and
//! loads `ET_NORM_PIECES` pieces before it uses one; the sum of squares is a reduction over
//! the row's warps, and the second pass re-reads the row from L1/L2 with the same
//! thread-to-element map. A tile of one row (by its type, or at run time) keeps one piece
//! a thread, the loop of the Llama step's per-row norms. (The fused norm GEMVs,
//! [`super::rms_norm_matvec`], normalize the rows of a batch side by side in their own
//! prologue.)

use super::decode_cuda;
use crate::dtype::bf16;
use crate::tile::{TileMut, TileRef};

/// The rows of `rms_norm(x, w, eps)` as the CPU reference computes them, each value a bf16
/// number held in an f32 (what a bf16 store of the row keeps): the one definition that
/// [`rms_norm`] and the fused norm GEMVs ([`super::rms_norm_matvec`]) share.
pub(super) fn normalized_rows(x: TileRef<'_, bf16, 2>, w: TileRef<'_, bf16, 1>, eps: f32) -> Vec<Vec<f32>> {
    let [b, d] = x.shape();
    (0..b)
        .map(|bi| {
            let row: Vec<f32> = (0..d).map(|k| x.get([bi, k]).to_f32()).collect();
            let inv = 1.0 / (row.iter().map(|v| v * v).sum::<f32>() / d as f32 + eps).sqrt();
            row.iter().enumerate().map(|(k, v)| bf16::from_f32(v * inv * w.get([k]).to_f32()).to_f32()).collect()
        })
        .collect()
}

crate::tile_op! { cuda = decode_cuda!(r#"
// The rows of `rms_norm` with P pieces in flight a thread (`row_groups` decides which
// warps take which row; `red` as `group_sum` needs it).
template <int P, class X, class W, class Y>
__device__ __forceinline__ void rms_norm_rows(const X& x, const W& w, float eps, const Y& y, bool vec, int per,
                                              int rows, float* red) {
    const int B = x.shape[0], D = x.shape[1];
    const int warp = threadIdx.x >> 5, group = warp / per, step = per * 256;
    const int first = ((warp - group * per) * 32 + (threadIdx.x & 31)) * 8;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    for (int b0 = 0; b0 < B; b0 += rows) {
        const int b = b0 + group;
        const bool mine = group < rows && b < B;
        const et::bf16* row = x.ptr + (long long)b * x.stride[0];
        et::bf16* out = y.ptr + (long long)b * y.stride[0];
        float ss = 0.0f;
        for (int k0 = first; mine && k0 < D; k0 += P * step) {
            uint4 v[P];
#pragma unroll
            for (int u = 0; u < P; ++u)
                v[u] = k0 + u * step < D ? load8<false>(row, k0 + u * step, D, x.stride[1], vec) : zero;
#pragma unroll
            for (int u = 0; u < P; ++u) {
                float f[8];
                unpack8(v[u], f);
#pragma unroll
                for (int i = 0; i < 8; ++i) ss += f[i] * f[i];
            }
        }
        const float inv = rsqrtf(group_sum(ss, red, per) / (float)D + eps);
        if (mine) norm_scale_row<P>(row, x.stride[1], w, inv, out, y.stride[1], first, step, D, vec);
    }
}

template <class X, class W, class Y>
__device__ void rms_norm(X x, W w, float eps, Y y) {
    __shared__ float red[32];
    const bool vec = vec_rows(x.ptr, x.stride[0], x.stride[1]) && vec_rows(w.ptr, 0, w.stride[0]) &&
                     vec_rows(y.ptr, y.stride[0], y.stride[1]);
    int per, rows;
    row_groups(x.shape[0], per, rows);
    // the whole CTA on one row (the Llama step's per-row norms) needs one piece in flight a
    // thread, and runs the least code: four pieces in the fused norm GEMVs' prologue made
    // the 1b step 9% slower at batch 1 with the same loads (RESULTS run 41). A tile of one
    // row by its type compiles only this path.
    if (X::template static_extent<0>() == 1 || rows == 1) rms_norm_rows<1>(x, w, eps, y, vec, per, rows, red);
    else rms_norm_rows<ET_NORM_PIECES>(x, w, eps, y, vec, per, rows, red);
}
"#);
    contract {
        w[0] == x[1] => "the weight w must have one element per column of x",
        y[0] == x[0] && y[1] == x[1] => "y must have x's extents",
    }
    /// `y[b, :] = x[b, :] / sqrt(mean(x[b, :]²) + eps) · w`, in f32, rounded once: `x` and
    /// `y` are `B x D`, `w` has `D` elements (a weight: never written during the launch).
    pub fn rms_norm(x: TileRef<'_, bf16, 2>, w: TileRef<'_, bf16, 1>, eps: f32, mut y: TileMut<'_, bf16, 2>) {
        for (bi, row) in normalized_rows(x, w, eps).iter().enumerate() {
            for (k, v) in row.iter().enumerate() {
                y.set([bi, k], bf16::from_f32(*v));
            }
        }
    }
}

crate::tile_op! { cuda = decode_cuda!(r#"
// The rows of `rms_norm_residual` with P pieces in flight a thread (as `rms_norm_rows`).
template <int P, class H, class R, class W, class Y>
__device__ __forceinline__ void rms_norm_residual_rows(const H& h, const R& r, const W& w, float eps, const Y& y,
                                                       bool vec, int per, int rows, float* red) {
    const int B = h.shape[0], D = h.shape[1];
    const int warp = threadIdx.x >> 5, group = warp / per, step = per * 256;
    const int first = ((warp - group * per) * 32 + (threadIdx.x & 31)) * 8;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    for (int b0 = 0; b0 < B; b0 += rows) {
        const int b = b0 + group;
        const bool mine = group < rows && b < B;
        et::bf16* hrow = h.ptr + (long long)b * h.stride[0];
        const et::bf16* rrow = r.ptr + (long long)b * r.stride[0];
        et::bf16* out = y.ptr + (long long)b * y.stride[0];
        float ss = 0.0f;
        for (int k0 = first; mine && k0 < D; k0 += P * step) {
            uint4 v[P], q[P];
#pragma unroll
            for (int u = 0; u < P; ++u) {
                const int k = k0 + u * step;
                v[u] = k < D ? load8<false>(hrow, k, D, h.stride[1], vec) : zero;
                q[u] = k < D ? load8<false>(rrow, k, D, r.stride[1], vec) : zero;
            }
#pragma unroll
            for (int u = 0; u < P; ++u) {
                const int k = k0 + u * step;
                if (k >= D) break;
                float f[8], g[8];
                unpack8(v[u], f);
                unpack8(q[u], g);
                // the sum is stored in bf16 and the norm is taken of what was stored
#pragma unroll
                for (int i = 0; i < 8; ++i) f[i] = et::to_float(et::from_float<et::bf16>(f[i] + g[i]));
#pragma unroll
                for (int i = 0; i < 8; ++i) ss += f[i] * f[i];
                store8(hrow, k, D, h.stride[1], vec, pack8(f));
            }
        }
        // the second pass reads back only what this thread wrote in the first
        const float inv = rsqrtf(group_sum(ss, red, per) / (float)D + eps);
        if (mine) norm_scale_row<P>(hrow, h.stride[1], w, inv, out, y.stride[1], first, step, D, vec);
    }
}

template <class H, class R, class W, class Y>
__device__ void rms_norm_residual(H h, R r, W w, float eps, Y y) {
    __shared__ float red[32];
    const bool vec = vec_rows(h.ptr, h.stride[0], h.stride[1]) && vec_rows(r.ptr, r.stride[0], r.stride[1]) &&
                     vec_rows(w.ptr, 0, w.stride[0]) && vec_rows(y.ptr, y.stride[0], y.stride[1]);
    int per, rows;
    row_groups(h.shape[0], per, rows);
    // one row at a time with the whole CTA: one piece in flight a thread (as `rms_norm`)
    if (H::template static_extent<0>() == 1 || rows == 1) rms_norm_residual_rows<1>(h, r, w, eps, y, vec, per, rows, red);
    else rms_norm_residual_rows<ET_NORM_PIECES>(h, r, w, eps, y, vec, per, rows, red);
}
"#);
    contract {
        r[0] == h[0] && r[1] == h[1] => "the residual r must have h's extents",
        w[0] == h[1] => "the weight w must have one element per column of h",
        y[0] == h[0] && y[1] == h[1] => "y must have h's extents",
    }
    /// `h = h + r` (stored in bf16), then `y = rms_norm(h)`: the residual stream update
    /// and the next norm of a transformer block in one pass. `h`, `r` and `y` are `B x D`,
    /// `w` has `D` elements.
    pub fn rms_norm_residual(
        mut h: TileMut<'_, bf16, 2>,
        r: TileRef<'_, bf16, 2>,
        w: TileRef<'_, bf16, 1>,
        eps: f32,
        mut y: TileMut<'_, bf16, 2>,
    ) {
        let [b, d] = h.shape();
        for bi in 0..b {
            let row: Vec<f32> =
                (0..d).map(|k| bf16::from_f32(h.get([bi, k]).to_f32() + r.get([bi, k]).to_f32()).to_f32()).collect();
            store_residual_and_norm(&row, bi, w, eps, &mut h, &mut y);
        }
    }
}

crate::tile_op! { cuda = decode_cuda!(r#"
// `acc[i] += row[k + i]` for the eight f32 of a split's row from `k` (those inside the
// row): two 16-byte loads where `vec` and all eight are inside.
__device__ __forceinline__ void add8_f32(const float* row, int k, int n, long long stride, bool vec, float (&acc)[8]) {
    if (vec && k + 8 <= n) {
        const float4 a = *reinterpret_cast<const float4*>(row + k), c = *reinterpret_cast<const float4*>(row + k + 4);
        acc[0] += a.x; acc[1] += a.y; acc[2] += a.z; acc[3] += a.w;
        acc[4] += c.x; acc[5] += c.y; acc[6] += c.z; acc[7] += c.w;
        return;
    }
#pragma unroll 1
    for (int i = 0; i < 8 && k + i < n; ++i) acc[i] += row[(long long)(k + i) * stride];
}
// Out of line: a megakernel calls it from three groups (the norms after the output and
// down projections, and the final one), whose three inlined copies made NVVM stop inlining
// the task dispatch of the batch-64 Llama megakernels (ptxas: 1.7 KB of spill stores in
// an outlined dispatch); one shared copy keeps it inlined. A norm task reads 32–64 KB, so
// the call's cost does not show.
template <class P, class R, class W, class H, class Y>
__device__ __noinline__ void rms_norm_split_residual(P part, R r, W w, float eps, H h, Y y) {
    __shared__ float red[32];
    const int S = part.shape[0], B = h.shape[0], D = h.shape[1];
    const bool vec = vec_rows(r.ptr, r.stride[0], r.stride[1]) && vec_rows(w.ptr, 0, w.stride[0]) &&
                     vec_rows(h.ptr, h.stride[0], h.stride[1]) && vec_rows(y.ptr, y.stride[0], y.stride[1]);
    const bool vecp = part.stride[2] == 1 && ((part.stride[0] | part.stride[1]) & 3) == 0 &&
                      (((unsigned long long)part.ptr) & 15) == 0;
    for (int b = 0; b < B; ++b) {
        et::bf16* hrow = h.ptr + b * h.stride[0];
        float ss = 0.0f;
        for (int k = threadIdx.x * 8; k < D; k += blockDim.x * 8) {
            float f[8], acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
            // the splits in split order, as `reduce_split_residual` sums them
            for (int s = 0; s < S; ++s)
                add8_f32(part.ptr + s * part.stride[0] + b * part.stride[1], k, D, part.stride[2], vecp, acc);
            unpack8(load8<false>(r.ptr + b * r.stride[0], k, D, r.stride[1], vec), f);
#pragma unroll
            for (int i = 0; i < 8; ++i) f[i] = et::to_float(et::from_float<et::bf16>(f[i] + acc[i]));
#pragma unroll
            for (int i = 0; i < 8; ++i) ss += f[i] * f[i];
            store8(hrow, k, D, h.stride[1], vec, pack8(f));
        }
        // the second pass reads back only what this thread wrote in the first
        const float inv = rsqrtf(block_sum(ss, red) / (float)D + eps);
        for (int k = threadIdx.x * 8; k < D; k += blockDim.x * 8) {
            float f[8], g[8];
            unpack8(load8<false>(hrow, k, D, h.stride[1], vec), f);
            unpack8(load8<true>(w.ptr, k, D, w.stride[0], vec), g);
#pragma unroll
            for (int i = 0; i < 8; ++i) f[i] = f[i] * inv * g[i];
            store8(y.ptr + b * y.stride[0], k, D, y.stride[1], vec, pack8(f));
        }
    }
}
"#);
    contract {
        part[1] == h[0] && part[2] == h[1] => "part must be S splits of h's extents: [S, h's rows, h's columns]",
        part[0] >= 1 => "part must hold at least one split",
        r[0] == h[0] && r[1] == h[1] => "the residual r must have h's extents",
        w[0] == h[1] => "the weight w must have one element per column of h",
        y[0] == h[0] && y[1] == h[1] => "y must have h's extents",
    }
    /// `h = r + Σ_s part[s]` (the splits summed in f32 in split order, then the residual
    /// added, stored in bf16), then `y = rms_norm(h)`: the reduce of a split-K projection
    /// ([`super::matvec_split`]) with its residual add, fused into the norm that reads its
    /// result. `part` is `S x B x D` (f32), `r`, `h` and `y` are `B x D`, `w` has `D`
    /// elements. `h` holds the same values as [`super::reduce_split_residual`] writes.
    pub fn rms_norm_split_residual(
        part: TileRef<'_, f32, 3>,
        r: TileRef<'_, bf16, 2>,
        w: TileRef<'_, bf16, 1>,
        eps: f32,
        mut h: TileMut<'_, bf16, 2>,
        mut y: TileMut<'_, bf16, 2>,
    ) {
        let [s, b, d] = part.shape();
        for bi in 0..b {
            let row: Vec<f32> = (0..d)
                .map(|k| {
                    let acc: f32 = (0..s).map(|si| part.get([si, bi, k])).sum();
                    bf16::from_f32(r.get([bi, k]).to_f32() + acc).to_f32()
                })
                .collect();
            store_residual_and_norm(&row, bi, w, eps, &mut h, &mut y);
        }
    }
}

/// Row `bi` of a residual form's outputs: `h` the row as stored (bf16 values held in f32),
/// `y` its RMSNorm with weight `w`: the CPU half that [`rms_norm_residual`] and
/// [`rms_norm_split_residual`] share.
fn store_residual_and_norm(
    row: &[f32],
    bi: usize,
    w: TileRef<'_, bf16, 1>,
    eps: f32,
    h: &mut TileMut<'_, bf16, 2>,
    y: &mut TileMut<'_, bf16, 2>,
) {
    let inv = 1.0 / (row.iter().map(|v| v * v).sum::<f32>() / row.len() as f32 + eps).sqrt();
    for (k, v) in row.iter().enumerate() {
        h.set([bi, k], bf16::from_f32(*v));
        y.set([bi, k], bf16::from_f32(v * inv * w.get([k]).to_f32()));
    }
}
