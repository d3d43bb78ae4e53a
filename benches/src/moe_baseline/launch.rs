//! The launcher: [`MoeBaseline`] compiles the stage kernels of [`super::source`] with NVRTC,
//! uploads the layer's weights and poisoned scratch in the megakernel's capacity layout,
//! and issues one layer per [`MoeBaseline::run`] on its own stream, timed with CUDA events.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{
    CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg,
};
use et_core::{Backend, BackendTensor, Tensor, bf16};
use et_device::{Cuda, CudaTensor};
use moe::{MoeConfig, MoeWeights, Output};

use super::source::{self, Stage};

/// An error of the baseline, as text (driver errors included).
pub type Error = String;

fn drv(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| format!("{what}: {e:?}")
}

/// How the per-expert stages are issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// After the group kernel the host waits for the stream and reads the token counts,
    /// then launches gather, gate/up and down per expert with tokens, over its non-empty
    /// token tiles only (PyTorch's grouped-by-expert loop).
    HostSync,
    /// No host sync: one launch per stage over every expert's tiles at capacity; empty
    /// tiles exit at once on the device.
    Capacity,
}

/// What one layer returns.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// GPU time from before the router kernel to the end of the combine (CUDA events);
    /// in [`Mode::HostSync`] it includes the host's round trip for the counts.
    pub kernel: Duration,
    /// Host wall time: issuing the launches, the sync, waiting for the end.
    pub wall: Duration,
    /// Kernel launches issued.
    pub launches: usize,
}

/// A compiled kernel and how to pass its parameters.
struct Kernel {
    function: CudaFunction,
    /// Dynamic shared memory: the op's arena and its alignment slack.
    arena: u32,
    args: Vec<Arg>,
}

#[derive(Clone, Copy, Debug)]
enum Arg {
    /// `int e`: the expert of a per-expert launch.
    Expert,
    /// `void* name`: a buffer's address.
    Addr(u64),
}

/// bf16 as its bits: the element type of the baseline's own bf16 buffers.
type Bits = u16;
const NAN_BF16: Bits = 0x7fc0;

/// The device buffers the layer writes (the megakernel's scratch and output).
struct Scratch {
    x: CudaSlice<Bits>,
    logits: CudaSlice<f32>,
    topk: CudaSlice<i32>,
    topw: CudaSlice<f32>,
    counts: CudaSlice<i32>,
    tokens: CudaSlice<i32>,
    xe: CudaSlice<Bits>,
    he: CudaSlice<Bits>,
    ye: CudaSlice<Bits>,
    out: CudaSlice<Bits>,
}

/// The baseline for one layer shape and token count on a GPU.
pub struct MoeBaseline {
    config: MoeConfig,
    tokens: usize,
    stream: Arc<CudaStream>,
    _module: Arc<CudaModule>,
    kernels: Vec<(String, Kernel)>,
    threads: u32,
    start: CudaEvent,
    end: CudaEvent,
    /// The weights (only their addresses enter the launches).
    _weights: Vec<CudaTensor<bf16>>,
    scratch: Scratch,
    /// Whether NVRTC ran for the module (false: a cache served it).
    pub compiled: bool,
}

fn addr<T>(s: &CudaStream, b: &CudaSlice<T>) -> u64 {
    b.device_ptr(s).0
}

fn fill<T: DeviceRepr + Clone>(stream: &Arc<CudaStream>, n: usize, v: T) -> Result<CudaSlice<T>, Error> {
    stream.clone_htod(&vec![v; n]).map_err(drv("allocating the baseline's scratch"))
}

