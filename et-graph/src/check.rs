//! Compile-time rules over a [`GraphSpec`], one function per rule. `et-macros` maps each
//! [`Diagnostic`]'s [`Location`] back to the user's tokens.
//!
//! Bounds are *proved* by interval reasoning over the tile domain with symbolic dims
//! (every admissible size), and so is the progress around a cycle of tile groups
//! ([`crate::ranking`]). Coverage, trigger counts, self-waits and task-level cycles
//! are checked on the exact task graph at a set of sample sizes of the symbolic dims
//! (and checked again on the real sizes at every launch), and so are data races
//! ([`races_at_sample_sizes`]).

use crate::affine::{Affine, Term};
use crate::race::Race;
use crate::resolve::order::{closed_cycle, kahn};
use crate::resolve::{CountProblemKind, Resolved, TaskId, dim_plan};
use crate::spec::{Access, Cmp, Condition, Count, DimKind, EventAccess, GraphSpec, Index, List};

/// Which statement of a tile body an access is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessKind {
    /// A `wait!`.
    Wait,
    /// A `signal!`.
    Signal,
}

/// The piece of the user's program a diagnostic points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// A dim (its declaration, or its first use).
    Dim(u16),
    /// An event declaration.
    Event(u16),
    /// One extent of an event's shape.
    EventExtent {
        /// The event.
        event: u16,
        /// The dimension of the extent.
        dim: u16,
    },
    /// One extent of a tensor parameter's shape.
    TensorExtent {
        /// The tensor.
        tensor: u16,
        /// The dimension of the extent.
        dim: u16,
    },
    /// One extent of a tile group's domain (`in [R, 4]`).
    DomainExtent {
        /// The group.
        group: u16,
        /// The dimension of the extent.
        dim: u16,
    },
    /// The `count = ..` of an event declaration (the declaration when there is none).
    EventCount(u16),
    /// A tile group's header.
    Group(u16),
    /// A `wait!`/`signal!`, or one coordinate of it.
    Access {
        /// The group.
        group: u16,
        /// Wait or signal.
        kind: AccessKind,
        /// Index among the group's waits (or signals).
        access: u16,
        /// The coordinate, when the problem is in one.
        coord: Option<u16>,
    },
    /// The `if ..` condition of a tile group.
    Condition(u16),
    /// A `t.tile(..)` argument of an op call, or one coordinate of it.
    Tile {
        /// The group.
        group: u16,
        /// Index among the group's tiles.
        tile: u16,
        /// The coordinate, when the problem is in one.
        coord: Option<u16>,
    },
    /// One extent of a `t.tile(..)` argument (`[B, 64]`).
    TileExtent {
        /// The group.
        group: u16,
        /// Index among the group's tiles.
        tile: u16,
        /// The dimension of the extent.
        dim: u16,
    },
}

/// How a diagnostic is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// A violated rule: the megakernel does not compile.
    Error,
    /// Something the user should see that does not stop compilation: a rule deferred to
    /// launch, or a suspicious but legal graph.
    Note,
}

/// One violated rule, or a note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error or note.
    pub severity: Severity,
    /// Where.
    pub location: Location,
    /// What is wrong, in one sentence.
    pub message: String,
    /// How to fix it, when there is a clear suggestion.
    pub help: Option<String>,
}

fn diag(location: Location, message: String) -> Diagnostic {
    Diagnostic { severity: Severity::Error, location, message, help: None }
}

fn error(location: Location, message: String, help: String) -> Diagnostic {
    Diagnostic { severity: Severity::Error, location, message, help: Some(help) }
}

fn note(location: Location, message: String, help: String) -> Diagnostic {
    Diagnostic { severity: Severity::Note, location, message, help: Some(help) }
}

/// Runs every rule; returns all violations found (empty when the graph is sound).
pub fn check(spec: &GraphSpec) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    check_ranks(spec, &mut out);
    if !out.is_empty() {
        // the other rules index coordinates by rank
        return out;
    }
    check_magnitudes(spec, &mut out);
    if !out.is_empty() {
        // the other rules compute with these numbers in `i64`
        return out;
    }
    check_extents(spec, &mut out);
    check_index_tensors(spec, &mut out);
    check_conditions(spec, &mut out);
    check_bounds(spec, &mut out);
    check_dims_determined(spec, &mut out);
    check_group_cycles(spec, &mut out);
    check_conditional_signals(spec, &mut out);
    check_unwaited_events(spec, &mut out);
    if out.iter().all(|d| d.severity == Severity::Note) {
        check_at_sample_sizes(spec, &mut out);
    }
    out
}

struct Names<'a> {
    dims: Vec<&'a str>,
}

impl<'a> Names<'a> {
    fn new(spec: &'a GraphSpec) -> Self {
        Names { dims: spec.dims.iter().map(|d| &*d.name).collect() }
    }

    fn show(&self, e: &Affine, vars: &[&str]) -> String {
        e.display(vars, &self.dims).to_string()
    }
}

fn group_vars(spec: &GraphSpec, g: usize) -> Vec<&str> {
    spec.groups[g].vars.iter().map(|v| &**v).collect()
}

fn each_access(spec: &GraphSpec) -> impl Iterator<Item = (usize, AccessKind, usize, &EventAccess)> {
    spec.groups.iter().enumerate().flat_map(|(g, group)| {
        let w = group.waits.iter().enumerate().map(move |(k, a)| (g, AccessKind::Wait, k, a));
        let s = group.signals.iter().enumerate().map(move |(k, a)| (g, AccessKind::Signal, k, a));
        w.chain(s)
    })
}

fn access_at(g: usize, kind: AccessKind, k: usize, coord: Option<usize>) -> Location {
    Location::Access { group: g as u16, kind, access: k as u16, coord: coord.map(|c| c as u16) }
}

/// Rule: every event access, data-dependent index and tile has the rank of what it indexes.
pub fn check_ranks(spec: &GraphSpec, out: &mut Vec<Diagnostic>) {
    for (g, kind, k, acc) in each_access(spec) {
        let ev = &spec.events[acc.event as usize];
        if acc.index.len() != ev.shape.len() {
            out.push(diag(
                access_at(g, kind, k, None),
                format!(
                    "event `{}` has {} dimension{}, but this access gives {} ind{}",
                    ev.name,
                    ev.shape.len(),
                    plural(ev.shape.len()),
                    acc.index.len(),
                    if acc.index.len() == 1 { "ex" } else { "ices" }
                ),
            ));
        }
        for (c, ix) in acc.index.iter().enumerate() {
            if let Index::Data { tensor, at, along } = ix {
                let t = &spec.tensors[*tensor as usize];
                if along.as_ref().is_some_and(|(c, _)| *c as usize >= at.len()) {
                    out.push(diag(
                        access_at(g, kind, k, Some(c)),
                        "the run's coordinate is outside the position".into(),
                    ));
                }
                if at.len() != t.shape.len() {
                    out.push(diag(
                        access_at(g, kind, k, Some(c)),
                        format!(
                            "tensor `{}` has {} dimension{}, but is indexed with {}",
                            t.name,
                            t.shape.len(),
                            plural(t.shape.len()),
                            at.len()
                        ),
                    ));
                }
            }
        }
    }
    for (g, group) in spec.groups.iter().enumerate() {
        if let Some(c) = &group.condition {
            let t = &spec.tensors[c.tensor as usize];
            if c.at.len() != t.shape.len() {
                out.push(diag(
                    Location::Condition(g as u16),
                    format!(
                        "tensor `{}` has {} dimension{}, but is indexed with {}",
                        t.name,
                        t.shape.len(),
                        plural(t.shape.len()),
                        c.at.len()
                    ),
                ));
            }
        }
        for (k, tile) in group.tiles.iter().enumerate() {
            let t = &spec.tensors[tile.tensor as usize];
            let loc = Location::Tile { group: g as u16, tile: k as u16, coord: None };
            if tile.index.len() != t.shape.len() || tile.size.len() != t.shape.len() {
                out.push(diag(
                    loc,
                    format!(
                        "tensor `{}` has {} dimension{}, but this tile has {} ind{} and {} extent{}",
                        t.name,
                        t.shape.len(),
                        plural(t.shape.len()),
                        tile.index.len(),
                        if tile.index.len() == 1 { "ex" } else { "ices" },
                        tile.size.len(),
                        plural(tile.size.len())
                    ),
                ));
            }
        }
    }
}

