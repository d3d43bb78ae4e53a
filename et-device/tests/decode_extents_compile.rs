//! The decode ops pick their code paths from the tiles' compile-time extents
//! (`static_extent<D>()`), which every megakernel's tiles carry; these compile them with
//! the other cases NVRTC would otherwise never see: tiles with run-time extents only (the
//! paths chosen at run time) and every batch boundary of the GEMV (1, 15, 16, 17, 64).
//! Needs libnvrtc but no GPU.

use et_core::ops::decode;

/// The prelude, every decode op's CUDA in a namespace of its own (as a megakernel has
/// them), then `body`.
fn source(body: &str) -> String {
    let ops = [
        decode::matvec::OP,
        decode::matvec_residual::OP,
        decode::matvec_silu::OP,
        decode::matvec_split::OP,
        decode::rms_norm_matvec::OP,
        decode::rms_norm_matvec_silu::OP,
        decode::attention_partial::OP,
        decode::attention_rope_split::OP,
        decode::attention_rope_split_lazy::OP,
        decode::attention_rope_heads::OP,
        decode::rms_norm::OP,
        decode::rms_norm_residual::OP,
        decode::rms_norm_split_residual::OP,
        decode::embed::OP,
        decode::elementwise_add::OP,
        decode::elementwise_scale::OP,
    ];
    let mut s = et_core::cuda_prelude();
    for op in ops {
        s.push_str(&format!("\nnamespace op_{} {{\n{}\n}}\n", op.name, op.cuda));
    }
    s.push_str(body);
    s
}

fn compile(name: &str, src: &str) {
    let compiler = et_device::Compiler::new("sm_90a").unwrap_or_else(|e| panic!("{e}")).with_cache_dir(None);
    if let Err(e) = compiler.compile_source(name, src) {
        panic!("{name}: {e}");
    }
}

#[test]
#[ignore = "needs NVRTC: scripts/test installs it and runs these tests with --ignored"]
fn the_decode_ops_compile_with_run_time_extents() {
    let body = r#"
typedef et::Tile<et::bf16, 2> B2;
typedef et::Tile<et::bf16, 1> B1;
typedef et::Tile<et::bf16, 3> B3;
extern "C" __global__ void __launch_bounds__(512, 1)
dynamic_extents(B2 w, B2 wu, B2 x, B2 r, B2 y, et::Tile<float, 2> yf, et::Tile<float, 3> part, B3 kc, B3 vc,
                et::Tile<int, 1> len, et::Tile<float, 2> ml, B1 nw, et::Tile<int, 1> ids) {
    extern __shared__ __align__(128) unsigned char arena[];
    op_matvec::matvec(w, x, yf, arena);
    op_matvec_residual::matvec_residual(w, x, r, y, arena);
    op_matvec_silu::matvec_silu(w, wu, x, y, arena);
    op_matvec_split::matvec_split(w, x, part, arena);
    op_rms_norm_matvec::rms_norm_matvec(w, x, nw, 1e-5f, yf, arena);
    op_rms_norm_matvec_silu::rms_norm_matvec_silu(w, wu, x, nw, 1e-5f, y, arena);
    op_attention_partial::attention_partial(x, kc, vc, len, 0, 0.125f, yf, ml);
    op_attention_rope_split::attention_rope_split(x, len, ml, 0, 2, 0.125f, kc, vc, yf, ml);
    op_attention_rope_split_lazy::attention_rope_split_lazy(x, len, ml, 1, 2, 0.125f, kc, vc, yf, ml);
    op_attention_rope_heads::attention_rope_heads(x, len, ml, 0.125f, kc, vc, y);
    op_rms_norm::rms_norm(x, nw, 1e-5f, y);
    op_rms_norm_residual::rms_norm_residual(y, r, nw, 1e-5f, wu);
    op_embed::embed(w, ids, y);
    op_elementwise_add::elementwise_add(x, r, y);
    op_elementwise_scale::elementwise_scale(x, 0.5f, y);
}
"#;
    let src = source(body);
    // a tile type without compile-time extents reaches every op
    assert!(!src.contains("et::Ext<"), "the test must use run-time extents only");
    compile("dynamic_extents", &src);
}

#[test]
#[ignore = "needs NVRTC: scripts/test installs it and runs these tests with --ignored"]
fn the_gemvs_compile_at_every_batch_boundary() {
    // every fragment count (1 to 8 batch pieces) and its boundaries; K 1026 (a tail of 2
    // past a 1024) and 2056 (not a multiple of 64); 72 and 24 rows (half an mma tile)
    let mut body = String::new();
    for b in [1, 2, 7, 8, 9, 15, 16, 17, 24, 33, 40, 48, 56, 64] {
        let (rows, k) = if b % 2 == 0 { (72, 1026) } else { (24, 2056) };
        body.push_str(&format!(
            r#"
extern "C" __global__ void __launch_bounds__(512, 1)
gemv_b{b}(et::Tile<et::bf16, 2, et::Ext<{rows}, {k}>> w, et::Tile<et::bf16, 2, et::Ext<{b}, {k}>> x,
          et::Tile<et::bf16, 2, et::Ext<{b}, {rows}>> y, et::Tile<float, 3, et::Ext<1, {b}, {rows}>> part,
          et::Tile<et::bf16, 1, et::Ext<{k}>> nw) {{
    extern __shared__ __align__(128) unsigned char arena[];
    op_matvec::matvec(w, x, y, arena);
    op_matvec_residual::matvec_residual(w, x, y, y, arena);
    op_matvec_silu::matvec_silu(w, w, x, y, arena);
    op_matvec_split::matvec_split(w, x, part, arena);
    op_rms_norm_matvec::rms_norm_matvec(w, x, nw, 1e-5f, y, arena);
    op_rms_norm_matvec_silu::rms_norm_matvec_silu(w, w, x, nw, 1e-5f, y, arena);
}}
"#
        ));
    }
    compile("gemv_batches", &source(&body));
}
