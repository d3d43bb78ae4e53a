//! The CUDA backend: opening a GPU, tensors in and out, and the launch.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaContext, CudaStream, DriverError};
use et_core::graph::ScheduleKind;
use et_core::graph::resolve::LaunchTensors;
use et_core::{
    Backend, DType, Element, Error, Kernel, KernelEntry, LaunchOptions, LaunchReport, Prepared, RawTensor, Tensor,
};

use crate::abort::Abort;
use crate::availability::driver_available;
use crate::checked::{self, CheckCache, Checked};
use crate::compile::Compiler;
use crate::driver::{
    MappedWords, copy_on_device, copy_to_device, copy_words_to_host, launch_cooperative, open_context,
};
use crate::memory::{CudaTensor, as_bytes, from_bytes};
use crate::modules::{self, ModuleCache};
use crate::pending::{InFlight, Pending, STATUS_SLOTS};
use crate::runtime::{GraphState, Runtime};
use crate::states::{self, Launch, StateCache, StateProbe};

pub(crate) fn device_err(what: &str) -> impl Fn(DriverError) -> Error + '_ {
    move |e| Error::Device(format!("{what}: {e:?}"))
}

/// What launches share, behind one lock (launches on a `Cuda` are serialised).
struct Launcher {
    /// The launches enqueued and not yet settled. First, so that it is dropped first: it
    /// waits for the kernels in flight, which use what the other fields own.
    pending: Pending,
    modules: ModuleCache,
    /// The dims of the shapes each kernel was launched with (solved and checked once).
    checked: CheckCache,
    states: StateCache,
    /// Host-mapped status words, one per launch in flight, that a kernel sets on an abort,
    /// read after the launch without a copy.
    status: MappedWords,
    /// Set once a kernel faulted: the context can run nothing more.
    fault: Option<String>,
}

/// One CUDA GPU as an et backend.
pub struct Cuda {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    name: String,
    sms: usize,
    compiler: Compiler,
    /// [`Backend::describe`]'s text, made once (every launch report carries it).
    description: String,
    launcher: Mutex<Launcher>,
}

impl std::fmt::Debug for Cuda {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cuda({}, {} SMs, {:?})", self.name, self.sms, self.compiler)
    }
}

impl Cuda {
    /// Opens GPU `ordinal`. Errors, never panics, when there is no driver, no GPU, or no
    /// NVRTC, saying which. After a device fault in this process (see
    /// [`Backend::launch`]) the GPU's context is lost until the process ends, and this
    /// says so.
    ///
    /// With `ET_DUMP_CUDA=dir` set, writes the CUDA source of every megakernel linked
    /// into the program to `dir` first, NVRTC or not (see [`crate::compile::dump_cuda`]).
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
        crate::compile::dump_registered()?;
        let ctx = open_context(ordinal).map_err(|e| Error::Device(format!("creating the CUDA context: {e}")))?;
        let stream = ctx.default_stream();
        let name = ctx.name().map_err(device_err("reading the device name"))?;
        let sms = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(device_err("reading the SM count"))? as usize;
        let (major, minor) = ctx.compute_capability().map_err(device_err("reading the compute capability"))?;
        // sm_90a: the Hopper-specific target (wgmma, setmaxnreg) for the H100/H200
        let arch = if (major, minor) == (9, 0) { "sm_90a".to_string() } else { format!("sm_{major}{minor}") };
        let compiler = Compiler::new(&arch)?;
        let launcher = Launcher {
            pending: Pending::new(),
            modules: ModuleCache::new(modules::CAPACITY),
            checked: CheckCache::new(checked::CAPACITY),
            states: StateCache::new(states::CAPACITY),
            status: MappedWords::new(&ctx, STATUS_SLOTS).map_err(device_err("allocating the status words"))?,
            fault: None,
        };
        let description = format!("cuda: {name} ({sms} SMs, {})", compiler.arch());
        Ok(Cuda { ctx, stream, name, sms, compiler, description, launcher: Mutex::new(launcher) })
    }

    /// Uses `dir` as the compile cache of this backend (see [`Compiler::with_cache_dir`]).
    pub fn with_cache_dir(mut self, dir: Option<std::path::PathBuf>) -> Self {
        self.compiler = self.compiler.with_cache_dir(dir);
        self.description = format!("cuda: {} ({} SMs, {})", self.name, self.sms, self.compiler.arch());
        self
    }

    /// The cudarc context, for work outside et (baselines, interop). Its event tracking
    /// is off (this backend uses one stream): work on other streams must synchronise
    /// with [`Cuda::stream`] itself.
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

    /// Compiles (or loads from a cache) and loads `kernel`'s module for `schedule`, so
    /// that its first launch with that schedule does not; returns whether NVRTC ran.
    /// Callable from any thread ([`Backend::precompile`] is this): NVRTC runs before the
    /// launch lock is taken, so launches and copies of other threads go on meanwhile.
    pub fn load(&self, kernel: &Kernel, schedule: ScheduleKind) -> Result<bool, Error> {
        // a faulted backend says so before seconds of NVRTC
        drop(self.launcher()?);
        let (_, compiled) = self.compiler.compile_kernel(kernel, schedule)?;
        let mut launcher = self.launcher()?;
        // a thread new to the context (a precompile) makes it current before any driver call
        self.ctx.bind_to_thread().map_err(device_err("binding the CUDA context"))?;
        modules::load(&mut launcher.modules, &self.ctx, &self.compiler, self.sms, kernel, schedule)?;
        Ok(compiled)
    }

    /// The launch state, or the fault that made this backend unusable.
    fn launcher(&self) -> Result<MutexGuard<'_, Launcher>, Error> {
        // a panic under the lock cannot leave a half-built entry (caches insert whole)
        let launcher = self.launcher.lock().unwrap_or_else(|p| p.into_inner());
        match &launcher.fault {
            Some(fault) => Err(Error::Device(fault.clone())),
            None => Ok(launcher),
        }
    }
}

