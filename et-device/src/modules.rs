//! Loaded kernel modules, cached by the full CUDA source and the CTA size (a backend's
//! compiler fixes the architecture and the options). Keyed by content, not by the
//! kernel's address: kernels built at run time may share an address over time. At most
//! [`CAPACITY`] modules stay loaded; a new one unloads the least recently used.

use std::sync::Arc;

use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;
use et_core::{Error, Kernel};

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

/// What a module was built from.
#[derive(PartialEq)]
pub(crate) struct ModuleKey {
    source: String,
    block_threads: u32,
}

/// The loaded modules of one backend.
pub(crate) type ModuleCache = Lru<ModuleKey, Arc<Loaded>>;

/// The module of `kernel`, compiled (or read from the compiler's caches) and loaded when
/// it is not in `cache`; and whether NVRTC ran.
pub(crate) fn load(
    cache: &mut ModuleCache,
    ctx: &Arc<CudaContext>,
    compiler: &Compiler,
    sms: usize,
    kernel: &Kernel,
) -> Result<(Arc<Loaded>, bool), Error> {
    let key = ModuleKey { source: kernel.cuda_source(), block_threads: kernel.cuda.block_threads };
    let mut compiled = false;
    let (loaded, _) = cache.get_or_try_insert(&key, || {
        let (out, ran) = compiler.compile_kernel(kernel)?;
        compiled = ran;
        let image = match out.kind {
            ImageKind::Cubin => Ptx::from_binary(out.image.clone()),
            ImageKind::Ptx => Ptx::from_src(String::from_utf8_lossy(&out.image).trim_end_matches('\0').to_string()),
        };
        let module = ctx.load_module(image).map_err(device_err("loading the compiled kernel"))?;
        let function = module.load_function("et_main").map_err(device_err("finding et_main"))?;
        let smem_bytes = arena(ctx, &function, kernel)?;
        let per_sm = function
            .occupancy_max_active_blocks_per_multiprocessor(key.block_threads, smem_bytes, None)
            .map_err(device_err("querying occupancy"))? as usize;
        if per_sm == 0 {
            return Err(Error::Device(format!(
                "megakernel `{}` cannot fit one CTA of {} threads with {smem_bytes} bytes of dynamic shared memory on an SM",
                kernel.name(),
                key.block_threads
            )));
        }
        let loaded = Loaded { _module: module, function, max_grid: per_sm * sms, smem_bytes };
        Ok((ModuleKey { source: key.source.clone(), block_threads: key.block_threads }, Arc::new(loaded)))
    })?;
    Ok((loaded.clone(), compiled))
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
