//! The MoE layer's megakernel, routing decided inside the launch, against the sequential
//! reference: on the CPU backend under both schedules and chaos, and on the GPU.

use et_core::{Cpu, LaunchOptions, ScheduleKind, Tensor};
use moe::layer::{MegaLayer, stamped_tokens};
use moe::{MoeConfig, MoeWeights, Output, Reference, weights};

/// Compares `got` with `want`, which may cover only `got`'s leading tokens (tokens are
/// independent in the layer, so the reference of the first rows of `x` is the first rows
/// of the layer's output).
fn check(got: &Output, want: &Output, exact: bool, what: &str) {
    let routed = want.topk.as_slice().len();
    assert_eq!(&got.topk.as_slice()[..routed], want.topk.as_slice(), "{what}: routing differs");
    let scale = want.out.as_slice().iter().fold(0f32, |m, v| m.max(v.to_f32().abs())).max(1e-6);
    for (k, (g, r)) in got.out.as_slice().iter().zip(want.out.as_slice()).enumerate() {
        let (g, r) = (g.to_f32(), r.to_f32());
        if exact {
            assert_eq!(g.to_bits(), r.to_bits(), "{what}: out[{k}] = {g}, reference {r}");
        } else {
            assert!((g - r).abs() <= 2e-2 * scale, "{what}: out[{k}] = {g}, reference {r}");
        }
    }
}

#[test]
fn the_megakernel_on_the_cpu_equals_the_reference_under_both_schedules_and_chaos() {
    let cfg = MoeConfig::TINY;
    let w = MoeWeights::random(&cfg, 7).unwrap();
    let reference = Reference::new(&w);
    let cpu = Cpu::with_workers(4);
    for &t in stamped_tokens(&cfg) {
        for skew in [0.0, 0.5, 1.0] {
            let x = weights::tokens(&w, t, skew, 11 + t as u64).unwrap();
            let want = reference.forward(&x).unwrap();
            for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
                for chaos in [None, Some(1), Some(2), Some(3)] {
                    let options = LaunchOptions { schedule: Some(schedule), chaos, ..LaunchOptions::default() };
                    let mut layer = MegaLayer::new(&cpu, &w, t, options).unwrap();
                    let got = layer.forward(&x).unwrap();
                    check(&got, &want, true, &format!("T = {t}, skew {skew}, {schedule:?}, chaos {chaos:?}"));
                }
            }
        }
    }
}

#[test]
fn a_skewed_batch_leaves_most_experts_inactive() {
    // all tokens on experts 0..K: the other experts' tiles are inactive, and the layer
    // still equals the reference (their tasks neither run nor signal)
    let cfg = MoeConfig::TINY;
    let w = MoeWeights::random(&cfg, 3).unwrap();
    let x = weights::tokens(&w, 40, 1.0, 5).unwrap();
    assert_eq!(moe::layer::layout(&cfg).unwrap().token_tiles(40), 10, "40 tokens span ten tiles of the busy experts");
    let want = Reference::new(&w).forward(&x).unwrap();
    let mut used: Vec<i32> = want.topk.as_slice().to_vec();
    used.sort();
    used.dedup();
    assert_eq!(used.len(), cfg.top_k, "skew 1 routes every token to the same experts");
    for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
        let options = LaunchOptions { schedule: Some(schedule), ..LaunchOptions::default() };
        let got = MegaLayer::new(&Cpu::with_workers(3), &w, 40, options).unwrap().forward(&x).unwrap();
        check(&got, &want, true, &format!("{schedule:?}"));
    }
}

#[test]
fn token_counts_outside_the_layout_are_errors() {
    let cfg = MoeConfig::TINY;
    let w = MoeWeights::random(&cfg, 1).unwrap();
    let cpu = Cpu::with_workers(2);
    let max = moe::layer::layout(&cfg).unwrap().max_tokens;
    for t in [0, max + 1] {
        let err = MegaLayer::new(&cpu, &w, t, LaunchOptions::default()).err().expect("an error");
        assert!(err.contains(&format!("takes 1 to {max} tokens, not {t}")), "{err}");
    }
    let other = MoeWeights::random(&MoeConfig { experts: 4, ..cfg }, 1).unwrap();
    let err = MegaLayer::new(&cpu, &other, 1, LaunchOptions::default()).err().expect("an error");
    assert!(err.contains("no MoE megakernel"), "{err}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_megakernel_on_the_gpu_equals_the_reference() {
    // a fresh NVRTC disk cache, so that `compiled` counts this process's compilations
    let cache = std::env::temp_dir().join(format!("moe-megakernel-{}", std::process::id()));
    let gpu = et_device::Cuda::new(0).expect("a CUDA GPU").with_cache_dir(Some(cache.clone()));
    for cfg in [MoeConfig::TINY, MoeConfig::QWEN3_MOE] {
        let w = MoeWeights::random(&cfg, 5).unwrap();
        let reference = Reference::new(&w);
        // which launches compiled, per schedule
        let mut compiled: [Vec<bool>; 2] = Default::default();
        for &t in stamped_tokens(&cfg) {
            // one layer per schedule (its weights uploaded once), fed each skew's tokens
            let mut layers = [ScheduleKind::Static, ScheduleKind::Dynamic].map(|schedule| {
                let options = LaunchOptions { schedule: Some(schedule), ..LaunchOptions::default() };
                (schedule, MegaLayer::new(&gpu, &w, t, options).unwrap())
            });
            for skew in [0.0, 1.0] {
                let x = weights::tokens(&w, t, skew, 9).unwrap();
                // the sequential reference of up to 64 leading tokens (at T = 1024 the
                // whole reference takes minutes on the CPU)
                let lead = t.min(64);
                let head = Tensor::from_vec(&[lead, cfg.hidden], x.as_slice()[..lead * cfg.hidden].to_vec()).unwrap();
                let want = reference.forward(&head).unwrap();
                for (k, (schedule, layer)) in layers.iter_mut().enumerate() {
                    layer.set_input(&x).unwrap();
                    compiled[k].push(layer.launch().unwrap().compiled);
                    // twice more: later launches reuse the graph state and its counters
                    for run in 0..2 {
                        let got = layer.forward(&x).unwrap();
                        check(&got, &want, false, &format!("{cfg:?} T = {t}, skew {skew}, {schedule:?}, run {run}"));
                    }
                }
            }
        }
        for (schedule, compiled) in ["static", "dynamic"].iter().zip(&compiled) {
            assert!(compiled[0], "{cfg:?}: the first {schedule} launch compiles");
            assert!(
                compiled[1..].iter().all(|c| !c),
                "{cfg:?}: one {schedule} module serves every token count {:?}: {compiled:?}",
                stamped_tokens(&cfg)
            );
        }
    }
    std::fs::remove_dir_all(&cache).ok();
}