/// The launch's device tensors, as resolution sees them, with the index tensors' data
/// read once up front (a failed read is an error here, where it can be returned).
struct DeviceTensors<'a> {
    args: &'a [RawTensor],
    data: Vec<Option<Vec<i64>>>,
}

impl<'a> DeviceTensors<'a> {
    /// Reads the integers of tensors `data_tensors` (the graph's `data_tensors`).
    fn read(data_tensors: &[u16], args: &'a [RawTensor]) -> Result<Self, Error> {
        let mut data = vec![None; args.len()];
        for &t in data_tensors {
            let raw = &args[t as usize];
            let mut buf = vec![0u32; raw.len()];
            // SAFETY: `raw` is a live device tensor of `len` 4-byte integers (the dtypes
            // were checked; the generated launch borrows the tensor for the whole call),
            // and no kernel writes it: a launch that waits has finished, and the launches
            // in flight are settled before a kernel with index data is launched.
            unsafe { copy_words_to_host(&mut buf, raw.addr) }.map_err(device_err("reading an index tensor"))?;
            data[t as usize] = Some(match raw.dtype {
                DType::I32 => buf.iter().map(|&v| v as i32 as i64).collect(),
                _ => buf.iter().map(|&v| v as i64).collect(),
            });
        }
        Ok(DeviceTensors { args, data })
    }
}

impl LaunchTensors for DeviceTensors<'_> {
    fn shape(&self, t: u16) -> Vec<i64> {
        self.args[t as usize].shape.clone()
    }

    fn read_integers(&self, t: u16) -> Vec<i64> {
        self.data[t as usize].clone().unwrap_or_default()
    }
}

/// The options this backend cannot run: those of any backend, and the CPU's own.
fn check_options(options: &LaunchOptions) -> Result<(), Error> {
    options.validate()?;
    if options.chaos.is_some() {
        return Err(Error::Unavailable("chaos mode is a CPU-backend feature".into()));
    }
    if options.observe == Some(true) {
        return Err(Error::Unavailable(
            "observing a launch's accesses is a CPU-backend feature (run the same launch on `Cpu` to check its routing)"
                .into(),
        ));
    }
    Ok(())
}

/// A written argument whose memory overlaps another argument's would race in the kernel.
/// The borrow checker rejects this for tensors and their views; this catches the rest (a
/// view's tensor swapped out of the view, hand-made arguments).
fn check_no_alias(kernel: &Kernel, args: &[RawTensor]) -> Result<(), Error> {
    // each span once: recomputing them per pair took most of 4 us a launch of the Llama step
    let spans: Vec<(u64, u64)> = args.iter().map(|a| (a.addr, a.addr + (a.len() * a.dtype.size()) as u64)).collect();
    for (i, &(a0, a1)) in spans.iter().enumerate() {
        let written = kernel.graph.tensors.get(i).is_some_and(|t| t.access == et_core::graph::Access::Write);
        for (j, &(b0, b1)) in spans.iter().enumerate().filter(|&(j, _)| j != i && written) {
            if a0 < b1 && b0 < a1 {
                let name = |k: usize| kernel.graph.tensors.get(k).map_or("?".to_string(), |t| t.name.to_string());
                return Err(Error::Shape(format!(
                    "megakernel `{}`: tensor `{}` is written and shares memory with tensor `{}`",
                    kernel.name(),
                    name(i),
                    name(j)
                )));
            }
        }
    }
    Ok(())
}

