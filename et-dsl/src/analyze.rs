//! From the syntax model to the task-graph description: resolve names, lower every
//! expression, build the [`GraphSpec`], run the rules of `et_graph::check`, and map each
//! violation back to the span of the user's token.

use std::borrow::Cow;
use std::collections::HashMap;

use et_graph::check::{AccessKind, Diagnostic, Location, Severity};
use et_graph::{
    Access, Affine, Count, DType, DimKind, DimSpec, EventAccess, EventSpec, GraphSpec, GroupSpec, Index, ScheduleKind,
    TensorSpec, TileAccess,
};
use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{Expr, Ident, Path};

use crate::attr::{Args, DimValue, Schedule};
use crate::diag::{Errors, did_you_mean, unknown};
use crate::lower::{Scope, affine};
use crate::model::*;

/// Everything code generation needs.
pub struct Analyzed {
    pub spec: GraphSpec,
    pub dim_names: Vec<String>,
    pub groups: Vec<LoweredGroup>,
    /// The rule checker's notes, as items that make the compiler warn (see [`note`]).
    pub notes: TokenStream,
    pub races: Vec<RaceCheck>,
}

/// Races found at the sample sizes between two op calls, each holding if the ops write
/// the `&mut` tiles they are given: whether they do is in the ops' signatures, which
/// only rustc sees, so each becomes a constant that fails to evaluate when it holds.
pub struct RaceCheck {
    /// The op call of the later side.
    pub span: Span,
    pub cases: Vec<RaceCase>,
}

/// One racing pair of tile arguments.
pub struct RaceCase {
    /// For each side, the op and argument position whose kind says whether it writes;
    /// `None` for a tile of a `&Tensor`, which is only read.
    pub first: Option<(Path, usize)>,
    pub second: Option<(Path, usize)>,
    pub race: et_graph::race::Race,
}

/// A tile body, lowered.
pub struct LoweredGroup {
    pub name: Ident,
    pub vars: Vec<Ident>,
    pub stmts: Vec<LoweredStmt>,
    /// For each of the group's tiles: the op called, the argument position, the call.
    pub tile_args: Vec<(Path, usize, Span)>,
    /// For each of the group's data reads (`GroupSpec::data_reads` order): its span.
    pub read_spans: Vec<Span>,
}

/// One statement of a tile body, lowered.
pub enum LoweredStmt {
    /// Wait number `access` of the group.
    Wait { access: usize, span: Span },
    /// Signal number `access` of the group.
    Signal { access: usize, span: Span },
    /// A tile-op call.
    Op { func: Path, args: Vec<LoweredArg>, span: Span },
}

/// An argument of a tile-op call, lowered.
pub enum LoweredArg {
    /// `size` holds each extent as written and lowered (affine in dims, often a constant).
    Tile {
        tensor: usize,
        ident: Ident,
        index: Vec<(Expr, Affine)>,
        size: Vec<(Expr, Affine)>,
        span: Span,
    },
    Scalar {
        expr: Expr,
        value: Scalar,
    },
}

/// The CUDA translation of a scalar argument.
pub enum Scalar {
    Int(Affine),
    Float(String),
}

/// The dims in scope: names and the values of the static ones.
struct DimTable<'a> {
    names: &'a [String],
    statics: &'a [Option<i64>],
}

impl<'a> DimTable<'a> {
    fn scope(&self, vars: &'a [String], what: &'a str) -> Scope<'a> {
        Scope { vars, dims: self.names, statics: self.statics, what }
    }
}

/// The user's tokens behind each [`Location`]: errors span them from first to last
/// token (`syn::Error::new_spanned`), which works on stable Rust.
#[derive(Default)]
struct Spans {
    dims: Vec<TokenStream>,
    events: Vec<TokenStream>,
    event_extents: Vec<Vec<TokenStream>>,
    tensor_extents: Vec<Vec<TokenStream>>,
    domain_extents: Vec<Vec<TokenStream>>,
    counts: Vec<Option<TokenStream>>,
    groups: Vec<TokenStream>,
    conditions: HashMap<usize, TokenStream>,
    accesses: HashMap<(usize, bool, usize), (TokenStream, Vec<TokenStream>)>,
    tiles: HashMap<(usize, usize), (TokenStream, Vec<TokenStream>)>,
    extents: HashMap<(usize, usize), Vec<TokenStream>>,
}

