//! Parsing the annotated function into the [`model`](crate::model).

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::parse::discouraged::Speculative;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, FnArg, GenericArgument, Ident, ItemFn, Pat, PathArguments, Stmt, Token, Type, bracketed};

use crate::diag::Errors;
use crate::model::*;

/// How deeply groups (`( )`, `[ ]`, `{ }`) may nest in the macro's input: a megakernel
/// nests about 10 deep; syn spends tens of KB of stack per level in a debug build.
pub const MAX_GROUP_DEPTH: usize = 32;

/// The most tokens that one expression, with the expressions it sits in, may span: the
/// tokens of its segment (from the last `,` or `;` of its group) plus those before it in
/// the segments of the groups around it, up to the nearest braced block (a list of
/// statements, which starts afresh). The index of a tile argument of an op call spans
/// about 30.
pub const MAX_SEGMENT_TOKENS: usize = 256;

/// Rejects input that nests too deeply or runs too long for syn: it parses an expression
/// by recursion, once per prefix operator (`- - - i`), closure or nested group, so such
/// input would overflow the compiler's stack before any rule could report it. Walks the
/// tokens without recursion; the item's own top level (attributes, signature) is not an
/// expression and is not counted.
pub fn check_nesting(tokens: &TokenStream) -> syn::Result<()> {
    use proc_macro2::{Delimiter, TokenTree};
    // one frame per open group: its remaining tokens, the tokens spanned by the groups
    // around it (`base`), and the count of its current segment
    struct Frame {
        rest: proc_macro2::token_stream::IntoIter,
        base: usize,
        segment: usize,
    }
    let mut stack = vec![Frame { rest: tokens.clone().into_iter(), base: 0, segment: 0 }];
    loop {
        let depth = stack.len();
        let Some(top) = stack.last_mut() else { break };
        let Some(tt) = top.rest.next() else {
            stack.pop();
            continue;
        };
        if let TokenTree::Punct(p) = &tt
            && (p.as_char() == ',' || p.as_char() == ';')
        {
            top.segment = 0;
            continue;
        }
        let top_level = depth == 1;
        if !top_level {
            top.segment += 1;
            if top.base + top.segment > MAX_SEGMENT_TOKENS {
                return Err(syn::Error::new(
                    tt.span(),
                    format!("this expression is too long for a megakernel (more than {MAX_SEGMENT_TOKENS} tokens)"),
                ));
            }
        }
        if let TokenTree::Group(g) = tt {
            if depth > MAX_GROUP_DEPTH {
                return Err(syn::Error::new(
                    g.span_open(),
                    format!("brackets nest more than {MAX_GROUP_DEPTH} levels deep here"),
                ));
            }
            let base = if top_level || g.delimiter() == Delimiter::Brace { 0 } else { top.base + top.segment };
            stack.push(Frame { rest: g.stream().into_iter(), base, segment: 0 });
        }
    }
    Ok(())
}

/// Parses the item; structural errors are collected in `errors` and the offending
/// statement is skipped, so that one run reports as much as it can.
pub fn megakernel(item: TokenStream, errors: &mut Errors) -> syn::Result<Megakernel> {
    check_nesting(&item)?;
    let f: ItemFn = syn::parse2(item)?;
    if !f.sig.generics.params.is_empty() {
        errors.error(f.sig.generics.span(), "a megakernel cannot be generic: its dims are named in tensor shapes");
    }
    if let syn::ReturnType::Type(_, ty) = &f.sig.output {
        errors.error(ty.span(), "a megakernel returns nothing: its outputs are `&mut Tensor` parameters");
    }
    let mut params = Vec::new();
    for arg in &f.sig.inputs {
        match param(arg) {
            Ok(p) => params.push(p),
            Err(e) => errors.push(e),
        }
    }
    let mut events = Vec::new();
    let mut groups = Vec::new();
    for stmt in &f.block.stmts {
        match body_item(stmt) {
            Ok(BodyItem::Event(e)) => events.push(*e),
            Ok(BodyItem::Tile(g)) => groups.push(*g),
            Err(e) => errors.push(e),
        }
    }
    if groups.is_empty() && errors.is_empty() {
        errors.error(f.sig.ident.span(), "a megakernel needs at least one `tile!` group");
    }
    Ok(Megakernel { attrs: f.attrs, vis: f.vis, name: f.sig.ident, params, events, groups })
}

