//! The backend-neutral description of a megakernel, and the registry of all of them.

use std::borrow::Cow;

use et_graph::GraphSpec;

use crate::abi::ArgsLayout;
use crate::backend::KernelEntry;
use crate::raw::RawTensor;

/// A megakernel as data: its task graph, its CUDA source and where it was defined.
/// `#[megakernel]` emits one as a `static`; tests build them at run time. What each
/// backend runs beside it (the CPU task functions) travels in a [`KernelEntry`].
#[derive(Clone, Debug)]
pub struct Kernel {
    /// The task-graph description.
    pub graph: GraphSpec,
    /// The CUDA side.
    pub cuda: CudaSource,
    /// `module_path!()` of the definition.
    pub module_path: &'static str,
    /// `file!()` of the definition.
    pub file: &'static str,
}

/// The parts of a megakernel's CUDA source.
#[derive(Clone, Debug)]
pub struct CudaSource {
    /// Generated text: one device function per tile group and the persistent entry point
    /// `et_main`. Carries `#line` directives into the user's file.
    pub body: Cow<'static, str>,
    /// CUDA text of the tile ops the body calls, in first-use order.
    pub ops: &'static [&'static str],
    /// Threads per CTA.
    pub block_threads: u32,
}

/// The runtime code every kernel is compiled with (scalar types, tiles, the event
/// protocol); [`cuda_prelude`] puts the ABI's declarations in front of it.
const PRELUDE_CODE: &str = include_str!("cuda/prelude.cuh");

/// What every kernel's translation unit starts with: the declarations of the kernel ABI
/// ([`crate::abi::c_declarations`]) and the runtime prelude.
pub fn cuda_prelude() -> String {
    let mut s = crate::abi::c_declarations();
    s.push_str("#line 1 \"et-core/src/cuda/prelude.cuh\"\n");
    s.push_str(PRELUDE_CODE);
    s
}

impl Kernel {
    /// The megakernel's name.
    pub fn name(&self) -> &str {
        &self.graph.name
    }

    /// The complete CUDA translation unit: the ABI and the prelude, the ops (each once),
    /// this kernel's `EtArgs`, the body.
    pub fn cuda_source(&self) -> String {
        let mut src = cuda_prelude();
        let mut seen: Vec<&str> = Vec::new();
        for op in self.cuda.ops {
            if !seen.contains(op) {
                seen.push(op);
                src.push_str("\n#line 1 \"<et tile op>\"\n");
                src.push_str(op);
            }
        }
        src.push_str(&ArgsLayout::new(&self.graph).c_declaration());
        src.push_str(&self.cuda.body);
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
pub struct KernelRegistration(pub &'static KernelEntry<'static>);

inventory::collect!(KernelRegistration);

/// Every megakernel linked into this program, sorted by module path and name.
///
/// `inventory` only sees crates that the program actually links: name your kernel
/// crates (`use my_kernels as _;`) in binaries that need their kernels registered.
pub fn registered_kernels() -> Vec<KernelEntry<'static>> {
    let mut v: Vec<KernelEntry<'static>> = inventory::iter::<KernelRegistration>.into_iter().map(|r| *r.0).collect();
    v.sort_by_key(|k| (k.kernel.module_path, k.kernel.name()));
    v
}
