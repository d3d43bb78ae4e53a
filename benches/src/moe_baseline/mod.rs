//! The kernel-per-operator baseline of the MoE layer (`moe`): the layer's tile ops on the
//! layer's tiles (`moe::layer`), each stage launched as its own plain CUDA kernel from Rust
//! through cudarc, one CTA per tile, on one stream.
//!
//! Two ways to issue a layer ([`Mode`]):
//! - [`Mode::HostSync`], the grouped-by-expert formulation PyTorch users run: router, top-k
//!   and grouping kernels, then the host **synchronises and reads the per-expert token
//!   counts**, then launches gather, gate/up and down for each expert that got tokens,
//!   over its non-empty token tiles only, then the combine. The sync is the point: what a
//!   framework pays to size its launches from routing data.
//! - [`Mode::Capacity`]: no host sync; one launch per stage over every expert's token tiles
//!   at capacity, each CTA reading `counts[e]` and exiting at once where its tile is empty
//!   (the `_cap` kernels of [`source`]). Its launches are fixed, as a CUDA graph needs.
//!
//! Here: [`source`] (the CUDA translation unit and the stage table), [`launch`] (the
//! launcher, [`MoeBaseline`]), [`floor`] (the bytes a layer must read), [`report`] (rows,
//! table, JSON lines) and [`torch`] (reading `moe_torch.py`'s output).

pub mod floor;
pub mod launch;
pub mod report;
pub mod source;
pub mod torch;

pub use launch::{Mode, MoeBaseline, RunResult};
pub use source::{Stage, cuda_source, stages};
