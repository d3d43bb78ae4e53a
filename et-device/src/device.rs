//! The CUDA backend.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use cudarc::driver::{CudaContext, CudaEvent, CudaFunction, CudaModule, CudaStream, DriverError, PinnedHostSlice};
use cudarc::nvrtc::Ptx;
use et_core::graph::resolve::{LaunchTensors, data_tensors, resolve_dims};
use et_core::graph::schedule::Placement;
use et_core::graph::{Resolved, ScheduleKind};
use et_core::trace::{TaskSpan, write_chrome_trace};
use et_core::{
    Backend, BlockedWait, DType, Element, Error, Kernel, KernelEntry, LaunchOptions, LaunchReport, RawTensor, Tensor,
};

use crate::availability::driver_available;
use crate::compile::{Compiler, ImageKind};
use crate::memory::{CudaTensor, as_bytes, from_bytes};
use crate::runtime::GraphState;

fn device_err(what: &str) -> impl Fn(DriverError) -> Error + '_ {
    move |e| Error::Device(format!("{what}: {e:?}"))
}

struct Loaded {
    _module: Arc<CudaModule>,
    function: CudaFunction,
    max_grid: usize,
}

#[derive(Clone, PartialEq, Eq)]
struct StateKey {
    /// The kernel's graph, compared in full (a run-time kernel may reuse an address).
    graph: et_core::graph::GraphSpec,
    dims: Vec<i64>,
    data: u64,
    schedule: ScheduleKind,
    grid: usize,
    placement: Placement,
}

impl std::hash::Hash for StateKey {
    // `GraphSpec` has no `Hash`: its name stands for it; equality compares it in full
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (&self.graph.name, &self.dims, self.data, self.schedule, self.grid, self.placement).hash(h);
    }
}

/// What launches share, behind one lock (launches on a `Cuda` are serialised).
struct Launcher {
    states: HashMap<StateKey, GraphState>,
    /// Host-mapped word the watchdog sets, read after the launch without a copy.
    status: PinnedHostSlice<u32>,
    status_dev: u64,
    start: CudaEvent,
    end: CudaEvent,
}

/// One CUDA GPU as an et backend.
pub struct Cuda {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    name: String,
    sms: usize,
    compiler: Compiler,
    /// Loaded modules by full CUDA source (a run-time kernel may reuse an address).
    modules: Mutex<HashMap<String, Arc<Loaded>>>,
    launcher: Mutex<Launcher>,
}

impl std::fmt::Debug for Cuda {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cuda({}, {} SMs, {:?})", self.name, self.sms, self.compiler)
    }
}

impl Cuda {
    /// Opens GPU `ordinal`. Errors, never panics, when there is no driver, no GPU, or no
    /// NVRTC, saying which.
    pub fn new(ordinal: usize) -> Result<Self, Error> {
        driver_available()?;
        let count = CudaContext::device_count()
            .map_err(|e| Error::Unavailable(format!("the CUDA driver could not be initialised: {e:?}")))?;
        if count == 0 {
            return Err(Error::Unavailable("the CUDA driver is installed but sees no GPU".into()));
        }
        if ordinal >= count as usize {
            return Err(Error::Unavailable(format!("GPU {ordinal} asked for, but only {count} present")));
        }
        let ctx = CudaContext::new(ordinal).map_err(device_err("creating the CUDA context"))?;
        // One stream, synchronised at the end of every launch: the safe layer's per-buffer
        // event tracking would only add work.
        // SAFETY: no other stream uses this context's buffers.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.default_stream();
        let name = ctx.name().map_err(device_err("reading the device name"))?;
        let sms = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(device_err("reading the SM count"))? as usize;
        let (major, minor) = ctx.compute_capability().map_err(device_err("reading the compute capability"))?;
        // sm_90a: the Hopper-specific target (wgmma, setmaxnreg) for the H100/H200
        let arch = if (major, minor) == (9, 0) { "sm_90a".to_string() } else { format!("sm_{major}{minor}") };
        let compiler = Compiler::new(&arch)?;
        // SAFETY: two words, written before every launch.
        let mut status =
            unsafe { ctx.alloc_pinned_with_flags::<u32>(2, cudarc::driver::sys::CU_MEMHOSTALLOC_DEVICEMAP) }
                .map_err(device_err("allocating the status word"))?;
        let mut status_dev = 0u64;
        let host = status.as_mut_ptr().map_err(device_err("mapping the status word"))?;
        // SAFETY: `host` is a live DEVICEMAP allocation of this context.
        unsafe { cudarc::driver::sys::cuMemHostGetDevicePointer_v2(&mut status_dev, host as *mut c_void, 0) }
            .result()
            .map_err(device_err("mapping the status word"))?;
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let launcher = Launcher {
            states: HashMap::new(),
            status,
            status_dev,
            start: ctx.new_event(timing).map_err(device_err("creating an event"))?,
            end: ctx.new_event(timing).map_err(device_err("creating an event"))?,
        };
        Ok(Cuda {
            ctx,
            stream,
            name,
            sms,
            compiler,
            modules: Mutex::new(HashMap::new()),
            launcher: Mutex::new(launcher),
        })
    }

