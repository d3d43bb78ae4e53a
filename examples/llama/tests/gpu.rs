//! The decode megakernel of llama-3.2-1b (random weights) on the GPU against the CPU
//! [`Reference`]: every step's logits within bf16 tolerance at B = 1 and 8, and a 24-token
//! greedy run token for token; the batch-32 and 64 stamps, and batches 3 and 20 on the
//! stamps of 8 and 32 (idle slots), row by row against batch 8's.
//! The GPU sums in other orders than the CPU (warp shuffles,
//! split-KV chunks): a step's token is compared where the reference's top-2 margin is
//! more than twice the step's largest logit difference, which is exactly where no
//! difference of that size can change the argmax; the test prints how many were compared
//! and needs most of them.
//! Run in release: `cargo test --release -p llama --test gpu -- --ignored`.

use et_core::{LaunchOptions, Tensor};
use llama::{Decoder, KvCache, LlamaConfig, LlamaWeights, Reference};

fn weights() -> LlamaWeights {
    LlamaWeights::random(&LlamaConfig::preset("llama-3.2-1b").unwrap(), 2024).unwrap()
}

/// Largest |got - want| over the largest |want|.
fn max_error(got: &Tensor<f32>, want: &Tensor<f32>) -> f32 {
    assert_eq!(got.shape(), want.shape());
    let scale = want.as_slice().iter().fold(0f32, |m, v| m.max(v.abs()));
    got.as_slice().iter().zip(want.as_slice()).fold(0f32, |m, (g, w)| m.max((g - w).abs())) / scale
}

const LOGIT_TOL: f32 = llama::LOGIT_TOLERANCE;

/// (index of the largest, its lead over the second largest).
fn top2(row: &[f32]) -> (usize, f32) {
    let best = llama::ops::argmax(row);
    let second = row.iter().enumerate().filter(|&(i, _)| i != best).fold(f32::NEG_INFINITY, |m, (_, &v)| m.max(v));
    (best, row[best] - second)
}

/// Runs `steps` steps on the GPU and the reference side by side, both fed the
/// reference's greedy tokens after the prompts; checks the logits of every step; returns
/// (tokens compared, tokens that had a clear margin and agreed).
fn side_by_side(gpu: &et_device::Cuda, w: &LlamaWeights, prompts: &[Vec<u32>], steps: usize) -> (usize, usize) {
    let batch = prompts.len();
    let mut dec = Decoder::new(gpu, w, batch, steps, LaunchOptions::default()).unwrap();
    let reference = Reference::new(w);
    let mut cache = KvCache::new(&w.config, batch, steps);
    let vocab = w.config.vocab_size;
    let mut last: Vec<u32> = prompts.iter().map(|p| p[0]).collect();
    let (mut clear, mut agreed) = (0, 0);
    for pos in 0..steps {
        let input: Vec<u32> = prompts.iter().zip(&last).map(|(p, &l)| *p.get(pos).unwrap_or(&l)).collect();
        let want = reference.step(&mut cache, &input, &vec![pos; batch]).unwrap();
        let got = dec.step(&input, &vec![pos; batch], true).unwrap();
        let err = max_error(got.logits.as_ref().unwrap(), &want);
        println!("B = {batch}, position {pos}: logits within {err:.2e} of the largest");
        assert!(err <= LOGIT_TOL, "B = {batch}, position {pos}: logits differ by {err} of the largest");
        for (b, last) in last.iter_mut().enumerate() {
            let row = &want.as_slice()[b * vocab..(b + 1) * vocab];
            let scale = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            let (best, margin) = top2(row);
            // every logit moved by at most err · scale: below twice that, a flip is noise
            if margin > 2.0 * err * scale {
                clear += 1;
                agreed += (got.next[b] as usize == best) as usize;
                assert_eq!(got.next[b] as usize, best, "B = {batch}, position {pos}, sequence {b}: next token");
            }
            *last = best as u32;
        }
    }
    (clear, agreed)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn llama_3_2_1b_steps_match_the_cpu_reference_at_batch_1_and_8() {
    let gpu = et_device::Cuda::new(0).unwrap_or_else(|e| panic!("{e}"));
    let w = weights();
    let prompts: Vec<Vec<u32>> = (0..8u32).map(|b| vec![128000, 9906 + 17 * b, 1917 + b]).collect();
    for batch in [1, 8] {
        let (clear, agreed) = side_by_side(&gpu, &w, &prompts[..batch], 4);
        println!("B = {batch}: {agreed} of {clear} clear-margin next tokens agree");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn llama_3_2_1b_greedy_run_matches_token_for_token() {
    let gpu = et_device::Cuda::new(0).unwrap_or_else(|e| panic!("{e}"));
    let w = weights();
    let prompt = vec![vec![128000u32, 791, 6864, 315]];
    let steps = prompt[0].len() + 24 - 1;
    let (clear, agreed) = side_by_side(&gpu, &w, &prompt, steps);
    println!("{agreed} of {clear} clear-margin tokens agree ({steps} steps)");
    assert!(clear * 4 >= steps * 3, "only {clear} of {steps} tokens had a clear margin: pick another seed");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn generation_feeding_tokens_back_on_the_device_equals_writing_them_from_the_host() {
    let gpu = et_device::Cuda::new(0).unwrap_or_else(|e| panic!("{e}"));
    let w = weights();
    let prompt = vec![128000u32, 791, 6864, 315];
    let n_tokens = 8;
    // one decoder's `generate` copies each step's tokens into its ids on the device ...
    let steps = prompt.len() + n_tokens - 1;
    let mut dec = Decoder::new(&gpu, &w, 1, steps, LaunchOptions::default()).unwrap();
    let run = dec.generate(std::slice::from_ref(&prompt), n_tokens, |_, _| {}).unwrap();
    // ... another's steps are given every id from the host, written into its buffers
    let mut host = Decoder::new(&gpu, &w, 1, steps, LaunchOptions::default()).unwrap();
    let (mut tokens, mut logits) = (Vec::new(), None);
    for pos in 0..steps {
        let input = *prompt.get(pos).or(tokens.last()).unwrap();
        let step = host.step(&[input], &[pos], pos + 1 == steps).unwrap();
        if pos + 1 >= prompt.len() {
            tokens.push(step.next[0]);
        }
        logits = step.logits;
    }
    assert_eq!(run.tokens[0], tokens);
    let bits = |t: &Tensor<f32>| t.as_slice().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&run.logits), bits(logits.as_ref().unwrap()), "the last logits, bit for bit");
    // inputs rewritten in place each step: another token in between changes the logits,
    // and the first token again gives its logits again
    let a = host.step(&[791], &[3], true).unwrap();
    let other = host.step(&[6864], &[3], true).unwrap();
    let b = host.step(&[791], &[3], true).unwrap();
    assert_ne!(bits(a.logits.as_ref().unwrap()), bits(other.logits.as_ref().unwrap()));
    assert_eq!(bits(a.logits.as_ref().unwrap()), bits(b.logits.as_ref().unwrap()));
    assert_eq!(a.next, b.next);
}

/// A decoder built beside its compile (`new_beside_compile`, which prepares the first
/// step's module and task graph on another thread while the weights are made) steps
/// without compiling or resolving anything, and gives the logits of one built plainly.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_decoder_built_beside_its_compile_resolves_nothing_in_its_first_step() {
    let cache = std::env::temp_dir().join(format!("et-llama-beside-{}", std::process::id()));
    let gpu = et_device::Cuda::new(0).unwrap_or_else(|e| panic!("{e}")).with_cache_dir(Some(cache.clone()));
    let config = LlamaConfig::preset("llama-3.2-1b").unwrap();
    let (mut dec, warmup) =
        Decoder::new_beside_compile(&gpu, &config, 3, 40, LaunchOptions::default(), || Ok(weights())).unwrap();
    assert!(warmup.compiled && !warmup.graph.is_zero(), "{warmup:?}");
    let (tokens, positions) = ([128000, 791, 6864], [0, 0, 0]);
    let step = dec.step(&tokens, &positions, true).unwrap();
    let r = &step.report;
    assert!(!r.compiled && r.host_module.is_zero() && r.host_graph.is_zero(), "{r:?}");
    // another decoder of other positions: another task graph, which its first step resolves
    let w = weights();
    let mut plain = Decoder::new(&gpu, &w, 3, 48, LaunchOptions::default()).unwrap();
    let other = plain.step(&tokens, &positions, true).unwrap();
    assert!(!other.report.host_graph.is_zero(), "{:?}", other.report);
    let bits = |t: &Tensor<f32>| t.as_slice().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(step.logits.as_ref().unwrap()), bits(other.logits.as_ref().unwrap()));
    assert_eq!(step.next, other.next);
    std::fs::remove_dir_all(&cache).ok();
}

