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

crate::tile_op! { cuda = decode_cuda!([rope_cuda!()] r#"
template <class X, class P>
__device__ void rope_llama3(X x, P pos, float theta, float factor, float low, float high, float original) {
    const int H = x.shape[0], D = x.shape[1], half = D / 2;
    const int p = pos.ptr[0];
    for (int e = threadIdx.x; e < half; e += blockDim.x) {
        float sf, cf;
        rope_sincos(p, e, D, theta, factor, low, high, original, sf, cf);
        for (int h = 0; h < H; ++h) {
            const float a = et::to_float(x(h, e)), b = et::to_float(x(h, e + half));
            x(h, e) = et::from_float<et::bf16>(a * cf - b * sf);
            x(h, e + half) = et::from_float<et::bf16>(b * cf + a * sf);
        }
    }
}
"#);
    contract {
        x[1] % 2 == 0 => "the head dimension (x's columns) must be even",
        pos[0] == 1 => "pos must be one element (the position)",
    }
    /// Rotates each head (row) of `x`, `H x D`, in place for the position `pos[0]`: pairs
    /// `(e, e + D/2)` turn by `pos · inv_freq(e)` ([`llama3_inv_freq`] with `theta`, the
    /// scaling `factor`, the `low` and `high` frequency factors and the `original` context
    /// length; Llama 3.1: 500000, 8, 1, 4, 8192). The angle and its sine and cosine are
    /// computed in f64, the rotation in f32, rounded once. Call it on the q heads and on
    /// the k heads (before [`kv_append`]).
    pub fn rope_llama3(
        mut x: TileMut<'_, bf16, 2>,
        pos: TileRef<'_, i32, 1>,
        theta: f32,
        factor: f32,
        low: f32,
        high: f32,
        original: f32,
    ) {
        let [h, d] = x.shape();
        for e in 0..d / 2 {
            let (s, c) = rope_sin_cos(pos.get([0]), e, d, theta, factor, low, high, original);
            for hi in 0..h {
                let (a, b) = (x.get([hi, e]).to_f32(), x.get([hi, e + d / 2]).to_f32());
                x.set([hi, e], bf16::from_f32(a * c - b * s));
                x.set([hi, e + d / 2], bf16::from_f32(b * c + a * s));
            }
        }
    }
}

crate::tile_op! { cuda = decode_cuda!(r#"
template <class S, class P, class C>
__device__ void kv_append(S src, P pos, C cache) {
    const int H = src.shape[0], D = src.shape[1], L = cache.shape[1];
    const int p = pos.ptr[0];
    if (p < 0 || p >= L) return;
    const bool vec = vec_rows(src.ptr, src.stride[0], src.stride[1]) &&
                     vec_rows(cache.ptr, cache.stride[0], cache.stride[2]) && (cache.stride[1] & 7) == 0;
    const int per = (D + 7) / 8;
    for (int e = threadIdx.x; e < H * per; e += blockDim.x) {
        const int h = e / per, k = (e % per) * 8;
        et::bf16* dst = cache.ptr + h * cache.stride[0] + (long long)p * cache.stride[1];
        if (vec && k + 8 <= D) {
            st16(dst + k, ld16(src.ptr + h * src.stride[0] + k));
        } else {
            for (int i = k; i < D && i < k + 8; ++i) dst[i * cache.stride[2]] = src(h, i);
        }
    }
}
"#);
    contract {
        pos[0] == 1 => "pos must be one element (the position)",
        cache[0] == src[0] && cache[2] == src[1] => "cache must be [src's rows (heads), positions, src's columns]",
    }
    /// `cache[h, pos[0], :] = src[h, :]` for every head `h`: appends one step's keys (or
    /// values) `src`, `H x D`, to the cache tile `H x L x D` at the run-time position
    /// `pos[0]`. A position outside `0 .. L` writes nothing.
    pub fn kv_append(src: TileRef<'_, bf16, 2>, pos: TileRef<'_, i32, 1>, mut cache: TileMut<'_, bf16, 3>) {
        let [h, d] = src.shape();
        let p = pos.get([0]);
        if p < 0 || p as usize >= cache.shape()[1] {
            return;
        }
        for hi in 0..h {
            for k in 0..d {
                cache.set([hi, p as usize, k], src.get([hi, k]));
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