const PARAM_FORM: &str =
    "expected a tensor parameter `name: &Tensor<dtype, { [extents] }>` (or `&mut Tensor<..>` for outputs)";

fn param(arg: &FnArg) -> syn::Result<Param> {
    let FnArg::Typed(pt) = arg else {
        return Err(syn::Error::new(arg.span(), "a megakernel is a free function: it takes no `self`"));
    };
    let Pat::Ident(pi) = &*pt.pat else {
        return Err(syn::Error::new(pt.pat.span(), "expected a parameter name"));
    };
    let Type::Reference(r) = &*pt.ty else {
        return Err(syn::Error::new(pt.ty.span(), PARAM_FORM));
    };
    let Type::Path(tp) = &*r.elem else {
        return Err(syn::Error::new(r.elem.span(), PARAM_FORM));
    };
    let last = tp.path.segments.last().expect("a path has a segment");
    if last.ident != "Tensor" {
        return Err(syn::Error::new(last.ident.span(), PARAM_FORM));
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return Err(syn::Error::new(last.span(), format!("{PARAM_FORM}: the dtype and extents are missing")));
    };
    let args: Vec<&GenericArgument> = args.args.iter().collect();
    let [GenericArgument::Type(Type::Path(dt)), shape] = args[..] else {
        return Err(syn::Error::new(
            last.arguments.span(),
            format!("{PARAM_FORM}: expected two arguments, a dtype and `{{ [extents] }}`"),
        ));
    };
    let dtype = dt
        .path
        .get_ident()
        .cloned()
        .ok_or_else(|| syn::Error::new(dt.span(), "expected a dtype: f32, bf16, f16, i32 or u32"))?;
    let shape = match shape {
        GenericArgument::Const(Expr::Block(b)) if b.block.stmts.len() == 1 => match &b.block.stmts[0] {
            Stmt::Expr(Expr::Array(a), None) => a.elems.iter().cloned().collect(),
            other => {
                return Err(syn::Error::new(other.span(), "expected the extents as an array: `{ [R * 32, 128] }`"));
            }
        },
        other => {
            return Err(syn::Error::new(
                other.span(),
                "expected the extents as a braced array, e.g. `{ [R * 32, 128] }` (Rust needs the braces around an expression in generic arguments)",
            ));
        }
    };
    Ok(Param { name: pi.ident.clone(), mutable: r.mutability.is_some(), dtype, shape, ty_span: pt.ty.span() })
}

enum BodyItem {
    Event(Box<EventDecl>),
    Tile(Box<TileGroup>),
}

const BODY_FORM: &str = "a megakernel body holds only `let name = event!(..);` and `tile!(..);` statements";

fn macro_name(m: &syn::Macro) -> Option<String> {
    m.path.get_ident().map(|i| i.to_string())
}

fn body_item(stmt: &Stmt) -> syn::Result<BodyItem> {
    match stmt {
        Stmt::Local(local) => {
            let Pat::Ident(pi) = &local.pat else {
                return Err(syn::Error::new(local.pat.span(), "expected an event name"));
            };
            let Some(init) = &local.init else {
                return Err(syn::Error::new(stmt.span(), BODY_FORM));
            };
            let Expr::Macro(m) = &*init.expr else {
                return Err(syn::Error::new(init.expr.span(), BODY_FORM));
            };
            if macro_name(&m.mac).as_deref() != Some("event") {
                return Err(syn::Error::new(
                    m.mac.path.span(),
                    "only `event!(..)` can be bound with `let` in a megakernel",
                ));
            }
            let d: EventArgs = m.mac.parse_body()?;
            Ok(BodyItem::Event(Box::new(EventDecl {
                name: pi.ident.clone(),
                shape: d.shape,
                count: d.count,
                span: m.mac.span(),
            })))
        }
        Stmt::Macro(sm) => tile_macro(&sm.mac),
        Stmt::Expr(Expr::Macro(m), _) => tile_macro(&m.mac),
        other => Err(syn::Error::new(other.span(), BODY_FORM)),
    }
}