/// The largest magnitude that an expression of a megakernel may reach: an extent, index,
/// tile start (`index * extent`) or count, with each tile index at its domain's bound, each
/// static dim at its value and each bounded dim at its bound (an unbounded dim counts as 1:
/// the proofs treat it symbolically, through its coefficient). 2^48 elements is beyond any
/// tensor, and leaves the rules that follow room to add a few such numbers and evaluate
/// them at their sample sizes in `i64` without overflow.
pub const MAX_MAGNITUDE: i128 = 1 << 48;

/// Rule: every expression stays within [`MAX_MAGNITUDE`] (see there), so that the proofs
/// and the sample graphs never overflow (a wrapped bound would prove a false one).
pub fn check_magnitudes(spec: &GraphSpec, out: &mut Vec<Diagnostic>) {
    let dim = |d: u16| match spec.dims[d as usize].kind {
        DimKind::Static(v) => i128::from(v).abs(),
        DimKind::Symbolic { max } => max.map_or(1, |m| i128::from(m).abs()),
    };
    each_magnitude(spec, dim, |loc, what, m| {
        if m > MAX_MAGNITUDE {
            out.push(error(
                loc,
                format!("{what} is too large: it can reach {}, beyond the limit of 2^48", show_magnitude(m)),
                "a megakernel's extents, indices and counts must stay below 2^48".into(),
            ));
        }
    });
}

/// The first expression of `spec` whose magnitude exceeds [`MAX_MAGNITUDE`] under the
/// launch's resolved `dims`, described; `None` when every one fits. A launch that passes
/// evaluates every expression in `i64` without overflow (see [`crate::Affine::eval`]).
pub fn first_too_large(spec: &GraphSpec, dims: &[i64]) -> Option<String> {
    let mut found = None;
    each_magnitude(
        spec,
        |d| dims.get(d as usize).map_or(MAX_MAGNITUDE + 1, |&v| i128::from(v).abs()),
        |_, what, m| {
            if m > MAX_MAGNITUDE && found.is_none() {
                found = Some(format!("{what}, which can reach {},", show_magnitude(m)));
            }
        },
    );
    found
}

/// Visits every extent, index, tile end, count and condition of `spec` with a bound on
/// its magnitude (`visit(location, description, bound)`), each dim `d` at `dim(d)` and
/// each tile index at its domain's bound.
fn each_magnitude(spec: &GraphSpec, dim: impl Fn(u16) -> i128, mut visit: impl FnMut(Location, &str, i128)) {
    let of_dims = |e: &Affine| {
        e.magnitude(|t| match t {
            crate::Term::Dim(d) => dim(d),
            // an extent holds no tile index (another rule says so): count it as large
            crate::Term::Var(_) => MAX_MAGNITUDE,
        })
    };
    for (t, ts) in spec.tensors.iter().enumerate() {
        for (d, e) in ts.shape.iter().enumerate() {
            let loc = Location::TensorExtent { tensor: t as u16, dim: d as u16 };
            visit(loc, &format!("extent {d} of tensor `{}`", ts.name), of_dims(e));
        }
    }
    for (e, ev) in spec.events.iter().enumerate() {
        for (d, x) in ev.shape.iter().enumerate() {
            let loc = Location::EventExtent { event: e as u16, dim: d as u16 };
            visit(loc, &format!("extent {d} of event `{}`", ev.name), of_dims(x));
        }
        if let Count::Fixed(c) = &ev.count {
            visit(Location::EventCount(e as u16), &format!("the count of event `{}`", ev.name), of_dims(c));
        }
    }
    for (g, group) in spec.groups.iter().enumerate() {
        let domain: Vec<i128> = group.domain.iter().map(&of_dims).collect();
        for (d, &m) in domain.iter().enumerate() {
            let loc = Location::DomainExtent { group: g as u16, dim: d as u16 };
            visit(loc, &format!("extent {d} of the domain of `{}`", group.name), m);
        }
        if domain.iter().any(|&m| m > MAX_MAGNITUDE) {
            // every index of the group would be too large as a consequence
            continue;
        }
        let of = |e: &Affine| {
            e.magnitude(|t| match t {
                crate::Term::Dim(d) => dim(d),
                crate::Term::Var(v) => domain.get(v as usize).copied().unwrap_or(MAX_MAGNITUDE),
            })
        };
        for (kind, k, acc) in each_access(spec).filter(|a| a.0 == g).map(|(_, kind, k, acc)| (kind, k, acc)) {
            for (c, ix) in acc.index.iter().enumerate() {
                let loc = access_at(g, kind, k, Some(c));
                let m = match ix {
                    Index::At(a) => of(a),
                    Index::Range { start, end } => of(start).max(of(end)),
                    Index::All => 0,
                    Index::Data { at, along, .. } => {
                        let along = along.as_ref().map_or(0, |(_, len)| of(len));
                        at.iter().map(&of).max().unwrap_or(0).saturating_add(along)
                    }
                };
                visit(loc, &format!("index {c} of an access of `{}`", group.name), m);
            }
        }
        if let Some(c) = &group.condition {
            let m = c.at.iter().map(&of).fold(of(&c.lhs), i128::max);
            visit(Location::Condition(g as u16), &format!("the condition of `{}`", group.name), m);
        }
        for (k, tile) in group.tiles.iter().enumerate() {
            for (d, (ix, size)) in tile.index.iter().zip(tile.size.iter()).enumerate() {
                // the tile starts at index * extent and ends one extent later; an extent of
                // 0 (another rule's error) must still bound the index
                let (ix, size) = (of(ix), of(size).max(1));
                let loc = Location::Tile { group: g as u16, tile: k as u16, coord: Some(d as u16) };
                visit(
                    loc,
                    &format!("tile {k} of `{}` in dimension {d}", group.name),
                    ix.saturating_add(1).saturating_mul(size),
                );
            }
        }
    }
}

/// `m` as a power of two when it is one of the large ones.
fn show_magnitude(m: i128) -> String {
    if m >= i128::from(i64::MAX) { "2^63 or more".into() } else { format!("{m} (about 2^{})", 127 - m.leading_zeros()) }
}