impl Backend for Cuda {
    type Tensor<T: Element> = CudaTensor<T>;

    fn describe(&self) -> String {
        self.description.clone()
    }

    fn precompile(&self, kernel: &Kernel, schedule: ScheduleKind) -> Result<bool, Error> {
        self.load(kernel, schedule)
    }

    /// Compiles and loads the module, then resolves the task graph, schedules it and
    /// uploads its tables into the state cache under the key the launch looks up. The
    /// resolution (the race check, the schedule, the consumer lists: 0.1 to 0.3 s for a
    /// Llama step) runs outside the launch lock, so launches on other threads go on.
    fn prepare(&self, kernel: &Kernel, shapes: &[Vec<usize>], options: &LaunchOptions) -> Result<Prepared, Error> {
        check_options(options)?;
        let schedule = options.schedule.unwrap_or(kernel.graph.schedule);
        // wrong shapes fail before seconds of NVRTC
        kernel.dims_for(&et_core::__private::extents(shapes))?;
        // what the state key is made of, as a launch over tensors of these shapes sees it;
        // no address is read (a graph that reads data is left to the launch)
        let args: Vec<RawTensor> =
            kernel.graph.tensors.iter().zip(shapes).map(|(t, s)| RawTensor::new(0, t.dtype, s)).collect();
        let compiled = self.load(kernel, schedule)?;
        let (launch, dims) = {
            let mut guard = self.launcher()?;
            let Launcher { modules, checked, states, .. } = &mut *guard;
            let (loaded, _, _) = modules::load(modules, &self.ctx, &self.compiler, self.sms, kernel, schedule)?;
            let launch = Launch::new(options, schedule, self.sms, loaded.max_grid);
            // (solved above already; this also remembers them for the launch)
            let Checked { dims, data } = checked::check(checked, kernel, &args)?;
            let probe = StateProbe { spec: &kernel.graph, launch, dims, data: &vec![None; args.len()] };
            if !data.is_empty() || states.contains(&probe) {
                return Ok(Prepared { compiled, graph: false });
            }
            (launch, dims.clone())
        };
        self.ctx.bind_to_thread().map_err(device_err("binding the CUDA context"))?;
        let tensors = DeviceTensors::read(&[], &args)?;
        // (the tables' uploads go on the stream without the lock: a launch of another
        // thread enqueued meanwhile may report them in its kernel time)
        let state = GraphState::new(&self.stream, &kernel.graph, &tensors, schedule, launch.grid, launch.placement)?;
        let probe = StateProbe { spec: &kernel.graph, launch, dims: &dims, data: &tensors.data };
        // a launch on another thread may have built the same state meanwhile: it stays
        let (_, found) =
            self.launcher()?.states.get_or_try_insert(&probe, || Ok::<_, Error>((probe.to_key(), state)))?;
        Ok(Prepared { compiled, graph: !found })
    }

    fn upload<T: Element>(&self, host: &Tensor<T>) -> Result<CudaTensor<T>, Error> {
        let bytes = as_bytes(host.as_slice());
        let slice = if bytes.is_empty() { self.stream.alloc_zeros::<u8>(1) } else { self.stream.clone_htod(bytes) }
            .map_err(device_err("uploading a tensor"))?;
        Ok(CudaTensor::new(slice, host.shape()))
    }

    /// Settles the deferred launches first (see [`Backend::settle`]): the error of one
    /// that failed is this call's, rather than a bare CUDA error from the copy.
    fn download<T: Element>(&self, t: &CudaTensor<T>) -> Result<Tensor<T>, Error> {
        {
            let mut guard = self.launcher()?;
            if !guard.pending.is_empty() {
                self.settle_all(&mut guard)?;
            }
        }
        let bytes = if t.is_empty() {
            Vec::new()
        } else {
            self.stream.clone_dtoh(&t.bytes()).map_err(device_err("downloading a tensor"))?
        };
        Tensor::from_vec(t.shape(), from_bytes(&bytes))
    }