    /// Uses `dir` as the compile cache of this backend (see [`Compiler::with_cache_dir`]).
    pub fn with_cache_dir(mut self, dir: Option<std::path::PathBuf>) -> Self {
        self.compiler = self.compiler.with_cache_dir(dir);
        self
    }

    /// The cudarc context, for work outside et (baselines, interop).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream every launch and copy of this backend runs on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The GPU's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of SMs (the default grid: one persistent CTA per SM).
    pub fn sm_count(&self) -> usize {
        self.sms
    }

    /// The compiler (architecture, NVRTC version, cache, compilation count).
    pub fn compiler(&self) -> &Compiler {
        &self.compiler
    }

    /// A device tensor of `shape` filled with [`Element::poison`].
    pub fn poisoned<T: Element>(&self, shape: &[usize]) -> Result<CudaTensor<T>, Error> {
        self.upload(&Tensor::<T>::poisoned(shape))
    }

    /// Compiles (or loads from a cache) and loads `kernel`; returns it and whether NVRTC ran.
    pub fn load(&self, kernel: &Kernel) -> Result<bool, Error> {
        self.function(kernel).map(|(_, compiled)| compiled)
    }

    fn function(&self, kernel: &Kernel) -> Result<(Arc<Loaded>, bool), Error> {
        let key = kernel.cuda_source();
        if let Some(l) = self.modules.lock().unwrap().get(&key) {
            return Ok((l.clone(), false));
        }
        let (out, compiled) = self.compiler.compile_kernel(kernel)?;
        let image = match out.kind {
            ImageKind::Cubin => Ptx::from_binary(out.image.clone()),
            ImageKind::Ptx => Ptx::from_src(String::from_utf8_lossy(&out.image).trim_end_matches('\0').to_string()),
        };
        let module = self.ctx.load_module(image).map_err(device_err("loading the compiled kernel"))?;
        let function = module.load_function("et_main").map_err(device_err("finding et_main"))?;
        let per_sm = function
            .occupancy_max_active_blocks_per_multiprocessor(kernel.cuda.block_threads, 0, None)
            .map_err(device_err("querying occupancy"))? as usize;
        if per_sm == 0 {
            return Err(Error::Device(format!(
                "megakernel `{}` cannot fit one CTA of {} threads on an SM",
                kernel.name(),
                kernel.cuda.block_threads
            )));
        }
        let loaded = Arc::new(Loaded { _module: module, function, max_grid: per_sm * self.sms });
        self.modules.lock().unwrap().insert(key, loaded.clone());
        Ok((loaded, compiled))
    }
}

/// The launch's device tensors, as resolution sees them.
struct DeviceTensors<'a>(&'a [RawTensor]);

impl LaunchTensors for DeviceTensors<'_> {
    fn shape(&self, t: u16) -> Vec<i64> {
        self.0[t as usize].shape.clone()
    }

    fn read_integers(&self, t: u16) -> Vec<i64> {
        let raw = &self.0[t as usize];
        let mut buf = vec![0u32; raw.len()];
        // SAFETY: `raw` is a live device tensor of `len` 4-byte integers (the generated
        // launch borrows it for the whole call).
        if !buf.is_empty() {
            unsafe { cudarc::driver::result::memcpy_dtoh_sync(&mut buf, raw.addr) }.expect("reading an index tensor");
        }
        match raw.dtype {
            DType::I32 => buf.iter().map(|&v| v as i32 as i64).collect(),
            _ => buf.iter().map(|&v| v as i64).collect(),
        }
    }
}