impl Spans {
    fn of(&self, loc: Location) -> &TokenStream {
        match loc {
            Location::Dim(d) => &self.dims[d as usize],
            Location::Event(e) => &self.events[e as usize],
            Location::EventExtent { event, dim } => {
                self.event_extents[event as usize].get(dim as usize).unwrap_or(&self.events[event as usize])
            }
            Location::TensorExtent { tensor, dim } => &self.tensor_extents[tensor as usize][dim as usize],
            Location::DomainExtent { group, dim } => {
                self.domain_extents[group as usize].get(dim as usize).unwrap_or(&self.groups[group as usize])
            }
            Location::EventCount(e) => self.counts[e as usize].as_ref().unwrap_or(&self.events[e as usize]),
            Location::Group(g) => &self.groups[g as usize],
            Location::Condition(g) => self.conditions.get(&(g as usize)).unwrap_or(&self.groups[g as usize]),
            Location::Access { group, kind, access, coord } => {
                let (whole, coords) = &self.accesses[&(group as usize, kind == AccessKind::Wait, access as usize)];
                coord.and_then(|c| coords.get(c as usize)).unwrap_or(whole)
            }
            Location::Tile { group, tile, coord } => {
                let (whole, coords) = &self.tiles[&(group as usize, tile as usize)];
                coord.and_then(|c| coords.get(c as usize)).unwrap_or(whole)
            }
            Location::TileExtent { group, tile, dim } => {
                let key = (group as usize, tile as usize);
                self.extents[&key].get(dim as usize).unwrap_or(&self.tiles[&key].0)
            }
        }
    }
}

fn tokens(t: &impl ToTokens) -> TokenStream {
    t.to_token_stream()
}

/// Lowers and checks; all problems found are collected in `errors`.
pub fn analyze(m: &Megakernel, args: &Args, errors: &mut Errors) -> Option<Analyzed> {
    let before = errors.count();
    let mut spans = Spans::default();
    let dims = collect_dims(m, args, &mut spans, errors);
    let dim_names: Vec<String> = dims.iter().map(|d| d.name.to_string()).collect();
    let statics: Vec<Option<i64>> =
        dims.iter().map(|d| if let DimKind::Static(v) = d.kind { Some(v) } else { None }).collect();
    let dt = DimTable { names: &dim_names, statics: &statics };
    let tensors = lower_tensors(m, &dt, errors);
    spans.tensor_extents = m.params.iter().map(|p| p.shape.iter().map(tokens).collect()).collect();
    let param_names: Vec<String> = m.params.iter().map(|p| p.name.to_string()).collect();
    let events = lower_events(m, &dt, &param_names, &mut spans, errors);
    let mut groups = Vec::new();
    let mut lowered = Vec::new();
    for (g, group) in m.groups.iter().enumerate() {
        if m.groups[..g].iter().any(|o| o.name == group.name) {
            errors.error(group.name.span(), format!("tile group `{}` is defined twice", group.name));
        }
        let (spec, low) = lower_group(m, g, group, &dt, &param_names, &mut spans, errors);
        groups.push(spec);
        lowered.push(low);
    }
    let spec = GraphSpec {
        name: m.name.to_string().into(),
        dims: Cow::Owned(dims),
        tensors: Cow::Owned(tensors),
        events: Cow::Owned(events),
        groups: Cow::Owned(groups),
        schedule: match args.schedule {
            Schedule::Static => ScheduleKind::Static,
            Schedule::Dynamic => ScheduleKind::Dynamic,
        },
    };
    if errors.count() > before {
        // the graph is incomplete: rule checks would report follow-on noise
        return None;
    }
    let mut notes = TokenStream::new();
    for d in et_graph::check::check(&spec) {
        match d.severity {
            Severity::Error => errors.push(to_error(&d, &spans)),
            Severity::Note => notes.extend(note(&d, &spans)),
        }
    }
    if !errors.is_empty() {
        return None;
    }
    let races = race_checks(&spec, &lowered);
    Some(Analyzed { spec, dim_names, groups: lowered, notes, races })
}

