//! The split-KV attention merge fused into the output projection that reads it:
//! `y = r + merge(o, ml) · Wᵀ` in one task, with no attention output stored in global
//! memory.
//!
//! In a decode step at small batches the attention of a KV head runs in pieces
//! ([`attention_rope_split`](super::attention_rope_split)), which a merge task per head
//! combines ([`attention_merge`](super::attention_merge)); the output projection then
//! waits for every merge. Merge and projection are two stages and two dependency hops
//! on the step's critical path for a few KB of data. Here each output-projection task
//! merges every head's pieces itself into its shared-memory arena (the whole attention
//! row of each sequence: it reads all of it anyway) and runs the GEMV family's core on
//! it. The values are those of `attention_merge` then
//! [`matvec_residual`](super::matvec_residual): the merged rows rounded to bf16 as that
//! merge stores them, then the same products. The pieces are re-read from L2 by every
//! task (`B · K · S` floats each), so the form suits few pieces and small batches.
//!
//! The pieces' layout is the split ops': piece `c` of KV head `k` of sequence `b` holds
//! the `G` query heads of that KV head in rows `((b · NKV + k) · S + c) · G + g`.

use super::gemv::{for_rows, matvec_cuda};
use super::norm_gemv::{fused_arena_bytes, norm_matvec_cuda};
use crate::dtype::{Element, bf16};
use crate::tile::{TileMut, TileRef};

/// The arena bytes of [`attention_merge_matvec_residual`] with the `[rows, k]` weight tile
/// `w` and the `[batch, rows]` output `y`: those of the fused norm GEMVs
/// ([`fused_arena_bytes`]), the merged rows in the place of the normalized ones.
pub const fn merge_arena_bytes(w: &[usize], y: &[usize]) -> usize {
    match (w, y) {
        (&[rows, k], &[batch, _]) => fused_arena_bytes(rows, k, batch, 1),
        _ => 0,
    }
}

