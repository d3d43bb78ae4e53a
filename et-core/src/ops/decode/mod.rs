//! Decode operators: the bandwidth-bound tile ops of a transformer decode step (bf16
//! storage, f32 accumulation), each a CUDA device function, a CPU reference and a contract.
//!
//! The CUDA of every op here is a template over its tile types (`template <class W, ..>`)
//! and touches a tile through `ptr`, `shape[d]`, `stride[d]` and, where an extent picks a
//! code path or sizes register arrays (the GEMVs' batch, attention's group and head
//! dimension), the tile type's `static_extent<d>()`: with a compile-time extent (every
//! megakernel's tiles are `et::Tile<T, R, et::Ext<..>>`) only the path that extent needs
//! is instantiated, with constant loop bounds, which keeps NVRTC's compile time down; with
//! -1 (run-time extents) the op instantiates every path and picks one at run time. The
//! slow paths of the 16-byte loads and stores (row tails, unaligned or strided tiles) are
//! rolled loops for the same reason: each call site costs a few instructions.
//!
//! Each op runs with the whole CTA (any multiple of 32 threads up to 1024) and streams
//! its tiles with 16-byte vector loads where the inner stride is 1 and the rows are
//! 16-byte aligned (checked at run time, scalar loads otherwise), several loads in flight
//! per thread, f32 accumulation and warp-shuffle reductions.
//!
//! Read-only weights (the `w` of the GEMVs, the norm weights, the embedding table) are
//! read through the non-coherent path (`ld.global.nc`): they must not be written by any
//! task of the same launch. Activations and the KV cache are read with ordinary loads, so
//! an earlier task of the same launch may write them.

mod argmax;
mod attention;
mod elementwise;
mod gemv;
mod lookup;
mod merge_gemv;
mod norm;
mod norm_gemv;
mod rope;

pub use argmax::{argmax_merge, argmax_partial};
pub use attention::{
    attention_kv_append, attention_merge, attention_partial, attention_rope_heads, attention_rope_heads_simt,
    attention_rope_split, attention_rope_split_lazy, attention_rope_split_lazy_simt,
};
pub use elementwise::{elementwise_add, elementwise_scale};
pub use gemv::{
    matvec, matvec_prefetch, matvec_prefetch_pair, matvec_residual, matvec_silu, matvec_split, reduce_split,
    reduce_split_residual,
};
pub use lookup::{embed, next_positions};
pub use merge_gemv::attention_merge_matvec_residual;
pub use norm::{rms_norm, rms_norm_residual, rms_norm_split_residual};
pub use norm_gemv::{rms_norm_matvec, rms_norm_matvec_silu};
pub use rope::{ROPE_TABLE_FLOATS, kv_append, llama3_inv_freq, rope_llama3, rope_sin_cos, rope_table};

