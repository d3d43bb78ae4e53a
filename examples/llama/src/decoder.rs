//! Running the decode megakernel: the weights and KV cache on a backend, one launch per
//! step, and greedy generation through it.
//!
//! [`Decoder::new`] picks the megakernel stamped for the weights' shapes and the batch
//! size ([`Stamp`]: the stamp of exactly that batch, else the smallest larger one, whose
//! spare sequence slots run idle), packs the weights into the layouts it reads (the
//! fused QKV weight, every stacked tensor flattened to the rank its op takes) and uploads
//! them with the KV cache, the per-layer activations and the step's inputs (token ids
//! and positions); nothing is rebuilt or allocated between steps. The step inputs are
//! two pairs of device buffers: a step reads one pair and the megakernel writes its
//! tokens and the next positions into the other, which the next step reads; the host
//! uploads only inputs that differ from those, so a step of generation (tokens fed back
//! at the next position) uploads nothing.

use crate::config::LlamaConfig;
use crate::decode::{
    decode_1b_b1, decode_1b_b8, decode_1b_b32, decode_1b_b64, decode_8b_b1, decode_8b_b8, decode_8b_b32, decode_8b_b64,
    decode_tiny_b1, decode_tiny_b2, decode_tiny_b3, decode_tiny_b4,
};
use crate::error::{Error, Result};
use crate::reference::Generation;
use crate::weights::LlamaWeights;
use et_core::backend::LaunchReport;
use et_core::{Backend, Deferral, LaunchOptions, Prepared, Tensor, bf16};
use std::time::{Duration, Instant};

/// One stamped decode megakernel: the model shape (a preset) and the sequence slots of a
/// step. A decoder of a smaller batch runs on it with its spare slots idle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stamp {
    /// `tiny`, one sequence.
    TinyB1,
    /// `tiny`, two sequences.
    TinyB2,
    /// `tiny`, three sequences.
    TinyB3,
    /// `tiny`, four sequences.
    TinyB4,
    /// `llama-3.2-1b`, one sequence.
    Llama1bB1,
    /// `llama-3.2-1b`, eight sequences.
    Llama1bB8,
    /// `llama-3.2-1b`, 32 sequences.
    Llama1bB32,
    /// `llama-3.2-1b`, 64 sequences.
    Llama1bB64,
    /// `llama-3.1-8b`, one sequence.
    Llama8bB1,
    /// `llama-3.1-8b`, eight sequences.
    Llama8bB8,
    /// `llama-3.1-8b`, 32 sequences.
    Llama8bB32,
    /// `llama-3.1-8b`, 64 sequences.
    Llama8bB64,
}

/// The static sizes of a stamp that the host needs (the rest come from the config).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// The preset whose shapes the megakernel has.
    pub preset: &'static str,
    /// Sequence slots per step: the largest batch the stamp runs (a decoder of a smaller
    /// batch leaves the other slots idle).
    pub batch: usize,
    /// Attention pieces per KV head.
    pub chunks: usize,
    /// Vocabulary tiles of the LM head, of both sizes (`VT + WT`: the argmax's partials).
    pub vocab_tiles: usize,
    /// The splits of `k` of the output and down projections (`KP`; 1 where they run
    /// whole): the partial sums buffer holds `2 · layers · KP` row blocks.
    pub proj_splits: usize,
}

impl Stamp {
    /// Every stamp.
    pub const ALL: [Stamp; 12] = [
        Stamp::TinyB1,
        Stamp::TinyB2,
        Stamp::TinyB3,
        Stamp::TinyB4,
        Stamp::Llama1bB1,
        Stamp::Llama1bB8,
        Stamp::Llama1bB32,
        Stamp::Llama1bB64,
        Stamp::Llama8bB1,
        Stamp::Llama8bB8,
        Stamp::Llama8bB32,
        Stamp::Llama8bB64,
    ];

    /// Its static sizes, read from its megakernel's static dims (the literals of its line
    /// in [`crate::decode`]), so that they are written once.
    pub fn geometry(self) -> Geometry {
        use Stamp::*;
        let preset = match self {
            TinyB1 | TinyB2 | TinyB3 | TinyB4 => "tiny",
            Llama1bB1 | Llama1bB8 | Llama1bB32 | Llama1bB64 => "llama-3.2-1b",
            Llama8bB1 | Llama8bB8 | Llama8bB32 | Llama8bB64 => "llama-3.1-8b",
        };
        let kernel = self.kernel();
        let dim = |name: &str| match kernel.graph.dims.iter().find(|d| d.name == name).map(|d| &d.kind) {
            Some(et_core::graph::DimKind::Static(v)) => *v as usize,
            // every stamp is a `decode_step!` line, whose dims are literals
            _ => unreachable!("decode_step! gives `{}` a static dim {name}", kernel.name()),
        };
        Geometry {
            preset,
            batch: dim("B"),
            chunks: dim("S"),
            vocab_tiles: dim("VT") + dim("WT"),
            proj_splits: dim("KP"),
        }
    }

