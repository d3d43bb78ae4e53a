//! Rule: no data race between tasks.
//!
//! A `t.tile(idx, size)` argument of an op covers the box `idx[d] * size[d] ..
//! idx[d] * size[d] + size[d]` of tensor `t` in each dimension `d`. Two tasks whose boxes
//! overlap, one of them writing, must be ordered by a happens-before path: the earlier
//! op comes before a `signal!` in its task's body, that signal counts towards an element
//! that a `wait!` waits on (a wait completes only after every signal of the element's
//! count, so every signaller of the element happens before the waiter), and so on
//! through other tasks, each one's signals after its own waits, up to a `wait!` before
//! the later op in its task's body.
//!
//! [`find`] is exact on a resolved task graph: on the real one at launch (with the index
//! data), and on the sample-size graphs at compile time, where a data-dependent
//! coordinate stands for its whole dimension (every path that some index data could
//! make is assumed, so a race found there races for all index data).
//!
//! Cost, for launch-time use on large graphs: overlapping pairs are found per tensor by
//! bucketing boxes into a grid whose cells are the smallest tile extents, each pair
//! examined only in the cell that holds its overlap's low corner; a pair whose later task
//! waits on an element the earlier one signals (one hop, most pairs of a correct graph)
//! is ordered at once; for the others reachability runs for batches of 256 source ops at
//! once, as bit masks pushed along one topological order from the batch's first source
//! to its last target. The launch of llama-3.2-1b's batch-8 step (11909 tasks, a million
//! overlapping pairs) resolves in 0.13 s on the CPU this was written on, 0.34 s before
//! the one-hop check.

use std::fmt;

use crate::observed::{Observed, TaskRun, Touch, run_boxes};
use crate::resolve::{Resolved, TaskId};
use crate::spec::{Access, EventAccess, GraphSpec, GroupSpec, ReadSite};

/// One side of a race: a tile argument of an op call in one task, or a read of index
/// data outside ops (a signal's data index, a condition: see
/// [`GroupSpec::data_reads`](crate::spec::GroupSpec::data_reads)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Side {
    /// The task, described (`partial[0, 3]`).
    pub task: String,
    /// The task's group.
    pub group: u16,
    /// Index of the tile among the group's tiles; `tiles.len() + k` for the group's
    /// `k`-th data read.
    pub tile: u16,
    /// Position of the op call in the body.
    pub stmt: u16,
    /// Whether the access writes (in a spec from the macro: may write).
    pub writes: bool,
    /// The box: `start .. end` per dimension.
    pub bounds: Vec<(i64, i64)>,
}

/// Two tile accesses whose boxes overlap, one writing, with no happens-before path
/// between their tasks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Race {
    /// The tensor's name.
    pub tensor: String,
    /// The side that comes first in the megakernel's text (group, then tile).
    pub first: Side,
    /// The other side.
    pub second: Side,
    /// The sizes the race was found at, as ` (with R = 2)`; empty at launch.
    pub sizes: String,
}

/// How to fix a race, for diagnostics.
pub const HELP: &str = "order the two tasks: after its access, one of them `signal!`s an event element that the other `wait!`s on before its own access";

impl Race {
    /// The message for the given directions of the two sides (one of them writes).
    pub fn message(&self, first_writes: bool, second_writes: bool) -> String {
        let (f, s) = (&self.first, &self.second);
        let what = match (first_writes, second_writes) {
            (true, true) => {
                let both: Vec<(i64, i64)> =
                    f.bounds.iter().zip(&s.bounds).map(|(a, b)| (a.0.max(b.0), a.1.min(b.1))).collect();
                format!("`{}` and `{}` both write `{}`", f.task, s.task, self.show(&both))
            }
            (true, false) => format!("`{}` reads `{}` written by `{}`", s.task, self.show(&s.bounds), f.task),
            _ => format!("`{}` reads `{}` written by `{}`", f.task, self.show(&f.bounds), s.task),
        };
        format!("data race: {what}, with no event between them{}", self.sizes)
    }

    /// Whether both races are between the same two tile arguments.
    pub fn same_accesses(&self, other: &Race) -> bool {
        let key = |s: &Side| (s.group, s.tile);
        key(&self.first) == key(&other.first) && key(&self.second) == key(&other.second)
    }

    fn show(&self, bounds: &[(i64, i64)]) -> String {
        let parts: Vec<String> =
            bounds.iter().map(|&(a, b)| if b == a + 1 { a.to_string() } else { format!("{a}..{b}") }).collect();
        format!("{}[{}]", self.tensor, parts.join(", "))
    }
}

impl fmt::Display for Race {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message(self.first.writes, self.second.writes))
    }
}

/// A tile access of one task; its box is `coords[at .. at + 2 * rank]` as start, end pairs.
#[derive(Clone, Copy)]
struct Tile {
    task: TaskId,
    group: u16,
    tile: u16,
    stmt: u16,
    write: bool,
    at: usize,
}

/// The tile accesses of one tensor.
#[derive(Default)]
struct Boxes {
    tiles: Vec<Tile>,
    coords: Vec<i64>,
}

impl Boxes {
    fn bounds(&self, k: usize, rank: usize) -> &[i64] {
        &self.coords[self.tiles[k].at..self.tiles[k].at + 2 * rank]
    }
}

/// Every race of the task graph, one per pair of tile arguments (the first found, in
/// task order), first side first. Empty when the task graph has a cycle (its own rule).
pub fn find(r: &Resolved<'_>) -> Vec<Race> {
    races_among(r, collect_boxes(r, None), None, "")
}

/// Every race of one launch as it ran ([`Observed`]): the rule of [`find`], with the
/// signals that arrived as the only happens-before edges and the element runs the ops
/// touched as the boxes. Exact for that launch's routing data and conditions, where
/// [`find`] must assume that a routed signal may reach every waiter.
pub fn find_observed(r: &Resolved<'_>, observed: &Observed) -> Vec<Race> {
    races_among(r, collect_boxes(r, Some(observed)), Some(observed), ", as this launch routed its signals")
}

