//! Mixture-of-experts routing ops: the router's top-k ([`router_topk`]), grouping the
//! tokens by expert ([`moe_group`]), gathering an expert's rows ([`moe_gather`]) and the
//! weighted combine of the experts' outputs ([`moe_combine`]). The expert projections
//! themselves are the GEMV family ([`matvec_silu`](super::matvec_silu),
//! [`matvec`](super::matvec)).
//!
//! The layout they share is the *capacity layout*: expert `e` owns `C` row slots (`C` at
//! least the token count, so no expert can overflow), `tokens[e, ..]` lists the ids of the
//! tokens routed to it in increasing order followed by `-1` padding, `counts[e]` how many
//! there are, and row `e · C + p` of the gathered activations and of the expert outputs
//! belongs to the token `tokens[e, p]`. Every write box is static; which boxes hold data
//! is decided by the router at run time.
//!
//! Routing order: a larger logit first, the lower expert index on ties; NaN logits are
//! never chosen. The top-k weights are the softmax over all experts renormalised over the
//! chosen `k`, which is `exp(l_k - l_max) / Σ_j exp(l_j - l_max)` over the chosen ones
//! (the full softmax's denominator cancels), computed in f32 in pick order.

use super::decode::decode_cuda;
use crate::dtype::bf16;
use crate::tile::{TileMut, TileRef};

/// Whether `(av, ai)` comes before `(bv, bi)` in the routing order.
fn before(av: f32, ai: i64, bv: f32, bi: i64) -> bool {
    av > bv || (av == bv && ai < bi)
}

crate::tile_op! { cuda = decode_cuda!(r#"
__device__ __forceinline__ bool topk_before(float av, int ai, float bv, int bi) {
    return av > bv || (av == bv && ai < bi);
}
// A warp per token: K rounds, each picking the first expert in routing order after the
// previous pick (so nothing but the previous pick is kept), then the weights.
template <class L, class I, class W>
__device__ void router_topk(L logits, I idx, W w) {
    const int B = logits.shape[0], E = logits.shape[1], K = idx.shape[1];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int b = warp; b < B; b += warps) {
        float pv = __int_as_float(0x7f800000), top = 0.0f, sum = 0.0f;
        int pi = -1;
        for (int k = 0; k < K; ++k) {
            float v = __int_as_float(0xff800000);
            int i = 0x7fffffff;
            for (int e = lane; e < E; e += 32) {
                const float x = logits(b, e);
                if (topk_before(pv, pi, x, e) && topk_before(x, e, v, i)) { v = x; i = e; }
            }
            for (int off = 16; off > 0; off >>= 1) {
                const float ov = __shfl_xor_sync(0xffffffffu, v, off);
                const int oi = __shfl_xor_sync(0xffffffffu, i, off);
                if (topk_before(ov, oi, v, i)) { v = ov; i = oi; }
            }
            const bool found = i != 0x7fffffff;
            if (k == 0) top = v;
            const float p = found ? expf(v - top) : 0.0f;
            sum += p;
            if (lane == 0) { idx(b, k) = found ? i : -1; w(b, k) = p; }
            if (found) { pv = v; pi = i; }
        }
        __syncwarp();
        if (lane == 0)
            for (int k = 0; k < K; ++k) w(b, k) = sum > 0.0f ? w(b, k) / sum : 0.0f;
        __syncwarp();
    }
}
"#);
    contract {
        idx[0] == logits[0] && idx[1] >= 1 => "idx must be [logits' rows, K] with K >= 1",
        same(idx, w) => "w must have idx's extents",
        idx[1] <= logits[1] => "K must be at most the number of experts (logits' columns)",
    }
    /// For each token `b` (a row of `logits`, one logit per expert): `idx[b, k]` = the
    /// `k`-th expert in routing order (larger logit first, lower index on ties; -1 when
    /// fewer than `k + 1` logits are numbers) and `w[b, k]` its renormalised softmax
    /// weight `exp(l - l_max) / Σ_chosen exp(l - l_max)`, summed in pick order.
    pub fn router_topk(logits: TileRef<'_, f32, 2>, mut idx: TileMut<'_, i32, 2>, mut w: TileMut<'_, f32, 2>) {
        let [b, e] = logits.shape();
        let k = idx.shape()[1];
        for bi in 0..b {
            let (mut pv, mut pi, mut top, mut sum) = (f32::INFINITY, -1i64, 0f32, 0f32);
            let mut p = vec![0f32; k];
            for (ki, pk) in p.iter_mut().enumerate() {
                let (mut v, mut i) = (f32::NEG_INFINITY, i64::MAX);
                for ei in 0..e {
                    let x = logits.get([bi, ei]);
                    if before(pv, pi, x, ei as i64) && before(x, ei as i64, v, i) {
                        (v, i) = (x, ei as i64);
                    }
                }
                let found = i != i64::MAX;
                if ki == 0 {
                    top = v;
                }
                *pk = if found { (v - top).exp() } else { 0.0 };
                sum += *pk;
                idx.set([bi, ki], if found { i as i32 } else { -1 });
                if found {
                    (pv, pi) = (v, i);
                }
            }
            for (ki, pk) in p.into_iter().enumerate() {
                w.set([bi, ki], if sum > 0.0 { pk / sum } else { 0.0 });
            }
        }
    }
}

