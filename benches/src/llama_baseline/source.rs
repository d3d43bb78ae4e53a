//! The CUDA of the kernel-per-operator baseline: one plain `extern "C" __global__` kernel
//! per stage of the decode megakernel (`llama::decode`), each building the stage's tiles
//! from tensor pointers and `blockIdx.x` exactly as the megakernel's task does from its
//! tile indices, and calling the same tile op.
//!
//! The translation unit is the megakernel's: the kernel ABI declarations and the prelude
//! ([`et_core::cuda_prelude`]), each op's own CUDA text in a namespace of its own under a
//! `#line` naming its `tile_op!` site, the stamp's sizes as constants, then the wrappers.
//! A stage and its kernel's parameter list are one table ([`stages`]), so the Rust side
//! that pushes the arguments and the CUDA signature cannot drift apart.

use std::fmt::Write;

use et_core::TileOp;
use et_core::ops::{
    argmax_merge, argmax_partial, attention_kv_append, attention_merge, attention_merge_matvec_residual, embed, matvec,
    matvec_residual, matvec_silu, matvec_split, rms_norm, rms_norm_matvec, rms_norm_matvec_silu,
    rms_norm_split_residual, rope_table,
};

use super::shape::{Norms, Shape};

/// A device tensor of the baseline, in the layouts `llama::decoder` uploads (the names
/// and shapes of the megakernel's parameters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Buf {
    Ids,
    Pos,
    Table,
    LmHead,
    AttnNorm,
    Wqkv,
    Wo,
    MlpNorm,
    WGate,
    WUp,
    WDown,
    FinalNorm,
    Kc,
    Vc,
    Hs,
    Hm,
    Xn,
    Xm,
    Qkv,
    Rope,
    Po,
    Pml,
    Pk,
    Attn,
    Act,
    Xf,
    Logits,
    Best,
    Index,
    Next,
}

impl Buf {
    /// Every buffer, in the order of the enum.
    pub const ALL: [Buf; 30] = [
        Buf::Ids,
        Buf::Pos,
        Buf::Table,
        Buf::LmHead,
        Buf::AttnNorm,
        Buf::Wqkv,
        Buf::Wo,
        Buf::MlpNorm,
        Buf::WGate,
        Buf::WUp,
        Buf::WDown,
        Buf::FinalNorm,
        Buf::Kc,
        Buf::Vc,
        Buf::Hs,
        Buf::Hm,
        Buf::Xn,
        Buf::Xm,
        Buf::Qkv,
        Buf::Rope,
        Buf::Po,
        Buf::Pml,
        Buf::Pk,
        Buf::Attn,
        Buf::Act,
        Buf::Xf,
        Buf::Logits,
        Buf::Best,
        Buf::Index,
        Buf::Next,
    ];

    /// Its parameter name in the CUDA (the megakernel's parameter name).
    pub fn name(self) -> &'static str {
        match self {
            Buf::Ids => "ids",
            Buf::Pos => "pos",
            Buf::Table => "table",
            Buf::LmHead => "lm_head",
            Buf::AttnNorm => "attn_norm",
            Buf::Wqkv => "wqkv",
            Buf::Wo => "wo",
            Buf::MlpNorm => "mlp_norm",
            Buf::WGate => "w_gate",
            Buf::WUp => "w_up",
            Buf::WDown => "w_down",
            Buf::FinalNorm => "final_norm",
            Buf::Kc => "kc",
            Buf::Vc => "vc",
            Buf::Hs => "hs",
            Buf::Hm => "hm",
            Buf::Xn => "xn",
            Buf::Xm => "xm",
            Buf::Qkv => "qkv",
            Buf::Rope => "rope",
            Buf::Po => "po",
            Buf::Pml => "pml",
            Buf::Pk => "pk",
            Buf::Attn => "attn",
            Buf::Act => "act",
            Buf::Xf => "xf",
            Buf::Logits => "logits",
            Buf::Best => "best",
            Buf::Index => "index",
            Buf::Next => "next",
        }
    }
}

/// A float parameter of a stage kernel (the literals of the megakernel's op calls).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    /// RMSNorm epsilon.
    Eps,
    /// RoPE base.
    Theta,
    /// Llama 3 RoPE scaling: factor.
    Factor,
    /// Llama 3 RoPE scaling: low frequency factor.
    Low,
    /// Llama 3 RoPE scaling: high frequency factor.
    High,
    /// Llama 3 RoPE scaling: original context.
    Original,
    /// Attention scale `1/√D`.
    Scale,
}

