//! The `Backend` trait: what the CPU backend and the CUDA backend both implement.

use std::path::PathBuf;
use std::time::Duration;

use et_graph::ScheduleKind;
use et_graph::schedule::Placement;

use crate::dtype::Element;
use crate::kernel::Kernel;
use crate::raw::RawTensor;

/// A tensor type that a backend launches kernels on.
pub trait BackendTensor<T: Element> {
    /// The kernel-argument view (address in the backend's memory, shape, strides).
    fn raw(&self) -> RawTensor;
}

impl<T: Element> BackendTensor<T> for crate::Tensor<T> {
    fn raw(&self) -> RawTensor {
        crate::Tensor::raw(self)
    }
}

/// Options of one launch. The defaults suit production runs.
#[derive(Clone, Debug)]
pub struct LaunchOptions {
    /// Overrides the megakernel's schedule.
    pub schedule: Option<ScheduleKind>,
    /// Placement for static schedules.
    pub placement: Placement,
    /// Workers (CPU threads or CTAs); `None` picks the backend's default.
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
}

/// A place megakernels run: the CPU backend ([`crate::Cpu`]) or `et_device::Cuda`.
pub trait Backend {
    /// The backend's tensor type.
    type Tensor<T: Element>: BackendTensor<T>;

    /// A short description (`cpu`, `cuda: NVIDIA H200`).
    fn describe(&self) -> String;

    /// Copies a host tensor into the backend's memory.
    fn upload<T: Element>(&self, host: &crate::Tensor<T>) -> crate::Result<Self::Tensor<T>>;

    /// Copies a backend tensor back to the host.
    fn download<T: Element>(&self, tensor: &Self::Tensor<T>) -> crate::Result<crate::Tensor<T>>;

    /// Runs `kernel` once over `args` (in signature order) and waits for it.
    fn launch(
        &self,
        kernel: &'static Kernel,
        args: &[RawTensor],
        options: &LaunchOptions,
    ) -> crate::Result<LaunchReport>;
}