impl MoeBaseline {
    /// Compiles the stage kernels for `w`'s shapes at `t` tokens (any count from 1 to
    /// 1024: the baseline needs no stamp) and uploads the weights and poisoned scratch.
    pub fn new(gpu: &Cuda, w: &MoeWeights, t: usize) -> Result<Self, Error> {
        let cfg = w.config;
        cfg.validate()?;
        if !(1..=1024).contains(&t) {
            return Err(format!("{t} tokens: the MoE baseline runs 1 to 1024 tokens"));
        }
        // the megakernel's stamps run CTAs of the default size: the same tiles, the same threads
        let threads = et_core::DEFAULT_THREADS;
        let src = source::cuda_source(&cfg, t, threads)?;
        let name = format!("moe_baseline_h{}_e{}_k{}_i{}_t{t}", cfg.hidden, cfg.experts, cfg.top_k, cfg.inter);
        let (image, compiled) = gpu.compiler().compile_source(&name, &src).map_err(|e| e.to_string())?;
        let ctx = gpu.context();
        let module = ctx
            .load_module(cudarc::nvrtc::Ptx::from_binary(image.image.clone()))
            .map_err(drv("loading the MoE baseline's module"))?;
        // a stream of its own, as the Llama baseline: the backend's is the legacy default
        let stream = ctx.new_stream().map_err(drv("creating the baseline's stream"))?;
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let start = ctx.new_event(timing).map_err(drv("creating an event"))?;
        let end = ctx.new_event(timing).map_err(drv("creating an event"))?;

        let e = |e: et_core::Error| e.to_string();
        let weights: Vec<CudaTensor<bf16>> = [&w.router, &w.gate, &w.up, &w.down]
            .into_iter()
            .map(|t| gpu.upload(t).map_err(e))
            .collect::<Result<_, _>>()?;
        // the uploads ran on the backend's stream: finish them before this stream reads
        gpu.stream().synchronize().map_err(drv("waiting for the uploads"))?;
        let (h, ex, k, i, c) = (cfg.hidden, cfg.experts, cfg.top_k, cfg.inter, MoeConfig::capacity(t));
        let s = &stream;
        let scratch = Scratch {
            x: fill(s, t * h, NAN_BF16)?,
            logits: fill(s, t * ex, f32::NAN)?,
            topk: fill(s, t * k, -7)?,
            topw: fill(s, t * k, f32::NAN)?,
            counts: fill(s, ex, -7)?,
            tokens: fill(s, ex * c, -7)?,
            xe: fill(s, ex * c * h, NAN_BF16)?,
            he: fill(s, ex * c * i, NAN_BF16)?,
            ye: fill(s, ex * c * h, NAN_BF16)?,
            out: fill(s, t * h, NAN_BF16)?,
        };
        let sc = &scratch;
        let addrs: [(&str, u64); 14] = [
            ("router", weights[0].raw().addr),
            ("w_gate", weights[1].raw().addr),
            ("w_up", weights[2].raw().addr),
            ("w_down", weights[3].raw().addr),
            ("x", addr(s, &sc.x)),
            ("logits", addr(s, &sc.logits)),
            ("topk", addr(s, &sc.topk)),
            ("topw", addr(s, &sc.topw)),
            ("counts", addr(s, &sc.counts)),
            ("tokens", addr(s, &sc.tokens)),
            ("xe", addr(s, &sc.xe)),
            ("he", addr(s, &sc.he)),
            ("ye", addr(s, &sc.ye)),
            ("out", addr(s, &sc.out)),
        ];
        let mut kernels = Vec::new();
        for st in source::stages(&cfg, t) {
            let mut add = |name: &str, params: &str| -> Result<(), Error> {
                let function = module.load_function(name).map_err(|e| format!("loading kernel `{name}`: {e:?}"))?;
                // the arena and the slack the prelude takes off it (as a megakernel's launch)
                let smem = et_core::abi::launch_smem_bytes(st.arena_bytes());
                // more than the default 48 KB must be allowed per function first
                function
                    .set_attribute(
                        cudarc::driver::sys::CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        smem as i32,
                    )
                    .map_err(|e| format!("allowing kernel `{name}` {smem} bytes of shared memory: {e:?}"))?;
                let args = params_of(params, &addrs).map_err(|why| format!("kernel `{name}`: {why}"))?;
                kernels.push((name.to_string(), Kernel { function, arena: smem as u32, args }));
                Ok(())
            };
            add(st.kernel, st.params)?;
            if let (Some(name), Some(params)) = (st.capacity_kernel(), st.capacity_params()) {
                add(&name, &params)?;
            }
        }
        stream.synchronize().map_err(drv("poisoning the scratch"))?;
        Ok(MoeBaseline {
            config: cfg,
            tokens: t,
            stream,
            _module: module,
            kernels,
            threads,
            start,
            end,
            _weights: weights,
            scratch,
            compiled,
        })
    }

