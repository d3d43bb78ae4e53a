//! The model's parameters, stacked over layers, in bf16; and seeded random ones.
//!
//! Per-layer weights are stacked into one `[L, ..]` tensor each, so that a megakernel
//! indexes the layer like any other tile coordinate. Matrices keep Hugging Face's
//! `[out_features, in_features]` layout: a projection is `y[o] = Σ_i W[o, i] · x[i]`.

use crate::config::LlamaConfig;
use crate::error::{Error, Result};
use et_core::{Tensor, bf16};
use et_graph::schedule::SplitMix64;

/// The parameters of a Llama 3 model.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaWeights {
    /// The shapes these weights have.
    pub config: LlamaConfig,
    /// Token embedding `[vocab, hidden]`.
    pub embed: Tensor<bf16>,
    /// RMSNorm weight before attention (`input_layernorm`), `[L, hidden]`.
    pub attn_norm: Tensor<bf16>,
    /// Query projection `[L, heads · head_dim, hidden]`.
    pub wq: Tensor<bf16>,
    /// Key projection `[L, kv_heads · head_dim, hidden]`.
    pub wk: Tensor<bf16>,
    /// Value projection `[L, kv_heads · head_dim, hidden]`.
    pub wv: Tensor<bf16>,
    /// Output projection `[L, hidden, heads · head_dim]`.
    pub wo: Tensor<bf16>,
    /// RMSNorm weight before the MLP (`post_attention_layernorm`), `[L, hidden]`.
    pub mlp_norm: Tensor<bf16>,
    /// Gate projection `[L, intermediate, hidden]`.
    pub w_gate: Tensor<bf16>,
    /// Up projection `[L, intermediate, hidden]`.
    pub w_up: Tensor<bf16>,
    /// Down projection `[L, hidden, intermediate]`.
    pub w_down: Tensor<bf16>,
    /// Final RMSNorm weight `[hidden]`.
    pub final_norm: Tensor<bf16>,
    /// LM head `[vocab, hidden]`; `None` when tied to [`LlamaWeights::embed`].
    pub lm_head: Option<Tensor<bf16>>,
}

/// Hugging Face names of the per-layer tensors (after `model.layers.{i}.`), in the order
/// of [`LlamaWeights::layer_tensors`].
const LAYER_NAMES: [&str; 9] = [
    "input_layernorm.weight",
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "post_attention_layernorm.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
];

/// A whole (unstacked) tensor as a named load destination.
fn whole<'a>(name: &str, t: &'a mut Tensor<bf16>) -> (String, Vec<usize>, &'a mut [bf16]) {
    (name.to_string(), t.shape().to_vec(), t.as_mut_slice())
}

/// A zero bf16 tensor of `shape` for the weights named `name` (stacked over layers for
/// a per-layer name), allocated fallibly: the sizes come from a user's `config.json`, and
/// one too large for memory (or for `usize`) must be an error naming the tensor and the
/// sizes rather than an allocation abort.
fn zeros(name: &str, shape: &[usize]) -> Result<Tensor<bf16>> {
    let too_large = |what: &str| Error::Config(format!("the weights `{name}` of shape {shape:?} {what}"));
    let n = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).ok_or_else(|| too_large("overflow usize"))?;
    let mut data = Vec::new();
    data.try_reserve_exact(n).map_err(|_| {
        too_large(&format!("need {:.1} GiB, which cannot be allocated", n as f64 * 2.0 / (1u64 << 30) as f64))
    })?;
    data.resize(n, bf16::from_f32(0.0));
    Ok(Tensor::from_vec(shape, data)?)
}

/// Hugging Face name of the embedding.
pub(crate) const EMBED: &str = "model.embed_tokens.weight";
/// Hugging Face name of the final norm.
pub(crate) const FINAL_NORM: &str = "model.norm.weight";
/// Hugging Face name of the LM head.
pub(crate) const LM_HEAD: &str = "lm_head.weight";

