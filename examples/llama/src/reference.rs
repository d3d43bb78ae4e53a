//! A plain, sequential CPU reference of one Llama 3 decode step, and greedy generation
//! through it; written without the DSL, to check megakernels against.
//!
//! Arithmetic is f32 (see [`crate::ops`]). Activations are rounded to bf16 exactly where
//! the decode megakernel ([`crate::decode`]) stores them, with its fused epilogues:
//!
//! 1. the residual stream `h` (the embedding row, then after each residual add);
//! 2. every RMSNorm output (rounded once, after the weight);
//! 3. the projections q, k, v;
//! 4. q and k after RoPE (k is stored to the cache so; v as projected);
//! 5. each head's attention output (softmax and weighted sum in f32);
//! 6. the MLP activation `silu(gate) · up`, computed from the f32 gate and up (one GEMV
//!    pass over both weights, rounded once).
//!
//! The residual adds are fused into the output and down projections:
//! `h ← bf16(h + o)` and `h ← bf16(h + down)` with `o` and `down` in f32 (Hugging Face
//! rounds `o` and `down` to bf16 first; the difference is within bf16's precision). RoPE
//! angles are computed in f64 as the kernel does ([`crate::rope`]). The logits are not
//! rounded: they are written as f32 and argmax takes the first maximum.

use crate::error::{Error, Result};
use crate::kv_cache::KvCache;
use crate::ops::{argmax, attend, matvec, rms_norm, round_all, round_bf16, silu};
use crate::rope;
use crate::weights::LlamaWeights;
use et_core::{Tensor, bf16};

/// The reference model: weights and their RoPE frequencies.
pub struct Reference<'w> {
    weights: &'w LlamaWeights,
    inv_freq: Vec<f64>,
}

/// What [`Reference::generate`] returns.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    /// The generated tokens of each sequence, `n_tokens` each, prompts excluded.
    pub tokens: Vec<Vec<u32>>,
    /// The logits `[B, vocab]` of the last step.
    pub logits: Tensor<f32>,
}

impl<'w> Reference<'w> {
    /// A reference over `weights`.
    pub fn new(weights: &'w LlamaWeights) -> Self {
        Reference { weights, inv_freq: rope::inv_freqs(&weights.config) }
    }

    /// One decode step for a batch: sequence `b` reads `tokens[b]` at `positions[b]` (the
    /// same value for all for a shared position), appends its key and value there, and
    /// attends over positions `0..=positions[b]` of the cache, which earlier steps must
    /// have filled. Returns the logits `[B, vocab]`.
    pub fn step(&self, cache: &mut KvCache, tokens: &[u32], positions: &[usize]) -> Result<Tensor<f32>> {
        let c = &self.weights.config;
        if !cache.fits(c) {
            return Err(Error::Input(format!("KV cache of shape {:?} does not fit the model", cache.k.shape())));
        }
        if tokens.len() != cache.batch() || positions.len() != cache.batch() {
            return Err(Error::Input(format!(
                "{} tokens and {} positions given for a batch of {}",
                tokens.len(),
                positions.len(),
                cache.batch()
            )));
        }
        if let Some(p) = positions.iter().find(|&&p| p >= cache.max_pos()) {
            return Err(Error::Input(format!("position {p} is past the KV cache's {} positions", cache.max_pos())));
        }
        let mut logits = Vec::with_capacity(tokens.len() * c.vocab_size);
        for (seq, (&token, &pos)) in tokens.iter().zip(positions).enumerate() {
            logits.extend(self.sequence_step(cache, seq, token, pos)?);
        }
        Ok(Tensor::from_vec(&[tokens.len(), c.vocab_size], logits).expect("B rows of vocab logits"))
    }

