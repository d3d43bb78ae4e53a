//! Every raw CUDA driver and NVRTC call of the backend, each with its safety argument.
//! The modules above speak in cudarc's safe types and in the functions here.

use std::ffi::{CStr, c_char, c_void};
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaStream, DriverError, PinnedHostSlice, result, sys};
use cudarc::nvrtc::result::{self as nvrtc, NvrtcError};
use cudarc::nvrtc::sys as nvrtc_sys;

use crate::runtime::Runtime;

/// Whether libcuda can be loaded.
pub(crate) fn driver_present() -> bool {
    // SAFETY: only tries to open the library.
    unsafe { sys::is_culib_present() }
}

/// Whether libnvrtc can be loaded.
pub(crate) fn nvrtc_present() -> bool {
    // SAFETY: only tries to open the library.
    unsafe { nvrtc_sys::is_culib_present() }
}

/// Opens the primary context of GPU `ordinal` for one stream's use. A fault in an earlier
/// kernel of this process (an illegal address, a trap) leaves the context in a sticky
/// error state that the driver clears only when the process ends (measured on the H200
/// with driver 580: after `cuDevicePrimaryCtxReset`, and in a new non-primary context, a
/// new context still fails with `CUDA_ERROR_LAUNCH_FAILED`), so that case is an error that
/// says so. No reset is attempted: it would destroy the allocations of every other user of
/// the primary context in the process.
pub(crate) fn open_context(ordinal: usize) -> Result<Arc<CudaContext>, String> {
    let unusable = |e: DriverError| {
        format!(
            "GPU {ordinal}'s context is unusable ({e:?}), most likely after a device fault earlier in this \
             process; CUDA clears that only when the process ends: start a new process"
        )
    };
    let ctx = CudaContext::new(ordinal).map_err(unusable)?;
    ctx.synchronize().map_err(unusable)?;
    single_stream(&ctx);
    Ok(ctx)
}

fn single_stream(ctx: &CudaContext) {
    // One stream, whose work runs in issue order (launches, copies, stream-ordered frees):
    // the safe layer's per-buffer event tracking would only add work.
    // SAFETY: the backend issues all its work on the context's default stream; users of
    // `Cuda::context()` who add streams synchronise with it themselves (documented there).
    unsafe { ctx.disable_event_tracking() };
}

/// Host words that the device can write through a mapped address (the abort status, read
/// after a launch without a copy).
pub(crate) struct MappedWords {
    /// Owns the allocation `words` points into.
    _host: PinnedHostSlice<u32>,
    /// The words, read and written directly: the safe slice accessors synchronise an event
    /// on every call, two driver calls a launch that the stream's synchronisation makes
    /// unnecessary.
    words: *mut u32,
    len: usize,
    device: u64,
}

// SAFETY: `words` points into `_host`, which this value owns and which is `Send`; nothing
// else holds the pointer on the host.
unsafe impl Send for MappedWords {}

impl MappedWords {
    /// `n` zeroed words, mapped into `ctx`'s address space.
    pub fn new(ctx: &Arc<CudaContext>, n: usize) -> Result<Self, DriverError> {
        // SAFETY: the words are zeroed below before anything reads them.
        let mut host = unsafe { ctx.alloc_pinned_with_flags::<u32>(n, sys::CU_MEMHOSTALLOC_DEVICEMAP) }?;
        let ptr = host.as_mut_ptr()?;
        // SAFETY: `ptr` addresses `n` words of this fresh allocation.
        unsafe { std::ptr::write_bytes(ptr, 0, n) };
        let mut device = 0u64;
        // SAFETY: `ptr` is a live DEVICEMAP allocation of this context.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, ptr as *mut c_void, 0) }.result()?;
        Ok(MappedWords { _host: host, words: ptr, len: n, device })
    }

    /// The address kernels write through.
    pub fn device_ptr(&self) -> u64 {
        self.device
    }

    /// Word `i` (read once the launch that owns it has finished, so every kernel write to
    /// it has landed); `None` past the end.
    pub fn get(&self, i: usize) -> Option<u32> {
        // SAFETY: `i < len` words of the live allocation; volatile, since the device
        // writes the word behind the compiler's back.
        (i < self.len).then(|| unsafe { self.words.add(i).read_volatile() })
    }

    /// Sets word `i` (before the launch that will own it, while no kernel in flight owns
    /// it); `false` past the end.
    pub fn set(&mut self, i: usize, v: u32) -> bool {
        if i >= self.len {
            return false;
        }
        // SAFETY: as in `get`; the launch that follows is ordered after this host write.
        unsafe { self.words.add(i).write_volatile(v) };
        true
    }
}

/// Copies `src` to device address `dst` on `stream`, ordered after the stream's earlier
/// work and before its later work. `src` may be reused once this returns: the driver
/// stages pageable host memory before it returns.
///
/// # Safety
/// `dst` must address at least `src.len()` bytes of a live allocation of `stream`'s
/// context that nothing reads or writes outside `stream`'s order until the stream is
/// synchronised.
pub(crate) unsafe fn copy_to_device(dst: u64, src: &[u8], stream: &CudaStream) -> Result<(), DriverError> {
    if src.is_empty() {
        return Ok(());
    }
    // SAFETY: forwarded to the caller.
    unsafe { result::memcpy_htod_async(dst, src, stream.cu_stream()) }
}