fn races_among(r: &Resolved<'_>, boxes: Vec<Boxes>, observed: Option<&Observed>, sizes: &str) -> Vec<Race> {
    let mut pairs = Vec::new();
    for (t, b) in boxes.iter().enumerate() {
        overlapping_pairs(b, &r.shapes[t], &mut pairs, t);
    }
    if pairs.is_empty() {
        return Vec::new();
    }
    let Some(hb) = HappensBefore::new(r, observed) else {
        return Vec::new();
    };
    let side = |t: usize, k: usize| boxes[t].tiles[k];
    // each pair's query: (source task, source op, target task, target op), source earlier
    // in the topological order; pairs of the same tasks and ops share one. A pair whose
    // later task waits, before its op, on an element that the earlier one signals after
    // its own (most pairs of a correct graph: a reader and the writer it waits for) is
    // ordered at once, and asks no query.
    const DIRECT: u32 = u32::MAX;
    let mut query_of = vec![DIRECT; pairs.len()];
    let mut keyed: Vec<(Query, u32)> = Vec::new();
    for (i, &(t, a, b)) in pairs.iter().enumerate() {
        let (x, y) = (side(t, a), side(t, b));
        let (x, y) = if hb.pos[x.task as usize] < hb.pos[y.task as usize] { (x, y) } else { (y, x) };
        if !hb.directly_ordered(r.spec, (x.task, x.stmt), (y.task, y.stmt)) {
            keyed.push(((hb.pos[x.task as usize], x.task, x.stmt, y.task, y.stmt), i as u32));
        }
    }
    keyed.sort_unstable();
    let mut queries: Vec<Query> = Vec::new();
    for &(q, i) in &keyed {
        if queries.last() != Some(&q) {
            queries.push(q);
        }
        query_of[i as usize] = (queries.len() - 1) as u32;
    }
    drop(keyed);
    let ordered = hb.ordered(&queries);
    let mut racing: Vec<(usize, usize, usize)> = pairs
        .into_iter()
        .enumerate()
        .filter(|&(i, _)| query_of[i] != DIRECT && !ordered[query_of[i] as usize])
        .map(|(_, pair)| pair)
        .map(|(t, a, b)| {
            // first side: the one earlier in the text, then in task order
            let key = |k: usize| {
                let s = side(t, k);
                (s.group, s.tile, s.task)
            };
            if key(a) <= key(b) { (t, a, b) } else { (t, b, a) }
        })
        .collect();
    racing.sort_unstable_by_key(|&(t, a, b)| {
        let (x, y) = (side(t, a), side(t, b));
        (x.group, x.tile, y.group, y.tile, x.task, y.task)
    });
    racing.dedup_by_key(|&mut (t, a, b)| {
        let (x, y) = (side(t, a), side(t, b));
        (x.group, x.tile, y.group, y.tile)
    });
    racing
        .into_iter()
        .map(|(t, a, b)| {
            let rank = r.shapes[t].len();
            let make = |k: usize| {
                let s = side(t, k);
                let c = boxes[t].bounds(k, rank);
                Side {
                    task: r.describe_task(s.task),
                    group: s.group,
                    tile: s.tile,
                    stmt: s.stmt,
                    writes: s.write,
                    bounds: c.chunks(2).map(|p| (p[0], p[1])).collect(),
                }
            };
            Race {
                tensor: r.spec.tensors[t].name.to_string(),
                first: make(a),
                second: make(b),
                sizes: sizes.to_string(),
            }
        })
        .collect()
}

/// Every task's tile boxes, per tensor: the boxes its `tile` arguments name, or with an
/// observation, the element runs its ops touched (a task that never ran has none, and
/// one stopped by its condition read only the condition). A tile whose rank is not its
/// tensor's (a rule of its own) has no box.
fn collect_boxes(r: &Resolved<'_>, observed: Option<&Observed>) -> Vec<Boxes> {
    static INACTIVE: TaskRun = TaskRun { active: false, signals: Vec::new(), touches: Vec::new() };
    let spec = r.spec;
    let mut out: Vec<Boxes> = (0..spec.tensors.len()).map(|_| Boxes::default()).collect();
    for (g, group) in spec.groups.iter().enumerate() {
        if group.tiles.is_empty() && group.condition.is_none() && !group.signals.iter().any(|s| s.is_data_dependent()) {
            continue;
        }
        let layout = &r.groups[g];
        let reads = group.data_reads();
        for task in layout.first..layout.first + layout.len {
            let run = match observed {
                Some(o) => match o.task(task) {
                    Some(run) => Some(run),
                    // the dynamic schedule judges a conditional task when its guard
                    // completes and never runs an inactive one: it read its condition
                    None if group.condition.is_some() => Some(&INACTIVE),
                    None => continue,
                },
                None => None,
            };
            let (_, vars) = r.vars_of(task);
            for (k, d) in reads.iter().enumerate() {
                let rank = r.shapes[d.tensor as usize].len();
                if d.at.len() != rank || run.is_some_and(|run| !run.active && d.site != ReadSite::Condition) {
                    continue;
                }
                let b = &mut out[d.tensor as usize];
                let at = b.coords.len();
                for (c, ix) in d.at.iter().enumerate() {
                    let start = ix.eval(&vars, &r.dims);
                    let len = match &d.along {
                        Some((along, len)) if *along as usize == c => len.eval(&vars, &r.dims),
                        _ => 1,
                    };
                    b.coords.extend([start, start + len]);
                }
                let tile = (group.tiles.len() + k) as u16;
                b.tiles.push(Tile { task, group: g as u16, tile, stmt: d.stmt, write: false, at });
            }
            match run {
                Some(run) => push_touches(r, g, task, &vars, run, &mut out),
                None => push_tiles(r, g, task, &vars, &mut out),
            }
        }
    }
    out
}