    /// Greedy generation of `n_tokens` per prompt. The prompts (of any lengths ≥ 1) are
    /// fed one token per step through [`Reference::step`], all sequences at the same
    /// position; a sequence whose prompt is consumed feeds back its last output.
    pub fn generate(&self, prompts: &[Vec<u32>], n_tokens: usize) -> Result<Generation> {
        let c = &self.weights.config;
        if prompts.is_empty() || prompts.iter().any(Vec::is_empty) || n_tokens == 0 {
            return Err(Error::Input("generation needs at least one non-empty prompt and one token".into()));
        }
        let longest = prompts.iter().map(Vec::len).max().expect("non-empty");
        let steps = longest + n_tokens - 1;
        if steps > c.max_position_embeddings {
            return Err(Error::Input(format!(
                "{steps} positions exceed the model's {} positions",
                c.max_position_embeddings
            )));
        }
        let mut cache = KvCache::new(c, prompts.len(), steps);
        let mut tokens: Vec<Vec<u32>> = vec![Vec::with_capacity(n_tokens); prompts.len()];
        let mut logits = Tensor::zeros(&[prompts.len(), c.vocab_size]);
        for pos in 0..steps {
            let input: Vec<u32> = prompts
                .iter()
                .zip(&tokens)
                .map(|(p, out)| p.get(pos).or(out.last()).copied().expect("a prompt or an output token"))
                .collect();
            logits = self.step(&mut cache, &input, &vec![pos; prompts.len()])?;
            for (b, (p, out)) in prompts.iter().zip(&mut tokens).enumerate() {
                if pos + 1 >= p.len() && out.len() < n_tokens {
                    let row = &logits.as_slice()[b * c.vocab_size..(b + 1) * c.vocab_size];
                    out.push(argmax(row) as u32);
                }
            }
        }
        Ok(Generation { tokens, logits })
    }

    /// One sequence's step: the layers, final norm and LM head; returns its logits.
    fn sequence_step(&self, cache: &mut KvCache, seq: usize, token: u32, pos: usize) -> Result<Vec<f32>> {
        let w = self.weights;
        let c = &w.config;
        let (d, eps) = (c.head_dim, c.rms_norm_eps);
        let scale = 1.0 / (d as f32).sqrt();
        let mut h: Vec<f32> = w.embedding(token)?.iter().map(|v| v.to_f32()).collect();
        for l in 0..c.num_layers {
            let x = rms_norm(&h, layer(&w.attn_norm, l), eps);
            let mut q = matvec(layer(&w.wq, l), &x);
            let mut k = matvec(layer(&w.wk, l), &x);
            let mut v = matvec(layer(&w.wv, l), &x);
            for t in [&mut q, &mut k, &mut v] {
                round_all(t);
            }
            for head in q.chunks_exact_mut(d).chain(k.chunks_exact_mut(d)) {
                rope::apply(head, pos, &self.inv_freq);
                round_all(head);
            }
            for (kv_head, (k, v)) in k.chunks_exact(d).zip(v.chunks_exact(d)).enumerate() {
                cache.write(l, seq, kv_head, pos, k, v);
            }
            let mut attn = Vec::with_capacity(q.len());
            for (head, q) in q.chunks_exact(d).enumerate() {
                let (keys, values) = cache.history(l, seq, head / c.group_size(), pos + 1);
                attn.extend(attend(q, keys, values, scale));
            }
            round_all(&mut attn);
            residual_add(&mut h, matvec(layer(&w.wo, l), &attn));
            let x = rms_norm(&h, layer(&w.mlp_norm, l), eps);
            let gate = matvec(layer(&w.w_gate, l), &x);
            let up = matvec(layer(&w.w_up, l), &x);
            let act: Vec<f32> = gate.iter().zip(&up).map(|(&g, &u)| round_bf16(silu(g) * u)).collect();
            residual_add(&mut h, matvec(layer(&w.w_down, l), &act));
        }
        Ok(matvec(w.head().as_slice(), &rms_norm(&h, w.final_norm.as_slice(), eps)))
    }
}

/// `h ← bf16(h + y)`, `y` in f32: the residual add fused into a projection's epilogue.
fn residual_add(h: &mut [f32], y: Vec<f32>) {
    h.iter_mut().zip(y).for_each(|(h, y)| *h = round_bf16(*h + y));
}

