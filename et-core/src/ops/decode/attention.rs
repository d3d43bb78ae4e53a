//! Grouped-query decode attention over a contiguous KV cache, split over KV chunks
//! (flash-decoding): [`attention_partial`] runs per (KV head, chunk) and writes the
//! chunk's unnormalised output with its running max and sum for each query head of the
//! group; [`attention_merge`] combines a KV head's chunks. The decode step's form,
//! [`attention_rope_split`], applies RoPE itself and splits the valid positions evenly
//! into a fixed number of pieces (so a short context still spreads over every piece);
//! [`attention_kv_append`] then writes the step's key and value into the cache.
//!
//! The query heads of a group share one pass over the chunk's K and V: a lane holds 8
//! dimensions of every query head and its output accumulators in registers; the D/8
//! lanes of a row group read one cache row (16-byte loads), so a warp reads 32·8/D rows
//! at a time with an online softmax per row group, then row groups and warps combine.
//! The fold of long chunks ([`attention_partial`], [`attention_rope_split_lazy`]) moves
//! its running max lazily and runs on the tensor cores (`mma.m16n8k16`, 16 rows a warp
//! step, the rows in the mma's M dimension and the query heads in N). On the CUDA cores
//! those chunks were bound by instruction issue, not by memory.

use super::decode_cuda;
use crate::dtype::bf16;
use crate::tile::{TileMut, TileRef};