/// The boxes of `task`'s `tile` arguments.
fn push_tiles(r: &Resolved<'_>, g: usize, task: TaskId, vars: &[i64], out: &mut [Boxes]) {
    for (k, t) in r.spec.groups[g].tiles.iter().enumerate() {
        if let Some(bounds) = tile_box(r, g, k, vars) {
            let b = &mut out[t.tensor as usize];
            let at = b.coords.len();
            b.coords.extend(bounds.iter().flat_map(|&(lo, hi)| [lo, hi]));
            b.tiles.push(Tile {
                task,
                group: g as u16,
                tile: k as u16,
                stmt: t.stmt,
                write: t.access == Access::Write,
                at,
            });
        }
    }
}

/// The box of tile argument `k` of group `g` for the task with tile indices `vars`.
fn tile_box(r: &Resolved<'_>, g: usize, k: usize, vars: &[i64]) -> Option<Vec<(i64, i64)>> {
    let t = &r.spec.groups[g].tiles[k];
    let rank = r.shapes[t.tensor as usize].len();
    if t.index.len() != rank || t.size.len() != rank {
        return None;
    }
    Some(
        t.index
            .iter()
            .zip(t.size.iter())
            .map(|(ix, size)| {
                let size = size.eval(vars, &r.dims);
                let start = ix.eval(vars, &r.dims) * size;
                (start, start + size)
            })
            .collect(),
    )
}

/// A tile argument of one task: its box (none where its rank is not its tensor's), and
/// the synchronising statement its op follows (none: before any).
type TileSite = (Option<Vec<(i64, i64)>>, Option<u16>);

/// The boxes of the element runs `task` touched, each attributed to the `tile` argument
/// it came through: one of its tensor, among the ops between the same two synchronising
/// statements, whose box holds it (a write to a written tile first).
fn push_touches(r: &Resolved<'_>, g: usize, task: TaskId, vars: &[i64], run: &TaskRun, out: &mut [Boxes]) {
    let group = &r.spec.groups[g];
    let syncs: Vec<u16> = group.waits.iter().chain(group.signals.iter()).map(|a| a.stmt).collect();
    let tiles: Vec<TileSite> = (0..group.tiles.len())
        .map(|k| (tile_box(r, g, k, vars), syncs.iter().copied().filter(|&s| s < group.tiles[k].stmt).max()))
        .collect();
    for touch in &run.touches {
        let shape = &r.shapes[touch.tensor as usize];
        run_boxes(shape, touch.start, touch.end, &mut |bounds| {
            let Some(k) = attribute(group, &tiles, touch, bounds) else { return };
            let b = &mut out[touch.tensor as usize];
            let at = b.coords.len();
            b.coords.extend(bounds.iter().flat_map(|&(lo, hi)| [lo, hi]));
            let stmt = group.tiles[k].stmt;
            b.tiles.push(Tile { task, group: g as u16, tile: k as u16, stmt, write: touch.write, at });
        });
    }
}

/// The tile argument of `group` that `touch` (the part of it in `bounds`) came through,
/// given each tile's box and the synchronising statement before its op (`tiles`). Ops
/// only touch their own tiles, so one of the tensor's tiles in that stretch of the body
/// holds it, a written one first for a write; a touch that no tile of the stretch can
/// have made (a hand-built spec) is left out.
fn attribute(group: &GroupSpec, tiles: &[TileSite], touch: &Touch, bounds: &[(i64, i64)]) -> Option<usize> {
    let in_stretch = |k: &usize| group.tiles[*k].tensor == touch.tensor && tiles[*k].1 == touch.after;
    let holds = |k: &usize| {
        tiles[*k]
            .0
            .as_ref()
            .is_some_and(|b| b.len() == bounds.len() && b.iter().zip(bounds).all(|(o, i)| o.0 <= i.0 && i.1 <= o.1))
    };
    let writes = |k: &usize| group.tiles[*k].access == Access::Write;
    let candidates = || (0..group.tiles.len()).filter(in_stretch);
    candidates()
        .find(|k| holds(k) && (!touch.write || writes(k)))
        .or_else(|| candidates().find(holds))
        .or_else(|| candidates().next())
}