impl Scalar {
    fn name(self) -> &'static str {
        match self {
            Scalar::Eps => "eps",
            Scalar::Theta => "theta",
            Scalar::Factor => "factor",
            Scalar::Low => "low",
            Scalar::High => "high",
            Scalar::Original => "original",
            Scalar::Scale => "scale",
        }
    }
}

/// One kernel parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// `int layer`: the layer a per-layer launch runs (`l` in the body).
    Layer,
    /// `int layers`: the number of layers (`L` in the body).
    Layers,
    /// A tensor's device address (`void*`).
    Buf(Buf),
    /// A float.
    Scalar(Scalar),
}

/// One stage of the decode step: a kernel launched with one CTA per tile, once per step
/// or once per layer.
#[derive(Clone, Debug)]
pub struct Stage {
    /// The kernel's name (`bl_<stage>`).
    pub kernel: String,
    /// The tile op it calls.
    pub op: &'static TileOp,
    /// Tiles, hence CTAs, per launch.
    pub grid: usize,
    /// Launched once per layer (else once per step).
    pub per_layer: bool,
    /// The kernel's parameters, in order.
    pub params: Vec<Param>,
    /// The extents of each op argument (empty for scalars), for the op's contract.
    pub extents: Vec<Vec<usize>>,
    /// The CUDA statements: `blk` is the tile, `l` the layer, `L` the layer count.
    body: String,
}

impl Stage {
    /// The bytes of the shared-memory arena its op declares at its extents (0 for an op
    /// without one), passed to the op as `bl_arena`.
    pub fn arena_bytes(&self) -> usize {
        if !self.op.uses_smem {
            return 0;
        }
        let extents: Vec<&[usize]> = self.extents.iter().map(Vec::as_slice).collect();
        (self.op.smem)(&extents)
    }

    /// The dynamic shared memory to launch its kernel with
    /// ([`et_core::abi::launch_smem_bytes`], as a megakernel's launch gives). Without the
    /// alignment slack an op gets 128 bytes less than it declared: the GEMVs above batch
    /// 16 then found no room for their wgmma stages and ran another path (RESULTS run 46).
    pub fn launch_smem_bytes(&self) -> usize {
        et_core::abi::launch_smem_bytes(self.arena_bytes())
    }
}

use Param::{Buf as B, Layer, Layers, Scalar as F};