/// The CUDA core of the split-KV ops: one chunk of one KV head for its `G` query heads.
macro_rules! chunk_cuda {
    ($body:literal) => {
        chunk_cuda!([] $body)
    };
    ([$($pre:expr),*] $body:literal) => {
        decode_cuda!([r#"
// One KV chunk for the G query heads whose values are in s_q[g * D + i] (shared memory,
// 16-byte aligned, as the floats of their bf16 values; the tensor-core fold at head dim
// 128 packs them over themselves): rows [0, valid) of k and v ([1, C, D]). Writes
// o (G x D, unnormalised) and ml (G x 2: max and sum). SG and SD are the group size and
// head dimension when the tiles give them at compile time (-1 otherwise): the register
// arrays then hold exactly G heads and the loops have constant bounds.
//
// A lane holds 8 dimensions of every query head and their output accumulators; the D/8
// lanes of a row group read one cache row with 16-byte loads, so a warp reads 32*8/D rows
// at a time, with an online softmax per row group; then the row groups of a warp combine
// by shuffles and the warps through shared memory. Two folds (LAZY):
//
// - LAZY false: each row group loads ET_ATTN_ROWS rows per step (2 unless -D in
//   ET_NVRTC_OPTIONS says otherwise, for side-by-side runs) and updates its online
//   softmax row by row; a chunk of a few rows runs on one warp. Tuned for the short
//   pieces of batch 1.
// - LAZY true (`chunk_rows`): two rows per row group at a time, in the log2 domain, with
//   the running max moved only when a score passes it by 2^8. Long chunks are bound by
//   the fold's instruction issue, not by memory (RESULTS run 22: ncu at 0.65 warps
//   issued per scheduler, DRAM at 38%): this fold skips most rescales, and streaming the
//   rows through a ring of bulk copies in shared memory instead was slower. The same
//   lazy fold runs on the tensor cores instead (`mma_fold`, below) unless ET_ATTN_NO_MMA.
//
// Row `xr` (-1: none) is not read from k and v but from `s_new` (shared memory, 16-byte
// aligned: the key's D bf16 values, then the value's): the new position of a decode step,
// whose key and value reach the cache only after every chunk has read it.
#ifndef ET_ATTN_ROWS
#define ET_ATTN_ROWS 2
#endif
// ET_ATTN_SIMT_TC=1 (in ET_NVRTC_OPTIONS) compiles the `_simt` ops with the tensor-core
// fold, so that one binary measures a stamp's choice between the two forms side by side.
#ifndef ET_ATTN_SIMT_TC
#define ET_ATTN_SIMT_TC 0
#endif

// 2^x (the MUFU instruction, as __expf uses it after its multiply)
__device__ __forceinline__ float attn_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// U loaded rows (`in`: the row exists) into a row group's online softmax, in the log2
// domain (the queries carry the factor log2(e), so a weight is 2^(s - m)). The running
// max moves lazily: only when a score exceeds it by more than ATTN_LAZY (weights up to
// 2^8 in f32 are exact enough) does the warp rescale, so most rows skip the rescale's
// exponentials and multiplies (the fold is issue-bound: RESULTS run 22). `mt` tracks the
// true max, to which the caller moves m once at the end (the partials' max is exact).
constexpr float ATTN_LAZY = 8.0f;
template <int U, int GM>
__device__ __forceinline__ void chunk_rows(const uint4 (&kb)[U], const uint4 (&vb)[U], const bool (&in)[U],
                                           const float (&qr)[GM][8], int G, int lanes, float (&m)[GM], float (&mt)[GM],
                                           float (&l)[GM], float (&acc)[GM][8]) {
    float s[U][GM];
    bool grow = false;
#pragma unroll
    for (int u = 0; u < U; ++u) {
        float kf[8];
        unpack8(kb[u], kf);
#pragma unroll
        for (int g = 0; g < GM; ++g) {
            if (g >= G) break;
            float d = 0.0f;
#pragma unroll
            for (int i = 0; i < 8; ++i) d += qr[g][i] * kf[i];
            for (int off = lanes / 2; off > 0; off >>= 1) d += __shfl_xor_sync(0xffffffffu, d, off);
            s[u][g] = in[u] ? d : __int_as_float(0xff800000); // -inf: no such row
            grow |= s[u][g] > m[g] + ATTN_LAZY;
            mt[g] = fmaxf(mt[g], s[u][g]);
        }
    }
    if (__any_sync(0xffffffffu, grow)) {
#pragma unroll
        for (int g = 0; g < GM; ++g) {
            if (g >= G) break;
            float mn = m[g];
#pragma unroll
            for (int u = 0; u < U; ++u) mn = fmaxf(mn, s[u][g]);
            const float corr = attn_ex2(m[g] - mn);
            l[g] *= corr;
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[g][i] *= corr;
            m[g] = mn;
        }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
        float vf[8];
        unpack8(vb[u], vf);
#pragma unroll
        for (int g = 0; g < GM; ++g) {
            if (g >= G) break;
            const float p = attn_ex2(s[u][g] - m[g]);
            l[g] += p;
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[g][i] += p * vf[i];
        }
    }
}

// The lazy fold on the tensor cores (`mma.m16n8k16`, bf16 in, f32 accumulate), head dim
// KD = 64 or 128, with the cache rows in the mma's M dimension and the query heads in N:
// Sᵀ = K·Qᵀ, then Oᵀ = Vᵀ·Pᵀ, so that one warp takes a block of 16 rows whole (RESULTS run
// 36). Every key row is loaded once, and N's 8 columns hold up to 8 heads, so a block
// costs KD/16 score mma and KD/16 output mma. (The fold before it put the heads in M,
// where 16 rows held at most 8 heads, and at head dim 128 paired two warps on the same
// rows, an output half each: both loaded the keys, and only L1, which the step's arena
// takes, made the second load cheap; the whole-head op alone was 10% slower with it.)
// The sums over the head dimension and over the rows do not depend on their order, so
// each side takes the order that lets a lane read whole 16-byte pieces of the cache: lane
// (g = lane / 4, t = lane % 4) reads dims [8t + 32c, 8t + 32c + 8) (c < KD / 32) of key
// rows g and 8 + g (k step s takes words 2(s % 2), 2(s % 2) + 1 of piece s / 2: the A
// fragment as loaded, the queries' B fragment packed to match), and dims [8g, 8g + 8)
// (and [64 + 8g, ..) at KD = 128) of value rows 2t, 2t + 1, 2t + 8, 2t + 9, which `prmt`
// pairs across rows into Vᵀ's A fragments; the dims of the lane's Oᵀ rows follow from
// those pieces (`fold_dim`). The lane's columns are heads 2t and 2t + 1. Pᵀ enters as
// the B operand: the scores' C fragment transposed 8 x 8 by `movmatrix`, as bf16 twice,
// its rounding and the rest (ET_ATTN_P_SPLIT, default 1), so the weights keep about 16
// bits as in the f32 fold. ET_ATTN_NO_MMA keeps the CUDA-core lazy fold for side-by-side
// runs.
#ifndef ET_ATTN_P_SPLIT
#define ET_ATTN_P_SPLIT 1
#endif
__device__ __forceinline__ unsigned attn_word(const uint4& v, int w) {
    return w == 0 ? v.x : (w == 1 ? v.y : (w == 2 ? v.z : v.w));
}
// Eight bf16 of cache row `row` at dim `d`: zeros past `valid`, the step's new key or value
// (`fresh`, shared memory) at row `xr`.
template <int KD, class T>
__device__ __forceinline__ uint4 attn_piece(const T& c, int row, int d, int valid, int xr, const et::bf16* fresh,
                                            bool vec) {
    if (row >= valid) return make_uint4(0, 0, 0, 0);
    if (row == xr) return *reinterpret_cast<const uint4*>(fresh + d);
    return load8<false>(c.ptr + (long long)row * c.stride[1], d, KD, c.stride[2], vec);
}
// The warps that fold one chunk together: the whole CTA (the split-KV ops), or one group of
// `attention_rope_heads`, which folds several KV heads at once, one group of warps each.
// A group's barriers are a named barrier of its own (1 + its index), so groups run apart.
struct AttnWarps {
    int warp;   // this warp within the group
    int warps;  // the group's warps
    int first;  // the group's first warp in the CTA
    int group;  // the group's index: its shared-memory slots and its barrier
    int groups; // the groups (1: the group is the whole CTA)
    __device__ static AttnWarps cta() { return AttnWarps{(int)(threadIdx.x >> 5), (int)(blockDim.x >> 5), 0, 0, 1}; }
    // this thread within the group, and the group's threads
    __device__ int thread() const { return (int)threadIdx.x - first * 32; }
    __device__ int threads() const { return warps * 32; }
    __device__ void sync() const {
        if (groups == 1) __syncthreads();
        else asm volatile("bar.sync %0, %1;" ::"r"(group + 1), "r"(warps * 32) : "memory");
    }
};

__device__ __forceinline__ void attn_mma(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// an 8 x 8 bf16 fragment (lane: row lane / 4, columns 2 (lane % 4) + 0, 1) transposed
__device__ __forceinline__ unsigned attn_trans(unsigned x) {
    unsigned y;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
    return y;
}
// the dim of Oᵀ tile i's row g (hi false) or g + 8 (hi true), for the lane of row group g
template <int KD>
__device__ __forceinline__ int fold_dim(int g, int i, bool hi) {
    return KD == 128 ? (hi ? 64 : 0) + 8 * g + i : 8 * g + 2 * i + (hi ? 1 : 0);
}
// The fold of rows [16 part, 16 part + 16), [16 (part + parts), ..) .. below `valid`: on
// return m[e] is the true max (log2 domain) of head 2t + e, l[e] the lane's part of its
// sum (the caller adds the 8 lanes of a column) and oc the Oᵀ fragments. The lane's query
// fragments for k steps 2c and 2c + 1 (dims 8t + 32c .. + 8 of head g, one uint4): at head
// dim 64 packed into registers from the floats s_q[g * 64 + i]; at 128 read from shared
// memory each step, where `pack_query_fragments` left them over the floats (s_q as uint4,
// entry 4Gc + lane), to keep the fold's registers down.
template <int KD, class K, class V>
__device__ __forceinline__ void mma_fold(const float* s_q, int G, K k, V v, int valid, float qs, bool vec,
                                         const et::bf16* s_new, int xr, int part, int parts, float (&m)[2],
                                         float (&l)[2], float (&oc)[KD / 16][4]) {
    static_assert(KD == 64 || KD == 128, "mma_fold: head dim 64 or 128");
    constexpr int KP = KD / 32;  // key pieces a row, and pairs of k steps of Sᵀ
    constexpr int MT = KD / 16;  // tiles of Oᵀ
    constexpr int VP = KD / 64;  // value pieces a row: dims 8g (and 64 + 8g)
    constexpr bool SHARED_Q = KD == 128;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const bool hv = g < G; // the lane's query fragments: head g, the B operand's column g
    const bool hm[2] = {2 * t < G, 2 * t + 1 < G};
    uint4 qr[SHARED_Q ? 1 : KP];
    if constexpr (!SHARED_Q) {
#pragma unroll
        for (int c = 0; c < KP; ++c) {
            const float* q = s_q + g * KD + 8 * (t + 4 * c);
            qr[c] = hv ? make_uint4(pack2(q[0], q[1]), pack2(q[2], q[3]), pack2(q[4], q[5]), pack2(q[6], q[7]))
                       : make_uint4(0u, 0u, 0u, 0u);
        }
    }
    const uint4* const qa4 = reinterpret_cast<const uint4*>(s_q);
    float mt[2] = {-1e30f, -1e30f};
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        m[e] = -1e30f;
        l[e] = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) oc[i][j] = 0.0f;
    // moves the running maxima to mn: the sums and the accumulators' columns rescale
    const auto move_max = [&](float mn0, float mn1) {
        const float c0 = attn_ex2(m[0] - mn0), c1 = attn_ex2(m[1] - mn1);
        l[0] *= c0;
        l[1] *= c1;
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            oc[i][0] *= c0;
            oc[i][2] *= c0;
            oc[i][1] *= c1;
            oc[i][3] *= c1;
        }
        m[0] = mn0;
        m[1] = mn1;
    };
    // the lane's pieces: key rows g and 8 + g at dims 8t + 32c; value rows 2t, 2t + 1,
    // 2t + 8, 2t + 9 at dims 8g + 64s
    const et::bf16* const kb = k.ptr + 8 * t;
    const et::bf16* const vb = v.ptr + 8 * g;
#pragma unroll 1
    for (int r0 = part * 16; r0 < valid; r0 += parts * 16) {
        // full: 16 rows of the cache, plain 16-byte loads with no per-piece branches
        const bool full = vec && r0 + 16 <= valid && (xr < r0 || xr >= r0 + 16);
        uint4 kq[2][KP], vq[VP][4];
        if (full) {
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int c = 0; c < KP; ++c) kq[j][c] = ld16(kb + (long long)(r0 + 8 * j + g) * k.stride[1] + 32 * c);
        } else {
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int c = 0; c < KP; ++c)
                    kq[j][c] = attn_piece<KD>(k, r0 + 8 * j + g, 8 * (t + 4 * c), valid, xr, s_new, vec);
        }
        // Sᵀ: the lane's scores are rows r0 + g (sc 0, 1) and r0 + 8 + g (sc 2, 3) of heads 2t, 2t + 1
        float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int c = 0; c < KP; ++c) {
            uint4 q;
            if constexpr (SHARED_Q) q = hv ? qa4[4 * G * c + lane] : make_uint4(0u, 0u, 0u, 0u);
            else q = qr[c];
            attn_mma(sc, kq[0][c].x, kq[1][c].x, kq[0][c].y, kq[1][c].y, q.x, q.y);
            attn_mma(sc, kq[0][c].z, kq[1][c].z, kq[0][c].w, kq[1][c].w, q.z, q.w);
        }
        // the values after the scores: loaded beside the keys they kept 32 more registers
        // live, and the accumulators went to local memory (ptxas, RESULTS run 36)
        if (full) {
#pragma unroll
            for (int s = 0; s < VP; ++s)
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    vq[s][i] = ld16(vb + (long long)(r0 + 2 * t + (i & 1) + 8 * (i >> 1)) * v.stride[1] + 64 * s);
        } else {
#pragma unroll
            for (int s = 0; s < VP; ++s)
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    vq[s][i] = attn_piece<KD>(v, r0 + 2 * t + (i & 1) + 8 * (i >> 1), 64 * s + 8 * g, valid, xr,
                                              s_new + KD, vec);
        }
        float bm[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const float lo = hm[e] && r0 + g < valid ? sc[e] * qs : __int_as_float(0xff800000);
            const float hi = hm[e] && r0 + 8 + g < valid ? sc[2 + e] * qs : __int_as_float(0xff800000);
            sc[e] = lo;
            sc[2 + e] = hi;
            float b = fmaxf(lo, hi);
            b = fmaxf(b, __shfl_xor_sync(0xffffffffu, b, 4));
            b = fmaxf(b, __shfl_xor_sync(0xffffffffu, b, 8));
            b = fmaxf(b, __shfl_xor_sync(0xffffffffu, b, 16));
            bm[e] = b;
            mt[e] = fmaxf(mt[e], b);
        }
        if (__any_sync(0xffffffffu, bm[0] > m[0] + ATTN_LAZY || bm[1] > m[1] + ATTN_LAZY))
            move_max(fmaxf(m[0], bm[0]), fmaxf(m[1], bm[1]));
        float p[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            p[j] = attn_ex2(sc[j] - m[j & 1]);
            l[j & 1] += p[j];
        }
        // Pᵀ as the B operand: rows 2t, 2t + 1 (b0) and 2t + 8, 2t + 9 (b1) of column (head) g
        const unsigned ph0 = pack2(p[0], p[1]), ph1 = pack2(p[2], p[3]);
        const unsigned b0 = attn_trans(ph0), b1 = attn_trans(ph1);
#if ET_ATTN_P_SPLIT
        const unsigned bl0 = attn_trans(pack2(p[0] - bf_lo(ph0), p[1] - bf_hi(ph0)));
        const unsigned bl1 = attn_trans(pack2(p[2] - bf_lo(ph1), p[3] - bf_hi(ph1)));
#endif
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            // Vᵀ tile i: rows fold_dim(g, i, false / true), columns (rows of the cache) 2t, 2t + 1 | 2t + 8, 2t + 9
            const int w = KD == 128 ? i >> 1 : i, slo = KD == 128 ? ((i & 1) ? 0x7632 : 0x5410) : 0x5410,
                      shi = KD == 128 ? slo : 0x7632, s_hi = KD == 128 ? 1 : 0;
            const unsigned a0 = __byte_perm(attn_word(vq[0][0], w), attn_word(vq[0][1], w), slo);
            const unsigned a2 = __byte_perm(attn_word(vq[0][2], w), attn_word(vq[0][3], w), slo);
            const unsigned a1 = __byte_perm(attn_word(vq[s_hi][0], w), attn_word(vq[s_hi][1], w), shi);
            const unsigned a3 = __byte_perm(attn_word(vq[s_hi][2], w), attn_word(vq[s_hi][3], w), shi);
            attn_mma(oc[i], a0, a1, a2, a3, b0, b1);
#if ET_ATTN_P_SPLIT
            attn_mma(oc[i], a0, a1, a2, a3, bl0, bl1);
#endif
        }
    }
    // the lazy maxima to the true ones
    move_max(mt[0], mt[1]);
}

