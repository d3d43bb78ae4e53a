//! `et-core`: the runtime of the `et` megakernel compiler.
//!
//! - [`Tensor`] and the element types ([`Element`]: `f32`, [`bf16`], [`f16`](struct@f16), `i32`, `u32`);
//! - the task-graph model ([`graph`], re-exported from `et-graph`): tile groups, event
//!   tensors, access maps, symbolic dims, static and dynamic schedules;
//! - the tile-op library ([`ops`]) and the [`tile_op!`] macro for your own ops;
//! - the [`Backend`] trait, the [`Cpu`] backend, and the registry of megakernels
//!   ([`registered_kernels`]).
//!
//! Write megakernels with [`megakernel`]; see the crate README for a tour.

pub mod abi;
pub mod backend;
pub mod calls;
pub mod cpu;
pub mod dtype;
pub mod error;
pub mod kernel;
pub mod op;
pub mod ops;
pub mod raw;
mod relaxed;
pub mod tensor;
pub mod tile;
pub mod trace;

/// The task-graph model and its analyses (the `et-graph` crate).
pub use et_graph as graph;

pub use backend::{Backend, BackendTensor, Deferral, KernelEntry, LaunchOptions, LaunchReport, Prepared};
pub use cpu::Cpu;
pub use dtype::{DType, Element, bf16, f16};
pub use error::{BlockedWait, Error, Result};
pub use et_graph::ScheduleKind;
pub use et_graph::schedule::Placement;
pub use et_macros::{event, megakernel, signal, tile, wait};
pub use kernel::{DEFAULT_THREADS, Kernel, KernelRegistration, cuda_prelude, registered_kernels};
pub use op::TileOp;
pub use raw::RawTensor;
pub use tensor::{Tensor, relative_error};
pub use tile::{InTensor, OutTensor, TileMut, TileRef};

/// What a megakernel file needs: `use et_core::prelude::*;`.
pub mod prelude {
    pub use crate::ops::*;
    pub use crate::{
        Backend, Cpu, DType, Deferral, Element, Error, LaunchOptions, Placement, ScheduleKind, Tensor, TileMut,
        TileRef, bf16, event, f16, megakernel, signal, tile, wait,
    };
}

/// Paths used by code that `#[megakernel]` generates. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::backend::{Backend, BackendTensor, KernelEntry, LaunchOptions, LaunchReport, copy_end, extents};
    pub use crate::cpu::{CpuTaskFn, TaskContext};
    pub use crate::error::Result;
    pub use crate::kernel::{CudaSource, Kernel, KernelRegistration};
    pub use crate::op::{ArgKind, Message, TileOp, call_error};
    pub use crate::raw::RawTensor;
    pub use crate::tile::{InTensor, OutTensor};
    pub use crate::{bf16, f16};
    pub use core::primitive::{f32, i32, u32};
    pub use et_graph::{
        Access, Affine, Cmp, Condition, Count, DType, DimKind, DimSpec, EventAccess, EventSpec, GraphSpec, GroupSpec,
        Index, ScheduleKind, TensorSpec, Term, TileAccess,
    };
    pub use inventory;
    pub use std::borrow::Cow;
}
