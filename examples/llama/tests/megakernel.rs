//! The decode megakernel on the CPU backend against the sequential [`Reference`]: the
//! tiny config, every step's logits and next token, greedy generation token for token, at
//! batch 1, 2, 3 and 4 (each attention form of `decode_step!`) and smaller batches on the
//! stamps of larger ones (idle slots), under chaos (random placement, order, pops and sleeps) with several
//! seeds and both schedules. The reference rounds where the megakernel stores, and the
//! CPU ops sum in the reference's order, so the only difference left is the split-KV
//! attention's merge of chunk partials (f32 rounding, then an occasional bf16 ulp).

use et_core::{Cpu, LaunchOptions, ScheduleKind, Tensor};
use llama::ops::argmax;
use llama::{Decoder, KvCache, LlamaConfig, LlamaWeights, Reference, Stamp};

fn tiny(seed: u64) -> LlamaWeights {
    LlamaWeights::random(&LlamaConfig::preset("tiny").unwrap(), seed).unwrap()
}

fn options(schedule: ScheduleKind, chaos: Option<u64>) -> LaunchOptions {
    LaunchOptions { schedule: Some(schedule), chaos, ..Default::default() }
}

/// Largest |got - want| over the largest |want|.
fn max_error(got: &Tensor<f32>, want: &Tensor<f32>) -> f32 {
    assert_eq!(got.shape(), want.shape());
    let scale = want.as_slice().iter().fold(0f32, |m, v| m.max(v.abs()));
    got.as_slice().iter().zip(want.as_slice()).fold(0f32, |m, (g, w)| m.max((g - w).abs())) / scale
}

/// bf16 keeps 8 significant bits: logits built from bf16 activations that differ by an
/// ulp here and there stay well within 1% of the largest logit.
const LOGIT_TOL: f32 = 1e-2;

/// Steps the megakernel and the reference side by side through `prompts` (fed token by
/// token) and then their greedy continuation; compares every step's logits and next
/// tokens. Returns the generated tokens.
fn side_by_side(w: &LlamaWeights, prompts: &[Vec<u32>], n_tokens: usize, opts: LaunchOptions) -> Vec<Vec<u32>> {
    let cpu = Cpu::new();
    let batch = prompts.len();
    let steps = prompts.iter().map(Vec::len).max().unwrap() + n_tokens - 1;
    // a cache of exactly the positions the run attends over
    let mut dec = Decoder::new(&cpu, w, batch, steps, opts).unwrap();
    let reference = Reference::new(w);
    let mut cache = KvCache::new(&w.config, batch, steps);
    let mut out: Vec<Vec<u32>> = vec![vec![]; batch];
    let vocab = w.config.vocab_size;
    for pos in 0..steps {
        let input: Vec<u32> =
            prompts.iter().zip(&out).map(|(p, o)| p.get(pos).or(o.last()).copied().unwrap()).collect();
        let want = reference.step(&mut cache, &input, &vec![pos; batch]).unwrap();
        let got = dec.step(&input, &vec![pos; batch], true).unwrap();
        let logits = got.logits.as_ref().unwrap();
        let err = max_error(logits, &want);
        assert!(err <= LOGIT_TOL, "position {pos}: logits differ by {err} of the largest");
        for b in 0..batch {
            let row = &want.as_slice()[b * vocab..(b + 1) * vocab];
            let got_row = &logits.as_slice()[b * vocab..(b + 1) * vocab];
            assert_eq!(got.next[b] as usize, argmax(got_row), "the split argmax is the argmax of the logits");
            assert_eq!(got.next[b] as usize, argmax(row), "position {pos}, sequence {b}: next token");
            if pos + 1 >= prompts[b].len() && out[b].len() < n_tokens {
                out[b].push(got.next[b]);
            }
        }
    }
    out
}

