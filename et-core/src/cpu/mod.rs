//! The CPU backend: worker threads play the SMs and run the same event protocol with
//! `AtomicU32` acquire/release counters, calling the tile ops' CPU references.
//!
//! It is what a machine without a GPU runs, and the reference GPU results are checked
//! against. [`LaunchOptions::chaos`] randomises placement, order and timing under a seed
//! to expose missing dependencies; a deadlock is detected exactly (every live worker
//! blocked on an incomplete element, or an empty ready queue with nothing running) and
//! returned as [`Error::Deadlock`] instead of hanging.

mod context;
mod exec;
mod monitor;
pub(crate) mod observe;

pub use context::{CpuTaskFn, TaskContext};

use et_graph::Resolved;
use et_graph::resolve::LaunchTensors;

use crate::backend::{Backend, KernelEntry, LaunchOptions, LaunchReport};
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::raw::RawTensor;
use crate::tensor::Tensor;

/// The CPU backend.
#[derive(Clone, Debug)]
pub struct Cpu {
    workers: usize,
}

/// The most worker threads one CPU launch starts (`LaunchOptions::workers` above it is
/// clamped: the CPU backend is a reference, not a thread stress test).
pub const MAX_WORKERS: usize = 256;

impl Default for Cpu {
    fn default() -> Self {
        Self::new()
    }
}

impl Cpu {
    /// A CPU backend with one worker per available core, at least 2 and at most 16.
    pub fn new() -> Self {
        let n = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
        Cpu { workers: n.clamp(2, 16) }
    }

    /// A CPU backend with `workers` threads (at least 1).
    pub fn with_workers(workers: usize) -> Self {
        Cpu { workers: workers.max(1) }
    }

    /// Default worker count.
    pub fn workers(&self) -> usize {
        self.workers
    }
}

/// The launch's host tensors, as resolution sees them.
pub(crate) struct HostTensors<'a>(pub &'a [RawTensor]);

impl LaunchTensors for HostTensors<'_> {
    fn shape(&self, t: u16) -> Vec<i64> {
        self.0[t as usize].shape.clone()
    }

    fn read_integers(&self, t: u16) -> Vec<i64> {
        let raw = &self.0[t as usize];
        let n = raw.len();
        // SAFETY: `Backend::launch`'s contract: `raw` describes live host memory of its
        // dtype for the whole launch; integer dtypes are 4 bytes.
        unsafe {
            match raw.dtype {
                DType::I32 => std::slice::from_raw_parts(raw.addr as *const i32, n).iter().map(|&v| v as i64).collect(),
                DType::U32 => std::slice::from_raw_parts(raw.addr as *const u32, n).iter().map(|&v| v as i64).collect(),
                other => panic!("tensor {t} of dtype {other} read as indices"),
            }
        }
    }
}

impl Backend for Cpu {
    type Tensor<T: Element> = Tensor<T>;

    fn describe(&self) -> String {
        format!("cpu ({} worker{})", self.workers, if self.workers == 1 { "" } else { "s" })
    }

    fn upload<T: Element>(&self, host: &Tensor<T>) -> Result<Tensor<T>> {
        Ok(host.clone())
    }

    fn download<T: Element>(&self, tensor: &Tensor<T>) -> Result<Tensor<T>> {
        Ok(tensor.clone())
    }

    fn write<T: Element>(&self, tensor: &mut Tensor<T>, host: &[T]) -> Result<()> {
        if host.len() != tensor.len() {
            return Err(Error::Shape(format!(
                "writing {} elements into a tensor of shape {:?} ({} elements)",
                host.len(),
                tensor.shape(),
                tensor.len()
            )));
        }
        tensor.as_mut_slice().copy_from_slice(host);
        Ok(())
    }

    /// Host tensors own their memory, so `src` and `dst` never share it.
    fn copy<T: Element>(&self, src: &Tensor<T>, dst: &mut Tensor<T>) -> Result<()> {
        if src.shape() != dst.shape() {
            return Err(Error::Shape(format!(
                "copying a tensor of shape {:?} into one of shape {:?}",
                src.shape(),
                dst.shape()
            )));
        }
        dst.as_mut_slice().copy_from_slice(src.as_slice());
        Ok(())
    }

    /// Host tensors own their memory, so `src` and `dst` never share it.
    fn copy_into<T: Element>(&self, src: &Tensor<T>, dst: &mut Tensor<T>, offset: usize) -> Result<()> {
        let end = crate::backend::copy_end(src.len(), dst.shape(), offset)?;
        dst.as_mut_slice()[offset..end].copy_from_slice(src.as_slice());
        Ok(())
    }

    unsafe fn launch(
        &self,
        entry: &KernelEntry<'_>,
        args: &[RawTensor],
        options: &LaunchOptions,
    ) -> Result<LaunchReport> {
        options.validate()?;
        let kernel = entry.kernel;
        kernel.check_dtypes(args)?;
        if entry.cpu_tasks.len() != kernel.graph.groups.len() {
            return Err(Error::Shape(format!(
                "megakernel `{}` has {} tile groups but {} CPU task functions",
                kernel.name(),
                kernel.graph.groups.len(),
                entry.cpu_tasks.len()
            )));
        }
        let resolved = Resolved::new(&kernel.graph, &HostTensors(args)).map_err(Error::resolve(kernel.name()))?;
        kernel.check_op_calls(&resolved.dims)?;
        // more threads than tasks would only wait
        let workers = options.workers.unwrap_or(if options.chaos.is_some() { 4 } else { self.workers });
        let workers = workers.min(resolved.n_tasks.max(1) as usize).min(MAX_WORKERS);
        exec::run(entry, resolved, args, options, workers)
    }
}