// The tensor-core fold's query fragments at head dim 128, packed over the G x 128 floats of
// s_q (16-byte aligned) by the group `aw`: entry 4Gc + lane (lane < 4G: head lane / 4)
// holds dims 8 (lane % 4) + 32c .. + 8 of that head as bf16, half the floats' bytes.
// Every entry's floats are read before any entry is written.
__device__ __forceinline__ void pack_query_fragments(float* s_q, int G, const AttnWarps& aw) {
    const int n = 16 * G; // 4 pieces (c) x 4G lanes: at most 128, four per thread of one warp
    uint4 w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int e = aw.thread() + i * aw.threads(), c = e / (4 * G), ln = e - c * 4 * G;
        const float* q = s_q + (ln >> 2) * 128 + 8 * ((ln & 3) + 4 * c);
        if (e < n) w[i] = make_uint4(pack2(q[0], q[1]), pack2(q[2], q[3]), pack2(q[4], q[5]), pack2(q[6], q[7]));
    }
    aw.sync();
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int e = aw.thread() + i * aw.threads();
        if (e < n) reinterpret_cast<uint4*>(s_q)[e] = w[i];
    }
    aw.sync();
}

// Head h's max and sum over the warps of a group, from each warp's (max, sum) in s_m and
// s_lw (entry (gw0 + w) * 8 + h; a warp with no rows wrote a sum of 0): lane w of every
// warp reads warp w's entry and the warp reduces by shuffles, so each warp gets both in a
// few shuffle latencies (a loop over the warps' entries took a shared-memory round trip a
// warp, on the decode step's critical path: RESULTS run 37). `ex` is the fold's exponential.
template <class EX>
__device__ __forceinline__ void attn_head_stats(const float* s_m, const float* s_lw, int gw0, int warps, int h,
                                                EX ex, float& mx, float& sum) {
    const int lane = threadIdx.x & 31;
    const float mw = lane < warps ? s_m[(gw0 + lane) * 8 + h] : -1e30f;
    const float lw = lane < warps ? s_lw[(gw0 + lane) * 8 + h] : 0.0f;
    mx = mw;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    sum = lw > 0.0f ? lw * ex(mw - mx) : 0.0f;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
}

