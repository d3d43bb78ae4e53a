//! Grouped-query decode attention over a contiguous KV cache, split over KV chunks
//! (flash-decoding): [`attention_partial`] runs per (KV head, chunk) and writes the
//! chunk's unnormalised output with its running max and sum for each query head of the
//! group; [`attention_merge`] combines a KV head's chunks.
//!
//! The query heads of a group share one pass over the chunk's K and V: a lane holds 8
//! dimensions of every query head and its output accumulators in registers; the D/8
//! lanes of a row group read one cache row (16-byte loads), so a warp reads 32·8/D rows
//! at a time with an online softmax per row group, then row groups and warps combine.

use super::decode_cuda;
use crate::dtype::bf16;
use crate::tile::{TileMut, TileRef};

crate::tile_op! { cuda = decode_cuda!(r#"
template <class Q, class K, class V, class N, class O, class M>
__device__ void attention_partial(Q q, K k, V v, N len, long long start, float scale, O o, M ml) {
    __shared__ float s_m[32 * 8];
    __shared__ float s_l[8];
    __shared__ float s_o[8 * 128];
    // the group size and head dimension as compile-time constants where the tiles give
    // them (every megakernel's case): the register arrays then hold exactly G heads and the
    // loops over heads and lanes have constant bounds; at most 8 heads otherwise
    constexpr int SG = Q::template static_extent<0>(), SD = Q::template static_extent<1>();
    static_assert(SG == -1 || (SG >= 1 && SG <= 8), "attention_partial: 1 to 8 query heads per KV head");
    static_assert(SD == -1 || SD == 64 || SD == 128, "attention_partial: the head dimension must be 64 or 128");
    constexpr int GM = SG >= 1 ? SG : 8;
    const int G = SG >= 1 ? SG : q.shape[0], D = SD >= 1 ? SD : q.shape[1], C = k.shape[1];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int lanes = D / 8, groups = 32 / lanes, rg = lane / lanes, d0 = (lane % lanes) * 8;
    const long long valid_ll = (long long)len.ptr[0] - start;
    const int valid = valid_ll < 0 ? 0 : (valid_ll > C ? C : (int)valid_ll);
    const bool vec = vec_rows(q.ptr, q.stride[0], q.stride[1]) && vec_rows(k.ptr, k.stride[1], k.stride[2]) &&
                     vec_rows(v.ptr, v.stride[1], v.stride[2]);
    // this lane's 8 dimensions of every query head, pre-scaled
    float qr[GM][8], acc[GM][8], m[GM], l[GM];
#pragma unroll
    for (int g = 0; g < GM; ++g) {
        m[g] = -1e30f;
        l[g] = 0.0f;
        float f[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (g < G) unpack8(load8<false>(q.ptr + g * q.stride[0], d0, D, q.stride[1], vec), f);
#pragma unroll
        for (int i = 0; i < 8; ++i) { qr[g][i] = f[i] * scale; acc[g][i] = 0.0f; }
    }
    for (int base = warp * groups * 2; base < valid; base += warps * groups * 2) {
        // two rows per row group in flight
        uint4 kv[2], vv[2];
        int rows[2];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
            rows[u] = base + u * groups + rg;
            const bool in = rows[u] < valid;
            kv[u] = in ? load8<false>(k.ptr + (long long)rows[u] * k.stride[1], d0, D, k.stride[2], vec) : make_uint4(0, 0, 0, 0);
            vv[u] = in ? load8<false>(v.ptr + (long long)rows[u] * v.stride[1], d0, D, v.stride[2], vec) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < 2; ++u) {
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
    // combine the row groups of the warp (lanes `lanes` apart hold the same dimensions)
#pragma unroll
    for (int g = 0; g < GM; ++g) {
        if (g >= G) break;
        for (int off = lanes; off < 32; off <<= 1) {
            const float mo = __shfl_xor_sync(0xffffffffu, m[g], off), lo = __shfl_xor_sync(0xffffffffu, l[g], off);
            const float mn = fmaxf(m[g], mo), ca = __expf(m[g] - mn), cb = __expf(mo - mn);
            l[g] = l[g] * ca + lo * cb;
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[g][i] = acc[g][i] * ca + __shfl_xor_sync(0xffffffffu, acc[g][i], off) * cb;
            m[g] = mn;
        }
    }
    // combine the warps: the block's max per head, then each warp adds its rescaled share
    for (int e = threadIdx.x; e < 8 * 128; e += blockDim.x) s_o[e] = 0.0f;
    if (threadIdx.x < 8) s_l[threadIdx.x] = 0.0f;
    if (lane == 0) {
#pragma unroll
        for (int g = 0; g < GM; ++g) {
            if (g >= G) break;
            s_m[warp * 8 + g] = m[g];
        }
    }
    __syncthreads();
#pragma unroll
    for (int g = 0; g < GM; ++g) {
        if (g >= G) break;
        float mx = -1e30f;
        for (int w = 0; w < warps; ++w) mx = fmaxf(mx, s_m[w * 8 + g]);
        const float c = l[g] > 0.0f ? __expf(m[g] - mx) : 0.0f;
        if (lane < lanes) {
#pragma unroll
            for (int i = 0; i < 8; ++i) atomicAdd(&s_o[g * D + d0 + i], acc[g][i] * c);
        }
        if (lane == 0) atomicAdd(&s_l[g], l[g] * c);
        m[g] = mx;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < G * D; e += blockDim.x) o(e / D, e % D) = s_o[e];
    if (threadIdx.x < G) {
        float mx = -1e30f;
        for (int w = 0; w < warps; ++w) mx = fmaxf(mx, s_m[w * 8 + threadIdx.x]);
        const float l = s_l[threadIdx.x];
        ml(threadIdx.x, 0) = l > 0.0f ? mx : __int_as_float(0xff800000); // -inf: an empty chunk
        ml(threadIdx.x, 1) = l;
    }
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
        for gi in 0..g {
            let s: Vec<f32> = (0..valid)
                .map(|p| scale * (0..d).map(|i| q.get([gi, i]).to_f32() * k.get([0, p, i]).to_f32()).sum::<f32>())
                .collect();
            let m = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let e: Vec<f32> = s.iter().map(|s| (s - m).exp()).collect();
            ml.set([gi, 0], m);
            ml.set([gi, 1], e.iter().sum());
            for i in 0..d {
                o.set([gi, i], (0..valid).map(|p| e[p] * v.get([0, p, i]).to_f32()).sum());
            }
        }
    }
}

crate::tile_op! { cuda = decode_cuda!(r#"
template <class O, class M, class Y>
__device__ void attention_merge(O o, M ml, Y out) {
    typedef typename elem_of<decltype(out.ptr)>::type T;
    const int G = out.shape[0], D = out.shape[1], S = o.shape[0] / G;
    for (int e = threadIdx.x; e < G * D; e += blockDim.x) {
        const int g = e / D, i = e % D;
        float mx = __int_as_float(0xff800000);
        for (int s = 0; s < S; ++s) if (ml(s * G + g, 1) > 0.0f) mx = fmaxf(mx, ml(s * G + g, 0));
        float num = 0.0f, den = 0.0f;
        for (int s = 0; s < S; ++s) {
            const float l = ml(s * G + g, 1);
            if (!(l > 0.0f)) continue;
            const float c = __expf(ml(s * G + g, 0) - mx);
            num += c * o(s * G + g, i);
            den += c * l;
        }
        out(g, i) = et::from_float<T>(den > 0.0f ? num / den : 0.0f);
    }
}
"#);
    contract {
        out[0] >= 1 && o[0] % out[0] == 0 => "o must stack whole chunks: its rows a multiple of out's (S chunks x G heads)",
        o[1] == out[1] => "o must have out's columns (the head dimension)",
        ml[0] == o[0] && ml[1] == 2 => "ml must be [o's rows, 2]",
    }
    /// Merges the `S` chunks of [`attention_partial`] for one KV head: `o` is `S·G x D`
    /// and `ml` `S·G x 2` (chunk `s`, query head `g` at row `s·G + g`), `out` the `G x D`
    /// attention output `Σ_s e^(m_s - m) o_s / Σ_s e^(m_s - m) l_s`. Empty chunks (sum 0)
    /// are skipped; a head with no valid position at all gets zeros.
    pub fn attention_merge<T: crate::dtype::Element>(
        o: TileRef<'_, f32, 2>,
        ml: TileRef<'_, f32, 2>,
        mut out: TileMut<'_, T, 2>,
    ) {
        let [g, d] = out.shape();
        let s = o.shape()[0] / g;
        for gi in 0..g {
            let live: Vec<usize> = (0..s).filter(|&si| ml.get([si * g + gi, 1]) > 0.0).collect();
            let mx = live.iter().map(|&si| ml.get([si * g + gi, 0])).fold(f32::NEG_INFINITY, f32::max);
            let den: f32 = live.iter().map(|&si| (ml.get([si * g + gi, 0]) - mx).exp() * ml.get([si * g + gi, 1])).sum();
            for i in 0..d {
                let num: f32 = live.iter().map(|&si| (ml.get([si * g + gi, 0]) - mx).exp() * o.get([si * g + gi, i])).sum();
                out.set([gi, i], T::from_f32(if den > 0.0 { num / den } else { 0.0 }));
            }
        }
    }
}