fn tile_macro(mac: &syn::Macro) -> syn::Result<BodyItem> {
    match macro_name(mac).as_deref() {
        Some("tile") => Ok(BodyItem::Tile(Box::new(mac.parse_body::<TileGroup>()?))),
        Some("wait") | Some("signal") => {
            Err(syn::Error::new(mac.path.span(), "`wait!` and `signal!` belong inside a `tile!` body"))
        }
        Some("event") => Err(syn::Error::new(mac.span(), "bind the event to a name: `let done = event!(..);`")),
        _ => Err(syn::Error::new(mac.path.span(), BODY_FORM)),
    }
}

struct EventArgs {
    shape: Vec<Expr>,
    count: Option<CountDecl>,
}

impl Parse for EventArgs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let content;
        bracketed!(content in input);
        let shape = Punctuated::<Expr, Token![,]>::parse_terminated(&content)?.into_iter().collect();
        let mut count = None;
        if input.parse::<Option<Token![,]>>()?.is_some() && !input.is_empty() {
            let key: Ident = input.parse()?;
            if key != "count" {
                return Err(syn::Error::new(
                    key.span(),
                    format!("unknown event argument `{key}`; expected `count = ..`"),
                ));
            }
            input.parse::<Token![=]>()?;
            if input.peek(Token![dyn]) {
                input.parse::<Token![dyn]>()?;
                let inner;
                syn::parenthesized!(inner in input);
                let tensor: Ident = inner.parse()?;
                count = Some(CountDecl::Dynamic { tokens: tensor.to_token_stream(), tensor });
            } else {
                count = Some(CountDecl::Fixed(input.parse()?));
            }
            input.parse::<Option<Token![,]>>()?;
        }
        if !input.is_empty() {
            return Err(input.error("expected `event!([extents])` or `event!([extents], count = ..)`"));
        }
        Ok(EventArgs { shape, count })
    }
}

/// A tile group's `, cost = N` arguments from here on; `cost` is one already parsed (a
/// second is an error).
fn tile_cost(input: ParseStream, mut cost: Option<syn::LitInt>) -> syn::Result<Option<syn::LitInt>> {
    while input.parse::<Option<Token![,]>>()?.is_some() {
        let key: Ident = input.parse()?;
        if key != "cost" {
            return Err(syn::Error::new(key.span(), format!("unknown tile argument `{key}`; expected `cost = N`")));
        }
        if cost.is_some() {
            return Err(syn::Error::new(key.span(), "`cost` is given twice"));
        }
        input.parse::<Token![=]>()?;
        cost = Some(input.parse()?);
    }
    Ok(cost)
}

impl Parse for TileGroup {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name: Ident = input.parse()?;
        let content;
        bracketed!(content in input);
        let vars: Vec<Ident> = Punctuated::<Ident, Token![,]>::parse_terminated(&content)?.into_iter().collect();
        input.parse::<Token![in]>()?;
        let content;
        bracketed!(content in input);
        let domain: Vec<Expr> = Punctuated::<Expr, Token![,]>::parse_terminated(&content)?.into_iter().collect();
        // `, cost = N` may come before the condition or after it
        let mut cost = tile_cost(input, None)?;
        let condition = if input.peek(Token![if]) {
            input.parse::<Token![if]>()?;
            let mut tts = Vec::new();
            // a comma inside the condition sits in a bracket group: one at the top ends it
            while !input.is_empty() && !input.peek(syn::token::Brace) && !input.peek(Token![,]) {
                tts.push(input.parse::<proc_macro2::TokenTree>()?);
            }
            Some(condition(tts)?)
        } else {
            None
        };
        if condition.is_some() {
            cost = tile_cost(input, cost)?;
        }
        let body;
        syn::braced!(body in input);
        let mut stmts = Vec::new();
        // every statement is parsed, the bad ones' errors reported together
        let mut bad: Option<syn::Error> = None;
        for stmt in body.call(syn::Block::parse_within)? {
            match tile_stmt(&stmt) {
                Ok(s) => stmts.push(s),
                Err(e) => match &mut bad {
                    Some(b) => b.combine(e),
                    None => bad = Some(e),
                },
            }
        }
        if let Some(e) = bad {
            return Err(e);
        }
        if !input.is_empty() {
            return Err(input.error("unexpected tokens after the tile body"));
        }
        if vars.len() != domain.len() {
            return Err(syn::Error::new(
                name.span(),
                format!(
                    "tile group `{name}` has {} ind{} but a domain of rank {}",
                    vars.len(),
                    if vars.len() == 1 { "ex" } else { "ices" },
                    domain.len()
                ),
            ));
        }
        Ok(TileGroup { name, vars, domain, cost, condition, stmts })
    }
}

