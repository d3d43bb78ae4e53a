//! Compile-time rules over a [`GraphSpec`], one function per rule. `et-macros` maps each
//! [`Diagnostic`]'s [`Location`] back to the user's tokens.
//!
//! Bounds are *proved* by interval reasoning over the tile domain with symbolic dims
//! (every admissible size). Coverage, trigger counts, self-waits and task-level cycles
//! are checked on the exact task graph at a set of sample sizes of the symbolic dims
//! (and checked again on the real sizes at every launch), and so are data races
//! ([`races_at_sample_sizes`]).

use crate::affine::Affine;
use crate::race::Race;
use crate::resolve::{CountProblemKind, Resolved, TaskId};
use crate::spec::{Access, Count, DimKind, EventAccess, GraphSpec, Index};

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
    /// A tensor parameter's type.
    Tensor(u16),
    /// An event declaration.
    Event(u16),
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
    /// A `t.tile(..)` argument of an op call, or one coordinate of it.
    Tile {
        /// The group.
        group: u16,
        /// Index among the group's tiles.
        tile: u16,
        /// The coordinate, when the problem is in one.
        coord: Option<u16>,
    },
}

/// One violated rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Where.
    pub location: Location,
    /// What is wrong, in one sentence.
    pub message: String,
    /// How to fix it, when there is a clear suggestion.
    pub help: Option<String>,
}

fn diag(location: Location, message: String) -> Diagnostic {
    Diagnostic { location, message, help: None }
}

