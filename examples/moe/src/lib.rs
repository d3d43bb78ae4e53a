//! A mixture-of-experts layer shaped like Qwen3-30B-A3B's (hidden 2048, 128 experts, top-8,
//! expert intermediate 768; bf16 storage, f32 accumulation) for et.
//!
//! Here:
//! - [`config`]: the shapes (`qwen3-moe`, `tiny`) and the capacity layout's sizes;
//! - [`weights`]: seeded random router and expert weights, and the input tokens with
//!   routing skew ([`weights::tokens`]);
//! - [`reference`](mod@reference): the layer as plain sequential Rust (router, top-k,
//!   experts, combine) with the rounding points of the GPU kernels: the oracle;
//! - [`host`]: the layer's dataflow in the capacity layout, each stage one call of et's
//!   tile ops (router GEMV, `router_topk`, `moe_group`, `moe_gather`, `matvec_silu`,
//!   `matvec`, `moe_combine`) on host tensors: what the megakernel's tasks compute, in an
//!   order that satisfies its events; equal to the reference bit for bit;
//! - `layer.rs`: the layer as ONE `#[megakernel]` with routing decided inside the launch
//!   (data-dependent tile groups and signals), one per layer shape serving every token
//!   count (symbolic `T`);
//! - the `moe` binary (`src/main.rs`).

pub mod config;
pub mod host;
pub mod layer;
pub mod reference;
pub mod weights;

pub use config::MoeConfig;
pub use reference::{Output, Reference};
pub use weights::MoeWeights;
