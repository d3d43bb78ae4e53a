//! The expansion pipeline on `proc_macro2` tokens: attribute → model → analysis →
//! generated code, with every error collected.

use proc_macro2::TokenStream;

use crate::analyze::Analyzed;
use crate::attr::Args;
use crate::diag::Errors;
use crate::model::Megakernel;

/// Expands `#[megakernel(attr)] item`: the megakernel's module, or the errors beside the
/// closest valid output (see `stub`).
pub fn megakernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    match check(attr, item) {
        Checked::Ok { args, model, analyzed } => {
            let (out, notes) = (crate::host::generate(&model, &analyzed, &args), &analyzed.notes);
            let out = quote::quote!(#notes #out);
            if args.debug {
                eprintln!("// #[megakernel] expansion of `{}`\n{out}", model.name);
            }
            out
        }
        Checked::Failed { args, model, errors } => {
            crate::stub::failed(errors.to_compile_error(), model.as_ref(), &args)
        }
    }
}

/// What the front end (attribute, model, rules) made of a megakernel.
pub(crate) enum Checked {
    /// Every rule holds: ready for code generation.
    Ok { args: Args, model: Megakernel, analyzed: Box<Analyzed> },
    /// Every error found, with what parsed (`model` is `None` if the item is no function).
    Failed { args: Args, model: Option<Megakernel>, errors: syn::Error },
}

/// Parses and checks `#[megakernel(attr)] item`, collecting every error.
pub(crate) fn check(attr: TokenStream, item: TokenStream) -> Checked {
    let mut errors = Errors::default();
    // an attribute too deep to parse safely is reported, and the defaults stand in
    let attr = crate::parse::check_nesting(&attr).map_or_else(
        |e| {
            errors.push(e);
            TokenStream::new()
        },
        |()| attr,
    );
    let args = crate::attr::parse(attr, &mut errors);
    let before_parse = errors.count();
    let model = match crate::parse::megakernel(item.clone(), &mut errors) {
        Ok(m) => m,
        Err(e) => {
            errors.push(e);
            return Checked::Failed { args, model: None, errors: errors.into_error() };
        }
    };
    // a parameter or statement that did not parse leaves names undefined: analysing
    // what is left would only add follow-on errors
    let parsed_cleanly = errors.count() == before_parse;
    // the item's nesting is checked by now: walking its tokens is safe
    check_dims_named(&args, &model, item, &mut errors);
    let analyzed = if parsed_cleanly { crate::analyze::analyze(&model, &args, &mut errors) } else { None };
    match analyzed {
        Some(analyzed) if errors.is_empty() => Checked::Ok { args, model, analyzed: Box::new(analyzed) },
        _ => Checked::Failed { args, model: Some(model), errors: errors.into_error() },
    }
}

/// Rule: a dim fixed in `dims(..)` that the function never names, where a parameter's
/// shape names the same word in another case, is a misspelling (`dims(n = 4)` for `N`), which
/// would leave the intended dim unbounded without a word. Other unnamed fixed dims are
/// accepted: a `macro_rules!` that stamps several megakernels from one config passes
/// dims that only some of them use. (An unnamed bounded dim, `n <= 4`, already fails the
/// graph's rule that a shape determines every symbolic dim.)
fn check_dims_named(args: &Args, model: &Megakernel, item: TokenStream, errors: &mut Errors) {
    let mut named = std::collections::HashSet::new();
    collect_idents(item, &mut named);
    let in_shapes: std::collections::HashSet<String> =
        model.params.iter().flat_map(|p| &p.shape).flat_map(crate::analyze::idents).map(|i| i.to_string()).collect();
    for dim in args.dims.iter().filter(|d| matches!(d.value, crate::attr::DimValue::Static(_))) {
        let name = dim.name.to_string();
        if named.contains(&name) {
            continue;
        }
        let given = |n: &String| args.dims.iter().any(|d| d.name == n.as_str());
        let mut other: Vec<&String> = in_shapes.iter().filter(|n| n.eq_ignore_ascii_case(&name) && !given(n)).collect();
        other.sort();
        if let Some(meant) = other.first() {
            errors.error(
                dim.name.span(),
                format!(
                    "dim `{name}` is given in `dims(..)` but the megakernel never names it, and the shapes' \
                     `{meant}` is not given a value: did you mean `{meant}`?"
                ),
            );
        }
    }
}