const CONDITION_FORM: &str = "expected a condition such as `if m * 16 < counts[e]`: an integer expression compared with one element of an integer tensor";

/// Splits `a <op> b` at its top-level comparison and parses both sides.
fn condition(tts: Vec<proc_macro2::TokenTree>) -> syn::Result<ConditionExpr> {
    use proc_macro2::{Spacing, TokenTree};
    let tokens: TokenStream = tts.iter().cloned().collect();
    let punct = |k: usize| match tts.get(k) {
        Some(TokenTree::Punct(p)) => Some((p.as_char(), p.spacing())),
        _ => None,
    };
    let mut split = None;
    for k in 0..tts.len() {
        let (Some((c, spacing)), next) = (punct(k), punct(k + 1)) else { continue };
        let eq_next = spacing == Spacing::Joint && next.map(|n| n.0) == Some('=');
        // `<` and `>` alone, or glued to what is not an operator of theirs (`n[0]>-1`
        // lexes `>` joint with `-`); not the second half of `->`, `=>`, `<<` or `>>`
        let glued_after =
            k > 0 && matches!(punct(k - 1), Some((p, Spacing::Joint)) if matches!(p, '-' | '=' | '<' | '>'));
        let single =
            !glued_after && (spacing == Spacing::Alone || next.is_none_or(|n| !matches!(n.0, '<' | '>' | '=')));
        let found = match c {
            '<' if eq_next => Some((et_graph::Cmp::Le, 2)),
            '>' if eq_next => Some((et_graph::Cmp::Ge, 2)),
            '=' if eq_next => Some((et_graph::Cmp::Eq, 2)),
            '!' if eq_next => Some((et_graph::Cmp::Ne, 2)),
            '<' if single => Some((et_graph::Cmp::Lt, 1)),
            '>' if single => Some((et_graph::Cmp::Gt, 1)),
            _ => None,
        };
        if let Some(f) = found {
            split = Some((k, f));
            break;
        }
    }
    let Some((k, (cmp, width))) = split else {
        return Err(syn::Error::new_spanned(&tokens, CONDITION_FORM));
    };
    let side = |part: &[TokenTree]| -> syn::Result<Operand> {
        let ts: TokenStream = part.iter().cloned().collect();
        if ts.is_empty() {
            return Err(syn::Error::new_spanned(&tokens, CONDITION_FORM));
        }
        syn::parse::Parser::parse2(
            |input: ParseStream| {
                if input.peek(Ident) && input.peek2(syn::token::Bracket) {
                    let fork = input.fork();
                    let tensor: Ident = fork.parse()?;
                    let content;
                    bracketed!(content in fork);
                    let at: Punctuated<Expr, Token![,]> = Punctuated::parse_terminated(&content)?;
                    if fork.is_empty() {
                        input.advance_to(&fork);
                        return Ok(Operand::Data { tensor, at: at.into_iter().collect() });
                    }
                }
                Ok(Operand::Expr(input.parse()?))
            },
            ts,
        )
    };
    Ok(ConditionExpr { lhs: side(&tts[..k])?, cmp, rhs: side(&tts[k + width..])?, tokens })
}

const STMT_FORM: &str =
    "a tile body holds `wait!(..);`, `signal!(..);` and tile-op calls such as `row_sum(a.tile([i, j], [32, 32]), ..);`";

