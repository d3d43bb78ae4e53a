//! Rotary position embedding in the Llama 3 form, and the KV-cache append, both at a
//! position read at run time from an `i32` tensor (the DSL's scalars are tile indices,
//! dims and literals; a decode position changes every step without recompiling).

use super::decode_cuda;
use crate::dtype::bf16;
use crate::tile::{TileMut, TileRef};

/// The rotation frequency of pair `i` of a head of `dim` elements, as Hugging Face's
/// `_compute_llama3_parameters`: `theta^(-2i/dim)`, divided by `factor` for wavelengths
/// above `original / low`, kept below `original / high`, and interpolated between.
/// Computed in f64 (the CUDA does the same), so the angles of long positions agree.
pub fn llama3_inv_freq(i: usize, dim: usize, theta: f64, factor: f64, low: f64, high: f64, original: f64) -> f64 {
    let inv = 1.0 / theta.powf((2 * i) as f64 / dim as f64);
    let wavelen = 2.0 * std::f64::consts::PI / inv;
    if wavelen < original / high {
        inv
    } else if wavelen > original / low {
        inv / factor
    } else {
        let smooth = (original / wavelen - low) / (high - low);
        (1.0 - smooth) * inv / factor + smooth * inv
    }
}

/// The CUDA of [`llama3_inv_freq`] and of the rotation angle's sine and cosine, shared by
/// every op that applies RoPE (each op's text carries its own copy, in its namespace).
macro_rules! rope_cuda {
    () => {
        r#"
// theta^(-2i/dim) as exp2(-(2i/dim) log2(theta)): within a few f64 ulps of pow's result
// (the angles of 32k positions move by ~1e-11 rad) at a fraction of pow's latency, which
// sits on the decode step's critical path
__device__ __forceinline__ double llama3_inv_freq(int i, int dim, double theta, double factor, double low, double high,
                                                  double original) {
    const double inv = exp2(-((double)(2 * i) / (double)dim) * log2(theta));
    const double wavelen = 2.0 * 3.14159265358979323846 / inv;
    if (wavelen < original / high) return inv;
    if (wavelen > original / low) return inv / factor;
    const double smooth = (original / wavelen - low) / (high - low);
    return (1.0 - smooth) * inv / factor + smooth * inv;
}
// The sine and cosine (f64, rounded to f32) of pair i's angle at position p.
__device__ __forceinline__ void rope_sincos(int p, int i, int dim, float theta, float factor, float low, float high,
                                            float original, float& sf, float& cf) {
    double s, c;
    sincos((double)p * llama3_inv_freq(i, dim, theta, factor, low, high, original), &s, &c);
    sf = (float)s;
    cf = (float)c;
}
"#
    };
}

/// The sine and cosine of pair `i`'s angle `p · llama3_inv_freq(i, ..)` for a head of
/// `dim` elements, computed in f64 and rounded to f32: what every RoPE op rotates by.
#[allow(clippy::too_many_arguments)]
pub fn rope_sin_cos(
    p: i32,
    i: usize,
    dim: usize,
    theta: f32,
    factor: f32,
    low: f32,
    high: f32,
    original: f32,
) -> (f32, f32) {
    let f = llama3_inv_freq(i, dim, theta as f64, factor as f64, low as f64, high as f64, original as f64);
    let (s, c) = (p as f64 * f).sin_cos();
    (s as f32, c as f32)
}

/// The floats of `rope_llama3`'s table of sines and cosines in shared memory (8 KB): the
/// head dimension it takes is at most this, and a task's positions go through it
/// `ROPE_TABLE_FLOATS / D` at a time (16 at head dimension 128).
pub const ROPE_TABLE_FLOATS: usize = 2048;

/// The rows of `rows` that take position `p` of `positions`: rows are grouped by
/// position, `rows / positions` consecutive rows each (the contract makes it whole).
fn rows_of_position(rows: usize, positions: usize, p: usize) -> std::ops::Range<usize> {
    let per = rows / positions;
    p * per..(p + 1) * per
}