//
// HG > 1: the CTA folds up to HG chunks at once, one per group of warps (`aw`), each with
// shared-memory slots of its own. NORM: `o` takes the normalised output, o.store(g, i, x),
// and `ml` is not written (the whole cache in one chunk needs no merge). TC: the lazy fold
// runs on the tensor cores (`mma_fold`); false keeps it on the CUDA cores (the `_simt`
// ops), whose fewer registers leave the other ops of some megakernels faster.
template <int SG, int SD, bool LAZY, int HG = 1, bool NORM = false, bool TC = true, class K, class V, class O, class M>
__device__ __forceinline__ void attention_chunk(float* s_q, int G, int D, K k, V v, int valid, float scale, O o,
                                                M ml, const et::bf16* s_new = nullptr, int xr = -1,
                                                AttnWarps aw = AttnWarps::cta()) {
    constexpr int GM = SG >= 1 ? SG : 8, DM = SD >= 1 ? SD : 128;
    // the slots a group sums its warps' outputs in: fewer when groups share the SM's memory
    constexpr int SLOTS = HG == 1 ? 4 : 2;
    // LAZY folds in the log2 domain (chunk_rows): its maxima are log2-scaled until written
    const auto ex = [](float x) { return LAZY ? attn_ex2(x) : __expf(x); };
    constexpr float TO_LN = LAZY ? 0.69314718055994531f : 1.0f;
    __shared__ float s_m[32 * 8];
    __shared__ float s_lw[32 * 8];
    __shared__ float s_acc[HG * SLOTS * GM * DM];
    __shared__ float s_sum[HG * 8];
    const int lane = threadIdx.x & 31, warp = aw.warp, warps = aw.warps, gw0 = aw.first, lt = aw.thread();
    float* const acc0 = s_acc + aw.group * (SLOTS * GM * DM);
    if (valid <= 0) {
        // a chunk past the position: nothing to read (most chunks of a short context)
        for (int e = lt; e < G * D; e += aw.threads()) {
            if constexpr (NORM) o.store(e / D, e % D, 0.0f);
            else o(e / D, e % D) = 0.0f;
        }
        if constexpr (!NORM) {
            if (lt < G) {
                ml(lt, 0) = __int_as_float(0xff800000);
                ml(lt, 1) = 0.0f;
            }
        }
        return;
    }
    const bool vec = vec_rows(k.ptr, k.stride[1], k.stride[2]) && vec_rows(v.ptr, v.stride[1], v.stride[2]);
    float mine = -1e30f; // head lt's max over the warps, for thread lt < G
    float sum = 0.0f;    // head lt's sum over the warps (scaled to `mine`), for thread lt < G
    int slots;           // the shared-memory slots the warps' outputs were summed into
#ifdef ET_ATTN_NO_MMA
    constexpr bool MMA = false;
#else
    constexpr bool MMA = TC && LAZY && (SD == 64 || SD == 128);
#endif
    if constexpr (MMA) {
        // every warp folds its own blocks of 16 rows; lane (g, t) ends with heads 2t, 2t + 1
        constexpr int KD = SD == 128 ? 128 : 64, MT = KD / 16;
        const int g = lane >> 2, t = lane & 3;
        if constexpr (KD == 128) pack_query_fragments(s_q, G, aw);
        float m[2], l[2], oc[MT][4];
        mma_fold<KD>(s_q, G, k, v, valid, scale * 1.4426950408889634f, vec, s_new, xr, warp, warps, m, l, oc);
        float c[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            l[e] += __shfl_xor_sync(0xffffffffu, l[e], 4);
            l[e] += __shfl_xor_sync(0xffffffffu, l[e], 8);
            l[e] += __shfl_xor_sync(0xffffffffu, l[e], 16);
            if (g == 0 && 2 * t + e < G) {
                s_m[(gw0 + warp) * 8 + 2 * t + e] = m[e];
                s_lw[(gw0 + warp) * 8 + 2 * t + e] = l[e];
            }
        }
        aw.sync();
        c[0] = c[1] = 0.0f;
#pragma unroll
        for (int h = 0; h < GM; ++h) {
            if (h >= G) break;
            float mx, sm;
            attn_head_stats(s_m, s_lw, gw0, warps, h, ex, mx, sm);
#pragma unroll
            for (int e = 0; e < 2; ++e)
                if (h == 2 * t + e && l[e] > 0.0f) c[e] = attn_ex2(m[e] - mx);
            if (lt == h) {
                mine = mx;
                sum = sm;
            }
        }
        // the warps' rescaled outputs summed in SLOTS slots, round by round (as below); the
        // warps past the rows (a short piece's) hold nothing and take no round
        const int act = min(warps, (valid + 15) / 16), rounds = (act + SLOTS - 1) / SLOTS;
        slots = act < SLOTS ? act : SLOTS;
        for (int r = 0; r < rounds; ++r) {
            if (warp / SLOTS == r && warp < act) {
                float* slot = acc0 + (warp % SLOTS) * (GM * DM);
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    if (2 * t + e >= G) continue;
                    float* row = slot + (2 * t + e) * DM;
#pragma unroll
                    for (int i = 0; i < MT; ++i) {
                        const int dl = fold_dim<KD>(g, i, false), dh = fold_dim<KD>(g, i, true);
                        row[dl] = r == 0 ? oc[i][e] * c[e] : row[dl] + oc[i][e] * c[e];
                        row[dh] = r == 0 ? oc[i][2 + e] * c[e] : row[dh] + oc[i][2 + e] * c[e];
                    }
                }
            }
            aw.sync();
        }
    } else {
        const int lanes = D / 8, groups = 32 / lanes, rg = lane / lanes, d0 = (lane % lanes) * 8;
        // a warp takes R * groups rows per step: with no more valid rows than that (a short
        // context's last chunk), warp 0 does the whole chunk and no cross-warp combine runs
        constexpr int R = ET_ATTN_ROWS;
        const bool one_warp = !LAZY && valid <= R * groups;
        if (one_warp && warp != 0) return;
        float qr[GM][8], acc[GM][8], m[GM], l[GM];
#pragma unroll
        for (int g = 0; g < GM; ++g) {
            m[g] = -1e30f;
            l[g] = 0.0f;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                qr[g][i] = g < G ? s_q[g * D + d0 + i] * (LAZY ? scale * 1.4426950408889634f : scale) : 0.0f;
                acc[g][i] = 0.0f;
            }
        }
        if constexpr (LAZY) {
            // the trip count is the warp's (its lanes shuffle together); row groups past the
            // chunk's rows fold in nothing
            const int row_groups = warps * groups;
            float mt[GM];
#pragma unroll
            for (int g = 0; g < GM; ++g) mt[g] = -1e30f;
#pragma unroll 1
            for (int i = warp * groups; i < valid; i += 2 * row_groups) {
                uint4 kb[2], vb[2];
                bool in[2];
#pragma unroll
                for (int u = 0; u < 2; ++u) {
                    const int row = i + rg + u * row_groups;
                    in[u] = row < valid;
                    if (row == xr) {
                        kb[u] = *reinterpret_cast<const uint4*>(s_new + d0);
                        vb[u] = *reinterpret_cast<const uint4*>(s_new + D + d0);
                    } else {
                        kb[u] = in[u] ? load8<false>(k.ptr + (long long)row * k.stride[1], d0, D, k.stride[2], vec) : make_uint4(0, 0, 0, 0);
                        vb[u] = in[u] ? load8<false>(v.ptr + (long long)row * v.stride[1], d0, D, v.stride[2], vec) : make_uint4(0, 0, 0, 0);
                    }
                }
                chunk_rows<2, GM>(kb, vb, in, qr, G, lanes, m, mt, l, acc);
            }
            // the lazy max to the true one
#pragma unroll
            for (int g = 0; g < GM; ++g) {
                if (g >= G) break;
                const float corr = attn_ex2(m[g] - mt[g]);
                l[g] *= corr;
#pragma unroll
                for (int i = 0; i < 8; ++i) acc[g][i] *= corr;
                m[g] = mt[g];
            }
        } else {
            for (int base = warp * groups * R; base < valid; base += warps * groups * R) {
                uint4 kv[R], vv[R];
                int rows[R];
        #pragma unroll
                for (int u = 0; u < R; ++u) {
                    rows[u] = base + u * groups + rg;
                    const bool in = rows[u] < valid;
                    if (rows[u] == xr) {
                        kv[u] = *reinterpret_cast<const uint4*>(s_new + d0);
                        vv[u] = *reinterpret_cast<const uint4*>(s_new + D + d0);
                    } else {
                        kv[u] = in ? load8<false>(k.ptr + (long long)rows[u] * k.stride[1], d0, D, k.stride[2], vec) : make_uint4(0, 0, 0, 0);
                        vv[u] = in ? load8<false>(v.ptr + (long long)rows[u] * v.stride[1], d0, D, v.stride[2], vec) : make_uint4(0, 0, 0, 0);
                    }
                }
        #pragma unroll
                for (int u = 0; u < R; ++u) {
                    float kf[8], vf[8];
                    unpack8(kv[u], kf);
                    unpack8(vv[u], vf);
                    const bool in = rows[u] < valid;
        #pragma unroll
                    for (int g = 0; g < GM; ++g) {
                        if (g >= G) break;
                        float s = 0.0f;
        #pragma unroll
                        for (int i = 0; i < 8; ++i) s += qr[g][i] * kf[i];
                        for (int off = lanes / 2; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
                        if (!in) continue;
                        const float mn = fmaxf(m[g], s), corr = __expf(m[g] - mn), p = __expf(s - mn);
                        l[g] = l[g] * corr + p;
        #pragma unroll
                        for (int i = 0; i < 8; ++i) acc[g][i] = acc[g][i] * corr + p * vf[i];
                        m[g] = mn;
                    }
                }
            }
        }
        // combine the row groups of the warp (lanes `lanes` apart hold the same dimensions);
        // afterwards every lane of the warp holds the warp's m and l of each head
#pragma unroll
        for (int g = 0; g < GM; ++g) {
            if (g >= G) break;
            for (int off = lanes; off < 32; off <<= 1) {
                const float mo = __shfl_xor_sync(0xffffffffu, m[g], off), lo = __shfl_xor_sync(0xffffffffu, l[g], off);
                const float mn = fmaxf(m[g], mo), ca = ex(m[g] - mn), cb = ex(mo - mn);
                l[g] = l[g] * ca + lo * cb;
#pragma unroll
                for (int i = 0; i < 8; ++i) acc[g][i] = acc[g][i] * ca + __shfl_xor_sync(0xffffffffu, acc[g][i], off) * cb;
                m[g] = mn;
            }
            if (lane == 0) {
                s_m[(gw0 + warp) * 8 + g] = m[g];
                s_lw[(gw0 + warp) * 8 + g] = l[g];
            }
        }
        if (one_warp) {
#pragma unroll
            for (int g = 0; g < GM; ++g) {
                if (g >= G) break;
                if (lane < lanes) {
#pragma unroll
                    for (int i = 0; i < 8; ++i) {
                        if constexpr (NORM) o.store(g, d0 + i, l[g] > 0.0f ? acc[g][i] / l[g] : 0.0f);
                        else o(g, d0 + i) = acc[g][i];
                    }
                }
                if constexpr (!NORM) {
                    if (lane == 0) {
                        ml(g, 0) = l[g] > 0.0f ? m[g] * TO_LN : __int_as_float(0xff800000);
                        ml(g, 1) = l[g];
                    }
                }
            }
            return;
        }
        aw.sync();
        // The block's max per head, by a warp-wide reduction over the warps' maxima (every
        // warp computes it); then the warps' rescaled outputs are summed in 4 slots of shared
        // memory, round by round (warp w adds into slot w % 4 in round w / 4), with plain
        // stores: float atomics on shared memory are compare-and-swap loops, and 16 warps on
        // the same addresses serialise them (measured: 4 us of a chunk task).
        float c[GM];
#pragma unroll
        for (int g = 0; g < GM; ++g) {
            c[g] = 0.0f;
            if (g >= G) break;
            float mx, sm;
            attn_head_stats(s_m, s_lw, gw0, warps, g, ex, mx, sm);
            if (lt == g) {
                mine = mx;
                sum = sm;
            }
            c[g] = l[g] > 0.0f ? ex(m[g] - mx) : 0.0f;
        }
        // the warps past the rows hold nothing and take no round (warp w's first row is
        // w * step)
        const int step = LAZY ? groups : groups * R, act = min(warps, (valid + step - 1) / step);
        const int rounds = (act + SLOTS - 1) / SLOTS;
        slots = act < SLOTS ? act : SLOTS;
        for (int r = 0; r < rounds; ++r) {
            if (warp / SLOTS == r && warp < act && lane < lanes) {
                float* slot = acc0 + (warp % SLOTS) * (GM * DM);
#pragma unroll
                for (int g = 0; g < GM; ++g) {
                    if (g >= G) break;
#pragma unroll
                    for (int i = 0; i < 8; ++i) {
                        const float v = acc[g][i] * c[g];
                        slot[g * DM + d0 + i] = r == 0 ? v : slot[g * DM + d0 + i] + v;
                    }
                }
            }
            aw.sync();
        }
    }
    if constexpr (NORM) {
        if (lt < G) s_sum[aw.group * 8 + lt] = sum;
    }
    // the normalised output divides by the sums
    if constexpr (NORM) aw.sync();
    for (int e = lt; e < G * D; e += aw.threads()) {
        const int g = e / D, i = e % D;
        float t = 0.0f;
        for (int k = 0; k < slots; ++k) t += acc0[k * (GM * DM) + g * DM + i];
        if constexpr (NORM) {
            const float l = s_sum[aw.group * 8 + g];
            o.store(g, i, l > 0.0f ? t / l : 0.0f);
        } else {
            o(g, i) = t;
        }
    }
    if constexpr (!NORM) {
        if (lt < G) {
            ml(lt, 0) = sum > 0.0f ? mine * TO_LN : __int_as_float(0xff800000); // -inf: an empty chunk
            ml(lt, 1) = sum;
        }
    }
}