impl LlamaWeights {
    /// Random weights from `seed`, the same for the same seed: projections uniform in
    /// `±1/√fan_in` (so activations keep their scale), norm weights in `1 ± 0.1`, the
    /// embedding (and LM head) in `±0.02`: small next to the layers' outputs, so that the
    /// residual stream, and hence the next token, is not dominated by the input token's
    /// own embedding (with tied weights a random model would otherwise repeat its input).
    pub fn random(config: &LlamaConfig, seed: u64) -> Result<Self> {
        config.validate()?;
        let mut w = Self::zeros(config)?;
        let n = w.named_mut().len() as u64;
        for (k, (name, _, data)) in w.named_mut().into_iter().enumerate() {
            let mut rng = SplitMix64::new(seed.wrapping_mul(n).wrapping_add(k as u64));
            let (scale, offset) = if name.ends_with("norm.weight") {
                (0.1, 1.0)
            } else if name == EMBED || name == LM_HEAD {
                (0.02, 0.0)
            } else {
                let fan_in = if name.ends_with("o_proj.weight") {
                    config.num_heads * config.head_dim
                } else if name.ends_with("down_proj.weight") {
                    config.intermediate_size
                } else {
                    config.hidden_size
                };
                (1.0 / (fan_in as f32).sqrt(), 0.0)
            };
            data.fill_with(|| bf16::from_f32(offset + scale * (2.0 * rng.unit_f32() - 1.0)));
        }
        Ok(w)
    }

    /// Weights of `config`'s shapes, all zero. Errors, naming the tensor, when one does not
    /// fit in memory: a `config.json` with absurd sizes is a config error, not an abort.
    pub(crate) fn zeros(c: &LlamaConfig) -> Result<Self> {
        let (l, h, i, v) = (c.num_layers, c.hidden_size, c.intermediate_size, c.vocab_size);
        let q = c.num_heads.checked_mul(c.head_dim);
        let kv = c.num_kv_heads.checked_mul(c.head_dim);
        let (q, kv) = q.zip(kv).ok_or_else(|| {
            Error::Config(format!(
                "the attention width (heads x head_dim = {} x {}) overflows",
                c.num_heads, c.head_dim
            ))
        })?;
        let layered = |k: usize, shape: &[usize]| zeros(&format!("model.layers.*.{}", LAYER_NAMES[k]), shape);
        Ok(LlamaWeights {
            config: c.clone(),
            embed: zeros(EMBED, &[v, h])?,
            attn_norm: layered(0, &[l, h])?,
            wq: layered(1, &[l, q, h])?,
            wk: layered(2, &[l, kv, h])?,
            wv: layered(3, &[l, kv, h])?,
            wo: layered(4, &[l, h, q])?,
            mlp_norm: layered(5, &[l, h])?,
            w_gate: layered(6, &[l, i, h])?,
            w_up: layered(7, &[l, i, h])?,
            w_down: layered(8, &[l, h, i])?,
            final_norm: zeros(FINAL_NORM, &[h])?,
            lm_head: if c.tie_word_embeddings { None } else { Some(zeros(LM_HEAD, &[v, h])?) },
        })
    }

    /// The LM head: [`LlamaWeights::lm_head`], or the embedding when tied.
    pub fn head(&self) -> &Tensor<bf16> {
        self.lm_head.as_ref().unwrap_or(&self.embed)
    }

    /// The stacked per-layer tensors, in the order of `LAYER_NAMES`.
    fn layer_tensors(&self) -> [&Tensor<bf16>; 9] {
        [
            &self.attn_norm,
            &self.wq,
            &self.wk,
            &self.wv,
            &self.wo,
            &self.mlp_norm,
            &self.w_gate,
            &self.w_up,
            &self.w_down,
        ]
    }

    /// Every checkpoint tensor under its Hugging Face name, with its shape and data (one
    /// layer of a stacked tensor each); the LM head only when not tied.
    pub fn named(&self) -> Vec<(String, Vec<usize>, &[bf16])> {
        let mut out = vec![(EMBED.to_string(), self.embed.shape().to_vec(), self.embed.as_slice())];
        for (suffix, t) in LAYER_NAMES.iter().zip(self.layer_tensors()) {
            let per_layer = t.len() / self.config.num_layers;
            for (layer, data) in t.as_slice().chunks(per_layer).enumerate() {
                out.push((format!("model.layers.{layer}.{suffix}"), t.shape()[1..].to_vec(), data));
            }
        }
        out.push((FINAL_NORM.to_string(), self.final_norm.shape().to_vec(), self.final_norm.as_slice()));
        if let Some(head) = &self.lm_head {
            out.push((LM_HEAD.to_string(), head.shape().to_vec(), head.as_slice()));
        }
        out
    }