crate::tile_op! { cuda = decode_cuda!([rope_cuda!()] r#"
// The 8-pair pieces a thread rotates at once: all of a batch's loads are issued before the
// first is used (in place, a load after a store to `x` could not be hoisted above it).
// Blocks of 8 sequences on an H100 (RESULTS run 42): 2 pieces 68.4% of the copy bandwidth,
// 4 65.5%, 8 46.4%.
#ifndef ET_ROPE_PIECES
#define ET_ROPE_PIECES 2
#endif
// Loads the batch of pieces `u0 + i * blockDim.x` (i < ET_ROPE_PIECES, below `units`) of the
// rows from `r0`: each piece is 8 pairs, its first halves in `lo`, its second in `hi`.
template <class X>
__device__ __forceinline__ void rope_load(const X& x, int r0, int ppr, int half, int units, int u0, uint4 (&lo)[ET_ROPE_PIECES],
                                          uint4 (&hi)[ET_ROPE_PIECES]) {
#pragma unroll
    for (int i = 0; i < ET_ROPE_PIECES; ++i) {
        const int u = u0 + i * (int)blockDim.x;
        if (u < units) {
            const et::bf16* row = x.ptr + (long long)(r0 + u / ppr) * x.stride[0] + (u % ppr) * 8;
            lo[i] = ld16(row);
            hi[i] = ld16(row + half);
        }
    }
}
// The table's shared memory: static, so that a megakernel has one copy whatever the tile
// types of its calls (a `__shared__` array in the template would be one per instantiation),
// and no arena, which leaves a prefetch in flight there alone. Its size is the Rust
// `ROPE_TABLE_FLOATS`.
#define ET_ROPE_TABLE_FLOATS 2048
__device__ __forceinline__ float* rope_table_smem() {
    __shared__ __align__(16) float table[ET_ROPE_TABLE_FLOATS];
    return table;
}
template <class X, class P>
__device__ void rope_llama3(X x, P pos, float theta, float factor, float low, float high, float original) {
    const int N = x.shape[0], D = x.shape[1], half = D / 2, S = pos.shape[0];
    if (N == 0 || S == 0 || half == 0) return;
    const int per = N / S;
    // the positions whose rows the table holds at once (the contract keeps D within it)
    const int fit = ET_ROPE_TABLE_FLOATS / D, chunk = fit < S ? fit : S;
    float* table = rope_table_smem();
    const bool vec = (half & 7) == 0 && vec_rows(x.ptr, x.stride[0], x.stride[1]);
    const int ppr = half / 8;
#pragma unroll 1
    for (int s0 = 0; s0 < S; s0 += chunk) {
        const int sn = S - s0 < chunk ? S - s0 : chunk, r0 = s0 * per, units = sn * per * ppr;
        uint4 lo[ET_ROPE_PIECES], hi[ET_ROPE_PIECES];
        // the first batch is in flight while the table is computed
        if (vec) rope_load(x, r0, ppr, half, units, threadIdx.x, lo, hi);
        __syncthreads(); // the previous chunk's (or call's) table is read
        for (int j = threadIdx.x; j < sn * half; j += blockDim.x) {
            const int s = j / half, e = j % half;
            float sf, cf;
            rope_sincos(pos.ptr[(long long)(s0 + s) * pos.stride[0]], e, D, theta, factor, low, high, original, sf, cf);
            table[s * D + e] = cf;
            table[s * D + half + e] = sf;
        }
        __syncthreads();
        if (vec) {
#pragma unroll 1
            for (int u0 = threadIdx.x; u0 < units; u0 += ET_ROPE_PIECES * (int)blockDim.x) {
                uint4 a[ET_ROPE_PIECES], b[ET_ROPE_PIECES];
#pragma unroll
                for (int i = 0; i < ET_ROPE_PIECES; ++i) {
                    const int u = u0 + i * (int)blockDim.x;
                    if (u >= units) break;
                    const int c = (u % ppr) * 8;
                    // 16-byte aligned: D is a multiple of 16 here, c of 8
                    const float4* cs = reinterpret_cast<const float4*>(table + (u / ppr / per) * D + c);
                    const float4 c0 = cs[0], c1 = cs[1], s0v = cs[half / 4], s1v = cs[half / 4 + 1];
                    const float co8[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
                    const float si8[8] = {s0v.x, s0v.y, s0v.z, s0v.w, s1v.x, s1v.y, s1v.z, s1v.w};
                    float f[8], g[8];
                    unpack8(lo[i], f);
                    unpack8(hi[i], g);
#pragma unroll
                    for (int k = 0; k < 8; ++k) {
                        const float co = co8[k], si = si8[k];
                        const float p = f[k] * co - g[k] * si, q = g[k] * co + f[k] * si;
                        f[k] = p;
                        g[k] = q;
                    }
                    a[i] = pack8(f);
                    b[i] = pack8(g);
                }
                // the next batch's loads go out before this batch's stores
                const int next = u0 + ET_ROPE_PIECES * (int)blockDim.x;
                if (next < units) rope_load(x, r0, ppr, half, units, next, lo, hi);
#pragma unroll
                for (int i = 0; i < ET_ROPE_PIECES; ++i) {
                    const int u = u0 + i * (int)blockDim.x;
                    if (u >= units) break;
                    et::bf16* row = x.ptr + (long long)(r0 + u / ppr) * x.stride[0] + (u % ppr) * 8;
                    st16(row, a[i]);
                    st16(row + half, b[i]);
                }
            }
        } else {
            // element by element: odd strides, unaligned rows, or half not a multiple of 8
#pragma unroll 1
            for (int j = threadIdx.x; j < sn * per * half; j += blockDim.x) {
                const int r = r0 + j / half, e = j % half;
                const float* cs = table + ((r - r0) / per) * D;
                const float a = et::to_float(x(r, e)), b = et::to_float(x(r, e + half));
                x(r, e) = et::from_float<et::bf16>(a * cs[e] - b * cs[half + e]);
                x(r, e + half) = et::from_float<et::bf16>(b * cs[e] + a * cs[half + e]);
            }
        }
    }
}
"#);
    contract {
        x[1] % 2 == 0 && x[1] <= ROPE_TABLE_FLOATS => "the head dimension (x's columns) must be even and at most 2048",
        pos[0] >= 1 && x[0] % pos[0] == 0 => "pos must hold one position per equal group of x's rows (at least one, dividing x's rows)",
    }
    /// Rotates each row (head) of `x`, `N x D`, in place: the rows are `S` equal groups of
    /// consecutive rows (`S` = `pos`'s length; the heads of one sequence after another),
    /// and group `s` turns by position `pos[s]`. Pairs `(e, e + D/2)` turn by
    /// `pos · inv_freq(e)` ([`llama3_inv_freq`] with `theta`, the scaling `factor`, the
    /// `low` and `high` frequency factors and the `original` context length; Llama 3.1:
    /// 500000, 8, 1, 4, 8192). The angle and its sine and cosine are computed in f64, the
    /// rotation in f32, rounded once. Call it on the q heads and on the k heads (before
    /// [`kv_append`]).
    ///
    /// On the GPU a task computes the sines and cosines of its positions once, into a
    /// table in shared memory ([`ROPE_TABLE_FLOATS`]), while its first rows load,
    /// and streams the rows in 16-byte pieces, several in flight a thread: give a task
    /// many sequences' heads, since a few heads are all fixed cost.
    pub fn rope_llama3(
        mut x: TileMut<'_, bf16, 2>,
        pos: TileRef<'_, i32, 1>,
        theta: f32,
        factor: f32,
        low: f32,
        high: f32,
        original: f32,
    ) {
        let [n, d] = x.shape();
        let positions = pos.shape()[0];
        for p in 0..positions {
            let rows = rows_of_position(n, positions, p);
            for e in 0..d / 2 {
                let (s, c) = rope_sin_cos(pos.get([p]), e, d, theta, factor, low, high, original);
                for hi in rows.clone() {
                    let (a, b) = (x.get([hi, e]).to_f32(), x.get([hi, e + d / 2]).to_f32());
                    x.set([hi, e], bf16::from_f32(a * c - b * s));
                    x.set([hi, e + d / 2], bf16::from_f32(b * c + a * s));
                }
            }
        }
    }
}

crate::tile_op! { cuda = decode_cuda!(r#"
// The 8-element pieces a thread copies at once (all loads before the first store).
#ifndef ET_APPEND_PIECES
#define ET_APPEND_PIECES 4
#endif
template <class S, class P, class C>
__device__ void kv_append(S src, P pos, C cache) {
    const int N = src.shape[0], D = src.shape[1], L = cache.shape[1], NP = pos.shape[0];
    if (N == 0 || NP == 0) return;
    const int per = N / NP, ppr = (D + 7) / 8, units = N * ppr;
    const bool vec = vec_rows(src.ptr, src.stride[0], src.stride[1]) &&
                     vec_rows(cache.ptr, cache.stride[0], cache.stride[2]) && (cache.stride[1] & 7) == 0;
#pragma unroll 1
    for (int u0 = threadIdx.x; u0 < units; u0 += ET_APPEND_PIECES * (int)blockDim.x) {
        uint4 v[ET_APPEND_PIECES];
        int p[ET_APPEND_PIECES];
#pragma unroll
        for (int i = 0; i < ET_APPEND_PIECES; ++i) {
            const int u = u0 + i * (int)blockDim.x;
            if (u < units) {
                const int h = u / ppr;
                v[i] = load8<false>(src.ptr + (long long)h * src.stride[0], (u % ppr) * 8, D, src.stride[1], vec);
                p[i] = pos.ptr[(long long)(h / per) * pos.stride[0]];
            }
        }
#pragma unroll
        for (int i = 0; i < ET_APPEND_PIECES; ++i) {
            const int u = u0 + i * (int)blockDim.x;
            if (u >= units) break;
            if (p[i] < 0 || p[i] >= L) continue;
            const int h = u / ppr;
            et::bf16* dst = cache.ptr + (long long)h * cache.stride[0] + (long long)p[i] * cache.stride[1];
            store8(dst, (u % ppr) * 8, D, cache.stride[2], vec, v[i]);
        }
    }
}
"#);
    contract {
        pos[0] >= 1 && src[0] % pos[0] == 0 => "pos must hold one position per equal group of src's rows (at least one, dividing src's rows)",
        cache[0] == src[0] && cache[2] == src[1] => "cache must be [src's rows (heads), positions, src's columns]",
    }
    /// `cache[h, pos[s], :] = src[h, :]` for every row (head) `h` of `src`, `N x D`: appends
    /// one step's keys (or values) to the cache tile `N x L x D`. The rows are `S` equal
    /// groups of consecutive rows (`S` = `pos`'s length, a sequence's heads each), and
    /// group `s` goes to the run-time position `pos[s]`; a position outside `0 .. L`
    /// writes nothing for its rows.
    pub fn kv_append(src: TileRef<'_, bf16, 2>, pos: TileRef<'_, i32, 1>, mut cache: TileMut<'_, bf16, 3>) {
        let [n, d] = src.shape();
        let positions = pos.shape()[0];
        for s in 0..positions {
            let p = pos.get([s]);
            if p < 0 || p as usize >= cache.shape()[1] {
                continue;
            }
            for hi in rows_of_position(n, positions, s) {
                for k in 0..d {
                    cache.set([hi, p as usize, k], src.get([hi, k]));
                }
            }
        }
    }
}

crate::tile_op! { cuda = decode_cuda!([rope_cuda!()] r#"
template <class P, class T>
__device__ void rope_table(P pos, float theta, float factor, float low, float high, float original, T cs) {
    const int half = cs.shape[1] / 2, p = pos.ptr[0];
    for (int e = threadIdx.x; e < half; e += blockDim.x) {
        float sf, cf;
        rope_sincos(p, e, 2 * half, theta, factor, low, high, original, sf, cf);
        cs(0, e) = cf;
        cs(0, e + half) = sf;
    }
}
"#);
    contract {
        pos[0] == 1 => "pos must be one element (the position)",
        cs[0] == 1 && cs[1] % 2 == 0 => "cs must be one row of an even head dimension: [1, D]",
    }
    /// The rotation of every pair of a `D`-wide head at the position `pos[0]`, once for all
    /// heads and layers of a decode step: `cs[0, e]` is the cosine and `cs[0, D/2 + e]` the
    /// sine of pair `e`'s angle ([`rope_sin_cos`]: the angle in f64, rounded to f32), which
    /// [`crate::ops::attention_rope_split`] and [`crate::ops::attention_kv_append`] read
    /// instead of computing the f64 trigonometry in every task.
    #[allow(clippy::too_many_arguments)]
    pub fn rope_table(
        pos: TileRef<'_, i32, 1>,
        theta: f32,
        factor: f32,
        low: f32,
        high: f32,
        original: f32,
        mut cs: TileMut<'_, f32, 2>,
    ) {
        let d = cs.shape()[1];
        for e in 0..d / 2 {
            let (s, c) = rope_sin_cos(pos.get([0]), e, d, theta, factor, low, high, original);
            cs.set([0, e], c);
            cs.set([0, e + d / 2], s);
        }
    }
}
