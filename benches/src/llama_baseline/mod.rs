//! The kernel-per-operator baseline of the Llama decode megakernel: the SAME tile ops on
//! the SAME tiles (`llama::decode`), each stage launched as its own plain CUDA kernel from
//! Rust through cudarc (one launch per stage per layer, one CTA per tile), on one stream or
//! replayed from a CUDA graph of that stream. What differs from the megakernel is only
//! what the comparison is about: a kernel boundary (launch, ramp-up, tail, a full barrier)
//! between every two stages instead of tile-level events in one persistent launch.
//!
//! [`Baseline`] owns its device copies of the weights (the layouts `llama::decoder`
//! uploads: the fused QKV weight from [`llama::decoder::pack_qkv`], the stacked tensors as
//! they are), the KV cache and the activations. Tokens and positions are device tensors
//! written before each step, so one captured graph serves every step.

pub mod shape;
pub mod source;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{
    CudaEvent, CudaFunction, CudaGraph, CudaModule, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg,
};
use et_core::{Backend, BackendTensor, Element, Tensor, bf16};
use et_device::{Cuda, CudaTensor};
use llama::{LlamaWeights, Stamp};

use shape::Shape;
use source::{Buf, Param, Scalar, Stage};

/// An error of the baseline, as text (driver errors included).
pub type Error = String;

fn drv(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| format!("{what}: {e:?}")
}

/// How a step is issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every kernel launched from the host, in order, on the baseline's stream.
    Stream,
    /// The same launches replayed from one CUDA graph captured once.
    Graph,
}

/// What one step returns.
#[derive(Clone, Debug)]
pub struct StepResult {
    /// The argmax of each sequence's logits.
    pub next: Vec<u32>,
    /// The logits `[B, vocab]`, when asked for.
    pub logits: Option<Tensor<f32>>,
    /// GPU time from the first launch to the last kernel's end (CUDA events).
    pub kernel: Duration,
    /// Host wall time: writing the tokens and positions, issuing the launches, waiting.
    pub wall: Duration,
}

/// One launch of the step: a stage kernel, its grid and its argument values.
struct Launch {
    function: usize,
    grid: u32,
    /// Dynamic shared memory: the op's arena and its alignment slack.
    arena: u32,
    args: Vec<Arg>,
}

#[derive(Clone, Copy)]
enum Arg {
    Addr(u64),
    I32(i32),
    F32(f32),
}

/// The baseline for one stamp on a GPU.
pub struct Baseline<'g> {
    gpu: &'g Cuda,
    stamp: Stamp,
    shape: Shape,
    vocab: usize,
    stream: Arc<CudaStream>,
    _module: Arc<CudaModule>,
    functions: Vec<CudaFunction>,
    launches: Vec<Launch>,
    /// Each function's stage kernel name (for [`Baseline::stage_profile`]).
    names: Vec<String>,
    threads: u32,
    graph: Option<CudaGraph>,
    start: CudaEvent,
    end: CudaEvent,
    /// Tokens and positions (`[B]` i32 each), written before every step.
    ids: CudaSlice<i32>,
    pos: CudaSlice<i32>,
    /// Weights, cache and activations (device tensors of the backend; only their addresses
    /// enter the launches).
    tensors: Vec<(Buf, Stored)>,
    /// Whether NVRTC ran for the module (false: a cache served it).
    pub compiled: bool,
}

/// A device tensor of the baseline.
enum Stored {
    Bf16(CudaTensor<bf16>),
    F32(CudaTensor<f32>),
    I32(CudaTensor<i32>),
}

impl Stored {
    fn addr(&self) -> u64 {
        match self {
            Stored::Bf16(t) => t.raw().addr,
            Stored::F32(t) => t.raw().addr,
            Stored::I32(t) => t.raw().addr,
        }
    }
}

