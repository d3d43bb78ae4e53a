//! NVRTC compilation of megakernels, with an on-disk cache keyed by source, options,
//! NVRTC version and architecture, and an in-process cache in front of it.

use std::collections::HashMap;
use std::ffi::{CString, c_char};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::nvrtc::{result as nvrtc, sys};
use et_core::{Error, Kernel};

use crate::availability::nvrtc_available;

/// What NVRTC produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    /// Machine code for the exact architecture.
    Cubin,
    /// PTX, compiled by the driver at load (the fallback route).
    Ptx,
}

/// A compiled kernel image.
#[derive(Debug)]
pub struct CompileOutput {
    /// The image (CUBIN bytes, or NUL-terminated PTX text).
    pub image: Vec<u8>,
    /// CUBIN or PTX.
    pub kind: ImageKind,
    /// NVRTC's log (warnings), empty when there were none.
    pub log: String,
    /// Whether it came from the disk cache rather than NVRTC.
    pub from_disk_cache: bool,
    /// Seconds spent (compiling, or reading the cache).
    pub seconds: f64,
}

/// Compiles CUDA C++ to CUBIN for one architecture, with caches.
pub struct Compiler {
    arch: String,
    image: ImageKind,
    version: (i32, i32),
    cache_dir: Option<PathBuf>,
    memory: Mutex<HashMap<String, Arc<CompileOutput>>>,
    compilations: AtomicUsize,
}

impl std::fmt::Debug for Compiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Compiler({}, NVRTC {}.{})", self.arch, self.version.0, self.version.1)
    }
}

impl Compiler {
    /// A compiler for `arch` (`"sm_90a"`, `"sm_90"`, ...). Errors when NVRTC is missing.
    pub fn new(arch: &str) -> Result<Self, Error> {
        nvrtc_available()?;
        let (mut major, mut minor) = (0, 0);
        // SAFETY: NVRTC is loadable (checked above); writes two ints.
        unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
            .result()
            .map_err(|e| Error::Unavailable(format!("NVRTC did not report its version: {e:?}")))?;
        Ok(Compiler {
            arch: arch.to_string(),
            image: ImageKind::Cubin,
            version: (major, minor),
            cache_dir: cache_dir(),
            memory: Mutex::new(HashMap::new()),
            compilations: AtomicUsize::new(0),
        })
    }

    /// Produces PTX for the driver to compile at load, instead of CUBIN: for a GPU newer
    /// than this NVRTC knows, or to inspect the PTX.
    pub fn with_ptx(mut self) -> Self {
        self.image = ImageKind::Ptx;
        self
    }

