//! Rotary position embedding with Llama 3's frequency scaling.
//!
//! Frequencies follow Hugging Face's `_compute_llama3_parameters`; the rotation uses HF's
//! "rotate half" layout, which pairs element `i` of a head with element `i + head_dim / 2`.

use crate::config::LlamaConfig;

/// The `head_dim / 2` inverse frequencies of `config`, Llama 3 scaling applied, in f64.
///
/// The plain frequencies are `theta^(-2i / head_dim)`. With scaling, a frequency's
/// wavelength `2π / f` decides: above `original / low_freq_factor` (long wavelengths) it is
/// divided by `factor`; below `original / high_freq_factor` it is kept; in between it is
/// interpolated with `smooth = (original / wavelength - low) / (high - low)` as
/// `(1 - smooth) · f / factor + smooth · f`. Computed in f64 from the config's f32
/// parameters exactly as the decode megakernel's `rope_llama3` computes them
/// ([`et_core::ops::llama3_inv_freq`]), so that the reference and the kernel turn by the
/// same angles (Hugging Face computes in f32, which differs in the last bits and, at long
/// positions, in the angle).
pub fn inv_freqs(config: &LlamaConfig) -> Vec<f64> {
    let (dim, theta) = (config.head_dim, config.rope_theta as f64);
    (0..dim / 2)
        .map(|i| match config.rope_scaling {
            None => 1.0 / theta.powf((2 * i) as f64 / dim as f64),
            Some(s) => et_core::ops::llama3_inv_freq(
                i,
                dim,
                theta,
                s.factor as f64,
                s.low_freq_factor as f64,
                s.high_freq_factor as f64,
                s.original_max_position_embeddings as f64,
            ),
        })
        .collect()
}

/// Rotates one head (`inv_freq.len() * 2` values) to position `pos`: the angle of pair
/// `i` is `pos · inv_freq[i]` and its sine and cosine are computed in f64 and rounded to
/// f32, then `(x[i], x[i + h]) ← (x[i]·cos − x[i + h]·sin, x[i + h]·cos + x[i]·sin)` in
/// f32 (the arithmetic of the megakernel's `rope_llama3`).
pub fn apply(head: &mut [f32], pos: usize, inv_freq: &[f64]) {
    let half = inv_freq.len();
    assert_eq!(head.len(), 2 * half, "a head holds two values per RoPE frequency");
    let (lo, hi) = head.split_at_mut(half);
    for ((a, b), &f) in lo.iter_mut().zip(hi).zip(inv_freq) {
        let (sin, cos) = (pos as f64 * f).sin_cos();
        let (sin, cos) = (sin as f32, cos as f32);
        (*a, *b) = (*a * cos - *b * sin, *b * cos + *a * sin);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama3_scaling_matches_hand_computed_frequencies() {
        // tiny's RoPE at head_dim 16: theta 10^4 (f_i = 10^(-i/2)), factor 8, original 256,
        // so the kept band is wavelength < 64, the scaled one > 256.
        let f = inv_freqs(&LlamaConfig { head_dim: 16, ..LlamaConfig::preset("tiny").unwrap() });
        // wavelengths 6.28, 19.9, 62.8: kept
        let kept = [1.0, 0.316_227_77, 0.1];
        // wavelength 198.69: smooth = (256/198.69 - 1)/3 = 0.096141, f·((1-smooth)/8 + smooth)
        let medium = 0.006_613_106_3;
        // wavelengths 628 and above: f / 8
        let scaled = [0.001_25, 0.000_395_284_7, 0.000_125, 0.000_039_528_47];
        let want: Vec<f64> = kept.into_iter().chain([medium]).chain(scaled).collect();
        assert_eq!(f.len(), 8);
        for (i, (g, w)) in f.iter().zip(&want).enumerate() {
            assert!((g - w).abs() <= 1e-6 * w, "frequency {i}: {g} != {w}");
        }
        // at head_dim 64 the 32 frequencies fall in all three bands too
        let f = inv_freqs(&LlamaConfig::preset("tiny").unwrap());
        let band = |f: f64| {
            let wavelen = 2.0 * std::f64::consts::PI / f;
            (wavelen < 64.0) as usize + 2 * (wavelen > 256.0) as usize
        };
        let bands: std::collections::BTreeSet<usize> = f.iter().map(|&f| band(f)).collect();
        assert_eq!(bands.into_iter().collect::<Vec<_>>(), [0, 1, 2]);
        // Llama 3.2 1B, frequency 0 (wavelength 2π) is kept, the last one is divided by 32.
        let big = inv_freqs(&LlamaConfig::preset("llama-3.2-1b").unwrap());
        assert_eq!(big[0], 1.0);
        let last = 500000f64.powf(-62.0 / 64.0) / 32.0;
        assert!((big[31] - last).abs() <= 1e-12 * last);
    }

    #[test]
    fn plain_rope_without_scaling() {
        let c = LlamaConfig { rope_scaling: None, head_dim: 16, ..LlamaConfig::preset("tiny").unwrap() };
        let f = inv_freqs(&c);
        assert!((f[4] - 0.01).abs() < 1e-9 && (f[7] - 0.000_316_227_77).abs() < 1e-10);
    }

    #[test]
    fn rotation_pairs_i_with_i_plus_half() {
        let inv = [1.0f64, 0.5];
        let mut head = [1.0, 0.0, 0.0, 2.0];
        apply(&mut head, 0, &inv);
        assert_eq!(head, [1.0, 0.0, 0.0, 2.0]);
        apply(&mut head, 3, &inv);
        // pair (0, 2) rotates (1, 0) by 3 rad; pair (1, 3) rotates (0, 2) by 1.5 rad
        let want = [3f32.cos(), -2.0 * 1.5f32.sin(), 3f32.sin(), 2.0 * 1.5f32.cos()];
        for (g, w) in head.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{head:?} != {want:?}");
        }
    }

    #[test]
    fn scores_depend_only_on_relative_position() {
        let inv = inv_freqs(&LlamaConfig { head_dim: 16, ..LlamaConfig::preset("tiny").unwrap() });
        let q: Vec<f32> = (0..16).map(|i| (i as f32 * 0.37).sin()).collect();
        let k: Vec<f32> = (0..16).map(|i| (i as f32 * 0.11).cos()).collect();
        let score = |m, n| {
            let (mut q, mut k) = (q.clone(), k.clone());
            apply(&mut q, m, &inv);
            apply(&mut k, n, &inv);
            q.iter().zip(&k).map(|(a, b)| a * b).sum::<f32>()
        };
        assert!((score(7, 3) - score(104, 100)).abs() < 1e-4);
        assert!((score(7, 3) - score(7, 4)).abs() > 1e-3);
    }
}