/// The stages of one decode step in launch order (the per-layer ones in the middle): the
/// groups of `llama::decode`, the LM head's two ops split into two kernels. Where the
/// stamp fuses the norms into the GEMVs ([`Shape::norms`]) so does the baseline:
/// each norm and the GEMV after it are one kernel; where its norms sum split-K output and
/// down projections, the baseline launches the same splits and summing norms.
pub fn stages(s: &Shape) -> Vec<Stage> {
    let st = |name: &str, op: &'static TileOp, grid: usize, per_layer, params: &[Param], extents, body: &str| Stage {
        kernel: format!("bl_{name}"),
        op,
        grid,
        per_layer,
        params: params.to_vec(),
        extents,
        body: body.to_string(),
    };
    let e = |v: &[&[usize]]| v.iter().map(|x| x.to_vec()).collect::<Vec<_>>();
    let (b, hd, nkv, g, d) = (s.b, s.hd, s.nkv, s.g, s.d);
    let qkv_row = (g + 2) * d;
    let heads = nkv * g * d;
    let inter = s.mt * s.nm;
    // the stamp's attention op
    let attention = s.attention;
    // the stamp's attention: split-KV pieces, their merge and the KV append; or whole
    // caches of H KV heads a task (`attention_rope_heads`)
    let attention_stages = match s.attention_heads {
        Some(h) => vec![st(
            "attend",
            attention,
            b * nkv / h,
            true,
            &[Layer, B(Buf::Qkv), B(Buf::Pos), B(Buf::Rope), F(Scalar::Scale), B(Buf::Kc), B(Buf::Vc), B(Buf::Attn)],
            e(&[&[1, h * qkv_row], &[1], &[1, d], &[], &[h, s.positions, d], &[h, s.positions, d], &[1, h * g * d]]),
            &format!(
                "constexpr int H = {0}, KH = NKV / H;
    const long long b = blk / KH, kp = blk % KH;
    op_{1}::{1}(T2(et::bf16, 1, H * (G + 2) * D, qkv, QT * NQ, l * B + b, kp),
        T1(int, 1, pos, b), T2(float, 1, D, rope, D, b, 0), scale,
        T3(et::bf16, H, P, D, kc, P, D, (l * B + b) * KH + kp, 0, 0),
        T3(et::bf16, H, P, D, vc, P, D, (l * B + b) * KH + kp, 0, 0),
        T2(et::bf16, 1, H * G * D, attn, NKV * G * D, l * B + b, kp));",
                h, attention.name
            ),
        )],
        None => [st(
            "chunk",
            attention,
            b * nkv * s.s,
            true,
            &[
                Layer,
                B(Buf::Qkv),
                B(Buf::Pos),
                B(Buf::Rope),
                F(Scalar::Scale),
                B(Buf::Kc),
                B(Buf::Vc),
                B(Buf::Po),
                B(Buf::Pml),
            ],
            e(&[&[1, qkv_row], &[1], &[1, d], &[], &[], &[], &[1, s.positions, d], &[1, s.positions, d], &[g, d], &[g, 2]]),
            &format!(
                "const long long b = blk / (NKV * S), k = blk / S % NKV, c = blk % S, head = (l * B + b) * NKV + k;
    op_{0}::{0}(T2(et::bf16, 1, (G + 2) * D, qkv, QT * NQ, l * B + b, k), T1(int, 1, pos, b), T2(float, 1, D, rope, D, b, 0),
        c, S, scale, T3(et::bf16, 1, P, D, kc, P, D, head, 0, 0), T3(et::bf16, 1, P, D, vc, P, D, head, 0, 0),
        T2(float, G, D, po, D, head * S + c, 0), T2(float, G, 2, pml, 2, head * S + c, 0));",
                attention.name
            ),
        ),
        st(
            "merge",
            &attention_merge::OP,
            b * nkv,
            true,
            &[Layer, B(Buf::Po), B(Buf::Pml), B(Buf::Attn)],
            e(&[&[s.s * g, d], &[s.s * g, 2], &[1, g * d]]),
            "const long long b = blk / NKV, k = blk % NKV, head = (l * B + b) * NKV + k;
    op_attention_merge::attention_merge(T2(float, S * G, D, po, D, head, 0), T2(float, S * G, 2, pml, 2, head, 0),
                                        T2(et::bf16, 1, G * D, attn, NKV * G * D, l * B + b, k));",
        ),
        st(
            "kv_append",
            &attention_kv_append::OP,
            b * nkv,
            true,
            &[
                Layer,
                B(Buf::Qkv),
                B(Buf::Pos),
                B(Buf::Rope),
                B(Buf::Kc),
                B(Buf::Vc),
            ],
            e(&[&[1, qkv_row], &[1], &[1, d], &[1, s.positions, d], &[1, s.positions, d]]),
            "const long long b = blk / NKV, k = blk % NKV, head = (l * B + b) * NKV + k;
    op_attention_kv_append::attention_kv_append(T2(et::bf16, 1, (G + 2) * D, qkv, QT * NQ, l * B + b, k),
                                                T1(int, 1, pos, b), T2(float, 1, D, rope, D, b, 0),
                                                T3(et::bf16, 1, P, D, kc, P, D, head, 0, 0),
                                                T3(et::bf16, 1, P, D, vc, P, D, head, 0, 0));",
        )]
        .into_iter()
        .filter(|stage| !(s.merged_o && stage.kernel == "bl_merge"))
        .collect(),
    };
    // the norms: inside the GEMVs that read them, as tasks, or as tasks that also sum the
    // split-K output and down projections with their residuals (the norm of layer 0 once
    // before the layers, each layer ending with the next one's norm, the last with the
    // final norm)
    let norm_task = |name: &str, x: Buf, w: Buf, y: Buf, per_layer: bool, row: &str, wl: &str| {
        st(
            name,
            &rms_norm::OP,
            b,
            per_layer,
            &[if per_layer { Layer } else { Layers }, B(x), B(w), F(Scalar::Eps), B(y)],
            e(&[&[1, hd], &[hd], &[], &[1, hd]]),
            &format!(
                "op_rms_norm::rms_norm(T2(et::bf16, 1, HD, {x}, HD, {row}, 0), T1(et::bf16, HD, {w}, {wl}), eps,
                               T2(et::bf16, 1, HD, {y}, HD, {yrow}, 0));",
                x = x.name(),
                w = w.name(),
                y = y.name(),
                yrow = if y == Buf::Xf { "blk" } else { row },
            ),
        )
    };
    let qkv_fused = st(
        "qkv_proj",
        &rms_norm_matvec::OP,
        s.qt,
        true,
        &[Layer, B(Buf::Wqkv), B(Buf::Hs), B(Buf::AttnNorm), F(Scalar::Eps), B(Buf::Qkv)],
        e(&[&[s.nq, hd], &[b, hd], &[hd], &[], &[b, s.nq]]),
        "op_rms_norm_matvec::rms_norm_matvec(T2(et::bf16, NQ, HD, wqkv, HD, l * QT + blk, 0),
                                         T2(et::bf16, B, HD, hs, HD, l, 0), T1(et::bf16, HD, attn_norm, l), eps,
                                         T2(et::bf16, B, NQ, qkv, QT * NQ, l, blk));",
    );
    let qkv_plain = st(
        "qkv_proj",
        &matvec::OP,
        s.qt,
        true,
        &[Layer, B(Buf::Wqkv), B(Buf::Xn), B(Buf::Qkv)],
        e(&[&[s.nq, hd], &[b, hd], &[b, s.nq]]),
        "op_matvec::matvec(T2(et::bf16, NQ, HD, wqkv, HD, l * QT + blk, 0), T2(et::bf16, B, HD, xn, HD, l, 0),
                       T2(et::bf16, B, NQ, qkv, QT * NQ, l, blk));",
    );
    let o_whole = if s.merged_o {
        // the merge of the pieces inside the projection, as the stamp runs it
        let pieces = b * nkv * s.s * g;
        st(
            "o_proj",
            &attention_merge_matvec_residual::OP,
            s.ot,
            true,
            &[Layer, B(Buf::Wo), B(Buf::Po), B(Buf::Pml), B(Buf::Hs), B(Buf::Hm)],
            e(&[&[s.no, heads], &[pieces, d], &[pieces, 2], &[], &[b, s.no], &[b, s.no]]),
            "op_attention_merge_matvec_residual::attention_merge_matvec_residual(
    T2(et::bf16, NO, NKV * G * D, wo, NKV * G * D, l * OT + blk, 0), T2(float, B * NKV * S * G, D, po, D, l, 0),
    T2(float, B * NKV * S * G, 2, pml, 2, l, 0), (long long)G, T2(et::bf16, B, NO, hs, HD, l, blk),
    T2(et::bf16, B, NO, hm, HD, l, blk));",
        )
    } else {
        st(
            "o_proj",
            &matvec_residual::OP,
            s.ot,
            true,
            &[Layer, B(Buf::Wo), B(Buf::Attn), B(Buf::Hs), B(Buf::Hm)],
            e(&[&[s.no, heads], &[b, heads], &[b, s.no], &[b, s.no]]),
            "op_matvec_residual::matvec_residual(T2(et::bf16, NO, NKV * G * D, wo, NKV * G * D, l * OT + blk, 0),
                                             T2(et::bf16, B, NKV * G * D, attn, NKV * G * D, l, 0),
                                             T2(et::bf16, B, NO, hs, HD, l, blk), T2(et::bf16, B, NO, hm, HD, l, blk));",
        )
    };
    let mlp_plain = st(
        "mlp",
        &matvec_silu::OP,
        s.mt,
        true,
        &[Layer, B(Buf::WGate), B(Buf::WUp), B(Buf::Xm), B(Buf::Act)],
        e(&[&[s.nm, hd], &[s.nm, hd], &[b, hd], &[b, s.nm]]),
        "op_matvec_silu::matvec_silu(T2(et::bf16, NM, HD, w_gate, HD, l * MT + blk, 0),
                                     T2(et::bf16, NM, HD, w_up, HD, l * MT + blk, 0), T2(et::bf16, B, HD, xm, HD, l, 0),
                                     T2(et::bf16, B, NM, act, MT * NM, l, blk));",
    );
    let down_whole = st(
        "down",
        &matvec_residual::OP,
        s.dt,
        true,
        &[Layer, B(Buf::WDown), B(Buf::Act), B(Buf::Hm), B(Buf::Hs)],
        e(&[&[s.nd, inter], &[b, inter], &[b, s.nd], &[b, s.nd]]),
        "op_matvec_residual::matvec_residual(T2(et::bf16, ND, MT * NM, w_down, MT * NM, l * DT + blk, 0),
                                             T2(et::bf16, B, MT * NM, act, MT * NM, l, 0),
                                             T2(et::bf16, B, ND, hm, HD, l, blk), T2(et::bf16, B, ND, hs, HD, l + 1, blk));",
    );
    let head_plain = st(
        "head",
        &matvec::OP,
        s.vt,
        false,
        &[B(Buf::LmHead), B(Buf::Xf), B(Buf::Logits)],
        e(&[&[s.nv, hd], &[b, hd], &[b, s.nv]]),
        "op_matvec::matvec(T2(et::bf16, NV, HD, lm_head, HD, blk, 0), T2(et::bf16, B, HD, xf, HD, 0, 0),
                               T2(float, B, NV, logits, VT * NV, 0, blk));",
    );
    let head_fused = st(
            "head",
            &rms_norm_matvec::OP,
            s.vt,
            false,
            &[Layers, B(Buf::LmHead), B(Buf::Hs), B(Buf::FinalNorm), F(Scalar::Eps), B(Buf::Logits)],
            e(&[&[s.nv, hd], &[b, hd], &[hd], &[], &[b, s.nv]]),
            "op_rms_norm_matvec::rms_norm_matvec(T2(et::bf16, NV, HD, lm_head, HD, blk, 0),
                                                 T2(et::bf16, B, HD, hs, HD, L, 0), T1(et::bf16, HD, final_norm, 0), eps,
                                                 T2(float, B, NV, logits, VT * NV, 0, blk));",
        );
    let norm0 = st(
        "norm0",
        &rms_norm::OP,
        b,
        false,
        &[B(Buf::Hs), B(Buf::AttnNorm), F(Scalar::Eps), B(Buf::Xn)],
        e(&[&[1, hd], &[hd], &[], &[1, hd]]),
        "op_rms_norm::rms_norm(T2(et::bf16, 1, HD, hs, HD, blk, 0), T1(et::bf16, HD, attn_norm, 0), eps,
                               T2(et::bf16, 1, HD, xn, HD, blk, 0));",
    );
    let mlp_fused = st(
        "mlp",
        &rms_norm_matvec_silu::OP,
        s.mt,
        true,
        &[Layer, B(Buf::WGate), B(Buf::WUp), B(Buf::Hm), B(Buf::MlpNorm), F(Scalar::Eps), B(Buf::Act)],
        e(&[&[s.nm, hd], &[s.nm, hd], &[b, hd], &[hd], &[], &[b, s.nm]]),
        "op_rms_norm_matvec_silu::rms_norm_matvec_silu(T2(et::bf16, NM, HD, w_gate, HD, l * MT + blk, 0),
                                                           T2(et::bf16, NM, HD, w_up, HD, l * MT + blk, 0),
                                                           T2(et::bf16, B, HD, hm, HD, l, 0), T1(et::bf16, HD, mlp_norm, l),
                                                           eps, T2(et::bf16, B, NM, act, MT * NM, l, blk));",
    );
    let o_split = st(
        "o_proj",
        &matvec_split::OP,
        s.ot * s.kp,
        true,
        &[Layer, B(Buf::Wo), B(Buf::Attn), B(Buf::Pk)],
        e(&[&[s.no, s.ko], &[b, s.ko], &[1, b, s.no]]),
        "const long long r = blk / KP, s = blk % KP;
    op_matvec_split::matvec_split(T2(et::bf16, NO, KO, wo, NKV * G * D, l * OT + r, s), T2(et::bf16, B, KO, attn, NKV * G * D, l, s),
                                  T3(float, 1, B, NO, pk, B, HD, 2 * l * KP + s, 0, r));",
    );
    let norm2_sum = st(
        "norm2",
        &rms_norm_split_residual::OP,
        b,
        true,
        &[Layer, B(Buf::Pk), B(Buf::Hs), B(Buf::MlpNorm), F(Scalar::Eps), B(Buf::Hm), B(Buf::Xm)],
        e(&[&[s.kp, 1, hd], &[1, hd], &[hd], &[], &[1, hd], &[1, hd]]),
        "op_rms_norm_split_residual::rms_norm_split_residual(T3(float, KP, 1, HD, pk, B, HD, 2 * l, blk, 0),
    T2(et::bf16, 1, HD, hs, HD, l * B + blk, 0), T1(et::bf16, HD, mlp_norm, l), eps,
    T2(et::bf16, 1, HD, hm, HD, l * B + blk, 0), T2(et::bf16, 1, HD, xm, HD, l * B + blk, 0));",
    );
    let down_split = st(
        "down",
        &matvec_split::OP,
        s.dt * s.kp,
        true,
        &[Layer, B(Buf::WDown), B(Buf::Act), B(Buf::Pk)],
        e(&[&[s.nd, s.kd], &[b, s.kd], &[1, b, s.nd]]),
        "const long long r = blk / KP, s = blk % KP;
    op_matvec_split::matvec_split(T2(et::bf16, ND, KD, w_down, MT * NM, l * DT + r, s), T2(et::bf16, B, KD, act, MT * NM, l, s),
                                  T3(float, 1, B, ND, pk, B, HD, (2 * l + 1) * KP + s, 0, r));",
    );
    let norm_next = st(
        "norm_next",
        &rms_norm_split_residual::OP,
        b,
        true,
        &[
            Layer,
            Layers,
            B(Buf::Pk),
            B(Buf::Hm),
            B(Buf::AttnNorm),
            B(Buf::FinalNorm),
            F(Scalar::Eps),
            B(Buf::Hs),
            B(Buf::Xn),
            B(Buf::Xf),
        ],
        e(&[&[s.kp, 1, hd], &[1, hd], &[hd], &[], &[1, hd], &[1, hd]]),
        "const bool last = l + 1 == L;
    op_rms_norm_split_residual::rms_norm_split_residual(T3(float, KP, 1, HD, pk, B, HD, 2 * l + 1, blk, 0),
    T2(et::bf16, 1, HD, hm, HD, l * B + blk, 0),
    last ? T1(et::bf16, HD, final_norm, 0) : T1(et::bf16, HD, attn_norm, l + 1), eps,
    T2(et::bf16, 1, HD, hs, HD, (l + 1) * B + blk, 0),
    last ? T2(et::bf16, 1, HD, xf, HD, blk, 0) : T2(et::bf16, 1, HD, xn, HD, (l + 1) * B + blk, 0));",
    );
    let (before, layer, after) = match s.norms {
        Norms::Fused => (
            vec![],
            [vec![qkv_fused], attention_stages, vec![o_whole, mlp_fused, down_whole]].concat(),
            vec![head_fused],
        ),
        Norms::Tasks => (
            vec![],
            [
                vec![norm_task("norm1", Buf::Hs, Buf::AttnNorm, Buf::Xn, true, "l * B + blk", "l"), qkv_plain],
                attention_stages,
                vec![
                    o_whole,
                    norm_task("norm2", Buf::Hm, Buf::MlpNorm, Buf::Xm, true, "l * B + blk", "l"),
                    mlp_plain,
                    down_whole,
                ],
            ]
            .concat(),
            vec![norm_task("final_norm", Buf::Hs, Buf::FinalNorm, Buf::Xf, false, "L * B + blk", "0"), head_plain],
        ),
        Norms::Reducing => (
            vec![norm0],
            [vec![qkv_plain], attention_stages, vec![o_split, norm2_sum, mlp_plain, down_split, norm_next]].concat(),
            vec![head_plain],
        ),
    };
    [
        vec![st(
            "emb",
            &embed::OP,
            s.dt,
            false,
            &[B(Buf::Table), B(Buf::Ids), B(Buf::Hs)],
            e(&[&[s.v, s.nd], &[b], &[b, s.nd]]),
            "op_embed::embed(T2(et::bf16, V, ND, table, HD, 0, blk), T1(int, B, ids, 0), T2(et::bf16, B, ND, hs, HD, 0, blk));",
        ),
        st(
            "angles",
            &rope_table::OP,
            b,
            false,
            &[
                B(Buf::Pos),
                F(Scalar::Theta),
                F(Scalar::Factor),
                F(Scalar::Low),
                F(Scalar::High),
                F(Scalar::Original),
                B(Buf::Rope),
            ],
            e(&[&[1], &[], &[], &[], &[], &[], &[1, d]]),
            "op_rope_table::rope_table(T1(int, 1, pos, blk), theta, factor, low, high, original, T2(float, 1, D, rope, D, blk, 0));",
        )],
        before,
        layer,
        after,
        vec![st(
            "argmax",
            &argmax_partial::OP,
            s.vt,
            false,
            &[B(Buf::Logits), B(Buf::Best), B(Buf::Index)],
            e(&[&[b, s.nv], &[], &[b, 1], &[b, 1]]),
            "op_argmax_partial::argmax_partial(T2(float, B, NV, logits, VT * NV, 0, blk), blk * NV,
                                               T2(float, B, 1, best, VT, 0, blk), T2(int, B, 1, index, VT, 0, blk));",
        ),
        st(
            "pick",
            &argmax_merge::OP,
            b,
            false,
            &[B(Buf::Best), B(Buf::Index), B(Buf::Next)],
            e(&[&[1, s.vt], &[1, s.vt], &[1]]),
            "op_argmax_merge::argmax_merge(T2(float, 1, VT, best, VT, blk, 0), T2(int, 1, VT, index, VT, blk, 0),
                                           T1(int, 1, next, blk));",
        )],
    ]
    .concat()
}