    /// Its megakernel: the graph's static dims are the stamp's tile sizes (read by the
    /// kernel-per-operator baseline of `et-benches`, which launches the same tiles).
    pub fn kernel(self) -> &'static et_core::Kernel {
        match self {
            Stamp::TinyB1 => &decode_tiny_b1::KERNEL,
            Stamp::TinyB2 => &decode_tiny_b2::KERNEL,
            Stamp::TinyB3 => &decode_tiny_b3::KERNEL,
            Stamp::TinyB4 => &decode_tiny_b4::KERNEL,
            Stamp::Llama1bB1 => &decode_1b_b1::KERNEL,
            Stamp::Llama1bB8 => &decode_1b_b8::KERNEL,
            Stamp::Llama1bB32 => &decode_1b_b32::KERNEL,
            Stamp::Llama1bB64 => &decode_1b_b64::KERNEL,
            Stamp::Llama8bB1 => &decode_8b_b1::KERNEL,
            Stamp::Llama8bB8 => &decode_8b_b8::KERNEL,
            Stamp::Llama8bB32 => &decode_8b_b32::KERNEL,
            Stamp::Llama8bB64 => &decode_8b_b64::KERNEL,
        }
    }

    /// The stamp for `config`'s shapes and `batch` sequences: the one stamped for exactly
    /// `batch`, else the one with the fewest slots above it (the batch's weights are
    /// streamed once a step whatever the slots; the idle ones cost their share of the
    /// activations and a one-position attention). The config must equal the stamp's preset
    /// in everything the megakernel has as a constant (all but the number of layers, a
    /// run-time dim, and the tied head, an argument).
    pub fn find(config: &LlamaConfig, batch: usize) -> Result<Stamp> {
        let constant = |c: &LlamaConfig| LlamaConfig {
            num_layers: 0,
            tie_word_embeddings: false,
            max_position_embeddings: 0,
            ..c.clone()
        };
        let shaped: Vec<Stamp> = Stamp::ALL
            .into_iter()
            .filter(|s| LlamaConfig::preset(s.geometry().preset).is_ok_and(|p| constant(&p) == constant(config)))
            .collect();
        // `ALL` lists each preset's stamps by batch, smallest first
        if let Some(s) = shaped.iter().find(|s| batch >= 1 && s.geometry().batch >= batch) {
            return Ok(*s);
        }
        let batches: Vec<String> = shaped.iter().map(|s| s.geometry().batch.to_string()).collect();
        Err(Error::Input(match shaped.last() {
            None => "no decode megakernel is stamped for this model's shapes (the presets tiny, llama-3.2-1b and llama-3.1-8b are)"
                .into(),
            Some(largest) => format!(
                "no decode megakernel for a batch of {batch} with this model: it takes 1 to {} sequences (stamped batches: {}; a batch between them runs on the next larger)",
                largest.geometry().batch,
                batches.join(", ")
            ),
        }))
    }
}

/// Errors unless a KV cache of `positions` positions per sequence is one `config`'s
/// model can use: at least one position, and positions the megakernel's `i32` position
/// tensor and the model's context (`max_position_embeddings`) can address.
pub fn check_positions(config: &LlamaConfig, positions: usize) -> Result<()> {
    let context = config.max_position_embeddings.min(i32::MAX as usize);
    if positions == 0 || positions > context {
        return Err(Error::Input(format!(
            "a KV cache of {positions} positions: the model takes 1 to {context} positions per sequence"
        )));
    }
    Ok(())
}

/// A tensor of `t`'s data under another shape of the same size.
fn reshaped<T: et_core::Element>(t: &Tensor<T>, shape: &[usize]) -> Tensor<T> {
    Tensor::from_vec(shape, t.as_slice().to_vec()).expect("the same number of elements")
}

/// The fused QKV weight `[L · NKV · (G + 2) · D, hidden]`: per layer and KV head, the
/// rows of its `G` query heads, then its key, then its value (so that one sequence's
/// slice for a KV head is one contiguous piece of the GEMV's output row).
pub fn pack_qkv(w: &LlamaWeights) -> Tensor<bf16> {
    let c = &w.config;
    let (l, h, d, g, nkv) = (c.num_layers, c.hidden_size, c.head_dim, c.group_size(), c.num_kv_heads);
    let rows = nkv * (g + 2) * d;
    let mut out = Vec::with_capacity(l * rows * h);
    fn row(t: &Tensor<bf16>, layer: usize, r: usize) -> &[bf16] {
        let (per, h) = (t.shape()[1], t.shape()[2]);
        &t.as_slice()[(layer * per + r) * h..(layer * per + r + 1) * h]
    }
    for layer in 0..l {
        for k in 0..nkv {
            for r in k * g * d..(k + 1) * g * d {
                out.extend_from_slice(row(&w.wq, layer, r));
            }
            for t in [&w.wk, &w.wv] {
                for r in k * d..(k + 1) * d {
                    out.extend_from_slice(row(t, layer, r));
                }
            }
        }
    }
    Tensor::from_vec(&[l * rows, h], out).expect("packed rows")
}

/// The shapes of a step's tensors: what [`Decoder::on_stamp`] allocates, and what
/// [`Decoder::prepare`] prepares the launch for before any of it exists. Every buffer has
/// a row per slot of the stamp, idle ones included.
struct StepShapes {
    /// Token ids and positions, in and out: `[B]`.
    slots: Vec<usize>,
    /// The embedding table, and the LM head (tied or not): `[V, HD]`.
    embed: Vec<usize>,
    /// The two norms' weights of every layer: `[L · HD]`.
    norms: Vec<usize>,
    wqkv: Vec<usize>,
    wo: Vec<usize>,
    /// The gate and the up projection: `[L · I, HD]` each.
    gate_up: Vec<usize>,
    down: Vec<usize>,
    final_norm: Vec<usize>,
    /// The keys and the values: `[L · B · NKV, positions, D]` each.
    cache: Vec<usize>,
    /// The residual stream after each layer and the embedding: `[(L + 1) · B, HD]`.
    residual: Vec<usize>,
    /// A row per layer and slot of the hidden size (the mid-layer residual, the two norms'
    /// outputs): `[L · B, HD]`.
    rows: Vec<usize>,
    qkv: Vec<usize>,
    rope: Vec<usize>,
    /// The attention pieces' outputs and their (max, sum) pairs.
    pieces: Vec<usize>,
    piece_stats: Vec<usize>,
    /// The split-K projections' partial sums.
    partials: Vec<usize>,
    attn: Vec<usize>,
    act: Vec<usize>,
    xf: Vec<usize>,
    logits: Vec<usize>,
    /// The LM head tiles' best values (and, same shape, their indices).
    best: Vec<usize>,
}

