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
    pub trace: Option<PathBuf>,
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
    /// Time of the kernel itself (device events on the GPU, wall clock on the CPU).
    pub elapsed: Duration,
    /// Whether this launch compiled the kernel (false when it came from a cache).
    pub compiled: bool,
    /// Host time of the launch before it handed the kernel to the driver: argument checks,
    /// cache lookups, packing the arguments (zero on the CPU backend).
    pub host_prepare: Duration,
    /// Host time of the driver's launch call itself (zero on the CPU backend).
    pub host_submit: Duration,
}

/// A place megakernels run: the CPU backend ([`crate::Cpu`]) or `et_device::Cuda`.
pub trait Backend {
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

    /// Runs `kernel` once over `args` (in signature order) and waits for it. The generated
    /// `launch`/`launch_with` of each megakernel call this safely.
    ///
    /// # Safety
    /// For the whole call, each `args[t]` must describe a live allocation of this backend
    /// (host memory for [`crate::Cpu`], device memory of this context for a GPU) holding
    /// at least the elements its shape and strides address, of its dtype; the tensors the
    /// graph declares written ([`et_graph::Access::Write`]) must come from
    /// [`BackendTensor::raw_mut`] of a unique borrow held for the call, and no other
    /// argument may overlap them.
    unsafe fn launch(
        &self,
        kernel: &KernelEntry<'_>,
        args: &[RawTensor],
        options: &LaunchOptions,
    ) -> Result<LaunchReport>;
}