/// Copies `bytes` bytes from device address `src` to device address `dst` on `stream`,
/// in its order.
///
/// # Safety
/// `src` and `dst` must each address at least `bytes` bytes of live allocations of
/// `stream`'s context, must not overlap, and `dst` must not be read or written outside
/// `stream`'s order until the stream is synchronised.
pub(crate) unsafe fn copy_on_device(dst: u64, src: u64, bytes: usize, stream: &CudaStream) -> Result<(), DriverError> {
    if bytes == 0 {
        return Ok(());
    }
    // SAFETY: forwarded to the caller.
    unsafe { result::memcpy_dtod_async(dst, src, bytes, stream.cu_stream()) }
}

/// Copies `dst.len()` words from device address `src` (synchronously).
///
/// # Safety
/// `src` must address at least `dst.len()` words of a live allocation of the current
/// context, and no kernel may be writing them.
pub(crate) unsafe fn copy_words_to_host(dst: &mut [u32], src: u64) -> Result<(), DriverError> {
    if dst.is_empty() {
        return Ok(());
    }
    // SAFETY: forwarded to the caller.
    unsafe { result::memcpy_dtoh_sync(dst, src) }
}

/// Launches `function` cooperatively (every CTA co-resident) with the parameters
/// `(const et::Runtime, const EtArgs)` and `smem` bytes of dynamic shared memory per CTA.
///
/// # Safety
/// `function` must be a megakernel's `et_main` built from the same ABI as [`Runtime`] and
/// `args` (the `EtArgs` block); every device address inside them must be a live
/// allocation of `stream`'s context that stays live until the stream is synchronised;
/// `grid` CTAs of `block` threads and `smem` bytes must fit co-resident, and `smem` must
/// not exceed the function's `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
pub(crate) unsafe fn launch_cooperative(
    function: &CudaFunction,
    grid: u32,
    block: u32,
    smem: u32,
    stream: &CudaStream,
    rt: &Runtime,
    args: &[u8],
) -> Result<(), DriverError> {
    // the driver copies the parameters at the call and never writes through these
    let mut params: [*mut c_void; 2] = [rt as *const Runtime as *mut c_void, args.as_ptr() as *mut c_void];
    // SAFETY: forwarded to the caller; `params` points at the two parameters.
    unsafe {
        result::launch_cooperative_kernel(
            function.cu_function(),
            (grid, 1, 1),
            (block, 1, 1),
            smem,
            stream.cu_stream(),
            &mut params,
        )
    }
}

/// NVRTC's version.
pub(crate) fn nvrtc_version() -> Result<(i32, i32), NvrtcError> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two ints; callers checked that NVRTC is loadable.
    unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) }.result()?;
    Ok((major, minor))
}

/// An NVRTC program, destroyed on drop.
pub(crate) struct Program(nvrtc_sys::nvrtcProgram);

impl Program {
    /// A program of `source`, named `file` in diagnostics.
    pub fn new(source: &CStr, file: &CStr) -> Result<Self, NvrtcError> {
        nvrtc::create_program(source, Some(file)).map(Program)
    }

    /// Compiles with `options`; on failure or success, NVRTC's log.
    pub fn compile(&self, options: &[String]) -> (Result<(), NvrtcError>, String) {
        // SAFETY: `self.0` is a live program.
        let compiled = unsafe { nvrtc::compile_program(self.0, options) };
        // SAFETY: as above.
        let log = unsafe { nvrtc::get_program_log(self.0) }.map(|l| c_chars_to_string(&l)).unwrap_or_default();
        (compiled, log)
    }

    /// The CUBIN of a compiled program.
    pub fn cubin(&self) -> Result<Vec<u8>, NvrtcError> {
        let mut size = 0usize;
        // SAFETY: `self.0` is live; NVRTC reports an error for an uncompiled program.
        unsafe { nvrtc_sys::nvrtcGetCUBINSize(self.0, &mut size) }.result()?;
        let mut buf = vec![0u8; size];
        // SAFETY: `buf` holds `size` bytes.
        unsafe { nvrtc_sys::nvrtcGetCUBIN(self.0, buf.as_mut_ptr() as *mut c_char) }.result()?;
        Ok(buf)
    }

    /// The NUL-terminated PTX of a compiled program.
    pub fn ptx(&self) -> Result<Vec<u8>, NvrtcError> {
        // SAFETY: `self.0` is live; NVRTC reports an error for an uncompiled program.
        Ok(unsafe { nvrtc::get_ptx(self.0) }?.iter().map(|&c| c as u8).collect())
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by create_program, destroyed once.
        let _ = unsafe { nvrtc::destroy_program(self.0) };
    }
}

fn c_chars_to_string(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Loads the shared library at `path` for the life of the process, if it loads.
pub(crate) fn preload(path: &std::path::Path) {
    // SAFETY: only NVRTC's libraries are loaded this way, whose initialisers have no
    // preconditions; the library is never unloaded, so nothing can dangle.
    if let Ok(l) = unsafe { libloading::Library::new(path) } {
        std::mem::forget(l);
    }
}
