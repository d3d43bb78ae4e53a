//! The `#[megakernel]` DSL as a plain library on `proc_macro2` tokens. The proc macro
//! (`et-macros`) is a shim over [`megakernel`]; [`inspect`] runs the same path on a
//! source file outside the compiler, for the `et-dump` tool and for tests.
//!
//! The path: parse the attribute (`attr`) and the function into a typed model (`model`,
//! `parse`) → lower to the task-graph description and check every rule (`analyze`,
//! `lower`) → generate the host code (`host`) and the CUDA source (`cuda`). On errors,
//! `stub` emits the closest valid output beside them.

mod analyze;
mod attr;
mod cuda;
mod diag;
mod expand;
mod host;
mod inspect;
mod lower;
mod model;
mod parse;
mod render;
mod stub;
mod summary;

pub use expand::megakernel;
pub use inspect::{Diagnostic, Generated, Inspection, inspect};
pub use summary::summary;