    /// Writes the input tokens `[T, H]` (on the baseline's stream, before the next run).
    pub fn set_input(&mut self, x: &Tensor<bf16>) -> Result<(), Error> {
        if x.shape() != [self.tokens, self.config.hidden] {
            return Err(format!("the tokens must be [{}, {}], not {:?}", self.tokens, self.config.hidden, x.shape()));
        }
        let bits: Vec<Bits> = x.as_slice().iter().map(|v| v.to_bits()).collect();
        self.stream.memcpy_htod(&bits, &mut self.scratch.x).map_err(drv("writing the tokens"))
    }

    /// Overwrites everything a layer writes with poison (NaN, -7), so that a later check
    /// sees only what the next run wrote.
    pub fn poison(&mut self) -> Result<(), Error> {
        let (s, sc) = (&self.stream, &mut self.scratch);
        for b in [&mut sc.xe, &mut sc.he, &mut sc.ye, &mut sc.out] {
            let n = b.len();
            s.memcpy_htod(&vec![NAN_BF16; n], b).map_err(drv("poisoning"))?;
        }
        for b in [&mut sc.logits, &mut sc.topw] {
            let n = b.len();
            s.memcpy_htod(&vec![f32::NAN; n], b).map_err(drv("poisoning"))?;
        }
        for b in [&mut sc.topk, &mut sc.counts, &mut sc.tokens] {
            let n = b.len();
            s.memcpy_htod(&vec![-7i32; n], b).map_err(drv("poisoning"))?;
        }
        s.synchronize().map_err(drv("poisoning"))
    }

    fn kernel(&self, name: &str) -> Result<&Kernel, Error> {
        self.kernels.iter().find(|(n, _)| n == name).map(|(_, k)| k).ok_or_else(|| format!("no kernel `{name}`"))
    }

    /// Launches kernel `name` over `grid` CTAs (`expert` for its `int e`).
    fn launch(&self, name: &str, grid: usize, expert: i32) -> Result<(), Error> {
        let k = self.kernel(name)?;
        let mut b = self.stream.launch_builder(&k.function);
        for a in &k.args {
            match a {
                Arg::Expert => b.arg(&expert),
                Arg::Addr(p) => b.arg(p),
            };
        }
        let cfg =
            LaunchConfig { grid_dim: (grid as u32, 1, 1), block_dim: (self.threads, 1, 1), shared_mem_bytes: k.arena };
        // SAFETY: the arguments follow the kernel's parameter list (parsed from the same
        // `Stage::params` as its CUDA signature: an `int e` or a `void*` each); every address
        // is a live allocation of this baseline sized as the megakernel's tensors; `grid`
        // never exceeds the stage's tiles (per expert: its capacity) and `expert` is below
        // `E`, and each CTA stays inside its tile, whose contract `cuda_source` checked.
        unsafe { b.launch(cfg) }.map_err(drv("launching a baseline kernel"))?;
        Ok(())
    }

    /// One layer on the current input.
    pub fn run(&mut self, mode: Mode) -> Result<RunResult, Error> {
        let (cfg, t) = (self.config, self.tokens);
        let (ex, r, mt) = (cfg.experts, MoeConfig::tile_rows(t), MoeConfig::token_tiles(t));
        let per = [("bl_gather", 1), ("bl_up", cfg.inter / cfg.up_rows()), ("bl_down", cfg.hidden / cfg.down_rows())];
        let t0 = Instant::now();
        self.start.record(&self.stream).map_err(drv("recording an event"))?;
        self.launch("bl_router", t * (cfg.experts / cfg.router_rows()), 0)?;
        self.launch("bl_topk", t, 0)?;
        self.launch("bl_group", ex, 0)?;
        let mut launches = 4;
        match mode {
            Mode::HostSync => {
                let mut counts = vec![0i32; ex];
                self.stream.memcpy_dtoh(&self.scratch.counts, &mut counts).map_err(drv("reading the counts"))?;
                self.stream.synchronize().map_err(drv("waiting for the counts"))?;
                for (e, &n) in counts.iter().enumerate() {
                    let n = usize::try_from(n)
                        .ok()
                        .filter(|&n| n <= MoeConfig::capacity(t))
                        .ok_or_else(|| format!("the group kernel wrote {n} tokens for expert {e}"))?;
                    let tiles = n.div_ceil(r);
                    if tiles == 0 {
                        continue;
                    }
                    for (name, ctas) in per {
                        self.launch(name, tiles * ctas, e as i32)?;
                        launches += 1;
                    }
                }
            }
            Mode::Capacity => {
                for (name, ctas) in per {
                    self.launch(&format!("{name}_cap"), ex * mt * ctas, 0)?;
                    launches += 1;
                }
            }
        }
        self.launch("bl_combine", t, 0)?;
        self.end.record(&self.stream).map_err(drv("recording an event"))?;
        self.stream.synchronize().map_err(drv("running the layer"))?;
        let wall = t0.elapsed();
        let ms = self.start.elapsed_ms(&self.end).map_err(drv("reading the events"))?;
        Ok(RunResult { kernel: Duration::from_secs_f64(ms as f64 / 1e3), wall, launches })
    }

