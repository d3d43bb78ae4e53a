//! Host code generation: the megakernel's module with its `KERNEL` static, its
//! registration, `launch`/`launch_with`, and one CPU task function per tile group.

use et_graph::{Access, Affine, Count, DType, DimKind, EventAccess, Index, ScheduleKind, Term};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::analyze::{Analyzed, LoweredArg, LoweredGroup, LoweredStmt, RaceCheck, Scalar};
use crate::attr::Args;
use crate::model::Megakernel;

/// The whole expansion of a checked megakernel.
pub fn generate(m: &Megakernel, a: &Analyzed, args: &Args) -> TokenStream {
    let k = &args.krate;
    let p = quote!(#k::__private);
    let name = &m.name;
    let vis = &m.vis;
    let docs = m.attrs.iter().filter(|a| a.path().is_ident("doc"));
    let graph = graph_tokens(a, &p);
    let task_fns: Vec<TokenStream> = a.groups.iter().enumerate().map(|(g, lg)| task_fn(g, lg, a, &p)).collect();
    let task_names: Vec<_> = a.groups.iter().map(task_ident).collect();
    let cuda_body = crate::cuda::body(a, args.threads);
    let (ops, op_checks, smem) = op_calls(a, &p);
    let sites = op_sites(a);
    let threads = args.threads;

    let params: Vec<TokenStream> = m
        .params
        .iter()
        .zip(a.spec.tensors.iter())
        .map(|(param, t)| {
            let n = &param.name;
            let ty = dtype_tokens(t.dtype, &p);
            let r = if t.access == Access::Write { quote!(&mut) } else { quote!(&) };
            quote_spanned!(param.ty_span=> #n: #r B::Tensor<#ty>)
        })
        .collect();
    let raws = m.params.iter().zip(a.spec.tensors.iter()).map(|(param, t)| {
        let n = &param.name;
        if t.access == Access::Write {
            quote!(#p::BackendTensor::raw_mut(&mut *#n))
        } else {
            quote!(#p::BackendTensor::raw(&*#n))
        }
    });
    let kernel = kernel_items(&p, graph, cuda_body, (&ops, &smem, &sites), threads, &task_names);
    let launch_body = quote! {
        let __et_args = [#(#raws),*];
        // SAFETY: each view comes from a live tensor of backend `B` borrowed for this
        // call, written ones from `&mut` borrows (which the borrow checker keeps
        // unique), and their dtypes are the declared ones.
        unsafe { __et_backend.launch(&ENTRY, &__et_args, __et_options) }
    };
    let launch = launch_items(&p, &name.to_string(), &params, launch_body);

    quote! {
        #(#docs)*
        #[allow(non_snake_case, unused_imports, unused_variables, unused_mut, clippy::all)]
        #vis mod #name {
            use super::*;

            #kernel

            #p::inventory::submit! { #p::KernelRegistration(&ENTRY) }

            #launch

            #(#task_fns)*

            #(#op_checks)*
        }
    }
}

/// `KERNEL` (the description: graph and CUDA source) and `ENTRY` (it with the CPU task
/// functions, as backends launch it); shared with the stub emitted beside errors.
pub(crate) fn kernel_items(
    p: &TokenStream,
    graph: TokenStream,
    cuda_body: TokenStream,
    (ops, smem, sites): (&[TokenStream], &[TokenStream], &[TokenStream]),
    threads: u32,
    task_names: &[proc_macro2::Ident],
) -> TokenStream {
    quote! {
        /// The megakernel's description: task graph and CUDA source.
        pub static KERNEL: #p::Kernel = #p::Kernel {
            graph: #graph,
            cuda: #p::CudaSource { body: #p::Cow::Borrowed(#cuda_body), ops: &[#(#ops),*], block_threads: #threads, smem: &[#(#smem),*], sites: &[#(#sites),*] },
            module_path: ::core::module_path!(),
            file: ::core::file!(),
        };

        /// The description with the CPU task functions, as backends launch it.
        pub static ENTRY: #p::KernelEntry<'static> = #p::KernelEntry {
            kernel: &KERNEL,
            cpu_tasks: &[#(#task_names as #p::CpuTaskFn),*],
        };
    }
}

/// `launch` and `launch_with` over `params` (`name: &B::Tensor<T>` tokens); `body` runs
/// in `launch_with` with `__et_backend`, `__et_options` and the parameters in scope (the
/// backend and options have names no tensor parameter can have by accident).
pub(crate) fn launch_items(p: &TokenStream, name: &str, params: &[TokenStream], body: TokenStream) -> TokenStream {
    let doc = format!(
        "Runs `{name}` once on the backend and waits for it; symbolic dims are resolved from the tensors' shapes."
    );
    let names = params.iter().map(|param| param.clone().into_iter().next());
    quote! {
        #[doc = #doc]
        pub fn launch<B: #p::Backend>(__et_backend: &B, #(#params),*) -> #p::Result<#p::LaunchReport> {
            launch_with(__et_backend, &#p::LaunchOptions::default(), #(#names),*)
        }

        /// As [`launch`], with explicit options (schedule, trace, watchdog, chaos).
        pub fn launch_with<B: #p::Backend>(__et_backend: &B, __et_options: &#p::LaunchOptions, #(#params),*) -> #p::Result<#p::LaunchReport> {
            #body
        }
    }
}

/// The element type of `d`, through the runtime's paths (which name the primitives too).
pub(crate) fn dtype_tokens(d: DType, p: &TokenStream) -> TokenStream {
    let ty = format_ident!("{}", d.rust_name());
    quote!(#p::#ty)
}

/// For each op call, in order: its `TileOp` (the `k`-th is `et_op_<k>` in the CUDA), a
/// compile-time check, spanned at the call, of its name and (where every extent is a
/// constant) its contract on the extents, and the arena bytes it needs (a constant
/// expression). A call with a symbolic extent has its contract checked at launch
/// (`Kernel::check_op_calls`), and its arena sized at the dims' declared maxima.
fn op_calls(a: &Analyzed, p: &TokenStream) -> (Vec<TokenStream>, Vec<TokenStream>, Vec<TokenStream>) {
    let dims = &a.spec.dims;
    let dim_names: Vec<&str> = a.dim_names.iter().map(String::as_str).collect();
    let calls = a.groups.iter().flat_map(|g| &g.stmts).filter_map(|s| match s {
        LoweredStmt::Op { func, args, span } => Some((func, args, *span)),
        _ => None,
    });
    calls
        .map(|(func, args, span)| {
            let called_as = func.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
            let func = &op_item(func);
            let sizes = || {
                args.iter().map(|arg| match arg {
                    LoweredArg::Tile { size, .. } => size.iter().map(|(_, x)| x).collect(),
                    LoweredArg::Scalar { .. } => Vec::new(),
                })
            };
            let fixed: Option<Vec<Vec<usize>>> =
                sizes().map(|e| e.iter().map(|x| x.as_constant().map(|c| c as usize)).collect()).collect();
            let check = match &fixed {
                Some(extents) => {
                    let text = extents.iter().map(|e| format!("{e:?}")).collect::<Vec<_>>().join(", ");
                    let ext = extents.iter().map(|e| quote!(&[#(#e),*]));
                    quote_spanned!(span=> #p::call_error(&#func::OP, #called_as, #text, #func::contract(&[#(#ext),*])))
                }
                None => {
                    quote_spanned!(span=> #p::call_error(&#func::OP, #called_as, "", ::core::result::Result::Ok(())))
                }
            };
            let check = quote_spanned!(span=> const _: () = if let ::core::option::Option::Some(m) = #check {
                ::core::panic!("{}", m.as_str())
            };);
            let maxima: Result<Vec<Vec<usize>>, (String, String)> =
                sizes().map(|e| e.iter().map(|x| extent_max(x, dims, &dim_names)).collect()).collect();
            let smem = match maxima {
                Ok(extents) => {
                    let ext = extents.iter().map(|e| quote!(&[#(#e),*]));
                    quote_spanned!(span=> #func::smem(&[#(#ext),*]))
                }
                Err((extent, open)) => {
                    let msg = format!(
                        "tile op `{called_as}` sizes its shared-memory arena by its tiles' extents, but the extent \
                         `{extent}` has no upper bound: declare one with `dims({open})`"
                    );
                    quote_spanned!(span=> if #func::OP.uses_smem { ::core::panic!(#msg) } else { 0usize })
                }
            };
            (quote_spanned!(span=> #func::OP), check, smem)
        })
        .fold((Vec::new(), Vec::new(), Vec::new()), |(mut o, mut c, mut s), (op, check, smem)| {
            o.push(op);
            c.push(check);
            s.push(smem);
            (o, c, s)
        })
}

/// The op's module (`tile_op!` makes one per op, beside its function) from the path it
/// is called by: without the call's generic arguments (`add::<f32, 1>` calls `add`,
/// whose items are `add::OP`).
fn op_item(func: &syn::Path) -> syn::Path {
    let mut item = func.clone();
    if let Some(last) = item.segments.last_mut() {
        last.arguments = syn::PathArguments::None;
    }
    item
}

/// The largest value of an extent (affine in dims) over the admissible dims, where
/// symbolic dims range over `1 ..= max`; or, where a dim that raises it has no maximum,
/// the extent as written and those dims as `R <= ..`.
fn extent_max(x: &Affine, dims: &[et_graph::DimSpec], names: &[&str]) -> Result<usize, (String, String)> {
    let x = x.substitute_static(dims);
    let unbounded = |&(t, c): &(Term, i64)| match t {
        Term::Dim(d) if c > 0 && dims[d as usize].kind == (DimKind::Symbolic { max: None }) => {
            Some(format!("{} <= ..", names[d as usize]))
        }
        _ => None,
    };
    let open: Vec<String> = x.terms.iter().filter_map(unbounded).collect();
    if !open.is_empty() {
        return Err((x.display(&[], names).to_string(), open.join(", ")));
    }
    let max = x.terms.iter().fold(x.constant, |acc, &(t, c)| {
        let value = match (t, c > 0) {
            (Term::Dim(d), true) => match dims[d as usize].kind {
                DimKind::Static(v) => v,
                DimKind::Symbolic { max } => max.unwrap_or(1),
            },
            _ => 1,
        };
        acc.saturating_add(c.saturating_mul(value))
    });
    Ok(max.max(0) as usize)
}

/// The tile group and body statement of each op call, in call order (what a launch-time
/// contract check finds the call's tiles by).
fn op_sites(a: &Analyzed) -> Vec<TokenStream> {
    let mut out = Vec::new();
    for (g, lg) in a.groups.iter().enumerate() {
        for (i, stmt) in lg.stmts.iter().enumerate() {
            if matches!(stmt, LoweredStmt::Op { .. }) {
                let (g, i) = (g as u16, i as u16);
                out.push(quote!((#g, #i)));
            }
        }
    }
    out
}

/// The CPU task function's binding of the group's `k`-th tile index. Every binding of a
/// task function has a generated name, never the user's: the function sits in a module
/// that imports the user's (`use super::*`), where a `let N` would be a pattern when the
/// user's module has a constant, unit struct or enum variant `N`.
fn var_ident(k: usize) -> proc_macro2::Ident {
    format_ident!("__et_v{}", k)
}

/// The CPU task function's binding of dim `k` (see [`var_ident`]).
fn dim_ident(k: usize) -> proc_macro2::Ident {
    format_ident!("__et_d{}", k)
}

/// The CPU task function's binding of tensor `k`, spanned at the user's name of it (see
/// [`var_ident`]).
fn tensor_ident(k: usize, span: Span) -> proc_macro2::Ident {
    proc_macro2::Ident::new(&format!("__et_t{k}"), span)
}

/// The CPU task function of a group (named in backtraces; `format_ident!` drops a raw
/// name's `r#`).
fn task_ident(lg: &LoweredGroup) -> proc_macro2::Ident {
    format_ident!("__et_task_{}", lg.name)
}

/// `a` as an `i64` expression of the task function's bindings.
fn rust_affine(a: &Affine) -> TokenStream {
    let c = a.constant;
    let terms = a.terms.iter().map(|&(t, k)| {
        let id = match t {
            Term::Var(v) => var_ident(v as usize),
            Term::Dim(d) => dim_ident(d as usize),
        };
        quote!(+ #k * #id)
    });
    quote!((#c #(#terms)*))
}

fn task_fn(g: usize, lg: &LoweredGroup, a: &Analyzed, p: &TokenStream) -> TokenStream {
    let fname = task_ident(lg);
    let cx = quote!(__et_cx);
    let vars = (0..lg.vars.len()).map(|k| {
        let v = var_ident(k);
        quote!(let #v: i64 = #cx.var(#k);)
    });
    let dims = (0..a.dim_names.len()).map(|k| {
        let d = dim_ident(k);
        quote!(let #d: i64 = #cx.dim(#k);)
    });
    let tensors = a.spec.tensors.iter().enumerate().map(|(t, spec)| {
        let n = tensor_ident(t, Span::call_site());
        let ty = dtype_tokens(spec.dtype, p);
        if spec.access == Access::Write {
            quote!(let #n = #cx.output::<#ty>(#t);)
        } else {
            quote!(let #n = #cx.input::<#ty>(#t);)
        }
    });
    // a group with a condition evaluates it right after its guard, the first `wait!`
    let conditional = a.spec.groups[g].condition.is_some();
    let stmts = lg.stmts.iter().map(|s| match s {
        LoweredStmt::Wait { access: 0, span } if conditional => {
            quote_spanned!(*span=> #cx.wait(0); if !#cx.condition() { return; })
        }
        LoweredStmt::Wait { access, span } => quote_spanned!(*span=> #cx.wait(#access);),
        LoweredStmt::Signal { access, span } => quote_spanned!(*span=> #cx.signal(#access);),
        LoweredStmt::Op { func, args, span } => {
            let args = args.iter().map(arg_tokens);
            quote_spanned!(*span=> #func(#(#args),*); #cx.after_op();)
        }
    });
    quote! {
        fn #fname(#cx: &#p::TaskContext<'_>) {
            #(#vars)*
            #(#dims)*
            #(#tensors)*
            #(#stmts)*
        }
    }
}

/// An op call's argument, from its lowered form (the user's expressions name the user's
/// tile indices, dims and tensors, which the task function does not bind).
fn arg_tokens(arg: &LoweredArg) -> TokenStream {
    match arg {
        LoweredArg::Tile { tensor, ident, index, size, span } => {
            let t = tensor_ident(*tensor, ident.span());
            let index = index.iter().map(|(_, x)| rust_affine(x));
            let size = size.iter().map(|(_, x)| match x.as_constant() {
                Some(c) => {
                    let c = c as usize;
                    quote!(#c)
                }
                None => {
                    let x = rust_affine(x);
                    quote!((#x as usize))
                }
            });
            quote_spanned!(*span=> #t.tile([#(#index),*], [#(#size),*]))
        }
        // a literal, perhaps negated, names nothing: the user's own tokens, so that rustc
        // checks it against the op's parameter at the user's span (an `i32` parameter
        // given 3000000000 is an `overflowing_literals` error there, not a wrapped value)
        LoweredArg::Scalar { value: Scalar::Int(_), expr } if is_literal(expr) => quote!(#expr),
        LoweredArg::Scalar { value: Scalar::Int(x), expr } => {
            let span = expr.span();
            match x.as_constant() {
                // unsuffixed, so that it takes the type of the op's parameter as the user's
                // did, and at the user's span, where rustc reports one that does not fit
                Some(c) => {
                    let mut lit = proc_macro2::Literal::u64_unsuffixed(c.unsigned_abs());
                    lit.set_span(span);
                    if c < 0 { quote_spanned!(span=> (-#lit)) } else { quote!(#lit) }
                }
                // an `i64` of tile indices and dims, converted to the op's parameter type
                // (a type with no conversion is an error at the argument), and a value
                // that does not fit stops the task instead of wrapping
                None => {
                    let value = rust_affine(x);
                    let text = quote!(#expr).to_string();
                    quote_spanned!(span=> {
                        let __et_value: i64 = #value;
                        ::core::convert::TryFrom::try_from(__et_value).unwrap_or_else(|_| {
                            ::core::panic!(
                                "scalar argument `{}` = {} does not fit the op's parameter type",
                                #text,
                                __et_value
                            )
                        })
                    })
                }
            }
        }
        // a float literal, perhaps negated: it names nothing
        LoweredArg::Scalar { value: Scalar::Float(_), expr } => quote!(#expr),
    }
}

/// Whether `e` is a literal or a negated one (`3`, `-2`, `(-1)`).
fn is_literal(e: &syn::Expr) -> bool {
    match e {
        syn::Expr::Lit(_) => true,
        syn::Expr::Paren(p) => is_literal(&p.expr),
        syn::Expr::Unary(u) => matches!(u.op, syn::UnOp::Neg(_)) && is_literal(&u.expr),
        _ => false,
    }
}

/// The `GraphSpec` as a constant expression: whether an op writes a tile is read from
/// the op's signature (`<op>::OP.args[k]`), and so are the races found at the sample
/// sizes, as constants that fail to evaluate (at the later op call) when the op writes.
fn graph_tokens(a: &Analyzed, p: &TokenStream) -> TokenStream {
    let s = &a.spec;
    let name = s.name.as_ref();
    let dims = s.dims.iter().map(|d| {
        let n = d.name.as_ref();
        let kind = match d.kind {
            DimKind::Static(v) => quote!(#p::DimKind::Static(#v)),
            DimKind::Symbolic { max: Some(m) } => {
                quote!(#p::DimKind::Symbolic { max: ::core::option::Option::Some(#m) })
            }
            DimKind::Symbolic { max: None } => {
                quote!(#p::DimKind::Symbolic { max: ::core::option::Option::None })
            }
        };
        quote!(#p::DimSpec { name: #p::Cow::Borrowed(#n), kind: #kind })
    });
    let tensors = s.tensors.iter().map(|t| {
        let n = t.name.as_ref();
        let dt = format_ident!("{}", format!("{:?}", t.dtype));
        let shape = t.shape.iter().map(|e| affine_tokens(e, p));
        let access = if t.access == Access::Write { quote!(#p::Access::Write) } else { quote!(#p::Access::Read) };
        quote!(#p::TensorSpec { name: #p::Cow::Borrowed(#n), dtype: #p::DType::#dt, shape: #p::Cow::Borrowed(&[#(#shape),*]), access: #access })
    });
    let events = s.events.iter().map(|e| {
        let n = e.name.as_ref();
        let shape = e.shape.iter().map(|x| affine_tokens(x, p));
        let count = match &e.count {
            Count::Inferred => quote!(#p::Count::Inferred),
            Count::Fixed(a) => {
                let a = affine_tokens(a, p);
                quote!(#p::Count::Fixed(#a))
            }
            Count::PerElement { tensor } => quote!(#p::Count::PerElement { tensor: #tensor }),
        };
        quote!(#p::EventSpec { name: #p::Cow::Borrowed(#n), shape: #p::Cow::Borrowed(&[#(#shape),*]), count: #count })
    });
    let groups = s.groups.iter().zip(&a.groups).map(|(g, lg)| {
        let n = g.name.as_ref();
        let vars = g.vars.iter().map(|v| v.as_ref());
        let domain = g.domain.iter().map(|x| affine_tokens(x, p));
        let waits = g.waits.iter().map(|a| access_tokens(a, p));
        let signals = g.signals.iter().map(|a| access_tokens(a, p));
        let tiles = g.tiles.iter().zip(&lg.tile_args).map(|(t, (func, k, span))| {
            let tensor = t.tensor;
            let index = t.index.iter().map(|x| affine_tokens(x, p));
            let size = t.size.iter().map(|x| affine_tokens(x, p));
            let stmt = t.stmt;
            let func = op_item(func);
            let access = quote_spanned!(*span=> if #func::OP.args[#k].is_write() { #p::Access::Write } else { #p::Access::Read });
            quote!(#p::TileAccess { tensor: #tensor, index: #p::Cow::Borrowed(&[#(#index),*]), size: #p::Cow::Borrowed(&[#(#size),*]), access: #access, stmt: #stmt })
        });
        let cost = g.cost;
        let condition = match &g.condition {
            Some(c) => {
                let lhs = affine_tokens(&c.lhs, p);
                let cmp = format_ident!("{}", format!("{:?}", c.cmp));
                let tensor = c.tensor;
                let at = c.at.iter().map(|x| affine_tokens(x, p));
                quote!(::core::option::Option::Some(#p::Condition { lhs: #lhs, cmp: #p::Cmp::#cmp, tensor: #tensor, at: #p::Cow::Borrowed(&[#(#at),*]) }))
            }
            None => quote!(::core::option::Option::None),
        };
        quote!(#p::GroupSpec {
            name: #p::Cow::Borrowed(#n),
            vars: #p::Cow::Borrowed(&[#(#p::Cow::Borrowed(#vars)),*]),
            domain: #p::Cow::Borrowed(&[#(#domain),*]),
            waits: #p::Cow::Borrowed(&[#(#waits),*]),
            signals: #p::Cow::Borrowed(&[#(#signals),*]),
            tiles: #p::Cow::Borrowed(&[#(#tiles),*]),
            cost: #cost,
            condition: #condition,
        })
    });
    let schedule = match s.schedule {
        ScheduleKind::Static => quote!(#p::ScheduleKind::Static),
        ScheduleKind::Dynamic => quote!(#p::ScheduleKind::Dynamic),
    };
    let races = a.races.iter().map(race_tokens);
    quote!({
        #(#races)*
        #p::GraphSpec {
            name: #p::Cow::Borrowed(#name),
            dims: #p::Cow::Borrowed(&[#(#dims),*]),
            tensors: #p::Cow::Borrowed(&[#(#tensors),*]),
            events: #p::Cow::Borrowed(&[#(#events),*]),
            groups: #p::Cow::Borrowed(&[#(#groups),*]),
            schedule: #schedule,
        }
    })
}

/// `const _: () = if <first writes> && <second writes> { panic!(..) } else if ..;`, one
/// branch per direction that races, for each racing pair of tile arguments.
fn race_tokens(check: &RaceCheck) -> TokenStream {
    // every token at the op call: rustc reports the failed evaluation where the panic is
    let span = check.span;
    let writes = |side: &Option<(syn::Path, usize)>| match side {
        Some((func, k)) => {
            let func = op_item(func);
            quote_spanned!(span=> #func::OP.args[#k].is_write())
        }
        None => quote_spanned!(span=> false),
    };
    let mut branches = Vec::new();
    for case in &check.cases {
        let (f, s) = (writes(&case.first), writes(&case.second));
        for (fw, sw, cond) in [(true, true, quote!(#f && #s)), (true, false, f.clone()), (false, true, s.clone())] {
            let possible = (!fw || case.first.is_some()) && (!sw || case.second.is_some());
            if possible {
                let msg = format!("{}\nhelp: {}", case.race.message(fw, sw), et_graph::race::HELP);
                branches.push(quote_spanned!(span=> if #cond { ::core::panic!("{}", #msg) }));
            }
        }
    }
    quote_spanned!(span=> const _: () = #(#branches)else*;)
}

fn affine_tokens(a: &Affine, p: &TokenStream) -> TokenStream {
    let c = a.constant;
    let terms = a.terms.iter().map(|&(t, k)| match t {
        Term::Var(v) => quote!((#p::Term::Var(#v), #k)),
        Term::Dim(d) => quote!((#p::Term::Dim(#d), #k)),
    });
    quote!(#p::Affine { constant: #c, terms: #p::Cow::Borrowed(&[#(#terms),*]) })
}

fn access_tokens(a: &EventAccess, p: &TokenStream) -> TokenStream {
    let ev = a.event;
    let index = a.index.iter().map(|ix| match ix {
        Index::At(x) => {
            let x = affine_tokens(x, p);
            quote!(#p::Index::At(#x))
        }
        Index::Range { start, end } => {
            let (s, e) = (affine_tokens(start, p), affine_tokens(end, p));
            quote!(#p::Index::Range { start: #s, end: #e })
        }
        Index::All => quote!(#p::Index::All),
        Index::Data { tensor, at, along } => {
            let at = at.iter().map(|x| affine_tokens(x, p));
            let along = match along {
                Some((c, len)) => {
                    let len = affine_tokens(len, p);
                    quote!(::core::option::Option::Some((#c, #len)))
                }
                None => quote!(::core::option::Option::None),
            };
            quote!(#p::Index::Data { tensor: #tensor, at: #p::Cow::Borrowed(&[#(#at),*]), along: #along })
        }
    });
    let stmt = a.stmt;
    quote!(#p::EventAccess { event: #ev, index: #p::Cow::Borrowed(&[#(#index),*]), stmt: #stmt })
}
