//! The passing ui programs as a library, so that other test binaries (the NVRTC compile
//! test, the GPU tests in `et-device`) can link their megakernels and run their checks.
//! `trybuild` compiles the same files one by one as programs.
#![allow(missing_docs)]

#[path = "../tests/ui/pass/chain_dynamic.rs"]
pub mod chain_dynamic;
#[path = "../tests/ui/pass/decode_ops.rs"]
pub mod decode_ops;
#[path = "../tests/ui/pass/gemv_chain.rs"]
pub mod gemv_chain;
#[path = "../tests/ui/pass/layer_loop.rs"]
pub mod layer_loop;
#[path = "../tests/ui/pass/moe_routing.rs"]
pub mod moe_routing;
#[path = "../tests/ui/pass/names_like_module_items.rs"]
pub mod names_like_module_items;
#[path = "../tests/ui/pass/op_paths.rs"]
pub mod op_paths;
#[path = "../tests/ui/pass/op_same_name.rs"]
pub mod op_same_name;
#[path = "../tests/ui/pass/prefetch_diamond.rs"]
pub mod prefetch_diamond;
#[path = "../tests/ui/pass/ranges.rs"]
pub mod ranges;
#[path = "../tests/ui/pass/raw_and_non_ascii_names.rs"]
pub mod raw_and_non_ascii_names;
#[path = "../tests/ui/pass/scalar_index_arguments.rs"]
pub mod scalar_index_arguments;
#[path = "../tests/ui/pass/split_row_sum.rs"]
pub mod split_row_sum;
#[path = "../tests/ui/pass/static_dims_counts.rs"]
pub mod static_dims_counts;
#[path = "../tests/ui/pass/symbolic_extents.rs"]
pub mod symbolic_extents;