/// Checks every stage against its op: the op's shape contract at the stage's extents, and
/// an arena that fits a CTA (227 KB on sm_90).
pub fn check_stages(stages: &[Stage]) -> Result<(), String> {
    for st in stages {
        let extents: Vec<&[usize]> = st.extents.iter().map(Vec::as_slice).collect();
        (st.op.contract)(&extents)
            .map_err(|why| format!("stage `{}` calls `{}` with {extents:?}: {why}", st.kernel, st.op.path))?;
        if st.launch_smem_bytes() > MAX_ARENA {
            return Err(format!(
                "stage `{}`: op `{}` asks for a {} byte shared-memory arena (and {} of alignment slack), more \
                 than a CTA has ({MAX_ARENA})",
                st.kernel,
                st.op.path,
                st.arena_bytes(),
                et_core::abi::SMEM_SLACK
            ));
        }
    }
    Ok(())
}

/// The most dynamic shared memory a CTA of an sm_90 GPU can have.
pub const MAX_ARENA: usize = 227 * 1024;

/// Tile constructors of the wrappers: `T<R>(type, extents.., pointer, trailing extents of the
/// tensor.., tile index..)` builds the same `et::Tile<type, R, et::Ext<extents..>>` as the
/// megakernel's `tensor.tile([index..], [extents..])` on a contiguous row-major tensor.
const HELPERS: &str = r#"
namespace bl {
// a contiguous row-major tensor at `p` whose trailing extents are `n..` (the leading one
// never enters a tile's address)
__device__ __forceinline__ et::TensorArg arg(void* p, long long n1 = 1, long long n2 = 1) {
    et::TensorArg a = {};
    a.ptr = p;
    a.stride[0] = n1 * n2;
    a.stride[1] = n2;
    a.stride[2] = 1;
    return a;
}
}  // namespace bl
#define T1(T, E0, P, I0) et::make_tile<T, 1, et::Ext<E0>>(bl::arg(P), {(long long)(I0)}, {E0})
#define T2(T, E0, E1, P, N1, I0, I1) \
    et::make_tile<T, 2, et::Ext<E0, E1>>(bl::arg(P, N1), {(long long)(I0), (long long)(I1)}, {E0, E1})