/// Appends `(tensor, a, b)` for every pair of accesses of one tensor by different
/// tasks whose boxes overlap, `a` writing.
fn overlapping_pairs(b: &Boxes, shape: &[i64], out: &mut Vec<(usize, usize, usize)>, tensor: usize) {
    if !b.tiles.iter().any(|t| t.write) {
        return;
    }
    let rank = shape.len();
    // boxes clipped to the tensor (bounds are a rule of their own); empty ones touch nothing
    let clipped: Vec<Option<Vec<(i64, i64)>>> = (0..b.tiles.len())
        .map(|k| {
            let c = b.bounds(k, rank);
            let v: Vec<(i64, i64)> = (0..rank).map(|d| (c[2 * d].max(0), c[2 * d + 1].min(shape[d]))).collect();
            v.iter().all(|&(lo, hi)| lo < hi).then_some(v)
        })
        .collect();
    if clipped.iter().all(Option::is_none) {
        return;
    }
    let mut cell = vec![i64::MAX; rank];
    for v in clipped.iter().flatten() {
        for (d, &(lo, hi)) in v.iter().enumerate() {
            cell[d] = cell[d].min(hi - lo);
        }
    }
    let cells: Vec<u64> = (0..rank).map(|d| ((shape[d] + cell[d] - 1) / cell[d].max(1)) as u64).collect();
    let flat = |c: &[i64]| c.iter().zip(&cells).fold(0u64, |acc, (&x, &n)| acc * n + x as u64);
    let mut entries: Vec<(u64, u32)> = Vec::new();
    let mut cur = vec![0i64; rank];
    for (k, v) in clipped.iter().enumerate() {
        let Some(v) = v else { continue };
        let range: Vec<(i64, i64)> = v.iter().zip(&cell).map(|(&(lo, hi), &c)| (lo / c, (hi - 1) / c)).collect();
        for (d, r) in range.iter().enumerate() {
            cur[d] = r.0;
        }
        loop {
            entries.push((flat(&cur), k as u32));
            let mut d = rank;
            loop {
                if d == 0 {
                    break;
                }
                d -= 1;
                cur[d] += 1;
                if cur[d] <= range[d].1 {
                    break;
                }
                cur[d] = range[d].0;
            }
            if cur.iter().zip(&range).all(|(&c, r)| c == r.0) {
                break;
            }
        }
    }
    let entries = by_cell(entries, cells.iter().try_fold(1u64, |all, &n| all.checked_mul(n)));
    let mut corner = vec![0i64; rank];
    for run in entries.chunk_by(|x, y| x.0 == y.0) {
        for &(key, w) in run.iter().filter(|e| b.tiles[e.1 as usize].write) {
            let (wt, wv) = (&b.tiles[w as usize], clipped[w as usize].as_ref().expect("in a cell"));
            for &(_, o) in run {
                let ot = &b.tiles[o as usize];
                if ot.task == wt.task || (ot.write && o <= w) {
                    continue;
                }
                let ov = clipped[o as usize].as_ref().expect("in a cell");
                let overlap = wv.iter().zip(ov).all(|(a, b)| a.0.max(b.0) < a.1.min(b.1));
                if !overlap {
                    continue;
                }
                for d in 0..rank {
                    corner[d] = wv[d].0.max(ov[d].0) / cell[d];
                }
                if flat(&corner) == key {
                    out.push((tensor, w as usize, o as usize));
                }
            }
        }
    }
}

/// `entries` (cell, box) ordered by cell, and within a cell by box. Pushed in box order,
/// they take a counting sort where the grid has at most about two cells an entry (the
/// launch check's large graphs: llama-3.2-1b's 2 million entries sort 4x faster than by
/// comparison), and a comparison sort where a count per cell would cost more than the
/// entries (or `cells`, the grid's size, overflowed).
fn by_cell(mut entries: Vec<(u64, u32)>, cells: Option<u64>) -> Vec<(u64, u32)> {
    debug_assert!(entries.windows(2).all(|p| p[0].1 <= p[1].1), "entries pushed box by box");
    let Some(cells) = cells.filter(|&n| n <= 2 * entries.len() as u64 + 1024) else {
        entries.sort_unstable();
        return entries;
    };
    let mut next = vec![0usize; cells as usize + 1];
    for &(cell, _) in &entries {
        next[cell as usize + 1] += 1;
    }
    for c in 1..next.len() {
        next[c] += next[c - 1];
    }
    let mut sorted = vec![(0, 0); entries.len()];
    for e in entries {
        let at = &mut next[e.0 as usize];
        sorted[*at] = e;
        *at += 1;
    }
    sorted
}

/// A statement of a tile body, for the walk in body order.
#[derive(Clone, Copy)]
enum Stmt {
    Wait(usize),
    Signal(usize),
    Op(u16),
}

/// The statement-level happens-before graph of a resolved task graph.
struct HappensBefore {
    /// Statements of each group's body, in body order.
    bodies: Vec<Vec<Stmt>>,
    group: Vec<u16>,
    /// Elements of wait (signal) `k` of task `t`: row `first_wait[t] + k`.
    waits: Vec<Vec<u32>>,
    signals: Vec<Vec<u32>>,
    first_wait: Vec<u32>,
    first_signal: Vec<u32>,
    order: Vec<TaskId>,
    /// Position of each task in `order`.
    pos: Vec<u32>,
    n_elements: usize,
}

const LANES: usize = 4;
type Mask = [u64; LANES];
/// A task of one batch: the ops it sources `(op, bit)` and targets `(op, bit, query)`.
type At = (TaskId, Vec<(u16, usize)>, Vec<(u16, usize, usize)>);
/// `(position of the source, source task, source op, target task, target op)`.
type Query = (u32, TaskId, u16, TaskId, u16);

impl HappensBefore {
    /// `None` when the task graph has a cycle. With an observation, a task's signals are
    /// the elements they reached in that launch (none for a task that never ran).
    fn new(r: &Resolved<'_>, observed: Option<&Observed>) -> Option<Self> {
        let spec = r.spec;
        let bodies: Vec<Vec<Stmt>> = spec
            .groups
            .iter()
            .map(|g| {
                // a data read happens before the statement it shares a position with (a
                // signal reads its index, then signals; a condition is read before the
                // statement after the guard)
                let mut body: Vec<((u16, u8), Stmt)> = Vec::new();
                body.extend(g.waits.iter().enumerate().map(|(k, a)| ((a.stmt, 1), Stmt::Wait(k))));
                body.extend(g.signals.iter().enumerate().map(|(k, a)| ((a.stmt, 1), Stmt::Signal(k))));
                let mut ops: Vec<u16> = g.tiles.iter().map(|t| t.stmt).collect();
                ops.extend(g.data_reads().iter().map(|d| d.stmt));
                ops.sort_unstable();
                ops.dedup();
                body.extend(ops.into_iter().map(|s| ((s, 0), Stmt::Op(s))));
                body.sort_by_key(|&(s, _)| s);
                body.into_iter().map(|(_, s)| s).collect()
            })
            .collect();
        let n = r.n_tasks as usize;
        let (mut waits, mut signals) = (Vec::new(), Vec::new());
        let (mut first_wait, mut first_signal) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let mut group = Vec::with_capacity(n);
        for task in 0..r.n_tasks {
            let (g, vars) = r.vars_of(task);
            group.push(g as u16);
            first_wait.push(waits.len() as u32);
            first_signal.push(signals.len() as u32);
            for (list, accs, is_signal) in
                [(&mut waits, &spec.groups[g].waits, false), (&mut signals, &spec.groups[g].signals, true)]
            {
                for (k, acc) in accs.iter().enumerate() {
                    let mut els = match observed {
                        Some(o) if is_signal => {
                            o.task(task).and_then(|run| run.signals.get(k)).cloned().unwrap_or_default()
                        }
                        _ => {
                            let mut els = Vec::new();
                            elements(r, acc, &vars, &mut els);
                            els
                        }
                    };
                    els.sort_unstable();
                    els.dedup();
                    list.push(els);
                }
            }
        }
        let mut hb = HappensBefore {
            bodies,
            group,
            waits,
            signals,
            first_wait,
            first_signal,
            order: Vec::new(),
            pos: Vec::new(),
            n_elements: r.n_elements as usize,
        };
        hb.order = hb.topological_order()?;
        hb.pos = vec![0; n];
        for (p, &t) in hb.order.iter().enumerate() {
            hb.pos[t as usize] = p as u32;
        }
        Some(hb)
    }

