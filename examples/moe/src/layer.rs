//! The MoE layer as ONE megakernel per layer shape, routing decided inside the launch; one
//! compilation serves every token count from 1 to the shape's maximum (`T` is a symbolic
//! dim, read from the input's shape at launch).
//!
//! It uses the routing features of the DSL: a group condition after a one-element guard
//! wait, and `signal!` through an `i32` tensor written in the same launch, on an event
//! with a declared count (`event!(.., count = ..)`).
//!
//! Layout: token tiles of `R` rows (fixed per shape). `M = ⌈T / R⌉ ≤ MT` token tiles per
//! expert run (a second symbolic dim, from the gathered rows' shape); the expert outputs
//! `ye` and the token lists keep the full capacity `C = R · MT` per expert (the combine
//! finds expert `e`'s slot `p` at row `e · C + p`), while the gathered rows `xe` and the
//! hidden `he` are tile-major (tile `(e, m)` is row block `m · E + e`), so they shrink
//! with `T` and every tile index stays affine.
//!
//! Tasks:
//! - `score[t, q]`: the router GEMV of token `t` for the `q`-th slice of `EQ` experts (f32
//!   logits); signals `scored[t]`. One task for all `E` experts read the whole router
//!   (512 KB at qwen3 shapes) in one CTA, about 20 us at the head of every launch;
//! - `route[t]`: waits its token's slices, `router_topk`; signals `routed[t]`;
//! - `group[e]`: waits every token, lists expert `e`'s tokens (`moe_group`);
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
use crate::reference::Output;
use crate::weights::MoeWeights;

