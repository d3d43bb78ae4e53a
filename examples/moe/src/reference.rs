//! The layer as plain sequential Rust, token by token: the oracle.
//!
//! Rounding points are the GPU kernels': f32 logits; the top-k weights in f32; per chosen
//! expert `h = bf16(silu(x · gateᵀ) · (x · upᵀ))` and `y = bf16(h · downᵀ)`; the output
//! `bf16(Σ_k w_k · y_k)` summed in f32 in pick order. Every dot product is an f32 sum in
//! `k` order (as the CPU tile ops sum), so the tile ops run on the CPU reproduce it bit
//! for bit; the GPU sums in another order and agrees within bf16 rounding.

use et_core::{Tensor, bf16};

use crate::weights::MoeWeights;

/// What the layer computes for `T` tokens.
#[derive(Clone, Debug)]
pub struct Output {
    /// Router logits `[T, E]`.
    pub logits: Tensor<f32>,
    /// The chosen experts `[T, K]`, in routing order (-1: no choice).
    pub topk: Tensor<i32>,
    /// Their renormalised weights `[T, K]`.
    pub topw: Tensor<f32>,
    /// The layer's output `[T, H]`.
    pub out: Tensor<bf16>,
}

/// The sequential reference over one set of weights.
pub struct Reference<'w> {
    w: &'w MoeWeights,
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}

fn row(t: &Tensor<bf16>, r: usize) -> Vec<f32> {
    let w = t.shape()[1];
    t.as_slice()[r * w..(r + 1) * w].iter().map(|v| v.to_f32()).collect()
}

/// Larger logit first, the lower expert on ties; NaN never.
fn before(av: f32, ai: usize, bv: f32, bi: usize) -> bool {
    av > bv || (av == bv && ai < bi)
}

impl<'w> Reference<'w> {
    /// The reference of these weights.
    pub fn new(w: &'w MoeWeights) -> Self {
        Reference { w }
    }

    /// The chosen experts (`None` past the last number) and weights of one token's logits:
    /// softmax, top-k, renormalise, as `exp(l - l_max) / Σ_chosen exp(l - l_max)`.
    pub fn route(logits: &[f32], k: usize) -> (Vec<Option<usize>>, Vec<f32>) {
        let mut picks: Vec<Option<usize>> = Vec::with_capacity(k);
        let mut p = Vec::with_capacity(k);
        let (mut prev, mut top): (Option<(f32, usize)>, f32) = (None, 0.0);
        for ki in 0..k {
            let mut best: Option<(f32, usize)> = None;
            for (e, &v) in logits.iter().enumerate() {
                let after = prev.is_none_or(|(pv, pi)| before(pv, pi, v, e));
                let better = best.is_none_or(|(bv, bi)| before(v, e, bv, bi)) && !v.is_nan();
                if after && better {
                    best = Some((v, e));
                }
            }
            if ki == 0 {
                top = best.map_or(f32::NEG_INFINITY, |b| b.0);
            }
            picks.push(best.map(|b| b.1));
            p.push(best.map_or(0.0, |(v, _)| (v - top).exp()));
            if best.is_some() {
                prev = best;
            }
        }
        let sum: f32 = p.iter().fold(0.0, |s, v| s + v);
        (picks, p.iter().map(|v| if sum > 0.0 { v / sum } else { 0.0 }).collect())
    }

    /// One expert on one token: `bf16(bf16(silu(g) · u) · downᵀ)`.
    pub fn expert(&self, e: usize, x: &[f32]) -> Vec<f32> {
        let (h, i) = (self.w.config.hidden, self.w.config.inter);
        let hid: Vec<f32> = (0..i)
            .map(|n| {
                let g = dot(&row(&self.w.gate, e * i + n), x);
                let u = dot(&row(&self.w.up, e * i + n), x);
                bf16::from_f32(g / (1.0 + (-g).exp()) * u).to_f32()
            })
            .collect();
        (0..h).map(|n| bf16::from_f32(dot(&row(&self.w.down, e * h + n), &hid)).to_f32()).collect()
    }

    /// The layer on the tokens `x` (`[T, H]`).
    pub fn forward(&self, x: &Tensor<bf16>) -> Result<Output, String> {
        let cfg = self.w.config;
        let (h, e, k) = (cfg.hidden, cfg.experts, cfg.top_k);
        if x.shape().len() != 2 || x.shape()[1] != h {
            return Err(format!("the tokens must be [T, {h}], not {:?}", x.shape()));
        }
        let t = x.shape()[0];
        let mut logits = Tensor::<f32>::zeros(&[t, e]);
        let mut topk = Tensor::<i32>::zeros(&[t, k]);
        let mut topw = Tensor::<f32>::zeros(&[t, k]);
        let mut out = Tensor::<bf16>::zeros(&[t, h]);
        for ti in 0..t {
            let xt = row(x, ti);
            let l: Vec<f32> = (0..e).map(|ei| dot(&row(&self.w.router, ei), &xt)).collect();
            let (picks, weights) = Self::route(&l, k);
            let mut acc = vec![0f32; h];
            for (ki, (pick, wk)) in picks.iter().zip(&weights).enumerate() {
                topk.set(&[ti, ki], pick.map_or(-1, |p| p as i32));
                topw.set(&[ti, ki], *wk);
                if let Some(ex) = pick {
                    for (a, y) in acc.iter_mut().zip(self.expert(*ex, &xt)) {
                        *a += wk * y;
                    }
                }
            }
            for (c, v) in acc.into_iter().enumerate() {
                out.set(&[ti, c], bf16::from_f32(v));
            }
            for (ei, v) in l.into_iter().enumerate() {
                logits.set(&[ti, ei], v);
            }
        }
        Ok(Output { logits, topk, topw, out })
    }
}