fn data_hash(r: &Resolved<'_>) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for v in r.index_data.iter().flatten().flatten() {
        h = (h ^ *v as u64).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The first waited element left incomplete in this launch, and a task waiting on it.
fn never_ready(r: &Resolved<'_>, counters: &[u32], epoch: u32) -> Option<BlockedWait> {
    (0..r.n_elements as usize).find_map(|el| {
        let target = r.target[el];
        let consumer = *r.consumers.row(el).first()?;
        let value = counters[el].wrapping_sub(epoch.wrapping_sub(1).wrapping_mul(target));
        (target > 0 && value < target).then(|| BlockedWait {
            task: r.describe_task(consumer),
            element: r.describe_element(el as u32),
            value,
            expected: target,
        })
    })
}

impl Backend for Cuda {
    type Tensor<T: Element> = CudaTensor<T>;

    fn describe(&self) -> String {
        format!("cuda: {} ({} SMs, {})", self.name, self.sms, self.compiler.arch())
    }

    fn upload<T: Element>(&self, host: &Tensor<T>) -> Result<CudaTensor<T>, Error> {
        let bytes = as_bytes(host.as_slice());
        let slice = if bytes.is_empty() { self.stream.alloc_zeros::<u8>(1) } else { self.stream.clone_htod(bytes) }
            .map_err(device_err("uploading a tensor"))?;
        Ok(CudaTensor::new(slice, host.shape()))
    }

    fn download<T: Element>(&self, t: &CudaTensor<T>) -> Result<Tensor<T>, Error> {
        let mut bytes = vec![0u8; t.num_bytes()];
        if !bytes.is_empty() {
            self.stream.synchronize().map_err(device_err("downloading a tensor"))?;
            // SAFETY: `t` (a tensor or a view) addresses `num_bytes` bytes inside its live
            // allocation; the stream was synchronised, so earlier launches are done.
            unsafe { cudarc::driver::result::memcpy_dtoh_sync(&mut bytes, t.addr) }
                .map_err(device_err("downloading a tensor"))?;
        }
        Tensor::from_vec(&t.shape, from_bytes(&bytes))
    }

    unsafe fn launch(
        &self,
        entry: &KernelEntry<'_>,
        args: &[RawTensor],
        options: &LaunchOptions,
    ) -> Result<LaunchReport, Error> {
        let kernel = entry.kernel;
        options.validate()?;
        if options.chaos.is_some() {
            return Err(Error::Unavailable("chaos mode is a CPU-backend feature".into()));
        }
        kernel.check_dtypes(args)?;
        self.ctx.bind_to_thread().map_err(device_err("binding the CUDA context"))?;
        let (loaded, compiled) = self.function(kernel)?;
        let schedule = options.schedule.unwrap_or(kernel.graph.schedule);
        let grid = options.workers.unwrap_or(self.sms).clamp(1, loaded.max_grid);

        // Dims are solved (and every shape checked) on each launch; the task graph is
        // resolved again only for new shapes, or always when it depends on tensor data.
        let shapes: Vec<Vec<i64>> = args.iter().map(|a| a.shape.clone()).collect();
        let dims = resolve_dims(&kernel.graph, &shapes)?;
        let fresh = if data_tensors(&kernel.graph).is_empty() {
            None
        } else {
            Some(Resolved::new(&kernel.graph, &DeviceTensors(args))?)
        };
        let key = StateKey {
            graph: kernel.graph.clone(),
            dims: dims.clone(),
            data: fresh.as_ref().map_or(0, data_hash),
            schedule,
            grid,
            placement: options.placement,
        };
        let mut guard = self.launcher.lock().unwrap();
        let launcher = &mut *guard;
        if !launcher.states.contains_key(&key) {
            if launcher.states.len() >= 64 {
                launcher.states.clear();
            }
            let state =
                GraphState::new(&self.stream, &kernel.graph, &DeviceTensors(args), schedule, grid, options.placement)?;
            launcher.states.insert(key.clone(), state);
        }
        let state = launcher.states.get_mut(&key).expect("inserted above");
        state.epoch += 1;
        if schedule == ScheduleKind::Dynamic {
            self.stream.memset_zeros(&mut state.dyn_state).map_err(device_err("resetting the ready queue"))?;
        }
        launcher.status.as_mut_slice().map_err(device_err("clearing the status word"))?[0] = 0;
        let watchdog_ns = options.watchdog.as_nanos().min(u64::MAX as u128) as u64;
        let mut rt = state.runtime(watchdog_ns, options.trace.is_some(), launcher.status_dev);
        let mut words = state.kernel_args(args)?;
        let mut params: [*mut c_void; 2] = [&mut rt as *mut _ as *mut c_void, words.as_mut_ptr() as *mut c_void];
        launcher.start.record(&self.stream).map_err(device_err("recording an event"))?;
        // SAFETY: the parameters match `et_main(const et::Runtime, const EtArgs)`: `rt` is
        // `#[repr(C)] Runtime` and `words` is the EtArgs block; every address in them is
        // a live allocation of this context; the grid fits co-resident (cooperative).
        unsafe {
            cudarc::driver::result::launch_cooperative_kernel(
                loaded.function.cu_function(),
                (grid as u32, 1, 1),
                (kernel.cuda.block_threads, 1, 1),
                0,
                self.stream.cu_stream(),
                &mut params,
            )
        }
        .map_err(device_err("launching the megakernel"))?;
        launcher.end.record(&self.stream).map_err(device_err("recording an event"))?;
        self.stream.synchronize().map_err(device_err("running the megakernel"))?;
        let elapsed_ms = launcher.start.elapsed_ms(&launcher.end).map_err(device_err("reading the timer"))?;
        let elapsed = Duration::from_secs_f64(elapsed_ms as f64 / 1e3);

        let aborted = launcher.status.as_slice().map_err(device_err("reading the status word"))?[0] != 0;
        if aborted {
            return Err(self.watchdog_error(kernel, state, options));
        }
        if let Some(path) = &options.trace {
            self.write_trace(kernel, state, path)?;
        }
        Ok(LaunchReport {
            backend: self.describe(),
            schedule,
            tasks: state.resolved().n_tasks,
            workers: grid,
            elapsed,
            compiled,
        })
    }
}

impl Cuda {
    /// Reads the watchdog's record, resets the state for the next launch, and says which
    /// wait was stuck.
    fn watchdog_error(&self, kernel: &Kernel, state: &mut GraphState, options: &LaunchOptions) -> Error {
        let read = || -> Result<BlockedWait, Error> {
            let rec = self.stream.clone_dtoh(&state.error_record).map_err(device_err("reading the watchdog record"))?;
            let word = |k: usize| rec[2 * k] as u64 | (rec[2 * k + 1] as u64) << 32;
            let (task, element, value, expected) = (word(0) as u32, word(1) as u32, word(2) as u32, word(3) as u32);
            let r = state.resolved();
            Ok(if element == u32::MAX {
                // a CTA waited on the ready queue: name a task that never became ready
                let counters = self.stream.clone_dtoh(&state.counters).map_err(device_err("reading the counters"))?;
                never_ready(r, &counters, state.epoch).unwrap_or(BlockedWait {
                    task: "(none found)".into(),
                    element: "the dynamic ready queue".into(),
                    value: 0,
                    expected: 1,
                })
            } else {
                BlockedWait { task: r.describe_task(task), element: r.describe_element(element), value, expected }
            })
        };
        let wait = match read() {
            Ok(w) => w,
            Err(e) => return e,
        };
        // the counters are part-way through a launch: start a fresh epoch
        let reset =
            self.stream.memset_zeros(&mut state.counters).and_then(|_| self.stream.memset_zeros(&mut state.abort_flag));
        if let Err(e) = reset {
            return Error::Device(format!("resetting after the watchdog: {e:?}"));
        }
        state.epoch = 0;
        Error::Watchdog { kernel: kernel.name().to_string(), wait, limit: options.watchdog }
    }

    /// Writes the trace of the last launch as Chrome trace JSON.
    fn write_trace(&self, kernel: &Kernel, state: &GraphState, path: &std::path::Path) -> Result<(), Error> {
        let words = self.stream.clone_dtoh(&state.trace).map_err(device_err("reading the trace"))?;
        let r = state.resolved();
        let n = r.n_tasks as usize;
        let t0 = (0..n).map(|t| words[3 * t + 1]).min().unwrap_or(0);
        let spans: Vec<TaskSpan> = (0..n)
            .map(|t| TaskSpan {
                task: r.describe_task(t as u32),
                track: (words[3 * t] >> 32) as u32,
                start_us: (words[3 * t + 1] - t0) as f64 / 1e3,
                end_us: (words[3 * t + 2].max(words[3 * t + 1]) - t0) as f64 / 1e3,
            })
            .collect();
        write_chrome_trace(path, kernel.name(), "SM", &spans)?;
        Ok(())
    }
}