    /// Enqueues the copy on this backend's stream: later launches and copies see it.
    fn write<T: Element>(&self, tensor: &mut CudaTensor<T>, host: &[T]) -> Result<(), Error> {
        if host.len() != tensor.len() {
            return Err(Error::Shape(format!(
                "writing {} elements into a tensor of shape {:?} ({} elements)",
                host.len(),
                tensor.shape(),
                tensor.len()
            )));
        }
        self.ctx.bind_to_thread().map_err(device_err("binding the CUDA context"))?;
        let bytes = as_bytes(host);
        // SAFETY: the tensor is live and holds `bytes.len()` bytes at its address (the
        // lengths match); the unique borrow excludes every other use of them meanwhile,
        // and this backend's launches and copies all run on `self.stream`.
        unsafe { copy_to_device(tensor.addr(), bytes, &self.stream) }.map_err(device_err("writing a tensor"))
    }

    /// Enqueues the copy on this backend's stream: later launches and copies see it.
    fn copy<T: Element>(&self, src: &CudaTensor<T>, dst: &mut CudaTensor<T>) -> Result<(), Error> {
        if src.shape() != dst.shape() {
            return Err(Error::Shape(format!(
                "copying a tensor of shape {:?} into one of shape {:?}",
                src.shape(),
                dst.shape()
            )));
        }
        let (s, d, n) = (src.addr(), dst.addr(), src.num_bytes() as u64);
        if n > 0 && s < d + n && d < s + n {
            return Err(Error::Shape("copying a tensor into memory that it shares".into()));
        }
        self.ctx.bind_to_thread().map_err(device_err("binding the CUDA context"))?;
        // SAFETY: both tensors are live and hold `n` bytes at their addresses (equal
        // shapes), they do not overlap (checked), the unique borrow of `dst` excludes
        // every other use of it, and all of this backend's work runs on `self.stream`.
        unsafe { copy_on_device(d, s, n as usize, &self.stream) }.map_err(device_err("copying a tensor"))
    }

    /// Enqueues the copy on this backend's stream: later launches and copies see it.
    fn copy_into<T: Element>(&self, src: &CudaTensor<T>, dst: &mut CudaTensor<T>, offset: usize) -> Result<(), Error> {
        let end = et_core::__private::copy_end(src.len(), dst.shape(), offset)?;
        let size = std::mem::size_of::<T>() as u64;
        let (s, d, n) = (src.addr(), dst.addr() + offset as u64 * size, (end - offset) as u64 * size);
        if n > 0 && s < d + n && d < s + n {
            return Err(Error::Shape("copying a tensor into memory that it shares".into()));
        }
        self.ctx.bind_to_thread().map_err(device_err("binding the CUDA context"))?;
        // SAFETY: `src` is live and holds `n` bytes at its address; `dst` is live and holds
        // `offset + len` elements (checked), so `n` bytes from element `offset` on; the two
        // ranges do not overlap (checked), the unique borrow of `dst` excludes every other
        // use of it, and all of this backend's work runs on `self.stream`.
        unsafe { copy_on_device(d, s, n as usize, &self.stream) }.map_err(device_err("copying a tensor"))
    }