/// Layer `l` of a stacked `[L, ..]` tensor.
fn layer(t: &Tensor<bf16>, l: usize) -> &[bf16] {
    let n = t.len() / t.shape()[0];
    &t.as_slice()[l * n..(l + 1) * n]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LlamaConfig;

    fn tiny(seed: u64) -> LlamaWeights {
        LlamaWeights::random(&LlamaConfig::preset("tiny").unwrap(), seed).unwrap()
    }

    #[test]
    fn tiny_generation_is_deterministic_and_not_degenerate() {
        let w = tiny(1);
        let prompt = vec![vec![1, 2, 3]];
        let a = Reference::new(&w).generate(&prompt, 12).unwrap();
        assert_eq!(a, Reference::new(&w).generate(&prompt, 12).unwrap());
        assert_eq!(a.tokens[0].len(), 12);
        assert_eq!(a.logits.shape(), &[1, 256]);
        let other = Reference::new(&tiny(2)).generate(&prompt, 12).unwrap();
        assert_ne!(a.tokens, other.tokens, "the seed changes the weights");
        let distinct: std::collections::BTreeSet<_> = a.tokens[0].iter().chain(&other.tokens[0]).collect();
        assert!(distinct.len() > 2, "{:?} {:?}", a.tokens, other.tokens);
    }

    #[test]
    fn batched_sequences_are_independent() {
        let w = tiny(3);
        let r = Reference::new(&w);
        let prompts = vec![vec![5, 6, 7, 8], vec![9], vec![5, 6, 7, 8]];
        let batch = r.generate(&prompts, 6).unwrap();
        assert_eq!(batch.tokens[0], batch.tokens[2]);
        for (p, got) in prompts.iter().zip(&batch.tokens) {
            assert_eq!(&r.generate(std::slice::from_ref(p), 6).unwrap().tokens[0], got, "prompt {p:?}");
        }
        // the first prompt's last logits are those of its own run (ending at the same step)
        let alone = r.generate(&prompts[..1], 6).unwrap();
        assert_eq!(&batch.logits.as_slice()[..256], alone.logits.as_slice());
    }

    #[test]
    fn sequences_may_sit_at_different_positions() {
        let w = tiny(4);
        let r = Reference::new(&w);
        let c = &w.config;
        // sequence 0 steps through positions 0..3, sequence 1 only uses position 0 and 1
        let mut both = KvCache::new(c, 2, 4);
        for (tokens, positions) in [([1, 9], [0, 0]), ([2, 8], [1, 1]), ([3, 8], [2, 1])] {
            r.step(&mut both, &tokens, &positions).unwrap();
        }
        let logits = r.step(&mut both, &[4, 7], &[3, 1]).unwrap();
        let alone = |steps: &[(u32, usize)]| {
            let mut cache = KvCache::new(c, 1, 4);
            steps.iter().map(|&(t, p)| r.step(&mut cache, &[t], &[p]).unwrap()).last().unwrap()
        };
        assert_eq!(&logits.as_slice()[..256], alone(&[(1, 0), (2, 1), (3, 2), (4, 3)]).as_slice());
        assert_eq!(&logits.as_slice()[256..], alone(&[(9, 0), (7, 1)]).as_slice());
    }

    #[test]
    fn bad_inputs_are_errors() {
        let w = tiny(0);
        let r = Reference::new(&w);
        let mut cache = KvCache::new(&w.config, 2, 4);
        let msg = |e: Error| e.to_string();
        assert!(msg(r.step(&mut cache, &[1], &[0, 0]).unwrap_err()).contains("1 tokens and 2 positions"));
        assert!(msg(r.step(&mut cache, &[1, 2], &[0, 4]).unwrap_err()).contains("position 4 is past"));
        assert!(msg(r.step(&mut cache, &[1, 999], &[0, 0]).unwrap_err()).contains("token id 999"));
        let other = LlamaConfig { num_layers: 3, ..w.config.clone() };
        assert!(msg(r.step(&mut KvCache::new(&other, 2, 4), &[1, 2], &[0, 0]).unwrap_err()).contains("does not fit"));
        assert!(r.generate(&[vec![]], 3).is_err() && r.generate(&[vec![1]], 0).is_err());
        assert!(msg(r.generate(&[vec![1]], 5000).unwrap_err()).contains("exceed the model's 2048 positions"));
    }
}