#[test]
fn one_step_is_the_reference_step_exactly_while_one_kv_chunk_is_live() {
    // Positions 0..4 lie in KV chunk 0: attention has one partial, merged with weight 1,
    // so every bf16 store and the f32 logits equal the reference's bit for bit.
    let w = tiny(5);
    let cpu = Cpu::new();
    let mut dec = Decoder::new(&cpu, &w, 1, 32, LaunchOptions::default()).unwrap();
    assert_eq!(dec.stamp(), Stamp::TinyB1);
    let reference = Reference::new(&w);
    let mut cache = KvCache::new(&w.config, 1, 4);
    for (pos, token) in [7u32, 250, 3, 3].into_iter().enumerate() {
        let want = reference.step(&mut cache, &[token], &[pos]).unwrap();
        let got = dec.step(&[token], &[pos], true).unwrap();
        assert_eq!(got.logits.unwrap().as_slice(), want.as_slice(), "position {pos}");
    }
}

#[test]
fn greedy_generation_matches_the_reference_under_chaos() {
    let prompt = vec![vec![1u32, 2, 3]];
    for seed in [1u64, 2, 3] {
        let w = tiny(seed);
        let want = Reference::new(&w).generate(&prompt, 8).unwrap().tokens;
        for (k, schedule) in [ScheduleKind::Static, ScheduleKind::Dynamic].into_iter().enumerate() {
            let chaos = Some(seed * 100 + k as u64);
            let got = side_by_side(&w, &prompt, 8, options(schedule, chaos));
            assert_eq!(got, want, "seed {seed}, {schedule:?}, chaos {chaos:?}");
        }
    }
}

#[test]
fn a_batch_of_two_different_prompts_matches_the_reference() {
    let prompts = vec![vec![40u32, 41, 42, 43], vec![200]];
    for (seed, schedule) in [(7u64, ScheduleKind::Static), (8, ScheduleKind::Dynamic)] {
        let w = tiny(seed);
        let want = Reference::new(&w).generate(&prompts, 6).unwrap();
        let got = side_by_side(&w, &prompts, 6, options(schedule, Some(seed)));
        assert_eq!(got, want.tokens, "seed {seed}");
        // and through Decoder::generate, whose last logits are the reference's last
        let cpu = Cpu::new();
        let mut dec = Decoder::new(&cpu, &w, 2, 9, options(schedule, Some(seed + 1))).unwrap();
        let mut steps = 0;
        let run = dec.generate(&prompts, 6, |_, _| steps += 1).unwrap();
        assert_eq!((run.tokens, steps), (want.tokens, 4 + 6 - 1));
        assert!(max_error(&run.logits, &want.logits) <= LOGIT_TOL);
    }
}

#[test]
fn a_batch_of_four_in_split_pieces_with_merge_tasks_matches_the_reference() {
    let prompts = vec![vec![5u32, 6], vec![250], vec![9, 9, 9], vec![128]];
    for (seed, schedule) in [(11u64, ScheduleKind::Static), (12, ScheduleKind::Dynamic)] {
        let w = tiny(seed);
        let want = Reference::new(&w).generate(&prompts, 5).unwrap();
        let got = side_by_side(&w, &prompts, 5, options(schedule, Some(seed)));
        assert_eq!(got, want.tokens, "seed {seed}, {schedule:?}");
    }
}

#[test]
fn a_batch_of_three_with_split_k_projections_summed_by_the_norms_matches_the_reference() {
    let prompts = vec![vec![17u32, 3], vec![90, 91, 92], vec![201]];
    for (seed, schedule) in [(13u64, ScheduleKind::Static), (14, ScheduleKind::Dynamic)] {
        let w = tiny(seed);
        let want = Reference::new(&w).generate(&prompts, 5).unwrap();
        let got = side_by_side(&w, &prompts, 5, options(schedule, Some(seed)));
        assert_eq!(got, want.tokens, "seed {seed}, {schedule:?}");
    }
}

