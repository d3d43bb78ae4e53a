//! The MoE layer as ONE megakernel, routing decided inside the launch.
//!
//! It uses the routing features of the DSL: a group condition after a one-element guard
//! wait, and `signal!` through an `i32` tensor written in the same launch, on an event
//! with a declared count (`event!(.., count = ..)`).
//!
//! Tasks (`R` rows per token tile, `MT` tiles per expert, capacity `C = R · MT ≥ T`):
//! - `router[b]` (per block of `RB` tokens): router GEMV to f32 logits, `router_topk`;
//!   signals `routed[b]`;
//! - `group[e]`: waits every token block, lists expert `e`'s tokens (`moe_group`);
//!   signals `grouped[e]`;
//! - `gather[e, m] if m · R < counts[e]`: copies the tile's token rows to `xe`;
//! - `up[e, m, j] if ..`: `matvec_silu` of the gate/up row tile `j` over the tile's rows;
//! - `down[e, m, j] if ..`: down row tile `j`; signals `done[t]` for each token `t` of the
//!   tile (padding, -1, signals nothing);
//! - `combine[t]`: waits its `K · DT` signals, sums its experts' rows (`moe_combine`).
//!
//! Inactive tasks (an expert tile without tokens) run nothing but their guard wait: under
//! the dynamic schedule they are never queued. The host never reads routing data.

use et_core::prelude::*;

use crate::config::MoeConfig;
use crate::host::Scratch;
use crate::reference::Output;
use crate::weights::MoeWeights;

/// Stamps the layer for one shape and token count: `T` tokens in router blocks of `RB`
/// (`RT · RB = T`); hidden `H`, `E` experts, top-`K`, intermediate `I`; token tiles of `R`
/// rows, `MT` per expert; gate/up row tiles of `NI` (`IT · NI = I`), down row tiles of
/// `ND` (`DT · ND = H`).
macro_rules! moe_layer {
    ($name:ident, T = $t:literal, RB = $rb:literal, RT = $rt:literal, H = $h:literal, E = $e:literal, K = $k:literal,
     I = $i:literal, R = $r:literal, MT = $mt:literal, NI = $ni:literal, IT = $it:literal, ND = $nd:literal,
     DT = $dt:literal) => {
        const _: () = assert!(
            $rt * $rb == $t && $r * $mt >= $t && $r * ($mt - 1) < $t && $it * $ni == $i && $dt * $nd == $h,
            "moe_layer!: the tile counts do not cover the layer's sizes"
        );

        /// One MoE layer for a fixed token count as one megakernel (see [`crate::layer`]).
        #[megakernel(dims(T = $t, RB = $rb, RT = $rt, H = $h, E = $e, K = $k, I = $i, R = $r, MT = $mt, NI = $ni,
                          IT = $it, ND = $nd, DT = $dt))]
        pub fn $name(
            x: &Tensor<bf16, { [T, H] }>,
            router: &Tensor<bf16, { [E, H] }>,
            w_gate: &Tensor<bf16, { [E * IT * NI, H] }>,
            w_up: &Tensor<bf16, { [E * IT * NI, H] }>,
            w_down: &Tensor<bf16, { [E * DT * ND, IT * NI] }>,
            logits: &mut Tensor<f32, { [T, E] }>,
            topk: &mut Tensor<i32, { [T, K] }>,
            topw: &mut Tensor<f32, { [T, K] }>,
            counts: &mut Tensor<i32, { [E] }>,
            tokens: &mut Tensor<i32, { [E, MT * R] }>,
            xe: &mut Tensor<bf16, { [E * MT * R, H] }>,
            he: &mut Tensor<bf16, { [E * MT * R, IT * NI] }>,
            ye: &mut Tensor<bf16, { [E * MT * R, DT * ND] }>,
            out: &mut Tensor<bf16, { [T, H] }>,
        ) {
            let routed = event!([RT]);
            let grouped = event!([E]);
            let gathered = event!([E, MT]);
            let hidden = event!([E, MT]);
            // each token receives one signal per (chosen expert, down row tile)
            let done = event!([T], count = K * DT);
            tile!(route[b] in [RT] {
                matvec(router.tile([0, 0], [E, H]), x.tile([b, 0], [RB, H]), logits.tile([b, 0], [RB, E]));
                router_topk(logits.tile([b, 0], [RB, E]), topk.tile([b, 0], [RB, K]), topw.tile([b, 0], [RB, K]));
                signal!(routed[b]);
            });
            tile!(group[e] in [E] {
                wait!(routed[..]);
                moe_group(topk.tile([0, 0], [T, K]), e, counts.tile([e], [1]), tokens.tile([e, 0], [1, MT * R]));
                signal!(grouped[e]);
            });
            tile!(gather[e, m] in [E, MT] if m * R < counts[e] {
                wait!(grouped[e]);
                moe_gather(x.tile([0, 0], [T, H]), tokens.tile([e, m], [1, R]), xe.tile([e * MT + m, 0], [R, H]));
                signal!(gathered[e, m]);
            });
            tile!(up[e, m, j] in [E, MT, IT] if m * R < counts[e] {
                wait!(grouped[e]);
                wait!(gathered[e, m]);
                matvec_silu(
                    w_gate.tile([e * IT + j, 0], [NI, H]),
                    w_up.tile([e * IT + j, 0], [NI, H]),
                    xe.tile([e * MT + m, 0], [R, H]),
                    he.tile([e * MT + m, j], [R, NI]),
                );
                signal!(hidden[e, m]);
            });
            tile!(down[e, m, j] in [E, MT, DT] if m * R < counts[e] {
                wait!(grouped[e]);
                wait!(hidden[e, m]);
                matvec(w_down.tile([e * DT + j, 0], [ND, IT * NI]), he.tile([e * MT + m, 0], [R, IT * NI]),
                       ye.tile([e * MT + m, j], [R, ND]));
                signal!(done[tokens[e, m * R .. m * R + R]]);
            });
            tile!(combine[t] in [T] {
                wait!(grouped[..]);
                wait!(done[t]);
                moe_combine(
                    topk.tile([t, 0], [1, K]),
                    topw.tile([t, 0], [1, K]),
                    t,
                    counts.tile([0], [E]),
                    tokens.tile([0, 0], [E, MT * R]),
                    ye.tile([0, 0], [E * MT * R, DT * ND]),
                    out.tile([t, 0], [1, H]),
                );
            });
        }
    };
}