#define T3(T, E0, E1, E2, P, N1, N2, I0, I1, I2)                                                             \
    et::make_tile<T, 3, et::Ext<E0, E1, E2>>(bl::arg(P, N1, N2), {(long long)(I0), (long long)(I1), (long long)(I2)}, \
                                             {E0, E1, E2})
"#;

/// The whole translation unit for `shape`, CTAs of `threads` threads (given to the ops as
/// a megakernel's source gives them its own, `ET_CTA_THREADS`, so that they compile the
/// same paths).
pub fn cuda_source(shape: &Shape, stages: &[Stage], threads: u32) -> String {
    let mut src = format!("#define ET_CTA_THREADS {threads}\n");
    src.push_str(&et_core::cuda_prelude());
    let mut seen: Vec<&str> = Vec::new();
    for st in stages {
        let op = st.op;
        if seen.contains(&op.path) {
            continue;
        }
        seen.push(op.path);
        let _ = write!(
            src,
            "\n// tile op {}\nnamespace op_{} {{\n#line {} \"{}\"\n{}\n}}\n",
            op.path, op.name, op.line, op.file, op.cuda
        );
    }
    src.push_str("\n#line 1 \"<et-benches llama_baseline>\"\n");
    src.push_str(HELPERS);
    let s = shape;
    let sizes = [
        ("B", s.b),
        ("HD", s.hd),
        ("NKV", s.nkv),
        ("G", s.g),
        ("D", s.d),
        ("V", s.v),
        ("S", s.s),
        ("P", s.positions),
        ("NQ", s.nq),
        ("QT", s.qt),
        ("RT", s.rt),
        ("NO", s.no),
        ("OT", s.ot),
        ("NM", s.nm),
        ("MT", s.mt),
        ("ND", s.nd),
        ("DT", s.dt),
        ("KP", s.kp),
        ("KO", s.ko),
        ("KD", s.kd),
        ("NV", s.nv),
        ("VT", s.vt),
    ];
    src.push_str("namespace sz {\n");
    for (name, v) in sizes {
        let _ = writeln!(src, "constexpr int {name} = {v};");
    }
    src.push_str("}  // namespace sz\n");
    for st in stages {
        let params: Vec<String> = st
            .params
            .iter()
            .map(|p| match p {
                Param::Layer => "int layer".to_string(),
                Param::Layers => "int layers".to_string(),
                Param::Buf(b) => format!("void* {}", b.name()),
                Param::Scalar(x) => format!("float {}", x.name()),
            })
            .collect();
        let _ = write!(
            src,
            "\nextern \"C\" __global__ void __launch_bounds__({threads}, 1) {}({}) {{\n    using namespace sz;\n    \
             const long long blk = blockIdx.x;\n",
            st.kernel,
            params.join(", ")
        );
        // an op with an arena takes it as its last argument, as in a megakernel, whose
        // state bytes start zeroed (`et::arena_init`)
        if st.op.uses_smem {
            src.push_str(
                "    extern __shared__ __align__(128) unsigned char bl_arena[];\n    et::arena_init(bl_arena);\n    \
                 __syncthreads();\n",
            );
        }
        if st.params.contains(&Param::Layer) {
            src.push_str("    const long long l = layer;\n");
        }
        if st.params.contains(&Param::Layers) {
            src.push_str("    const long long L = layers;\n");
        }
        // the body ends with the op call's `);`: an arena goes in as its last argument
        let body = match st.body.strip_suffix(");") {
            Some(call) if st.op.uses_smem => format!("{call}, bl_arena);"),
            _ => st.body.clone(),
        };
        let _ = write!(src, "    {body}\n}}\n");
    }
    src
}