// The decode step's piece (`attention_rope_split`, and `attention_rope_split_lazy` with
// LAZY, `attention_rope_split_lazy_simt` with LAZY and not TC): RoPE of the queries and
// the new key, then the piece's rows of the cache.
template <bool LAZY, bool TC = true, class QKV, class P, class CS, class K, class V, class O, class M>
__device__ __forceinline__ void rope_split_piece(QKV qkv, P pos, CS cs, long long part, long long parts, float scale,
                                                 K kc, V vc, O o, M ml) {
    __shared__ __align__(16) float s_q[8 * 128];
    __shared__ __align__(16) et::bf16 s_new[2 * 128];
    constexpr int SG = O::template static_extent<0>(), SD = O::template static_extent<1>();
    static_assert(SG == -1 || (SG >= 1 && SG <= 8), "attention_rope_split(_lazy): 1 to 8 query heads per KV head");
    static_assert(SD == -1 || SD == 64 || SD == 128, "attention_rope_split(_lazy): the head dimension must be 64 or 128");
    const int G = SG >= 1 ? SG : o.shape[0], D = SD >= 1 ? SD : o.shape[1], half = D / 2, L = kc.shape[1];
    const int p = pos.ptr[0];
    // positions 0 ..= p, split evenly: this piece is [lo, hi); past the cache nothing is read
    const long long n = p < 0 ? 0 : (p < L ? (long long)p + 1 : (long long)L);
    const long long lo = part * n / parts, hi = (part + 1) * n / parts;
    const bool mine = lo <= p && p < hi; // the new position is this piece's last row
    const int valid = (int)(hi - lo);
    if (valid > 0) {
        // pair e of the G query heads and of the key (head G) turns by the same angle
        for (int t = threadIdx.x; t < (G + 1) * half; t += blockDim.x) {
            const int h = t / half, e = t - h * half;
            const float a = et::to_float(qkv(0, h * D + e)), b = et::to_float(qkv(0, h * D + e + half));
            const float cf = cs(0, e), sf = cs(0, e + half);
            const et::bf16 x = et::from_float<et::bf16>(a * cf - b * sf), y = et::from_float<et::bf16>(b * cf + a * sf);
            if (h < G) {
                s_q[h * D + e] = et::to_float(x);
                s_q[h * D + e + half] = et::to_float(y);
            } else if (mine) {
                s_new[e] = x;
                s_new[e + half] = y;
            }
        }
        if (mine)
            for (int e = threadIdx.x; e < D; e += blockDim.x) s_new[D + e] = qkv(0, (G + 1) * D + e);
        // the queries, and the new key and value, are read by other threads below
        __syncthreads();
    }
    K k = kc;
    V v = vc;
    k.ptr += lo * kc.stride[1];
    v.ptr += lo * vc.stride[1];
    attention_chunk<SG, SD, LAZY, 1, false, TC>(s_q, G, D, k, v, valid, scale, o, ml, s_new, mine ? valid - 1 : -1);
}
"# $(, $pre)*] $body)
    };
}