/// The races at the sample sizes, one check per pair of op calls.
fn race_checks(spec: &GraphSpec, groups: &[LoweredGroup]) -> Vec<RaceCheck> {
    let mut out: Vec<((u16, u16, u16, u16), RaceCheck)> = Vec::new();
    for race in et_graph::check::races_at_sample_sizes(spec) {
        // a data read (past the group's tiles) only reads
        let side = |s: &et_graph::race::Side| {
            let (func, arg, _) = groups[s.group as usize].tile_args.get(s.tile as usize)?;
            let tensor = spec.groups[s.group as usize].tiles[s.tile as usize].tensor;
            (spec.tensors[tensor as usize].access == Access::Write).then(|| (func.clone(), *arg))
        };
        let span_of = |s: &et_graph::race::Side| {
            let g = &groups[s.group as usize];
            match g.tile_args.get(s.tile as usize) {
                Some(t) => t.2,
                None => g.read_spans[s.tile as usize - g.tile_args.len()],
            }
        };
        let (first, second) = (side(&race.first), side(&race.second));
        let key = (race.first.group, race.first.stmt, race.second.group, race.second.stmt);
        let span = span_of(&race.second);
        let case = RaceCase { first, second, race };
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, check)) => check.cases.push(case),
            None => out.push((key, RaceCheck { span, cases: vec![case] })),
        }
    }
    out.into_iter().map(|(_, c)| c).collect()
}

/// Lowers every expression; one that fails is reported and stands in as `1`, so that
/// lowering goes on and reports the other expressions' errors too.
fn lower_all(exprs: &[Expr], scope: &Scope<'_>, errors: &mut Errors) -> Vec<Affine> {
    exprs
        .iter()
        .map(|e| {
            affine(e, scope).unwrap_or_else(|err| {
                errors.push(err);
                Affine::constant(1)
            })
        })
        .collect()
}

fn to_error(d: &Diagnostic, spans: &Spans) -> syn::Error {
    let mut msg = d.message.clone();
    if let Some(h) = &d.help {
        msg.push_str("\nhelp: ");
        msg.push_str(h);
    }
    syn::Error::new_spanned(spans.of(d.location), msg)
}

/// A note as a compiler warning at its location. Stable Rust has no warning API for
/// proc macros, so the note becomes a `#[deprecated]` constant used once, the use spanned
/// at the location: rustc then warns "use of deprecated constant ..: <note>" there. The
/// anonymous `const _` keeps the constant's name out of the user's namespace.
fn note(d: &Diagnostic, spans: &Spans) -> TokenStream {
    let text = format!("{}{}", d.message, d.help.as_ref().map(|h| format!("; {h}")).unwrap_or_default());
    let span = spans.of(d.location).clone().into_iter().next().map_or_else(Span::call_site, |t| t.span());
    let used = Ident::new("et_note", span);
    quote::quote! {
        const _: () = {
            #[deprecated(note = #text)]
            #[allow(non_upper_case_globals)]
            const et_note: () = ();
            #used
        };
    }
}

fn collect_dims(m: &Megakernel, args: &Args, spans: &mut Spans, errors: &mut Errors) -> Vec<DimSpec> {
    let mut dims: Vec<DimSpec> = Vec::new();
    for a in &args.dims {
        let name = a.name.to_string();
        if dims.iter().any(|d| d.name == name) {
            errors.error(a.name.span(), format!("dim `{name}` is given twice in `dims(..)`"));
            continue;
        }
        let kind = match a.value {
            DimValue::Static(v) => DimKind::Static(v),
            DimValue::Max(v) => DimKind::Symbolic { max: Some(v) },
        };
        dims.push(DimSpec { name: name.into(), kind });
        spans.dims.push(tokens(&a.name));
    }
    // every other name in a parameter's extents is a symbolic dim
    for p in &m.params {
        for e in &p.shape {
            for ident in idents(e) {
                let name = ident.to_string();
                if !dims.iter().any(|d| d.name == name) {
                    dims.push(DimSpec { name: name.into(), kind: DimKind::Symbolic { max: None } });
                    spans.dims.push(tokens(&ident));
                }
            }
        }
    }
    dims
}

/// The identifiers of an extent expression (its dims).
pub(crate) fn idents(e: &Expr) -> Vec<Ident> {
    match e {
        Expr::Path(p) => p.path.get_ident().cloned().into_iter().collect(),
        Expr::Binary(b) => {
            let mut v = idents(&b.left);
            v.extend(idents(&b.right));
            v
        }
        Expr::Paren(p) => idents(&p.expr),
        Expr::Group(g) => idents(&g.expr),
        Expr::Unary(u) => idents(&u.expr),
        _ => Vec::new(),
    }
}