impl StepShapes {
    fn new(c: &LlamaConfig, geo: &Geometry, positions: usize) -> Self {
        let (l, h, i, d, nkv, g) =
            (c.num_layers, c.hidden_size, c.intermediate_size, c.head_dim, c.num_kv_heads, c.group_size());
        let (b, s, v) = (geo.batch, geo.chunks, c.vocab_size);
        StepShapes {
            slots: vec![b],
            embed: vec![v, h],
            norms: vec![l * h],
            wqkv: vec![l * nkv * (g + 2) * d, h],
            wo: vec![l * h, nkv * g * d],
            gate_up: vec![l * i, h],
            down: vec![l * h, i],
            final_norm: vec![h],
            cache: vec![l * b * nkv, positions, d],
            residual: vec![(l + 1) * b, h],
            rows: vec![l * b, h],
            qkv: vec![l * b, nkv * (g + 2) * d],
            rope: vec![b, d],
            pieces: vec![l * b * nkv * s * g, d],
            piece_stats: vec![l * b * nkv * s * g, 2],
            partials: vec![2 * l * geo.proj_splits, b, h],
            attn: vec![l * b, nkv * g * d],
            act: vec![l * b, i],
            xf: vec![b, h],
            logits: vec![b, v],
            best: vec![b, geo.vocab_tiles],
        }
    }

    /// The shapes in the megakernel's signature order, which is the order of
    /// [`Decoder::enqueue`]'s launch.
    fn in_signature_order(&self) -> Vec<Vec<usize>> {
        let s = self;
        [
            &s.slots,
            &s.slots,
            &s.embed,
            &s.embed,
            &s.norms,
            &s.wqkv,
            &s.wo,
            &s.norms,
            &s.gate_up,
            &s.gate_up,
            &s.down,
            &s.final_norm,
            &s.cache,
            &s.cache,
            &s.residual,
            &s.rows,
            &s.rows,
            &s.rows,
            &s.qkv,
            &s.rope,
            &s.pieces,
            &s.piece_stats,
            &s.partials,
            &s.attn,
            &s.act,
            &s.xf,
            &s.logits,
            &s.best,
            &s.best,
            &s.slots,
            &s.slots,
        ]
        .into_iter()
        .cloned()
        .collect()
    }
}

/// What one [`Decoder::step`] returns.
#[derive(Clone, Debug)]
pub struct Step {
    /// The argmax of each sequence's logits (the megakernel's split argmax).
    pub next: Vec<u32>,
    /// The logits `[B, vocab]` (f32), when asked for.
    pub logits: Option<Tensor<f32>>,
    /// The backend's report of the launch.
    pub report: LaunchReport,
    /// Host wall time of the step up to the launch's return: the writes of the ids and
    /// positions into the decoder's buffers (none where the device holds them) and the
    /// launch; the downloads of the results (the next tokens, the logits) are not
    /// included. For a step of [`Decoder::feed_back`] (reported by
    /// [`Decoder::generate`]), the host time of enqueueing it.
    pub wall: Duration,
}

/// The decode megakernel of one model and batch size on a backend, with its KV cache.
pub struct Decoder<'b, Bk: Backend> {
    backend: &'b Bk,
    stamp: Stamp,
    /// The sequences of a step: the stamp's first slots (the others run idle, reading
    /// token 0 at position 0 in the steps the host writes).
    batch: usize,
    config: LlamaConfig,
    /// Positions the KV cache holds per sequence.
    positions: usize,
    /// Launch options of every step (schedule, chaos, trace, ..).
    pub options: LaunchOptions,
    table: Bk::Tensor<bf16>,
    lm_head: Option<Bk::Tensor<bf16>>,
    attn_norm: Bk::Tensor<bf16>,
    wqkv: Bk::Tensor<bf16>,
    wo: Bk::Tensor<bf16>,
    mlp_norm: Bk::Tensor<bf16>,
    w_gate: Bk::Tensor<bf16>,
    w_up: Bk::Tensor<bf16>,
    w_down: Bk::Tensor<bf16>,
    final_norm: Bk::Tensor<bf16>,
    kc: Bk::Tensor<bf16>,
    vc: Bk::Tensor<bf16>,
    hs: Bk::Tensor<bf16>,
    hm: Bk::Tensor<bf16>,
    xn: Bk::Tensor<bf16>,
    xm: Bk::Tensor<bf16>,
    qkv: Bk::Tensor<bf16>,
    rope: Bk::Tensor<f32>,
    po: Bk::Tensor<f32>,
    pml: Bk::Tensor<f32>,
    /// The split-K projections' partial sums (unused by the stamps whose projections run
    /// whole, where it is `2 · layers` rows of one sequence block).
    pk: Bk::Tensor<f32>,
    attn: Bk::Tensor<bf16>,
    act: Bk::Tensor<bf16>,
    xf: Bk::Tensor<bf16>,
    logits: Bk::Tensor<f32>,
    best: Bk::Tensor<f32>,
    index: Bk::Tensor<i32>,
    /// The step inputs, two pairs of token ids and positions, one per slot: a step reads
    /// pair `cur` and writes its argmax and its positions + 1 into the other, which the next
    /// step reads (so a step of generation uploads nothing).
    inputs: [StepInputs<Bk>; 2],
    /// The pair the next step reads.
    cur: usize,
    /// Host staging of the ids or positions as `i32` (kept to allocate nothing per step).
    staging: Vec<i32>,
    /// The token log of [`Decoder::feed_back`] (a row of `B` ids per step) and its rows,
    /// kept for the next call while it is large enough.
    log: Option<(Bk::Tensor<i32>, usize)>,
}