impl<'g> Baseline<'g> {
    /// Uploads `weights` and compiles the stage kernels of the stamp for their shapes,
    /// `batch` and a KV cache of `positions` positions per sequence, with CTAs of
    /// `threads` (the stamp's own is `stamp.kernel().cuda.block_threads`; the ops take any
    /// multiple of 32 up to 1024). The cache starts zeroed, the activations poisoned
    /// (NaN), as the megakernel's `Decoder` does.
    pub fn new(
        gpu: &'g Cuda,
        weights: &LlamaWeights,
        batch: usize,
        positions: usize,
        threads: u32,
    ) -> Result<Self, Error> {
        if threads == 0 || !threads.is_multiple_of(32) || threads > 1024 {
            return Err(format!("the baseline's CTA size must be a multiple of 32 from 32 to 1024, not {threads}"));
        }
        let c = &weights.config;
        let stamp = Stamp::find(c, batch).map_err(|e| e.to_string())?;
        llama::decoder::check_positions(c, positions).map_err(|e| e.to_string())?;
        let shape = Shape::of(stamp, positions)?;
        shape.check(c)?;
        let stages = source::stages(&shape);
        source::check_stages(&stages)?;
        let src = source::cuda_source(&shape, &stages, threads);
        let name = format!("llama_baseline_{}", stamp.kernel().name());
        let (image, compiled) = gpu.compiler().compile_source(&name, &src).map_err(|e| e.to_string())?;
        let ctx = gpu.context();
        let module = ctx
            .load_module(cudarc::nvrtc::Ptx::from_binary(image.image.clone()))
            .map_err(drv("loading the baseline's module"))?;
        let functions = stages
            .iter()
            .map(|st| {
                let f =
                    module.load_function(&st.kernel).map_err(|e| format!("loading kernel `{}`: {e:?}", st.kernel))?;
                // an arena above the default 48 KB must be allowed per function first
                f.set_attribute(
                    cudarc::driver::sys::CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    st.launch_smem_bytes() as i32,
                )
                .map_err(|e| {
                    format!("allowing kernel `{}` {} bytes of shared memory: {e:?}", st.kernel, st.launch_smem_bytes())
                })?;
                Ok(f)
            })
            .collect::<Result<Vec<_>, String>>()?;
        // a stream of its own: the backend's is the legacy default stream, which cannot be
        // captured into a graph
        let stream = ctx.new_stream().map_err(drv("creating the baseline's stream"))?;
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let start = ctx.new_event(timing).map_err(drv("creating an event"))?;
        let end = ctx.new_event(timing).map_err(drv("creating an event"))?;

        let tensors = upload(gpu, weights, &shape)?;
        let ints = |v: i32| stream.clone_htod(&vec![v; batch]).map_err(drv("uploading the positions"));
        let (ids, pos) = (ints(0)?, ints(0)?);
        // the uploads ran on the backend's stream: finish them before this stream reads
        gpu.stream().synchronize().map_err(drv("waiting for the uploads"))?;

        let addr = |b: Buf| -> Result<u64, Error> {
            let slice = match b {
                Buf::Ids => &ids,
                Buf::Pos => &pos,
                _ => {
                    let t = tensors.iter().find(|(t, _)| *t == b).ok_or_else(|| format!("no tensor `{}`", b.name()))?;
                    return Ok(t.1.addr());
                }
            };
            Ok(slice.device_ptr(&stream).0)
        };
        let scalar = |s: Scalar| -> f32 {
            let rope = c.rope_scaling;
            match s {
                Scalar::Eps => c.rms_norm_eps,
                Scalar::Theta => c.rope_theta,
                // without scaling, factor 1 leaves every frequency as it is
                Scalar::Factor => rope.map_or(1.0, |r| r.factor),
                Scalar::Low => rope.map_or(1.0, |r| r.low_freq_factor),
                Scalar::High => rope.map_or(4.0, |r| r.high_freq_factor),
                Scalar::Original => rope.map_or(8192.0, |r| r.original_max_position_embeddings as f32),
                Scalar::Scale => (1.0 / (c.head_dim as f64).sqrt()) as f32,
            }
        };
        let layers = c.num_layers;
        let mut launches = Vec::new();
        let mut push = |f: usize, st: &Stage, layer: usize| -> Result<(), Error> {
            let args = st
                .params
                .iter()
                .map(|p| {
                    Ok(match *p {
                        Param::Layer => Arg::I32(layer as i32),
                        Param::Layers => Arg::I32(layers as i32),
                        Param::Buf(b) => Arg::Addr(addr(b)?),
                        Param::Scalar(s) => Arg::F32(scalar(s)),
                    })
                })
                .collect::<Result<Vec<_>, Error>>()?;
            launches.push(Launch { function: f, grid: st.grid as u32, arena: st.launch_smem_bytes() as u32, args });
            Ok(())
        };
        // the step's order: the stages before the layers, each layer's, the ones after
        let first_layered = stages.iter().position(|s| s.per_layer).unwrap_or(stages.len());
        for (f, st) in stages.iter().enumerate().take(first_layered) {
            push(f, st, 0)?;
        }
        for layer in 0..layers {
            for (f, st) in stages.iter().enumerate().filter(|(_, s)| s.per_layer) {
                push(f, st, layer)?;
            }
        }
        for (f, st) in stages.iter().enumerate().skip(first_layered).filter(|(_, s)| !s.per_layer) {
            push(f, st, 0)?;
        }
        let names = stages.iter().map(|st| st.kernel.clone()).collect();
        Ok(Baseline {
            gpu,
            stamp,
            shape,
            vocab: c.vocab_size,
            stream,
            _module: module,
            functions,
            launches,
            names,
            threads,
            graph: None,
            start,
            end,
            ids,
            pos,
            tensors,
            compiled,
        })
    }