    /// Runs `kernel` as one cooperative launch and waits for it, or, deferred, returns
    /// once it is enqueued (a launch that waits settles the deferred ones before it). A
    /// kernel that a device fault stops (a tile op that reads out of bounds or traps)
    /// returns an error naming the megakernel; CUDA keeps the context unusable until the
    /// process ends, so this backend refuses further launches with the same explanation.
    unsafe fn launch(
        &self,
        entry: &KernelEntry<'_>,
        args: &[RawTensor],
        options: &LaunchOptions,
    ) -> Result<LaunchReport, Error> {
        let entered = Instant::now();
        let kernel = entry.kernel;
        check_options(options)?;
        kernel.check_dtypes(args)?;
        // a traced launch reads its trace back, so it waits
        let defer = options.defer.is_some() && options.trace.is_none();
        let schedule = options.schedule.unwrap_or(kernel.graph.schedule);
        // a faulted backend says so first (the context itself only reports the error code)
        let mut guard = self.launcher()?;
        self.ctx.bind_to_thread().map_err(device_err("binding the CUDA context"))?;
        let launcher = &mut *guard;
        if !defer {
            // an earlier deferred launch's failure is reported before this one runs
            self.settle_all(launcher)?;
        } else if launcher.pending.is_full() {
            let report = self.settle_oldest(launcher)?;
            launcher.pending.finish(report);
        }
        // the task graph of a kernel with index data reads it on the host: the kernels in
        // flight may write it, so they finish first (and their failure comes first)
        if !launcher.pending.is_empty() && !checked::check(&mut launcher.checked, kernel, args)?.data.is_empty() {
            self.settle_all(launcher)?;
        }
        let Launcher { modules, checked, states, status, pending, .. } = launcher;
        let (loaded, compiled, host_module) =
            modules::load(modules, &self.ctx, &self.compiler, self.sms, kernel, schedule)?;
        let launch = Launch::new(options, schedule, self.sms, loaded.max_grid);

        // Dims are solved (and every shape and op call checked) once per kernel and shapes;
        // the task graph is resolved again only for a new key (shapes, index data, options).
        let Checked { dims, data } = checked::check(checked, kernel, args)?;
        let tensors = DeviceTensors::read(data, args)?;
        let probe = StateProbe { spec: &kernel.graph, launch, dims, data: &tensors.data };
        let mut host_graph = Duration::ZERO;
        let (state, _) = states.get_or_try_insert(&probe, || {
            let graph_start = Instant::now();
            let state =
                GraphState::new(&self.stream, &kernel.graph, &tensors, schedule, launch.grid, launch.placement)?;
            host_graph = graph_start.elapsed();
            Ok::<_, Error>((probe.to_key(), state))
        })?;

        // the ready queue is zeroed after each launch (below), while the kernel runs; a
        // launch that ran without it being queued after (a failed event record) leaves it
        // for here
        if schedule == ScheduleKind::Dynamic && !state.queue_zeroed {
            self.stream.memset_zeros(&mut state.dyn_state).map_err(device_err("resetting the ready queue"))?;
            state.queue_zeroed = true;
        }
        // a traced launch's words start at zero: a task that does not run in it (inactive
        // under the dynamic schedule) must not show an earlier launch's times
        if options.trace.is_some() {
            self.stream.memset_zeros(&mut state.trace).map_err(device_err("clearing the trace"))?;
        }
        // events whose signals per launch depend on the launch's data count from zero
        for range in &state.resets {
            let mut view = state.counters.slice_mut(range.clone());
            self.stream.memset_zeros(&mut view).map_err(device_err("resetting routed event counters"))?;
        }
        let slot = pending.next_slot();
        if !status.set(slot, 0) {
            return Err(Error::Device("clearing the status word: it is not mapped".into()));
        }
        let watchdog_ns = options.watchdog.as_nanos().min(u64::MAX as u128) as u64;
        // the epoch advances only once the launch is enqueued: a failed launch leaves the
        // counters and the epoch in step
        let epoch = state.epoch.wrapping_add(1);
        let status_word = status.device_ptr() + (slot * std::mem::size_of::<u32>()) as u64;
        let rt = Runtime { epoch, ..state.runtime(watchdog_ns, options.trace.is_some(), status_word) };
        // the alias check runs once per set of tensors: a kept set passed it (0.9 us a
        // launch of the Llama step)
        let words = state.kernel_args(args, || check_no_alias(kernel, args))?;
        let (start, end) = pending.events(&self.ctx).map_err(device_err("creating an event"))?;
        start.record(&self.stream).map_err(device_err("recording an event"))?;
        let submitting = Instant::now();
        // SAFETY: `loaded.function` is `et_main` of this kernel's generated source, whose
        // `Runtime` and `EtArgs` are what `runtime`/`kernel_args` pack; the addresses in
        // them are `state`'s buffers, the status word and the arguments, all live until
        // the launch is settled (the state's buffers are freed in stream order; the
        // arguments by the caller's promise: the generated launch borrows the tensors
        // until the synchronisation below, a deferred launch's caller past it, see
        // `Deferral::new`; `check_dtypes` matched their number and types); `launch.grid`
        // is clamped to the co-resident maximum.
        unsafe {
            launch_cooperative(
                &loaded.function,
                launch.grid as u32,
                kernel.cuda.block_threads,
                loaded.smem_bytes as u32,
                &self.stream,
                &rt,
                words,
            )
        }
        .map_err(device_err("launching the megakernel"))?;
        let submitted = Instant::now();
        state.epoch = epoch;
        if schedule == ScheduleKind::Dynamic {
            // the kernel uses the queue now: it is zero again only once the memset below is queued
            state.queue_zeroed = false;
        }
        if let Err(e) = end.record(&self.stream) {
            // the kernel runs untracked: wait for it before its status word and module go
            let _ = self.stream.synchronize();
            return Err(device_err("recording an event")(e));
        }
        if schedule == ScheduleKind::Dynamic {
            // zeroes the ready queue for the next launch now, in stream order after this
            // one and outside its timed span: the memset's host cost passes while the
            // kernel runs, where before the launch it was host time of every step (a
            // dynamic launch's preparation was 4.5-8 us longer than a static one's, RESULTS
            // run 52). If it cannot be queued, the next launch zeroes the queue first.
            state.queue_zeroed = self.stream.memset_zeros(&mut state.dyn_state).is_ok();
        }
        let report = LaunchReport {
            backend: self.describe(),
            schedule,
            tasks: state.resolved().n_tasks,
            workers: launch.grid,
            elapsed: Duration::ZERO,
            completed: false,
            compiled,
            host_prepare: submitting - entered,
            host_module,
            host_graph,
            host_submit: submitted - submitting,
        };
        pending.push(InFlight {
            report: report.clone(),
            kernel: kernel.name().to_string(),
            ops: kernel.cuda.ops,
            state: state.id,
            epoch,
            watchdog: options.watchdog,
            slot,
            start,
            end,
            _module: loaded,
        });
        if defer {
            return Ok(report);
        }
        let state_id = state.id;
        let report = self.settle_oldest(launcher)?;
        if let Some(path) = &options.trace {
            let state = launcher
                .states
                .find_mut(|s| s.id == state_id)
                .ok_or_else(|| Error::Device("reading the trace: the launch's state is gone".into()))?;
            let words = self.stream.clone_dtoh(&state.trace).map_err(device_err("reading the trace"))?;
            crate::trace::write_trace(state.resolved(), &words, path)?;
        }
        Ok(report)
    }