/// One pair of a decoder's step inputs on the device, and what the host knows they hold.
struct StepInputs<Bk: Backend> {
    ids: Bk::Tensor<i32>,
    pos: Bk::Tensor<i32>,
    /// The ids in `ids`, where known (written, or downloaded as a step's result).
    known_ids: Option<Vec<i32>>,
    /// The positions in `pos`, where known.
    known_pos: Option<Vec<i32>>,
}

impl<Bk: Backend> StepInputs<Bk> {
    fn new(backend: &Bk, batch: usize) -> Result<Self> {
        let zeros = || backend.upload(&Tensor::<i32>::zeros(&[batch])).map_err(Error::from);
        Ok(StepInputs { ids: zeros()?, pos: zeros()?, known_ids: None, known_pos: None })
    }
}

/// Writes `values` into `t` unless the host knows that `t` holds them already.
fn write_if_changed<Bk: Backend>(
    backend: &Bk,
    t: &mut Bk::Tensor<i32>,
    known: &mut Option<Vec<i32>>,
    values: &[i32],
) -> Result<()> {
    if known.as_deref() != Some(values) {
        backend.write(t, values)?;
        *known = Some(values.to_vec());
    }
    Ok(())
}

/// Where [`Decoder::new_beside_compile`]'s time went.
#[derive(Clone, Copy, Debug)]
pub struct Warmup {
    /// Whether NVRTC ran (false when a cache held the module, and on the CPU backend).
    pub compiled: bool,
    /// Compiling (or reading) and loading the megakernel, on its own thread.
    pub compile: Duration,
    /// Then, on that thread, resolving the first step's task graph and uploading its
    /// tables ([`Decoder::prepare`]; on the CPU backend, which keeps no such state, only
    /// the shapes' check).
    pub graph: Duration,
    /// Making or reading the weights.
    pub weights: Duration,
    /// Packing and uploading them ([`Decoder::new`]).
    pub upload: Duration,
    /// How long the decoder then waited for the compile.
    pub waited: Duration,
}

impl<'b, Bk: Backend> Decoder<'b, Bk> {
    /// Compiles and loads the megakernel that [`Decoder::new`] picks for `config`'s shapes,
    /// `batch` sequences and `options`' schedule, so that the first step does not. It needs
    /// no weights: run it on another thread while they load, as
    /// [`Decoder::new_beside_compile`] does. Returns whether NVRTC ran (false when a cache
    /// held the module or it was loaded already, and on the CPU backend).
    pub fn precompile(backend: &Bk, config: &LlamaConfig, batch: usize, options: &LaunchOptions) -> Result<bool> {
        let kernel = Stamp::find(config, batch)?.kernel();
        Ok(backend.precompile(kernel, options.schedule.unwrap_or(kernel.graph.schedule))?)
    }

    /// Does ahead of time what the first step of [`Decoder::new`]'s decoder (of `config`'s
    /// shapes, `batch` sequences, a cache of `positions`, `options`) does before its kernel
    /// runs ([`Backend::prepare`]): compiles and loads the megakernel, then resolves its
    /// task graph, schedules it and uploads its tables. It needs no weights and no
    /// tensors. Errors as `new` would for the batch and the positions, and as the first
    /// step would for the options. The first step finds what this made if its decoder has
    /// these options and the backend has not evicted it (it keeps 64 task graphs).
    pub fn prepare(
        backend: &Bk,
        config: &LlamaConfig,
        batch: usize,
        positions: usize,
        options: &LaunchOptions,
    ) -> Result<Prepared> {
        let stamp = Stamp::find(config, batch)?;
        check_positions(config, positions)?;
        let shapes = StepShapes::new(config, &stamp.geometry(), positions);
        Ok(backend.prepare(stamp.kernel(), &shapes.in_signature_order(), options)?)
    }

    /// [`Decoder::new`] on the weights that `weights` makes or reads (of `config`'s
    /// shapes), with the first step prepared on another thread meanwhile (the megakernel
    /// compiled, [`Decoder::precompile`], then its task graph, [`Decoder::prepare`]): they
    /// need only the shapes, so their seconds pass while the weights load and upload. A
    /// bad batch or cache length fails before `weights` runs; an error of the weights or
    /// the upload comes first, then the compile's or the prepare's.
    pub fn new_beside_compile(
        backend: &'b Bk,
        config: &LlamaConfig,
        batch: usize,
        positions: usize,
        options: LaunchOptions,
        weights: impl FnOnce() -> Result<LlamaWeights>,
    ) -> Result<(Self, Warmup)> {
        Stamp::find(config, batch)?;
        check_positions(config, positions)?;
        std::thread::scope(|s| {
            let ahead = s.spawn(|| -> Result<(bool, Duration, Duration)> {
                let start = Instant::now();
                let compiled = Self::precompile(backend, config, batch, &options)?;
                let compile = start.elapsed();
                Self::prepare(backend, config, batch, positions, &options)?;
                Ok((compiled, compile, start.elapsed() - compile))
            });
            let start = Instant::now();
            let weights = weights();
            let made = start.elapsed();
            let decoder = weights.and_then(|w| Self::new(backend, &w, batch, positions, options.clone()));
            let uploaded = start.elapsed();
            let ahead = ahead.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            let waited = start.elapsed() - uploaded;
            let (decoder, (compiled, compile, graph)) = (decoder?, ahead?);
            Ok((decoder, Warmup { compiled, compile, graph, weights: made, upload: uploaded - made, waited }))
        })
    }

