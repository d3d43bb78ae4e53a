//! RMSNorm fused into the GEMV that reads its output: `y = rms_norm(h, γ) · Wᵀ` in one
//! task, with no normalized activation stored in global memory.
//!
//! In a decode step every GEMV after a norm reads the whole normalized hidden vector, so
//! the norm is a stage of its own: a task (or kernel) that waits for the residual stream,
//! and a dependency hop before the GEMV. Here each GEMV task normalizes the rows itself
//! into its shared-memory arena (a few KB a row) and runs the GEMV family's core on them.
//! The values are those of [`rms_norm`](super::rms_norm) then [`matvec`](super::matvec):
//! the same products and rounding to bf16; the sum of squares is taken in another order
//! (the rows of a batch side by side, not one at a time with the whole CTA), so the two
//! forms agree within f32 rounding.
//!
//! The arena holds the normalized rows of the whole batch while they take at most 64 KB
//! (`B · K ≤ 32 Ki`: batch 16 at K = 2048, 8 at 4096); a larger batch runs in chunks of 8
//! rows, each chunk streaming the weight tile again. That is correct at every batch but
//! reads the weights `B / 8` times: at large batches the staged form (an `rms_norm` task,
//! then the GEMV) moves fewer bytes.

use super::gemv::{PREFETCH_RECORD, for_rows, matvec_cuda, partial_bytes, silu_times};
use super::norm::normalized_rows;
use crate::dtype::{Element, bf16};
use crate::tile::{TileMut, TileRef};

/// The bytes of the normalized rows a fused op holds at once, padding not counted.
const STAGE_CAP: usize = 64 * 1024;

/// The batch rows a fused norm GEMV stages at once for a reduced extent `k` (the CUDA's
/// `norm_chunk_rows` computes the same): the whole batch when its bf16 rows fit
/// [`STAGE_CAP`], else chunks of 8 rows (fewer where 8 do not fit, at least 1).
pub const fn norm_chunk_rows(batch: usize, k: usize) -> usize {
    let row = k.div_ceil(8) * 16;
    let fit = match STAGE_CAP.checked_div(row) {
        Some(fit) => fit,
        None => 1,
    };
    if batch <= fit {
        batch
    } else if fit >= 8 {
        8
    } else if fit >= 1 {
        fit
    } else {
        1
    }
}

/// The arena bytes of a fused GEMV (a norm or an attention merge staged in the arena, then
/// the GEMV) of `mats` `[rows, k]` weight tiles at a batch of `batch`: the prefetch
/// record, the GEMV's partial sums for one chunk, then the chunk's staged rows (`k`
/// rounded up to 8, plus 8 elements of padding each), as the CUDA's `fused_stage` lays
/// them out.
pub const fn fused_arena_bytes(rows: usize, k: usize, batch: usize, mats: usize) -> usize {
    let chunk = norm_chunk_rows(batch, k);
    let partials = partial_bytes(&[rows, k], &[chunk, k], mats).div_ceil(16) * 16;
    PREFETCH_RECORD + partials + chunk * 2 * (k.div_ceil(8) * 8 + 8)
}

/// The arena bytes of a fused norm GEMV of `mats` `[rows, k]` weight tiles over the
/// `[batch, k]` rows `h` ([`fused_arena_bytes`]).
pub const fn norm_arena_bytes(w: &[usize], h: &[usize], mats: usize) -> usize {
    match (w, h) {
        (&[rows, k], &[batch, _]) => fused_arena_bytes(rows, k, batch, mats),
        _ => 0,
    }
}

