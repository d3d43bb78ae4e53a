//! The floor of one MoE layer: the bytes it must read at least (the weights of the experts
//! its tokens are routed to, the router, the tokens in and out), the same count as
//! `moe_torch.py`'s `floor_ms`, over a bandwidth measured in the same run.

use et_core::{Tensor, bf16};
use moe::{MoeConfig, MoeWeights, Reference};

/// The experts at least one token of `x` (`[T, H]`) is routed to, under the reference's
/// routing (f32 router logits, top-k in routing order).
pub fn touched_experts(w: &MoeWeights, x: &Tensor<bf16>) -> Result<usize, String> {
    let (h, e, k) = (w.config.hidden, w.config.experts, w.config.top_k);
    if x.shape().len() != 2 || x.shape()[1] != h {
        return Err(format!("the tokens must be [T, {h}], not {:?}", x.shape()));
    }
    let router: Vec<f32> = w.router.as_slice().iter().map(|v| v.to_f32()).collect();
    let mut hit = vec![false; e];
    for row in x.as_slice().chunks(h) {
        let xt: Vec<f32> = row.iter().map(|v| v.to_f32()).collect();
        let logits: Vec<f32> = router.chunks(h).map(|r| r.iter().zip(&xt).map(|(a, b)| a * b).sum()).collect();
        for pick in Reference::route(&logits, k).0.into_iter().flatten() {
            hit[pick] = true;
        }
    }
    Ok(hit.iter().filter(|&&b| b).count())
}

/// Bytes one layer of `tokens` tokens must read (and write) with `touched` experts in use:
/// their gate, up and down weights, the router, the input and output tokens (bf16).
pub fn layer_bytes(cfg: &MoeConfig, tokens: usize, touched: usize) -> usize {
    touched * cfg.expert_bytes() + cfg.router_bytes() + 2 * tokens * cfg.hidden * 2
}

/// The floor in milliseconds: `bytes` at `bytes_per_s`.
pub fn floor_ms(bytes: usize, bytes_per_s: f64) -> f64 {
    bytes as f64 / bytes_per_s * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;
    use moe::weights;

    #[test]
    fn skew_one_touches_exactly_k_experts_and_the_bytes_match_moe_torch() {
        let w = MoeWeights::random(&MoeConfig::TINY, 3).unwrap();
        let x = weights::tokens(&w, 40, 1.0, 5).unwrap();
        assert_eq!(touched_experts(&w, &x).unwrap(), MoeConfig::TINY.top_k);
        let x = weights::tokens(&w, 40, 0.0, 5).unwrap();
        let want = Reference::new(&w).forward(&x).unwrap();
        let mut used: Vec<i32> = want.topk.as_slice().to_vec();
        used.sort();
        used.dedup();
        assert_eq!(touched_experts(&w, &x).unwrap(), used.len());
        // moe_torch.py: touched * 3 * I * H * 2 + E * H * 2 + 2 * T * H * 2
        let q = MoeConfig::QWEN3_MOE;
        assert_eq!(layer_bytes(&q, 1, 8), 8 * 3 * 768 * 2048 * 2 + 128 * 2048 * 2 + 2 * 2048 * 2);
        assert_eq!(floor_ms(4_500_000_000, 4.5e12), 1.0);
        assert!(touched_experts(&w, &Tensor::zeros(&[2, 3])).unwrap_err().contains("[T, 64]"));
    }
}