    /// Uploads `weights` for steps of `batch` sequences with a KV cache of `positions`
    /// positions per sequence (the longest context a step may attend over; the megakernel
    /// reads the cache's length at run time, so any length takes the same compilation),
    /// on the megakernel [`Stamp::find`] picks. The cache starts zeroed and the
    /// activations poisoned (NaN), so a read of something not written this step shows.
    pub fn new(
        backend: &'b Bk,
        weights: &LlamaWeights,
        batch: usize,
        positions: usize,
        options: LaunchOptions,
    ) -> Result<Self> {
        let stamp = Stamp::find(&weights.config, batch)?;
        Self::on_stamp(backend, weights, stamp, batch, positions, options)
    }

    /// [`Decoder::new`] on a megakernel of the caller's choice: `stamp` must have the
    /// weights' shapes and at least `batch` slots. A stamp of a larger batch, compiled
    /// once, serves every smaller one; its spare slots run idle.
    pub fn on_stamp(
        backend: &'b Bk,
        weights: &LlamaWeights,
        stamp: Stamp,
        batch: usize,
        positions: usize,
        options: LaunchOptions,
    ) -> Result<Self> {
        let c = &weights.config;
        let geo = stamp.geometry();
        // the stamp of exactly its slot count is itself where the shapes match
        if Stamp::find(c, geo.batch).ok() != Some(stamp) {
            return Err(Error::Input(format!("the megakernel {stamp:?} does not have this model's shapes")));
        }
        if batch == 0 || batch > geo.batch {
            return Err(Error::Input(format!(
                "a batch of {batch} on the megakernel {stamp:?}, which runs 1 to {} sequences",
                geo.batch
            )));
        }
        check_positions(c, positions)?;
        let sh = StepShapes::new(c, &geo, positions);
        // the tensors uploaded as they are (the others are reshaped, which checks them)
        let head = weights.lm_head.as_ref().unwrap_or(&weights.embed);
        for (what, t, want) in [
            ("embedding", &weights.embed, &sh.embed),
            ("LM head", head, &sh.embed),
            ("final norm", &weights.final_norm, &sh.final_norm),
        ] {
            if t.shape() != want.as_slice() {
                return Err(Error::Input(format!(
                    "the {what} has shape {:?}, where the config gives {want:?}",
                    t.shape()
                )));
            }
        }
        let up = |t: &Tensor<bf16>| backend.upload(t).map_err(Error::from);
        let zeros = |shape: &[usize]| backend.upload(&Tensor::<bf16>::zeros(shape)).map_err(Error::from);
        let nan = |shape: &[usize]| backend.upload(&Tensor::<bf16>::poisoned(shape)).map_err(Error::from);
        let nan32 = |shape: &[usize]| backend.upload(&Tensor::<f32>::poisoned(shape)).map_err(Error::from);
        let index = vec![-7; sh.best.iter().product()];
        Ok(Decoder {
            backend,
            stamp,
            batch,
            config: c.clone(),
            positions,
            options,
            table: up(&weights.embed)?,
            lm_head: weights.lm_head.as_ref().map(up).transpose()?,
            attn_norm: up(&reshaped(&weights.attn_norm, &sh.norms))?,
            wqkv: up(&pack_qkv(weights))?,
            wo: up(&reshaped(&weights.wo, &sh.wo))?,
            mlp_norm: up(&reshaped(&weights.mlp_norm, &sh.norms))?,
            w_gate: up(&reshaped(&weights.w_gate, &sh.gate_up))?,
            w_up: up(&reshaped(&weights.w_up, &sh.gate_up))?,
            w_down: up(&reshaped(&weights.w_down, &sh.down))?,
            final_norm: up(&weights.final_norm)?,
            kc: zeros(&sh.cache)?,
            vc: zeros(&sh.cache)?,
            hs: nan(&sh.residual)?,
            hm: nan(&sh.rows)?,
            xn: nan(&sh.rows)?,
            xm: nan(&sh.rows)?,
            qkv: nan(&sh.qkv)?,
            rope: nan32(&sh.rope)?,
            po: nan32(&sh.pieces)?,
            pml: nan32(&sh.piece_stats)?,
            pk: nan32(&sh.partials)?,
            attn: nan(&sh.attn)?,
            act: nan(&sh.act)?,
            xf: nan(&sh.xf)?,
            logits: nan32(&sh.logits)?,
            best: nan32(&sh.best)?,
            index: backend.upload(&Tensor::<i32>::from_vec(&sh.best, index)?)?,
            inputs: [StepInputs::new(backend, geo.batch)?, StepInputs::new(backend, geo.batch)?],
            cur: 0,
            staging: Vec::with_capacity(geo.batch),
            log: None,
        })
    }

    /// The megakernel this decoder launches.
    pub fn stamp(&self) -> Stamp {
        self.stamp
    }

    /// The sequences of a step (at most the stamp's slots).
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Positions the KV cache holds per sequence.
    pub fn max_positions(&self) -> usize {
        self.positions
    }

    /// One decode step: sequence `b` reads `tokens[b]` at `positions[b]`, appends its key
    /// and value there and attends over positions `0..=positions[b]`, which earlier steps
    /// must have filled. Returns the next tokens, and the logits when `want_logits`.
    pub fn step(&mut self, tokens: &[u32], positions: &[usize], want_logits: bool) -> Result<Step> {
        self.check_inputs(tokens, positions)?;
        self.run(tokens, positions, want_logits)
    }

