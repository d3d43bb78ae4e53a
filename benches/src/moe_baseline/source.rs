//! The baseline's translation unit ([`cuda_source`]): the prelude, each op's CUDA in its
//! own namespace under a `#line` naming its `tile_op!`, the layer's sizes as `constexpr`s,
//! and one `extern "C"` kernel per stage that builds the stage's tiles from pointers and
//! `blockIdx.x` exactly as the megakernel's task does from its tile indices.
//!
//! The per-expert stages (gather, gate/up, down) have a second kernel each,
//! `<kernel>_cap`: one launch over every expert's tiles at capacity (`E · MT · tiles per
//! token tile` CTAs) that reads `counts[e]` on the device and exits at once where the
//! token tile is empty (the megakernel's condition `m · R < counts[e]`), so it needs no
//! host sync.

use std::fmt::Write;

use et_core::TileOp;
use et_core::ops::{matvec, matvec_silu, moe_combine, moe_gather, moe_group, router_topk};
use moe::MoeConfig;

/// One stage kernel: its name, its op, its extents (for the op's contract and arena) and
/// its CUDA parameters and body (`blk` is `blockIdx.x`).
#[derive(Clone, Debug)]
pub struct Stage {
    /// `bl_<stage>`.
    pub kernel: &'static str,
    /// The tile op it calls.
    pub op: &'static TileOp,
    /// The extents of each op argument (empty for scalars).
    pub extents: Vec<Vec<usize>>,
    /// The CUDA parameter list.
    pub params: &'static str,
    /// The op call (its arena, if any, is appended).
    body: &'static str,
    /// For a per-expert stage (its first parameter `int e`): CTAs per token tile (1 for
    /// the gather, `IT` for gate/up, `DT` for down), as a size name of the source.
    pub per_tile: Option<&'static str>,
}

impl Stage {
    /// The op's arena bytes at these extents: the launch's dynamic shared memory.
    pub fn arena_bytes(&self) -> usize {
        if !self.op.uses_smem {
            return 0;
        }
        let ext: Vec<&[usize]> = self.extents.iter().map(Vec::as_slice).collect();
        (self.op.smem)(&ext)
    }

    /// Checks the op's contract at these extents.
    pub fn check(&self) -> Result<(), String> {
        let ext: Vec<&[usize]> = self.extents.iter().map(Vec::as_slice).collect();
        (self.op.contract)(&ext).map_err(|why| format!("{}: {why}", self.kernel))
    }

    /// The name of the stage's capacity kernel (`<kernel>_cap`), for a per-expert stage.
    pub fn capacity_kernel(&self) -> Option<String> {
        self.per_tile.map(|_| format!("{}_cap", self.kernel))
    }

    /// The capacity kernel's parameter list: `counts` in place of the expert.
    pub fn capacity_params(&self) -> Option<String> {
        let rest = self.params.strip_prefix("int e, ")?;
        self.per_tile.map(|_| format!("void* counts, {rest}"))
    }
}

