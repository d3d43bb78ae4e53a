//! The parse → model → check → CUDA path as a library function over a source file.

use std::fmt;

use et_graph::GraphSpec;
use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{Item, ItemFn, Meta};

use crate::expand::{Checked, check};

/// One `#[megakernel]` function of a source file, as the macro sees it.
#[derive(Debug)]
pub struct Inspection {
    /// The function's name.
    pub name: String,
    /// What the macro generates, or the errors it reports.
    pub outcome: Result<Generated, Vec<Diagnostic>>,
}

/// What the macro generates for a megakernel that passes every check.
#[derive(Debug)]
pub struct Generated {
    /// The task-graph description (`KERNEL.graph`).
    pub spec: GraphSpec,
    /// The generated CUDA (`KERNEL.cuda.body`), its `#line` directives naming the file.
    pub cuda: String,
}

/// An error at a position of the source file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// The message, as the compiler would print it.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

fn diagnostics(e: syn::Error) -> Vec<Diagnostic> {
    e.into_iter()
        .map(|e| {
            let at = e.span().start();
            Diagnostic { line: at.line, column: at.column + 1, message: e.to_string() }
        })
        .collect()
}

/// Runs `#[megakernel]` on every function so annotated in `source` (also inside inline
/// modules), in file order. `file` is what the CUDA's `#line` directives name. Fails
/// only if `source` is not Rust.
pub fn inspect(source: &str, file: &str) -> Result<Vec<Inspection>, Diagnostic> {
    let tokens: TokenStream = source.parse().map_err(|e: proc_macro2::LexError| {
        let at = e.span().start();
        Diagnostic { line: at.line, column: at.column + 1, message: e.to_string() }
    })?;
    if let Some(at) = too_deep(tokens) {
        let at = at.start();
        let message = format!("brackets nest more than {MAX_FILE_DEPTH} levels deep here");
        return Err(Diagnostic { line: at.line, column: at.column + 1, message });
    }
    let parsed = syn::parse_file(source).map_err(|e| diagnostics(e).remove(0))?;
    let mut found = Vec::new();
    collect(&parsed.items, &mut found);
    Ok(found
        .into_iter()
        .map(|(attr, item)| Inspection { name: item.sig.ident.to_string(), outcome: run(attr, item, file) })
        .collect())
}

/// How deeply brackets may nest anywhere in a file that [`inspect`] reads: syn parses a
/// file by recursion (and so does the search for megakernels in nested modules), so
/// nesting far deeper than any program's would overflow the stack before the macro's own
/// limit (`parse::MAX_GROUP_DEPTH`) is reached.
const MAX_FILE_DEPTH: usize = 256;

/// The opening of the first group nested deeper than [`MAX_FILE_DEPTH`], found without
/// recursion.
fn too_deep(tokens: TokenStream) -> Option<proc_macro2::Span> {
    let mut stack = vec![tokens.into_iter()];
    while let Some(top) = stack.last_mut() {
        match top.next() {
            Some(proc_macro2::TokenTree::Group(g)) if stack.len() >= MAX_FILE_DEPTH => return Some(g.span_open()),
            Some(proc_macro2::TokenTree::Group(g)) => stack.push(g.stream().into_iter()),
            Some(_) => {}
            None => {
                stack.pop();
            }
        }
    }
    None
}

/// The `#[megakernel]` functions of `items`, each with its attribute's arguments and
/// without the attribute.
fn collect(items: &[Item], out: &mut Vec<(Result<TokenStream, syn::Error>, ItemFn)>) {
    for item in items {
        match item {
            Item::Fn(f) => {
                let is_megakernel =
                    |a: &syn::Attribute| a.path().segments.last().is_some_and(|s| s.ident == "megakernel");
                let Some(at) = f.attrs.iter().position(is_megakernel) else { continue };
                let mut f = f.clone();
                let args = match f.attrs.remove(at).meta {
                    Meta::Path(_) => Ok(TokenStream::new()),
                    Meta::List(l) => Ok(l.tokens),
                    other => Err(syn::Error::new_spanned(other, "expected `#[megakernel]` or `#[megakernel(..)]`")),
                };
                out.push((args, f));
            }
            Item::Mod(m) => {
                if let Some((_, items)) = &m.content {
                    collect(items, out);
                }
            }
            _ => {}
        }
    }
}

fn run(attr: Result<TokenStream, syn::Error>, item: ItemFn, file: &str) -> Result<Generated, Vec<Diagnostic>> {
    match check(attr.map_err(diagnostics)?, item.into_token_stream()) {
        Checked::Ok { args, analyzed, .. } => {
            let cuda = crate::render::text(crate::cuda::body(&analyzed, args.threads), file).map_err(diagnostics)?;
            Ok(Generated { spec: analyzed.spec, cuda })
        }
        Checked::Failed { errors, .. } => Err(diagnostics(errors)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "use et_core::prelude::*;

mod inner {
    #[et_core::megakernel(threads = 64)]
    fn good(a: &Tensor<f32, { [N * 8] }>, out: &mut Tensor<f32, { [N * 8] }>) {
        let e = event!([N]);
        tile!(p[i] in [N] {
            add(a.tile([i], [8]), a.tile([i], [8]), out.tile([i], [8]));
            signal!(e[i]);
        });
        tile!(q[i] in [N] { wait!(e[i]); });
    }
}

#[megakernel]
fn bad(a: &Tensor<f32, { [N] }>) {
    tile!(t[i] in [N] {
        wait!(nope[i]);
    });
}

fn not_a_megakernel() {}
";

    #[test]
    fn finds_every_megakernel_with_its_graph_cuda_and_errors() {
        let found = inspect(SOURCE, "src/k.rs").unwrap();
        let names: Vec<&str> = found.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["good", "bad"]);

        let good = found[0].outcome.as_ref().unwrap();
        let groups: Vec<&str> = good.spec.groups.iter().map(|g| g.name.as_ref()).collect();
        assert_eq!(groups, ["p", "q"]);
        assert!(good.cuda.contains("__launch_bounds__(64, 1)"), "{}", good.cuda);
        // the op call is on line 8 and the signal on line 9 of SOURCE
        assert!(good.cuda.contains("#line 8 \"src/k.rs\"\n    et_op_0::add("), "{}", good.cuda);
        assert!(good.cuda.contains("#line 9 \"src/k.rs\"\n"), "{}", good.cuda);

        let bad = found[1].outcome.as_ref().unwrap_err();
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert_eq!((bad[0].line, bad[0].column), (18, 15), "{bad:?}");
        assert!(bad[0].message.contains("cannot find event `nope`"), "{bad:?}");
    }

    #[test]
    fn a_file_nested_too_deeply_to_parse_is_an_error() {
        let deep = format!("fn f() {{ let x = {}0{}; }}", "(".repeat(1000), ")".repeat(1000));
        let err = inspect(&deep, "x.rs").unwrap_err();
        assert!(err.message.contains("brackets nest more than 256 levels deep"), "{err}");
    }

    #[test]
    fn a_file_that_is_not_rust_is_an_error() {
        let err = inspect("fn (", "x.rs").unwrap_err();
        assert_eq!(err.line, 1);
    }
}