crate::tile_op! { cuda = decode_cuda!(r#"
// A block-wide stream compaction in token order: each thread flags one token per round, a
// warp ballot ranks the flags inside the warp, the warps' totals rank the warps.
template <class P, class N, class S>
__device__ void moe_group(P topk, long long expert, N count, S tokens) {
    __shared__ int s_warp[32];
    __shared__ int s_base;
    const int T = topk.shape[0], K = topk.shape[1], C = tokens.shape[1];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    if (threadIdx.x == 0) s_base = 0;
    __syncthreads();
    for (int t0 = 0; t0 < T; t0 += blockDim.x) {
        const int t = t0 + threadIdx.x;
        bool hit = false;
        if (t < T)
            for (int k = 0; k < K; ++k) hit |= (long long)topk(t, k) == expert;
        const unsigned int ball = __ballot_sync(0xffffffffu, hit);
        if (lane == 0) s_warp[warp] = __popc(ball);
        __syncthreads();
        int at = s_base;
        for (int v = 0; v < warp; ++v) at += s_warp[v];
        at += __popc(ball & ((1u << lane) - 1u));
        if (hit && at < C) tokens(0, at) = t;
        __syncthreads();
        if (threadIdx.x == 0) {
            int n = 0;
            for (int v = 0; v < warps; ++v) n += s_warp[v];
            s_base += n;
        }
        __syncthreads();
    }
    const int n = s_base < C ? s_base : C;
    for (int c = n + threadIdx.x; c < C; c += blockDim.x) tokens(0, c) = -1;
    if (threadIdx.x == 0) count(0) = n;
}
"#);
    contract {
        count[0] == 1 => "count must be one element",
        tokens[0] == 1 && tokens[1] >= topk[0] => "tokens must be one row of at least the token count (topk's rows)",
    }
    /// The tokens routed to `expert`: `tokens[0, ..]` = the ids `t` (rows of `topk`, the
    /// `[T, K]` chosen experts) whose row lists `expert`, in increasing order, then -1
    /// padding to the row's end; `count[0]` = how many.
    pub fn moe_group(topk: TileRef<'_, i32, 2>, expert: i64, mut count: TileMut<'_, i32, 1>, mut tokens: TileMut<'_, i32, 2>) {
        let [t, k] = topk.shape();
        let c = tokens.shape()[1];
        let mut n = 0;
        for ti in 0..t {
            if (0..k).any(|ki| topk.get([ti, ki]) as i64 == expert) {
                tokens.set([0, n], ti as i32);
                n += 1;
            }
        }
        for ci in n..c {
            tokens.set([0, ci], -1);
        }
        count.set([0], n as i32);
    }
}

crate::tile_op! { cuda = decode_cuda!(r#"
// Threads over 8-column pieces of the rows: 16-byte copies where both rows allow them.
template <class X, class S, class Y>
__device__ void moe_gather(X x, S tokens, Y xe) {
    typedef typename elem_of<decltype(xe.ptr)>::type T;
    const int T_ = x.shape[0], H = xe.shape[1], R = xe.shape[0], P = (H + 7) / 8;
    const bool vec = vec_rows(x.ptr, x.stride[0], x.stride[1]) && vec_rows(xe.ptr, xe.stride[0], xe.stride[1]);
    for (int e = threadIdx.x; e < R * P; e += blockDim.x) {
        const int r = e / P, c = (e % P) * 8;
        const int tok = tokens(0, r);
        if (tok >= 0 && tok < T_) {
            if (vec && c + 8 <= H) {
                st16(&xe(r, c), ld16(&x(tok, c)));
            } else {
                for (int i = c; i < c + 8 && i < H; ++i) xe(r, i) = x(tok, i);
            }
        } else {
            for (int i = c; i < c + 8 && i < H; ++i) xe(r, i) = et::from_float<T>(0.0f);
        }
    }
}
"#);
    contract {
        tokens[0] == 1 && tokens[1] == xe[0] => "tokens must be one row with an id per row of xe",
        xe[1] == x[1] => "xe must have x's columns",
    }
    /// `xe[r, ..] = x[tokens[0, r], ..]`, and zeros where the id is padding (negative) or
    /// not a row of `x`: an expert's tile of gathered token rows.
    pub fn moe_gather(x: TileRef<'_, bf16, 2>, tokens: TileRef<'_, i32, 2>, mut xe: TileMut<'_, bf16, 2>) {
        let [t, h] = x.shape();
        for r in 0..xe.shape()[0] {
            let tok = tokens.get([0, r]);
            let row = usize::try_from(tok).ok().filter(|&v| v < t);
            for c in 0..h {
                xe.set([r, c], row.map_or(bf16::from_f32(0.0), |v| x.get([v, c])));
            }
        }
    }
}

/// The slot of token `t` in expert `e`'s sorted list (`tokens[e, ..counts[e]]`), if any.
fn find_slot(counts: &TileRef<'_, i32, 1>, tokens: &TileRef<'_, i32, 2>, e: usize, t: i64) -> Option<usize> {
    let cap = tokens.shape()[1];
    let n = (counts.get([e]).max(0) as usize).min(cap);
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if (tokens.get([e, mid]) as i64) < t {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    (lo < n && tokens.get([e, lo]) as i64 == t).then_some(lo)
}

crate::tile_op! { cuda = decode_cuda!(r#"
// Threads 0..K find the K rows (binary search in the expert's sorted token list), then the
// threads sweep the columns, each summing its column over k in pick order.
template <class P, class W, class N, class S, class Y, class O>
__device__ void moe_combine(P topk, W topw, long long first, N counts, S tokens, Y ye, O out) {
    typedef typename elem_of<decltype(out.ptr)>::type T;
    __shared__ int s_row[64];
    __shared__ float s_w[64];
    const int B = topk.shape[0], K = topk.shape[1], E = counts.shape[0], C = tokens.shape[1], H = out.shape[1];
    for (int b = 0; b < B; ++b) {
        if (threadIdx.x < K) {
            const int k = threadIdx.x, e = topk(b, k);
            const long long t = first + b;
            int row = -1;
            if (e >= 0 && e < E) {
                int n = counts(e);
                n = n < 0 ? 0 : (n > C ? C : n);
                int lo = 0, hi = n;
                while (lo < hi) {
                    const int mid = (lo + hi) >> 1;
                    if ((long long)tokens(e, mid) < t) lo = mid + 1; else hi = mid;
                }
                if (lo < n && (long long)tokens(e, lo) == t) row = e * C + lo;
            }
            s_row[k] = row;
            s_w[k] = topw(b, k);
        }
        __syncthreads();
        for (int c = threadIdx.x; c < H; c += blockDim.x) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k)
                if (s_row[k] >= 0) acc += s_w[k] * et::to_float(ye(s_row[k], c));
            out(b, c) = et::from_float<T>(acc);
        }
        __syncthreads();
    }
}
"#);
    contract {
        same(topk, topw) && topk[1] >= 1 && topk[1] <= 64 => "topw must have topk's extents, [B, K] with K from 1 to 64",
        tokens[0] == counts[0] => "tokens must have a row per expert (counts' length)",
        ye[0] == tokens[0] * tokens[1] => "ye must have a row per expert slot (tokens' rows x columns)",
        out[0] == topk[0] && out[1] == ye[1] => "out must be [topk's rows, ye's columns]",
    }
    /// The weighted sum of each token's expert outputs: for row `b` (token `first + b`),
    /// `out[b, ..] = Σ_k topw[b, k] · ye[e · C + p, ..]` with `e = topk[b, k]` and `p` the
    /// token's slot in `tokens[e, ..]` (found by binary search in the first `counts[e]`),
    /// in f32 in pick order, rounded once. Picks of -1, or without a slot, add nothing.
    pub fn moe_combine(
        topk: TileRef<'_, i32, 2>,
        topw: TileRef<'_, f32, 2>,
        first: i64,
        counts: TileRef<'_, i32, 1>,
        tokens: TileRef<'_, i32, 2>,
        ye: TileRef<'_, bf16, 2>,
        mut out: TileMut<'_, bf16, 2>,
    ) {
        let [b, k] = topk.shape();
        let (e, c) = (counts.shape()[0], tokens.shape()[1]);
        let h = out.shape()[1];
        for bi in 0..b {
            let rows: Vec<Option<(usize, f32)>> = (0..k)
                .map(|ki| {
                    let ex = usize::try_from(topk.get([bi, ki])).ok().filter(|&v| v < e)?;
                    let p = find_slot(&counts, &tokens, ex, first + bi as i64)?;
                    Some((ex * c + p, topw.get([bi, ki])))
                })
                .collect();
            for ci in 0..h {
                let mut acc = 0f32;
                for &(row, w) in rows.iter().flatten() {
                    acc += w * ye.get([row, ci]).to_f32();
                }
                out.set([bi, ci], bf16::from_f32(acc));
            }
        }
    }
}