    /// Downloads what the reference computes (after a run).
    pub fn output(&self) -> Result<Output, Error> {
        let (cfg, t, s, sc) = (self.config, self.tokens, &self.stream, &self.scratch);
        let (h, ex, k) = (cfg.hidden, cfg.experts, cfg.top_k);
        fn get<T: DeviceRepr + et_core::Element>(
            s: &Arc<CudaStream>,
            b: &CudaSlice<T>,
            shape: &[usize],
        ) -> Result<Tensor<T>, Error> {
            Tensor::from_vec(shape, s.clone_dtoh(b).map_err(drv("downloading"))?).map_err(|e| e.to_string())
        }
        let out: Vec<bf16> =
            s.clone_dtoh(&sc.out).map_err(drv("downloading"))?.into_iter().map(bf16::from_bits).collect();
        Ok(Output {
            logits: get(s, &sc.logits, &[t, ex])?,
            topk: get(s, &sc.topk, &[t, k])?,
            topw: get(s, &sc.topw, &[t, k])?,
            out: Tensor::from_vec(&[t, h], out).map_err(|e| e.to_string())?,
        })
    }

    /// The stages this baseline launches.
    pub fn stages(&self) -> Vec<Stage> {
        source::stages(&self.config, self.tokens)
    }
}

/// The arguments of a CUDA parameter list: `int e` is the expert, `void* name` the
/// address of buffer `name`.
fn params_of(params: &str, addrs: &[(&str, u64)]) -> Result<Vec<Arg>, Error> {
    params
        .split(',')
        .map(str::trim)
        .map(|p| match p.split_whitespace().collect::<Vec<_>>()[..] {
            ["int", "e"] => Ok(Arg::Expert),
            ["void*", name] => addrs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|&(_, a)| Arg::Addr(a))
                .ok_or_else(|| format!("no buffer `{name}`")),
            _ => Err(format!("unexpected parameter `{p}`")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stage_parameter_names_a_buffer_or_the_expert() {
        let names = [
            "router", "w_gate", "w_up", "w_down", "x", "logits", "topk", "topw", "counts", "tokens", "xe", "he", "ye",
            "out",
        ];
        let addrs: Vec<(&str, u64)> = names.iter().enumerate().map(|(i, &n)| (n, 1000 + i as u64)).collect();
        for st in source::stages(&MoeConfig::QWEN3_MOE, 16) {
            let args = params_of(st.params, &addrs).unwrap_or_else(|e| panic!("{}: {e}", st.kernel));
            assert_eq!(args.len(), st.params.split(',').count());
            assert_eq!(matches!(args[0], Arg::Expert), st.per_tile.is_some(), "{}", st.kernel);
            if let Some(cap) = st.capacity_params() {
                let args = params_of(&cap, &addrs).unwrap();
                assert!(matches!(args[0], Arg::Addr(1008)), "{}: counts first", st.kernel);
                assert!(!args.iter().any(|a| matches!(a, Arg::Expert)));
            }
        }
        assert!(params_of("void* nope", &addrs).unwrap_err().contains("no buffer `nope`"));
        assert!(params_of("float s", &addrs).unwrap_err().contains("unexpected parameter"));
    }
}
