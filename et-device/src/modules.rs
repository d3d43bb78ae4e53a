//! Loaded kernel modules, cached by the full CUDA source and the CTA size (a backend's
//! compiler fixes the architecture and the options). Keyed by content, not by the
//! kernel's address: kernels built at run time may share an address over time. At most
//! [`CAPACITY`] modules stay loaded; a new one unloads the least recently used.

use std::sync::Arc;

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
        let per_sm = function
            .occupancy_max_active_blocks_per_multiprocessor(key.block_threads, 0, None)
            .map_err(device_err("querying occupancy"))? as usize;
        if per_sm == 0 {
            return Err(Error::Device(format!(
                "megakernel `{}` cannot fit one CTA of {} threads on an SM",
                kernel.name(),
                key.block_threads
            )));
        }
        let loaded = Loaded { _module: module, function, max_grid: per_sm * sms };
        Ok((ModuleKey { source: key.source.clone(), block_threads: key.block_threads }, Arc::new(loaded)))
    })?;
    Ok((loaded.clone(), compiled))
}