/// Every identifier in `tokens`, at any depth of groups (a loop with a stack of groups).
fn collect_idents(tokens: TokenStream, out: &mut std::collections::HashSet<String>) {
    let mut stack = vec![tokens.into_iter()];
    while let Some(top) = stack.last_mut() {
        match top.next() {
            Some(proc_macro2::TokenTree::Ident(i)) => {
                out.insert(i.to_string());
            }
            Some(proc_macro2::TokenTree::Group(g)) => stack.push(g.stream().into_iter()),
            Some(_) => {}
            None => {
                stack.pop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn expand(attr: TokenStream, item: TokenStream) -> String {
        megakernel(attr, item).to_string()
    }

    fn split_row_sum() -> TokenStream {
        quote! {
            pub fn split_row_sum(a: &Tensor<f32, { [R * 32, 128] }>, part: &mut Tensor<f32, { [R * 32, 4] }>, c: &mut Tensor<f32, { [R * 32] }>) {
                let done = event!([R]);
                tile!(partial[i, j] in [R, 4] {
                    row_sum(a.tile([i, j], [32, 32]), part.tile([i, j], [32, 1]));
                    signal!(done[i]);
                });
                tile!(total[i] in [R] {
                    wait!(done[i]);
                    row_sum(part.tile([i, 0], [32, 4]), c.tile([i], [32]));
                });
            }
        }
    }

    #[test]
    fn expands_a_correct_megakernel() {
        let out = expand(quote!(), split_row_sum());
        assert!(!out.contains("compile_error"), "{out}");
        assert!(out.contains("pub mod split_row_sum"));
        assert!(out.contains("fn __et_task_partial"));
        assert!(out.contains("KernelRegistration"));
        assert!(out.contains("et_group_1"));
    }

    #[test]
    fn collects_several_errors() {
        let item = quote! {
            fn k(a: &Tensor<f32, { [N] }>) {
                let e = event!([N]);
                tile!(t[i] in [N] {
                    wait!(ee[i]);
                    signal!(e[i, 0]);
                });
            }
        };
        let out = expand(quote!(schedule = "dynamc"), item);
        assert!(out.contains("did you mean \\\"dynamic\\\""), "{out}");
        assert!(out.contains("cannot find event `ee`"), "{out}");
        // beside the errors, the stub module keeps `k::launch` and `k::KERNEL` resolving
        assert!(out.contains("mod k"), "{out}");
        assert!(out.contains("pub fn launch < B"), "{out}");
        assert!(out.contains("pub static KERNEL"), "{out}");
    }

    #[test]
    fn crate_override_changes_every_runtime_path() {
        let out = expand(quote!(crate = "my_et", debug), split_row_sum());
        assert!(out.contains("my_et :: __private :: Kernel"), "{out}");
        assert!(!out.contains(":: et_core ::"), "{out}");
    }

    #[test]
    fn bad_attribute_arguments() {
        let out = expand(quote!(threads = 100), split_row_sum());
        assert!(out.contains("multiple of 32"), "{out}");
        let out = expand(quote!(dims(R)), split_row_sum());
        assert!(out.contains("expected `R = value`"), "{out}");
        let out = expand(quote!(schedul = "static"), split_row_sum());
        assert!(out.contains("schedul"), "{out}");
    }

    #[test]
    fn out_of_bounds_tile_is_reported() {
        let item = quote! {
            fn k(a: &Tensor<f32, { [R * 32, 128] }>, c: &mut Tensor<f32, { [R * 32] }>) {
                tile!(t[i] in [R] {
                    row_sum(a.tile([i + 1, 0], [32, 128]), c.tile([i], [32]));
                });
            }
        };
        let out = expand(quote!(), item);
        assert!(out.contains("out of bounds"), "{out}");
    }

    #[test]
    fn cuda_text_has_line_directives_and_loops() {
        let item = quote! {
            fn k(a: &Tensor<f32, { [N * 8] }>, out: &mut Tensor<f32, { [N * 8] }>) {
                let e = event!([N]);
                tile!(p[i] in [N] { add(a.tile([i], [8]), a.tile([i], [8]), out.tile([i], [8])); signal!(e[i]); });
                tile!(q[z] in [1] { wait!(e[..]); });
            }
        };
        let out = expand(quote!(), item);
        assert!(out.contains("line ! ()"), "{out}");
        // the range wait polls its elements across the CTA's threads, then one barrier
        assert!(out.contains("for (long long k = threadIdx.x; k < 1LL * n0; k += blockDim.x)"), "{out}");
        assert!(out.contains("ctx.wait_done(et_ok)"), "{out}");
        assert!(out.contains("et::make_tile<float, 1, et::Ext<8>>"), "{out}");
    }
}
