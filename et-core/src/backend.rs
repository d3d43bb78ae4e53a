//! The `Backend` trait: what the CPU backend and the CUDA backend both implement.

use std::path::PathBuf;
use std::time::Duration;

use et_graph::ScheduleKind;
use et_graph::schedule::Placement;

use crate::cpu::CpuTaskFn;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::raw::RawTensor;

/// A megakernel as backends launch it: its backend-neutral description and, beside it,
/// the entry points that the macro generates for backends that run Rust code.
#[derive(Clone, Copy, Debug)]
pub struct KernelEntry<'k> {
    /// The description: graph, CUDA source, origin.
    pub kernel: &'k Kernel,
    /// The CPU backend's task functions, one per tile group in group order.
    pub cpu_tasks: &'k [CpuTaskFn],
}

/// A tensor type that a backend launches kernels on.
pub trait BackendTensor<T: Element> {
    /// The kernel-argument view of a tensor the kernel reads (address in the backend's
    /// memory, shape, strides).
    fn raw(&self) -> RawTensor;

    /// The kernel-argument view of a tensor the kernel writes: taken from a unique
    /// borrow, so that writes go through an address nothing else may use meanwhile.
    /// Backends whose tensors live outside Rust's memory (device allocations) can keep
    /// this default.
    fn raw_mut(&mut self) -> RawTensor {
        self.raw()
    }
}

impl<T: Element> BackendTensor<T> for crate::Tensor<T> {
    fn raw(&self) -> RawTensor {
        crate::Tensor::raw(self)
    }

    fn raw_mut(&mut self) -> RawTensor {
        crate::Tensor::raw_mut(self)
    }
}

/// Options of one launch. The defaults suit production runs.
#[derive(Clone, Debug)]
pub struct LaunchOptions {
    /// Overrides the megakernel's schedule.
    pub schedule: Option<ScheduleKind>,
    /// Placement for static schedules.
    pub placement: Placement,
    /// Workers (CPU threads or CTAs); `None` picks the backend's default. Zero is an error;
    /// the CPU backend starts at most one thread per task and at most
    /// [`crate::cpu::MAX_WORKERS`]; the GPU at most the CTAs that fit co-resident.
    pub workers: Option<usize>,
    /// CPU backend: seeded random placement, order and delays, to expose missing
    /// dependencies.
    pub chaos: Option<u64>,
    /// GPU: the longest any single wait may take before the launch is aborted (default
    /// 2 s, or `ET_WATCHDOG_MS`). The CPU backend needs none: it detects deadlocks exactly,
    /// and a slow CPU op is not a hang.
    pub watchdog: Duration,
    /// Write a Chrome/Perfetto trace of the launch to this file (default: `ET_TRACE`).
    /// A traced launch always waits for its kernel, deferred or not.
    pub trace: Option<PathBuf>,
    /// Return once the kernel is enqueued, without waiting for it (see [`Deferral`]).
    /// Backends that run kernels to completion inside `launch` (the CPU backend) ignore
    /// it.
    pub defer: Option<Deferral>,
    /// CPU backend: record what each task touches in the tensors the launch writes, and
    /// the signals that arrive, and after the run check the race rule on that record
    /// (`et_graph::race::find_observed`): a data race that the routing of this launch
    /// allows is then [`Error::Resolve`] naming both tasks and the elements, instead of
    /// a wrong answer. The rule at launch is exact only where the host knows every
    /// signal's target, so `None` (the default) observes exactly the megakernels whose
    /// signals a launch decides (a group condition, or a `signal!` indexed by routing
    /// data the launch writes, see `GraphSpec::routes_at_run_time`); `Some(false)`
    /// turns it off, `Some(true)` on for any megakernel. It costs a thread-local log per
    /// element access. The GPU backend does not observe: `Some(true)` is an error there.
    pub observe: Option<bool>,
}

/// Permission for a launch to return before its kernel has run: [`LaunchOptions::defer`].
///
/// A GPU backend then enqueues the kernel and returns; the host prepares the next launch
/// while this one runs, so that back-to-back launches (the steps of a decode loop) keep
/// the GPU busy instead of paying the host's launch path between kernels. A deferred
/// launch is *settled* (waited for, its status read, its kernel time measured) by
/// [`Backend::settle`], and by any later launch that waits or download of the same
/// backend, which settle every launch before them first; a later deferred launch may
/// settle earlier ones too (a GPU backend bounds the launches in flight, and a kernel
/// whose task graph reads index data on the host waits for the kernels that may write
/// it). An abort or a fault of a deferred kernel is the error of whichever of these
/// settles it; a launch that returns it was not enqueued itself.
///
/// The launch only borrows its tensors for the call, so the caller must keep them alive
/// past it: that is the promise [`Deferral::new`] takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deferral(());