/// The CUDA helpers every decode op's text starts with (each op's text is compiled in a
/// namespace of its own, so each carries its copy; unused copies cost NVRTC nothing
/// measurable, since they are inline functions that are never instantiated): element
/// type of a tile, bf16 bit unpacking, 16-byte loads and stores with an
/// aligned/contiguous check and a scalar fallback.
macro_rules! decode_cuda {
    ($body:literal) => {
        $crate::ops::decode::decode_cuda!([] $body)
    };
    ([$($pre:expr),*] $body:literal) => {
        concat!(
            r#"
template <class P> struct elem_of;
template <class T> struct elem_of<T*> { typedef T type; };
template <class T> struct elem_of<const T*> { typedef T type; };

// The two bf16 of a 32-bit word as floats: the lower half is the element at the lower address.
__device__ __forceinline__ float bf_lo(unsigned int u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float bf_hi(unsigned int u) { return __uint_as_float(u & 0xffff0000u); }
__device__ __forceinline__ void unpack8(const uint4& v, float (&f)[8]) {
    f[0] = bf_lo(v.x); f[1] = bf_hi(v.x); f[2] = bf_lo(v.y); f[3] = bf_hi(v.y);
    f[4] = bf_lo(v.z); f[5] = bf_hi(v.z); f[6] = bf_lo(v.w); f[7] = bf_hi(v.w);
}
__device__ __forceinline__ unsigned int pack2(float a, float b) {
    return (unsigned int)et::from_float<et::bf16>(a).bits | ((unsigned int)et::from_float<et::bf16>(b).bits << 16);
}
__device__ __forceinline__ uint4 pack8(const float (&f)[8]) {
    return make_uint4(pack2(f[0], f[1]), pack2(f[2], f[3]), pack2(f[4], f[5]), pack2(f[6], f[7]));
}
// 16-byte loads: `nc` for weights that no task of the launch writes (streamed once, kept
// out of L1), plain for activations that an earlier task may have written.
__device__ __forceinline__ uint4 ld16_nc(const void* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ uint4 ld16(const void* p) {
    uint4 v;
    asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ void st16(void* p, const uint4& v) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
// Whether rows of 8 bf16 starting at `p + r * row_stride` (inner stride `col_stride`) can
// be read with 16-byte loads: contiguous, and every row start 16-byte aligned.
__device__ __forceinline__ bool vec_rows(const void* p, long long row_stride, long long col_stride) {
    return col_stride == 1 && (row_stride & 7) == 0 && (((unsigned long long)p) & 15) == 0;
}
// Eight bf16 of a row, `row[c * stride]` for c in [k, k + 8), zero past `n`, read one at
// a time: the slow path of `load8`. The loop stays rolled so that each call site costs a
// few instructions, not eight loads with their checks (it runs only at a row's tail or on
// tiles that cannot take 16-byte loads). With -DET_LOAD8_SLOW_NOINLINE=1 it is one
// function per op instead, called: less code a layer (RESULTS run 51), some spills.
#ifndef ET_LOAD8_SLOW_NOINLINE
#define ET_LOAD8_SLOW_NOINLINE 0
#endif
#if ET_LOAD8_SLOW_NOINLINE
__device__ __noinline__
#else
__device__ __forceinline__
#endif
uint4 load8_slow(const et::bf16* row, int k, int n, long long stride) {
    unsigned long long lo = 0, hi = 0;
#pragma unroll 1
    for (int i = 0; i < 8 && k + i < n; ++i) {
        const unsigned long long h = row[(long long)(k + i) * stride].bits;
        if (i < 4) lo |= h << (16 * i);
        else hi |= h << (16 * (i - 4));
    }
    return make_uint4((unsigned int)lo, (unsigned int)(lo >> 32), (unsigned int)hi, (unsigned int)(hi >> 32));
}
// Eight bf16 of a row, `row[c * stride]` for c in [k, k + 8), zero past `n`: one 16-byte
// load when `vec` and the eight are inside the row, element loads otherwise.
template <bool NC>
__device__ __forceinline__ uint4 load8(const et::bf16* row, int k, int n, long long stride, bool vec) {
    if (vec && k + 8 <= n) return NC ? ld16_nc(row + k) : ld16(row + k);
    return load8_slow(row, k, n, stride);
}
// Stores the eight bf16 of `v` (as `pack8` makes them) to `row[c * stride]` for c in
// [k, k + 8) and c < n: one 16-byte store when `vec` and the eight are inside the row,
// element stores (a rolled loop, as in `load8_slow`) otherwise.
__device__ __forceinline__ void store8(et::bf16* row, int k, int n, long long stride, bool vec, const uint4& v) {
    if (vec && k + 8 <= n) {
        st16(row + k, v);
        return;
    }
    const unsigned long long lo = v.x | ((unsigned long long)v.y << 32), hi = v.z | ((unsigned long long)v.w << 32);
#pragma unroll 1
    for (int i = 0; i < 8 && k + i < n; ++i)
        row[(long long)(k + i) * stride].bits = (unsigned short)((i < 4 ? lo : hi) >> (16 * (i & 3)));
}
// How a CTA's warps share the rows of a `B`-row tile: `per` warps a row, `rows` rows at a
// time (warps past `rows * per` idle). All rows at once puts every row's loads in flight
// together, where one row at a time paid a memory latency per row (RMSNorm of 1024 tiles
// of 16 x 4096 on an H100: 35% of the copy bandwidth, 64–69% in row groups, RESULTS run
// 41); a single row keeps the whole CTA. `-DET_NORM_ROW_AT_A_TIME` compiles the old
// order, for measurements.
__device__ __forceinline__ void row_groups(int B, int& per, int& rows) {
    const int warps = blockDim.x >> 5;
#ifdef ET_NORM_ROW_AT_A_TIME
    per = warps;
#else
    per = B >= warps ? 1 : warps / (B > 0 ? B : 1);
#endif
    rows = warps / per;
}
// The sum over the `per` warps of this thread's row group (`row_groups`), for every thread
// of the group; every thread of the CTA calls it (uses `red`, 32 floats of shared memory;
// ends with a barrier).
__device__ __forceinline__ float group_sum(float v, float* red, int per) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, first = warp / per * per;
    v = et::warp_sum(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    const int warps = blockDim.x >> 5;
    float t = 0.0f;
    if (per == warps) {
        t = et::warp_sum(lane < warps ? red[lane] : 0.0f);
    } else if (first + per <= warps) { // an idle warp's group may run past the CTA's warps
        for (int i = 0; i < per; ++i) t += red[first + i];
    }
    __syncthreads();
    return t;
}
// The pieces of 8 elements in flight per thread in the row-group loops of `rms_norm` and
// its residual form: each batch issues all its loads before it uses one, so that a
// thread's loads overlap (a loop of load, use, load cannot hoist a load above `load8`'s
// branch). 16 x 4096 tiles on an H100 (RESULTS run 41): 2 pieces 55%, 4 64%, 8 69%.
#ifndef ET_NORM_PIECES
#define ET_NORM_PIECES 8
#endif
// The second pass of a norm's row: `out[k] = row[k] · inv · w[k]` for this thread's pieces
// (from `first`, every `step` elements), P pieces' loads in flight before any is used.
template <int P, class W>
__device__ __forceinline__ void norm_scale_row(const et::bf16* row, long long rs, const W& w, float inv, et::bf16* out,
                                               long long os, int first, int step, int D, bool vec) {
    const uint4 zero = make_uint4(0, 0, 0, 0);
    for (int k0 = first; k0 < D; k0 += P * step) {
        uint4 v[P], g[P];
#pragma unroll
        for (int u = 0; u < P; ++u) {
            const int k = k0 + u * step;
            v[u] = k < D ? load8<false>(row, k, D, rs, vec) : zero;
            g[u] = k < D ? load8<true>(w.ptr, k, D, w.stride[0], vec) : zero;
        }
#pragma unroll
        for (int u = 0; u < P; ++u) {
            const int k = k0 + u * step;
            if (k >= D) break;
            float f[8], h[8];
            unpack8(v[u], f);
            unpack8(g[u], h);
#pragma unroll
            for (int i = 0; i < 8; ++i) f[i] = f[i] * inv * h[i];
            store8(out, k, D, os, vec, pack8(f));
        }
    }
}
// Block-wide sum for every thread (uses `red`, 32 floats of shared memory; ends with a barrier).
__device__ __forceinline__ float block_sum(float v, float* red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = et::warp_sum(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float t = lane < warps ? red[lane] : 0.0f;
    t = et::warp_sum(t);
    __syncthreads();
    return t;
}
"#,
            $($pre,)*
            "#line ",
            line!(),
            " \"",
            file!(),
            "\"\n",
            $body
        )
    };
}
pub(crate) use decode_cuda;