/// Rule: no extent of a tile domain or an event shape is negative at any admissible size
/// (zero is allowed where it depends on a dim: `[L - 1, B]` has no tasks for one layer),
/// and no domain is empty at every size (its group could never run). The bounds proofs
/// read a domain `[D]` as `0 ..= D - 1`, which means nothing for a negative `D`.
pub fn check_extents(spec: &GraphSpec, out: &mut Vec<Diagnostic>) {
    let names = Names::new(spec);
    let witness = |w: Vec<(u16, i64)>| {
        let parts: Vec<String> = w
            .iter()
            .filter(|(d, _)| matches!(spec.dims[*d as usize].kind, DimKind::Symbolic { .. }))
            .map(|(d, v)| format!("{} = {v}", spec.dims[*d as usize].name))
            .collect();
        (!parts.is_empty()).then(|| format!("it fails for {}", parts.join(", ")))
    };
    // `what` names the extent, e.g. "the domain of `p`"
    let mut each = |loc: Location, what: String, e: &Affine, domain: bool| {
        let e = e.substitute_static(&spec.dims);
        let d = match e.as_constant() {
            Some(c) if domain && c <= 0 => {
                diag(loc, format!("the extent `{c}` in {what} leaves it no tasks, so it never runs"))
            }
            _ => match e.prove_nonnegative(&spec.dims) {
                Ok(()) => return,
                Err(w) => Diagnostic {
                    severity: Severity::Error,
                    location: loc,
                    message: format!("the extent `{}` in {what} can be negative", names.show(&e, &[])),
                    help: witness(w),
                },
            },
        };
        out.push(d);
    };
    for (e, ev) in spec.events.iter().enumerate() {
        for (d, x) in ev.shape.iter().enumerate() {
            let loc = Location::EventExtent { event: e as u16, dim: d as u16 };
            each(loc, format!("the shape of event `{}`", ev.name), x, false);
        }
    }
    for (g, group) in spec.groups.iter().enumerate() {
        for (d, x) in group.domain.iter().enumerate() {
            let loc = Location::DomainExtent { group: g as u16, dim: d as u16 };
            each(loc, format!("the domain of `{}`", group.name), x, true);
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Rule: data-dependent indices only on events with a declared count (`count = N` or
/// `dyn`), read from integer tensors; routing data (an integer tensor the launch writes)
/// and runs of positions only in `signal!`s; a dynamic count tensor is an integer input
/// with the event's shape.
pub fn check_index_tensors(spec: &GraphSpec, out: &mut Vec<Diagnostic>) {
    let names = Names::new(spec);
    let integer_input = |t: u16| {
        let ts = &spec.tensors[t as usize];
        (ts.dtype.is_integer() && ts.access == Access::Read).then_some(()).ok_or_else(|| {
            format!(
                "`{}` is `{}Tensor<{}, ..>`, but a count tensor must be `&Tensor<i32 | u32, ..>`",
                ts.name,
                if ts.access == Access::Write { "&mut " } else { "&" },
                ts.dtype
            )
        })
    };
    for (g, kind, k, acc) in each_access(spec) {
        let ev = &spec.events[acc.event as usize];
        for (c, ix) in acc.index.iter().enumerate() {
            let Index::Data { tensor, along, .. } = ix else {
                continue;
            };
            let loc = access_at(g, kind, k, Some(c));
            if matches!(ev.count, Count::Inferred) {
                out.push(error(
                    loc,
                    format!("data-dependent index on event `{}`, whose trigger count is inferred", ev.name),
                    "declare its count: `event!([..], count = N)` when every waited element receives N signals, or `count = dyn(counts)` to read them at launch".into(),
                ));
            }
            let ts = &spec.tensors[*tensor as usize];
            if !ts.dtype.is_integer() {
                out.push(diag(
                    loc,
                    format!("`{}` is a tensor of `{}`, but an index tensor holds `i32` or `u32`", ts.name, ts.dtype),
                ));
            }
            if kind == AccessKind::Wait && spec.is_routing(*tensor) {
                out.push(error(
                    loc,
                    format!("a `wait!` cannot be indexed by `{}`, which this launch writes", ts.name),
                    "route through the signal instead: the producer signals `e[route[..]]` and the consumer waits on its own element".into(),
                ));
            }
            if kind == AccessKind::Wait && along.is_some() {
                out.push(diag(loc, "a run of data positions (`t[i, a .. b]`) is allowed in `signal!` only".into()));
            }
        }
    }
    for (e, ev) in spec.events.iter().enumerate() {
        let Count::PerElement { tensor } = ev.count else {
            continue;
        };
        let loc = Location::EventCount(e as u16);
        if let Err(m) = integer_input(tensor) {
            out.push(diag(loc, m));
            continue;
        }
        let ts = &spec.tensors[tensor as usize];
        let same = ts.shape.len() == ev.shape.len()
            && ts
                .shape
                .iter()
                .zip(ev.shape.iter())
                .all(|(a, b)| a.substitute_static(&spec.dims) == b.substitute_static(&spec.dims));
        if !same {
            let show = |s: &[Affine]| s.iter().map(|x| names.show(x, &[])).collect::<Vec<_>>().join(", ");
            out.push(diag(
                loc,
                format!(
                    "the count tensor `{}` has shape [{}], but event `{}` has shape [{}]",
                    ts.name,
                    show(&ts.shape),
                    ev.name,
                    show(&ev.shape)
                ),
            ));
        }
    }
}

/// Rule: a group's condition reads an integer tensor, and the group's first statement is
/// the `wait!` of one element that guards it (the condition is evaluated when that
/// element completes; the race rule checks that the wait orders the read after the
/// tensor's writer).
pub fn check_conditions(spec: &GraphSpec, out: &mut Vec<Diagnostic>) {
    for (g, group) in spec.groups.iter().enumerate() {
        let Some(c) = &group.condition else {
            continue;
        };
        let loc = Location::Condition(g as u16);
        let ts = &spec.tensors[c.tensor as usize];
        if !ts.dtype.is_integer() {
            out.push(diag(
                loc,
                format!("a condition reads an `i32` or `u32` tensor, but `{}` holds `{}`", ts.name, ts.dtype),
            ));
        }
        let first_stmt = group
            .waits
            .iter()
            .map(|w| w.stmt)
            .chain(group.signals.iter().map(|s| s.stmt))
            .chain(group.tiles.iter().map(|t| t.stmt))
            .min();
        let guard = group.guard().filter(|w| Some(w.stmt) == first_stmt);
        match guard {
            Some(w) if w.index.iter().all(|ix| matches!(ix, Index::At(_))) => {}
            Some(_) => out.push(error(
                access_at(g, AccessKind::Wait, 0, None),
                format!("the guard of `{}`'s condition must wait on one element", group.name),
                "the condition is evaluated when this element completes: wait on a single element such as `grouped[e]`, and on the rest after it".into(),
            )),
            None => out.push(error(
                loc,
                format!("tile group `{}` has a condition, but its body does not begin with a `wait!`", group.name),
                format!(
                    "begin the body with the `wait!` of the element signalled after `{}` is written, e.g. `wait!(ready[..]);`",
                    ts.name
                ),
            )),
        }
    }
}

/// Rule: every affine index stays inside the indexed extent over the whole tile domain,
/// for every admissible value of the symbolic dims.
pub fn check_bounds(spec: &GraphSpec, out: &mut Vec<Diagnostic>) {
    let names = Names::new(spec);
    // a failure that no dim affects fails at every size: show the smallest
    let witness = |w: Vec<(u16, i64)>| -> Option<String> {
        let every = (0..spec.dims.len() as u16).map(|d| (d, 1)).collect();
        let parts: Vec<String> = (if w.is_empty() { every } else { w })
            .iter()
            .filter(|(d, _)| matches!(spec.dims[*d as usize].kind, DimKind::Symbolic { .. }))
            .map(|(d, v)| format!("{} = {v}", spec.dims[*d as usize].name))
            .collect();
        (!parts.is_empty()).then(|| format!("it fails for {}", parts.join(", ")))
    };
    let mut empty_ranges = Vec::new();
    // `0 <= lo` over the domain of group g; `shown` is the expression as the user reads
    // it. False when it fails (and is reported).
    let lower_ok = |out: &mut Vec<Diagnostic>, g: usize, loc: Location, what: &str, shown: &str, lo: &Affine| {
        let group = &spec.groups[g];
        let Err(w) = lo.min_over(&group.domain).prove_nonnegative_where(&spec.dims, &group.domain) else {
            return true;
        };
        out.push(Diagnostic {
            severity: Severity::Error,
            location: loc,
            message: format!(
                "{what} can be negative: `{shown}` reaches `{}` over the domain of `{}`",
                names.show(&lo.min_over(&group.domain), &[]),
                group.name
            ),
            help: witness(w),
        });
        false
    };
    // `0 <= lo` and `hi_excl <= extent`
    let check_range = |out: &mut Vec<Diagnostic>,
                       g: usize,
                       loc: Location,
                       what: &str,
                       shown: &str,
                       lo: &Affine,
                       hi_excl: &Affine,
                       extent: &Affine| {
        let group = &spec.groups[g];
        if !lower_ok(out, g, loc, what, shown, lo) {
            return;
        }
        if let Err(w) = extent.sub(&hi_excl.max_over(&group.domain)).prove_nonnegative_where(&spec.dims, &group.domain)
        {
            out.push(Diagnostic {
                severity: Severity::Error,
                location: loc,
                message: format!(
                    "{what} is out of bounds: `{shown}` reaches `{}` over the domain of `{}`, but the extent is `{}`",
                    names.show(&hi_excl.max_over(&group.domain).sub(&Affine::constant(1)), &[]),
                    group.name,
                    names.show(extent, &[])
                ),
                help: witness(w),
            });
        }
    };
    for (g, kind, k, acc) in each_access(spec) {
        let ev = &spec.events[acc.event as usize];
        let one = Affine::constant(1);
        for (c, ix) in acc.index.iter().enumerate() {
            let loc = access_at(g, kind, k, Some(c));
            let vars = group_vars(spec, g);
            let what = format!("index {c} of event `{}`", ev.name);
            match ix {
                Index::At(a) => check_range(out, g, loc, &what, &names.show(a, &vars), a, &a.add(&one), &ev.shape[c]),
                Index::Range { start, end } => {
                    let shown = format!("{} .. {}", names.show(start, &vars), names.show(end, &vars));
                    // `start <= end <= extent` bounds the start from above: the end and
                    // the order are checked below, each with its own message
                    lower_ok(out, g, loc, &format!("the range at {what}"), &shown, start);
                    check_range(
                        out,
                        g,
                        loc,
                        &format!("the range at {what}"),
                        &shown,
                        &Affine::constant(0),
                        end,
                        &ev.shape[c],
                    );
                    let domain = &spec.groups[g].domain;
                    if end.sub(start).min_over(domain).prove_nonnegative_where(&spec.dims, domain).is_err() {
                        empty_ranges.push(diag(loc, format!("range of {what} can end before it starts")));
                    } else if start.sub(end).min_over(domain).prove_nonnegative_where(&spec.dims, domain).is_ok() {
                        // `i .. i`: an access of no element is a mistake, never a dependency
                        let (does, verb) = match kind {
                            AccessKind::Wait => ("waits on", "wait"),
                            AccessKind::Signal => ("signals", "signal"),
                        };
                        empty_ranges.push(error(
                            loc,
                            format!("range of {what} is empty for every task of `{}`, so it {does} nothing", spec.groups[g].name),
                            format!("a range `a .. b` holds the elements from a up to b - 1; remove the `{verb}!` or widen the range"),
                        ));
                    }
                }
                Index::All => {}
                Index::Data { tensor, at, along } => {
                    let t = &spec.tensors[*tensor as usize];
                    for (d, a) in at.iter().enumerate() {
                        let what = format!("index {d} of tensor `{}`", t.name);
                        let end = match along {
                            Some((cd, len)) if *cd as usize == d => a.add(len),
                            _ => a.add(&one),
                        };
                        check_range(out, g, loc, &what, &names.show(a, &vars), a, &end, &t.shape[d]);
                    }
                    // a run of no positions signals nothing, and its waiters would wait
                    // forever: at least one position for every task
                    if let Some((cd, len)) = along
                        && let Err(w) = len
                            .sub(&one)
                            .min_over(&spec.groups[g].domain)
                            .prove_nonnegative_where(&spec.dims, &spec.groups[g].domain)
                    {
                        empty_ranges.push(Diagnostic {
                            severity: Severity::Error,
                            location: loc,
                            message: format!(
                                "the run along index {cd} of tensor `{}` can be empty: its length is `{}`",
                                t.name,
                                names.show(len, &vars)
                            ),
                            help: match len.as_constant() {
                                Some(_) => Some("write the run as `a .. b` with b > a".into()),
                                None => witness(w),
                            },
                        });
                    }
                }
            }
        }
    }
    for (g, group) in spec.groups.iter().enumerate() {
        if let Some(c) = &group.condition {
            let t = &spec.tensors[c.tensor as usize];
            let vars = group_vars(spec, g);
            for (d, a) in c.at.iter().enumerate().take(t.shape.len()) {
                let what = format!("index {d} of tensor `{}` in the condition", t.name);
                check_range(
                    out,
                    g,
                    Location::Condition(g as u16),
                    &what,
                    &names.show(a, &vars),
                    a,
                    &a.add(&Affine::constant(1)),
                    &t.shape[d],
                );
            }
        }
        for (k, tile) in group.tiles.iter().enumerate() {
            let t = &spec.tensors[tile.tensor as usize];
            for (d, (ix, size)) in tile.index.iter().zip(tile.size.iter()).enumerate() {
                let loc = Location::Tile { group: g as u16, tile: k as u16, coord: Some(d as u16) };
                let at_extent = Location::TileExtent { group: g as u16, tile: k as u16, dim: d as u16 };
                let vars = group_vars(spec, g);
                let Some((start, size)) = tile_box(spec, g, (ix, size), (loc, at_extent), &witness, &mut empty_ranges)
                else {
                    continue;
                };
                let end = start.add(&size);
                let what = format!("the tile of `{}` in dimension {d}", t.name);
                let shown = format!("{} .. {}", names.show(&start, &vars), names.show(&end, &vars));
                check_range(out, g, loc, &what, &shown, &start, &end, &t.shape[d]);
            }
        }
    }
    out.extend(empty_ranges);
}

/// The start and extent of a tile in one dimension, when they are well formed: an extent
/// is an affine expression of dims and at least 1 for every admissible size, and where it
/// is symbolic the index is a constant, so that the start `index * extent` stays affine.
/// Otherwise pushes the reason to `out` and returns `None`.
fn tile_box(
    spec: &GraphSpec,
    g: usize,
    (index, size): (&Affine, &Affine),
    (at_index, at_extent): (Location, Location),
    witness: &dyn Fn(Vec<(u16, i64)>) -> Option<String>,
    out: &mut Vec<Diagnostic>,
) -> Option<(Affine, Affine)> {
    let names = Names::new(spec);
    let vars = group_vars(spec, g);
    let size = size.substitute_static(&spec.dims);
    let shown = names.show(&size, &vars);
    if size.has_vars() {
        out.push(error(
            at_extent,
            format!("the tile extent `{shown}` depends on a tile index of `{}`", spec.groups[g].name),
            "an extent is a constant or an affine expression of dims (`64`, `B`, `2 * B`); \
             move the tile index into the tile's index"
                .into(),
        ));
        return None;
    }
    if let Some(c) = size.as_constant() {
        if c <= 0 {
            out.push(diag(at_extent, format!("tile extent {c} must be positive")));
            return None;
        }
        return Some((index.scale(c), size));
    }
    let Some(i) = index.substitute_static(&spec.dims).as_constant() else {
        out.push(error(
            at_index,
            format!(
                "a tile whose extent `{shown}` is symbolic must have a constant index in that dimension, \
                 but this index is `{}`",
                names.show(index, &vars)
            ),
            "the tile starts at index times extent, which must stay affine in the dims; use a higher-rank \
             layout such as `[L, B, H]` with index `[l, 0, 0]` and extent `[1, B, H]`"
                .into(),
        ));
        return None;
    };
    if let Err(w) = size.sub(&Affine::constant(1)).prove_nonnegative(&spec.dims) {
        out.push(Diagnostic {
            severity: Severity::Error,
            location: at_extent,
            message: format!("the tile extent `{shown}` can be less than 1"),
            help: witness(w),
        });
        return None;
    }
    Some((size.scale(i), size))
}

/// Rule: every symbolic dim can be solved from the tensor shapes at launch.
pub fn check_dims_determined(spec: &GraphSpec, out: &mut Vec<Diagnostic>) {
    let solved: Vec<u16> = dim_plan(spec).iter().map(|s| s.dim).collect();
    for (d, dim) in spec.dims.iter().enumerate() {
        if matches!(dim.kind, DimKind::Symbolic { .. }) && !solved.contains(&(d as u16)) {
            out.push(error(
                Location::Dim(d as u16),
                format!("symbolic dim `{}` is not determined by any tensor parameter's shape", dim.name),
                "use it in a parameter's shape (e.g. `[B * 4, 128]`), or give it a value with `dims(..)`".into(),
            ));
        }
    }
}

/// Rule: the tile-group dependency graph (signaller → waiter, through events) has no
/// cycle through two or more groups, unless a tile index strictly advances around it (a
/// layer loop: `attn[l, ..]` → `mlp[l, ..]` → `attn[l + 1, ..]`), which
/// [`crate::ranking::prove_progress`] proves for every size, per strongly connected
/// component. A group that waits on elements of an event it also signals (a chain or
/// wavefront) is checked per task instead.
pub fn check_group_cycles(spec: &GraphSpec, out: &mut Vec<Diagnostic>) {
    // (producer, consumer, the consumer's wait access, event), first edge per pair
    let mut edges: Vec<(u32, u32, usize, u16)> = Vec::new();
    for (c, group) in spec.groups.iter().enumerate() {
        for (k, w) in group.waits.iter().enumerate() {
            for (p, producer) in spec.groups.iter().enumerate() {
                let new = !edges.iter().any(|e| (e.0, e.1) == (p as u32, c as u32));
                if p != c && new && producer.signals.iter().any(|s| s.event == w.event) {
                    edges.push((p as u32, c as u32, k, w.event));
                }
            }
        }
    }
    // a cycle lies within one component: each component that the ranking proof does not
    // order gets one cycle reported (independent loops are independent errors)
    let component = strongly_connected(spec.groups.len(), &edges);
    for root in 0..spec.groups.len() {
        let members: Vec<usize> = (0..spec.groups.len()).filter(|&g| component[g] == root).collect();
        if members.len() < 2 || crate::ranking::prove_progress(spec, &members).is_some() {
            continue;
        }
        let inside: Vec<(u32, u32, usize, u16)> = edges
            .iter()
            .filter(|e| component[e.0 as usize] == root && component[e.1 as usize] == root)
            .copied()
            .collect();
        let known = tasks_cycle_through(spec, &members);
        report_group_cycle(spec, &inside, known, out);
    }
}

/// Whether the task graph at some sample size has a cycle through tasks of two or more
/// of the groups `members` (their edges only; data-dependent accesses are left out, as
/// everywhere at compile time).
fn tasks_cycle_through(spec: &GraphSpec, members: &[usize]) -> bool {
    sample_dims(spec).unwrap_or_default().into_iter().any(|dims| {
        let shapes = spec.tensors.iter().map(|t| t.shape.iter().map(|e| e.eval(&[], &dims)).collect()).collect();
        let Ok(r) = Resolved::shapes_only(spec, shapes) else { return false };
        let inside = |t: TaskId| members.contains(&r.group_of(t));
        let edges = (0..r.n_tasks)
            .filter(|&t| inside(t))
            .flat_map(|t| r.dependencies(t).filter(|&d| inside(d)).map(move |d| (d, t)))
            .collect::<Vec<_>>();
        let (_, indegree) = kahn(r.n_tasks as usize, edges, Vec::new());
        // tasks left with a dependency lie on a cycle or after one
        let mut left: Vec<usize> =
            (0..r.n_tasks).filter(|&t| indegree[t as usize] > 0).map(|t| r.group_of(t)).collect();
        left.sort_unstable();
        left.dedup();
        left.len() >= 2
    })
}

/// Reports one cycle of the group graph `edges` (which has one), at the `wait!` that
/// closes its first edge: as a dependency cycle where the task graph is `known` to have
/// one at a sample size, else as a cycle that the ranking proof could not order (the
/// tasks may be acyclic, but the rule accepts only what it proves).
fn report_group_cycle(spec: &GraphSpec, edges: &[(u32, u32, usize, u16)], known: bool, out: &mut Vec<Diagnostic>) {
    let (_, indegree) = kahn(spec.groups.len(), edges.iter().map(|e| (e.0, e.1)), Vec::new());
    if indegree.iter().all(|&d| d == 0) {
        return;
    }
    let cycle = closed_cycle(&indegree, |c| edges.iter().filter(move |e| e.1 == c).map(|e| e.0));
    if cycle.len() < 2 {
        return;
    }
    let names: Vec<String> = cycle.iter().map(|&g| format!("`{}`", spec.groups[g as usize].name)).collect();
    let (first, second) = (cycle[0], cycle[1]);
    let Some(&(_, _, k, ev)) = edges.iter().find(|e| (e.0, e.1) == (first, second)) else { return };
    let edge = format!(
        "`{}` waits on event `{}`, which `{}` signals",
        spec.groups[second as usize].name, spec.events[ev as usize].name, spec.groups[first as usize].name
    );
    let (message, help) = if known {
        (
            format!("dependency cycle between tile groups: {}", names.join(" -> ")),
            format!("{edge}; each group on the cycle waits for the next"),
        )
    } else {
        (
            format!("cycle between tile groups {} with no tile index proven to advance around it", names.join(" -> ")),
            format!(
                "{edge}. The task graph may be acyclic, but a cycle of groups is accepted only when one tile index of each group strictly advances around it, read from event coordinates affine in that index alone with one coefficient for the whole cycle (a layer loop: `attn[l, ..]` waits `h[l, ..]`, `mlp[l, ..]` signals `h[l + 1, ..]`); restructure the events so that such an index exists, or merge the groups"
            ),
        )
    };
    out.push(error(access_at(second as usize, AccessKind::Wait, k, None), message, help));
}

/// The strongly connected component of each node, named by its smallest member:
/// two nodes share one exactly when each reaches the other.
fn strongly_connected(n: usize, edges: &[(u32, u32, usize, u16)]) -> Vec<usize> {
    let mut succ = vec![Vec::new(); n];
    for e in edges {
        succ[e.0 as usize].push(e.1 as usize);
    }
    let reach: Vec<Vec<bool>> = (0..n)
        .map(|s| {
            let mut seen = vec![false; n];
            let mut stack = vec![s];
            seen[s] = true;
            while let Some(a) = stack.pop() {
                for &b in &succ[a] {
                    if !seen[b] {
                        seen[b] = true;
                        stack.push(b);
                    }
                }
            }
            seen
        })
        .collect();
    (0..n).map(|a| (0..n).find(|&b| reach[a][b] && reach[b][a]).unwrap_or(a)).collect()
}

/// Rule: no task waits, where it may be left waiting, on an element of an inferred-count
/// event that a group with a condition may signal. An inactive task signals nothing, so
/// the count inferred from every task is more than arrives. A wait is safe only when the
/// waiter is inactive whenever a producer of its element is: a `wait!` after the guard of
/// a group whose condition implies the producer's (`implies`: the same one, as the MoE
/// expert groups share `m * R < counts[e]` and wait `gathered[e, m]`, or a stronger one
/// over the same tensor element, `m * R + R <= counts[e]`), on the same element for the
/// same values of the tile indices the conditions read. A guard is waited before its
/// group's condition is read, so it is never safe; nor is any wait of a group without a
/// condition, or with one that does not imply the producer's. A declared count (`count =
/// N` or `dyn`) states what arrives, and is let through.
pub fn check_conditional_signals(spec: &GraphSpec, out: &mut Vec<Diagnostic>) {
    for (p, producer) in spec.groups.iter().enumerate() {
        let Some(condition) = &producer.condition else {
            continue;
        };
        for (c, consumer) in spec.groups.iter().enumerate() {
            let guard = consumer.guard().map(|w| w.stmt);
            for (k, w) in consumer.waits.iter().enumerate() {
                if !matches!(spec.events[w.event as usize].count, Count::Inferred) {
                    continue;
                }
                // the producer's signals and this wait can share an element (a wait
                // that provably misses them, `Never`, is no concern)
                let signals = producer.signals.iter().filter(|s| s.event == w.event);
                let meeting: Vec<&EventAccess> =
                    signals.filter(|s| crate::ranking::pair_meets(spec, p, s, c, w)).collect();
                if meeting.is_empty() {
                    continue;
                }
                let is_guard = Some(w.stmt) == guard;
                // `implies` asks for the same tile indices in both conditions, so pinning the
                // producer's pins the waiter's
                let implied = !is_guard
                    && consumer.condition.as_ref().is_some_and(|own| implies(own, condition))
                    && meeting.iter().all(|s| pins_condition_vars(condition, s, w));
                if implied {
                    continue;
                }
                let (why, fix) = if is_guard {
                    (
                        format!(
                            "the guard of `{}`'s condition waits on event `{}`, which `{}` signals only when its condition holds",
                            consumer.name, spec.events[w.event as usize].name, producer.name
                        ),
                        format!(
                            "a guard is waited before the condition is read, so an inactive `{}` task leaves it waiting: guard `{}` with an element every task signals, and wait on this one after it, or declare the count that arrives (`count = dyn(..)`)",
                            producer.name, consumer.name
                        ),
                    )
                } else {
                    (
                        format!(
                            "`{}` waits on event `{}`, which `{}` signals only when its condition holds",
                            consumer.name, spec.events[w.event as usize].name, producer.name
                        ),
                        format!(
                            "an inactive `{}` task signals nothing, so this wait would never finish: give `{}` a condition that implies `{}`'s (the same one, or a stronger one on the same tensor element) over the tile indices that name the same element (after a guard that every task signals), or declare the count that arrives (`count = dyn(..)`, 0 where `{}` is inactive)",
                            producer.name, consumer.name, producer.name, producer.name
                        ),
                    )
                };
                out.push(error(access_at(c, AccessKind::Wait, k, None), why, fix));
            }
        }
    }
}

/// Whether `strong` holding implies that `weak` holds, for every value of the tensor
/// element both read: the same tensor at the same position, and left sides that differ by
/// a constant `d` (`lhs_strong = lhs_weak + d`, the same tile indices and dims). With
/// `u = value − lhs_strong` each condition is a set of integers `u` may take (`lhs <
/// value`: `u ≥ 1`; for the weak one shifted by `d`), and the implication is the first set
/// lying inside the second. The tile indices must name the same tasks' values on both
/// sides ([`pins_condition_vars`]), which the caller checks.
fn implies(strong: &Condition, weak: &Condition) -> bool {
    if strong.tensor != weak.tensor || strong.at != weak.at || strong.lhs.terms != weak.lhs.terms {
        return false;
    }
    let Some(d) = strong.lhs.constant.checked_sub(weak.lhs.constant) else {
        return false;
    };
    /// The integers `u` a condition allows, `u = value − lhs_strong`.
    #[derive(Clone, Copy)]
    enum Allowed {
        AtLeast(i64),
        AtMost(i64),
        Exactly(i64),
        Not(i64),
    }
    // a condition whose `value − lhs` is `u + shift`, as a set of `u`
    let allowed = |cmp: Cmp, shift: i64| -> Option<Allowed> {
        Some(match cmp {
            Cmp::Lt => Allowed::AtLeast(1i64.checked_sub(shift)?),
            Cmp::Le => Allowed::AtLeast(0i64.checked_sub(shift)?),
            Cmp::Gt => Allowed::AtMost((-1i64).checked_sub(shift)?),
            Cmp::Ge => Allowed::AtMost(0i64.checked_sub(shift)?),
            Cmp::Eq => Allowed::Exactly(0i64.checked_sub(shift)?),
            Cmp::Ne => Allowed::Not(0i64.checked_sub(shift)?),
        })
    };
    // the weak side's lhs is `lhs_strong − d`: `value − lhs_weak = u + d`
    let (Some(s), Some(w)) = (allowed(strong.cmp, 0), allowed(weak.cmp, d)) else {
        return false;
    };
    use Allowed::*;
    match (s, w) {
        (AtLeast(a), AtLeast(b)) => a >= b,
        (AtMost(a), AtMost(b)) => a <= b,
        (Exactly(a), AtLeast(b)) => a >= b,
        (Exactly(a), AtMost(b)) => a <= b,
        (Exactly(a), Exactly(b)) => a == b,
        (Exactly(a), Not(b)) => a != b,
        (AtLeast(a), Not(b)) => b < a,
        (AtMost(a), Not(b)) => b > a,
        (Not(a), Not(b)) => a == b,
        _ => false,
    }
}

/// Whether a shared element of `signal` and `wait` fixes every tile index that
/// `condition` reads to the same value on both sides: each such index is one coordinate
/// of both accesses on its own (`e` or `e + 3` in both, with the same offset), so that
/// the producer's and the waiter's conditions, the same expression, read the same values.
fn pins_condition_vars(condition: &Condition, signal: &EventAccess, wait: &EventAccess) -> bool {
    let mut read: Vec<u16> = Vec::new();
    for a in std::iter::once(&condition.lhs).chain(condition.at.iter()) {
        for (t, _) in a.terms.iter() {
            if let Term::Var(v) = t {
                read.push(*v);
            }
        }
    }
    read.iter().all(|&v| {
        signal.index.iter().zip(wait.index.iter()).any(|(si, wi)| match (si, wi) {
            (Index::At(a), Index::At(b)) => a == b && a.terms.len() == 1 && a.terms[0] == (Term::Var(v), 1),
            _ => false,
        })
    })
}

/// Rule (a note): every signalled event is waited on somewhere; signals that nothing
/// waits for order nothing, which usually means a forgotten `wait!`.
pub fn check_unwaited_events(spec: &GraphSpec, out: &mut Vec<Diagnostic>) {
    for (e, ev) in spec.events.iter().enumerate() {
        let used = |kind| each_access(spec).any(|(_, k, _, a)| k == kind && a.event == e as u16);
        if used(AccessKind::Signal) && !used(AccessKind::Wait) {
            out.push(note(
                Location::Event(e as u16),
                format!("event `{}` is signalled but never waited on, so its signals order nothing", ev.name),
                "add the `wait!` that reads what the signal publishes, or remove the event".into(),
            ));
        }
    }
}

/// The most tasks of a sample graph (and a quarter of its most event elements): the
/// exact rules build the whole task graph, which must stay cheap inside the compiler.
pub const MAX_SAMPLE_TASKS: i64 = 1 << 18;

/// Tasks and event elements of the graph at `dims`, saturating.
fn sample_size(spec: &GraphSpec, dims: &[i64]) -> (i64, i64) {
    let size = |boxes: &mut dyn Iterator<Item = &List<Affine>>| {
        boxes.fold(0i64, |acc, b| {
            acc.saturating_add(b.iter().fold(1i64, |p, e| p.saturating_mul(e.eval(&[], dims).max(0))))
        })
    };
    (size(&mut spec.groups.iter().map(|g| &g.domain)), size(&mut spec.events.iter().map(|e| &e.shape)))
}

fn fits(spec: &GraphSpec, dims: &[i64]) -> bool {
    let (tasks, elements) = sample_size(spec, dims);
    tasks <= MAX_SAMPLE_TASKS && elements <= MAX_SAMPLE_TASKS * 4
}

/// The sizes at which the exact rules are checked: each symbolic dim takes a few small
/// values (and its bound, when small), in lock step and staggered. A sample whose graph
/// is larger than [`MAX_SAMPLE_TASKS`] has its symbolic dims halved until it fits.
/// `Err` gives the smallest sample (every symbolic dim 1) when even that does not fit
/// (static dims make it large): the rules are then left to launch.
pub fn sample_dims(spec: &GraphSpec) -> Result<Vec<Vec<i64>>, Vec<i64>> {
    let sym: Vec<(usize, Option<i64>)> = spec
        .dims
        .iter()
        .enumerate()
        .filter_map(|(d, s)| match s.kind {
            DimKind::Symbolic { max } => Some((d, max)),
            DimKind::Static(_) => None,
        })
        .collect();
    let base: Vec<i64> = spec.dims.iter().map(|d| if let DimKind::Static(v) = d.kind { v } else { 1 }).collect();
    if !fits(spec, &base) {
        return Err(base);
    }
    let mut out: Vec<Vec<i64>> = Vec::new();
    for step in 0..6 {
        let mut dims = base.clone();
        for (k, &(d, max)) in sym.iter().enumerate() {
            let v = match step {
                0 => 1,
                1 => 2,
                2 => 3,
                3 => 2 + k as i64,
                4 => 5 + 2 * k as i64,
                _ => max.unwrap_or(4).min(16),
            };
            dims[d] = v.min(max.unwrap_or(i64::MAX)).max(1);
        }
        while !fits(spec, &dims) && sym.iter().any(|&(d, _)| dims[d] > 1) {
            sym.iter().for_each(|&(d, _)| dims[d] = (dims[d] + 1) / 2);
        }
        if fits(spec, &dims) && !out.contains(&dims) {
            out.push(dims);
        }
    }
    Ok(out)
}

/// A note that the exact rules were not checked at compile time for `dims`, and why.
fn deferred(spec: &GraphSpec, dims: &[i64], why: String) -> Diagnostic {
    note(
        Location::Group(0),
        format!(
            "coverage, counts, self-waits, task cycles and data races are not checked at compile time{}: {why}",
            describe_sizes(spec, dims)
        ),
        "they are checked on the real sizes when the megakernel is launched".into(),
    )
}

/// Rules checked on the exact task graph at [`sample_dims`]: every waited element is
/// signalled; inferred counts are uniform and explicit counts agree; no task waits on an
/// element it signals itself; no task-level cycle. A sample that cannot be checked is a
/// note, never skipped silently.
pub fn check_at_sample_sizes(spec: &GraphSpec, out: &mut Vec<Diagnostic>) {
    if spec.groups.is_empty() {
        return;
    }
    let samples = sample_dims(spec).unwrap_or_else(|smallest| {
        let (tasks, elements) = sample_size(spec, &smallest);
        let why = format!(
            "the smallest sample graph has {tasks} tasks and {elements} event elements, above the limit of {} tasks and {} elements",
            MAX_SAMPLE_TASKS,
            MAX_SAMPLE_TASKS * 4
        );
        out.push(deferred(spec, &smallest, why));
        Vec::new()
    });
    // an unreachable count is an error only where no sample reaches it: the tally over a
    // conditional group's tasks grows with the sizes, and a dim has no lower bound to rule
    // out the small ones (at launch every size is checked exactly)
    let mut unreachable: Vec<(u16, Diagnostic, usize)> = Vec::new();
    let mut resolved = 0;
    for dims in samples {
        let shapes: Vec<Vec<i64>> =
            spec.tensors.iter().map(|t| t.shape.iter().map(|e| e.eval(&[], &dims)).collect()).collect();
        let r = match Resolved::shapes_only(spec, shapes) {
            Ok(r) => r,
            Err(e) => {
                out.push(deferred(spec, &dims, format!("the graph does not resolve there ({e})")));
                continue;
            }
        };
        let sizes = describe_sizes(spec, &dims);
        let before = out.len();
        resolved += 1;
        for p in r.count_problems() {
            let ev = &spec.events[p.event as usize];
            // a negative count names its event only (it may have no elements)
            let el = match p.kind {
                CountProblemKind::Negative { .. } => String::new(),
                _ => r.describe_element(p.element),
            };
            match p.kind {
                CountProblemKind::NeverSignalled { consumer } => {
                    let loc = wait_touching(&r, consumer, p.element).unwrap_or(Location::Event(p.event));
                    out.push(Diagnostic {
                        severity: Severity::Error,
                        location: loc,
                        message: format!(
                            "`{el}` is waited on by task `{}` but no task signals it{sizes}",
                            r.describe_task(consumer)
                        ),
                        help: Some(format!("add a `signal!` of `{}` that covers this element, or narrow the wait", ev.name)),
                    });
                }
                CountProblemKind::Mismatch { signals, count } => out.push(diag(
                    Location::EventCount(p.event),
                    format!(
                        "explicit count {count} disagrees with the signals: `{el}` receives {signals} signal{} per launch{sizes}",
                        plural(signals as usize)
                    ),
                )),
                CountProblemKind::Negative { count } => out.push(diag(
                    Location::EventCount(p.event),
                    format!("the count of event `{}` is {count}, but a count must be ≥ 0{sizes}", ev.name),
                )),
                CountProblemKind::Unreachable { most, count } => {
                    if let Some(seen) = unreachable.iter_mut().find(|u| u.0 == p.event) {
                        seen.2 += 1;
                        continue;
                    }
                    let diagnostic = Diagnostic {
                        severity: Severity::Error,
                        location: Location::EventCount(p.event),
                        message: format!(
                            "count {count} can never be reached: `{el}` receives at most {most} signal{} per launch, with every conditional producer active{sizes}",
                            plural(most as usize)
                        ),
                        help: Some(
                            "the tasks waiting on it would never run, at any size sampled: count only the signals that can arrive (`count = dyn(..)` for a count that depends on the data)"
                                .into(),
                        ),
                    };
                    unreachable.push((p.event, diagnostic, 1));
                }
                CountProblemKind::NotUniform { signals, other, other_signals } => out.push(Diagnostic {
                    severity: Severity::Error,
                    location: Location::Event(p.event),
                    message: format!(
                        "cannot infer the trigger count of `{}`: `{}` receives {other_signals} signal{}, `{el}` receives {signals}{sizes}",
                        ev.name,
                        r.describe_element(other),
                        plural(other_signals as usize)
                    ),
                    help: Some("every waited element of an event must receive the same number of signals".into()),
                }),
            }
        }
        check_self_waits(&r, &sizes, out);
        if out.len() == before
            && let Err(cycle) = r.topological_order()
        {
            let tasks: Vec<String> = cycle.iter().map(|&t| r.describe_task(t)).collect();
            out.push(diag(
                Location::Group(r.group_of(cycle[0]) as u16),
                format!("dependency cycle between tasks: {}{sizes}", tasks.join(" -> ")),
            ));
        }
        if out.len() > before {
            return;
        }
    }
    out.extend(unreachable.into_iter().filter(|u| u.2 == resolved).map(|u| u.1));
}

/// Rule checked on the exact task graph at [`sample_dims`]: tasks whose tile boxes
/// overlap, one writing, are ordered by events ([`crate::race`]). One race per pair of
/// tile arguments (the first found); not part of [`check`], because whether a tile is
/// written can depend on what only the caller knows (the macro reads it from each op's
/// signature, through a constant that rustc evaluates).
pub fn races_at_sample_sizes(spec: &GraphSpec) -> Vec<Race> {
    let mut out: Vec<Race> = Vec::new();
    // a sample that cannot be checked is already a note of check_at_sample_sizes
    for dims in sample_dims(spec).unwrap_or_default() {
        let shapes: Vec<Vec<i64>> =
            spec.tensors.iter().map(|t| t.shape.iter().map(|e| e.eval(&[], &dims)).collect()).collect();
        let Ok(r) = Resolved::shapes_only(spec, shapes) else {
            continue;
        };
        for mut race in crate::race::find(&r) {
            if !out.iter().any(|o| o.same_accesses(&race)) {
                race.sizes = describe_sizes(spec, &dims);
                out.push(race);
            }
        }
    }
    out
}

fn describe_sizes(spec: &GraphSpec, dims: &[i64]) -> String {
    let parts: Vec<String> = spec
        .dims
        .iter()
        .zip(dims)
        .filter(|(d, _)| matches!(d.kind, DimKind::Symbolic { .. }))
        .map(|(d, v)| format!("{} = {v}", d.name))
        .collect();
    if parts.is_empty() { String::new() } else { format!(" (with {})", parts.join(", ")) }
}

fn wait_touching(r: &Resolved<'_>, task: TaskId, element: u32) -> Option<Location> {
    let (g, vars) = r.vars_of(task);
    let mut buf = Vec::new();
    for (k, w) in r.spec.groups[g].waits.iter().enumerate() {
        buf.clear();
        if r.access_elements(w, &vars, &mut buf).is_ok() && buf.contains(&element) {
            return Some(access_at(g, AccessKind::Wait, k, None));
        }
    }
    None
}

/// Rule: a task never waits on an element that it signals itself. Reports the first
/// such task of each group.
fn check_self_waits(r: &Resolved<'_>, sizes: &str, out: &mut Vec<Diagnostic>) {
    let mut signalled = Vec::new();
    let mut reported = vec![false; r.spec.groups.len()];
    for task in 0..r.n_tasks {
        let (g, vars) = r.vars_of(task);
        if reported[g] {
            continue;
        }
        let group = &r.spec.groups[g];
        signalled.clear();
        for s in group.signals.iter().filter(|s| !s.is_data_dependent()) {
            let _ = r.access_elements(s, &vars, &mut signalled);
        }
        if signalled.is_empty() {
            continue;
        }
        for &el in r.waits.row(task as usize) {
            if signalled.contains(&el) {
                out.push(Diagnostic {
                    severity: Severity::Error,
                    location: wait_touching(r, task, el).unwrap_or(Location::Group(g as u16)),
                    message: format!(
                        "task `{}` waits on `{}`, which it signals itself{sizes}",
                        r.describe_task(task),
                        r.describe_element(el)
                    ),
                    help: Some("a task's own signals come after its waits, so this wait can never finish".into()),
                });
                // one task per group: the group's other tasks repeat it, while another
                // group's self-wait is a separate error
                reported[g] = true;
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    const CMPS: [Cmp; 6] = [Cmp::Lt, Cmp::Le, Cmp::Gt, Cmp::Ge, Cmp::Eq, Cmp::Ne];

    /// `e + c <cmp> t[e]`, tile index 0 read twice.
    fn cond(c: i64, cmp: Cmp, tensor: u16) -> Condition {
        let e = Term::Var(0);
        Condition { lhs: Affine::from_terms(c, [(e, 1)]), cmp, tensor, at: Cow::Owned(vec![Affine::term(e)]) }
    }

    #[test]
    fn implication_agrees_with_every_value_of_the_element() {
        for s in CMPS {
            for w in CMPS {
                for (cs, cw) in [(0, 0), (1, 0), (0, 1), (3, -2), (-2, 3), (5, 5)] {
                    // over x = e + cs and every value v near it: strong holding implies weak
                    let brute = (-8i64..=8).all(|e| (-20i64..=20).all(|v| !s.holds(e + cs, v) || w.holds(e + cw, v)));
                    let got = implies(&cond(cs, s, 0), &cond(cw, w, 0));
                    assert_eq!(got, brute, "e + {cs} {} t[e] => e + {cw} {} t[e]", s.symbol(), w.symbol());
                }
            }
        }
    }

    #[test]
    fn implication_needs_the_same_element_and_the_same_indices() {
        assert!(implies(&cond(1, Cmp::Lt, 0), &cond(0, Cmp::Lt, 0)));
        // another tensor, another position, another left side
        assert!(!implies(&cond(1, Cmp::Lt, 1), &cond(0, Cmp::Lt, 0)));
        let mut other_at = cond(1, Cmp::Lt, 0);
        other_at.at = Cow::Owned(vec![Affine::from_terms(1, [(Term::Var(0), 1)])]);
        assert!(!implies(&other_at, &cond(0, Cmp::Lt, 0)));
        let mut twice = cond(1, Cmp::Lt, 0);
        twice.lhs = Affine::from_terms(1, [(Term::Var(0), 2)]);
        assert!(!implies(&twice, &cond(0, Cmp::Lt, 0)));
        // a constant difference past i64 is no implication
        assert!(!implies(&cond(i64::MAX, Cmp::Lt, 0), &cond(-1, Cmp::Lt, 0)));
    }
}