#[test]
fn sizes_without_a_megakernel_and_bad_inputs_are_errors() {
    let w = tiny(0);
    let cpu = Cpu::new();
    let err = |r: llama::Result<Decoder<'_, Cpu>>| r.err().map(|e| e.to_string()).unwrap_or_default();
    let e = err(Decoder::new(&cpu, &w, 5, 32, LaunchOptions::default()));
    assert!(e.contains("a batch of 5 with this model: it takes 1 to 4 sequences (stamped batches: 1, 2, 3, 4"), "{e}");
    assert!(err(Decoder::new(&cpu, &w, 0, 32, LaunchOptions::default())).contains("a batch of 0"));
    let e = err(Decoder::on_stamp(&cpu, &w, Stamp::TinyB2, 3, 32, LaunchOptions::default()));
    assert!(e.contains("a batch of 3 on the megakernel TinyB2, which runs 1 to 2 sequences"), "{e}");
    let e = err(Decoder::on_stamp(&cpu, &w, Stamp::Llama1bB1, 1, 32, LaunchOptions::default()));
    assert!(e.contains("the megakernel Llama1bB1 does not have this model's shapes"), "{e}");
    // compiling ahead picks the stamp as `new` does, and its errors; the CPU compiles nothing
    let ahead = |batch| Decoder::precompile(&cpu, &w.config, batch, &LaunchOptions::default());
    assert!(!ahead(3).unwrap(), "nothing to compile on the CPU");
    let e = ahead(5).unwrap_err().to_string();
    assert!(e.contains("a batch of 5 with this model: it takes 1 to 4 sequences"), "{e}");
    // building beside the compile: a batch without a megakernel fails before the weights load
    let beside = |batch, made: &std::cell::Cell<bool>| {
        let weights = || {
            made.set(true);
            Ok(w.clone())
        };
        Decoder::new_beside_compile(&cpu, &w.config, batch, 8, LaunchOptions::default(), weights)
    };
    let made = std::cell::Cell::new(false);
    assert!(beside(5, &made).err().map(|e| e.to_string()).unwrap_or_default().contains("a batch of 5"));
    assert!(!made.get(), "the weights were not made for a batch without a megakernel");
    let (dec, warmup) = beside(2, &made).unwrap();
    assert!(made.get() && !warmup.compiled && dec.batch() == 2);
    made.set(false);
    let e = Decoder::new_beside_compile(&cpu, &w.config, 2, 2049, LaunchOptions::default(), || {
        made.set(true);
        Ok(w.clone())
    })
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(e.contains("a KV cache of 2049 positions") && !made.get(), "{e}");
    let odd = LlamaWeights::random(&LlamaConfig { hidden_size: 96, ..w.config.clone() }, 0).unwrap();
    assert!(err(Decoder::new(&cpu, &odd, 1, 32, LaunchOptions::default())).contains("no decode megakernel is stamped"));
    // the cache's length is the host's choice, within the model's context
    for bad in [0, 2049] {
        let e = err(Decoder::new(&cpu, &w, 1, bad, LaunchOptions::default()));
        assert!(e.contains(&format!("a KV cache of {bad} positions: the model takes 1 to 2048")), "{e}");
    }
    let mut dec = Decoder::new(&cpu, &w, 1, 32, LaunchOptions::default()).unwrap();
    let msg = |r: llama::Result<llama::Step>| r.unwrap_err().to_string();
    assert!(msg(dec.step(&[1, 2], &[0, 0], false)).contains("2 tokens and 2 positions given for a batch of 1"));
    assert!(msg(dec.step(&[256], &[0], false)).contains("token id 256"));
    assert!(msg(dec.step(&[1], &[32], false)).contains("position 32 is past the KV cache's 32 positions"));
    assert!(dec.generate(&[vec![1]], 40, |_, _| {}).unwrap_err().to_string().contains("exceed the KV cache"));
    // the number of layers is a run-time dim: one layer or three use the same megakernel
    for layers in [1, 3] {
        let w = LlamaWeights::random(&LlamaConfig { num_layers: layers, ..w.config.clone() }, 9).unwrap();
        let want = Reference::new(&w).generate(&[vec![9, 8]], 3).unwrap().tokens;
        assert_eq!(side_by_side(&w, &[vec![9, 8]], 3, LaunchOptions::default()), want, "{layers} layers");
    }
}