crate::tile_op! { cuda = norm_matvec_cuda!(r#"
// Writes rows b0 .. b0 + bc of the merged attention output to `xs` (rows `xr` elements
// apart; rows at or past B get zeros): x[b, (k G + g) D + i] over the S pieces c of query
// head g of KV head k, rows ((b NKV + k) S + c) G + g of o and ml, as attention_merge
// computes it (pieces with sum 0 skipped, a head with none gets zeros), rounded to bf16.
// A thread takes four consecutive dimensions (a quad) of one head and folds eight
// (quad, piece) pairs a round, all their loads in flight together: at batch 1 with
// 512 threads and S <= 8 every quad's pieces arrive in one round trip. Ends with a CTA
// barrier: the rows are then visible to every warp.
template <class O, class M>
__device__ __forceinline__ void merge_stage(const O& o, const M& ml, int G, int S, int b0, int bc, int B, int K,
                                            et::bf16* xs, int xr) {
    const int D = o.shape[1], NH = K / D, row_quads = K / 4, Q = bc * row_quads;
    const bool vec = o.stride[1] == 1 && (o.stride[0] & 3) == 0 && (((unsigned long long)o.ptr) & 15) == 0;
    // quads per round, and the (quad, piece) pairs of a round: whole quads up to S = 8,
    // one quad over several rounds beyond
    const int qp = S >= 8 ? 1 : 8 / S, pairs = S >= 8 ? S : qp * S;
#pragma unroll 1
    for (int q0 = threadIdx.x * qp; q0 < Q; q0 += blockDim.x * qp) {
        float mx = __int_as_float(0xff800000), den = 0.0f, num[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 1
        for (int p0 = 0; p0 < pairs; p0 += 8) {
            float4 v[8];
            float m[8], l[8];
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const int p = p0 + j, q = q0 + p / S, c = p % S;
                const int b = q / row_quads, col = (q - b * row_quads) * 4, hq = col / D, i = col - hq * D;
                const bool live = p < pairs && q < Q && b0 + b < B;
                const long long r = ((long long)(b0 + b) * NH + (hq - hq % G)) * S + (long long)c * G + hq % G;
                m[j] = live ? ml(r, 0) : 0.0f;
                l[j] = live ? ml(r, 1) : 0.0f;
                if (!live) v[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                else if (vec) v[j] = *reinterpret_cast<const float4*>(o.ptr + r * o.stride[0] + i);
                else v[j] = make_float4(o(r, i), o(r, i + 1), o(r, i + 2), o(r, i + 3));
            }
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const int p = p0 + j, q = q0 + p / S, c = p % S;
                if (p >= pairs || q >= Q) break;
                if (l[j] > 0.0f) {
                    const float mn = fmaxf(mx, m[j]), keep = __expf(mx - mn), w = __expf(m[j] - mn);
                    num[0] = num[0] * keep + w * v[j].x;
                    num[1] = num[1] * keep + w * v[j].y;
                    num[2] = num[2] * keep + w * v[j].z;
                    num[3] = num[3] * keep + w * v[j].w;
                    den = den * keep + w * l[j];
                    mx = mn;
                }
                if (c == S - 1) {
                    // the quad's last piece: its four bf16 to the row, then the next quad
                    const int b = q / row_quads, col = (q - b * row_quads) * 4;
                    const float inv = den > 0.0f ? 1.0f / den : 0.0f;
                    *reinterpret_cast<uint2*>(xs + (long long)b * xr + col) =
                        make_uint2(pack2(num[0] * inv, num[1] * inv), pack2(num[2] * inv, num[3] * inv));
                    mx = __int_as_float(0xff800000);
                    den = 0.0f;
                    num[0] = num[1] = num[2] = num[3] = 0.0f;
                }
            }
        }
    }
    // the padding after each row, which the tensor-core path may read
    for (int e = threadIdx.x; e < bc * (xr - K); e += blockDim.x)
        xs[(long long)(e / (xr - K)) * xr + K + e % (xr - K)] = et::from_float<et::bf16>(0.0f);
    __syncthreads();
}

template <class W, class O, class M, class R, class Y>
__device__ void attention_merge_matvec_residual(W w, O o, M ml, long long groups, R r, Y y, unsigned char* smem) {
    typedef typename elem_of<decltype(y.ptr)>::type T;
    constexpr int SB = Y::template static_extent<0>(), SK = W::template static_extent<1>();
    constexpr int SC = SB >= 1 && SK >= 0 ? norm_chunk_rows(SB, SK) : -1;
    const int B = y.shape[0], N = w.shape[0], K = w.shape[1], D = o.shape[1], NH = K / D, G = (int)groups;
    // pieces per query head; a head count that does not divide the heads merges nothing
    const int S = G >= 1 && NH % G == 0 ? o.shape[0] / (B * NH) : 0;
    const et::bf16* ws[1] = {w.ptr};
    const long long s0[1] = {w.stride[0]}, s1[1] = {w.stride[1]};
    const int bc = SC >= 1 ? SC : norm_chunk_rows(B, K), xr = (K + 7) / 8 * 8 + 8;
    et::bf16* xs = fused_stage<1>(N, K, bc, smem);
#pragma unroll 1
    for (int b0 = 0; b0 < B; b0 += bc) {
        if (S > 0) {
            merge_stage(o, ml, G, S, b0, bc, B, K, xs, xr);
        } else {
            for (int e = threadIdx.x; e < bc * xr; e += blockDim.x) xs[e] = et::from_float<et::bf16>(0.0f);
            __syncthreads();
        }
        matvec_core<1, SC, true, matvec_large<1, W>()>(ws, s0, s1, xs, xr, 1, bc, N, K, smem,
                                                       [&](int b, int n, float a, float) {
                                                           if (b0 + b < B)
                                                               y(b0 + b, n) = et::from_float<T>(
                                                                   et::to_float(r(b0 + b, n)) + a);
                                                       });
        // the next chunk overwrites the rows and the partial sums
        if (b0 + bc < B) __syncthreads();
    }
}
"#);
    smem = |extents| merge_arena_bytes(w, y);
    contract {
        o[1] >= 8 && o[1] % 8 == 0 => "the head dimension (o's columns) must be a multiple of 8",
        w[1] >= o[1] && w[1] % o[1] == 0 => "w's columns (the reduced extent k) must be whole heads of o's columns",
        y[0] >= 1 && y[0] <= 64 => "the batch (y's rows) must be 1 to 64",
        o[0] % (y[0] * (w[1] / o[1])) == 0 => "o must hold S pieces of every query head of every sequence: [y's rows x heads x S, head dim]",
        ml[0] == o[0] && ml[1] == 2 => "ml must be [o's rows, 2] (max and sum per piece and query head)",
        y[1] == w[0] => "y must be the batch by w's rows",
        r[0] == y[0] && r[1] == y[1] => "the residual r must have y's extents",
    }
    /// `y = r + x · wᵀ` where `x` is the attention output that
    /// [`attention_merge`](super::attention_merge) makes of the split pieces `o` and `ml`
    /// ([`attention_rope_split`](super::attention_rope_split)'s outputs), rounded to bf16
    /// as that op stores it; the merged rows live in the task's shared-memory arena only.
    /// `w` is the `N x K` tile of the output projection (`K` the query heads times the head
    /// dimension `D`, `o`'s columns; never written during the launch), `r` and `y` are
    /// `B x N`. `o` (`f32`, unnormalised) and `ml` (max and sum) hold, for each of the `B`
    /// sequences, `K / D / groups` KV heads of `S` pieces of `groups` query heads each: row
    /// `((b · NKV + k) · S + c) · groups + g` is query head `k · groups + g`'s piece `c`.
    /// A `groups` that is not a divisor of the `K / D` query heads merges to zeros.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_merge_matvec_residual<Y: Element>(
        w: TileRef<'_, bf16, 2>,
        o: TileRef<'_, f32, 2>,
        ml: TileRef<'_, f32, 2>,
        groups: i64,
        r: TileRef<'_, Y, 2>,
        mut y: TileMut<'_, Y, 2>,
    ) {
        let xs = merged_rows(o, ml, groups, y.shape()[0], w.shape()[1]);
        for_rows(&[w], &xs, |b, n, acc| y.set([b, n], Y::from_f32(r.get([b, n]).to_f32() + acc[0])));
    }
}

