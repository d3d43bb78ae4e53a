//! The MoE layer's kernel-per-operator baseline: its CUDA (the MoE routing ops and the
//! GEMVs it uses, at every token count of the benchmark) compiles with NVRTC (no GPU
//! needed), and on a GPU it routes exactly as the sequential reference and computes its
//! output within bf16 rounding of the reference and of the megakernel.
//!
//!     cargo test --release -p et-benches --test moe_baseline -- --ignored

use std::time::{SystemTime, UNIX_EPOCH};

use et_benches::moe_baseline::floor::touched_experts;
use et_benches::moe_baseline::{Mode, MoeBaseline, cuda_source, stages};
use et_core::{LaunchOptions, ScheduleKind};
use moe::layer::MegaLayer;
use moe::{MoeConfig, MoeWeights, Output, Reference, weights};

#[test]
#[ignore = "needs NVRTC: run with --ignored where NVRTC is installed"]
fn the_moe_baseline_cuda_compiles_to_sm90a_cubin_at_every_token_count() {
    let compiler = et_device::Compiler::new("sm_90a").unwrap_or_else(|e| panic!("{e}")).with_cache_dir(None);
    for (cfg, ts) in [(MoeConfig::QWEN3_MOE, &[1usize, 16, 128, 1024][..]), (MoeConfig::TINY, &[1, 3, 8, 40][..])] {
        for &t in ts {
            let src = cuda_source(&cfg, t, 512).unwrap_or_else(|e| panic!("{t}: {e}"));
            let (out, compiled) = compiler
                .compile_source(&format!("moe_baseline_{t}"), &src)
                .unwrap_or_else(|e| panic!("{t} tokens: {e}"));
            assert!(compiled && out.kind == et_device::compile::ImageKind::Cubin, "{t}");
            for st in stages(&cfg, t) {
                let name = st.kernel.as_bytes();
                assert!(out.image.windows(name.len()).any(|w| w == name), "{t}: no kernel `{}`", st.kernel);
                assert!(st.arena_bytes() <= 96 * 1024, "{t}: {}", st.kernel);
                if let Some(cap) = st.capacity_kernel() {
                    assert!(out.image.windows(cap.len()).any(|w| w == cap.as_bytes()), "{t}: no kernel `{cap}`");
                }
            }
        }
    }
}

#[test]
fn every_stage_satisfies_its_ops_contract() {
    for t in [1, 16, 128, 1024] {
        for st in stages(&MoeConfig::QWEN3_MOE, t) {
            st.check().unwrap_or_else(|e| panic!("{t} tokens: {e}"));
        }
    }
}

/// Asserts every output element of `got` within 2% of `want`'s largest |out| of `want`'s
/// (bf16 rounding and another summation order), naming the first that is not.
fn assert_close(got: &Output, want: &Output, what: &str) {
    let scale = want.out.as_slice().iter().fold(0f32, |m, v| m.max(v.to_f32().abs())).max(1e-6);
    for (k, (g, r)) in got.out.as_slice().iter().zip(want.out.as_slice()).enumerate() {
        let (g, r) = (g.to_f32(), r.to_f32());
        // NaN (the poison) fails this comparison
        assert!((g - r).abs() <= 2e-2 * scale, "{what}: out[{k}] = {g}, expected {r} (scale {scale})");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_baseline_on_the_gpu_routes_as_the_reference_and_matches_it_and_the_megakernel() {
    let gpu = et_device::Cuda::new(0).expect("a CUDA GPU");
    let cfg = MoeConfig::QWEN3_MOE;
    let w = MoeWeights::random(&cfg, 5).unwrap();
    let reference = Reference::new(&w);
    // fresh inputs every run; the seed is in every message
    let seed = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
    for t in [1usize, 16] {
        let mut bl = MoeBaseline::new(&gpu, &w, t).unwrap();
        for skew in [0.0, 1.0] {
            let what = format!("T = {t}, skew {skew}, input seed {seed}");
            let x = weights::tokens(&w, t, skew, seed).unwrap();
            let want = reference.forward(&x).unwrap();
            let touched = touched_experts(&w, &x).unwrap();
            let options = LaunchOptions { schedule: Some(ScheduleKind::Static), ..LaunchOptions::default() };
            let mk = MegaLayer::new(&gpu, &w, t, options).unwrap().forward(&x).unwrap();
            for mode in [Mode::HostSync, Mode::Capacity] {
                let what = format!("{what}, {mode:?}");
                bl.poison().unwrap();
                bl.set_input(&x).unwrap();
                let run = bl.run(mode).unwrap();
                let got = bl.output().unwrap();
                assert_eq!(got.topk.as_slice(), want.topk.as_slice(), "{what}: routing differs from the reference");
                assert_close(&got, &want, &format!("{what}, against the reference"));
                assert_close(&got, &mk, &format!("{what}, against the megakernel"));
                // router, top-k, group, combine, and gather, gate/up, down per expert with
                // tokens (host sync) or once over all experts (capacity)
                let per_expert = if mode == Mode::HostSync { touched } else { 1 };
                assert_eq!(run.launches, 4 + 3 * per_expert, "{what}");
                assert!(run.kernel.as_secs_f64() > 0.0, "{what}");
            }
            if skew == 1.0 {
                assert_eq!(touched, cfg.top_k, "{what}: skew 1 puts every token on the same experts");
            }
        }
    }
}