    fn task_rows<'a>(&'a self, rows: &'a [Vec<u32>], first: &[u32], t: usize) -> &'a [Vec<u32>] {
        let end = first.get(t + 1).map_or(rows.len(), |&e| e as usize);
        &rows[first[t] as usize..end]
    }

    /// Kahn's algorithm over elements: an element is complete once all its signallers ran
    /// (one with none is complete: coverage is a rule of its own), a task is ready once
    /// its waited elements are.
    fn topological_order(&self) -> Option<Vec<TaskId>> {
        let n = self.group.len();
        let mut producers = vec![0u32; self.n_elements];
        let mut consumers: Vec<Vec<TaskId>> = vec![Vec::new(); self.n_elements];
        let mut signalled: Vec<Vec<u32>> = Vec::with_capacity(n);
        for t in 0..n {
            let mut mine: Vec<u32> =
                self.task_rows(&self.signals, &self.first_signal, t).iter().flatten().copied().collect();
            mine.sort_unstable();
            mine.dedup();
            for &el in &mine {
                producers[el as usize] += 1;
            }
            signalled.push(mine);
        }
        let mut pending = vec![0u32; n];
        for (t, p) in pending.iter_mut().enumerate() {
            let mut mine: Vec<u32> =
                self.task_rows(&self.waits, &self.first_wait, t).iter().flatten().copied().collect();
            mine.sort_unstable();
            mine.dedup();
            for el in mine.into_iter().filter(|&el| producers[el as usize] > 0) {
                consumers[el as usize].push(t as TaskId);
                *p += 1;
            }
        }
        // depth first (a task becoming ready runs next), so that a consumer sits close to
        // its producers and the reachability windows stay short
        let mut ready: Vec<TaskId> = (0..n as TaskId).rev().filter(|&t| pending[t as usize] == 0).collect();
        let mut order = Vec::with_capacity(n);
        while let Some(t) = ready.pop() {
            order.push(t);
            for &el in &signalled[t as usize] {
                producers[el as usize] -= 1;
                if producers[el as usize] == 0 {
                    for &c in consumers[el as usize].iter().rev() {
                        pending[c as usize] -= 1;
                        if pending[c as usize] == 0 {
                            ready.push(c);
                        }
                    }
                }
            }
        }
        (order.len() == n).then_some(order)
    }

    /// Whether op `from` (task, statement) happens before op `to` through one event: a
    /// signal of `from`'s task after its op shares an element with a wait of `to`'s task
    /// before its op (an op sorts before a signal at the same position, see `bodies`).
    fn directly_ordered(&self, spec: &GraphSpec, from: (TaskId, u16), to: (TaskId, u16)) -> bool {
        let (sent, waited) =
            (&spec.groups[self.group[from.0 as usize] as usize], &spec.groups[self.group[to.0 as usize] as usize]);
        let signals = self.task_rows(&self.signals, &self.first_signal, from.0 as usize);
        let waits = self.task_rows(&self.waits, &self.first_wait, to.0 as usize);
        sent.signals
            .iter()
            .zip(signals)
            .filter(|(a, _)| a.stmt >= from.1)
            .any(|(_, s)| waited.waits.iter().zip(waits).filter(|(a, _)| a.stmt < to.1).any(|(_, w)| sorted_meet(s, w)))
    }

