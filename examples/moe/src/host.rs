//! The layer's dataflow run op by op on host tensors: every task of the megakernel
//! (`layer.rs`) as one call of the same tile op, in an order its events allow (stage by
//! stage), inactive tasks skipped by the same condition (`m · R < counts[e]`). It uses the
//! per-token-count capacity layout of [`MoeConfig::capacity`] (the kernel-per-operator
//! baseline's); the megakernel's layout (`crate::layer::Layout`) places the same tiles at
//! other rows, which changes no value. It checks the layout and the ops against the
//! [reference](crate::reference) without the DSL, and is what the `moe` binary runs on
//! the CPU.

use et_core::ops::{matvec, matvec_silu, moe_combine, moe_gather, moe_group, router_topk};
use et_core::tile::{InTensor, OutTensor, TileMut, TileRef};
use et_core::{Element, RawTensor, Tensor, bf16};

use crate::config::MoeConfig;
use crate::reference::Output;
use crate::weights::MoeWeights;

/// The scratch tensors of the capacity layout (the megakernel's parameters after the
/// inputs) for `T` tokens; `C` = [`MoeConfig::capacity`].
#[derive(Clone, Debug)]
pub struct Scratch {
    /// Router logits `[T, E]`.
    pub logits: Tensor<f32>,
    /// Chosen experts `[T, K]`.
    pub topk: Tensor<i32>,
    /// Their weights `[T, K]`.
    pub topw: Tensor<f32>,
    /// Tokens per expert `[E]`.
    pub counts: Tensor<i32>,
    /// Each expert's token ids in increasing order, -1 padding `[E, C]`.
    pub tokens: Tensor<i32>,
    /// Gathered token rows `[E · C, H]`.
    pub xe: Tensor<bf16>,
    /// `silu(gate) · up` per slot `[E · C, I]`.
    pub he: Tensor<bf16>,
    /// Expert outputs per slot `[E · C, H]`.
    pub ye: Tensor<bf16>,
    /// The layer's output `[T, H]`.
    pub out: Tensor<bf16>,
}

impl Scratch {
    /// Zeroed scratch for `t` tokens.
    pub fn new(cfg: &MoeConfig, t: usize) -> Scratch {
        let (h, e, k, i, c) = (cfg.hidden, cfg.experts, cfg.top_k, cfg.inter, MoeConfig::capacity(t));
        Scratch {
            logits: Tensor::zeros(&[t, e]),
            topk: Tensor::zeros(&[t, k]),
            topw: Tensor::zeros(&[t, k]),
            counts: Tensor::zeros(&[e]),
            tokens: Tensor::zeros(&[e, c]),
            xe: Tensor::zeros(&[e * c, h]),
            he: Tensor::zeros(&[e * c, i]),
            ye: Tensor::zeros(&[e * c, h]),
            out: Tensor::zeros(&[t, h]),
        }
    }
}

/// A read tile of a host tensor.
fn rd<T: Element, const R: usize>(raw: &RawTensor, index: [i64; R], size: [usize; R]) -> TileRef<'_, T, R> {
    // SAFETY: every `raw` here comes from a tensor borrowed by `run` for the whole call,
    // and the ops run one at a time, so nothing writes it while this tile is read.
    unsafe { InTensor::<T>::bind(raw) }.tile(index, size)
}

/// A written tile of a host tensor.
fn wr<T: Element, const R: usize>(raw: &RawTensor, index: [i64; R], size: [usize; R]) -> TileMut<'_, T, R> {
    // SAFETY: as `rd`; `raw` is from `raw_mut` of a tensor `run` borrows mutably, and the
    // op's read tiles are of other tensors.
    unsafe { OutTensor::<T>::bind(raw) }.tile_mut(index, size)
}