/// Runs every rule; returns all violations found (empty when the graph is sound).
pub fn check(spec: &GraphSpec) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    check_ranks(spec, &mut out);
    if !out.is_empty() {
        // the other rules index coordinates by rank
        return out;
    }
    check_index_tensors(spec, &mut out);
    check_bounds(spec, &mut out);
    check_dims_determined(spec, &mut out);
    check_group_cycles(spec, &mut out);
    if out.is_empty() {
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
            if let Index::Data { tensor, at } = ix {
                let t = &spec.tensors[*tensor as usize];
                if at.len() != t.shape.len() {
                    out.push(diag(
                        access_at(g, kind, k, Some(c)),
                        format!(
                            "tensor `{}` has {} dimensions, but is indexed with {}",
                            t.name,
                            t.shape.len(),
                            at.len()
                        ),
                    ));
                }
            }
        }
    }
    for (g, group) in spec.groups.iter().enumerate() {
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

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Rule: data-dependent indices only on `dyn` events, read from integer input tensors;
/// a dynamic count tensor is an integer input with the event's shape.
pub fn check_index_tensors(spec: &GraphSpec, out: &mut Vec<Diagnostic>) {
    let names = Names::new(spec);
    let integer_input = |t: u16| {
        let ts = &spec.tensors[t as usize];
        (ts.dtype.is_integer() && ts.access == Access::Read).then_some(()).ok_or_else(|| {
            format!(
                "`{}` is `{}Tensor<{}, ..>`, but an index or count tensor must be `&Tensor<i32 | u32, ..>`",
                ts.name,
                if ts.access == Access::Write { "&mut " } else { "&" },
                ts.dtype
            )
        })
    };
    for (g, kind, k, acc) in each_access(spec) {
        let ev = &spec.events[acc.event as usize];
        for (c, ix) in acc.index.iter().enumerate() {
            let Index::Data { tensor, .. } = ix else {
                continue;
            };
            if !matches!(ev.count, Count::Dynamic { .. }) {
                out.push(Diagnostic {
                    location: access_at(g, kind, k, Some(c)),
                    message: format!("data-dependent index on event `{}`, whose trigger count is not `dyn`", ev.name),
                    help: Some(
                        "declare it as `event!([..], count = dyn(counts))` so that its counts are set at run time"
                            .to_string(),
                    ),
                });
            }
            if let Err(m) = integer_input(*tensor) {
                out.push(diag(access_at(g, kind, k, Some(c)), m));
            }
        }
    }
    for (e, ev) in spec.events.iter().enumerate() {
        let Count::Dynamic { tensor } = ev.count else {
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

/// Rule: every affine index stays inside the indexed extent over the whole tile domain,
/// for every admissible value of the symbolic dims.
pub fn check_bounds(spec: &GraphSpec, out: &mut Vec<Diagnostic>) {
    let names = Names::new(spec);
    let witness = |w: Vec<(u16, Option<i64>)>| -> Option<String> {
        let parts: Vec<String> = w
            .iter()
            .filter(|(d, _)| matches!(spec.dims[*d as usize].kind, DimKind::Symbolic { .. }))
            .map(|(d, v)| match v {
                Some(v) => format!("{} = {v}", spec.dims[*d as usize].name),
                None => format!("a large {}", spec.dims[*d as usize].name),
            })
            .collect();
        (!parts.is_empty()).then(|| format!("it fails for {}", parts.join(", ")))
    };
    let mut empty_ranges = Vec::new();
    // `0 <= lo` and `hi_excl <= extent` over the domain of group g; `shown` is the
    // expression as the user reads it
    let mut check_range =
        |g: usize, loc: Location, what: &str, shown: &str, lo: &Affine, hi_excl: &Affine, extent: &Affine| {
            let group = &spec.groups[g];
            if let Err(w) = lo.min_over(&group.domain).prove_nonnegative(&spec.dims) {
                out.push(Diagnostic {
                    location: loc,
                    message: format!(
                        "{what} can be negative: `{shown}` reaches `{}` over the domain of `{}`",
                        names.show(&lo.min_over(&group.domain), &[]),
                        group.name
                    ),
                    help: witness(w),
                });
            } else if let Err(w) = extent.sub(&hi_excl.max_over(&group.domain)).prove_nonnegative(&spec.dims) {
                out.push(Diagnostic {
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
                Index::At(a) => check_range(g, loc, &what, &names.show(a, &vars), a, &a.add(&one), &ev.shape[c]),
                Index::Range { start, end } => {
                    let shown = format!("{} .. {}", names.show(start, &vars), names.show(end, &vars));
                    check_range(
                        g,
                        loc,
                        &format!("the range at {what}"),
                        &shown,
                        start,
                        &start.add(&one),
                        &ev.shape[c].add(&one),
                    );
                    check_range(
                        g,
                        loc,
                        &format!("the range at {what}"),
                        &shown,
                        &Affine::constant(0),
                        end,
                        &ev.shape[c],
                    );
                    if end.sub(start).min_over(&spec.groups[g].domain).prove_nonnegative(&spec.dims).is_err() {
                        empty_ranges.push(diag(loc, format!("range of {what} can end before it starts")));
                    }
                }
                Index::All => {}
                Index::Data { tensor, at } => {
                    let t = &spec.tensors[*tensor as usize];
                    for (d, a) in at.iter().enumerate() {
                        let what = format!("index {d} of tensor `{}`", t.name);
                        check_range(g, loc, &what, &names.show(a, &vars), a, &a.add(&one), &t.shape[d]);
                    }
                }
            }
        }
    }
    for (g, group) in spec.groups.iter().enumerate() {
        for (k, tile) in group.tiles.iter().enumerate() {
            let t = &spec.tensors[tile.tensor as usize];
            for (d, (ix, &size)) in tile.index.iter().zip(tile.size.iter()).enumerate() {
                let loc = Location::Tile { group: g as u16, tile: k as u16, coord: Some(d as u16) };
                let start = ix.scale(size);
                let vars = group_vars(spec, g);
                let what = format!("the tile of `{}` in dimension {d}", t.name);
                let shown = format!(
                    "{} .. {}",
                    names.show(&start, &vars),
                    names.show(&start.add(&Affine::constant(size)), &vars)
                );
                if size <= 0 {
                    empty_ranges.push(diag(loc, format!("tile extent {size} in dimension {d} must be positive")));
                    continue;
                }
                check_range(g, loc, &what, &shown, &start, &start.add(&Affine::constant(size)), &t.shape[d]);
            }
        }
    }
    out.extend(empty_ranges);
}

/// Rule: every symbolic dim can be solved from the tensor shapes at launch.
pub fn check_dims_determined(spec: &GraphSpec, out: &mut Vec<Diagnostic>) {
    let mut known: Vec<bool> = spec.dims.iter().map(|d| matches!(d.kind, DimKind::Static(_))).collect();
    let mut progress = true;
    while progress {
        progress = false;
        for t in spec.tensors.iter() {
            for extent in t.shape.iter() {
                let unknown: Vec<u16> = extent
                    .terms
                    .iter()
                    .filter_map(|&(term, _)| match term {
                        crate::Term::Dim(d) if !known[d as usize] => Some(d),
                        _ => None,
                    })
                    .collect();
                if let [d] = unknown[..] {
                    known[d as usize] = true;
                    progress = true;
                }
            }
        }
    }
    for (d, k) in known.iter().enumerate() {
        if !k {
            out.push(Diagnostic {
                location: Location::Dim(d as u16),
                message: format!(
                    "symbolic dim `{}` is not determined by any tensor parameter's shape",
                    spec.dims[d].name
                ),
                help: Some(
                    "use it in a parameter's shape (e.g. `[B * 4, 128]`), or give it a value with `dims(..)`".into(),
                ),
            });
        }
    }
}

/// Rule: the tile-group dependency graph (signaller → waiter, through events) has no
/// cycle through two or more groups. A group that waits on elements of an event it also
/// signals (a chain or wavefront) is checked per task instead.
pub fn check_group_cycles(spec: &GraphSpec, out: &mut Vec<Diagnostic>) {
    let n = spec.groups.len();
    let mut edge = vec![vec![None::<(usize, u16)>; n]; n]; // edge[p][c] = (wait access in c, event)
    for (c, group) in spec.groups.iter().enumerate() {
        for (k, w) in group.waits.iter().enumerate() {
            for (p, producer) in spec.groups.iter().enumerate() {
                if p != c && producer.signals.iter().any(|s| s.event == w.event) && edge[p][c].is_none() {
                    edge[p][c] = Some((k, w.event));
                }
            }
        }
    }
    // depth-first search for a back edge; report each cycle once
    let mut state = vec![0u8; n]; // 0 new, 1 on stack, 2 done
    let mut stack = Vec::new();
    fn dfs(
        u: usize,
        edge: &[Vec<Option<(usize, u16)>>],
        state: &mut [u8],
        stack: &mut Vec<usize>,
        found: &mut Option<Vec<usize>>,
    ) {
        state[u] = 1;
        stack.push(u);
        for v in 0..edge.len() {
            if found.is_some() {
                break;
            }
            if edge[u][v].is_none() {
                continue;
            }
            if state[v] == 1 {
                let pos = stack.iter().position(|&x| x == v).unwrap();
                *found = Some(stack[pos..].to_vec());
            } else if state[v] == 0 {
                dfs(v, edge, state, stack, found);
            }
        }
        stack.pop();
        state[u] = 2;
    }
    for s in 0..n {
        if state[s] != 0 {
            continue;
        }
        let mut found = None;
        dfs(s, &edge, &mut state, &mut stack, &mut found);
        if let Some(cycle) = found {
            let mut names: Vec<String> = cycle.iter().map(|&g| format!("`{}`", spec.groups[g].name)).collect();
            names.push(names[0].clone());
            let (first, second) = (cycle[0], cycle[1 % cycle.len()]);
            let (k, ev) = edge[first][second].unwrap();
            out.push(Diagnostic {
                location: access_at(second, AccessKind::Wait, k, None),
                message: format!("dependency cycle between tile groups: {}", names.join(" -> ")),
                help: Some(format!(
                    "`{}` waits on event `{}`, which `{}` signals; each group on the cycle waits for the next",
                    spec.groups[second].name, spec.events[ev as usize].name, spec.groups[first].name
                )),
            });
        }
    }
}

/// The sizes at which the exact rules are checked: each symbolic dim takes a few small
/// values (and its bound, when small), in lock step and staggered.
pub fn sample_dims(spec: &GraphSpec) -> Vec<Vec<i64>> {
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
        if !out.contains(&dims) {
            out.push(dims);
        }
    }
    out
}

/// Rules checked on the exact task graph at [`sample_dims`]: every waited element is
/// signalled; inferred counts are uniform and explicit counts agree; no task waits on an
/// element it signals itself; no task-level cycle.
pub fn check_at_sample_sizes(spec: &GraphSpec, out: &mut Vec<Diagnostic>) {
    for dims in sample_dims(spec) {
        let Some(r) = resolve_sample(spec, &dims) else {
            continue;
        };
        let sizes = describe_sizes(spec, &dims);
        let before = out.len();
        for p in r.count_problems() {
            let ev = &spec.events[p.event as usize];
            let el = r.describe_element(p.element);
            match p.kind {
                CountProblemKind::NeverSignalled { consumer } => {
                    let loc = wait_touching(&r, consumer, p.element).unwrap_or(Location::Event(p.event));
                    out.push(Diagnostic {
                        location: loc,
                        message: format!(
                            "`{el}` is waited on by task `{}` but no task signals it{sizes}",
                            r.describe_task(consumer)
                        ),
                        help: Some(format!("add a `signal!` of `{}` that covers this element, or narrow the wait", ev.name)),
                    });
                }
                CountProblemKind::FixedMismatch { signals, count } => out.push(diag(
                    Location::EventCount(p.event),
                    format!(
                        "explicit count {count} disagrees with the signals: `{el}` receives {signals} signal{} per launch{sizes}",
                        plural(signals as usize)
                    ),
                )),
                CountProblemKind::NotUniform { signals, other, other_signals } => out.push(Diagnostic {
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
            && let Err(crate::ResolveError::Cycle { tasks }) = r.topological_order()
        {
            let first = tasks.first().cloned().unwrap_or_default();
            let g = spec.groups.iter().position(|g| first.starts_with(&*g.name)).unwrap_or(0);
            out.push(diag(
                Location::Group(g as u16),
                format!("dependency cycle between tasks: {}{sizes}", tasks.join(" -> ")),
            ));
        }
        if out.len() > before {
            return;
        }
    }
}

/// The task graph at sample sizes `dims`, unless it is too large to enumerate.
fn resolve_sample<'g>(spec: &'g GraphSpec, dims: &[i64]) -> Option<Resolved<'g>> {
    const MAX_TASKS: i64 = 1 << 18;
    let shapes: Vec<Vec<i64>> =
        spec.tensors.iter().map(|t| t.shape.iter().map(|e| e.eval(&[], dims)).collect()).collect();
    let tasks: i64 =
        spec.groups.iter().map(|g| g.domain.iter().map(|e| e.eval(&[], dims).max(0)).product::<i64>()).sum();
    let elements: i64 =
        spec.events.iter().map(|e| e.shape.iter().map(|x| x.eval(&[], dims).max(0)).product::<i64>()).sum();
    if tasks > MAX_TASKS || elements > MAX_TASKS * 4 {
        return None;
    }
    Resolved::for_analysis(spec, shapes).ok()
}

/// Rule checked on the exact task graph at [`sample_dims`]: tasks whose tile boxes
/// overlap, one writing, are ordered by events ([`crate::race`]). One race per pair of
/// tile arguments (the first found); not part of [`check`], because whether a tile is
/// written can depend on what only the caller knows (the macro reads it from each op's
/// signature, through a constant that rustc evaluates).
pub fn races_at_sample_sizes(spec: &GraphSpec) -> Vec<Race> {
    let mut out: Vec<Race> = Vec::new();
    for dims in sample_dims(spec) {
        let Some(r) = resolve_sample(spec, &dims) else {
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

/// Rule: a task never waits on an element that it signals itself.
fn check_self_waits(r: &Resolved<'_>, sizes: &str, out: &mut Vec<Diagnostic>) {
    let mut signalled = Vec::new();
    for task in 0..r.n_tasks {
        let (g, vars) = r.vars_of(task);
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
                    location: wait_touching(r, task, el).unwrap_or(Location::Group(g as u16)),
                    message: format!(
                        "task `{}` waits on `{}`, which it signals itself{sizes}",
                        r.describe_task(task),
                        r.describe_element(el)
                    ),
                    help: Some("a task's own signals come after its waits, so this wait can never finish".into()),
                });
                return;
            }
        }
    }
}