/// The CUDA core of the fused ops (after the GEMV family's).
macro_rules! norm_matvec_cuda {
    ($body:literal) => {
        matvec_cuda!([r#"
// `norm_chunk_rows` in norm_gemv.rs (keep the two identical).
__host__ __device__ constexpr int norm_chunk_rows(int B, int K) {
    const int row = (K + 7) / 8 * 16;
    const int fit = row > 0 ? 65536 / row : 1;
    return B <= fit ? B : (fit >= 8 ? 8 : (fit >= 1 ? fit : 1));
}

// Writes rows b0 .. b0 + bc of rms_norm(h, g) to `xs` (rows `xr` elements apart, zero past
// K and for rows at or past B): R rows side by side, W warps on each (every warp on the
// one row at batch 1, a warp per row from 16 rows), each thread one 16-byte piece at a
// time (few registers: an op's peak register use inside a megakernel is every op's).
// `red`: 32 floats of shared memory. Ends with a CTA barrier: the rows are then visible
// to every warp.
template <class H, class G>
__device__ __forceinline__ void norm_stage(const H& h, const G& g, float eps, int b0, int bc, int K, bool vec,
                                           et::bf16* xs, int xr, float* red) {
    const int B = h.shape[0], warps = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int W = warps / (bc < warps ? bc : warps), R = warps / W;
    const int slot = warp / W, t = (warp % W) * 32 + lane, T = W * 32;
#pragma unroll 1
    for (int r0 = 0; r0 < bc; r0 += R) {
        const int b = r0 + slot;
        const bool mine = slot < R && b < bc, live = mine && b0 + b < B;
        const et::bf16* row = h.ptr + (long long)(live ? b0 + b : 0) * h.stride[0];
        float ss = 0.0f;
        if (live) {
#pragma unroll 2
            for (int k = t * 8; k < K; k += T * 8) {
                float f[8];
                unpack8(load8<false>(row, k, K, h.stride[1], vec), f);
#pragma unroll
                for (int i = 0; i < 8; ++i) ss += f[i] * f[i];
            }
        }
        ss = et::warp_sum(ss);
        if (lane == 0) red[warp] = ss;
        __syncthreads();
        if (mine) {
            float total = 0.0f;
            for (int i = 0; i < W; ++i) total += red[slot * W + i];
            const float inv = rsqrtf(total / (float)K + eps);
            uint4* dst = reinterpret_cast<uint4*>(xs + b * xr);
            // pieces past K (the padding) load as zeros
            for (int k = t * 8; k < xr; k += T * 8) {
                if (!live) {
                    dst[k / 8] = make_uint4(0, 0, 0, 0);
                    continue;
                }
                float f[8], w[8];
                unpack8(load8<false>(row, k, K, h.stride[1], vec), f);
                unpack8(load8<true>(g.ptr, k, K, g.stride[0], vec), w);
#pragma unroll
                for (int i = 0; i < 8; ++i) f[i] = f[i] * inv * w[i];
                dst[k / 8] = pack8(f);
            }
        }
        // `red` is the next rows', `xs` the GEMV's
        __syncthreads();
    }
}

// Where a fused GEMV (a norm or an attention merge staged in the arena, then the GEMV)
// stages its prologue's rows: after the prefetch record and the GEMV's partial sums for
// `bc` rows of NW tiles. Retires the arena first (a prefetch earlier in the task is not
// read: its copies land before the arena is reused) and ends with a CTA barrier.
// `fused_arena_bytes` (above) sizes the arena so.
template <int NW>
__device__ __forceinline__ et::bf16* fused_stage(int N, int K, int bc, unsigned char* smem) {
    if (threadIdx.x == 0) et::arena_retire(smem);
    __syncthreads();
    return reinterpret_cast<et::bf16*>(smem + 128u + (matvec_partial_bytes(N, K, bc, NW) + 15u) / 16u * 16u);
}

// The GEMV of NW weight tiles over rms_norm(h, g): stages the normalized rows in the arena
// (`fused_stage`; chunks of `norm_chunk_rows`), then runs `matvec_core` on them.
// SB and SK: h's batch and the weights' k when known at compile time (-1 otherwise).
template <int NW, int SB, int SK, bool LARGE, class H, class G, class E>
__device__ __forceinline__ void norm_matvec_core(const et::bf16* const (&w)[NW], const long long (&ws0)[NW],
                                                 const long long (&ws1)[NW], const H& h, const G& g, float eps,
                                                 int N, int K, unsigned char* smem, E epi) {
    __shared__ float red[32];
    constexpr int SC = SB >= 1 && SK >= 0 ? norm_chunk_rows(SB, SK) : -1;
    const int B = h.shape[0], bc = SC >= 1 ? SC : norm_chunk_rows(B, K), xr = (K + 7) / 8 * 8 + 8;
    et::bf16* xs = fused_stage<NW>(N, K, bc, smem);
    const bool vec = vec_rows(h.ptr, h.stride[0], h.stride[1]) && vec_rows(g.ptr, 0, g.stride[0]);
#pragma unroll 1
    for (int b0 = 0; b0 < B; b0 += bc) {
        norm_stage(h, g, eps, b0, bc, K, vec, xs, xr, red);
        matvec_core<NW, SC, true, LARGE>(w, ws0, ws1, xs, xr, 1, bc, N, K, smem,
                                         [&](int b, int n, float a0, float a1) {
                                             if (b0 + b < B) epi(b0 + b, n, a0, a1);
                                         });
        // the next chunk overwrites the rows and the partial sums
        if (b0 + bc < B) __syncthreads();
    }
}
"#] $body)
    };
}

pub(super) use norm_matvec_cuda;

crate::tile_op! { cuda = norm_matvec_cuda!(r#"
template <class W, class H, class G, class Y>
__device__ void rms_norm_matvec(W w, H h, G g, float eps, Y y, unsigned char* smem) {
    typedef typename elem_of<decltype(y.ptr)>::type T;
    const et::bf16* ws[1] = {w.ptr};
    const long long s0[1] = {w.stride[0]}, s1[1] = {w.stride[1]};
    norm_matvec_core<1, H::template static_extent<0>(), W::template static_extent<1>(), matvec_large<1, W>()>(
        ws, s0, s1, h, g, eps, w.shape[0], w.shape[1], smem,
        [&](int b, int n, float a, float) { y(b, n) = et::from_float<T>(a); });
}
"#);
    smem = |extents| norm_arena_bytes(w, h, 1);
    contract {
        h[1] == w[1] => "h must have as many columns as w (the reduced extent k)",
        gamma[0] == h[1] => "the norm weight gamma must have one element per column of h",
        y[0] == h[0] && y[1] == w[0] => "y must be h's rows (the batch) by w's rows",
        h[0] >= 1 && h[0] <= 64 => "the batch (h's rows) must be 1 to 64",
    }
    /// `y = rms_norm(h, gamma, eps) · wᵀ`: [`rms_norm`](super::rms_norm) of the `B x K` rows
    /// `h` (rounded to bf16, as that op stores them), then [`matvec`](super::matvec) with
    /// the `N x K` weight tile `w`, in one task; the normalized rows live in the task's
    /// shared-memory arena only. `gamma` has `K` elements; `w` and `gamma` are weights
    /// (never written during the launch).
    pub fn rms_norm_matvec<O: Element>(
        w: TileRef<'_, bf16, 2>,
        h: TileRef<'_, bf16, 2>,
        gamma: TileRef<'_, bf16, 1>,
        eps: f32,
        mut y: TileMut<'_, O, 2>,
    ) {
        for_rows(&[w], &normalized_rows(h, gamma, eps), |b, n, acc| y.set([b, n], O::from_f32(acc[0])));
    }
}

crate::tile_op! { cuda = norm_matvec_cuda!(r#"
template <class WG, class WU, class H, class G, class Y>
__device__ void rms_norm_matvec_silu(WG wg, WU wu, H h, G g, float eps, Y y, unsigned char* smem) {
    typedef typename elem_of<decltype(y.ptr)>::type T;
    const et::bf16* ws[2] = {wg.ptr, wu.ptr};
    const long long s0[2] = {wg.stride[0], wu.stride[0]}, s1[2] = {wg.stride[1], wu.stride[1]};
    norm_matvec_core<2, H::template static_extent<0>(), WG::template static_extent<1>(), matvec_large<2, WG>()>(
        ws, s0, s1, h, g, eps, wg.shape[0], wg.shape[1], smem, [&](int b, int n, float gate, float up) {
            y(b, n) = et::from_float<T>(silu_times(gate, up));
        });
}
"#);
    smem = |extents| norm_arena_bytes(gate, h, 2);
    contract {
        gate[0] == up[0] && gate[1] == up[1] => "the gate and up weight tiles must have the same extents",
        h[1] == gate[1] => "h must have as many columns as the weights (the reduced extent k)",
        gamma[0] == h[1] => "the norm weight gamma must have one element per column of h",
        y[0] == h[0] && y[1] == gate[0] => "y must be h's rows (the batch) by the weights' rows",
        h[0] >= 1 && h[0] <= 64 => "the batch (h's rows) must be 1 to 64",
    }
    /// `y = silu(x · gateᵀ) · (x · upᵀ)` with `x = rms_norm(h, gamma, eps)`:
    /// [`rms_norm`](super::rms_norm) then [`matvec_silu`](super::matvec_silu) in one task,
    /// the normalized rows in the task's shared-memory arena only.
    pub fn rms_norm_matvec_silu<O: Element>(
        gate: TileRef<'_, bf16, 2>,
        up: TileRef<'_, bf16, 2>,
        h: TileRef<'_, bf16, 2>,
        gamma: TileRef<'_, bf16, 1>,
        eps: f32,
        mut y: TileMut<'_, O, 2>,
    ) {
        for_rows(&[gate, up], &normalized_rows(h, gamma, eps), |b, n, acc| y.set([b, n], O::from_f32(silu_times(acc[0], acc[1]))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_batch_is_staged_while_it_fits_64_kb() {
        assert_eq!(norm_chunk_rows(1, 2048), 1);
        assert_eq!(norm_chunk_rows(16, 2048), 16);
        assert_eq!(norm_chunk_rows(17, 2048), 8);
        assert_eq!(norm_chunk_rows(8, 4096), 8);
        assert_eq!(norm_chunk_rows(64, 4096), 8);
        assert_eq!(norm_chunk_rows(3, 16384), 2);
        assert_eq!(norm_chunk_rows(3, 100_000), 1);
    }

    #[test]
    fn the_arena_holds_the_record_the_partial_sums_and_the_padded_rows() {
        // batch 1: no partial sums (the CUDA-core path), one row of 2048 + 8
        assert_eq!(norm_arena_bytes(&[24, 2048], &[1, 2048], 1), 128 + 2 * 2056);
        // batch 8: one chunk of 8 rows after the partial sums
        let partials = partial_bytes(&[64, 2048], &[8, 2048], 2).div_ceil(16) * 16;
        assert_eq!(norm_arena_bytes(&[64, 2048], &[8, 2048], 2), 128 + partials + 8 * 2 * 2056);
        // batch 64 runs in chunks of 8: the arena is sized for one chunk
        assert_eq!(norm_arena_bytes(&[64, 2048], &[64, 2048], 2), norm_arena_bytes(&[64, 2048], &[8, 2048], 2));
        // extents of the wrong rank (a contract error elsewhere) declare nothing
        assert_eq!(norm_arena_bytes(&[64], &[8, 2048], 1), 0);
    }

    #[test]
    fn both_ops_declare_the_arena_of_their_chunk() {
        let (w, h, g) = (&[24usize, 2048][..], &[8usize, 2048][..], &[2048usize][..]);
        assert_eq!(rms_norm_matvec::smem(&[w, h, g, &[], &[8, 24]]), norm_arena_bytes(w, h, 1));
        assert_eq!(rms_norm_matvec_silu::smem(&[w, w, h, g, &[], &[8, 24]]), norm_arena_bytes(w, h, 2));
        const { assert!(rms_norm_matvec::OP.uses_smem && rms_norm_matvec_silu::OP.uses_smem) };
        // every chunk's rows fit the 64 KB the staging may take, padding aside
        for k in [8, 2048, 4104, 14336] {
            for batch in 1..=64 {
                let chunk = norm_chunk_rows(batch, k);
                assert!(chunk >= 1 && chunk <= batch && chunk * k.div_ceil(8) * 16 <= STAGE_CAP, "{batch} x {k}");
            }
        }
    }
}
