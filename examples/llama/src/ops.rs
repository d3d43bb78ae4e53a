//! The reference's arithmetic: f32 accumulation over bf16 operands, and the rounding to
//! bf16 that stands for a store of a bf16 activation.
//!
//! Activations are passed as `f32` slices whose values are already bf16 numbers (rounded
//! by the caller with [`round_bf16`]), so that each function reads exactly what a bf16
//! kernel would load.

use et_core::bf16;

/// `x` rounded to the nearest bf16 (ties to even), as a store to a bf16 tensor does.
pub fn round_bf16(x: f32) -> f32 {
    bf16::from_f32(x).to_f32()
}

/// Rounds every element of `x` to bf16.
pub fn round_all(x: &mut [f32]) {
    x.iter_mut().for_each(|v| *v = round_bf16(*v));
}

/// RMSNorm, rounded once to bf16: `x[i] · w[i] / √(mean(x²) + eps)` with the mean and the
/// products in f32. (Hugging Face rounds the normalized `x` to bf16 before multiplying by
/// `w`; a fused kernel rounds only the result, as here.)
pub fn rms_norm(x: &[f32], weight: &[bf16], eps: f32) -> Vec<f32> {
    let mean_sq = x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
    let r = 1.0 / (mean_sq + eps).sqrt();
    x.iter().zip(weight).map(|(v, w)| round_bf16(v * r * w.to_f32())).collect()
}

/// `W · x` for a row-major `W: [w.len() / x.len(), x.len()]`, each row summed in f32 in
/// order; not rounded (the caller decides whether the result is stored as bf16).
pub fn matvec(w: &[bf16], x: &[f32]) -> Vec<f32> {
    w.chunks_exact(x.len()).map(|row| row.iter().zip(x).map(|(a, b)| a.to_f32() * b).sum()).collect()
}

/// SiLU, `x · sigmoid(x)`, in f32.
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// One head's attention over a cache: `keys` and `values` hold `len` rows of
/// `q.len()` values each; returns `Σ_j softmax_j(scale · q·k_j) · v_j` in f32, not rounded.
/// The softmax subtracts the maximum score, as every GPU implementation does.
pub fn attend(q: &[f32], keys: &[bf16], values: &[bf16], scale: f32) -> Vec<f32> {
    let d = q.len();
    let scores: Vec<f32> =
        keys.chunks_exact(d).map(|k| scale * k.iter().zip(q).map(|(a, b)| a.to_f32() * b).sum::<f32>()).collect();
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let weights: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
    let total: f32 = weights.iter().sum();
    let mut out = vec![0f32; d];
    for (p, v) in weights.iter().zip(values.chunks_exact(d)) {
        out.iter_mut().zip(v).for_each(|(o, v)| *o += p * v.to_f32());
    }
    out.iter_mut().for_each(|o| *o /= total);
    out
}

/// Index of the largest value, the first one on ties (greedy decoding).
pub fn argmax(x: &[f32]) -> usize {
    x.iter().enumerate().fold(0, |best, (i, v)| if *v > x[best] { i } else { best })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bf(v: &[f32]) -> Vec<bf16> {
        v.iter().map(|&x| bf16::from_f32(x)).collect()
    }

    #[test]
    fn attention_over_one_position_returns_v() {
        let v = bf(&[0.5, -1.25, 3.0, 0.0078125]);
        let out = attend(&[1.0, 2.0, -3.0, 4.0], &bf(&[9.0, -7.0, 1.0, 2.0]), &v, 0.5);
        assert_eq!(out, [0.5, -1.25, 3.0, 0.0078125]);
    }

    #[test]
    fn attention_weights_follow_the_scores() {
        // scores 0 and ln 3 (scale 1): weights 1/4 and 3/4
        let ln3 = 3f32.ln();
        let out = attend(&[ln3, 0.0], &bf(&[0.0, 1.0, 1.0, 0.0]), &bf(&[4.0, 8.0, 0.0, -4.0]), 1.0);
        assert!((out[0] - 1.0).abs() < 1e-2 && (out[1] - -1.0).abs() < 1e-2, "{out:?}");
    }

    #[test]
    fn norm_matvec_silu_argmax() {
        let n = rms_norm(&[3.0, -4.0], &bf(&[1.0, 2.0]), 0.0);
        let r = 1.0 / 12.5f32.sqrt();
        assert_eq!(n, [round_bf16(3.0 * r), round_bf16(-8.0 * r)]);
        assert_eq!(matvec(&bf(&[1.0, 2.0, 3.0, -1.0, 0.5, 0.0]), &[2.0, 4.0, 1.0]), [13.0, 0.0]);
        assert_eq!(silu(0.0), 0.0);
        assert!((silu(2.0) - 2.0 / (1.0 + (-2f32).exp())).abs() < 1e-7);
        assert_eq!(argmax(&[1.0, 5.0, -2.0, 5.0]), 1);
        assert_eq!(round_bf16(1.0 + 1.0 / 512.0), 1.0); // below bf16's half ulp at 1
    }
}