#[test]
fn a_batch_smaller_than_its_megakernel_runs_with_idle_slots_and_matches_the_reference() {
    let prompts = [vec![7u32, 8, 9], vec![100], vec![3, 4]];
    let cases = [
        (1, Stamp::TinyB4, 11, ScheduleKind::Static),
        (3, Stamp::TinyB4, 12, ScheduleKind::Dynamic),
        (2, Stamp::TinyB3, 13, ScheduleKind::Static),
    ];
    for (batch, stamp, seed, schedule) in cases {
        let w = tiny(seed);
        let prompts = &prompts[..batch];
        let want = Reference::new(&w).generate(prompts, 5).unwrap();
        let cpu = Cpu::new();
        // the prompts' lengths differ: host-written steps, then fed-back ones, then host-written again
        let mut dec = Decoder::on_stamp(&cpu, &w, stamp, batch, 8, options(schedule, Some(seed))).unwrap();
        assert_eq!((dec.stamp(), dec.batch()), (stamp, batch));
        let run = dec.generate(prompts, 5, |_, step| assert_eq!(step.next.len(), batch)).unwrap();
        assert_eq!(run.tokens, want.tokens, "batch {batch} on {stamp:?}");
        assert_eq!(run.logits.shape(), &[batch, 256]);
        assert!(max_error(&run.logits, &want.logits) <= LOGIT_TOL);
        // a step written by the host after the fed-back ones (idle slots back at position 0)
        let step = dec.step(&vec![5; batch], &vec![0; batch], true).unwrap();
        let fresh = Reference::new(&w).generate(&vec![vec![5]; batch], 1).unwrap();
        assert_eq!(step.next, fresh.tokens.concat());
    }
    // each batch of a preset runs on the stamp with the fewest slots that hold it
    let one_b = LlamaConfig::preset("llama-3.2-1b").unwrap();
    let found: Vec<Stamp> = [1, 2, 8, 9, 32, 33, 64].iter().map(|&b| Stamp::find(&one_b, b).unwrap()).collect();
    use Stamp::*;
    assert_eq!(found, [Llama1bB1, Llama1bB8, Llama1bB8, Llama1bB32, Llama1bB32, Llama1bB64, Llama1bB64]);
    assert!(Stamp::find(&one_b, 65).unwrap_err().to_string().contains("it takes 1 to 64 sequences"));
}

/// Drives a fresh decoder step by step with every token id uploaded from the host, the
/// way [`Decoder::generate`] chooses its inputs; returns the tokens and the last logits.
fn host_fed<B: et_core::Backend>(
    backend: &B,
    w: &LlamaWeights,
    prompts: &[Vec<u32>],
    n_tokens: usize,
    opts: LaunchOptions,
) -> (Vec<Vec<u32>>, Tensor<f32>) {
    let batch = prompts.len();
    let steps = prompts.iter().map(Vec::len).max().unwrap() + n_tokens - 1;
    let mut dec = Decoder::new(backend, w, batch, steps, opts).unwrap();
    let mut out: Vec<Vec<u32>> = vec![vec![]; batch];
    let mut logits = None;
    for pos in 0..steps {
        let input: Vec<u32> =
            prompts.iter().zip(&out).map(|(p, o)| p.get(pos).or(o.last()).copied().unwrap()).collect();
        let step = dec.step(&input, &vec![pos; batch], pos + 1 == steps).unwrap();
        for b in 0..batch {
            if pos + 1 >= prompts[b].len() && out[b].len() < n_tokens {
                out[b].push(step.next[b]);
            }
        }
        logits = step.logits;
    }
    (out, logits.unwrap())
}