/// The batch-32 and 64 stamps (norm tasks, the output and down projections split over k)
/// against the batch-8 stamp (fused norms, whole projections), which the test above holds
/// to the CPU reference: sequences are independent, so each row of a large batch, fed
/// the tokens of one of the eight prompts, has that prompt's batch-8 logits, step by step.
/// Batches 3 and 20 run on the stamps of 8 and 32 with idle slots, and so must theirs.
#[test]
#[ignore = "needs a CUDA GPU"]
fn llama_3_2_1b_every_batch_gives_each_sequence_its_batch_8_logits() {
    let gpu = et_device::Cuda::new(0).unwrap_or_else(|e| panic!("{e}"));
    let w = weights();
    let vocab = w.config.vocab_size;
    let prompts: Vec<Vec<u32>> = (0..8u32).map(|b| vec![128000, 4052 + 31 * b, 2231 + b]).collect();
    let steps = 4;
    let mut small = Decoder::new(&gpu, &w, 8, steps, LaunchOptions::default()).unwrap();
    let mut want = Vec::new();
    let mut last: Vec<u32> = prompts.iter().map(|p| p[0]).collect();
    for pos in 0..steps {
        let input: Vec<u32> = prompts.iter().zip(&last).map(|(p, &l)| *p.get(pos).unwrap_or(&l)).collect();
        let step = small.step(&input, &[pos; 8], true).unwrap();
        last = step.next.clone();
        want.push((input, step.logits.unwrap()));
    }
    for batch in [3, 20, 32, 64] {
        let mut dec = Decoder::new(&gpu, &w, batch, steps, LaunchOptions::default()).unwrap();
        for (pos, (input, logits)) in want.iter().enumerate() {
            let tokens: Vec<u32> = (0..batch).map(|b| input[b % 8]).collect();
            let got = dec.step(&tokens, &vec![pos; batch], true).unwrap().logits.unwrap();
            let mut err = 0f32;
            for b in 0..batch {
                let row = |t: &Tensor<f32>, r: usize| {
                    Tensor::from_vec(&[1, vocab], t.as_slice()[r * vocab..(r + 1) * vocab].to_vec()).unwrap()
                };
                err = err.max(max_error(&row(&got, b), &row(logits, b % 8)));
            }
            println!("B = {batch}, position {pos}: every row within {err:.2e} of the largest of its batch-8 row");
            assert!(
                err <= LOGIT_TOL,
                "B = {batch}, position {pos}: a row differs from batch 8's by {err} of the largest"
            );
        }
    }
}
