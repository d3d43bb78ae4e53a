//! GEMV / skinny GEMM `y[b, n] = Σ_k x[b, k] · w[n, k]` over a tile of weight rows, batch
//! 1 to 64, with fused epilogues and a split-K form.
//!
//! Below a batch of 16 each warp owns a weight row at a time and its lanes stream the row
//! in 16-byte pieces (CUDA cores); from 16 on, each warp owns 16 rows and multiplies them
//! with the batch on the tensor cores (`mma.sync.m16n8k16` bf16 → f32). When x's tile
//! type gives the batch at compile time (`static_extent<0>()`, as every megakernel's
//! does), only that batch's path is compiled, its register arrays and loops sized to the
//! batch; a tile with a run-time batch compiles both and picks one per call. The mma reads
//! both operands straight from global memory in 16-byte pieces: a lane's eight
//! consecutive `k` of a weight row and of a batch row feed two mmas, which sums the same
//! products in a permuted `k` order (the permutation is the same for both operands).

use super::decode_cuda;
use crate::dtype::{Element, bf16};
use crate::tile::{TileMut, TileRef};

/// The shared CUDA core of the GEMV family (prepended to each op's text).
macro_rules! matvec_cuda {
    ($body:literal) => {
        decode_cuda!([r#"
__device__ __forceinline__ void mma_bf16(float (&c)[4], unsigned int a0, unsigned int a1, unsigned int a2,
                                         unsigned int a3, unsigned int b0, unsigned int b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ float dot8(const uint4& a, const uint4& b) {
    return bf_lo(a.x) * bf_lo(b.x) + bf_hi(a.x) * bf_hi(b.x) + bf_lo(a.y) * bf_lo(b.y) + bf_hi(a.y) * bf_hi(b.y) +
           bf_lo(a.z) * bf_lo(b.z) + bf_hi(a.z) * bf_hi(b.z) + bf_lo(a.w) * bf_lo(b.w) + bf_hi(a.w) * bf_hi(b.w);
}

// The two paths below compute acc_j[b, n] = Σ_k x[b, k] w_j[n, k] for NW weight tiles w_j
// (same shape and strides), n < N, b < B, k < K, and call epi(b, n, acc_0, acc_1) once per
// output (acc_1 = 0 when NW = 1). `vec`: every row of x and of the w_j takes 16-byte loads.

// CUDA cores (B <= BM < 16): a warp per row, lanes over k in 16-byte pieces, U pieces in
// flight. BM is the batch when it is known at compile time (the loops are then exact).
template <int NW, int BM, class E>
__device__ __forceinline__ void matvec_simt(const et::bf16* const (&w)[NW], const long long (&ws0)[NW],
                                            const long long (&ws1)[NW], const et::bf16* x, long long xs0,
                                            long long xs1, int B, int N, int K, bool vec, E& epi) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    constexpr int U = NW == 1 ? 4 : 2;
    for (int r = warp; r < N; r += warps) {
        float acc[NW][BM];
#pragma unroll
        for (int j = 0; j < NW; ++j)
#pragma unroll
            for (int b = 0; b < BM; ++b) acc[j][b] = 0.0f;
        for (int k0 = lane * 8; k0 < K; k0 += 256 * U) {
            uint4 wr[NW][U];
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int j = 0; j < NW; ++j) wr[j][u] = load8<true>(w[j] + r * ws0[j], k0 + 256 * u, K, ws1[j], vec);
#pragma unroll
            for (int b = 0; b < BM; ++b) {
                if (b >= B) break;
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const uint4 xv = load8<false>(x + b * xs0, k0 + 256 * u, K, xs1, vec);
#pragma unroll
                    for (int j = 0; j < NW; ++j) acc[j][b] += dot8(wr[j][u], xv);
                }
            }
        }
#pragma unroll
        for (int b = 0; b < BM; ++b) {
            if (b >= B) break;
            const float a0 = et::warp_sum(acc[0][b]);
            const float a1 = NW > 1 ? et::warp_sum(acc[NW - 1][b]) : 0.0f;
            if (lane == 0) epi(b, r, a0, a1);
        }
    }
}

// Tensor cores (16 <= B <= 8 * NBM): a warp per 16 rows (m), the batch in 8-row pieces
// (n), k in steps of 64. NBM is ceil(B / 8) when the batch is known at compile time.
template <int NW, int NBM, class E>
__device__ __forceinline__ void matvec_mma(const et::bf16* const (&w)[NW], const long long (&ws0)[NW],
                                           const long long (&ws1)[NW], const et::bf16* x, long long xs0,
                                           long long xs1, int B, int N, int K, bool vec, E& epi) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    for (int m0 = warp * 16; m0 < N; m0 += warps * 16) {
        float c[NW][NBM][4];
#pragma unroll
        for (int j = 0; j < NW; ++j)
#pragma unroll
            for (int nb = 0; nb < NBM; ++nb)
#pragma unroll
                for (int i = 0; i < 4; ++i) c[j][nb][i] = 0.0f;
        const int r0 = m0 + g, r1 = m0 + g + 8;
        for (int k0 = 0; k0 < K; k0 += 64) {
            uint4 lo[NW][2], hi[NW][2];
#pragma unroll
            for (int u = 0; u < 2; ++u)
#pragma unroll
                for (int j = 0; j < NW; ++j) {
                    const int kk = k0 + 32 * u + 8 * t;
                    lo[j][u] = r0 < N ? load8<true>(w[j] + r0 * ws0[j], kk, K, ws1[j], vec) : make_uint4(0, 0, 0, 0);
                    hi[j][u] = r1 < N ? load8<true>(w[j] + r1 * ws0[j], kk, K, ws1[j], vec) : make_uint4(0, 0, 0, 0);
                }
#pragma unroll
            for (int nb = 0; nb < NBM; ++nb) {
                if (nb * 8 >= B) break;
                const int b = nb * 8 + g;
#pragma unroll
                for (int u = 0; u < 2; ++u) {
                    const uint4 xv = b < B ? load8<false>(x + b * xs0, k0 + 32 * u + 8 * t, K, xs1, vec) : make_uint4(0, 0, 0, 0);
#pragma unroll
                    for (int j = 0; j < NW; ++j) {
                        mma_bf16(c[j][nb], lo[j][u].x, hi[j][u].x, lo[j][u].y, hi[j][u].y, xv.x, xv.y);
                        mma_bf16(c[j][nb], lo[j][u].z, hi[j][u].z, lo[j][u].w, hi[j][u].w, xv.z, xv.w);
                    }
                }
            }
        }
        // c[j][nb]: {0, 1} are row r0, batch nb*8 + 2t + {0, 1}; {2, 3} are row r1.
#pragma unroll
        for (int nb = 0; nb < NBM; ++nb) {
            if (nb * 8 >= B) break;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int b = nb * 8 + 2 * t + (i & 1), r = i < 2 ? r0 : r1;
                if (b < B && r < N) epi(b, r, c[0][nb][i], NW > 1 ? c[NW - 1][nb][i] : 0.0f);
            }
        }
    }
}