#[test]
fn generation_feeding_tokens_back_on_the_device_equals_uploading_every_token() {
    // sequence 1's prompt ends at once and its output stops growing two steps before the
    // end: generate feeds back on the device while both sequences repeat the last step's
    // tokens, and uploads otherwise
    let (w, cpu) = (tiny(5), Cpu::new());
    let prompts = vec![vec![3u32, 17, 40], vec![9]];
    for opts in [options(ScheduleKind::Static, None), options(ScheduleKind::Dynamic, Some(11))] {
        let mut dec = Decoder::new(&cpu, &w, 2, 8, opts.clone()).unwrap();
        let run = dec.generate(&prompts, 6, |_, _| {}).unwrap();
        let (tokens, logits) = host_fed(&cpu, &w, &prompts, 6, opts);
        assert_eq!(run.tokens, tokens);
        let bits = |t: &Tensor<f32>| t.as_slice().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&run.logits), bits(&logits), "the last step's logits, bit for bit");
        // the decoder's buffers serve a second generation: the same tokens again
        let again = dec.generate(&prompts, 6, |_, _| {}).unwrap();
        assert_eq!(again.tokens, tokens);
        assert_eq!(bits(&again.logits), bits(&logits));
    }
}

#[test]
fn steps_fed_back_back_to_back_equal_steps_that_wait() {
    let (cpu, w) = (Cpu::new(), tiny(5));
    let opts = || options(ScheduleKind::Static, None);
    let mut waiting = Decoder::new(&cpu, &w, 2, 12, opts()).unwrap();
    let mut fed = Decoder::new(&cpu, &w, 2, 12, opts()).unwrap();
    let e = fed.feed_back(3, false).unwrap_err().to_string();
    assert!(e.contains("run a step first"), "{e}");
    let first = waiting.step(&[3, 40], &[0, 0], false).unwrap();
    assert_eq!(fed.step(&[3, 40], &[0, 0], false).unwrap().next, first.next);
    let (mut want, mut next, mut logits) = (Vec::new(), first.next, None);
    for pos in 1..6 {
        let s = waiting.step(&next, &[pos, pos], pos == 5).unwrap();
        (next, logits) = (s.next.clone(), s.logits);
        want.push(s.next);
    }
    let run = fed.feed_back(5, true).unwrap();
    assert_eq!(run.tokens, want);
    assert_eq!(run.logits.unwrap().as_slice(), logits.unwrap().as_slice());
    assert!(run.reports.iter().all(|r| r.completed) && run.reports.len() == 5 && run.enqueue.len() == 5);
    // the log is reused, and a step after fed-back ones reads what it is given
    assert_eq!(fed.feed_back(2, false).unwrap().tokens.len(), 2);
    let e = fed.feed_back(5, false).unwrap_err().to_string();
    assert!(e.contains("5 steps from position 8 go past the KV cache's 12 positions"), "{e}");
    let e = fed.feed_back(usize::MAX, false).unwrap_err().to_string();
    assert!(e.contains("steps from position 8 go past the KV cache's 12 positions"), "{e}");
    assert_eq!(fed.step(&[1, 2], &[8, 8], false).unwrap().next.len(), 2);
}

/// `Decoder::prepare` gives the backend the shapes of every tensor of a step before any
/// exists; the CPU backend checks them against the megakernel's declarations, as a
/// launch would: so this checks them in the signature's order, for every stamp.
#[test]
fn every_stamp_is_prepared_for_the_shapes_its_decoder_launches_with() {
    let cpu = Cpu::new();
    let opts = LaunchOptions::default();
    for stamp in Stamp::ALL {
        let geo = stamp.geometry();
        let config = LlamaConfig::preset(geo.preset).unwrap();
        for positions in [1, 17, config.max_position_embeddings] {
            let prepared = Decoder::prepare(&cpu, &config, geo.batch, positions, &opts);
            assert_eq!(prepared.unwrap(), et_core::Prepared::default(), "{stamp:?} at {positions} positions");
        }
        let e = Decoder::prepare(&cpu, &config, geo.batch, config.max_position_embeddings + 1, &opts)
            .unwrap_err()
            .to_string();
        assert!(e.contains("positions"), "{e}");
        let zero = LaunchOptions { workers: Some(0), ..Default::default() };
        assert!(Decoder::prepare(&cpu, &config, geo.batch, 8, &zero).is_err());
    }
}
