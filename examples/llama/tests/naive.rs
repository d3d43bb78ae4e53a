//! The reference against an independent, naive computation: a one-layer model evaluated
//! over a whole prompt at once (causal attention, no KV cache), in f64 without any bf16
//! rounding, with plain RoPE and loops written out. The two agree to bf16 precision at
//! every position; a wrong head mapping, RoPE pairing or cache offset would not.

use et_core::{Tensor, bf16, relative_error};
use llama::{KvCache, LlamaConfig, LlamaWeights, Reference};

fn f64s(t: &Tensor<bf16>) -> Vec<f64> {
    t.as_slice().iter().map(|v| v.to_f32() as f64).collect()
}

/// `W x` for row-major `W: [rows, x.len()]`.
fn mat(w: &[f64], x: &[f64]) -> Vec<f64> {
    let n = x.len();
    (0..w.len() / n).map(|r| (0..n).map(|c| w[r * n + c] * x[c]).sum()).collect()
}

fn norm(x: &[f64], g: &[f64], eps: f64) -> Vec<f64> {
    let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    x.iter().zip(g).map(|(v, g)| v / (ms + eps).sqrt() * g).collect()
}

/// Rotates head `x` (pairs `i`, `i + d/2`) by `pos · theta^(-2i/d)`.
fn rope(x: &mut [f64], pos: usize, theta: f64) {
    let d = x.len();
    for i in 0..d / 2 {
        let a = pos as f64 * theta.powf(-(2.0 * i as f64) / d as f64);
        let (x0, x1) = (x[i], x[i + d / 2]);
        x[i] = x0 * a.cos() - x1 * a.sin();
        x[i + d / 2] = x1 * a.cos() + x0 * a.sin();
    }
}

/// Logits `[T, vocab]` of every prompt position of a one-layer model.
fn naive_logits(w: &LlamaWeights, prompt: &[u32]) -> Vec<Vec<f64>> {
    let c = &w.config;
    assert_eq!(c.num_layers, 1);
    let (h, d, nh, nkv, eps) = (c.hidden_size, c.head_dim, c.num_heads, c.num_kv_heads, c.rms_norm_eps as f64);
    let embed = f64s(&w.embed);
    let mut x: Vec<Vec<f64>> = prompt.iter().map(|&t| embed[t as usize * h..(t as usize + 1) * h].to_vec()).collect();
    let xn: Vec<Vec<f64>> = x.iter().map(|r| norm(r, &f64s(&w.attn_norm), eps)).collect();
    let mut q: Vec<Vec<f64>> = xn.iter().map(|r| mat(&f64s(&w.wq), r)).collect();
    let mut k: Vec<Vec<f64>> = xn.iter().map(|r| mat(&f64s(&w.wk), r)).collect();
    let v: Vec<Vec<f64>> = xn.iter().map(|r| mat(&f64s(&w.wv), r)).collect();
    for t in 0..prompt.len() {
        q[t].chunks_mut(d).for_each(|head| rope(head, t, c.rope_theta as f64));
        k[t].chunks_mut(d).for_each(|head| rope(head, t, c.rope_theta as f64));
    }
    for t in 0..prompt.len() {
        let mut attn = vec![0.0; nh * d];
        for hq in 0..nh {
            let kv = hq * nkv / nh;
            let qh = &q[t][hq * d..(hq + 1) * d];
            let scores: Vec<f64> =
                (0..=t).map(|s| (0..d).map(|i| qh[i] * k[s][kv * d + i]).sum::<f64>() / (d as f64).sqrt()).collect();
            let z: f64 = scores.iter().map(|s| s.exp()).sum();
            for (s, score) in scores.iter().enumerate() {
                for i in 0..d {
                    attn[hq * d + i] += score.exp() / z * v[s][kv * d + i];
                }
            }
        }
        let o = mat(&f64s(&w.wo), &attn);
        x[t].iter_mut().zip(o).for_each(|(a, b)| *a += b);
        let xm = norm(&x[t], &f64s(&w.mlp_norm), eps);
        let (g, u) = (mat(&f64s(&w.w_gate), &xm), mat(&f64s(&w.w_up), &xm));
        let act: Vec<f64> = g.iter().zip(&u).map(|(g, u)| g / (1.0 + (-g).exp()) * u).collect();
        x[t].iter_mut().zip(mat(&f64s(&w.w_down), &act)).for_each(|(a, b)| *a += b);
    }
    x.iter().map(|r| mat(&f64s(w.head()), &norm(r, &f64s(&w.final_norm), eps))).collect()
}

#[test]
fn one_layer_step_by_step_matches_a_naive_whole_prompt_computation() {
    for tied in [false, true] {
        let c = LlamaConfig {
            num_layers: 1,
            rope_scaling: None,
            tie_word_embeddings: tied,
            ..LlamaConfig::preset("tiny").unwrap()
        };
        let w = LlamaWeights::random(&c, 11).unwrap();
        let prompt = [5u32, 200, 17, 17, 99, 3, 250, 42];
        let want = naive_logits(&w, &prompt);
        let reference = Reference::new(&w);
        let mut cache = KvCache::new(&c, 1, prompt.len());
        for (pos, &token) in prompt.iter().enumerate() {
            let got = reference.step(&mut cache, &[token], &[pos]).unwrap();
            let want = Tensor::from_vec(&[1, c.vocab_size], want[pos].iter().map(|&v| v as f32).collect()).unwrap();
            let err = relative_error(&got, &want);
            assert!(err < 1.5e-2, "tied {tied}, position {pos}: relative error {err}");
        }
    }
}