    fn settle(&self) -> Result<Vec<LaunchReport>, Error> {
        let mut guard = self.launcher()?;
        self.settle_all(&mut guard)?;
        Ok(guard.pending.take_finished())
    }
}

impl Cuda {
    /// Settles every launch in flight, oldest first, keeping the deferred ones' reports
    /// for [`Backend::settle`]; the first failure is the error (see `settle_oldest`).
    fn settle_all(&self, launcher: &mut Launcher) -> Result<(), Error> {
        while !launcher.pending.is_empty() {
            let report = self.settle_oldest(launcher)?;
            launcher.pending.finish(report);
        }
        Ok(())
    }

    /// Waits for the oldest launch in flight and returns its report, completed with its
    /// kernel time. A device fault makes the backend unusable (see [`Backend::launch`]).
    /// An abort (the watchdog, a bad index) is this launch's error; the launches after it
    /// are waited for and dropped unreported, since those on its state ran with the
    /// abort raised, and every state that aborted is reset for the next launch.
    fn settle_oldest(&self, launcher: &mut Launcher) -> Result<LaunchReport, Error> {
        let Some(oldest) = launcher.pending.front() else {
            return Err(Error::Device("settling a launch: none is in flight".into()));
        };
        let waited = oldest.end.synchronize().and_then(|_| oldest.start.elapsed_ms(&oldest.end));
        let elapsed_ms = match waited {
            Ok(ms) => ms,
            Err(e) => {
                // a fault poisons the whole context: a kernel after this one may be the culprit
                let who = match launcher.pending.len() - 1 {
                    0 => format!("megakernel `{}`", oldest.kernel),
                    n => format!("megakernel `{}` (or one of the {n} launches enqueued after it)", oldest.kernel),
                };
                return Err(self.faulted(launcher, &who, e));
            }
        };
        let launch = launcher.pending.pop().expect("the oldest launch was looked at above");
        if launcher
            .status
            .get(launch.slot)
            .ok_or_else(|| Error::Device("reading the status word: it is not mapped".into()))?
            != 0
        {
            // every kernel after it must have finished before any state is reset
            if let Err(e) = self.stream.synchronize() {
                let who = format!("megakernel `{}` aborted, and a launch in flight after it", launch.kernel);
                let error = self.faulted(launcher, &who, e);
                // its records are kept too (see `faulted`)
                launcher.pending.push_front(launch);
                return Err(error);
            }
            let error = self.aborted(launcher, &launch);
            for later in launcher.pending.drain() {
                if launcher.status.get(later.slot).is_some_and(|w| w != 0) {
                    self.aborted(launcher, &later);
                }
                launcher.pending.recycle(later.start, later.end);
            }
            launcher.pending.recycle(launch.start, launch.end);
            return Err(error);
        }
        let report = LaunchReport {
            elapsed: Duration::from_secs_f64(elapsed_ms as f64 / 1e3),
            completed: true,
            ..launch.report
        };
        launcher.pending.recycle(launch.start, launch.end);
        Ok(report)
    }