// qwen3-moe: H 2048, E 128, K 8, I 768 (12 gate/up tiles of 64 rows, 16 down tiles of 128)
moe_layer!(
    moe_qwen3_t1,
    T = 1,
    RB = 1,
    RT = 1,
    H = 2048,
    E = 128,
    K = 8,
    I = 768,
    R = 1,
    MT = 1,
    NI = 64,
    IT = 12,
    ND = 128,
    DT = 16
);
moe_layer!(
    moe_qwen3_t16,
    T = 16,
    RB = 16,
    RT = 1,
    H = 2048,
    E = 128,
    K = 8,
    I = 768,
    R = 16,
    MT = 1,
    NI = 64,
    IT = 12,
    ND = 128,
    DT = 16
);
// moe_layer!(moe_qwen3_t128, T = 128, RB = 16, RT = 8, H = 2048, E = 128, K = 8, I = 768, R = 16, MT = 8, NI = 64, IT = 12, ND = 128, DT = 16);
// moe_layer!(moe_qwen3_t1024, T = 1024, RB = 16, RT = 64, H = 2048, E = 128, K = 8, I = 768, R = 16, MT = 64, NI = 64, IT = 12, ND = 128, DT = 16);
// tiny: H 64, E 8, K 2, I 32 (one gate/up tile, one down tile)
moe_layer!(
    moe_tiny_t1,
    T = 1,
    RB = 1,
    RT = 1,
    H = 64,
    E = 8,
    K = 2,
    I = 32,
    R = 1,
    MT = 1,
    NI = 32,
    IT = 1,
    ND = 64,
    DT = 1
);
moe_layer!(
    moe_tiny_t3,
    T = 3,
    RB = 3,
    RT = 1,
    H = 64,
    E = 8,
    K = 2,
    I = 32,
    R = 3,
    MT = 1,
    NI = 32,
    IT = 1,
    ND = 64,
    DT = 1
);
moe_layer!(
    moe_tiny_t8,
    T = 8,
    RB = 8,
    RT = 1,
    H = 64,
    E = 8,
    K = 2,
    I = 32,
    R = 8,
    MT = 1,
    NI = 32,
    IT = 1,
    ND = 64,
    DT = 1
);
moe_layer!(
    moe_tiny_t40,
    T = 40,
    RB = 8,
    RT = 5,
    H = 64,
    E = 8,
    K = 2,
    I = 32,
    R = 16,
    MT = 3,
    NI = 32,
    IT = 1,
    ND = 64,
    DT = 1
);

/// The token counts stamped for a config name (`qwen3-moe`, `tiny`).
pub fn stamped_tokens(config: &MoeConfig) -> &'static [usize] {
    if *config == MoeConfig::QWEN3_MOE {
        &[1, 16]
    } else if *config == MoeConfig::TINY {
        &[1, 3, 8, 40]
    } else {
        &[]
    }
}