    /// The errors of [`Decoder::step`]'s inputs.
    fn check_inputs(&self, tokens: &[u32], positions: &[usize]) -> Result<()> {
        let batch = self.batch;
        if tokens.len() != batch || positions.len() != batch {
            return Err(Error::Input(format!(
                "{} tokens and {} positions given for a batch of {batch}",
                tokens.len(),
                positions.len()
            )));
        }
        if let Some(t) = tokens.iter().find(|&&t| t as usize >= self.config.vocab_size) {
            return Err(Error::Input(format!("token id {t} is outside the vocabulary of {}", self.config.vocab_size)));
        }
        if let Some(p) = positions.iter().find(|&&p| p >= self.max_positions()) {
            return Err(Error::Input(format!(
                "position {p} is past the KV cache's {} positions",
                self.max_positions()
            )));
        }
        Ok(())
    }

    /// One step over checked inputs: writes the ids and positions into their buffers,
    /// launches, and downloads the next tokens (and the logits when `want_logits`).
    fn run(&mut self, tokens: &[u32], positions: &[usize], want_logits: bool) -> Result<Step> {
        let t0 = Instant::now();
        let report = self.enqueue(Some(tokens), positions, None)?;
        let wall = t0.elapsed();
        let be = self.backend;
        let output = &mut self.inputs[self.cur];
        let next = be.download(&output.ids)?;
        output.known_ids = Some(next.as_slice().to_vec());
        let next = tokens_of(&next.as_slice()[..self.batch])?;
        let logits = if want_logits { Some(self.logits()?) } else { None };
        Ok(Step { next, logits, report, wall })
    }

    /// The last step's logits of the decoder's sequences, `[batch, vocab]`.
    fn logits(&self) -> Result<Tensor<f32>> {
        let all = self.backend.download(&self.logits)?;
        if self.batch == self.stamp.geometry().batch {
            return Ok(all);
        }
        let v = self.config.vocab_size;
        Ok(Tensor::from_vec(&[self.batch, v], all.as_slice()[..self.batch * v].to_vec())?)
    }

    /// Launches one step: writes `tokens` (or, with `None`, leaves the ids that the last
    /// step wrote) and `positions` into the input pair unless it holds them already (the
    /// slots past those given read token 0 at position 0), and
    /// launches with the decoder's options, deferred when `defer` says so; the pair the
    /// step writes becomes the next step's input.
    fn enqueue(
        &mut self,
        tokens: Option<&[u32]>,
        positions: &[usize],
        defer: Option<Deferral>,
    ) -> Result<LaunchReport> {
        let be = self.backend;
        let deferred;
        let options = match defer {
            Some(_) => {
                deferred = LaunchOptions { defer, ..self.options.clone() };
                &deferred
            }
            None => &self.options,
        };
        let slots = self.stamp.geometry().batch;
        let [a, b] = &mut self.inputs;
        let (input, output) = if self.cur == 0 { (a, b) } else { (b, a) };
        // what generation feeds back (the last step's tokens at the next positions) is on
        // the device already: nothing is uploaded then
        if let Some(tokens) = tokens {
            self.staging.clear();
            self.staging.extend(tokens.iter().map(|&t| t as i32).chain(std::iter::repeat(0)).take(slots));
            write_if_changed(be, &mut input.ids, &mut input.known_ids, &self.staging)?;
        }
        self.staging.clear();
        self.staging.extend(positions.iter().map(|&p| p as i32).chain(std::iter::repeat(0)).take(slots));
        write_if_changed(be, &mut input.pos, &mut input.known_pos, &self.staging)?;
        (output.known_ids, output.known_pos) = (None, None);
        let (ids, pos) = (&input.ids, &input.pos);
        let head = self.lm_head.as_ref().unwrap_or(&self.table);
        macro_rules! launch {
            ($m:ident) => {
                $m::launch_with(
                    be,
                    options,
                    ids,
                    pos,
                    &self.table,
                    head,
                    &self.attn_norm,
                    &self.wqkv,
                    &self.wo,
                    &self.mlp_norm,
                    &self.w_gate,
                    &self.w_up,
                    &self.w_down,
                    &self.final_norm,
                    &mut self.kc,
                    &mut self.vc,
                    &mut self.hs,
                    &mut self.hm,
                    &mut self.xn,
                    &mut self.xm,
                    &mut self.qkv,
                    &mut self.rope,
                    &mut self.po,
                    &mut self.pml,
                    &mut self.pk,
                    &mut self.attn,
                    &mut self.act,
                    &mut self.xf,
                    &mut self.logits,
                    &mut self.best,
                    &mut self.index,
                    &mut output.ids,
                    &mut output.pos,
                )
            };
        }
        let report = match self.stamp {
            Stamp::TinyB1 => launch!(decode_tiny_b1),
            Stamp::TinyB2 => launch!(decode_tiny_b2),
            Stamp::TinyB3 => launch!(decode_tiny_b3),
            Stamp::TinyB4 => launch!(decode_tiny_b4),
            Stamp::Llama1bB1 => launch!(decode_1b_b1),
            Stamp::Llama1bB8 => launch!(decode_1b_b8),
            Stamp::Llama1bB32 => launch!(decode_1b_b32),
            Stamp::Llama1bB64 => launch!(decode_1b_b64),
            Stamp::Llama8bB1 => launch!(decode_8b_b1),
            Stamp::Llama8bB8 => launch!(decode_8b_b8),
            Stamp::Llama8bB32 => launch!(decode_8b_b32),
            Stamp::Llama8bB64 => launch!(decode_8b_b64),
        }?;
        // the megakernel writes the positions + 1 (in stream order, so a later write that
        // compares against them is ordered after it)
        output.known_pos = Some(self.staging.iter().map(|p| p + 1).collect());
        self.cur = 1 - self.cur;
        Ok(report)
    }