    /// Launches every stage kernel with at least `bytes` of dynamic shared memory (the
    /// megakernel's launch size, say). Shared memory and L1 share an SM's 256 KB, so a
    /// stage then runs with the L1 that the megakernel's tasks have: a diagnostic of what
    /// the megakernel's one arena size costs each op; the results do not change.
    pub fn reserve_smem(&mut self, bytes: u32) -> Result<(), Error> {
        for launch in &mut self.launches {
            launch.arena = launch.arena.max(bytes);
        }
        for (k, f) in self.functions.iter().enumerate() {
            let most = self.launches.iter().filter(|l| l.function == k).map(|l| l.arena).max().unwrap_or(bytes);
            f.set_attribute(
                cudarc::driver::sys::CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                most as i32,
            )
            .map_err(|e| format!("allowing kernel `{}` {most} bytes of shared memory: {e:?}", self.names[k]))?;
        }
        // a captured graph holds the old launch sizes
        self.graph = None;
        Ok(())
    }

    /// The stamp whose tiles this baseline launches.
    pub fn stamp(&self) -> Stamp {
        self.stamp
    }

    /// Kernel launches per step.
    pub fn launches_per_step(&self) -> usize {
        self.launches.len()
    }

    /// Issues every launch of one step on the stream.
    fn issue(&self) -> Result<(), Error> {
        self.issue_marked(&[])
    }

    /// Issues every launch of one step on the stream, recording `marks[i]` before launch
    /// `i` and the last mark after the last launch (when `marks` has one per launch and one
    /// more).
    fn issue_marked(&self, marks: &[CudaEvent]) -> Result<(), Error> {
        for (i, launch) in self.launches.iter().enumerate() {
            if let Some(m) = marks.get(i) {
                m.record(&self.stream).map_err(drv("recording an event"))?;
            }
            let f = &self.functions[launch.function];
            let mut b = self.stream.launch_builder(f);
            for a in &launch.args {
                match a {
                    Arg::Addr(p) => b.arg(p),
                    Arg::I32(v) => b.arg(v),
                    Arg::F32(v) => b.arg(v),
                };
            }
            let cfg = LaunchConfig {
                grid_dim: (launch.grid, 1, 1),
                block_dim: (self.threads, 1, 1),
                shared_mem_bytes: launch.arena,
            };
            // SAFETY: the arguments follow the kernel's parameter list, built from the
            // same `Stage::params` as its CUDA signature (an `int`, a `float` or a `void*`
            // each); every address is a live allocation this baseline owns, sized as the
            // megakernel's tensors, and each CTA stays inside its tile, whose contract
            // was checked in `new`.
            unsafe { b.launch(cfg) }.map_err(drv("launching a baseline kernel"))?;
        }
        if let Some(m) = marks.get(self.launches.len()) {
            m.record(&self.stream).map_err(drv("recording an event"))?;
        }
        Ok(())
    }