#[cfg(test)]
mod tests {
    use super::*;
    use llama::Stamp;

    #[test]
    fn every_stamp_passes_its_ops_contracts() {
        for stamp in Stamp::ALL {
            let shape = Shape::of(stamp, 8192).unwrap();
            let st = stages(&shape);
            check_stages(&st).unwrap_or_else(|e| panic!("{stamp:?}: {e}"));
            // 2 + 9 per layer + 4 launches (7 and 3 with the norms fused; the attention's
            // pieces, merge and append one stage with whole heads, no merge stage where
            // the projection merges), as many CTAs as the megakernel has tasks
            let (per_layer, total) = if shape.norms == Norms::Fused { (7, 12) } else { (9, 15) };
            let (per_layer, total) = match (shape.attention_heads, shape.merged_o) {
                (Some(_), _) => (per_layer - 2, total - 2),
                (None, true) => (per_layer - 1, total - 1),
                (None, false) => (per_layer, total),
            };
            assert_eq!(st.iter().filter(|s| s.per_layer).count(), per_layer, "{stamp:?}");
            assert_eq!(st.len(), total, "{stamp:?}");
        }
    }

    #[test]
    fn a_wrong_tile_is_a_contract_error_naming_the_stage() {
        let shape = Shape::of(Stamp::Llama1bB1, 8192).unwrap();
        let mut st = stages(&shape);
        let qkv = st.iter().position(|s| s.kernel == "bl_qkv_proj").unwrap();
        st[qkv].extents[1] = vec![1, 1024];
        let err = check_stages(&st).unwrap_err();
        assert!(err.contains("stage `bl_qkv_proj`") && err.contains("reduced extent"), "{err}");
    }