fn lower_tensors(m: &Megakernel, dt: &DimTable, errors: &mut Errors) -> Vec<TensorSpec> {
    let scope = dt.scope(&[], "a tensor extent");
    m.params
        .iter()
        .enumerate()
        .map(|(k, p)| {
            if m.params[..k].iter().any(|o| o.name == p.name) {
                errors.error(p.name.span(), format!("tensor parameter `{}` is declared twice", p.name));
            }
            let dtype = DType::from_rust_name(&p.dtype.to_string()).unwrap_or_else(|| {
                let names = DType::ALL.map(DType::rust_name);
                let mut msg = format!("unknown dtype `{}`: expected one of {}", p.dtype, names.join(", "));
                if let Some(s) = did_you_mean(&p.dtype.to_string(), names) {
                    msg.push_str(&format!("\nhelp: did you mean `{s}`?"));
                }
                errors.error(p.dtype.span(), msg);
                DType::F32
            });
            let shape = lower_all(&p.shape, &scope, errors);
            if shape.is_empty() || shape.len() > et_graph::MAX_RANK {
                errors.error(
                    p.ty_span,
                    format!(
                        "tensor `{}` has rank {}; et supports ranks 1 to {}",
                        p.name,
                        shape.len(),
                        et_graph::MAX_RANK
                    ),
                );
            }
            TensorSpec {
                name: p.name.to_string().into(),
                dtype,
                shape: Cow::Owned(shape),
                access: if p.mutable { Access::Write } else { Access::Read },
            }
        })
        .collect()
}