// Below a batch of 16 the CUDA-core path, from 16 on the tensor-core path. SB is x's batch
// extent when known at compile time (`static_extent<0>()`, every megakernel's case): then
// only the one path is instantiated, with exact loop bounds; with SB = -1 both are, and
// the batch B picks one at run time.
template <int NW, int SB, class E>
__device__ __forceinline__ void matvec_core(const et::bf16* const (&w)[NW], const long long (&ws0)[NW],
                                            const long long (&ws1)[NW], const et::bf16* x, long long xs0,
                                            long long xs1, int B, int N, int K, E epi) {
    static_assert(SB == -1 || (SB >= 1 && SB <= 64), "matvec: the batch must be 1 to 64");
    bool wv = vec_rows(x, xs0, xs1);
#pragma unroll
    for (int j = 0; j < NW; ++j) wv = wv && vec_rows(w[j], ws0[j], ws1[j]);
    const bool vec = wv;
    if constexpr (SB >= 16) {
        matvec_mma<NW, (SB + 7) / 8>(w, ws0, ws1, x, xs0, xs1, SB, N, K, vec, epi);
    } else if constexpr (SB >= 1) {
        matvec_simt<NW, SB>(w, ws0, ws1, x, xs0, xs1, SB, N, K, vec, epi);
    } else if (B < 16) {
        matvec_simt<NW, 15>(w, ws0, ws1, x, xs0, xs1, B, N, K, vec, epi);
    } else {
        matvec_mma<NW, 8>(w, ws0, ws1, x, xs0, xs1, B, N, K, vec, epi);
    }
}
"#] $body)
    };
}