/// The CPU half of the merge: the `batch` rows of `k` merged values (rounded to bf16, as
/// [`attention_merge`](super::attention_merge) stores them) of the pieces `o` and `ml`
/// with `groups` query heads per KV head; zeros where `groups` does not divide the heads.
fn merged_rows(o: TileRef<'_, f32, 2>, ml: TileRef<'_, f32, 2>, groups: i64, batch: usize, k: usize) -> Vec<Vec<f32>> {
    let d = o.shape()[1];
    let heads = k / d;
    let g = usize::try_from(groups).ok().filter(|&g| g >= 1 && heads.is_multiple_of(g));
    let Some(g) = g else { return vec![vec![0.0; k]; batch] };
    let s = o.shape()[0] / (batch * heads);
    (0..batch)
        .map(|b| {
            let mut row = vec![0f32; k];
            for hq in 0..heads {
                let at = |c: usize| (b * heads + hq - hq % g) * s + c * g + hq % g;
                let live: Vec<usize> = (0..s).map(at).filter(|&r| ml.get([r, 1]) > 0.0).collect();
                let mx = live.iter().map(|&r| ml.get([r, 0])).fold(f32::NEG_INFINITY, f32::max);
                let den: f32 = live.iter().map(|&r| (ml.get([r, 0]) - mx).exp() * ml.get([r, 1])).sum();
                for i in 0..d {
                    let num: f32 = live.iter().map(|&r| (ml.get([r, 0]) - mx).exp() * o.get([r, i])).sum();
                    row[hq * d + i] = bf16::from_f32(if den > 0.0 { num / den } else { 0.0 }).to_f32();
                }
            }
            row
        })
        .collect()
}