/// Stamps the layer for one shape: up to `TMAX` tokens; hidden `H`, `E` experts, top-`K`,
/// intermediate `I`; token tiles of `R` rows, at most `MT` per expert (`R · MT = TMAX`);
/// gate/up row tiles of `NI` (`IT · NI = I`), down row tiles of `ND` (`DT · ND = H`),
/// router slices of `EQ` experts (`Q · EQ = E`).
macro_rules! moe_layer {
    ($name:ident, TMAX = $tmax:literal, H = $h:literal, E = $e:literal, K = $k:literal, I = $i:literal,
     R = $r:literal, MT = $mt:literal, NI = $ni:literal, IT = $it:literal, ND = $nd:literal, DT = $dt:literal,
     EQ = $eq:literal, Q = $q:literal) => {
        const _: () = assert!(
            $r * $mt == $tmax && $it * $ni == $i && $dt * $nd == $h && $q * $eq == $e,
            "moe_layer!: the tile counts do not cover the layer's sizes"
        );

        /// One MoE layer for 1 to `TMAX` tokens as one megakernel (see [`crate::layer`]).
        #[megakernel(dims(T <= $tmax, M <= $mt, H = $h, E = $e, K = $k, I = $i, R = $r, MT = $mt, NI = $ni,
                          IT = $it, ND = $nd, DT = $dt, EQ = $eq, Q = $q))]
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
            xe: &mut Tensor<bf16, { [M * E * R, H] }>,
            he: &mut Tensor<bf16, { [M * E * R, IT * NI] }>,
            ye: &mut Tensor<bf16, { [E * MT * R, DT * ND] }>,
            out: &mut Tensor<bf16, { [T, H] }>,
        ) {
            let scored = event!([T]);
            let routed = event!([T]);
            let grouped = event!([E]);
            let gathered = event!([E, M]);
            let hidden = event!([E, M]);
            // each token receives one signal per (chosen expert, down row tile)
            let done = event!([T], count = K * DT);
            tile!(score[t, q] in [T, Q] {
                matvec(router.tile([q, 0], [EQ, H]), x.tile([t, 0], [1, H]), logits.tile([t, q], [1, EQ]));
                signal!(scored[t]);
            });
            tile!(route[t] in [T] {
                wait!(scored[t]);
                router_topk(logits.tile([t, 0], [1, E]), topk.tile([t, 0], [1, K]), topw.tile([t, 0], [1, K]));
                signal!(routed[t]);
            });
            tile!(group[e] in [E] {
                wait!(routed[..]);
                moe_group(topk.tile([0, 0], [T, K]), e, counts.tile([e], [1]), tokens.tile([e, 0], [1, MT * R]));
                signal!(grouped[e]);
            });
            tile!(gather[e, m] in [E, M] if m * R < counts[e] {
                wait!(grouped[e]);
                moe_gather(x.tile([0, 0], [T, H]), tokens.tile([e, m], [1, R]), xe.tile([m * E + e, 0], [R, H]));
                signal!(gathered[e, m]);
            });
            tile!(up[e, m, j] in [E, M, IT] if m * R < counts[e] {
                wait!(grouped[e]);
                wait!(gathered[e, m]);
                matvec_silu(
                    w_gate.tile([e * IT + j, 0], [NI, H]),
                    w_up.tile([e * IT + j, 0], [NI, H]),
                    xe.tile([m * E + e, 0], [R, H]),
                    he.tile([m * E + e, j], [R, NI]),
                );
                signal!(hidden[e, m]);
            });
            tile!(down[e, m, j] in [E, M, DT] if m * R < counts[e] {
                wait!(grouped[e]);
                wait!(hidden[e, m]);
                matvec(w_down.tile([e * DT + j, 0], [ND, IT * NI]), he.tile([m * E + e, 0], [R, IT * NI]),
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

// qwen3-moe: H 2048, E 128, K 8, I 768 (12 gate/up tiles of 64 rows, 16 down tiles of
// 128, 8 router slices of 16 experts: 64 KB of the router each), up to 1024 tokens in
// tiles of 16
moe_layer!(
    moe_qwen3,
    TMAX = 1024,
    H = 2048,
    E = 128,
    K = 8,
    I = 768,
    R = 16,
    MT = 64,
    NI = 64,
    IT = 12,
    ND = 128,
    DT = 16,
    EQ = 16,
    Q = 8
);
// tiny: H 64, E 8, K 2, I 32 (one gate/up tile, one down tile, two router slices), up to
// 64 tokens in tiles of 4, so small batches already span several tiles and end in a
// partial one
moe_layer!(
    moe_tiny,
    TMAX = 64,
    H = 64,
    E = 8,
    K = 2,
    I = 32,
    R = 4,
    MT = 16,
    NI = 32,
    IT = 1,
    ND = 64,
    DT = 1,
    EQ = 4,
    Q = 2
);

/// The megakernel's layout for a layer shape: rows per token tile and the most tokens
/// (`None` for a shape without a megakernel).
pub fn layout(config: &MoeConfig) -> Option<Layout> {
    if *config == MoeConfig::QWEN3_MOE {
        Some(Layout { tile_rows: 16, max_tokens: 1024 })
    } else if *config == MoeConfig::TINY {
        Some(Layout { tile_rows: 4, max_tokens: 64 })
    } else {
        None
    }
}

/// The sizes of a layer megakernel's capacity layout that do not depend on the tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Rows of a token tile (`R`).
    pub tile_rows: usize,
    /// The most tokens of a launch (`R · MT`, also each expert's capacity `C`).
    pub max_tokens: usize,
}

impl Layout {
    /// Token tiles per expert that `tokens` tokens need (`M = ⌈T / R⌉`).
    pub fn token_tiles(&self, tokens: usize) -> usize {
        tokens.div_ceil(self.tile_rows)
    }
}

/// Token counts to test and benchmark a shape at (the megakernel takes any count from 1
/// to its [`Layout::max_tokens`]; one compilation per schedule serves them all).
pub fn stamped_tokens(config: &MoeConfig) -> &'static [usize] {
    if *config == MoeConfig::QWEN3_MOE {
        &[1, 16, 128, 1024]
    } else if *config == MoeConfig::TINY {
        &[1, 2, 3, 8, 17, 40, 64]
    } else {
        &[]
    }
}

/// The layer's megakernel on a backend for one token count (any, one compilation per schedule): weights and scratch uploaded
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
    /// write stays NaN or -7). Any `t` from 1 to the shape's [`Layout::max_tokens`].
    pub fn new(backend: &'b Bk, w: &MoeWeights, t: usize, options: LaunchOptions) -> Result<Self, String> {
        let cfg = w.config;
        let lay = layout(&cfg).ok_or_else(|| format!("no MoE megakernel for {cfg:?} (known: qwen3-moe, tiny)"))?;
        if t == 0 || t > lay.max_tokens {
            return Err(format!("the MoE megakernel for {cfg:?} takes 1 to {} tokens, not {t}", lay.max_tokens));
        }
        let (h, e, k, i) = (cfg.hidden, cfg.experts, cfg.top_k, cfg.inter);
        let (c, rows) = (lay.max_tokens, lay.token_tiles(t) * e * lay.tile_rows);
        let e_ = |r: et_core::Error| r.to_string();
        let nan = |s: &[usize]| backend.upload(&Tensor::<bf16>::poisoned(s)).map_err(e_);
        let nan32 = |s: &[usize]| backend.upload(&Tensor::<f32>::poisoned(s)).map_err(e_);
        let ints = |s: &[usize]| backend.upload(&Tensor::<i32>::full(s, -7)).map_err(e_);
        Ok(MegaLayer {
            backend,
            config: cfg,
            tokens: t,
            options,
            x: nan(&[t, h])?,
            router: backend.upload(&w.router).map_err(e_)?,
            gate: backend.upload(&w.gate).map_err(e_)?,
            up: backend.upload(&w.up).map_err(e_)?,
            down: backend.upload(&w.down).map_err(e_)?,
            logits: nan32(&[t, e])?,
            topk: ints(&[t, k])?,
            topw: nan32(&[t, k])?,
            counts: ints(&[e])?,
            list: ints(&[e, c])?,
            xe: nan(&[rows, h])?,
            he: nan(&[rows, i])?,
            ye: nan(&[e * c, h])?,
            out: nan(&[t, h])?,
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
        if self.config == MoeConfig::QWEN3_MOE { go!(moe_qwen3) } else { go!(moe_tiny) }
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
