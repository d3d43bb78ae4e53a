//! NVRTC compilation of megakernels, with an on-disk cache keyed by source, options,
//! NVRTC version and architecture, and an in-process cache in front of it. Both caches
//! compare the full key: a cache file is named by a hash of the key but stores the key
//! itself, so that a hash collision reads as a miss, never as another kernel's binary.
//! Neither cache evicts: an entry is a few hundred kilobytes per distinct kernel source.

use std::collections::HashMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::nvrtc::result::NvrtcError;
use et_core::{Error, Kernel, ScheduleKind};

use crate::availability::nvrtc_available;
use crate::driver::{Program, nvrtc_version};

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

/// The extra NVRTC options of `ET_NVRTC_OPTIONS`, split at whitespace (none when unset):
/// what [`Compiler::new`] passes after its own.
pub fn env_options() -> Vec<String> {
    std::env::var("ET_NVRTC_OPTIONS").map(|v| v.split_whitespace().map(str::to_string).collect()).unwrap_or_default()
}

/// Compiles CUDA C++ to CUBIN for one architecture, with caches.
pub struct Compiler {
    arch: String,
    image: ImageKind,
    version: (i32, i32),
    cache_dir: Option<PathBuf>,
    /// Extra NVRTC options (`ET_NVRTC_OPTIONS`, split at whitespace), part of the cache key.
    extra_options: Vec<String>,
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
        let version =
            nvrtc_version().map_err(|e| Error::Unavailable(format!("NVRTC did not report its version: {e:?}")))?;
        Ok(Compiler {
            arch: arch.to_string(),
            image: ImageKind::Cubin,
            version,
            cache_dir: cache_dir(),
            extra_options: env_options(),
            memory: Mutex::new(HashMap::new()),
            compilations: AtomicUsize::new(0),
        })
    }

    /// Passes `options` to NVRTC after its own (`-D` macros, `-maxrregcount=N`, ...) instead
    /// of those of `ET_NVRTC_OPTIONS`; they are part of the cache key.
    pub fn with_extra_options(mut self, options: Vec<String>) -> Self {
        self.extra_options = options;
        self
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
        let mut options = vec![
            format!("--gpu-architecture={arch}"),
            "-std=c++17".into(),
            "-lineinfo".into(),
            "-default-device".into(),
        ];
        options.extend(self.extra_options.iter().cloned());
        options
    }

    /// Compiles the module of a megakernel that runs `schedule` (in-process cache, then
    /// disk cache, then NVRTC). Returns the image and whether NVRTC ran.
    pub fn compile_kernel(&self, kernel: &Kernel, schedule: ScheduleKind) -> Result<(Arc<CompileOutput>, bool), Error> {
        dump_requested(kernel)?;
        let source = kernel.cuda_source_for(schedule);
        self.compile_source(kernel.name(), &source).map_err(|e| match e {
            Error::Compile { log, .. } => Error::Compile {
                kernel: kernel.name().to_string(),
                log: format!(
                    "{log}\n(the generated source is `{}::KERNEL.cuda_source_for(ScheduleKind::{schedule:?})`; set \
                     ET_DUMP_CUDA=dir to write out the declared schedule's, which differs in its first line only)",
                    kernel.module_path
                ),
            },
            other => other,
        })
    }

    /// Compiles CUDA C++ source `source` (named `name` in messages) with caches.
    pub fn compile_source(&self, name: &str, source: &str) -> Result<(Arc<CompileOutput>, bool), Error> {
        let key = self.cache_key(source, self.image);
        if let Some(hit) = self.memory().get(&key) {
            return Ok((hit.clone(), false));
        }
        let t0 = Instant::now();
        if let Some(out) = self.read_disk(&key) {
            let out = Arc::new(CompileOutput { seconds: t0.elapsed().as_secs_f64(), ..out });
            self.memory().insert(key, out.clone());
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
        self.memory().insert(key, out.clone());
        Ok((out, true))
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<CompileOutput>>> {
        // a panic elsewhere cannot leave a half-inserted entry: recover the map
        self.memory.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn nvrtc(&self, name: &str, source: &str, kind: ImageKind) -> Result<CompileOutput, Error> {
        let err =
            |what: &str, e: NvrtcError| Error::Compile { kernel: name.to_string(), log: format!("{what}: {e:?}") };
        let nul = |_| Error::Compile { kernel: name.into(), log: "the source or its name contains a NUL byte".into() };
        let src = CString::new(source).map_err(nul)?;
        let file = CString::new(format!("{name}.cu")).map_err(nul)?;
        let prog = Program::new(&src, &file).map_err(|e| err("nvrtcCreateProgram", e))?;
        let (compiled, log) = prog.compile(&self.options(kind));
        if compiled.is_err() {
            return Err(Error::Compile { kernel: name.to_string(), log });
        }
        let image = match kind {
            ImageKind::Cubin => prog.cubin().map_err(|e| err("nvrtcGetCUBIN", e))?,
            ImageKind::Ptx => prog.ptx().map_err(|e| err("nvrtcGetPTX", e))?,
        };
        Ok(CompileOutput { image, kind, log: log.trim().to_string(), from_disk_cache: false, seconds: 0.0 })
    }

    /// The full key: everything the image depends on.
    fn cache_key(&self, source: &str, kind: ImageKind) -> String {
        format!(
            "{source}\0{}\0nvrtc {}.{}\0{}\0{kind:?}",
            self.options(kind).join(" "),
            self.version.0,
            self.version.1,
            self.arch
        )
    }

    fn disk_path(&self, key: &str) -> Option<PathBuf> {
        let name = format!(
            "{:016x}{:016x}",
            fnv1a(key.as_bytes(), 0xcbf2_9ce4_8422_2325),
            fnv1a(key.as_bytes(), 0x6c62_272e_07bb_0142)
        );
        Some(self.cache_dir.as_ref()?.join(format!("{name}.cubin")))
    }

    fn read_disk(&self, key: &str) -> Option<CompileOutput> {
        let file = std::fs::read(self.disk_path(key)?).ok()?;
        let image = cache_file_image(&file, key)?;
        (!image.is_empty()).then(|| CompileOutput {
            image: image.to_vec(),
            kind: ImageKind::Cubin,
            log: String::new(),
            from_disk_cache: true,
            seconds: 0.0,
        })
    }

    fn write_disk(&self, key: &str, out: &CompileOutput) {
        let Some(path) = self.disk_path(key) else { return };
        if out.kind != ImageKind::Cubin {
            return;
        }
        // write then rename, so that a concurrent reader never sees half a file
        let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
        if std::fs::write(&tmp, cache_file(key, &out.image)).is_ok() {
            let _ = std::fs::rename(&tmp, path);
        }
    }
}

/// A cache file: the key's length (8 bytes, little-endian), the key, the image.
fn cache_file(key: &str, image: &[u8]) -> Vec<u8> {
    let mut file = Vec::with_capacity(8 + key.len() + image.len());
    file.extend_from_slice(&(key.len() as u64).to_le_bytes());
    file.extend_from_slice(key.as_bytes());
    file.extend_from_slice(image);
    file
}

/// The image of a cache file written for `key`; `None` for another key (a collision of
/// the file name) or a file of another format.
fn cache_file_image<'f>(file: &'f [u8], key: &str) -> Option<&'f [u8]> {
    let len = u64::from_le_bytes(file.get(..8)?.try_into().ok()?) as usize;
    let stored = file.get(8..8usize.checked_add(len)?)?;
    (stored == key.as_bytes()).then(|| &file[8 + len..])
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

/// Compiles `kernel` for `arch` with a fresh [`Compiler`] (cache included), for tools
/// that compile one kernel outside a backend. Writes the source first when `ET_DUMP_CUDA`
/// asks, so that the dump works where NVRTC is absent.
pub fn compile(kernel: &Kernel, arch: &str) -> Result<Arc<CompileOutput>, Error> {
    dump_requested(kernel)?;
    Ok(Compiler::new(arch)?.compile_kernel(kernel, kernel.graph.schedule)?.0)
}

/// Writes `kernel`'s CUDA source to `dir` (created if needed) as one file per kernel,
/// named by the kernel's full path (`module::path::name.cu`, `::` written as `.`), so
/// that kernels of the same name in different modules do not collide. Returns the file.
pub fn dump_cuda(kernel: &Kernel, dir: &Path) -> Result<PathBuf, Error> {
    let path = dir.join(format!("{}.{}.cu", kernel.module_path.replace("::", "."), kernel.name()));
    let with_path = |what: &str, e: std::io::Error| {
        Error::Io(std::io::Error::new(e.kind(), format!("ET_DUMP_CUDA: {what} {}: {e}", path.display())))
    };
    std::fs::create_dir_all(dir).map_err(|e| with_path("creating the directory of", e))?;
    std::fs::write(&path, kernel.cuda_source()).map_err(|e| with_path("writing", e))?;
    Ok(path)
}

/// [`dump_cuda`] of every megakernel linked into the program into `ET_DUMP_CUDA`, when
/// it is set.
pub(crate) fn dump_registered() -> Result<(), Error> {
    et_core::registered_kernels().into_iter().try_for_each(|e| dump_requested(e.kernel))
}

/// [`dump_cuda`] into `ET_DUMP_CUDA`, when it is set.
fn dump_requested(kernel: &Kernel) -> Result<(), Error> {
    match std::env::var_os("ET_DUMP_CUDA") {
        Some(dir) => dump_cuda(kernel, Path::new(&dir)).map(drop),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod first {
        use et_core::prelude::*;
        #[megakernel]
        pub fn same_name(x: &Tensor<f32, { [N * 8] }>, y: &mut Tensor<f32, { [N * 8] }>) {
            tile!(t[i] in [N] {
                add(x.tile([i], [8]), x.tile([i], [8]), y.tile([i], [8]));
            });
        }
    }

    mod second {
        use et_core::prelude::*;
        #[megakernel]
        pub fn same_name(x: &Tensor<f32, { [N * 8] }>, y: &mut Tensor<f32, { [N * 8] }>) {
            tile!(t[i] in [N] {
                add(x.tile([i], [8]), x.tile([i], [8]), y.tile([i], [8]));
                add(x.tile([i], [8]), x.tile([i], [8]), y.tile([i], [8]));
            });
        }
    }

    #[test]
    fn dumps_are_one_file_per_kernel_named_by_its_path_without_nvrtc() {
        let dir = std::env::temp_dir().join(format!("et-dump-test-{}", std::process::id()));
        let kernels = [&first::same_name::KERNEL, &second::same_name::KERNEL];
        let files: Vec<PathBuf> = kernels.iter().map(|k| dump_cuda(k, &dir).unwrap()).collect();
        assert_ne!(files[0], files[1]);
        for (k, f) in kernels.iter().zip(&files) {
            assert!(
                f.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .ends_with(&format!("{}.same_name.cu", k.module_path.rsplit("::").next().unwrap()))
            );
            assert_eq!(std::fs::read_to_string(f).unwrap(), k.cuda_source());
        }
        // a directory that cannot be made: the error says it is ET_DUMP_CUDA's
        let err = dump_cuda(kernels[0], &files[0].join("not-a-dir")).unwrap_err().to_string();
        assert!(err.contains("ET_DUMP_CUDA"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_cache_file_serves_only_its_own_key() {
        let file = cache_file("source a\0sm_90a", b"\x7fELF image");
        assert_eq!(cache_file_image(&file, "source a\0sm_90a"), Some(&b"\x7fELF image"[..]));
        // the same file name reached by another key (a collision) is a miss
        assert_eq!(cache_file_image(&file, "source b\0sm_90a"), None);
        assert_eq!(cache_file_image(&file, "source a"), None);
        // a file of the old format (a bare image) or a truncated one is a miss
        assert_eq!(cache_file_image(b"\x7fELF old image", "source a\0sm_90a"), None);
        assert_eq!(cache_file_image(&file[..12], "source a\0sm_90a"), None);
    }
}