fn lower_events(
    m: &Megakernel,
    dt: &DimTable,
    params: &[String],
    spans: &mut Spans,
    errors: &mut Errors,
) -> Vec<EventSpec> {
    let scope = dt.scope(&[], "an event extent");
    let mut out = Vec::new();
    for (k, ev) in m.events.iter().enumerate() {
        if m.events[..k].iter().any(|o| o.name == ev.name) {
            errors.error(ev.name.span(), format!("event `{}` is declared twice", ev.name));
        }
        if params.iter().any(|t| ev.name == t) {
            // `e.tile(..)` and `signal!(e[..])` would name different things
            errors.error(
                ev.name.span(),
                format!("event `{}` has the name of a tensor parameter; rename one of them", ev.name),
            );
        }
        spans.events.push(tokens(&ev.name));
        spans.event_extents.push(ev.shape.iter().map(tokens).collect());
        spans.counts.push(ev.count.as_ref().map(CountDecl::tokens));
        let shape: Vec<Affine> = lower_all(&ev.shape, &scope, errors);
        if shape.is_empty() {
            errors.error(ev.span, "an event needs at least one dimension: `event!([1])` for a single counter");
        }
        let count = match &ev.count {
            None => Count::Inferred,
            Some(CountDecl::Fixed(e)) => {
                let s = dt.scope(&[], "an event count");
                match affine(e, &s) {
                    Ok(a) => Count::Fixed(a),
                    Err(err) => {
                        errors.push(err);
                        Count::Inferred
                    }
                }
            }
            Some(CountDecl::Dynamic { tensor, .. }) => match params.iter().position(|p| *tensor == p) {
                Some(t) => Count::PerElement { tensor: t as u16 },
                None => {
                    let cands: Vec<&str> = params.iter().map(String::as_str).collect();
                    errors.push(unknown(tensor.span(), "count tensor", &tensor.to_string(), &cands));
                    Count::Inferred
                }
            },
        };
        out.push(EventSpec { name: ev.name.to_string().into(), shape: Cow::Owned(shape), count });
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn lower_group(
    m: &Megakernel,
    g: usize,
    group: &TileGroup,
    dt: &DimTable,
    params: &[String],
    spans: &mut Spans,
    errors: &mut Errors,
) -> (GroupSpec, LoweredGroup) {
    spans.groups.push(tokens(&group.name));
    spans.domain_extents.push(group.domain.iter().map(tokens).collect());
    let vars: Vec<String> = group.vars.iter().map(Ident::to_string).collect();
    for (k, v) in group.vars.iter().enumerate() {
        if dt.names.iter().any(|d| *v == d) {
            errors.error(v.span(), format!("tile index `{v}` has the name of a dim; rename one of them"));
        }
        if params.iter().any(|t| *v == t) {
            // `v.tile(..)` and `v` in an index expression would name different things
            errors.error(v.span(), format!("tile index `{v}` has the name of a tensor parameter; rename one of them"));
        }
        if group.vars[..k].contains(v) {
            errors.error(v.span(), format!("tile index `{v}` is declared twice"));
        }
    }
    let dscope = dt.scope(&[], "a tile domain extent");
    let domain: Vec<Affine> = lower_all(&group.domain, &dscope, errors);
    if domain.len() > et_graph::MAX_RANK {
        errors.error(group.name.span(), format!("a tile domain has at most {} dimensions", et_graph::MAX_RANK));
    }
    let mut waits = Vec::new();
    let mut signals = Vec::new();
    let mut tiles = Vec::new();
    let mut tile_args = Vec::new();
    let mut stmts = Vec::new();
    let event_names: Vec<String> = m.events.iter().map(|e| e.name.to_string()).collect();
    for stmt in &group.stmts {
        match stmt {
            TileStmt::Wait(a) | TileStmt::Signal(a) => {
                let is_wait = matches!(stmt, TileStmt::Wait(_));
                let list = if is_wait { &mut waits } else { &mut signals };
                let k = list.len();
                let Some(mut access) = lower_access(a, &vars, dt, &event_names, params, errors) else {
                    continue;
                };
                access.stmt = stmts.len() as u16;
                spans
                    .accesses
                    .insert((g, is_wait, k), (a.tokens.clone(), a.indices.iter().map(IndexExpr::tokens).collect()));
                list.push(access);
                stmts.push(if is_wait {
                    LoweredStmt::Wait { access: k, span: a.span }
                } else {
                    LoweredStmt::Signal { access: k, span: a.span }
                });
            }
            TileStmt::Op(call) => {
                let func = from_module(&call.func);
                let mut args = Vec::new();
                for arg in &call.args {
                    match arg {
                        OpArg::Tile(t) => {
                            let Some(tensor) = params.iter().position(|p| t.tensor == p) else {
                                let cands: Vec<&str> = params.iter().map(String::as_str).collect();
                                errors.push(unknown(t.tensor.span(), "tensor", &t.tensor.to_string(), &cands));
                                continue;
                            };
                            let iscope = dt.scope(&vars, "a tile index");
                            let sscope = dt.scope(&vars, "a tile extent");
                            let index: Vec<(Expr, Affine)> = t
                                .index
                                .iter()
                                .filter_map(|e| {
                                    affine(e, &iscope).map_err(|err| errors.push(err)).ok().map(|a| (e.clone(), a))
                                })
                                .collect();
                            // tile indices are in scope so that `check_bounds` can explain why
                            // an extent may not use them
                            let size: Vec<(Expr, Affine)> = t
                                .size
                                .iter()
                                .filter_map(|e| {
                                    affine(e, &sscope).map_err(|err| errors.push(err)).ok().map(|a| (e.clone(), a))
                                })
                                .collect();
                            if index.len() != t.index.len() || size.len() != t.size.len() {
                                continue;
                            }
                            spans
                                .tiles
                                .insert((g, tiles.len()), (t.tokens.clone(), t.index.iter().map(tokens).collect()));
                            spans.extents.insert((g, tiles.len()), t.size.iter().map(tokens).collect());
                            // a `&mut` tile may be written: the op's signature says, at launch
                            // exactly (the emitted spec reads it) and at compile time through
                            // the race checks' constants
                            let access = if m.params[tensor].mutable { Access::Write } else { Access::Read };
                            tile_args.push((func.clone(), args.len(), call.span));
                            tiles.push(TileAccess {
                                tensor: tensor as u16,
                                index: Cow::Owned(index.iter().map(|(_, a)| a.clone()).collect()),
                                size: Cow::Owned(size.iter().map(|(_, a)| a.clone()).collect()),
                                access,
                                stmt: stmts.len() as u16,
                            });
                            args.push(LoweredArg::Tile { tensor, ident: t.tensor.clone(), index, size, span: t.span });
                        }
                        OpArg::Scalar(e) => match scalar(e, &vars, dt) {
                            Ok(value) => args.push(LoweredArg::Scalar { expr: e.clone(), value }),
                            Err(err) => errors.push(err),
                        },
                    }
                }
                stmts.push(LoweredStmt::Op { func, args, span: call.span });
            }
        }
    }
    let condition = group.condition.as_ref().and_then(|c| {
        spans.conditions.insert(g, c.tokens.clone());
        lower_condition(c, &vars, dt, params, errors)
    });
    let cost = match &group.cost {
        Some(l) => l.base10_parse::<u32>().unwrap_or_else(|e| {
            // syn's own message ("invalid digit found in string") names neither the
            // argument nor what it takes
            errors.error(l.span(), format!("`cost = {l}`: a cost is a whole number from 0 to {} ({e})", u32::MAX));
            1
        }),
        None => 1,
    };
    let spec = GroupSpec {
        name: group.name.to_string().into(),
        vars: vars.iter().map(|v| Cow::Owned(v.clone())).collect(),
        domain: Cow::Owned(domain),
        waits: Cow::Owned(waits),
        signals: Cow::Owned(signals),
        tiles: Cow::Owned(tiles),
        cost,
        condition,
    };
    // spans of the data reads, in `GroupSpec::data_reads` order
    let mut read_spans = Vec::new();
    if let Some(c) = &group.condition {
        read_spans.push(syn::spanned::Spanned::span(&c.tokens));
    }
    for stmt in &group.stmts {
        if let TileStmt::Signal(a) = stmt {
            for ix in &a.indices {
                if let IndexExpr::Data { tokens, .. } = ix {
                    read_spans.push(syn::spanned::Spanned::span(tokens));
                }
            }
        }
    }
    let low = LoweredGroup { name: group.name.clone(), vars: group.vars.clone(), stmts, tile_args, read_spans };
    (spec, low)
}

/// The op path `func`, as written in the user's module, as seen from the megakernel's
/// module inside it: a leading `super` or `self` is one module further up. (`crate::`,
/// `::` and plain paths name the same item from both, the latter through the module's
/// `use super::*`.)
fn from_module(func: &Path) -> Path {
    let mut out = func.clone();
    if func.leading_colon.is_none()
        && let Some(first) = func.segments.first()
    {
        let span = first.ident.span();
        if first.ident == "super" {
            out.segments.insert(0, syn::PathSegment::from(Ident::new("super", span)));
        } else if first.ident == "self" {
            out.segments[0] = syn::PathSegment::from(Ident::new("super", span));
        }
    }
    out
}

fn scalar(e: &Expr, vars: &[String], dt: &DimTable) -> syn::Result<Scalar> {
    if let Expr::Lit(l) = e
        && let syn::Lit::Float(f) = &l.lit
    {
        return Ok(Scalar::Float(f.base10_digits().to_string()));
    }
    if let Expr::Unary(u) = e
        && matches!(u.op, syn::UnOp::Neg(_))
        && let Expr::Lit(l) = &*u.expr
        && let syn::Lit::Float(f) = &l.lit
    {
        return Ok(Scalar::Float(format!("-{}", f.base10_digits())));
    }
    let scope = dt.scope(vars, "a scalar tile-op argument");
    affine(e, &scope).map(Scalar::Int).map_err(|err| {
        syn::Error::new(
            e.span(),
            format!("{err}\nnote: tile-op arguments are `tensor.tile([..], [..])`, float literals, or integer expressions of tile indices and dims"),
        )
    })
}

fn lower_access(
    a: &AccessExpr,
    vars: &[String],
    dt: &DimTable,
    events: &[String],
    params: &[String],
    errors: &mut Errors,
) -> Option<EventAccess> {
    let Some(event) = events.iter().position(|e| a.event == e) else {
        if params.iter().any(|p| a.event == p) {
            errors.error(
                a.event.span(),
                format!("`{}` is a tensor, not an event: declare one with `let {} = event!([..]);`", a.event, a.event),
            );
        } else {
            let cands: Vec<&str> = events.iter().map(String::as_str).collect();
            errors.push(unknown(a.event.span(), "event", &a.event.to_string(), &cands));
        }
        return None;
    };
    let scope = dt.scope(vars, "an event index");
    let mut index = Vec::new();
    let mut ok = true;
    for ix in &a.indices {
        let lowered = match ix {
            IndexExpr::At(e) => affine(e, &scope).map(Index::At),
            IndexExpr::Range { start: None, end: None, .. } => Ok(Index::All),
            IndexExpr::Range { start, end, span, .. } => {
                let s = start.as_ref().map(|e| affine(e, &scope)).transpose();
                let e = end.as_ref().map(|e| affine(e, &scope)).transpose();
                match (s, e) {
                    (Ok(s), Ok(Some(e))) => Ok(Index::Range { start: s.unwrap_or(Affine::constant(0)), end: e }),
                    (Ok(_), Ok(None)) => {
                        Err(syn::Error::new(*span, "an open-ended range `a ..` needs its end: write `a .. extent`"))
                    }
                    (Err(err), _) | (_, Err(err)) => Err(err),
                }
            }
            IndexExpr::Data { tensor, at, .. } => match params.iter().position(|p| tensor == p) {
                Some(t) => data_position(at, &scope).map(|(at, along)| Index::Data {
                    tensor: t as u16,
                    at: Cow::Owned(at),
                    along,
                }),
                None => {
                    let cands: Vec<&str> = params.iter().map(String::as_str).collect();
                    Err(unknown(tensor.span(), "index tensor", &tensor.to_string(), &cands))
                }
            },
        };
        match lowered {
            Ok(i) => index.push(i),
            Err(e) => {
                errors.push(e);
                ok = false;
            }
        }
    }
    ok.then_some(EventAccess { event: event as u16, index: Cow::Owned(index), stmt: 0 })
}

/// The position of a data index, `tokens[e, m * 16 .. m * 16 + 16]`: affine coordinates,
/// at most one of them a half-open range (a run of positions).
/// A data index's position and its run (`Index::Data::at` and `along`).
type DataPosition = (Vec<Affine>, Option<(u16, Affine)>);

fn data_position(at: &[Expr], scope: &Scope<'_>) -> syn::Result<DataPosition> {
    let mut out = Vec::with_capacity(at.len());
    let mut along = None;
    for (c, e) in at.iter().enumerate() {
        let Expr::Range(r) = e else {
            out.push(affine(e, scope)?);
            continue;
        };
        let (Some(start), Some(end), syn::RangeLimits::HalfOpen(_)) = (&r.start, &r.end, &r.limits) else {
            return Err(syn::Error::new(r.span(), "a run of data positions is a half-open range `a .. b`"));
        };
        if along.is_some() {
            return Err(syn::Error::new(r.span(), "a data index may run along one coordinate only"));
        }
        let (start, end) = (affine(start, scope)?, affine(end, scope)?);
        along = Some((c as u16, end.sub(&start)));
        out.push(start);
    }
    Ok((out, along))
}

/// Lowers `if a <op> t[..]` (either side the data) to `a <op> t[..]`.
fn lower_condition(
    c: &ConditionExpr,
    vars: &[String],
    dt: &DimTable,
    params: &[String],
    errors: &mut Errors,
) -> Option<et_graph::Condition> {
    let scope = dt.scope(vars, "a condition");
    let (expr, cmp, tensor, at) = match (&c.lhs, &c.rhs) {
        (Operand::Expr(e), Operand::Data { tensor, at }) => (e, c.cmp, tensor, at),
        (Operand::Data { tensor, at }, Operand::Expr(e)) => (e, c.cmp.flipped(), tensor, at),
        _ => {
            errors.push(syn::Error::new_spanned(
                &c.tokens,
                "a condition compares an integer expression of tile indices and dims with one element of an integer tensor, e.g. `m * 16 < counts[e]`",
            ));
            return None;
        }
    };
    let Some(t) = params.iter().position(|p| tensor == p) else {
        let cands: Vec<&str> = params.iter().map(String::as_str).collect();
        errors.push(unknown(tensor.span(), "tensor", &tensor.to_string(), &cands));
        return None;
    };
    let lhs = affine(expr, &scope).map_err(|e| errors.push(e)).ok()?;
    let at = at.iter().map(|e| affine(e, &scope)).collect::<syn::Result<Vec<_>>>().map_err(|e| errors.push(e)).ok()?;
    Some(et_graph::Condition { lhs, cmp, tensor: t as u16, at: Cow::Owned(at) })
}