/// The layer's megakernel on a backend for one token count: weights and scratch uploaded
/// once, one launch per [`MegaLayer::forward`]. The host never reads routing data during
/// a launch; `forward` downloads it afterwards for the check against the reference.
pub struct MegaLayer<'b, Bk: Backend> {
    backend: &'b Bk,
    config: MoeConfig,
    tokens: usize,
    options: LaunchOptions,
    x: Bk::Tensor<bf16>,
    router: Bk::Tensor<bf16>,
    gate: Bk::Tensor<bf16>,
    up: Bk::Tensor<bf16>,
    down: Bk::Tensor<bf16>,
    logits: Bk::Tensor<f32>,
    topk: Bk::Tensor<i32>,
    topw: Bk::Tensor<f32>,
    counts: Bk::Tensor<i32>,
    list: Bk::Tensor<i32>,
    xe: Bk::Tensor<bf16>,
    he: Bk::Tensor<bf16>,
    ye: Bk::Tensor<bf16>,
    out: Bk::Tensor<bf16>,
}

impl<'b, Bk: Backend> MegaLayer<'b, Bk> {
    /// Uploads the weights and `t` tokens' scratch (poisoned: whatever the launch does not
    /// write stays NaN or -7).
    pub fn new(backend: &'b Bk, w: &MoeWeights, t: usize, options: LaunchOptions) -> Result<Self, String> {
        if !stamped_tokens(&w.config).contains(&t) {
            return Err(format!(
                "no MoE megakernel stamped for {:?} at {t} tokens (stamped: {:?})",
                w.config,
                stamped_tokens(&w.config)
            ));
        }
        let s = Scratch::new(&w.config, t);
        let e = |r: et_core::Error| r.to_string();
        let nan = |t: &Tensor<bf16>| backend.upload(&Tensor::<bf16>::poisoned(t.shape())).map_err(e);
        let nan32 = |t: &Tensor<f32>| backend.upload(&Tensor::<f32>::poisoned(t.shape())).map_err(e);
        let ints = |t: &Tensor<i32>| backend.upload(&Tensor::<i32>::full(t.shape(), -7)).map_err(e);
        Ok(MegaLayer {
            backend,
            config: w.config,
            tokens: t,
            options,
            x: nan(&s.out)?,
            router: backend.upload(&w.router).map_err(e)?,
            gate: backend.upload(&w.gate).map_err(e)?,
            up: backend.upload(&w.up).map_err(e)?,
            down: backend.upload(&w.down).map_err(e)?,
            logits: nan32(&s.logits)?,
            topk: ints(&s.topk)?,
            topw: nan32(&s.topw)?,
            counts: ints(&s.counts)?,
            list: ints(&s.tokens)?,
            xe: nan(&s.xe)?,
            he: nan(&s.he)?,
            ye: nan(&s.ye)?,
            out: nan(&s.out)?,
        })
    }

    /// Sets the input tokens `[T, H]`.
    pub fn set_input(&mut self, x: &Tensor<bf16>) -> Result<(), String> {
        if x.shape() != [self.tokens, self.config.hidden] {
            return Err(format!("the tokens must be [{}, {}], not {:?}", self.tokens, self.config.hidden, x.shape()));
        }
        self.x = self.backend.upload(x).map_err(|e| e.to_string())?;
        Ok(())
    }

    /// One launch on the current input; returns the launch report.
    pub fn launch(&mut self) -> Result<et_core::LaunchReport, String> {
        let (be, o) = (self.backend, &self.options);
        macro_rules! go {
            ($k:ident) => {
                $k::launch_with(
                    be,
                    o,
                    &self.x,
                    &self.router,
                    &self.gate,
                    &self.up,
                    &self.down,
                    &mut self.logits,
                    &mut self.topk,
                    &mut self.topw,
                    &mut self.counts,
                    &mut self.list,
                    &mut self.xe,
                    &mut self.he,
                    &mut self.ye,
                    &mut self.out,
                )
                .map_err(|e| e.to_string())
            };
        }
        match (self.config == MoeConfig::QWEN3_MOE, self.tokens) {
            (true, 1) => go!(moe_qwen3_t1),
            (true, 16) => go!(moe_qwen3_t16),
            (false, 1) => go!(moe_tiny_t1),
            (false, 3) => go!(moe_tiny_t3),
            (false, 8) => go!(moe_tiny_t8),
            (false, 40) => go!(moe_tiny_t40),
            (_, t) => Err(format!("no MoE megakernel stamped at {t} tokens")),
        }
    }

    /// Sets the input, launches once and downloads what the reference computes.
    pub fn forward(&mut self, x: &Tensor<bf16>) -> Result<Output, String> {
        self.set_input(x)?;
        self.launch()?;
        let e = |r: et_core::Error| r.to_string();
        Ok(Output {
            logits: self.backend.download(&self.logits).map_err(e)?,
            topk: self.backend.download(&self.topk).map_err(e)?,
            topw: self.backend.download(&self.topw).map_err(e)?,
            out: self.backend.download(&self.out).map_err(e)?,
        })
    }
}