    /// Runs `steps` more greedy steps in which every sequence reads the token the step
    /// before wrote, at the positions after that step's: the steps are launched back to
    /// back without waiting (deferred, [`et_core::Deferral`]), so the host prepares each
    /// while the one before runs, and the tokens go into a log on the device that is
    /// downloaded once at the end. The logits of the last step are downloaded when
    /// `want_logits`. At least one step must have run before (its tokens are the input).
    pub fn feed_back(&mut self, steps: usize, want_logits: bool) -> Result<FedBack> {
        let Some(start) = self.inputs[self.cur].known_pos.clone() else {
            return Err(Error::Input("feed_back continues the last step: run a step first".into()));
        };
        let start: Vec<usize> = start.iter().map(|&p| p as usize).collect();
        if let Some(p) = start.iter().find(|&&p| p.checked_add(steps).is_none_or(|end| end > self.max_positions())) {
            return Err(Error::Input(format!(
                "{steps} steps from position {p} go past the KV cache's {} positions",
                self.max_positions()
            )));
        }
        if steps == 0 {
            return Ok(FedBack {
                tokens: Vec::new(),
                logits: None,
                reports: Vec::new(),
                enqueue: Vec::new(),
                wall: Duration::ZERO,
            });
        }
        let fed = self.feed_back_from(start, steps, want_logits);
        if fed.is_err() {
            // a step that failed, and those dropped behind it, did not write what the host
            // expects of the input pairs: the next step writes its inputs
            for pair in &mut self.inputs {
                (pair.known_ids, pair.known_pos) = (None, None);
            }
        }
        fed
    }

    /// [`Decoder::feed_back`] over checked arguments: `steps > 0` from positions `start`.
    fn feed_back_from(&mut self, start: Vec<usize>, steps: usize, want_logits: bool) -> Result<FedBack> {
        let (be, slots) = (self.backend, self.stamp.geometry().batch);
        // the log's rows are the steps: reused while it is large enough
        if self.log.as_ref().is_none_or(|(_, rows)| *rows < steps) {
            let log = be.upload(&Tensor::<i32>::from_vec(&[steps, slots], vec![-1; steps * slots])?)?;
            self.log = Some((log, steps));
        }
        // reports of deferred launches made before this call are not this call's
        be.settle()?;
        // SAFETY: every tensor the deferred launches take is a field of `self`, which this
        // call borrows mutably until `settle` below has waited for them (`Settling` waits
        // on the error paths and on unwinding too), and which meanwhile only this
        // backend's own operations touch.
        let defer = Some(unsafe { Deferral::new() });
        let settling = Settling(be);
        let t0 = Instant::now();
        let (mut enqueue, mut reports) = (Vec::with_capacity(steps), Vec::with_capacity(steps));
        let mut settled = Vec::with_capacity(steps);
        let mut positions = start;
        for k in 0..steps {
            if k > 0 && k % STEPS_PER_SETTLE == 0 {
                // a backend keeps a bounded number of reports between settles
                settled.extend(be.settle()?);
            }
            let t = Instant::now();
            reports.push(self.enqueue(None, &positions, defer)?);
            let (log, _) = self.log.as_mut().expect("allocated above");
            be.copy_into(&self.inputs[self.cur].ids, log, k * slots)?;
            enqueue.push(t.elapsed());
            positions.iter_mut().for_each(|p| *p += 1);
        }
        settled.extend(be.settle()?);
        let wall = t0.elapsed();
        drop(settling);
        // a backend that runs each launch to completion (the CPU) reported it then
        let mut settled = settled.into_iter();
        for report in reports.iter_mut().filter(|r| !r.completed) {
            *report = settled
                .next()
                .ok_or_else(|| Error::Backend(et_core::Error::Device("a deferred step was not reported".into())))?;
        }
        let log = be.download(&self.log.as_ref().expect("allocated above").0)?;
        let tokens = log.as_slice()[..steps * slots]
            .chunks(slots)
            .map(|row| tokens_of(&row[..self.batch]))
            .collect::<Result<Vec<Vec<u32>>>>()?;
        let logits = if want_logits { Some(self.logits()?) } else { None };
        Ok(FedBack { tokens, logits, reports, enqueue, wall })
    }

