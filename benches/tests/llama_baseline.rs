//! The kernel-per-operator baseline of the Llama decode step: its CUDA compiles with NVRTC
//! (no GPU needed), and on a GPU it computes what the megakernel computes.
//!
//!     cargo test --release -p et-benches --test llama_baseline -- --ignored

use et_benches::llama_baseline::{Baseline, Mode, shape::Shape, source};
use et_core::{LaunchOptions, Tensor};
use llama::{Decoder, LlamaConfig, LlamaWeights, Stamp};

#[test]
#[ignore = "needs NVRTC: run with --ignored where NVRTC is installed"]
fn the_baseline_cuda_of_every_stamp_compiles_to_sm90a_cubin() {
    let compiler = et_device::Compiler::new("sm_90a").unwrap_or_else(|e| panic!("{e}")).with_cache_dir(None);
    for stamp in Stamp::ALL {
        let shape = Shape::of(stamp, 8192).unwrap();
        let stages = source::stages(&shape);
        let src = source::cuda_source(&shape, &stages, stamp.kernel().cuda.block_threads);
        let t0 = std::time::Instant::now();
        let (out, compiled) =
            compiler.compile_source(&format!("baseline_{stamp:?}"), &src).unwrap_or_else(|e| panic!("{stamp:?}: {e}"));
        assert!(compiled && out.kind == et_device::compile::ImageKind::Cubin, "{stamp:?}");
        for st in &stages {
            // the kernel's name is in the CUBIN's symbol table (extern "C": unmangled)
            let name = st.kernel.as_bytes();
            assert!(out.image.windows(name.len()).any(|w| w == name), "{stamp:?}: no kernel `{}`", st.kernel);
        }
        println!("{stamp:?}: {} bytes of CUDA, {:.2} s", src.len(), t0.elapsed().as_secs_f64());
    }
}

/// Largest |got - want| over the largest |want|.
fn max_error(got: &Tensor<f32>, want: &Tensor<f32>) -> f32 {
    assert_eq!(got.shape(), want.shape());
    let scale = want.as_slice().iter().fold(0f32, |m, v| m.max(v.abs()));
    got.as_slice().iter().zip(want.as_slice()).fold(0f32, |m, (g, w)| m.max((g - w).abs())) / scale
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_baseline_computes_the_megakernels_logits_and_tokens() {
    let gpu = et_device::Cuda::new(0).unwrap_or_else(|e| panic!("{e}"));
    let w = LlamaWeights::random(&LlamaConfig::preset("llama-3.2-1b").unwrap(), 2024).unwrap();
    // an odd cache length: both take it at run time (the baseline compiles for it)
    let mut mk = Decoder::new(&gpu, &w, 1, 1000, LaunchOptions::default()).unwrap();
    let mut bl = Baseline::new(&gpu, &w, 1, 1000, et_core::DEFAULT_THREADS).unwrap();
    // the B = 1 stamp fuses the norms into the GEMVs and merges the attention pieces in the
    // output projection: 6 kernels a layer (QKV, pieces, append, projection, gate/up,
    // down), 3 after them
    assert_eq!(bl.launches_per_step(), 2 + 6 * 16 + 3);
    // a few positions so that the cache holds earlier steps' keys; the modes alternate
    // (the graph reads the same device positions the stream launches do)
    let mut token = 128_000u32;
    for (pos, mode) in [(0, Mode::Stream), (1, Mode::Graph), (2, Mode::Stream), (3, Mode::Graph)] {
        let want = mk.step(&[token], &[pos], true).unwrap();
        let got = bl.step(mode, &[token], &[pos], true).unwrap();
        let err = max_error(got.logits.as_ref().unwrap(), want.logits.as_ref().unwrap());
        println!("position {pos}, {mode:?}: logits within {err:.2e} of the largest; next {:?}", got.next);
        assert!(err <= 1e-2, "position {pos}, {mode:?}: logits differ by {err} of the largest");
        assert_eq!(got.next, want.next, "position {pos}, {mode:?}");
        assert!(got.kernel > std::time::Duration::ZERO && got.wall >= got.kernel);
        token = want.next[0];
    }
    // a position past the cache is an error, not a launch
    let err = bl.step(Mode::Graph, &[1], &[1000], false).unwrap_err();
    assert!(err.contains("past the KV cache"), "{err}");
}
