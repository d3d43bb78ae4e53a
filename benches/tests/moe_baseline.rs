//! The MoE layer's kernel-per-operator CUDA (the MoE routing ops and the GEMVs it uses,
//! at every stamped token count) compiles with NVRTC; no GPU needed.
//!
//!     cargo test --release -p et-benches --test moe_baseline -- --ignored

use et_benches::moe_baseline::{cuda_source, stages};
use moe::MoeConfig;

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