    /// The error of a device fault in `who` (a megakernel, named), after which the backend
    /// refuses every launch.
    fn faulted(&self, launcher: &mut Launcher, who: &str, e: DriverError) -> Error {
        let message = format!(
            "{who} faulted on the device ({e:?}): a tile op read or wrote out of bounds, or trapped. \
             The task cannot be read back after a fault; the CPU backend, whose tile ops check their bounds, names it. \
             CUDA keeps this process's context unusable until the process ends: GPU work needs a new process"
        );
        // the launches in flight stay recorded: releasing their events and modules in a
        // faulted context leaves an error that cudarc reports at the next context bind,
        // and the backend refuses everything from now on anyway
        launcher.fault = Some(message.clone());
        Error::Device(message)
    }

    /// Reads the abort record of `launch`'s state, resets the state for the next launch,
    /// and says why the kernel stopped. The stream must be idle.
    fn aborted(&self, launcher: &mut Launcher, launch: &InFlight) -> Error {
        let Some(state) = launcher.states.find_mut(|s| s.id == launch.state) else {
            // evicted meanwhile: its buffers, the record among them, are freed
            return Error::Device(format!(
                "megakernel `{}` aborted, but its state was evicted before the launch was settled, so its abort \
                 record is gone: launch it without deferring to see why",
                launch.kernel
            ));
        };
        let read = |state: &GraphState| -> Result<Error, Error> {
            let rec = self.stream.clone_dtoh(&state.error_record).map_err(device_err("reading the abort record"))?;
            let counters = || self.stream.clone_dtoh(&state.counters).map_err(device_err("reading the counters"));
            // the launches on one state share their shapes: the last one's tensors place the
            // index an abort names
            let args = state.last_args();
            Abort::decode(&rec).into_error(state.resolved(), args, launch.ops, launch.watchdog, counters, launch.epoch)
        };
        let error = read(state).unwrap_or_else(|e| e);
        // the counters are part-way through a launch: start a fresh epoch (the ready
        // queue was zeroed after the launch, in stream order)
        let reset = self
            .stream
            .memset_zeros(&mut state.counters)
            .and_then(|_| self.stream.memset_zeros(&mut state.abort_flag))
            .and_then(|_| self.stream.memset_zeros(&mut state.error_record));
        if let Err(e) = reset {
            return Error::Device(format!("resetting after an abort ({error}): {e:?}"));
        }
        state.epoch = 0;
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_argument_may_not_overlap_another() {
        let kernel = &splitk::split_row_sum::KERNEL; // a read, part and c written
        let t = |addr: u64, shape: &[usize]| RawTensor::new(addr, DType::F32, shape);
        let (a, part) = (t(0x10000, &[32, 128]), t(0x20000, &[32, 4]));
        assert!(check_no_alias(kernel, &[a.clone(), part.clone(), t(0x30000, &[32])]).is_ok());
        // `c` is the last 32 floats of `part`
        let err = check_no_alias(kernel, &[a.clone(), part.clone(), t(0x20000 + 96 * 4, &[32])]).unwrap_err();
        assert!(err.to_string().contains("`part` is written and shares memory with tensor `c`"), "{err}");
        // `c` ends where `part` begins: no overlap
        assert!(check_no_alias(kernel, &[a.clone(), part.clone(), t(0x20000 - 32 * 4, &[32])]).is_ok());
        // a written tensor inside a read one
        let err = check_no_alias(kernel, &[a, t(0x10000 + 4, &[32, 4]), t(0x30000, &[32])]).unwrap_err();
        assert!(err.to_string().contains("`part` is written and shares memory with tensor `a`"), "{err}");
    }
}