    /// Uses `dir` as the on-disk cache (created if needed), or no disk cache with `None`,
    /// instead of `ET_CACHE_DIR` / the user's cache directory.
    pub fn with_cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.cache_dir = dir.filter(|d| std::fs::create_dir_all(d).is_ok());
        self
    }

    /// The target architecture.
    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// NVRTC's version.
    pub fn nvrtc_version(&self) -> (i32, i32) {
        self.version
    }

    /// The on-disk cache directory, if one is usable.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache_dir.as_deref()
    }

    /// How many times this compiler ran NVRTC (cache hits do not count).
    pub fn compilations(&self) -> usize {
        self.compilations.load(Ordering::Relaxed)
    }

    fn options(&self, kind: ImageKind) -> Vec<String> {
        let arch = match kind {
            ImageKind::Cubin => self.arch.clone(),
            ImageKind::Ptx => self.arch.replace("sm_", "compute_"),
        };
        vec![format!("--gpu-architecture={arch}"), "-std=c++17".into(), "-lineinfo".into(), "-default-device".into()]
    }

    /// Compiles a megakernel (in-process cache, then disk cache, then NVRTC). Returns the
    /// image and whether NVRTC ran.
    pub fn compile_kernel(&self, kernel: &Kernel) -> Result<(Arc<CompileOutput>, bool), Error> {
        let source = kernel.cuda_source();
        self.compile_source(kernel.name(), &source).map_err(|e| match e {
            Error::Compile { log, .. } => Error::Compile {
                kernel: kernel.name().to_string(),
                log: format!(
                    "{log}\n(the generated source is `{}::KERNEL.cuda_source()`; set ET_DUMP_CUDA=dir to write it out)",
                    kernel.module_path
                ),
            },
            other => other,
        })
    }

    /// Compiles CUDA C++ source `source` (named `name` in messages) with caches.
    pub fn compile_source(&self, name: &str, source: &str) -> Result<(Arc<CompileOutput>, bool), Error> {
        if let Some(dir) = std::env::var_os("ET_DUMP_CUDA") {
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::write(Path::new(&dir).join(format!("{name}.cu")), source);
        }
        let key = self.cache_key(source, self.image);
        if let Some(hit) = self.memory.lock().unwrap().get(&key) {
            return Ok((hit.clone(), false));
        }
        let t0 = Instant::now();
        if let Some(out) = self.read_disk(&key) {
            let out = Arc::new(CompileOutput { seconds: t0.elapsed().as_secs_f64(), ..out });
            self.memory.lock().unwrap().insert(key, out.clone());
            return Ok((out, false));
        }
        let out = match self.nvrtc(name, source, self.image) {
            Ok(out) => out,
            // an NVRTC that cannot emit this architecture's machine code: PTX for the driver
            Err(Error::Compile { log, .. }) if log.contains("invalid value for --gpu-architecture") => {
                self.nvrtc(name, source, ImageKind::Ptx)?
            }
            Err(e) => return Err(e),
        };
        self.compilations.fetch_add(1, Ordering::Relaxed);
        let out = Arc::new(CompileOutput { seconds: t0.elapsed().as_secs_f64(), ..out });
        self.write_disk(&key, &out);
        self.memory.lock().unwrap().insert(key, out.clone());
        Ok((out, true))
    }

    fn nvrtc(&self, name: &str, source: &str, kind: ImageKind) -> Result<CompileOutput, Error> {
        let err = |what: &str, e: nvrtc::NvrtcError| Error::Compile {
            kernel: name.to_string(),
            log: format!("{what}: {e:?}"),
        };
        let src = CString::new(source)
            .map_err(|_| Error::Compile { kernel: name.into(), log: "source contains a NUL byte".into() })?;
        let file = CString::new(format!("{name}.cu")).expect("no NUL in a kernel name");
        let prog = nvrtc::create_program(&src, Some(&file)).map_err(|e| err("nvrtcCreateProgram", e))?;
        struct Program(sys::nvrtcProgram);
        impl Drop for Program {
            fn drop(&mut self) {
                // SAFETY: created by create_program, destroyed once.
                let _ = unsafe { nvrtc::destroy_program(self.0) };
            }
        }
        let prog = Program(prog);
        let options = self.options(kind);
        // SAFETY: `prog` is a live program.
        let compiled = unsafe { nvrtc::compile_program(prog.0, &options) };
        // SAFETY: as above.
        let log = unsafe { nvrtc::get_program_log(prog.0) }.map(|l| c_chars_to_string(&l)).unwrap_or_default();
        if compiled.is_err() {
            return Err(Error::Compile { kernel: name.to_string(), log });
        }
        let image = match kind {
            // SAFETY: the program compiled.
            ImageKind::Cubin => unsafe { cubin(prog.0) }.map_err(|e| err("nvrtcGetCUBIN", e))?,
            // SAFETY: the program compiled.
            ImageKind::Ptx => {
                unsafe { nvrtc::get_ptx(prog.0) }.map_err(|e| err("nvrtcGetPTX", e))?.iter().map(|&c| c as u8).collect()
            }
        };
        Ok(CompileOutput { image, kind, log: log.trim().to_string(), from_disk_cache: false, seconds: 0.0 })
    }

    fn cache_key(&self, source: &str, kind: ImageKind) -> String {
        let material = format!(
            "{source}\0{}\0nvrtc {}.{}\0{}\0{kind:?}",
            self.options(kind).join(" "),
            self.version.0,
            self.version.1,
            self.arch
        );
        format!(
            "{:016x}{:016x}",
            fnv1a(material.as_bytes(), 0xcbf2_9ce4_8422_2325),
            fnv1a(material.as_bytes(), 0x6c62_272e_07bb_0142)
        )
    }

    fn read_disk(&self, key: &str) -> Option<CompileOutput> {
        let path = self.cache_dir.as_ref()?.join(format!("{key}.cubin"));
        let image = std::fs::read(path).ok()?;
        (!image.is_empty()).then_some(CompileOutput {
            image,
            kind: ImageKind::Cubin,
            log: String::new(),
            from_disk_cache: true,
            seconds: 0.0,
        })
    }

    fn write_disk(&self, key: &str, out: &CompileOutput) {
        let Some(dir) = &self.cache_dir else { return };
        if out.kind != ImageKind::Cubin {
            return;
        }
        // write then rename, so that a concurrent reader never sees half a file
        let tmp = dir.join(format!("{key}.{}.tmp", std::process::id()));
        if std::fs::write(&tmp, &out.image).is_ok() {
            let _ = std::fs::rename(&tmp, dir.join(format!("{key}.cubin")));
        }
    }
}

/// # Safety
/// `prog` must be a successfully compiled program.
unsafe fn cubin(prog: sys::nvrtcProgram) -> Result<Vec<u8>, nvrtc::NvrtcError> {
    let mut size = 0usize;
    // SAFETY: forwarded.
    unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) }.result()?;
    let mut buf = vec![0u8; size];
    // SAFETY: `buf` holds `size` bytes.
    unsafe { sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut c_char) }.result()?;
    Ok(buf)
}

fn c_chars_to_string(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn fnv1a(bytes: &[u8], seed: u64) -> u64 {
    bytes.iter().fold(seed, |h, &b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

/// `ET_CACHE_DIR`, else `$XDG_CACHE_HOME/et`, else `$HOME/.cache/et`; `None` when it
/// cannot be created (the cache is then in-process only).
fn cache_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("ET_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("et")))
        .or_else(|| std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache").join("et")))?;
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir)
}

/// Compiles `kernel` for `arch` with a fresh [`Compiler`] (cache included): the entry
/// point of tools and of CI's compile-every-kernel test.
pub fn compile(kernel: &Kernel, arch: &str) -> Result<Arc<CompileOutput>, Error> {
    Ok(Compiler::new(arch)?.compile_kernel(kernel)?.0)
}