    /// For each query `(_, source task, source op, target task, target op)` (the source
    /// earlier in the order), whether the source op happens before the target op. The
    /// queries are sorted and distinct.
    ///
    /// Runs forward from the sources, or backward from the targets where there are fewer
    /// distinct targets (many writers read by one task through a long chain).
    fn ordered(&self, queries: &[Query]) -> Vec<bool> {
        // sorted queries list each source's together
        let sources = queries
            .iter()
            .enumerate()
            .filter(|&(k, q)| k == 0 || (q.1, q.2) != (queries[k - 1].1, queries[k - 1].2))
            .count();
        let mut targets: Vec<u64> = queries.iter().map(|q| (u64::from(q.3) << 16) | u64::from(q.4)).collect();
        targets.sort_unstable();
        targets.dedup();
        let backward = targets.len() < sources;
        drop(targets);
        let n = self.order.len() as u32;
        // (walk position of `from`, from task, from op, to task, to op, query)
        let mut walk: Vec<(u32, TaskId, u16, TaskId, u16, usize)> = queries
            .iter()
            .enumerate()
            .map(
                |(k, &(p, s, so, t, to))| {
                    if backward { (n - 1 - self.pos[t as usize], t, to, s, so, k) } else { (p, s, so, t, to, k) }
                },
            )
            .collect();
        // forward, the walk is the queries' own order
        if backward {
            walk.sort_unstable();
        }
        let (incoming, outgoing) = if backward {
            ((&self.signals, &self.first_signal), (&self.waits, &self.first_wait))
        } else {
            ((&self.waits, &self.first_wait), (&self.signals, &self.first_signal))
        };
        let mut out = vec![false; queries.len()];
        let mut mask: Vec<Mask> = vec![[0; LANES]; self.n_elements];
        let mut touched: Vec<u32> = Vec::new();
        // per task of the batch: index into `at`, or u32::MAX
        let mut slot = vec![u32::MAX; self.group.len()];
        let mut start = 0;
        while start < walk.len() {
            // one batch: up to 64 * LANES distinct `from` ops, with all their queries
            let mut from = 0;
            let mut end = start;
            while end < walk.len() {
                if end == start || (walk[end].1, walk[end].2) != (walk[end - 1].1, walk[end - 1].2) {
                    if from == 64 * LANES {
                        break;
                    }
                    from += 1;
                }
                end += 1;
            }
            let batch = &walk[start..end];
            let mut at: Vec<At> = Vec::new();
            let mut entry = |at: &mut Vec<At>, t: TaskId| -> usize {
                if slot[t as usize] == u32::MAX {
                    slot[t as usize] = at.len() as u32;
                    at.push((t, Vec::new(), Vec::new()));
                }
                slot[t as usize] as usize
            };
            let mut bit = 0;
            let mut hi = 0;
            for (k, w) in batch.iter().enumerate() {
                if k > 0 && (w.1, w.2) != (batch[k - 1].1, batch[k - 1].2) {
                    bit += 1;
                }
                let f = entry(&mut at, w.1);
                if at[f].1.last() != Some(&(w.2, bit)) {
                    at[f].1.push((w.2, bit));
                }
                let t = entry(&mut at, w.3);
                at[t].2.push((w.4, bit, w.5));
                let p = self.pos[w.3 as usize];
                hi = hi.max(if backward { n - 1 - p } else { p });
            }
            for p in batch[0].0..=hi {
                let t = self.order[(if backward { n - 1 - p } else { p }) as usize] as usize;
                let here = (slot[t] != u32::MAX).then(|| &at[slot[t] as usize]);
                let ins = self.task_rows(incoming.0, incoming.1, t);
                let outs = self.task_rows(outgoing.0, outgoing.1, t);
                let mut acc: Mask = [0; LANES];
                let body = &self.bodies[self.group[t] as usize];
                let mut visit = |s: &Stmt| match (*s, backward) {
                    (Stmt::Wait(k), false) | (Stmt::Signal(k), true) => {
                        for &el in &ins[k] {
                            for (a, m) in acc.iter_mut().zip(&mask[el as usize]) {
                                *a |= m;
                            }
                        }
                    }
                    (Stmt::Signal(k), false) | (Stmt::Wait(k), true) => {
                        if acc == [0; LANES] {
                            return;
                        }
                        for &el in &outs[k] {
                            let m = &mut mask[el as usize];
                            if *m == [0; LANES] {
                                touched.push(el);
                            }
                            for (m, a) in m.iter_mut().zip(&acc) {
                                *m |= a;
                            }
                        }
                    }
                    (Stmt::Op(op), _) => {
                        let Some((_, sourced, targeted)) = here else { return };
                        for &(_, b, q) in targeted.iter().filter(|x| x.0 == op) {
                            out[q] = acc[b / 64] >> (b % 64) & 1 == 1;
                        }
                        for &(_, b) in sourced.iter().filter(|x| x.0 == op) {
                            acc[b / 64] |= 1 << (b % 64);
                        }
                    }
                };
                if backward {
                    body.iter().rev().for_each(&mut visit);
                } else {
                    body.iter().for_each(&mut visit);
                }
            }
            for el in touched.drain(..) {
                mask[el as usize] = [0; LANES];
            }
            for (t, _, _) in &at {
                slot[*t as usize] = u32::MAX;
            }
            start = end;
        }
        out
    }
}

/// Whether two sorted lists share a value.
fn sorted_meet(a: &[u32], b: &[u32]) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if short.len() * 8 < long.len() {
        return short.iter().any(|v| long.binary_search(v).is_ok());
    }
    let (mut i, mut j) = (0, 0);
    while i < short.len() && j < long.len() {
        match short[i].cmp(&long[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => return true,
        }
    }
    false
}