fn tile_stmt(stmt: &Stmt) -> syn::Result<TileStmt> {
    let mac = match stmt {
        Stmt::Macro(sm) => Some(&sm.mac),
        Stmt::Expr(Expr::Macro(m), _) => Some(&m.mac),
        _ => None,
    };
    if let Some(mac) = mac {
        let mut access: AccessExpr = match macro_name(mac).as_deref() {
            Some("wait") | Some("signal") => mac.parse_body()?,
            Some("tile") => {
                return Err(syn::Error::new(mac.path.span(), "`tile!` groups cannot be nested"));
            }
            Some("event") => {
                return Err(syn::Error::new(
                    mac.path.span(),
                    "declare events at the top of the megakernel, outside `tile!`",
                ));
            }
            _ => return Err(syn::Error::new(mac.path.span(), STMT_FORM)),
        };
        access.span = mac.span();
        access.tokens = mac.to_token_stream();
        return Ok(if macro_name(mac).as_deref() == Some("wait") {
            TileStmt::Wait(access)
        } else {
            TileStmt::Signal(access)
        });
    }
    match stmt {
        Stmt::Expr(Expr::Call(call), _) => {
            let Expr::Path(p) = &*call.func else {
                return Err(syn::Error::new(call.func.span(), "expected the name of a tile op"));
            };
            let args = call.args.iter().map(op_arg).collect::<syn::Result<_>>()?;
            Ok(TileStmt::Op(OpCall { func: p.path.clone(), args, span: stmt.span() }))
        }
        other => Err(syn::Error::new(other.span(), STMT_FORM)),
    }
}

fn op_arg(e: &Expr) -> syn::Result<OpArg> {
    if let Expr::MethodCall(mc) = e
        && (mc.method == "tile" || mc.method == "tile_mut" || mc.method == "tile_ref")
    {
        let Expr::Path(recv) = &*mc.receiver else {
            return Err(syn::Error::new(mc.receiver.span(), "expected a tensor parameter before `.tile(..)`"));
        };
        let tensor = recv
            .path
            .get_ident()
            .cloned()
            .ok_or_else(|| syn::Error::new(recv.span(), "expected a tensor parameter"))?;
        let args: Vec<&Expr> = mc.args.iter().collect();
        let (Some(Expr::Array(index)), Some(Expr::Array(size)), 2) = (args.first(), args.get(1), args.len()) else {
            return Err(syn::Error::new(mc.span(), "expected `tensor.tile([index..], [extent..])`"));
        };
        return Ok(OpArg::Tile(TileArg {
            tensor,
            index: index.elems.iter().cloned().collect(),
            size: size.elems.iter().cloned().collect(),
            span: mc.span(),
            tokens: mc.to_token_stream(),
        }));
    }
    Ok(OpArg::Scalar(e.clone()))
}

impl Parse for AccessExpr {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let event: Ident = input.parse()?;
        let content;
        bracketed!(content in input);
        let mut indices = Vec::new();
        while !content.is_empty() {
            indices.push(index_expr(&content)?);
            if content.is_empty() {
                break;
            }
            content.parse::<Token![,]>()?;
        }
        if !input.is_empty() {
            return Err(input.error("expected a single access such as `done[i]`"));
        }
        Ok(AccessExpr { event, indices, span: Span::call_site(), tokens: TokenStream::new() })
    }
}