    /// The GPU time of each stage kernel in one step at `positions` (launched from the
    /// stream with an event between launches, so a launch's time includes its ramp and
    /// tail but no launch gap): `(stage, launches, total us)` per stage kernel, summed over
    /// the layers, in launch order.
    pub fn stage_profile(&mut self, tokens: &[u32], positions: &[usize]) -> Result<Vec<(String, usize, f64)>, Error> {
        // one plain step first, which checks the inputs and writes them
        self.step(Mode::Stream, tokens, positions, false)?;
        let ctx = self.gpu.context();
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let marks = (0..=self.launches.len())
            .map(|_| ctx.new_event(timing).map_err(drv("creating an event")))
            .collect::<Result<Vec<_>, Error>>()?;
        self.issue_marked(&marks)?;
        self.stream.synchronize().map_err(drv("running the step"))?;
        let mut out: Vec<(String, usize, f64)> = Vec::new();
        for (i, launch) in self.launches.iter().enumerate() {
            let us = marks[i].elapsed_ms(&marks[i + 1]).map_err(drv("reading the events"))? as f64 * 1e3;
            let name = &self.names[launch.function];
            match out.iter_mut().find(|(n, _, _)| n == name) {
                Some((_, n, t)) => {
                    *n += 1;
                    *t += us;
                }
                None => out.push((name.clone(), 1, us)),
            }
        }
        Ok(out)
    }

    /// Captures one step's launches into a CUDA graph (once; later calls reuse it).
    fn graph(&mut self) -> Result<&CudaGraph, Error> {
        if self.graph.is_none() {
            self.stream
                .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
                .map_err(drv("beginning the graph capture"))?;
            let issued = self.issue();
            let captured =
                self.stream.end_capture(CUgraphInstantiate_flags(0)).map_err(drv("ending the graph capture"));
            issued?;
            let graph = captured?.ok_or("the graph capture recorded nothing")?;
            graph.upload().map_err(drv("uploading the graph"))?;
            self.graph = Some(graph);
        }
        Ok(self.graph.as_ref().expect("captured above"))
    }

    /// One decode step: sequence `b` reads `tokens[b]` at `positions[b]`, appends its key
    /// and value there and attends over positions `0..=positions[b]` (as
    /// `llama::Decoder::step`). Returns the next tokens, and the logits when `want_logits`.
    pub fn step(
        &mut self,
        mode: Mode,
        tokens: &[u32],
        positions: &[usize],
        want_logits: bool,
    ) -> Result<StepResult, Error> {
        let b = self.shape.b;
        if tokens.len() != b || positions.len() != b {
            return Err(format!("{} tokens and {} positions given for a batch of {b}", tokens.len(), positions.len()));
        }
        if let Some(t) = tokens.iter().find(|&&t| t as usize >= self.vocab) {
            return Err(format!("token id {t} is outside the vocabulary of {}", self.vocab));
        }
        if let Some(p) = positions.iter().find(|&&p| p >= self.shape.max_positions()) {
            return Err(format!("position {p} is past the KV cache's {} positions", self.shape.max_positions()));
        }
        if mode == Mode::Graph {
            self.graph()?;
        }
        let ids: Vec<i32> = tokens.iter().map(|&t| t as i32).collect();
        let pos: Vec<i32> = positions.iter().map(|&p| p as i32).collect();
        let t0 = Instant::now();
        let s = &self.stream;
        s.memcpy_htod(&ids, &mut self.ids).map_err(drv("writing the tokens"))?;
        s.memcpy_htod(&pos, &mut self.pos).map_err(drv("writing the positions"))?;
        self.start.record(s).map_err(drv("recording an event"))?;
        match mode {
            Mode::Stream => self.issue()?,
            Mode::Graph => self.graph.as_ref().expect("captured above").launch().map_err(drv("launching the graph"))?,
        }
        self.end.record(s).map_err(drv("recording an event"))?;
        s.synchronize().map_err(drv("running the step"))?;
        let wall = t0.elapsed();
        let ms = self.start.elapsed_ms(&self.end).map_err(drv("reading the events"))?;
        // the backend's downloads run on its own stream: this one is idle now
        let Stored::I32(next) = self.stored(Buf::Next)? else { return Err("`next` is not i32".into()) };
        let next = self.gpu.download(next).map_err(|e| e.to_string())?;
        let next = next
            .as_slice()
            .iter()
            .map(|&t| u32::try_from(t).map_err(|_| format!("the baseline's argmax returned {t} (NaN logits?)")))
            .collect::<Result<Vec<u32>, Error>>()?;
        let logits = match (want_logits, self.stored(Buf::Logits)?) {
            (false, _) => None,
            (true, Stored::F32(t)) => Some(self.gpu.download(t).map_err(|e| e.to_string())?),
            (true, _) => return Err("`logits` is not f32".into()),
        };
        Ok(StepResult { next, logits, kernel: Duration::from_secs_f64(ms as f64 / 1e3), wall })
    }

