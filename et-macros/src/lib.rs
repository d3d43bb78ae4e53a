//! `#[megakernel]`: the procedural macro of `et`. Use it through `et_core`
//! (`use et_core::prelude::*;`), which re-exports it.
//!
//! This crate is the thin proc-macro shim: the logic is the plain library `et_dsl`, on
//! `proc_macro2` tokens, so that tests and the `et-dump` tool can run it outside the
//! compiler. The markers `tile!`, `wait!`, `signal!` and `event!` live here because only
//! a proc-macro crate can export macros.

use proc_macro::TokenStream;

/// Turns a function of tensors, `event!`s and `tile!` groups into a megakernel: a module
/// of the same name with `launch`/`launch_with`, the `KERNEL` static (task graph, CPU
/// task functions, CUDA source) and its registration.
///
/// ```text
/// #[megakernel(schedule = "static", dims(S = 4), threads = 128)]
/// pub fn split_row_sum(a: &Tensor<f32, { [R * 32, 128] }>, part: &mut Tensor<f32, { [R * 32, 4] }>,
///                      c: &mut Tensor<f32, { [R * 32] }>) {
///     let done = event!([R]);
///     tile!(partial[i, j] in [R, 4] {
///         row_sum(a.tile([i, j], [32, 32]), part.tile([i, j], [32, 1]));
///         signal!(done[i]);
///     });
///     tile!(total[i] in [R] {
///         wait!(done[i]);
///         row_sum(part.tile([i, 0], [32, 4]), c.tile([i], [32]));
///     });
/// }
/// ```
///
/// Attribute arguments: `schedule = "static" | "dynamic"`, `dims(H = 2048, B <= 256)`
/// (static values and bounds of symbolic dims), `threads = 256` (CTA size),
/// `crate = "path"` (where `et_core` is), `debug` (print the expansion).
#[proc_macro_attribute]
pub fn megakernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    et_dsl::megakernel(attr.into(), item.into()).into()
}

fn outside(name: &str) -> TokenStream {
    let msg = format!("`{name}!` can only be used inside a `#[megakernel]` function");
    quote::quote!(::core::compile_error!(#msg)).into()
}

/// Declares a tile group inside a `#[megakernel]`: `tile!(name[i, j] in [D0, D1] { .. })`.
#[proc_macro]
pub fn tile(_: TokenStream) -> TokenStream {
    outside("tile")
}

/// Waits on event elements inside a `tile!` body: `wait!(e[i, ..])`.
#[proc_macro]
pub fn wait(_: TokenStream) -> TokenStream {
    outside("wait")
}

/// Signals event elements inside a `tile!` body: `signal!(e[i])`.
#[proc_macro]
pub fn signal(_: TokenStream) -> TokenStream {
    outside("signal")
}

/// Declares an event tensor inside a `#[megakernel]`: `let e = event!([R, 4]);`,
/// optionally with `count = 4` or `count = dyn(counts)`.
#[proc_macro]
pub fn event(_: TokenStream) -> TokenStream {
    outside("event")
}