/// The elements an access touches; without index data (at compile time), a
/// data-dependent coordinate stands for its whole dimension. An access outside the
/// event (a rule of its own) touches nothing.
fn elements(r: &Resolved<'_>, acc: &EventAccess, vars: &[i64], out: &mut Vec<u32>) {
    if r.is_known(acc) {
        let _ = r.access_elements(acc, vars, out);
    } else {
        let _ = r.access_elements(&r.unknown_as_whole(acc), vars, out);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::build::*;
    use crate::resolve::LaunchTensors;
    use crate::spec::{Count, DType, GraphSpec};

    struct Shapes(Vec<Vec<i64>>);

    impl LaunchTensors for Shapes {
        fn shape(&self, t: u16) -> Vec<i64> {
            self.0[t as usize].clone()
        }
        fn read_integers(&self, _: u16) -> Vec<i64> {
            Vec::new()
        }
    }

    fn races(spec: &GraphSpec, shapes: Vec<Vec<i64>>) -> Vec<String> {
        let r = Resolved::shapes_only(spec, shapes).unwrap();
        find(&r).iter().map(Race::to_string).collect()
    }

    /// `partial[i, j]` writes `part[32i.., j]` and signals `done[i]`; `total[i]` waits on
    /// it (unless `wait` is false) and reads `part[32i.., 0..4]`.
    fn split_row_sum(wait: bool) -> GraphSpec {
        let r32 = dim(0).scale(32);
        graph(
            "split_row_sum",
            vec![symbolic("R")],
            vec![
                tensor("a", DType::F32, vec![r32.clone(), lit(128)], Access::Read),
                tensor("part", DType::F32, vec![r32.clone(), lit(4)], Access::Write),
                tensor("c", DType::F32, vec![r32], Access::Write),
            ],
            vec![event("done", vec![dim(0)], Count::Inferred)],
            vec![
                with_tiles(
                    group("partial", &["i", "j"], vec![dim(0), lit(4)], vec![], vec![at(0, vec![point(var(0))])]),
                    vec![
                        tile(0, vec![var(0), var(1)], vec![32, 32], Access::Read),
                        tile(1, vec![var(0), var(1)], vec![32, 1], Access::Write),
                    ],
                ),
                with_tiles(
                    group(
                        "total",
                        &["i"],
                        vec![dim(0)],
                        if wait { vec![at(0, vec![point(var(0))])] } else { vec![] },
                        vec![],
                    ),
                    vec![
                        tile(1, vec![var(0), lit(0)], vec![32, 4], Access::Read),
                        tile(2, vec![var(0)], vec![32], Access::Write),
                    ],
                ),
            ],
        )
    }

    #[test]
    fn ordered_graph_has_no_race() {
        assert!(races(&split_row_sum(true), vec![vec![64, 128], vec![64, 4], vec![64]]).is_empty());
    }

    #[test]
    fn forgotten_wait_names_tasks_and_box() {
        let found = races(&split_row_sum(false), vec![vec![64, 128], vec![64, 4], vec![64]]);
        assert_eq!(
            found,
            ["data race: `total[0]` reads `part[0..32, 0..4]` written by `partial[0, 0]`, with no event between them"]
        );
    }

    #[test]
    fn signal_before_the_write_is_a_race() {
        let mut spec = split_row_sum(true);
        // partial's body becomes: signal, then the op
        let partial = &mut spec.groups.to_mut()[0];
        partial.signals.to_mut()[0].stmt = 0;
        partial.tiles.to_mut().iter_mut().for_each(|t| t.stmt = 1);
        let found = races(&spec, vec![vec![32, 128], vec![32, 4], vec![32]]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("`total[0]` reads `part[0..32, 0..4]` written by `partial[0, 0]`"), "{found:?}");
    }

    /// `produce` writes `s` and signals `ready`; `consume` waits, reads `s`, writes `out`;
    /// `overwrite` waits on `ready` too and writes `s`, without waiting for `consume`
    /// unless `war_wait`.
    fn scratch(war_wait: bool) -> GraphSpec {
        let n = || vec![lit(8)];
        let mut over_waits = vec![at(0, vec![point(lit(0))])];
        if war_wait {
            over_waits.push(at(1, vec![point(lit(0))]));
        }
        graph(
            "scratch",
            vec![],
            vec![tensor("s", DType::F32, n(), Access::Write), tensor("out", DType::F32, n(), Access::Write)],
            vec![event("ready", vec![lit(1)], Count::Inferred), event("used", vec![lit(1)], Count::Inferred)],
            vec![
                with_tiles(
                    group("produce", &["z"], vec![lit(1)], vec![], vec![at(0, vec![point(lit(0))])]),
                    vec![tile(0, vec![lit(0)], vec![8], Access::Write)],
                ),
                with_tiles(
                    group(
                        "consume",
                        &["z"],
                        vec![lit(1)],
                        vec![at(0, vec![point(lit(0))])],
                        vec![at(1, vec![point(lit(0))])],
                    ),
                    vec![tile(0, vec![lit(0)], vec![8], Access::Read), tile(1, vec![lit(0)], vec![8], Access::Write)],
                ),
                with_tiles(
                    group("overwrite", &["z"], vec![lit(1)], over_waits, vec![]),
                    vec![tile(0, vec![lit(0)], vec![8], Access::Write)],
                ),
            ],
        )
    }

    #[test]
    fn write_after_read_needs_an_event_too() {
        let found = races(&scratch(false), vec![vec![8], vec![8]]);
        assert_eq!(
            found,
            ["data race: `consume[0]` reads `s[0..8]` written by `overwrite[0]`, with no event between them"]
        );
        assert!(races(&scratch(true), vec![vec![8], vec![8]]).is_empty());
    }

    #[test]
    fn overlapping_writes_of_one_group() {
        // w[i] writes x[8i .. 8i + 16] (two blocks of 8): neighbours overlap
        let spec = graph(
            "overlap",
            vec![symbolic("N")],
            vec![tensor("x", DType::F32, vec![dim(0).scale(8).add(&lit(8))], Access::Write)],
            vec![],
            vec![with_tiles(
                group("w", &["i"], vec![dim(0)], vec![], vec![]),
                vec![
                    tile(0, vec![var(0)], vec![8], Access::Write),
                    tile(0, vec![var(0).add(&lit(1))], vec![8], Access::Write),
                ],
            )],
        );
        assert!(races(&spec, vec![vec![16]]).is_empty(), "one task does not race with itself");
        let found = races(&spec, vec![vec![32]]);
        assert_eq!(found, ["data race: `w[1]` and `w[0]` both write `x[8..16]`, with no event between them"]);
    }

    #[test]
    fn transitive_paths_count_and_data_indices_stand_for_their_dimension() {
        // a[0] writes x; b[0] waits e[0] from a, signals f[0]; c[0] waits f[0], reads x
        let spec = |data: bool| {
            let ix = if data {
                crate::spec::Index::Data { tensor: 1, at: vec![lit(0)].into(), along: None }
            } else {
                point(lit(0))
            };
            graph(
                "path",
                vec![],
                vec![
                    tensor("x", DType::F32, vec![lit(4)], Access::Write),
                    tensor("idx", DType::I32, vec![lit(1)], Access::Read),
                ],
                vec![event("e", vec![lit(2)], Count::Inferred), event("f", vec![lit(1)], Count::Inferred)],
                vec![
                    with_tiles(
                        group("a", &["z"], vec![lit(1)], vec![], vec![at(0, vec![ix])]),
                        vec![tile(0, vec![lit(0)], vec![4], Access::Write)],
                    ),
                    group(
                        "b",
                        &["z"],
                        vec![lit(1)],
                        vec![at(0, vec![point(lit(0))])],
                        vec![at(1, vec![point(lit(0))])],
                    ),
                    with_tiles(
                        group("c", &["z"], vec![lit(1)], vec![at(1, vec![point(lit(0))])], vec![]),
                        vec![tile(0, vec![lit(0)], vec![4], Access::Read)],
                    ),
                ],
            )
        };
        assert!(races(&spec(false), vec![vec![4], vec![1]]).is_empty());
        // at compile time `e[idx[0]]` may be `e[0]`: no race can be proved
        assert!(races(&spec(true), vec![vec![4], vec![1]]).is_empty());
        // at launch with idx[0] = 1 the path is gone
        let s = spec(true);
        struct Idx;
        impl LaunchTensors for Idx {
            fn shape(&self, t: u16) -> Vec<i64> {
                if t == 0 { vec![4] } else { vec![1] }
            }
            fn read_integers(&self, _: u16) -> Vec<i64> {
                vec![1]
            }
        }
        // `e` is not dyn, so only the race rule sees this graph: resolve without counts
        let mut r = Resolved::shapes_only(&s, vec![vec![4], vec![1]]).unwrap();
        r.index_data[1] = Some(Idx.read_integers(1));
        let found: Vec<String> = find(&r).iter().map(Race::to_string).collect();
        assert_eq!(found, ["data race: `c[0]` reads `x[0..4]` written by `a[0]`, with no event between them"]);
    }

    #[test]
    fn entries_by_cell_equal_a_comparison_sort_whichever_sort_runs() {
        // entries as `overlapping_pairs` pushes them: box by box, each box's cells ascending
        let mut state = 12345u64;
        let mut next = |n: u64| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) % n
        };
        for cells in [1u64, 7, 64, 5000] {
            let mut entries = Vec::new();
            for k in 0..300u32 {
                let lo = next(cells);
                let hi = (lo + next(4)).min(cells - 1);
                entries.extend((lo..=hi).map(|c| (c, k)));
            }
            let mut want = entries.clone();
            want.sort_unstable();
            // few cells take the counting sort; 5000 cells for about 750 entries do not
            assert_eq!(by_cell(entries.clone(), Some(cells)), want, "{cells} cells");
            assert_eq!(by_cell(entries, None), want, "{cells} cells, an overflowed grid");
        }
    }

    #[test]
    fn launch_check_is_fast_on_large_graphs() {
        // 100 000 tasks: split row sum with R = 20 000
        let rows = 20_000i64;
        let shapes = vec![vec![rows * 32, 128], vec![rows * 32, 4], vec![rows * 32]];
        let spec = split_row_sum(true);
        let t0 = Instant::now();
        let r = Resolved::new(&spec, &Shapes(shapes.clone())).unwrap();
        eprintln!("split row sum, {} tasks: resolved with the race check in {:?}", r.n_tasks, t0.elapsed());
        let t0 = Instant::now();
        assert!(find(&r).is_empty());
        eprintln!("of which the race check: {:?}", t0.elapsed());
        let t0 = Instant::now();
        let err = Resolved::new(&split_row_sum(false), &Shapes(shapes)).unwrap_err();
        eprintln!("the same without its wait: rejected in {:?}", t0.elapsed());
        assert!(err.to_string().starts_with("data race: `total[0]` reads `part[0..32, 0..4]`"), "{err}");

        // 100 000 tasks ordered only transitively: step[i] writes x[i] and waits for
        // step[i - 1]; the last task reads all of x after waiting for the last step
        let n = 100_000i64;
        let chain = |write_after_signal: bool| {
            let mut step = with_tiles(
                group(
                    "step",
                    &["i"],
                    vec![dim(0)],
                    vec![at(0, vec![point(var(0))])],
                    vec![at(0, vec![point(var(0).add(&lit(1)))])],
                ),
                vec![tile(0, vec![var(0)], vec![1], Access::Write)],
            );
            if write_after_signal {
                step.tiles.to_mut()[0].stmt = 3;
            }
            graph(
                "chain",
                vec![symbolic("N")],
                vec![tensor("x", DType::F32, vec![dim(0)], Access::Write)],
                vec![event("e", vec![dim(0).add(&lit(1))], Count::Inferred)],
                vec![
                    group("seed", &["z"], vec![lit(1)], vec![], vec![at(0, vec![point(lit(0))])]),
                    step,
                    with_tiles(
                        group("last", &["z"], vec![lit(1)], vec![at(0, vec![point(dim(0))])], vec![]),
                        vec![tile(0, vec![lit(0)], vec![n], Access::Read)],
                    ),
                ],
            )
        };
        let spec = chain(false);
        let t0 = Instant::now();
        let r = Resolved::new(&spec, &Shapes(vec![vec![n]])).unwrap();
        eprintln!(
            "chain, {} tasks, {n} transitive pairs: resolved with the race check in {:?}",
            r.n_tasks,
            t0.elapsed()
        );
        let t0 = Instant::now();
        assert!(find(&r).is_empty());
        eprintln!("of which the race check: {:?}", t0.elapsed());
        let spec = chain(true);
        let err = Resolved::new(&spec, &Shapes(vec![vec![n]])).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("data race: `last[0]` reads `x[0..{n}]` written by `step[0]`, with no event between them")
        );
    }
}