/// The layer's stages for `cfg` at `t` tokens (the sizes of `moe::layer`'s stamps).
pub fn stages(cfg: &MoeConfig, t: usize) -> Vec<Stage> {
    let (h, e, k, i) = (cfg.hidden, cfg.experts, cfg.top_k, cfg.inter);
    let (r, c) = (MoeConfig::tile_rows(t), MoeConfig::capacity(t));
    let (ni, nd, eq) = (cfg.up_rows(), cfg.down_rows(), cfg.router_rows());
    let v = |x: &[&[usize]]| x.iter().map(|s| s.to_vec()).collect::<Vec<_>>();
    vec![
        Stage {
            kernel: "bl_router",
            op: &matvec::OP,
            extents: v(&[&[eq, h], &[1, h], &[1, eq]]),
            params: "void* router, void* x, void* logits",
            body: "const long long t = blk / Q, q = blk % Q;
    op_matvec::matvec(T2(et::bf16, EQ, H, router, H, q, 0), T2(et::bf16, 1, H, x, H, t, 0),
                      T2(float, 1, EQ, logits, E, t, q));",
            per_tile: None,
        },
        Stage {
            kernel: "bl_topk",
            op: &router_topk::OP,
            extents: v(&[&[1, e], &[1, k], &[1, k]]),
            params: "void* logits, void* topk, void* topw",
            body: "op_router_topk::router_topk(T2(float, 1, E, logits, E, blk, 0), T2(int, 1, K, topk, K, blk, 0),
                                  T2(float, 1, K, topw, K, blk, 0));",
            per_tile: None,
        },
        Stage {
            kernel: "bl_group",
            op: &moe_group::OP,
            extents: v(&[&[t, k], &[], &[1], &[1, c]]),
            params: "void* topk, void* counts, void* tokens",
            body: "op_moe_group::moe_group(T2(int, T, K, topk, K, 0, 0), blk, T1(int, 1, counts, blk),
                              T2(int, 1, C, tokens, C, blk, 0));",
            per_tile: None,
        },
        Stage {
            kernel: "bl_gather",
            op: &moe_gather::OP,
            extents: v(&[&[t, h], &[1, r], &[r, h]]),
            params: "int e, void* x, void* tokens, void* xe",
            body: "op_moe_gather::moe_gather(T2(et::bf16, T, H, x, H, 0, 0), T2(int, 1, R, tokens, C, e, blk),
                                T2(et::bf16, R, H, xe, H, e * MT + blk, 0));",
            per_tile: Some("1"),
        },
        Stage {
            kernel: "bl_up",
            op: &matvec_silu::OP,
            extents: v(&[&[ni, h], &[ni, h], &[r, h], &[r, ni]]),
            params: "int e, void* w_gate, void* w_up, void* xe, void* he",
            body: "const long long m = blk / IT, j = blk % IT;
    op_matvec_silu::matvec_silu(T2(et::bf16, NI, H, w_gate, H, e * IT + j, 0), T2(et::bf16, NI, H, w_up, H, e * IT + j, 0),
                                T2(et::bf16, R, H, xe, H, e * MT + m, 0), T2(et::bf16, R, NI, he, I, e * MT + m, j));",
            per_tile: Some("IT"),
        },
        Stage {
            kernel: "bl_down",
            op: &matvec::OP,
            extents: v(&[&[nd, i], &[r, i], &[r, nd]]),
            params: "int e, void* w_down, void* he, void* ye",
            body: "const long long m = blk / DT, j = blk % DT;
    op_matvec::matvec(T2(et::bf16, ND, I, w_down, I, e * DT + j, 0), T2(et::bf16, R, I, he, I, e * MT + m, 0),
                      T2(et::bf16, R, ND, ye, H, e * MT + m, j));",
            per_tile: Some("DT"),
        },
        Stage {
            kernel: "bl_combine",
            op: &moe_combine::OP,
            extents: v(&[&[1, k], &[1, k], &[], &[e], &[e, c], &[e * c, h], &[1, h]]),
            params: "void* topk, void* topw, void* counts, void* tokens, void* ye, void* out",
            body: "op_moe_combine::moe_combine(T2(int, 1, K, topk, K, blk, 0), T2(float, 1, K, topw, K, blk, 0), blk,
                                  T1(int, E, counts, 0), T2(int, E, C, tokens, C, 0, 0), T2(et::bf16, E * C, H, ye, H, 0, 0),
                                  T2(et::bf16, 1, H, out, H, blk, 0));",
            per_tile: None,
        },
    ]
}

const HELPERS: &str = r#"
namespace bl {
// a contiguous row-major tensor at `p` whose trailing extent is `n1`
__device__ __forceinline__ et::TensorArg arg(void* p, long long n1 = 1) {
    et::TensorArg a = {};
    a.ptr = p;
    a.stride[0] = n1;
    a.stride[1] = 1;
    return a;
}
}  // namespace bl
#define T1(T, E0, P, I0) et::make_tile<T, 1, et::Ext<E0>>(bl::arg(P), {(long long)(I0)}, {E0})
#define T2(T, E0, E1, P, N1, I0, I1) \
    et::make_tile<T, 2, et::Ext<E0, E1>>(bl::arg(P, N1), {(long long)(I0), (long long)(I1)}, {E0, E1})
