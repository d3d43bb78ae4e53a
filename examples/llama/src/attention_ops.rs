//! The two tile ops of the decode megakernel that the library (`et_core::ops`) does not
//! have, because they change the layout between a GEMV's output and attention's input:
//!
//! - [`rope_append`] reads one sequence's slice of the fused QKV projection (the `G`
//!   query heads of one KV head, then its key, then its value: a row of the GEMV output,
//!   `[1, (G + 2) · D]`), rotates the queries and the key by Llama 3's RoPE, writes the
//!   queries as the `[G, D]` head rows that `attention_partial` reads, and appends the key
//!   and value to that KV head's cache at the run-time position;
//! - [`attention_merge_row`] is `et_core::ops::attention_merge` writing its `G` heads into
//!   one row `[1, G · D]` of the attention output, which the output projection reads as
//!   its `[B, heads · D]` input.
//!
//! Both compute exactly what their library neighbours compute (`rope_llama3` + `kv_append`,
//! and `attention_merge`), so the megakernel keeps the reference's rounding points.

use et_core::bf16;
use et_core::ops::llama3_inv_freq;
use et_core::tile::{TileMut, TileRef};

et_core::tile_op! { cuda = r#"
__device__ __forceinline__ double llama3_inv_freq(int i, int dim, double theta, double factor, double low, double high,
                                                  double original) {
    const double inv = 1.0 / pow(theta, (double)(2 * i) / (double)dim);
    const double wavelen = 2.0 * 3.14159265358979323846 / inv;
    if (wavelen < original / high) return inv;
    if (wavelen > original / low) return inv / factor;
    const double smooth = (original / wavelen - low) / (high - low);
    return (1.0 - smooth) * inv / factor + smooth * inv;
}
template <class X, class P, class Q, class K, class V>
__device__ void rope_append(X qkv, P pos, float theta, float factor, float low, float high, float original, Q q, K kc,
                            V vc) {
    const int G = q.shape[0], D = q.shape[1], half = D / 2, L = kc.shape[1];
    const int p = pos.ptr[0];
    const bool store = p >= 0 && p < L;
    // pair e of every head turns by the same angle: one thread per pair, all G + 1 heads
    for (int e = threadIdx.x; e < half; e += blockDim.x) {
        const double angle = (double)p * llama3_inv_freq(e, D, theta, factor, low, high, original);
        double s, c;
        sincos(angle, &s, &c);
        const float sf = (float)s, cf = (float)c;
        for (int h = 0; h <= G; ++h) {
            const float a = et::to_float(qkv(0, h * D + e)), b = et::to_float(qkv(0, h * D + e + half));
            const et::bf16 x = et::from_float<et::bf16>(a * cf - b * sf), y = et::from_float<et::bf16>(b * cf + a * sf);
            if (h < G) {
                q(h, e) = x;
                q(h, e + half) = y;
            } else if (store) {
                kc(0, p, e) = x;
                kc(0, p, e + half) = y;
            }
        }
    }
    if (store)
        for (int e = threadIdx.x; e < D; e += blockDim.x) vc(0, p, e) = qkv(0, (G + 1) * D + e);
}
"#;
    contract {
        q[1] % 2 == 0 => "the head dimension (q's columns) must be even",
        qkv[0] == 1 && qkv[1] == (q[0] + 2) * q[1] => "qkv must be one row of G query heads, a key and a value: [1, (q's rows + 2) x q's columns]",
        pos[0] == 1 => "pos must be one element (the position)",
        kc[0] == 1 && kc[2] == q[1] => "kc must be one KV head's cache: [1, positions, q's columns]",
        vc[0] == kc[0] && vc[1] == kc[1] && vc[2] == kc[2] => "vc must have kc's extents",
    }
    /// RoPE and KV append for one KV head of one sequence: `qkv` is `[1, (G + 2) · D]`,
    /// `G` query heads then the key then the value; the queries, rotated to the position
    /// `pos[0]` (angles as `rope_llama3`: `pos · llama3_inv_freq(e, D, theta, factor, low,
    /// high, original)` in f64, sine and cosine rounded to f32, the rotation in f32,
    /// rounded once), go to `q` (`[G, D]`); the rotated key and the value go to position
    /// `pos[0]` of `kc` and `vc` (`[1, P, D]`); a position outside `0 .. P` stores no key
    /// or value.
    #[allow(clippy::too_many_arguments)]
    pub fn rope_append(
        qkv: TileRef<'_, bf16, 2>,
        pos: TileRef<'_, i32, 1>,
        theta: f32,
        factor: f32,
        low: f32,
        high: f32,
        original: f32,
        mut q: TileMut<'_, bf16, 2>,
        mut kc: TileMut<'_, bf16, 3>,
        mut vc: TileMut<'_, bf16, 3>,
    ) {
        let [g, d] = q.shape();
        let p = pos.get([0]);
        let store = p >= 0 && (p as usize) < kc.shape()[1];
        for e in 0..d / 2 {
            let f = llama3_inv_freq(e, d, theta as f64, factor as f64, low as f64, high as f64, original as f64);
            let (s, c) = (p as f64 * f).sin_cos();
            let (s, c) = (s as f32, c as f32);
            for h in 0..=g {
                let (a, b) = (qkv.get([0, h * d + e]).to_f32(), qkv.get([0, h * d + e + d / 2]).to_f32());
                let (x, y) = (bf16::from_f32(a * c - b * s), bf16::from_f32(b * c + a * s));
                if h < g {
                    q.set([h, e], x);
                    q.set([h, e + d / 2], y);
                } else if store {
                    kc.set([0, p as usize, e], x);
                    kc.set([0, p as usize, e + d / 2], y);
                }
            }
        }
        if store {
            for e in 0..d {
                vc.set([0, p as usize, e], qkv.get([0, (g + 1) * d + e]));
            }
        }
    }
}