crate::tile_op! { cuda = matvec_cuda!(r#"
template <class W, class X, class Y>
__device__ void matvec(W w, X x, Y y) {
    typedef typename elem_of<decltype(y.ptr)>::type T;
    const et::bf16* ws[1] = {w.ptr};
    const long long s0[1] = {w.stride[0]}, s1[1] = {w.stride[1]};
    matvec_core<1, X::template static_extent<0>()>(ws, s0, s1, x.ptr, x.stride[0], x.stride[1], x.shape[0], w.shape[0], w.shape[1],
                   [&](int b, int n, float a, float) { y(b, n) = et::from_float<T>(a); });
}
"#);
    contract {
        x[1] == w[1] => "x must have as many columns as w (the reduced extent k)",
        y[0] == x[0] && y[1] == w[0] => "y must be x's rows (the batch) by w's rows",
        x[0] >= 1 && x[0] <= 64 => "the batch (x's rows) must be 1 to 64",
    }
    /// `y[b, n] = Σ_k x[b, k] · w[n, k]` (f32 accumulation, rounded once to `O`): `w` is the
    /// `N x K` tile of weight rows (row-major, as a linear layer stores them; never written
    /// during the launch), `x` the `B x K` batch (B from 1 to 64), `y` is `B x N`.
    pub fn matvec<O: Element>(w: TileRef<'_, bf16, 2>, x: TileRef<'_, bf16, 2>, mut y: TileMut<'_, O, 2>) {
        for_outputs(&[w], x, |b, n, acc| y.set([b, n], O::from_f32(acc[0])));
    }
}

crate::tile_op! { cuda = matvec_cuda!(r#"
template <class W, class X, class R, class Y>
__device__ void matvec_residual(W w, X x, R r, Y y) {
    typedef typename elem_of<decltype(y.ptr)>::type T;
    const et::bf16* ws[1] = {w.ptr};
    const long long s0[1] = {w.stride[0]}, s1[1] = {w.stride[1]};
    matvec_core<1, X::template static_extent<0>()>(ws, s0, s1, x.ptr, x.stride[0], x.stride[1], x.shape[0], w.shape[0], w.shape[1],
                   [&](int b, int n, float a, float) { y(b, n) = et::from_float<T>(et::to_float(r(b, n)) + a); });
}
"#);
    contract {
        x[1] == w[1] => "x must have as many columns as w (the reduced extent k)",
        y[0] == x[0] && y[1] == w[0] => "y must be x's rows (the batch) by w's rows",
        r[0] == y[0] && r[1] == y[1] => "the residual r must have y's extents",
        x[0] >= 1 && x[0] <= 64 => "the batch (x's rows) must be 1 to 64",
    }
    /// `y = r + x · wᵀ`: [`matvec`] with the residual added before the one rounding. `r`
    /// and `y` may be tiles of different tensors only (an op's read and written tiles must
    /// not overlap).
    pub fn matvec_residual<O: Element>(
        w: TileRef<'_, bf16, 2>,
        x: TileRef<'_, bf16, 2>,
        r: TileRef<'_, O, 2>,
        mut y: TileMut<'_, O, 2>,
    ) {
        for_outputs(&[w], x, |b, n, acc| y.set([b, n], O::from_f32(r.get([b, n]).to_f32() + acc[0])));
    }
}

crate::tile_op! { cuda = matvec_cuda!(r#"
template <class WG, class WU, class X, class Y>
__device__ void matvec_silu(WG wg, WU wu, X x, Y y) {
    typedef typename elem_of<decltype(y.ptr)>::type T;
    const et::bf16* ws[2] = {wg.ptr, wu.ptr};
    const long long s0[2] = {wg.stride[0], wu.stride[0]}, s1[2] = {wg.stride[1], wu.stride[1]};
    matvec_core<2, X::template static_extent<0>()>(ws, s0, s1, x.ptr, x.stride[0], x.stride[1], x.shape[0], wg.shape[0],
                   wg.shape[1], [&](int b, int n, float gate, float up) {
                       y(b, n) = et::from_float<T>(gate / (1.0f + __expf(-gate)) * up);
                   });
}
"#);
    contract {
        gate[0] == up[0] && gate[1] == up[1] => "the gate and up weight tiles must have the same extents",
        x[1] == gate[1] => "x must have as many columns as the weights (the reduced extent k)",
        y[0] == x[0] && y[1] == gate[0] => "y must be x's rows (the batch) by the weights' rows",
        x[0] >= 1 && x[0] <= 64 => "the batch (x's rows) must be 1 to 64",
    }
    /// `y[b, n] = silu(g) · u` with `g = Σ_k x[b, k] gate[n, k]`, `u = Σ_k x[b, k] up[n, k]`
    /// and `silu(g) = g / (1 + e^-g)`: the gated MLP's first half in one pass over the
    /// batch. The gate and up weights are two tiles of the same extents (two tensors, or
    /// two row ranges of one stacked `[gate; up]` tensor): a warp streams the same rows of
    /// both, so each output needs no second pass over `x`.
    pub fn matvec_silu<O: Element>(
        gate: TileRef<'_, bf16, 2>,
        up: TileRef<'_, bf16, 2>,
        x: TileRef<'_, bf16, 2>,
        mut y: TileMut<'_, O, 2>,
    ) {
        for_outputs(&[gate, up], x, |b, n, acc| {
            let g = acc[0];
            y.set([b, n], O::from_f32(g / (1.0 + (-g).exp()) * acc[1]));
        });
    }
}

crate::tile_op! { cuda = matvec_cuda!(r#"
template <class W, class X, class P>
__device__ void matvec_split(W w, X x, P part) {
    const et::bf16* ws[1] = {w.ptr};
    const long long s0[1] = {w.stride[0]}, s1[1] = {w.stride[1]};
    matvec_core<1, X::template static_extent<0>()>(ws, s0, s1, x.ptr, x.stride[0], x.stride[1], x.shape[0], w.shape[0], w.shape[1],
                   [&](int b, int n, float a, float) { part(0, b, n) = a; });
}
"#);
    contract {
        x[1] == w[1] => "x must have as many columns as w (this split's range of k)",
        part[0] == 1 && part[1] == x[0] && part[2] == w[0] => "part must be one split: 1 x x's rows x w's rows",
        x[0] >= 1 && x[0] <= 64 => "the batch (x's rows) must be 1 to 64",
    }
    /// One split of a split-K GEMV: `part[0, b, n] = Σ_k x[b, k] · w[n, k]` in f32 over
    /// this split's range of `k` (`w` and `x` cut to it), written to split `s` of an
    /// `[S, B, N]` partial tensor as the tile `[1, B, N_tile]`. The consumer that waits
    /// for the `S` splits sums them with [`reduce_split`] or [`reduce_split_residual`].
    pub fn matvec_split(w: TileRef<'_, bf16, 2>, x: TileRef<'_, bf16, 2>, mut part: TileMut<'_, f32, 3>) {
        for_outputs(&[w], x, |b, n, acc| part.set([0, b, n], acc[0]));
    }
}

crate::tile_op! { cuda = decode_cuda!(r#"
template <class P, class Y>
__device__ void reduce_split(P part, Y y) {
    typedef typename elem_of<decltype(y.ptr)>::type T;
    const int S = part.shape[0], B = y.shape[0], N = y.shape[1];
    for (int e = threadIdx.x; e < B * N; e += blockDim.x) {
        const int b = e / N, n = e % N;
        float acc = 0.0f;
        for (int s = 0; s < S; ++s) acc += part(s, b, n);
        y(b, n) = et::from_float<T>(acc);
    }
}
"#);
    contract {
        part[1] == y[0] && part[2] == y[1] => "part must be S splits of y's extents: [S, y's rows, y's columns]",
        part[0] >= 1 => "part must hold at least one split",
    }
    /// `y[b, n] = Σ_s part[s, b, n]`, summed in f32 in split order and rounded once: the
    /// reduce step of [`matvec_split`].
    pub fn reduce_split<O: Element>(part: TileRef<'_, f32, 3>, mut y: TileMut<'_, O, 2>) {
        let [s, b, n] = part.shape();
        for bi in 0..b {
            for ni in 0..n {
                let acc: f32 = (0..s).map(|si| part.get([si, bi, ni])).sum();
                y.set([bi, ni], O::from_f32(acc));
            }
        }
    }
}

crate::tile_op! { cuda = decode_cuda!(r#"
template <class P, class R, class Y>
__device__ void reduce_split_residual(P part, R r, Y y) {
    typedef typename elem_of<decltype(y.ptr)>::type T;
    const int S = part.shape[0], B = y.shape[0], N = y.shape[1];
    for (int e = threadIdx.x; e < B * N; e += blockDim.x) {
        const int b = e / N, n = e % N;
        float acc = 0.0f;
        for (int s = 0; s < S; ++s) acc += part(s, b, n);
        y(b, n) = et::from_float<T>(et::to_float(r(b, n)) + acc);
    }
}
"#);
    contract {
        part[1] == y[0] && part[2] == y[1] => "part must be S splits of y's extents: [S, y's rows, y's columns]",
        part[0] >= 1 => "part must hold at least one split",
        r[0] == y[0] && r[1] == y[1] => "the residual r must have y's extents",
    }
    /// `y[b, n] = r[b, n] + Σ_s part[s, b, n]`: [`reduce_split`] with a residual add
    /// (the output projection of a transformer block, split over k).
    pub fn reduce_split_residual<O: Element>(part: TileRef<'_, f32, 3>, r: TileRef<'_, O, 2>, mut y: TileMut<'_, O, 2>) {
        let [s, b, n] = part.shape();
        for bi in 0..b {
            for ni in 0..n {
                let acc: f32 = (0..s).map(|si| part.get([si, bi, ni])).sum();
                y.set([bi, ni], O::from_f32(r.get([bi, ni]).to_f32() + acc));
            }
        }
    }
}

/// Calls `out(b, n, acc)` with `acc[j] = Σ_k x[b, k] · w_j[n, k]` in f32 for every batch
/// row `b` and weight row `n`: the CPU half of every GEMV here.
fn for_outputs(w: &[TileRef<'_, bf16, 2>], x: TileRef<'_, bf16, 2>, mut out: impl FnMut(usize, usize, [f32; 2])) {
    let ([n, k], batch) = (w[0].shape(), x.shape()[0]);
    let xs: Vec<Vec<f32>> = (0..batch).map(|b| (0..k).map(|p| x.get([b, p]).to_f32()).collect()).collect();
    for r in 0..n {
        let rows: Vec<Vec<f32>> = w.iter().map(|w| (0..k).map(|p| w.get([r, p]).to_f32()).collect()).collect();
        for (b, xb) in xs.iter().enumerate() {
            let mut acc = [0f32; 2];
            for (j, row) in rows.iter().enumerate() {
                acc[j] = row.iter().zip(xb).map(|(a, b)| a * b).sum();
            }
            out(b, r, acc);
        }
    }
}