/// Runs the layer on the tokens `x` (`[T, H]`) into `s` (made by [`Scratch::new`] for `T`).
pub fn run(w: &MoeWeights, x: &Tensor<bf16>, s: &mut Scratch) -> Result<(), String> {
    let cfg = w.config;
    let (h, e, k, i) = (cfg.hidden, cfg.experts, cfg.top_k, cfg.inter);
    if x.shape().len() != 2 || x.shape()[1] != h {
        return Err(format!("the tokens must be [T, {h}], not {:?}", x.shape()));
    }
    let t = x.shape()[0];
    if s.out.shape() != [t, h] {
        return Err(format!("the scratch is for {} tokens, not {t}", s.out.shape()[0]));
    }
    let (r, mt, c) = (MoeConfig::tile_rows(t), MoeConfig::token_tiles(t), MoeConfig::capacity(t));
    let (ni, nd, eq) = (cfg.up_rows(), cfg.down_rows(), cfg.router_rows());
    let (xr, router, gate, up, down) = (x.raw(), w.router.raw(), w.gate.raw(), w.up.raw(), w.down.raw());
    let (logits, topk, topw) = (s.logits.raw_mut(), s.topk.raw_mut(), s.topw.raw_mut());
    let (counts, tokens, xe, he, ye, out) =
        (s.counts.raw_mut(), s.tokens.raw_mut(), s.xe.raw_mut(), s.he.raw_mut(), s.ye.raw_mut(), s.out.raw_mut());
    let ti = |v: usize| v as i64;
    for tok in 0..t {
        for q in 0..e / eq {
            matvec::<f32>(
                rd(&router, [ti(q), 0], [eq, h]),
                rd(&xr, [ti(tok), 0], [1, h]),
                wr(&logits, [ti(tok), ti(q)], [1, eq]),
            );
        }
        router_topk(
            rd(&logits, [ti(tok), 0], [1, e]),
            wr(&topk, [ti(tok), 0], [1, k]),
            wr(&topw, [ti(tok), 0], [1, k]),
        );
    }
    for ex in 0..e {
        moe_group(rd(&topk, [0, 0], [t, k]), ti(ex), wr(&counts, [ti(ex)], [1]), wr(&tokens, [ti(ex), 0], [1, c]));
    }
    let counts_of = |ex: usize| s.counts.as_slice()[ex];
    let active = |ex: usize, m: usize| (m * r) < counts_of(ex).max(0) as usize;
    let tile = |ex: usize, m: usize| ti(ex * mt + m);
    for (ex, m) in (0..e).flat_map(|ex| (0..mt).map(move |m| (ex, m))).filter(|&(ex, m)| active(ex, m)) {
        moe_gather(rd(&xr, [0, 0], [t, h]), rd(&tokens, [ti(ex), ti(m)], [1, r]), wr(&xe, [tile(ex, m), 0], [r, h]));
        for j in 0..i / ni {
            let wt = ti(ex * (i / ni) + j);
            matvec_silu::<bf16>(
                rd(&gate, [wt, 0], [ni, h]),
                rd(&up, [wt, 0], [ni, h]),
                rd(&xe, [tile(ex, m), 0], [r, h]),
                wr(&he, [tile(ex, m), ti(j)], [r, ni]),
            );
        }
        for j in 0..h / nd {
            let wt = ti(ex * (h / nd) + j);
            matvec::<bf16>(
                rd(&down, [wt, 0], [nd, i]),
                rd(&he, [tile(ex, m), 0], [r, i]),
                wr(&ye, [tile(ex, m), ti(j)], [r, nd]),
            );
        }
    }
    for tok in 0..t {
        moe_combine(
            rd(&topk, [ti(tok), 0], [1, k]),
            rd(&topw, [ti(tok), 0], [1, k]),
            ti(tok),
            rd(&counts, [0], [e]),
            rd(&tokens, [0, 0], [e, c]),
            rd(&ye, [0, 0], [e * c, h]),
            wr(&out, [ti(tok), 0], [1, h]),
        );
    }
    Ok(())
}

/// [`run`] into fresh scratch, as the reference's [`Output`].
pub fn forward(w: &MoeWeights, x: &Tensor<bf16>) -> Result<(Output, Scratch), String> {
    let mut s = Scratch::new(&w.config, x.shape().first().copied().unwrap_or(0));
    run(w, x, &mut s)?;
    let o = Output { logits: s.logits.clone(), topk: s.topk.clone(), topw: s.topw.clone(), out: s.out.clone() };
    Ok((o, s))
}