impl Deferral {
    /// Permission to defer launches.
    ///
    /// # Safety
    /// Every launch made with options holding this value must keep each of its argument
    /// tensors allocated until the launch is settled (see [`Deferral`]), and in the
    /// meantime read or write them only through operations of the same backend, which
    /// run in launch order (its launches, `write`, `copy`, `copy_into`, `download`).
    pub unsafe fn new() -> Self {
        Deferral(())
    }
}

impl Default for LaunchOptions {
    fn default() -> Self {
        LaunchOptions {
            schedule: None,
            placement: Placement::default(),
            workers: None,
            chaos: None,
            watchdog: std::env::var("ET_WATCHDOG_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .map_or(Duration::from_secs(2), Duration::from_millis),
            trace: std::env::var_os("ET_TRACE").map(PathBuf::from),
            defer: None,
            observe: None,
        }
    }
}

impl LaunchOptions {
    /// Checks the options every backend shares: a zero worker count or a zero watchdog
    /// is an error naming the option, not a silent substitute.
    pub fn validate(&self) -> Result<()> {
        if self.workers == Some(0) {
            return Err(Error::InvalidOption {
                option: "workers",
                message: "a launch needs at least one worker (`None` picks the backend's default)".into(),
            });
        }
        if self.watchdog.is_zero() {
            return Err(Error::InvalidOption {
                option: "watchdog",
                message: "a zero limit would stop every wait (set a positive duration, or ET_WATCHDOG_MS > 0)".into(),
            });
        }
        Ok(())
    }
}

/// What a launch did.
#[derive(Clone, Debug)]
pub struct LaunchReport {
    /// Backend description, e.g. `cpu (4 workers)` or `cuda: NVIDIA H200`.
    pub backend: String,
    /// Schedule used.
    pub schedule: ScheduleKind,
    /// Tasks executed.
    pub tasks: u32,
    /// Workers (threads or CTAs).
    pub workers: usize,
    /// Time of the kernel itself (device events on the GPU, wall clock on the CPU); zero
    /// in the report of a deferred launch that returned before its kernel ran (see
    /// [`LaunchReport::completed`]).
    pub elapsed: Duration,
    /// Whether the kernel had finished when this report was made. A deferred launch
    /// returns `false` (and no kernel time); [`Backend::settle`] reports it again,
    /// completed, with its time.
    pub completed: bool,
    /// Whether this launch compiled the kernel (false when it came from a cache).
    pub compiled: bool,
    /// Host time of the launch before it handed the kernel to the driver: argument checks,
    /// cache lookups, packing the arguments, and waiting for the launches it settled
    /// first, if any (zero on the CPU backend). Includes `host_module` and `host_graph`.
    pub host_prepare: Duration,
    /// The part of `host_prepare` that compiled (or read from a cache) and loaded the
    /// kernel's module: zero when the backend had it loaded (always on the CPU backend).
    pub host_module: Duration,
    /// The part of `host_prepare` that resolved the task graph and uploaded its tables, for
    /// shapes, data or options the backend had not launched this kernel with: zero
    /// otherwise (always on the CPU backend, which resolves inside the launch).
    pub host_graph: Duration,
    /// Host time of the driver's launch call itself (zero on the CPU backend).
    pub host_submit: Duration,
}

/// What [`Backend::prepare`] did ahead of a launch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Prepared {
    /// Whether a compiler ran for the module (false when a cache held it or it was loaded
    /// already, and on a backend that compiles nothing).
    pub compiled: bool,
    /// Whether the task graph was resolved, scheduled and its tables uploaded for the
    /// shapes (false when the backend had them already, when the graph reads the tensors'
    /// data, which a launch must read then, and on a backend that keeps no graph state).
    pub graph: bool,
}

/// Shapes as the task graph takes them (signed extents, as in [`crate::RawTensor`]).
#[doc(hidden)]
pub fn extents(shapes: &[Vec<usize>]) -> Vec<Vec<i64>> {
    shapes.iter().map(|s| crate::raw::signed(s)).collect()
}

/// The end of [`Backend::copy_into`]'s destination range (`offset + len`), or the error
/// of a copy of `len` elements that does not fit a destination of `shape` from `offset`.
#[doc(hidden)]
pub fn copy_end(len: usize, shape: &[usize], offset: usize) -> Result<usize> {
    let size: usize = shape.iter().product();
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(end),
        _ => Err(Error::Shape(format!(
            "copying {len} elements from element {offset} on into a tensor of shape {shape:?} ({size} elements)"
        ))),
    }
}

/// A place megakernels run: the CPU backend ([`crate::Cpu`]) or `et_device::Cuda`.
///
/// A backend is `Sync`: one thread may prepare a kernel ([`Backend::precompile`]) while
/// another uploads the weights it will run on.
pub trait Backend: Sync {
    /// The backend's tensor type.
    type Tensor<T: Element>: BackendTensor<T>;

    /// A short description (`cpu`, `cuda: NVIDIA H200`).
    fn describe(&self) -> String;

    /// Copies a host tensor into the backend's memory.
    fn upload<T: Element>(&self, host: &crate::Tensor<T>) -> Result<Self::Tensor<T>>;