    #[test]
    fn the_source_declares_each_op_once_and_one_kernel_per_stage() {
        let shape = Shape::of(Stamp::TinyB2, 8192).unwrap();
        let st = stages(&shape);
        let src = cuda_source(&shape, &st, 512);
        assert_eq!(src.matches("namespace op_matvec {").count(), 1);
        assert_eq!(src.matches("namespace op_rms_norm {").count(), 1);
        for s in &st {
            assert_eq!(src.matches(&format!(" {}(", s.kernel)).count(), 1, "{}", s.kernel);
        }
        assert!(src.contains("constexpr int B = 2;") && src.contains("constexpr int VT = 4;"));
        // TinyB2 takes whole heads: one attention stage, no merge
        assert!(src.contains("extern \"C\" __global__ void __launch_bounds__(512, 1) bl_attend(int layer, void* qkv, void* pos, void* rope, float scale"));
        assert!(!src.contains("bl_merge") && !src.contains("bl_chunk"));
        // TinyB1 takes split-KV pieces
        let shape = Shape::of(Stamp::TinyB1, 8192).unwrap();
        let src = cuda_source(&shape, &stages(&shape), 512);
        assert!(src.contains("extern \"C\" __global__ void __launch_bounds__(512, 1) bl_chunk(int layer, void* qkv, void* pos, void* rope, float scale"));
    }
}
