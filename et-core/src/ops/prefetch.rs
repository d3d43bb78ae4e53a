//! Prefetch before wait: a GEMV split in two halves around a task's `wait!`.
//!
//! `gemv_prefetch` starts streaming a bf16 weight tile into the CTA's shared-memory arena
//! with bulk copies (the TMA engine's 1-D form) counted on an mbarrier, and returns at
//! once; the task then waits for its activations while the weights move. `gemv_consume`
//! waits on the mbarrier and computes from shared memory. Both take the same weight tile
//! and lay the arena out the same way: the arena's state words (the mbarrier at byte 8),
//! the `n x k` weights from byte [`WEIGHTS_AT`], row-major and packed.
//!
//! ```text
//! tile!(step[n] in [..] {
//!     gemv_prefetch(w.tile([n, 0], [16, 4096]));
//!     wait!(x_ready[..]);
//!     gemv_consume(w.tile([n, 0], [16, 4096]), x.tile([0, 0], [4, 4096]), y.tile([0, n], [4, 16]));
//!     signal!(y_ready[n]);
//! });
//! ```
//!
//! On the CPU, `gemv_prefetch` does nothing and `gemv_consume` is the reference.
//!
//! The prefetch records what it copies (the tile's address, row stride and extents, at
//! byte [`RECORD_AT`] of the arena's header); `gemv_consume` reads the arena only when
//! the record is its own tile's, and otherwise (no prefetch in this task, or one of
//! another tile) retires whatever copy is in flight and reads the weights from global
//! memory, so that a mismatched pair is slower, never wrong or stuck.

use crate::dtype::bf16;
use crate::tile::{TileMut, TileRef};

/// Where the weights start in the arena (after the mbarrier, 128-byte aligned).
pub const WEIGHTS_AT: usize = 128;

/// Where the prefetch's record of its tile lies in the arena's header (after the state
/// words and the mbarrier): address, row stride, rows, columns.
pub const RECORD_AT: usize = 16;

/// The arena bytes of a `[n, k]` bf16 weight tile: the mbarrier's line and the weights.
pub const fn arena_bytes(w: &[usize]) -> usize {
    match w {
        &[n, k] => WEIGHTS_AT + n * k * 2,
        _ => 0,
    }
}

/// Both ops' CUDA begins with the record of what a prefetch copies (each op's text is
/// compiled in its own namespace, only where the op is called).
macro_rules! with_prefetch_record {
    ($body:literal) => {
        concat!(
            r#"
// The record at byte 16 of the arena (`RECORD_AT` in prefetch.rs): the tile the last
// gemv_prefetch copies. `tag` tells it from the GEMV family's record (`MatvecPrefetch`),
// which shares the header.
struct GemvPrefetchRecord {
    const et::bf16* src;
    long long stride;
    unsigned int tag;
    int n, k;
};
constexpr unsigned int GEMV_PREFETCH_TAG = 0x65744750u;
// Whether copies of tile `w` are what the arena holds or receives.
template <class W>
__device__ __forceinline__ bool gemv_prefetched(const W& w, const unsigned char* smem) {
    const GemvPrefetchRecord* rec = reinterpret_cast<const GemvPrefetchRecord*>(smem + 16);
    return reinterpret_cast<const unsigned int*>(smem)[0] != 0u && rec->tag == GEMV_PREFETCH_TAG && rec->src == w.ptr &&
           rec->stride == w.stride[0] && rec->n == w.template extent<0>() && rec->k == w.template extent<1>();
}
"#,
            $body
        )
    };
}