    /// Copies a backend tensor back to the host.
    fn download<T: Element>(&self, tensor: &Self::Tensor<T>) -> Result<crate::Tensor<T>>;

    /// Copies `host` into the existing `tensor`, which must have as many elements, without
    /// allocating. The copy is ordered before every later launch and copy of this backend
    /// (a GPU backend may enqueue it and return before it lands; `host` may be reused on
    /// return). A length mismatch is an error and leaves `tensor` as it was.
    fn write<T: Element>(&self, tensor: &mut Self::Tensor<T>, host: &[T]) -> Result<()>;

    /// Copies `src` into `dst`, of the same shape, inside the backend's memory (no round
    /// trip through the host), ordered like [`Backend::write`]. A shape mismatch, or two
    /// tensors sharing memory, is an error and leaves `dst` as it was.
    fn copy<T: Element>(&self, src: &Self::Tensor<T>, dst: &mut Self::Tensor<T>) -> Result<()>;

    /// Copies all of `src` into `dst` from element `offset` on (in row-major order), inside
    /// the backend's memory, ordered like [`Backend::write`]: for example one step's
    /// result into its row of a log. A copy past the end of `dst`, or two tensors
    /// sharing memory, is an error and leaves `dst` as it was.
    fn copy_into<T: Element>(&self, src: &Self::Tensor<T>, dst: &mut Self::Tensor<T>, offset: usize) -> Result<()>;

    /// Compiles and loads `kernel`'s module for `schedule` ahead of its first launch, so
    /// that the launch does not if this returns first: for example on another thread
    /// while this one reads the weights. Returns whether a compiler ran (false when a
    /// cache held the module or it was loaded already, and on the CPU backend, which has
    /// nothing to compile). A launch that finds the module reports `compiled: false`.
    fn precompile(&self, kernel: &Kernel, schedule: ScheduleKind) -> Result<bool> {
        let _ = (kernel, schedule);
        Ok(false)
    }

    /// Does ahead of time what the first launch of `kernel` over tensors of `shapes` (in
    /// signature order) with `options` would do before its kernel runs: checks the shapes
    /// (the errors a launch gives), compiles and loads the module ([`Backend::precompile`]),
    /// and where the backend keeps per-shape state, resolves the task graph, schedules it
    /// and uploads its tables. It needs no tensors, so it can run on another thread while
    /// they are made; a launch with tensors of these shapes and these options then finds
    /// everything ready (its report's `host_module` and `host_graph` are zero), unless the
    /// backend evicted it meanwhile (et-device keeps the 64 most recently used task
    /// graphs). A graph that reads the tensors' data (data-dependent counts or indices) is
    /// left to the launch.
    fn prepare(&self, kernel: &Kernel, shapes: &[Vec<usize>], options: &LaunchOptions) -> Result<Prepared> {
        options.validate()?;
        kernel.dims_for(&extents(shapes))?;
        let compiled = self.precompile(kernel, options.schedule.unwrap_or(kernel.graph.schedule))?;
        Ok(Prepared { compiled, graph: false })
    }

    /// Waits for this backend's deferred launches ([`LaunchOptions::defer`]) and returns
    /// their reports, completed, in launch order; or the first error among them (a kernel
    /// that aborted or faulted), the later ones' reports then being lost. It waits for
    /// every deferred launch on the error path too (unless the device has faulted, when
    /// nothing runs any more). Reports of deferred launches that a later launch or
    /// download settled are returned here too, the last 4096 at least. The default, for
    /// backends that finish every launch inside `launch`, has none.
    fn settle(&self) -> Result<Vec<LaunchReport>> {
        Ok(Vec::new())
    }

    /// Runs `kernel` once over `args` (in signature order) and waits for it, unless
    /// `options.defer` lets it return once the kernel is enqueued. The generated
    /// `launch`/`launch_with` of each megakernel call this safely.
    ///
    /// # Safety
    /// For the whole call (and, for a deferred launch, until it is settled: see
    /// [`Deferral::new`]), each `args[t]` must describe a live allocation of this backend
    /// (host memory for [`crate::Cpu`], device memory of this context for a GPU) holding
    /// at least the elements its shape and strides address, of its dtype; the tensors the
    /// graph declares written ([`et_graph::Access::Write`]) must come from
    /// [`BackendTensor::raw_mut`] of a unique borrow held for the call, and no other
    /// argument may overlap them. The entry's CPU task functions (`cpu_tasks`) and its
    /// kernel's CUDA must be the kernel's own, as `#[megakernel]` generates them, or code that
    /// touches each tensor only inside the tiles its group's accesses in the graph
    /// declare, in the order its waits and signals give: the race rule that makes the
    /// tasks' accesses disjoint reads the graph, not the code.
    unsafe fn launch(
        &self,
        kernel: &KernelEntry<'_>,
        args: &[RawTensor],
        options: &LaunchOptions,
    ) -> Result<LaunchReport>;
}