et_core::tile_op! { cuda = r#"
template <class O, class M, class Y>
__device__ void attention_merge_row(O o, M ml, Y out) {
    const int D = o.shape[1], G = out.shape[1] / D, S = o.shape[0] / G;
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
        out(0, e) = et::from_float<et::bf16>(den > 0.0f ? num / den : 0.0f);
    }
}
"#;
    contract {
        out[0] == 1 && out[1] % o[1] == 0 => "out must be one row of whole heads: [1, G x o's columns]",
        out[1] >= o[1] && o[0] % (out[1] / o[1]) == 0 => "o must stack whole chunks of G heads: [S x G, head dim]",
        ml[0] == o[0] && ml[1] == 2 => "ml must be [o's rows, 2]",
    }
    /// Merges the `S` chunks of `attention_partial` for the `G` query heads of one KV head
    /// (`o` is `[S · G, D]`, `ml` `[S · G, 2]`, chunk `s` and head `g` at row `s · G + g`)
    /// into `out[0, g · D + i] = Σ_s e^(m_s - m) o_s / Σ_s e^(m_s - m) l_s`, in f32,
    /// rounded once; empty chunks (sum 0) are skipped, a head with none left gets zeros.
    pub fn attention_merge_row(o: TileRef<'_, f32, 2>, ml: TileRef<'_, f32, 2>, mut out: TileMut<'_, bf16, 2>) {
        let d = o.shape()[1];
        let g = out.shape()[1] / d;
        let s = o.shape()[0] / g;
        for gi in 0..g {
            let live: Vec<usize> = (0..s).filter(|&si| ml.get([si * g + gi, 1]) > 0.0).collect();
            let mx = live.iter().map(|&si| ml.get([si * g + gi, 0])).fold(f32::NEG_INFINITY, f32::max);
            let den: f32 = live.iter().map(|&si| (ml.get([si * g + gi, 0]) - mx).exp() * ml.get([si * g + gi, 1])).sum();
            for i in 0..d {
                let num: f32 = live.iter().map(|&si| (ml.get([si * g + gi, 0]) - mx).exp() * o.get([si * g + gi, i])).sum();
                out.set([0, gi * d + i], bf16::from_f32(if den > 0.0 { num / den } else { 0.0 }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contracts_accept_the_megakernel_shapes_and_reject_others() {
        // scalars have no extents
        let rope = |qkv: &[usize], q: &[usize]| {
            let cache: &[usize] = &[1, 8192, 64];
            rope_append::contract(&[qkv, &[1], &[], &[], &[], &[], &[], q, cache, cache])
        };
        assert_eq!(rope(&[1, 384], &[4, 64]), Ok(()));
        assert!(rope(&[1, 320], &[4, 64]).unwrap_err().contains("qkv must be one row"));
        assert!(rope(&[1, 384], &[6, 48]).unwrap_err().contains("kc must be"));
        assert_eq!(attention_merge_row::contract(&[&[64, 64], &[64, 2], &[1, 256]]), Ok(()));
        assert!(attention_merge_row::contract(&[&[64, 64], &[64, 2], &[4, 64]]).is_err());
    }
}
