//! Megakernels as the macro emits them, and the registry of all of them.

use et_graph::GraphSpec;

use crate::raw::RawTensor;

/// The CPU implementation of one tile group: runs one task (waits, ops, signals).
pub type CpuTaskFn = fn(&crate::cpu::TaskContext<'_>);

/// A megakernel: its task graph, the CPU body of each tile group and its CUDA source.
/// `#[megakernel]` emits one as a `static`.
#[derive(Debug)]
pub struct Kernel {
    /// The task-graph description.
    pub graph: GraphSpec,
    /// One CPU task function per tile group, in group order.
    pub cpu_tasks: &'static [CpuTaskFn],
    /// The CUDA side.
    pub cuda: CudaSource,
    /// `module_path!()` of the definition.
    pub module_path: &'static str,
    /// `file!()` of the definition.
    pub file: &'static str,
}

/// The parts of a megakernel's CUDA source.
#[derive(Debug)]
pub struct CudaSource {
    /// Generated text: arguments struct, one device function per tile group, and the
    /// persistent entry point `et_main`. Carries `#line` directives into the user's file.
    pub body: &'static str,
    /// CUDA text of the tile ops the body calls, in first-use order.
    pub ops: &'static [&'static str],
    /// Threads per CTA.
    pub block_threads: u32,
}

/// The runtime prelude every kernel is compiled with (types, tiles, event protocol).
pub const CUDA_PRELUDE: &str = include_str!("cuda/prelude.cuh");

impl Kernel {
    /// The megakernel's name.
    pub fn name(&self) -> &str {
        &self.graph.name
    }

    /// The complete CUDA translation unit: prelude, the ops (each once), the body.
    pub fn cuda_source(&self) -> String {
        let mut src = String::with_capacity(CUDA_PRELUDE.len() + self.cuda.body.len() + 4096);
        src.push_str(CUDA_PRELUDE);
        let mut seen: Vec<&str> = Vec::new();
        for op in self.cuda.ops {
            if !seen.contains(op) {
                seen.push(op);
                src.push_str("\n#line 1 \"<et tile op>\"\n");
                src.push_str(op);
            }
        }
        src.push('\n');
        src.push_str(self.cuda.body);
        src
    }

    /// Checks that the launch arguments have the declared dtypes (the generated
    /// `launch` makes this true by construction; this guards hand-made calls).
    pub fn check_dtypes(&self, args: &[RawTensor]) -> crate::Result<()> {
        if args.len() != self.graph.tensors.len() {
            return Err(crate::Error::Shape(format!(
                "megakernel `{}` takes {} tensors, {} were given",
                self.name(),
                self.graph.tensors.len(),
                args.len()
            )));
        }
        for (t, a) in self.graph.tensors.iter().zip(args) {
            if t.dtype != a.dtype {
                return Err(crate::Error::Shape(format!(
                    "tensor `{}` of megakernel `{}` is declared {}, but a {} tensor was given",
                    t.name,
                    self.name(),
                    t.dtype,
                    a.dtype
                )));
            }
        }
        Ok(())
    }
}

/// A registration of a megakernel in the process-wide registry (through `inventory`).
#[derive(Debug)]
pub struct KernelRegistration(pub &'static Kernel);

inventory::collect!(KernelRegistration);

/// Every megakernel linked into this program, sorted by module path and name.
///
/// `inventory` only sees crates that the program actually links: name your kernel
/// crates (`use my_kernels as _;`) in binaries that need their kernels registered.
pub fn registered_kernels() -> Vec<&'static Kernel> {
    let mut v: Vec<&'static Kernel> = inventory::iter::<KernelRegistration>.into_iter().map(|r| r.0).collect();
    v.sort_by_key(|k| (k.module_path, k.name()));
    v
}
