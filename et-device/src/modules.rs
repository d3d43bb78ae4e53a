//! Loaded kernel modules, cached by what their CUDA source is made of, the schedule it
//! runs and the CTA size (a backend's compiler fixes the architecture and the options).
//! A kernel launched with both schedules has two modules: each is compiled for its
//! schedule alone (`Kernel::cuda_source_for`). Keyed by content, not by
//! the kernel's address: kernels built at run time may share an address over time. The
//! source itself is not built on a hit (that took 10 us a launch): its parts are compared,
//! the ones a `'static` kernel shares with the cached key by address first. At most
//! [`CAPACITY`] modules stay loaded; a new one unloads the least recently used.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;
use et_core::{Error, Kernel, ScheduleKind, TileOp};

use crate::cache::Lru;
use crate::compile::{Compiler, ImageKind};
use crate::device::device_err;

/// Modules kept per backend.
pub(crate) const CAPACITY: usize = 64;

/// A loaded megakernel.
pub(crate) struct Loaded {
    _module: Arc<CudaModule>,
    pub function: CudaFunction,
    /// The most CTAs that fit co-resident (the cooperative launch's limit).
    pub max_grid: usize,
    /// Dynamic shared memory per CTA: the ops' arena and its alignment slack (set as the
    /// function's maximum, given to every launch).
    pub smem_bytes: usize,
}

/// What a module's source is made of, beside the prelude that every kernel shares: the
/// schedule it runs, the generated body, the op of each call and its arena bytes, and the
/// sizes of the `EtArgs` declaration.
pub(crate) struct ModuleKey {
    schedule: ScheduleKind,
    body: Cow<'static, str>,
    ops: &'static [TileOp],
    smem: &'static [usize],
    args: [usize; 4],
    block_threads: u32,
}

impl ModuleKey {
    fn of(kernel: &Kernel, schedule: ScheduleKind) -> ModuleKey {
        let g = &kernel.graph;
        ModuleKey {
            schedule,
            body: kernel.cuda.body.clone(),
            ops: kernel.cuda.ops,
            smem: kernel.cuda.smem,
            args: [g.tensors.len(), g.dims.len(), g.events.len(), g.groups.len()],
            block_threads: kernel.cuda.block_threads,
        }
    }
}

/// A kernel and the schedule of the launch that looks its module up.
pub(crate) struct ModuleProbe<'k> {
    kernel: &'k Kernel,
    schedule: ScheduleKind,
}

impl PartialEq<ModuleProbe<'_>> for ModuleKey {
    fn eq(&self, probe: &ModuleProbe<'_>) -> bool {
        let k = probe.kernel;
        let same_text = |a: &str, b: &str| std::ptr::eq(a, b) || a == b;
        let same_op = |a: &TileOp, b: &TileOp| same_text(a.path, b.path) && same_text(a.cuda, b.cuda);
        let g = &k.graph;
        self.schedule == probe.schedule
            && self.block_threads == k.cuda.block_threads
            && self.smem == k.cuda.smem
            && self.args == [g.tensors.len(), g.dims.len(), g.events.len(), g.groups.len()]
            && (std::ptr::eq(self.ops, k.cuda.ops)
                || (self.ops.len() == k.cuda.ops.len() && self.ops.iter().zip(k.cuda.ops).all(|(a, b)| same_op(a, b))))
            && same_text(&self.body, &k.cuda.body)
    }
}

/// The loaded modules of one backend.
pub(crate) type ModuleCache = Lru<ModuleKey, Arc<Loaded>>;

/// The module of `kernel` for `schedule`, compiled (or read from the compiler's caches)
/// and loaded when it is not in `cache`; whether NVRTC ran; and the time it took to
/// compile or read and load it (zero when `cache` had it).
pub(crate) fn load(
    cache: &mut ModuleCache,
    ctx: &Arc<CudaContext>,
    compiler: &Compiler,
    sms: usize,
    kernel: &Kernel,
    schedule: ScheduleKind,
) -> Result<(Arc<Loaded>, bool, Duration), Error> {
    let (mut compiled, mut took) = (false, Duration::ZERO);
    let (loaded, _) = cache.get_or_try_insert(&ModuleProbe { kernel, schedule }, || {
        let start = Instant::now();
        let (out, ran) = compiler.compile_kernel(kernel, schedule)?;
        compiled = ran;
        let image = match out.kind {
            ImageKind::Cubin => Ptx::from_binary(out.image.clone()),
            ImageKind::Ptx => Ptx::from_src(String::from_utf8_lossy(&out.image).trim_end_matches('\0').to_string()),
        };
        let module = ctx.load_module(image).map_err(device_err("loading the compiled kernel"))?;
        let function = module.load_function("et_main").map_err(device_err("finding et_main"))?;
        let smem_bytes = arena(ctx, &function, kernel)?;
        let per_sm = function
            .occupancy_max_active_blocks_per_multiprocessor(kernel.cuda.block_threads, smem_bytes, None)
            .map_err(device_err("querying occupancy"))? as usize;
        if per_sm == 0 {
            return Err(Error::Device(format!(
                "megakernel `{}` cannot fit one CTA of {} threads with {smem_bytes} bytes of dynamic shared memory on an SM",
                kernel.name(),
                kernel.cuda.block_threads
            )));
        }
        let loaded = Loaded { _module: module, function, max_grid: per_sm * sms, smem_bytes };
        took = start.elapsed();
        Ok((ModuleKey::of(kernel, schedule), Arc::new(loaded)))
    })?;
    Ok((loaded.clone(), compiled, took))
}

/// The dynamic shared memory of `kernel`'s CTAs, checked against the device's opt-in
/// maximum (an error naming the megakernel, the op and the bytes) and set as `function`'s
/// maximum, which a launch needs for more than 48 KB.
fn arena(ctx: &Arc<CudaContext>, function: &CudaFunction, kernel: &Kernel) -> Result<usize, Error> {
    if kernel.arena_bytes() == 0 {
        return Ok(0);
    }
    let limit = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        .map_err(device_err("reading the shared-memory limit"))? as usize;
    let static_bytes = function
        .get_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
        .map_err(device_err("reading the kernel's shared memory"))? as usize;
    let bytes = kernel.dynamic_smem(static_bytes, limit)?;
    function
        .set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes as i32)
        .map_err(device_err("setting the kernel's dynamic shared memory"))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_equals_its_kernel_and_schedule_and_nothing_else() {
        let kernel = &splitk::split_row_sum::KERNEL;
        let probe = |kernel, schedule| ModuleProbe { kernel, schedule };
        let key = ModuleKey::of(kernel, ScheduleKind::Static);
        assert!(key == probe(kernel, ScheduleKind::Static));
        assert!(key != probe(kernel, ScheduleKind::Dynamic), "the other schedule's module");
        let mut edited = kernel.clone();
        edited.cuda.body = Cow::Owned(format!("{}// edited\n", kernel.cuda.body));
        assert!(key != probe(&edited, ScheduleKind::Static), "another body");
        assert!(
            ModuleKey::of(&edited, ScheduleKind::Dynamic) == probe(&edited, ScheduleKind::Dynamic),
            "an owned body compares by content"
        );
        let mut wider = kernel.clone();
        wider.cuda.block_threads *= 2;
        assert!(key != probe(&wider, ScheduleKind::Static), "another CTA size");
        assert!(key != probe(&splitk::splitk_gemm::KERNEL, ScheduleKind::Static), "another kernel");
    }
}
