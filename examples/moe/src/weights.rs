//! Seeded random weights of the layer, and its input tokens with routing skew.

use et_core::{Tensor, bf16};

use crate::config::MoeConfig;

/// The layer's parameters, bf16, experts stacked along the rows.
#[derive(Clone, Debug)]
pub struct MoeWeights {
    /// The shapes.
    pub config: MoeConfig,
    /// The router `[E, H]`: expert `e`'s logit is `router[e] · x`.
    pub router: Tensor<bf16>,
    /// Gate projections `[E · I, H]`: expert `e`'s are rows `e · I ..`.
    pub gate: Tensor<bf16>,
    /// Up projections `[E · I, H]`.
    pub up: Tensor<bf16>,
    /// Down projections `[E · H, I]`: expert `e`'s are rows `e · H ..`.
    pub down: Tensor<bf16>,
}

/// Uniform in ±√(3 / fan_in) (unit variance outputs for unit variance inputs), from a seed.
fn scaled(shape: &[usize], fan_in: usize, seed: u64) -> Tensor<bf16> {
    let s = (3.0 / fan_in as f32).sqrt();
    let r = Tensor::<f32>::random(shape, seed);
    Tensor::from_vec(shape, r.as_slice().iter().map(|v| bf16::from_f32(v * s)).collect()).expect("shape")
}

impl MoeWeights {
    /// Random weights from `seed` (each tensor its own stream).
    pub fn random(config: &MoeConfig, seed: u64) -> Result<MoeWeights, String> {
        config.validate()?;
        let (h, e, i) = (config.hidden, config.experts, config.inter);
        Ok(MoeWeights {
            config: *config,
            router: scaled(&[e, h], h, seed.wrapping_mul(4)),
            gate: scaled(&[e * i, h], h, seed.wrapping_mul(4) + 1),
            up: scaled(&[e * i, h], h, seed.wrapping_mul(4) + 2),
            down: scaled(&[e * h, i], i, seed.wrapping_mul(4) + 3),
        })
    }
}

/// Whether token `t` of `n` is one of the skewed ones: `round(skew · n)` of them, spread
/// evenly (token `t` is skewed when `⌊(t + 1) s⌋ > ⌊t s⌋`).
pub fn is_skewed(t: usize, skew: f64) -> bool {
    ((t + 1) as f64 * skew).floor() > (t as f64 * skew).floor()
}

/// `n` input tokens `[n, H]` (uniform in ±1, from `seed`) with routing skew `skew` in
/// [0, 1]: the skewed tokens ([`is_skewed`]) get a bias added **to the input x** along
/// the sum of the router rows of experts `0 .. K`, sized so those experts' logits gain
/// about 8 (against logits of standard deviation about 1), so every skewed token picks
/// exactly those `K` experts. Skew 0: no bias; 1: every token on the same `K` experts.
pub fn tokens(w: &MoeWeights, n: usize, skew: f64, seed: u64) -> Result<Tensor<bf16>, String> {
    if !(0.0..=1.0).contains(&skew) {
        return Err(format!("skew {skew} is not in [0, 1]"));
    }
    let (h, k) = (w.config.hidden, w.config.top_k);
    let mut x = Tensor::<bf16>::random(&[n, h], seed ^ 0x5eed_70c3);
    let bias: Vec<f32> = (0..h).map(|c| (0..k).map(|e| w.router.get(&[e, c]).to_f32()).sum()).collect();
    // the gain of expert e < K is bias · router[e] ≈ |router[e]|², the cross terms average out
    let gain = (0..k)
        .map(|e| (0..h).map(|c| bias[c] * w.router.get(&[e, c]).to_f32()).sum::<f32>())
        .fold(f32::INFINITY, f32::min);
    let scale = 8.0 / gain.max(1e-6);
    for t in (0..n).filter(|&t| is_skewed(t, skew)) {
        for (c, b) in bias.iter().enumerate() {
            let v = x.get(&[t, c]).to_f32() + scale * b;
            x.set(&[t, c], bf16::from_f32(v));
        }
    }
    Ok(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skew_picks_its_share_of_tokens() {
        for (n, s, want) in [(8, 0.0, 0), (8, 1.0, 8), (8, 0.5, 4), (1024, 0.25, 256), (3, 1.0, 3)] {
            assert_eq!((0..n).filter(|&t| is_skewed(t, s)).count(), want, "{n} tokens, skew {s}");
        }
    }

    #[test]
    fn weights_are_seeded_and_skew_out_of_range_is_an_error() {
        let a = MoeWeights::random(&MoeConfig::TINY, 3).unwrap();
        let b = MoeWeights::random(&MoeConfig::TINY, 3).unwrap();
        assert_eq!(a.down.as_slice(), b.down.as_slice());
        assert_ne!(a.gate.as_slice(), a.up.as_slice());
        assert!(tokens(&a, 4, 1.5, 0).unwrap_err().contains("not in [0, 1]"));
    }
}
