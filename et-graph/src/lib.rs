//! The task-graph description of an `et` megakernel, and the analyses over it.
//!
//! This crate is the one place that knows what a megakernel *means*: tile groups with
//! their domains, event tensors with shapes and trigger counts, and the access maps
//! (`wait!`/`signal!`) between them. Both sides of the system use it:
//!
//! - `et-macros` builds a [`GraphSpec`] from the user's `#[megakernel]` at compile time
//!   and runs the [`check`] rules over it, so that a bad dependency is a compile error;
//! - `et-core` receives the same [`GraphSpec`] as `static` data emitted by the macro,
//!   [`resolve`]s it against the real tensor shapes at launch, and builds the static
//!   and dynamic schedules from the resolved task graph ([`schedule`]).
//!
//! The types use `Cow<'static, _>` so that the macro can build them from owned data and
//! generated code can emit them as constants.

pub mod affine;
pub mod build;
pub mod check;
pub mod observed;
pub mod race;
pub mod ranking;
pub mod resolve;
pub mod schedule;
pub mod spec;

pub use affine::{Affine, Term};
pub use resolve::{ResolveError, Resolved, TaskId};
pub use spec::*;