    /// Mutable [`LlamaWeights::named`].
    pub(crate) fn named_mut(&mut self) -> Vec<(String, Vec<usize>, &mut [bf16])> {
        let LlamaWeights {
            config,
            embed,
            attn_norm,
            wq,
            wk,
            wv,
            wo,
            mlp_norm,
            w_gate,
            w_up,
            w_down,
            final_norm,
            lm_head,
        } = self;
        let mut out = vec![whole(EMBED, embed)];
        // in the order of `layer_tensors`
        let layered = [attn_norm, wq, wk, wv, wo, mlp_norm, w_gate, w_up, w_down];
        for (suffix, t) in LAYER_NAMES.iter().zip(layered) {
            let (shape, per_layer) = (t.shape()[1..].to_vec(), t.len() / config.num_layers);
            for (layer, data) in t.as_mut_slice().chunks_mut(per_layer).enumerate() {
                out.push((format!("model.layers.{layer}.{suffix}"), shape.clone(), data));
            }
        }
        out.push(whole(FINAL_NORM, final_norm));
        out.extend(lm_head.as_mut().map(|head| whole(LM_HEAD, head)));
        out
    }

    /// Row `token` of the embedding. Errors when the token is out of the vocabulary.
    pub fn embedding(&self, token: u32) -> Result<&[bf16]> {
        let (v, h) = (self.config.vocab_size, self.config.hidden_size);
        let t = token as usize;
        if t >= v {
            return Err(Error::Input(format!("token id {token} is outside the vocabulary of {v}")));
        }
        Ok(&self.embed.as_slice()[t * h..(t + 1) * h])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_weights_are_seeded_and_scaled() {
        let c = LlamaConfig::preset("tiny").unwrap();
        let a = LlamaWeights::random(&c, 7).unwrap();
        assert_eq!(a, LlamaWeights::random(&c, 7).unwrap());
        assert_ne!(a.wq, LlamaWeights::random(&c, 8).unwrap().wq);
        assert_eq!(a.wq.shape(), &[2, 256, 128]);
        assert_eq!(a.wk.shape(), &[2, 128, 128]);
        assert_eq!(a.wo.shape(), &[2, 128, 256]);
        assert_eq!(a.w_down.shape(), &[2, 128, 256]);
        assert!(a.lm_head.is_none() && std::ptr::eq(a.head(), &a.embed));
        let max = |t: &Tensor<bf16>| t.as_slice().iter().map(|v| v.to_f32().abs()).fold(0f32, f32::max);
        assert!(max(&a.w_down) <= 1.0 / 256f32.sqrt() && max(&a.w_down) > 0.5 / 256f32.sqrt());
        // within 0.1 and bf16's rounding near 1.1
        assert!(a.attn_norm.as_slice().iter().all(|v| (v.to_f32() - 1.0).abs() <= 0.1 + 1.0 / 256.0));
        // distinct tensors get distinct streams
        assert_ne!(a.wk.as_slice(), a.wv.as_slice());
    }

    #[test]
    fn named_tensors_use_hf_names_and_cover_every_weight() {
        let c = LlamaConfig { tie_word_embeddings: false, ..LlamaConfig::preset("tiny").unwrap() };
        let w = LlamaWeights::random(&c, 1).unwrap();
        let named = w.named();
        assert_eq!(named.len(), 2 + 9 * 2 + 1);
        assert_eq!(named[0].0, "model.embed_tokens.weight");
        let q1 = named.iter().find(|(n, ..)| n == "model.layers.1.self_attn.q_proj.weight").unwrap();
        assert_eq!(q1.1, [256, 128]);
        assert_eq!(q1.2, &w.wq.as_slice()[256 * 128..]);
        assert_eq!(named.last().unwrap().0, "lm_head.weight");
        let total: usize = named.iter().map(|(_, _, d)| d.len()).sum();
        assert_eq!(total, w.layer_tensors().iter().map(|t| t.len()).sum::<usize>() + 2 * 256 * 128 + 128);
    }

    #[test]
    fn embedding_checks_the_token() {
        let w = LlamaWeights::random(&LlamaConfig::preset("tiny").unwrap(), 0).unwrap();
        assert_eq!(w.embedding(3).unwrap(), &w.embed.as_slice()[384..512]);
        assert!(w.embedding(256).unwrap_err().to_string().contains("token id 256 is outside the vocabulary of 256"));
    }
}