crate::tile_op! { cuda = with_prefetch_record!(r#"
// Starts the copy of the weight tile into the arena and returns. Thread 0 initialises the
// arena's mbarrier and issues one bulk copy per row; a tile whose rows are not 16-byte
// aligned is copied by the CTA's threads instead (the mbarrier then completes without
// bytes: the CTA barrier that separates the two halves publishes the copy).
// The mbarrier is the arena state's (`et::arena_init`): word 0 is 1 while copies may be
// in flight, so that an unread prefetch is waited for before the arena is used again.
template <class W>
__device__ void gemv_prefetch(W w, unsigned char* smem) {
    unsigned long long* bar = reinterpret_cast<unsigned long long*>(smem + 8);
    // an earlier prefetch of the task that nothing read
    if (threadIdx.x == 0) et::arena_retire(smem);
    __syncthreads();
    et::bf16* dst = reinterpret_cast<et::bf16*>(smem + 128);
    const int n = w.template extent<0>(), k = w.template extent<1>();
    const unsigned int row_bytes = (unsigned int)k * 2u;
    const bool aligned = w.stride[1] == 1 && row_bytes % 16u == 0u &&
                         ((reinterpret_cast<unsigned long long>(w.ptr) | (unsigned long long)(w.stride[0] * 2)) & 15ull) == 0ull;
    if (threadIdx.x == 0) {
        et::mbar_init(bar, 1);
        // the arena's last readers (an earlier task) used the generic proxy
        et::fence_proxy_async();
        if (aligned) {
            et::mbar_arrive_expect_tx(bar, (unsigned int)n * row_bytes);
            for (int r = 0; r < n; ++r) et::bulk_load(dst + (long long)r * k, w.ptr + (long long)r * w.stride[0], row_bytes, bar);
        } else {
            et::mbar_arrive(bar);
        }
        *reinterpret_cast<GemvPrefetchRecord*>(smem + 16) = GemvPrefetchRecord{w.ptr, w.stride[0], GEMV_PREFETCH_TAG, n, k};
        reinterpret_cast<unsigned int*>(smem)[0] = 1u;
    }
    if (!aligned)
        for (int e = threadIdx.x; e < n * k; e += blockDim.x) dst[e] = w(e / k, e % k);
}
"#);
    smem = |extents| arena_bytes(w);
    contract {
        w[1] % 8 == 0 => "w's rows must be whole 16-byte lines: its column extent must be a multiple of 8",
        arena_bytes(w) <= 227 * 1024 => "the weight tile does not fit the 227 KB of shared memory a CTA can have",
    }
    /// Starts moving the `n x k` weight tile `w` into shared memory for a following
    /// [`gemv_consume`] of the same tile (call it before the task's `wait!`). Does
    /// nothing on the CPU.
    pub fn gemv_prefetch(w: TileRef<'_, bf16, 2>) {
        let _ = w;
    }
}

crate::tile_op! { cuda = with_prefetch_record!(r#"
// y[b, r] = sum_c x[b, c] * w[r, c], w read from the arena that gemv_prefetch filled.
// One warp per (row, batch) pair; lanes take 8 columns (16 bytes) at a time. Without a
// prefetch of this tile in the task (the arena's record says which), w is read from
// global memory instead, after any other tile's copy in flight has landed.
template <class W, class X, class Y>
__device__ void gemv_consume(W w, X x, Y y, unsigned char* smem) {
    unsigned long long* bar = reinterpret_cast<unsigned long long*>(smem + 8);
    const int n = w.template extent<0>(), k = w.template extent<1>(), batch = x.template extent<0>();
    // every thread reads the same state (thread 0 wrote it before the task's wait barrier)
    const bool mine = gemv_prefetched(w, smem);
    if (!mine) {
        if (threadIdx.x == 0) et::arena_retire(smem);
        for (int p = threadIdx.x / 32; p < n * batch; p += blockDim.x / 32) {
            const int r = p % n, b = p / n;
            float acc = 0.0f;
            for (int c = threadIdx.x % 32; c < k; c += 32) acc += et::to_float(w(r, c)) * et::to_float(x(b, c));
            acc = et::warp_sum(acc);
            if (threadIdx.x % 32 == 0) y(b, r) = et::from_float<et::bf16>(acc);
        }
        // the retired arena is free for the next op once thread 0 is past its wait
        __syncthreads();
        return;
    }
    const et::bf16* ws = reinterpret_cast<const et::bf16*>(smem + 128);
    et::mbar_wait(bar, 0);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    const bool x_vec = x.stride[1] == 1 && ((reinterpret_cast<unsigned long long>(x.ptr) | (unsigned long long)(x.stride[0] * 2)) & 15ull) == 0ull;
    for (int p = warp; p < n * batch; p += warps) {
        const int r = p % n, b = p / n;
        const et::bf16* wr = ws + (long long)r * k;
        const et::bf16* xr = &x(b, 0);
        float acc = 0.0f;
        if (x_vec) {
            for (int c = lane * 8; c < k; c += 32 * 8) {
                const uint4 wv = *reinterpret_cast<const uint4*>(wr + c);
                const uint4 xv = *reinterpret_cast<const uint4*>(xr + c);
                acc += et::bf16_lo(wv.x) * et::bf16_lo(xv.x) + et::bf16_hi(wv.x) * et::bf16_hi(xv.x);
                acc += et::bf16_lo(wv.y) * et::bf16_lo(xv.y) + et::bf16_hi(wv.y) * et::bf16_hi(xv.y);
                acc += et::bf16_lo(wv.z) * et::bf16_lo(xv.z) + et::bf16_hi(wv.z) * et::bf16_hi(xv.z);
                acc += et::bf16_lo(wv.w) * et::bf16_lo(xv.w) + et::bf16_hi(wv.w) * et::bf16_hi(xv.w);
            }
        } else {
            for (int c = lane; c < k; c += 32) acc += et::to_float(wr[c]) * et::to_float(x(b, c));
        }
        acc = et::warp_sum(acc);
        if (lane == 0) y(b, r) = et::from_float<et::bf16>(acc);
    }
    // every thread has passed its wait: the mbarrier can be invalidated, leaving the
    // arena plain memory for the next task's ops
    __syncthreads();
    if (threadIdx.x == 0) {
        et::mbar_inval(bar);
        reinterpret_cast<unsigned int*>(smem)[0] = 0u;
    }
}
"#);
    smem = |extents| arena_bytes(w);
    contract {
        w[1] % 8 == 0 => "w's rows must be whole 16-byte lines: its column extent must be a multiple of 8",
        x[1] == w[1] => "x must have as many columns as w",
        y[0] == x[0] && y[1] == w[0] => "y must be x's rows by w's rows",
        arena_bytes(w) <= 227 * 1024 => "the weight tile does not fit the 227 KB of shared memory a CTA can have",
    }
    /// `y[b, r] = Σ_c x[b, c] · w[r, c]` in f32, rounded to bf16, for the `n x k` weight
    /// tile `w` that a [`gemv_prefetch`] of the same tile earlier in the task started to
    /// move into shared memory; `x` is `batch x k`, `y` is `batch x n` (overwritten).
    /// Without that prefetch the GPU reads `w` from global memory: the same values, more
    /// slowly.
    pub fn gemv_consume(w: TileRef<'_, bf16, 2>, x: TileRef<'_, bf16, 2>, mut y: TileMut<'_, bf16, 2>) {
        let ([n, k], [batch, _]) = (w.shape(), x.shape());
        for b in 0..batch {
            for r in 0..n {
                let acc: f32 = (0..k).map(|c| x.get([b, c]).to_f32() * w.get([r, c]).to_f32()).sum();
                y.set([b, r], bf16::from_f32(acc));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_halves_declare_the_same_arena_and_tie_their_extents() {
        assert_eq!(gemv_prefetch::smem(&[&[16, 256]]), 128 + 16 * 256 * 2);
        assert_eq!(gemv_consume::smem(&[&[16, 256], &[4, 256], &[4, 16]]), gemv_prefetch::smem(&[&[16, 256]]));
        const { assert!(gemv_prefetch::OP.uses_smem && gemv_consume::OP.uses_smem) };
        assert!(gemv_prefetch::contract(&[&[16, 100]]).unwrap_err().contains("multiple of 8"));
        assert!(gemv_prefetch::contract(&[&[64, 4096]]).unwrap_err().contains("227 KB"));
        assert_eq!(gemv_consume::contract(&[&[16, 256], &[4, 256], &[4, 16]]), Ok(()));
        assert!(gemv_consume::contract(&[&[16, 256], &[4, 128], &[4, 16]]).is_err());
        assert!(gemv_consume::contract(&[&[16, 256], &[4, 256], &[16, 4]]).is_err());
        // ops without `smem` declare none
        const { assert!(!crate::ops::add::OP.uses_smem) };
        assert_eq!(crate::ops::add::smem(&[&[4], &[4], &[4]]), 0);
    }
}