fn index_expr(input: ParseStream) -> syn::Result<IndexExpr> {
    if input.peek(Ident) && input.peek2(syn::token::Bracket) {
        let tensor: Ident = input.parse()?;
        let content;
        let bracket = bracketed!(content in input);
        let at: Punctuated<Expr, Token![,]> = Punctuated::parse_terminated(&content)?;
        // rebuilt with the user's bracket span, so that errors spanning `tensor[..]` point
        // at it (a group made by `quote!` would span the attribute)
        let mut tokens = tensor.to_token_stream();
        bracket.surround(&mut tokens, |t| at.to_tokens(t));
        if !input.is_empty() && !input.peek(Token![,]) {
            return Err(input.error(format!(
                "a data index is a whole coordinate: `{tensor}[..]` cannot be combined with arithmetic (store the coordinate itself in `{tensor}`)"
            )));
        }
        return Ok(IndexExpr::Data { tensor, at: at.into_iter().collect(), tokens });
    }
    let e: Expr = input.parse()?;
    Ok(match e {
        Expr::Range(r) => {
            if let syn::RangeLimits::Closed(t) = r.limits {
                return Err(syn::Error::new(t.span(), "use a half-open range `a .. b` in an event access"));
            }
            IndexExpr::Range { span: r.span(), tokens: r.to_token_stream(), start: r.start, end: r.end }
        }
        e => IndexExpr::At(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel_with_index(index: &str) -> TokenStream {
        format!(
            "fn k(x: &Tensor<f32, {{ [N] }}>) {{ let e = event!([N]); tile!(p[i] in [N] {{ signal!(e[{index}]); }}); }}"
        )
        .parse()
        .unwrap()
    }

    #[test]
    fn input_that_would_overflow_the_stack_is_an_error() {
        let cases = [
            ("(".repeat(5000) + "i" + &")".repeat(5000), "nest more than"),
            ("- ".repeat(3000) + "i", "too long"),
            ("|a| ".repeat(1000) + "i", "too long"),
            ("i".to_string() + &" - i".repeat(20000), "too long"),
        ];
        for (index, want) in cases {
            let err = megakernel(kernel_with_index(&index), &mut Errors::default()).err().expect("an error");
            assert!(err.to_string().contains(want), "{err}");
        }
        // ordinary input passes, however many statements, arguments or attributes
        let many = "i + 1 - 1, ".repeat(2000);
        assert!(check_nesting(&"#[doc = \"x\"]".repeat(1000).parse().unwrap()).is_ok());
        assert!(check_nesting(&format!("fn k({many}) {{ {many} }}").parse().unwrap()).is_ok());
        assert!(megakernel(kernel_with_index("i * 2 - (i + (1 - 1)) - i"), &mut Errors::default()).is_ok());
    }

    #[test]
    fn a_tile_cost_comes_before_or_after_the_condition() {
        for header in ["g[e] in [E], cost = 3 if e < n[0]", "g[e] in [E] if e < n[0], cost = 3"] {
            let group: TileGroup = syn::parse_str(&format!("{header} {{ wait!(r[0]); }}")).unwrap();
            assert_eq!(group.cost.map(|c| c.base10_digits().to_string()).as_deref(), Some("3"), "{header}");
            assert!(group.condition.is_some(), "{header}");
        }
        for twice in [
            "g[e] in [E], cost = 3 if e < n[0], cost = 2 { wait!(r[0]); }",
            "g[e] in [E], cost = 3, cost = 2 if e < n[0] { wait!(r[0]); }",
            "g[e] in [E], cost = 3, cost = 2 { wait!(r[0]); }",
        ] {
            let err = syn::parse_str::<TileGroup>(twice).err().map(|e| e.to_string());
            assert_eq!(err.as_deref(), Some("`cost` is given twice"), "{twice}");
        }
        let unknown = syn::parse_str::<TileGroup>("g[e] in [E] if e < n[0], weight = 2 { wait!(r[0]); }");
        assert!(unknown.err().is_some_and(|e| e.to_string().contains("unknown tile argument `weight`")));
    }

    #[test]
    fn a_comparison_glued_to_a_negative_number_is_split_there() {
        for (text, cmp) in
            [("n[0]>-1", et_graph::Cmp::Gt), ("e<-n[0]", et_graph::Cmp::Lt), ("e >= -2", et_graph::Cmp::Ge)]
        {
            let parsed = condition(text.parse::<TokenStream>().unwrap().into_iter().collect());
            assert_eq!(parsed.map(|c| c.cmp).ok(), Some(cmp), "{text}");
        }
    }

    #[test]
    fn a_data_index_with_arithmetic_is_named_as_such() {
        for index in ["idx[t] + 1", "idx[t] * 2"] {
            let err = syn::parse_str::<AccessExpr>(&format!("done[{index}]")).err().map(|e| e.to_string());
            assert!(
                err.as_deref().is_some_and(|e| e.starts_with("a data index is a whole coordinate: `idx[..]`")),
                "{err:?}"
            );
        }
        assert!(syn::parse_str::<AccessExpr>("done[idx[t], 2]").is_ok());
    }

    #[test]
    fn a_data_index_keeps_the_users_spans() {
        let access: AccessExpr = syn::parse_str("e[t, topk[t, k]]").unwrap();
        let tokens: Vec<_> = access.indices[1].tokens().into_iter().collect();
        let starts: Vec<_> = tokens.iter().map(|t| t.span().start()).map(|at| (at.line, at.column)).collect();
        // `topk` at column 5 and its bracket at 9, as written (not the macro's call site)
        assert_eq!(starts, [(1, 5), (1, 9)]);
    }
}
