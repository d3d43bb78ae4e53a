//! Finding the CUDA libraries without panicking (cudarc panics on a missing library when
//! it is first used, so every entry point asks here first).

use et_core::Error;

use crate::driver::{driver_present, nvrtc_present, preload};

/// Whether libcuda (the driver) can be loaded; the error says what is missing.
pub fn driver_available() -> Result<(), Error> {
    if driver_present() {
        Ok(())
    } else {
        Err(Error::Unavailable(
            "the CUDA driver library (libcuda.so) was not found: no NVIDIA driver is installed, or it is not on the loader path".into(),
        ))
    }
}

/// Whether libnvrtc can be loaded; the error says how to get it.
///
/// Besides the loader path, looks in `ET_NVRTC_DIR` (for instance the `nvidia/cu13/lib`
/// directory of PyPI's `nvidia-cuda-nvrtc`): libraries found there are loaded first, so
/// that cudarc's lookup by name finds them already in the process.
pub fn nvrtc_available() -> Result<(), Error> {
    if nvrtc_present() {
        return Ok(());
    }
    if let Some(dir) = std::env::var_os("ET_NVRTC_DIR") {
        let dir = std::path::Path::new(&dir);
        // the builtins first: libnvrtc opens them by name when it compiles
        for lib in ["libnvrtc-builtins.so.13.0", "libnvrtc.so.13"] {
            preload(&dir.join(lib));
        }
    }
    if nvrtc_present() {
        Ok(())
    } else {
        Err(Error::Unavailable(
            "NVRTC (libnvrtc.so.13) was not found: install the CUDA 13 toolkit, or `pip install nvidia-cuda-nvrtc==13.0.88` and put its nvidia/cu13/lib directory in ET_NVRTC_DIR or on LD_LIBRARY_PATH (scripts/test does this)".into(),
        ))
    }
}