    fn stored(&self, b: Buf) -> Result<&Stored, Error> {
        self.tensors.iter().find(|(t, _)| *t == b).map(|(_, t)| t).ok_or_else(|| format!("no tensor `{}`", b.name()))
    }
}

/// The device tensors of `weights` in the megakernel's layouts, the cache and activations.
fn upload(gpu: &Cuda, w: &LlamaWeights, s: &Shape) -> Result<Vec<(Buf, Stored)>, Error> {
    let c = &w.config;
    let (l, h, i, b) = (c.num_layers, c.hidden_size, c.intermediate_size, s.b);
    let e = |e: et_core::Error| e.to_string();
    let up = |t: &Tensor<bf16>| gpu.upload(t).map(Stored::Bf16).map_err(e);
    fn poisoned<T: Element>(gpu: &Cuda, shape: &[usize]) -> Result<CudaTensor<T>, Error> {
        gpu.upload(&Tensor::<T>::poisoned(shape)).map_err(|e| e.to_string())
    }
    let cache = [l * b * s.nkv, s.max_positions(), s.d];
    let heads = s.nkv * s.g * s.d;
    let mut out = vec![
        (Buf::Table, up(&w.embed)?),
        (Buf::LmHead, up(w.head())?),
        (Buf::AttnNorm, up(&w.attn_norm)?),
        (Buf::Wqkv, up(&llama::decoder::pack_qkv(w))?),
        (Buf::Wo, up(&w.wo)?),
        (Buf::MlpNorm, up(&w.mlp_norm)?),
        (Buf::WGate, up(&w.w_gate)?),
        (Buf::WUp, up(&w.w_up)?),
        (Buf::WDown, up(&w.w_down)?),
        (Buf::FinalNorm, up(&w.final_norm)?),
        (Buf::Kc, up(&Tensor::zeros(&cache))?),
        (Buf::Vc, up(&Tensor::zeros(&cache))?),
    ];
    let bf = [
        (Buf::Hs, vec![(l + 1) * b, h]),
        (Buf::Hm, vec![l * b, h]),
        (Buf::Xn, vec![l * b, h]),
        (Buf::Xm, vec![l * b, h]),
        (Buf::Qkv, vec![l * b, s.qt * s.nq]),
        (Buf::Attn, vec![l * b, heads]),
        (Buf::Act, vec![l * b, i]),
        (Buf::Xf, vec![b, h]),
    ];
    for (buf, shape) in bf {
        out.push((buf, Stored::Bf16(poisoned(gpu, &shape)?)));
    }
    let f32s = [
        (Buf::Rope, vec![b, s.d]),
        (Buf::Po, vec![l * b * s.nkv * s.s * s.g, s.d]),
        (Buf::Pml, vec![l * b * s.nkv * s.s * s.g, 2]),
        (Buf::Pk, vec![2 * l * s.kp, b, h]),
        (Buf::Logits, vec![b, s.vt * s.nv]),
        (Buf::Best, vec![b, s.vt]),
    ];
    for (buf, shape) in f32s {
        out.push((buf, Stored::F32(poisoned(gpu, &shape)?)));
    }
    let minus = |n: usize| Tensor::<i32>::from_vec(&[n], vec![-7; n]).map_err(e);
    out.push((Buf::Index, Stored::I32(gpu.upload(&minus(b * s.vt)?).map_err(e)?)));
    out.push((Buf::Next, Stored::I32(gpu.upload(&minus(b)?).map_err(e)?)));
    Ok(out)
}
