//! Llama 3 for et: everything of the decode megakernel example that does not need the DSL.
//!
//! Here:
//! - [`config`]: model shapes, the presets `tiny`, `llama-3.2-1b`, `llama-3.1-8b`, and
//!   Hugging Face `config.json` parsing (transformers 4 and 5);
//! - [`rope`]: Llama 3's scaled RoPE frequencies and the rotate-half rotation;
//! - [`weights`]: the parameters, stacked per layer (`[L, ..]`) in bf16, random from a
//!   seed; [`checkpoint`]: loading and saving Hugging Face safetensors directories;
//! - [`reference`](mod@reference): a sequential CPU reference of one decode step over a [`KvCache`],
//!   with the bf16 rounding points a GPU implementation has, and greedy generation;
//!   [`ops`]: its arithmetic;
//! - [`npy`]: `.npy` output for logits;
//! - [`decode`](mod@decode): the decode step of all layers as ONE `#[megakernel]` (the
//!   layer index in the tile domain, tile-level events), stamped per model shape and batch
//!   size, built from et's library ops alone; [`decoder`]: running it on a
//!   backend ([`Decoder`]: weights packed and uploaded once, one launch per step, greedy
//!   generation), checked token for token against [`Reference`] in `tests/`;
//! - the `llama` binary (`src/main.rs`): greedy decoding from the command line.

pub mod checkpoint;
pub mod config;
pub mod decode;
pub mod decoder;
pub mod error;
pub mod kv_cache;
pub mod npy;
pub mod ops;
pub mod reference;
pub mod rope;
pub mod weights;

pub use config::{LlamaConfig, RopeScaling};
pub use decoder::{Decoder, Stamp, Step, Warmup};
pub use error::{Error, Result};
pub use kv_cache::KvCache;
pub use reference::{Generation, Reference};
pub use weights::LlamaWeights;

/// How far two correct computations of one step's logits may differ, as a fraction of the
/// largest logit: bf16 activations (8 significant bits) rounded at other points of sums
/// taken in another order (the CPU reference, the megakernel, the kernel-per-operator
/// baseline) move the logits by well under 2% of the largest.
pub const LOGIT_TOLERANCE: f32 = 2e-2;