    /// Greedy generation of `n_tokens` per prompt, as [`crate::Reference::generate`]: the
    /// prompts are fed one token per step, all sequences at the same position, a
    /// sequence whose prompt is consumed feeding back its last output. The steps in which
    /// every sequence reads the token the step before gave it run through
    /// [`Decoder::feed_back`], back to back; the others (a prompt token to read, or a
    /// sequence done generating that repeats its last token) wait, the host writing their
    /// inputs. Calls `each` after every step, the fed-back ones once they have all
    /// finished (their `wall` is the host time of enqueueing them); the logits of the
    /// last step are returned.
    pub fn generate(
        &mut self,
        prompts: &[Vec<u32>],
        n_tokens: usize,
        mut each: impl FnMut(usize, &Step),
    ) -> Result<Generation> {
        if prompts.len() != self.batch {
            return Err(Error::Input(format!("{} prompts for a decoder of batch {}", prompts.len(), self.batch)));
        }
        if prompts.iter().any(Vec::is_empty) || n_tokens == 0 {
            return Err(Error::Input("generation needs non-empty prompts and at least one token".into()));
        }
        let longest = prompts.iter().map(Vec::len).max().expect("non-empty");
        let steps = longest + n_tokens - 1;
        if steps > self.max_positions() {
            return Err(Error::Input(format!(
                "{steps} positions exceed the KV cache's {} positions",
                self.max_positions()
            )));
        }
        let mut tokens: Vec<Vec<u32>> = vec![Vec::with_capacity(n_tokens); prompts.len()];
        let keep = |pos: usize, next: &[u32], tokens: &mut Vec<Vec<u32>>| {
            for ((p, out), &next) in prompts.iter().zip(tokens.iter_mut()).zip(next) {
                if pos + 1 >= p.len() && out.len() < n_tokens {
                    out.push(next);
                }
            }
        };
        // step `pos` reads the token step `pos - 1` wrote for sequence `b` exactly when `b`
        // kept that token: `len_b <= pos <= len_b + n_tokens - 1`. Those steps of every
        // sequence at once run back to back; the others write their inputs from the host.
        let shortest = prompts.iter().map(Vec::len).min().expect("non-empty");
        let fed = longest..(shortest + n_tokens).min(steps).max(longest);
        let mut logits = None;
        let mut pos = 0;
        while pos < steps {
            if pos == fed.start && !fed.is_empty() {
                let run = self.feed_back(fed.len(), fed.end == steps)?;
                for (next, (report, wall)) in run.tokens.into_iter().zip(run.reports.into_iter().zip(run.enqueue)) {
                    keep(pos, &next, &mut tokens);
                    each(pos, &Step { next, logits: None, report, wall });
                    pos += 1;
                }
                logits = run.logits;
                continue;
            }
            let input: Vec<u32> = prompts
                .iter()
                .zip(&tokens)
                .map(|(p, out)| p.get(pos).or(out.last()).copied().expect("a prompt or an output token"))
                .collect();
            let positions = vec![pos; prompts.len()];
            self.check_inputs(&input, &positions)?;
            let step = self.run(&input, &positions, pos + 1 == steps)?;
            keep(pos, &step.next, &mut tokens);
            each(pos, &step);
            logits = step.logits;
            pos += 1;
        }
        let logits = logits.expect("the last step downloads its logits");
        Ok(Generation { tokens, logits })
    }
}

/// Fed-back steps between two settles in [`Decoder::feed_back`]: a backend keeps the
/// reports of at least 4096 deferred launches ([`Backend::settle`]); each settle costs one
/// gap of the host's launch path between two kernels.
const STEPS_PER_SETTLE: usize = 1024;

/// What [`Decoder::feed_back`] returns.
#[derive(Clone, Debug)]
pub struct FedBack {
    /// The argmax of each step, `[steps][B]`.
    pub tokens: Vec<Vec<u32>>,
    /// The logits `[B, vocab]` of the last step, when asked for.
    pub logits: Option<Tensor<f32>>,
    /// Each step's launch report, completed (its kernel time).
    pub reports: Vec<LaunchReport>,
    /// The host time of enqueueing each step (its inputs, its launch, its tokens' copy).
    pub enqueue: Vec<Duration>,
    /// Host wall time from the first launch until the last step had finished.
    pub wall: Duration,
}

/// Waits for the backend's deferred launches when dropped: on every path out of
/// [`Decoder::feed_back`], so that no kernel runs past the borrows it was launched with.
struct Settling<'b, Bk: Backend>(&'b Bk);

impl<Bk: Backend> Drop for Settling<'_, Bk> {
    fn drop(&mut self) {
        let _ = self.0.settle();
    }
}

/// A step's argmax as token ids (a negative one means the logits were NaN).
fn tokens_of(ids: &[i32]) -> Result<Vec<u32>> {
    ids.iter()
        .map(|&t| {
            u32::try_from(t).map_err(|_| Error::Input(format!("the megakernel's argmax returned {t} (NaN logits?)")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use et_core::graph::Resolved;
    use et_core::graph::resolve::LaunchTensors;
    use et_core::graph::schedule::StaticSchedule;

    struct Shapes(Vec<Vec<i64>>);

    impl LaunchTensors for Shapes {
        fn shape(&self, t: u16) -> Vec<i64> {
            self.0[t as usize].clone()
        }
        fn read_integers(&self, _: u16) -> Vec<i64> {
            unreachable!("the decode step reads no routing data")
        }
    }

    /// The static schedule of 132 SMs (an H100's or H200's) gives no SM more LM-head rows
    /// than the fewest possible, `⌈V / 16 / 132⌉` row groups of 16: the head's two tile
    /// sizes exist for this (501 tiles of 256 gave 105 SMs four tiles, 1024 rows).
    #[test]
    fn the_lm_head_fills_whole_waves_of_132_sms() {
        for (preset, batch) in [("llama-3.2-1b", 8), ("llama-3.1-8b", 1)] {
            let config = LlamaConfig::preset(preset).unwrap();
            let stamp = Stamp::find(&config, batch).unwrap();
            let kernel = stamp.kernel();
            let shapes = StepShapes::new(&config, &stamp.geometry(), 64).in_signature_order();
            let shapes = Shapes(shapes.iter().map(|s| s.iter().map(|&e| e as i64).collect()).collect());
            let resolved = Resolved::new(&kernel.graph, &shapes).unwrap();
            let schedule = StaticSchedule::build(&resolved, 132, et_core::Placement::default());
            let rows_of = |group: &str| {
                let dim = |name: &str| kernel.graph.dims.iter().find(|d| d.name == name).map(|d| d.kind.clone());
                match (group, dim("NV"), dim("NW")) {
                    ("head", Some(et_core::graph::DimKind::Static(n)), _) => n as usize,
                    ("head_rest", _, Some(et_core::graph::DimKind::Static(n))) => n as usize,
                    _ => 0,
                }
            };
            let most = schedule
                .queues
                .iter()
                .map(|q| q.iter().map(|&t| rows_of(&kernel.graph.groups[resolved.group_of(t)].name)).sum::<usize>())
                .max()
                .unwrap();
            let fewest = config.vocab_size.div_ceil(16).div_ceil(132) * 16;
            assert_eq!(most, fewest, "{preset} B = {batch}: an SM's most LM-head rows");
        }
    }
}