"#;

/// The whole translation unit for `cfg` at `t` tokens, CTAs of `threads` threads (given to
/// the ops as `ET_CTA_THREADS`, as a megakernel's source gives them its own, so that they
/// compile the same paths); an error when a stage breaks its op's contract.
pub fn cuda_source(cfg: &MoeConfig, t: usize, threads: u32) -> Result<String, String> {
    let stages = stages(cfg, t);
    let mut src = format!("#define ET_CTA_THREADS {threads}\n");
    src.push_str(&et_core::cuda_prelude());
    let mut seen: Vec<&str> = Vec::new();
    for st in &stages {
        st.check()?;
        if seen.contains(&st.op.path) {
            continue;
        }
        seen.push(st.op.path);
        let op = st.op;
        let _ = write!(
            src,
            "\n// tile op {}\nnamespace op_{} {{\n#line {} \"{}\"\n{}\n}}\n",
            op.path, op.name, op.line, op.file, op.cuda
        );
    }
    src.push_str("\n#line 1 \"<et-benches moe_baseline>\"\n");
    src.push_str(HELPERS);
    let sizes = [
        ("T", t),
        ("H", cfg.hidden),
        ("E", cfg.experts),
        ("K", cfg.top_k),
        ("I", cfg.inter),
        ("R", MoeConfig::tile_rows(t)),
        ("MT", MoeConfig::token_tiles(t)),
        ("C", MoeConfig::capacity(t)),
        ("NI", cfg.up_rows()),
        ("IT", cfg.inter / cfg.up_rows()),
        ("ND", cfg.down_rows()),
        ("DT", cfg.hidden / cfg.down_rows()),
        ("EQ", cfg.router_rows()),
        ("Q", cfg.experts / cfg.router_rows()),
    ];
    src.push_str("namespace sz {\n");
    for (name, v) in sizes {
        let _ = writeln!(src, "constexpr int {name} = {v};");
    }
    src.push_str("}  // namespace sz\n");
    for st in &stages {
        let head = "const long long blk = blockIdx.x;".to_string();
        kernel(&mut src, threads, st, st.kernel, st.params, &head);
        if let (Some(name), Some(params), Some(per)) = (st.capacity_kernel(), st.capacity_params(), st.per_tile) {
            // the whole block leaves together (before any barrier of the op) where the
            // token tile `blk / per` holds no token of expert `e`
            let head = format!(
                "const int e = blockIdx.x / (MT * {per});\n    const long long blk = blockIdx.x % (MT * {per});\n    \
                 if ((blk / {per}) * R >= ((const int*)counts)[e]) return;"
            );
            kernel(&mut src, threads, st, &name, &params, &head);
        }
    }
    Ok(src)
}

/// Appends one `extern "C"` kernel: `head` (defines `blk`, and `e` where the parameters
/// lack it), then the stage's op call with its arena.
fn kernel(src: &mut String, threads: u32, st: &Stage, name: &str, params: &str, head: &str) {
    let _ = write!(
        src,
        "\nextern \"C\" __global__ void __launch_bounds__({threads}, 1) {name}({params}) {{\n    using namespace sz;\n    \
         {head}\n"
    );
    let body = match st.body.strip_suffix(");") {
        Some(call) if st.op.uses_smem => {
            // the arena's state words start zeroed, as in a megakernel (`et::arena_init`)
            src.push_str(
                "    extern __shared__ __align__(128) unsigned char bl_arena[];\n    et::arena_init(bl_arena);\n    \
                 __syncthreads();\n",
            );
            format!("{call}, bl_arena);")
        }
        _ => st.body.to_string(),
    };
    let _ = write!(src, "    {body}\n}}\n");
}
