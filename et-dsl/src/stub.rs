//! The closest valid output beside compile errors (tokio-macros' pattern): the
//! megakernel's module with `KERNEL` and the `launch`/`launch_with` signatures of the
//! parameters that parsed, so that IDEs keep completing `name::launch` while the user
//! fixes the errors, and the paths that name the module add no follow-on errors.
//!
//! The items mirror `host::generate`'s signatures; their bodies never run, because the
//! `compile_error!`s beside them stop the build.

use et_graph::DType;
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};

use crate::attr::Args;
use crate::model::{Megakernel, Param};

/// `errors` beside the stub module of `model` (just `errors` if the item is no function).
pub fn failed(errors: TokenStream, model: Option<&Megakernel>, args: &Args) -> TokenStream {
    let Some(m) = model else { return errors };
    let k = &args.krate;
    let p = quote!(#k::__private);
    let (vis, name) = (&m.vis, &m.name);
    let docs = m.attrs.iter().filter(|a| a.path().is_ident("doc"));
    let kernel = kernel(&m.name.to_string(), args.threads, &p);
    let launch = launch_fns(&m.name.to_string(), &m.params, &p);
    quote! {
        #errors
        #(#docs)*
        #[allow(dead_code, non_snake_case, unused_imports, unused_variables, clippy::all)]
        #vis mod #name {
            use super::*;
            #kernel
            #launch
        }
    }
}

/// A `KERNEL` (and `ENTRY`) with the megakernel's name and no groups; not registered.
fn kernel(name: &str, threads: u32, p: &TokenStream) -> TokenStream {
    let empty = quote!(#p::Cow::Borrowed(&[]));
    let graph = quote! {
        #p::GraphSpec {
            name: #p::Cow::Borrowed(#name),
            dims: #empty,
            tensors: #empty,
            events: #empty,
            groups: #empty,
            schedule: #p::ScheduleKind::Static,
        }
    };
    crate::host::kernel_items(p, graph, quote!(""), (&[], &[], &[]), threads, &[])
}

/// `launch` and `launch_with` over the parameters whose type parsed to a known dtype.
fn launch_fns(name: &str, params: &[Param], p: &TokenStream) -> TokenStream {
    let params: Vec<TokenStream> = params
        .iter()
        .filter_map(|param| {
            let ty = crate::host::dtype_tokens(DType::from_rust_name(&param.dtype.to_string())?, p);
            let (n, r) = (&param.name, if param.mutable { quote!(&mut) } else { quote!(&) });
            Some(quote_spanned!(param.ty_span=> #n: #r B::Tensor<#ty>))
        })
        .collect();
    let never = format!("megakernel `{name}` did not compile");
    crate::host::launch_items(p, name, &params, quote!(::core::unreachable!(#never)))
}