crate::tile_op! { cuda = chunk_cuda!(r#"
template <class Q, class K, class V, class N, class O, class M>
__device__ void attention_partial(Q q, K k, V v, N len, long long start, float scale, O o, M ml) {
    __shared__ __align__(16) float s_q[8 * 128];
    constexpr int SG = Q::template static_extent<0>(), SD = Q::template static_extent<1>();
    static_assert(SG == -1 || (SG >= 1 && SG <= 8), "attention_partial: 1 to 8 query heads per KV head");
    static_assert(SD == -1 || SD == 64 || SD == 128, "attention_partial: the head dimension must be 64 or 128");
    const int G = SG >= 1 ? SG : q.shape[0], D = SD >= 1 ? SD : q.shape[1], C = k.shape[1];
    const long long valid_ll = (long long)len.ptr[0] - start;
    const int valid = valid_ll < 0 ? 0 : (valid_ll > C ? C : (int)valid_ll);
    if (valid > 0) {
        for (int e = threadIdx.x; e < G * D; e += blockDim.x) s_q[e] = et::to_float(q(e / D, e % D));
        __syncthreads();
    }
    attention_chunk<SG, SD, true>(s_q, G, D, k, v, valid, scale, o, ml);
}
"#);
    contract {
        q[1] == 64 || q[1] == 128 => "the head dimension (q's columns) must be 64 or 128",
        q[0] >= 1 && q[0] <= 8 => "the query heads per KV head (q's rows) must be 1 to 8",
        k[0] == 1 && k[2] == q[1] => "k must be one KV head's chunk: [1, positions, q's columns]",
        v[0] == k[0] && v[1] == k[1] && v[2] == k[2] => "v must have k's extents",
        len[0] == 1 => "len must be one element (the number of valid cache positions)",
        o[0] == q[0] && o[1] == q[1] => "o must have q's extents",
        ml[0] == q[0] && ml[1] == 2 => "ml must be [q's rows, 2] (max and sum per query head)",
    }
    /// One KV chunk of decode attention for the `G` query heads `q` (`G x D`, D 64 or 128,
    /// G 1 to 8) of one KV head: `k` and `v` are the chunk `[1, C, D]` of that head's
    /// cache, starting at position `start`; positions from `len[0]` on are not yet valid
    /// (the run-time length). With `s_p = scale · q·k_p` over the chunk's valid positions,
    /// writes `ml[g] = [max_p s_p, Σ_p e^(s_p - max)]` and `o[g] = Σ_p e^(s_p - max) v_p`
    /// (unnormalised, f32). A chunk with no valid position writes `[-inf, 0]` and zeros.
    /// Its fold is the lazy one of [`attention_rope_split_lazy`].
    #[allow(clippy::too_many_arguments)]
    pub fn attention_partial(
        q: TileRef<'_, bf16, 2>,
        k: TileRef<'_, bf16, 3>,
        v: TileRef<'_, bf16, 3>,
        len: TileRef<'_, i32, 1>,
        start: i64,
        scale: f32,
        mut o: TileMut<'_, f32, 2>,
        mut ml: TileMut<'_, f32, 2>,
    ) {
        let [g, d] = q.shape();
        let valid = (len.get([0]) as i64 - start).clamp(0, k.shape()[1] as i64) as usize;
        let qs: Vec<f32> = (0..g * d).map(|e| q.get([e / d, e % d]).to_f32()).collect();
        chunk_reference(&qs, |p, i| (k.get([0, p, i]).to_f32(), v.get([0, p, i]).to_f32()), valid, scale, &mut o, &mut ml);
    }
}

/// The two forms of a RoPE split-KV attention piece: the same contract, arguments and
/// CPU half ([`rope_split_reference`]); only their CUDA differs.
macro_rules! rope_split_op {
    ($cuda:expr; $(#[$doc:meta])* $name:ident) => {
        crate::tile_op! { cuda = $cuda;
            contract {
                o[1] == 64 || o[1] == 128 => "the head dimension (o's columns) must be 64 or 128",
                o[0] >= 1 && o[0] <= 8 => "the query heads per KV head (o's rows) must be 1 to 8",
                qkv[0] == 1 && qkv[1] == (o[0] + 2) * o[1] => "qkv must be one row of G query heads, a key and a value: [1, (o's rows + 2) x o's columns]",
                pos[0] == 1 => "pos must be one element (the position)",
                cs[0] == 1 && cs[1] == o[1] => "cs must be the rope table row of the position: [1, o's columns]",
                kc[0] == 1 && kc[2] == o[1] => "kc must be one KV head's cache: [1, positions, o's columns]",
                vc[0] == kc[0] && vc[1] == kc[1] && vc[2] == kc[2] => "vc must have kc's extents",
                ml[0] == o[0] && ml[1] == 2 => "ml must be [o's rows, 2] (max and sum per query head)",
            }
            $(#[$doc])*
            #[allow(clippy::too_many_arguments)]
            pub fn $name(
                qkv: TileRef<'_, bf16, 2>,
                pos: TileRef<'_, i32, 1>,
                cs: TileRef<'_, f32, 2>,
                part: i64,
                parts: i64,
                scale: f32,
                kc: TileRef<'_, bf16, 3>,
                vc: TileRef<'_, bf16, 3>,
                mut o: TileMut<'_, f32, 2>,
                mut ml: TileMut<'_, f32, 2>,
            ) {
                rope_split_reference(qkv, pos, cs, part, parts, scale, kc, vc, &mut o, &mut ml);
            }
        }
    };
}

rope_split_op! { chunk_cuda!(r#"
template <class QKV, class P, class CS, class K, class V, class O, class M>
__device__ void attention_rope_split(QKV qkv, P pos, CS cs, long long part, long long parts, float scale, K kc, V vc,
                                     O o, M ml) {
    rope_split_piece<false>(qkv, pos, cs, part, parts, scale, kc, vc, o, ml);
}
"#);
    /// RoPE and piece `part` of `parts` of decode attention, for one sequence and one KV
    /// head at the run-time position `p = pos[0]`: `qkv` is `[1, (G + 2) · D]` (the `G`
    /// query heads, the key, the value: a row slice of a fused QKV projection), `kc` and
    /// `vc` that head's whole cache `[1, L, D]`, which holds positions `0 .. p` (read
    /// only). The `p + 1` positions `0 ..= p` are split evenly: piece `c` takes
    /// `[c·(p+1)/parts, (c+1)·(p+1)/parts)`, so every piece of a long context has work and
    /// the task graph does not depend on the position. The queries and the new key turn by
    /// the rotation `cs` of [`rope_table`](super::rope_table) at `p` (in f32, rounded to bf16 once); the piece that holds
    /// `p` takes its key and value from `qkv`, not from the cache ([`attention_kv_append`]
    /// writes them there once every piece has read the cache). Writes the piece's
    /// unnormalised output and `[max, sum]` per query head as [`attention_partial`]
    /// (`[-inf, 0]` and zeros for an empty piece); [`attention_merge`] combines the
    /// pieces. Positions at or past `L` are not read.
    attention_rope_split
}

rope_split_op! { chunk_cuda!(r#"
// ET_ATTN_NO_LAZY (in ET_NVRTC_OPTIONS) compiles this op as attention_rope_split, for
// side-by-side runs of the same stamps
#ifdef ET_ATTN_NO_LAZY
#define ET_ATTN_LAZY false
#else
#define ET_ATTN_LAZY true
#endif
template <class QKV, class P, class CS, class K, class V, class O, class M>
__device__ void attention_rope_split_lazy(QKV qkv, P pos, CS cs, long long part, long long parts, float scale, K kc,
                                          V vc, O o, M ml) {
    rope_split_piece<ET_ATTN_LAZY>(qkv, pos, cs, part, parts, scale, kc, vc, o, ml);
}
"#);
    /// [`attention_rope_split`] for long pieces: the same values up to rounding, with a
    /// fold of fewer instructions. Each row group takes two rows at a time, in the log2
    /// domain, and moves its running max only when a score passes it by a factor of 2^8,
    /// so most rows skip the rescale (the max written out is the true one). Long pieces
    /// are bound by instruction issue, not by memory: the Llama step with it is 4.6%,
    /// 6% and 8% faster at B = 8, 32 and 64 (RESULTS run 22). The fold runs on the tensor
    /// cores, 16 rows a warp step (at head dim 64 the step at B = 32 11% faster again,
    /// RESULTS run 23; head dim 128 since run 26, two warps a block of rows); the `_simt`
    /// form keeps it on the CUDA cores. [`attention_rope_split`]'s one-warp path suits
    /// pieces of a few rows; from about 128 rows a piece the lazy folds are faster (the
    /// Llama step at batch 1: RESULTS run 30).
    attention_rope_split_lazy
}

rope_split_op! { chunk_cuda!(r#"
template <class QKV, class P, class CS, class K, class V, class O, class M>
__device__ void attention_rope_split_lazy_simt(QKV qkv, P pos, CS cs, long long part, long long parts, float scale,
                                               K kc, V vc, O o, M ml) {
    rope_split_piece<true, ET_ATTN_SIMT_TC != 0>(qkv, pos, cs, part, parts, scale, kc, vc, o, ml);
}
"#);
    /// [`attention_rope_split_lazy`] with its fold on the CUDA cores at both head dims:
    /// the same values up to rounding, fewer registers. In a megakernel all ops share one
    /// register allocation, and the tensor-core fold's pressure made the GEMVs of
    /// llama-3.1-8b's B = 8 step 5% slower (more spill reloads in their loops) while its
    /// pieces of 512 rows gained nothing (RESULTS run 26): a megakernel picks the form
    /// that measures faster beside its other ops.
    attention_rope_split_lazy_simt
}

/// The CPU half of [`attention_rope_split`], [`attention_rope_split_lazy`] and
/// [`attention_rope_split_lazy_simt`].
#[allow(clippy::too_many_arguments)]
fn rope_split_reference(
    qkv: TileRef<'_, bf16, 2>,
    pos: TileRef<'_, i32, 1>,
    cs: TileRef<'_, f32, 2>,
    part: i64,
    parts: i64,
    scale: f32,
    kc: TileRef<'_, bf16, 3>,
    vc: TileRef<'_, bf16, 3>,
    o: &mut TileMut<'_, f32, 2>,
    ml: &mut TileMut<'_, f32, 2>,
) {
    let [g, d] = o.shape();
    let (p, l) = (pos.get([0]) as i64, kc.shape()[1] as i64);
    let n = if p < 0 { 0 } else { (p + 1).min(l) };
    let (lo, hi) = (part * n / parts, (part + 1) * n / parts);
    let valid = (hi - lo).max(0) as usize;
    let (qs, new_kv) = rope_inputs(|c| qkv.get([0, c]).to_f32(), &cs, g, d);
    let row = |r: usize, i: usize| {
        let at = lo as usize + r;
        if at as i64 == p {
            (new_kv[i], new_kv[d + i])
        } else {
            (kc.get([0, at, i]).to_f32(), vc.get([0, at, i]).to_f32())
        }
    };
    chunk_reference(&qs, row, valid, scale, o, ml);
}

/// The queries and the new key and value of one KV head's `[(G + 2) · D]` slice of a QKV
/// row (`qkv(c)`: column `c`), as the RoPE ops' CUDA has them: the `G` query heads and the
/// key turned by the rotation `cs` (in f32, rounded to bf16 once), the value as it is.
/// Returns `(q: G x D row-major, [key; value])`.
fn rope_inputs(qkv: impl Fn(usize) -> f32, cs: &TileRef<'_, f32, 2>, g: usize, d: usize) -> (Vec<f32>, Vec<f32>) {
    let mut qs = vec![0f32; g * d];
    let mut new_kv = vec![0f32; 2 * d];
    for e in 0..d / 2 {
        let (co, s) = (cs.get([0, e]), cs.get([0, e + d / 2]));
        for h in 0..=g {
            let (a, b) = (qkv(h * d + e), qkv(h * d + e + d / 2));
            let (x, y) = (bf16::from_f32(a * co - b * s).to_f32(), bf16::from_f32(b * co + a * s).to_f32());
            let (xs, ys) = if h < g { (h * d + e, h * d + e + d / 2) } else { (e, e + d / 2) };
            let dst = if h < g { &mut qs } else { &mut new_kv };
            (dst[xs], dst[ys]) = (x, y);
        }
    }
    for e in 0..d {
        new_kv[d + e] = qkv((g + 1) * d + e);
    }
    (qs, new_kv)
}

/// The CUDA of the whole-head ops: `rope_heads<TC>` and its output row.
macro_rules! heads_cuda {
    ($body:literal) => {
        chunk_cuda!([r#"
// One KV head's output in attention_rope_heads' row: query head g, dimension i at column
// base + g * D + i, rounded to the row's type.
template <class Y>
struct AttnHeadOut {
    Y y;
    int base, D;
    __device__ __forceinline__ void store(int g, int i, float x) const {
        typedef typename elem_of<decltype(y.ptr)>::type T;
        y(0, base + g * D + i) = et::from_float<T>(x);
    }
};

// attention_rope_heads (TC) and attention_rope_heads_simt: the task's KV heads fold at
// once, a group of warps each; a CTA of fewer warps than heads, or more heads than AH (the
// groups' shared-memory slots), takes rounds of heads.
template <bool TC, class QKV, class P, class CS, class K, class V, class Y>
__device__ __forceinline__ void rope_heads(QKV qkv, P pos, CS cs, float scale, K kc, V vc, Y out) {
    constexpr int SH = K::template static_extent<0>(), SD = K::template static_extent<2>(),
                  SW = Y::template static_extent<1>();
    constexpr int SG = SH >= 1 && SD >= 1 && SW >= 1 ? SW / (SH * SD) : -1;
    static_assert(SD == -1 || SD == 64 || SD == 128, "attention_rope_heads: the head dimension must be 64 or 128");
    static_assert(SG == -1 || (SG >= 1 && SG <= 8), "attention_rope_heads: 1 to 8 query heads per KV head");
    constexpr int AH = SH >= 1 ? (SH < 4 ? SH : 4) : 2, GM = SG >= 1 ? SG : 8, DM = SD >= 1 ? SD : 128;
    __shared__ __align__(16) float s_q[AH * GM * DM];
    __shared__ __align__(16) et::bf16 s_new[AH * 2 * DM];
    const int H = SH >= 1 ? SH : kc.shape[0], D = SD >= 1 ? SD : kc.shape[2], L = kc.shape[1], half = D / 2;
    const int G = SG >= 1 ? SG : out.shape[1] / (H * D), row = (G + 2) * D;
    const int p = pos.ptr[0];
    // positions 0 ..= p, the newest from qkv; a position past the cache reads all of it
    // and appends nothing
    const int valid = p < 0 ? 0 : (p < L ? p + 1 : L);
    const bool fresh = 0 <= p && p < L;
    const int warps = blockDim.x >> 5;
    int groups = warps < AH ? warps : AH;
    groups = groups < H ? groups : H;
    const int gw = warps / groups, grp = (int)(threadIdx.x >> 5) / gw; // grp == groups: a spare warp
    for (int h0 = 0; h0 < H; h0 += groups) {
        const int nh = H - h0 < groups ? H - h0 : groups;
        // the last round's groups are done with s_q and s_new
        if (h0 > 0) __syncthreads();
        if (valid > 0) {
            // pair e of the G query heads and of the key (head G) turns by the same angle
            for (int t = threadIdx.x; t < nh * (G + 1) * half; t += blockDim.x) {
                const int j = t / ((G + 1) * half), r = t - j * (G + 1) * half, h = r / half, e = r - h * half;
                const int c = (h0 + j) * row + h * D + e;
                const float a = et::to_float(qkv(0, c)), b = et::to_float(qkv(0, c + half));
                const float cf = cs(0, e), sf = cs(0, e + half);
                const et::bf16 x = et::from_float<et::bf16>(a * cf - b * sf), y = et::from_float<et::bf16>(b * cf + a * sf);
                if (h < G) {
                    s_q[j * GM * DM + h * D + e] = et::to_float(x);
                    s_q[j * GM * DM + h * D + e + half] = et::to_float(y);
                } else if (fresh) {
                    s_new[j * 2 * DM + e] = x;
                    s_new[j * 2 * DM + e + half] = y;
                }
            }
            if (fresh)
                for (int t = threadIdx.x; t < nh * D; t += blockDim.x)
                    s_new[(t / D) * 2 * DM + D + t % D] = qkv(0, (h0 + t / D) * row + (G + 1) * D + t % D);
            // the queries, and the new keys and values, are read by other warps below
            __syncthreads();
        }
        if (grp < nh) {
            const int h = h0 + grp;
            const AttnWarps aw{(int)(threadIdx.x >> 5) - grp * gw, gw, grp * gw, grp, groups};
            K k = kc;
            V v = vc;
            k.ptr += h * kc.stride[0];
            v.ptr += h * vc.stride[0];
            const AttnHeadOut<Y> o{out, h * G * D, D};
            const et::bf16* fresh_kv = s_new + grp * 2 * DM;
            attention_chunk<SG, SD, true, AH, true, TC>(s_q + grp * GM * DM, G, D, k, v, valid, scale, o, 0, fresh_kv,
                                                    fresh ? p : -1, aw);
            // the new key and value into the cache (the fold read them from s_new)
            if (fresh)
                for (int e = aw.thread(); e < D; e += aw.threads()) {
                    kc(h, p, e) = fresh_kv[e];
                    vc(h, p, e) = fresh_kv[D + e];
                }
        }
    }
}
"#] $body)
    };
}

/// The two forms of the whole-head op: the same contract, arguments and CPU half
/// ([`rope_heads_reference`]); only their fold differs.
macro_rules! rope_heads_op {
    ($cuda:expr; $(#[$doc:meta])* $name:ident) => {
        crate::tile_op! { cuda = $cuda;
            contract {
                kc[2] == 64 || kc[2] == 128 => "the head dimension (kc's last extent) must be 64 or 128",
                kc[0] >= 1 && kc[0] <= 8 => "the KV heads of a task (kc's first extent) must be 1 to 8",
                vc[0] == kc[0] && vc[1] == kc[1] && vc[2] == kc[2] => "vc must have kc's extents",
                out[0] == 1 && out[1] % (kc[0] * kc[2]) == 0 && out[1] >= kc[0] * kc[2] && out[1] <= 8 * kc[0] * kc[2] => "out must be one row of 1 to 8 query heads per KV head: [1, kc's heads x G x head dim]",
                qkv[0] == 1 && qkv[1] == out[1] + 2 * kc[0] * kc[2] => "qkv must be one row of each KV head's G query heads, key and value: [1, kc's heads x (G + 2) x head dim]",
                pos[0] == 1 => "pos must be one element (the position)",
                cs[0] == 1 && cs[1] == kc[2] => "cs must be the rope table row of the position: [1, head dim]",
            }
            $(#[$doc])*
            #[allow(clippy::too_many_arguments)]
            pub fn $name(
                qkv: TileRef<'_, bf16, 2>,
                pos: TileRef<'_, i32, 1>,
                cs: TileRef<'_, f32, 2>,
                scale: f32,
                kc: TileMut<'_, bf16, 3>,
                vc: TileMut<'_, bf16, 3>,
                out: TileMut<'_, bf16, 2>,
            ) {
                rope_heads_reference(qkv, pos, cs, scale, kc, vc, out);
            }
        }
    };
}

rope_heads_op! { heads_cuda!(r#"
template <class QKV, class P, class CS, class K, class V, class Y>
__device__ void attention_rope_heads(QKV qkv, P pos, CS cs, float scale, K kc, V vc, Y out) {
    rope_heads<true>(qkv, pos, cs, scale, kc, vc, out);
}
"#);
    /// Decode attention of one sequence over `H` KV heads' whole caches, with RoPE and the
    /// KV append: the split-KV pair [`attention_rope_split`] with one piece, then
    /// [`attention_merge`] and [`attention_kv_append`], as one task. `qkv` is
    /// `[1, H · (G + 2) · D]` (per KV head its `G` query heads, key and value, as a fused
    /// QKV row holds them), `kc` and `vc` the heads' caches `[H, L, D]`, `out` `[1, H · G · D]`.
    /// At the run-time position `p = pos[0]` the queries and the new key turn by `cs` (a
    /// row of [`rope_table`](super::rope_table)); each query head attends to the positions
    /// `0 ..= p` (`p` from `qkv`, the rest from the cache; `0 .. L` when `p ≥ L`) and
    /// writes its normalised output, rounded to bf16; then the key and value go to the
    /// caches' row `p` (none when `p` is outside `0 .. L`). The heads fold at once, a
    /// group of warps each (up to four groups; more heads take rounds), through the lazy
    /// fold of [`attention_rope_split_lazy`]: a task of several heads does in one task
    /// and without a merge what those ops do in `H` pieces and `H` merges, which pays
    /// where pieces are many (the Llama step from batch 32, RESULTS run 24).
    attention_rope_heads
}

rope_heads_op! { heads_cuda!(r#"
template <class QKV, class P, class CS, class K, class V, class Y>
__device__ void attention_rope_heads_simt(QKV qkv, P pos, CS cs, float scale, K kc, V vc, Y out) {
    rope_heads<ET_ATTN_SIMT_TC != 0>(qkv, pos, cs, scale, kc, vc, out);
}
"#);
    /// [`attention_rope_heads`] with its fold on the CUDA cores at both head dims: the same
    /// values up to rounding, fewer registers. The tensor-core fold made llama-3.1-8b's
    /// whole-head attention at B = 32 26% faster but its GEMVs up to 33% slower (more
    /// spill reloads in their loops: one register allocation serves every op of a
    /// megakernel), 12% slower a step in all (RESULTS run 26); at B = 64 it is 15% faster.
    attention_rope_heads_simt
}

/// The CPU half of [`attention_rope_heads`] and [`attention_rope_heads_simt`].
fn rope_heads_reference(
    qkv: TileRef<'_, bf16, 2>,
    pos: TileRef<'_, i32, 1>,
    cs: TileRef<'_, f32, 2>,
    scale: f32,
    mut kc: TileMut<'_, bf16, 3>,
    mut vc: TileMut<'_, bf16, 3>,
    mut out: TileMut<'_, bf16, 2>,
) {
    let [heads, l, d] = kc.shape();
    let g = out.shape()[1] / (heads * d);
    let p = pos.get([0]) as i64;
    let valid = if p < 0 { 0 } else { (p + 1).min(l as i64) as usize };
    let fresh = (0..l as i64).contains(&p).then_some(p as usize);
    for h in 0..heads {
        let at = h * (g + 2) * d;
        let (qs, new_kv) = rope_inputs(|c| qkv.get([0, at + c]).to_f32(), &cs, g, d);
        let row = |r: usize, i: usize| match fresh {
            Some(f) if f == r => (new_kv[i], new_kv[d + i]),
            _ => (kc.get([h, r, i]).to_f32(), vc.get([h, r, i]).to_f32()),
        };
        let (_, sums, o) = chunk_values(&qs, row, valid, scale, d);
        for (gi, sum) in sums.iter().enumerate() {
            for i in 0..d {
                let y = if *sum > 0.0 { o[gi * d + i] / sum } else { 0.0 };
                out.set([0, (h * g + gi) * d + i], bf16::from_f32(y));
            }
        }
        if let Some(f) = fresh {
            for i in 0..d {
                kc.set([h, f, i], bf16::from_f32(new_kv[i]));
                vc.set([h, f, i], bf16::from_f32(new_kv[d + i]));
            }
        }
    }
}

crate::tile_op! { cuda = decode_cuda!(r#"
template <class QKV, class P, class CS, class K, class V>
__device__ void attention_kv_append(QKV qkv, P pos, CS cs, K kc, V vc) {
    const int H = kc.shape[0], D = kc.shape[2], row = qkv.shape[1] / H, G = row / D - 2, half = D / 2, L = kc.shape[1];
    const int p = pos.ptr[0];
    if (p < 0 || p >= L) return;
    for (int t = threadIdx.x; t < H * half; t += blockDim.x) {
        const int h = t / half, e = t - h * half, k0 = h * row + G * D;
        const float a = et::to_float(qkv(0, k0 + e)), b = et::to_float(qkv(0, k0 + e + half));
        const float cf = cs(0, e), sf = cs(0, e + half);
        kc(h, p, e) = et::from_float<et::bf16>(a * cf - b * sf);
        kc(h, p, e + half) = et::from_float<et::bf16>(b * cf + a * sf);
    }
    for (int t = threadIdx.x; t < H * D; t += blockDim.x) {
        const int h = t / D, e = t - h * D;
        vc(h, p, e) = qkv(0, h * row + (G + 1) * D + e);
    }
}
"#);
    contract {
        kc[2] == 64 || kc[2] == 128 => "the head dimension (kc's last extent) must be 64 or 128",
        qkv[0] == 1 && kc[0] >= 1 && qkv[1] % (kc[0] * kc[2]) == 0 && qkv[1] / (kc[0] * kc[2]) >= 3 => "qkv must be one row of the query heads, key and value of each of kc's KV heads: [1, kc's heads x (G + 2) x kc's last extent]",
        pos[0] == 1 => "pos must be one element (the position)",
        cs[0] == 1 && cs[1] == kc[2] => "cs must be the rope table row of the position: [1, kc's last extent]",
        vc[0] == kc[0] && vc[1] == kc[1] && vc[2] == kc[2] => "vc must have kc's extents",
    }
    /// Appends a decode step's keys and values to the caches of `H` KV heads at the
    /// run-time position `p = pos[0]`: `qkv` is the `[1, H · (G + 2) · D]` row of those
    /// heads, each as [`attention_rope_split`] takes it (the `G` query heads, the key, the
    /// value); each key turns by the rotation `cs` exactly as there and goes to
    /// `kc[h, p, :]`, each value to `vc[h, p, :]` (`kc` and `vc` are `[H, L, D]`). A
    /// position outside `0 .. L` writes nothing.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_kv_append(
        qkv: TileRef<'_, bf16, 2>,
        pos: TileRef<'_, i32, 1>,
        cs: TileRef<'_, f32, 2>,
        mut kc: TileMut<'_, bf16, 3>,
        mut vc: TileMut<'_, bf16, 3>,
    ) {
        let [heads, positions, d] = kc.shape();
        let row = qkv.shape()[1] / heads;
        let g = row / d - 2;
        let p = pos.get([0]);
        if p < 0 || p as usize >= positions {
            return;
        }
        let at = p as usize;
        for h in 0..heads {
            let (k0, v0) = (h * row + g * d, h * row + (g + 1) * d);
            for e in 0..d / 2 {
                let (co, s) = (cs.get([0, e]), cs.get([0, e + d / 2]));
                let (a, b) = (qkv.get([0, k0 + e]).to_f32(), qkv.get([0, k0 + e + d / 2]).to_f32());
                kc.set([h, at, e], bf16::from_f32(a * co - b * s));
                kc.set([h, at, e + d / 2], bf16::from_f32(b * co + a * s));
            }
            for e in 0..d {
                vc.set([h, at, e], qkv.get([0, v0 + e]));
            }
        }
    }
}

/// The CPU half of a chunk: `q` holds the `G x D` query heads row-major, `kv(p, i)` the key
/// and value of row `p`, dimension `i`; over rows `0 .. valid`, writes each head's
/// unnormalised output to `o` and its `[max, sum]` to `ml` (`[-inf, 0]` and zeros when
/// `valid` is 0).
fn chunk_reference(
    q: &[f32],
    kv: impl Fn(usize, usize) -> (f32, f32),
    valid: usize,
    scale: f32,
    o: &mut TileMut<'_, f32, 2>,
    ml: &mut TileMut<'_, f32, 2>,
) {
    let [g, d] = o.shape();
    let (maxima, sums, out) = chunk_values(&q[..g * d], kv, valid, scale, d);
    for gi in 0..g {
        ml.set([gi, 0], maxima[gi]);
        ml.set([gi, 1], sums[gi]);
        for i in 0..d {
            o.set([gi, i], out[gi * d + i]);
        }
    }
}

/// The values of [`chunk_reference`] for the query heads `q` (`G x D` row-major, `D =
/// d`): each head's max and sum, and its unnormalised output (`G x D`).
fn chunk_values(
    q: &[f32],
    kv: impl Fn(usize, usize) -> (f32, f32),
    valid: usize,
    scale: f32,
    d: usize,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let g = q.len() / d;
    let (mut maxima, mut sums, mut out) = (vec![0f32; g], vec![0f32; g], vec![0f32; g * d]);
    for gi in 0..g {
        let s: Vec<f32> = (0..valid).map(|p| scale * (0..d).map(|i| q[gi * d + i] * kv(p, i).0).sum::<f32>()).collect();
        let m = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let e: Vec<f32> = s.iter().map(|s| (s - m).exp()).collect();
        (maxima[gi], sums[gi]) = (m, e.iter().sum());
        for i in 0..d {
            out[gi * d + i] = (0..valid).map(|p| e[p] * kv(p, i).1).sum();
        }
    }
    (maxima, sums, out)
}

crate::tile_op! { cuda = decode_cuda!(r#"
// A thread per output element, one pass with an online rescale over the chunks, 16 at a
// time whose loads are all in flight together (the merge sits on the decode step's
// critical path: one memory round per 16 chunks).
template <class O, class M, class Y>
__device__ void attention_merge(O o, M ml, Y out) {
    typedef typename elem_of<decltype(out.ptr)>::type T;
    const int D = o.shape[1], W = out.shape[1], G = out.shape[0] * W / D, S = o.shape[0] / G;
    for (int e = threadIdx.x; e < G * D; e += blockDim.x) {
        const int g = e / D, i = e % D;
        float mx = __int_as_float(0xff800000), num = 0.0f, den = 0.0f;
        for (int s0 = 0; s0 < S; s0 += 16) {
            float m[16], l[16], v[16];
#pragma unroll
            for (int u = 0; u < 16; ++u) {
                const int s = s0 + u;
                const bool in = s < S;
                m[u] = in ? ml(s * G + g, 0) : 0.0f;
                l[u] = in ? ml(s * G + g, 1) : 0.0f;
                v[u] = in ? o(s * G + g, i) : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < 16; ++u) {
                if (!(l[u] > 0.0f)) continue; // an empty chunk (or one past S)
                const float mn = fmaxf(mx, m[u]), keep = __expf(mx - mn), c = __expf(m[u] - mn);
                num = num * keep + c * v[u];
                den = den * keep + c * l[u];
                mx = mn;
            }
        }
        out(e / W, e % W) = et::from_float<T>(den > 0.0f ? num / den : 0.0f);
    }
}
"#);
    contract {
        o[1] >= 1 && (out[0] * out[1]) % o[1] == 0 => "out must hold whole heads of o's columns (the head dimension)",
        out[0] * out[1] >= o[1] && o[0] % (out[0] * out[1] / o[1]) == 0 => "o must stack whole chunks of out's heads: [S x G, head dim]",
        ml[0] == o[0] && ml[1] == 2 => "ml must be [o's rows, 2]",
    }
    /// Merges the `S` chunks of [`attention_partial`] for the `G` query heads of one KV
    /// head: `o` is `S·G x D` and `ml` `S·G x 2` (chunk `s`, query head `g` at row
    /// `s·G + g`); the attention output `Σ_s e^(m_s - m) o_s / Σ_s e^(m_s - m) l_s` of head
    /// `g`, dimension `i`, is element `g·D + i` of `out` in row-major order: `out` is
    /// `G x D`, or one row `1 x G·D` of a `[batch, heads · D]` activation. Empty chunks
    /// (sum 0) are skipped; a head with no valid position at all gets zeros.
    pub fn attention_merge<T: crate::dtype::Element>(
        o: TileRef<'_, f32, 2>,
        ml: TileRef<'_, f32, 2>,
        mut out: TileMut<'_, T, 2>,
    ) {
        let (d, [_, w]) = (o.shape()[1], out.shape());
        let g = out.len() / d;
        let s = o.shape()[0] / g;
        for gi in 0..g {
            let live: Vec<usize> = (0..s).filter(|&si| ml.get([si * g + gi, 1]) > 0.0).collect();
            let mx = live.iter().map(|&si| ml.get([si * g + gi, 0])).fold(f32::NEG_INFINITY, f32::max);
            let den: f32 = live.iter().map(|&si| (ml.get([si * g + gi, 0]) - mx).exp() * ml.get([si * g + gi, 1])).sum();
            for i in 0..d {
                let num: f32 = live.iter().map(|&si| (ml.get([si * g + gi, 0]) - mx).exp() * o.get([si * g + gi, i])).sum();
                let e = gi * d + i;
                out.set([e / w, e % w], T::from_f32(if den > 0.0 { num / den } else { 0.0 }));
            }
        }
    }
}
