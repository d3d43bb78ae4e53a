//! Resolving a [`GraphSpec`] against real tensor shapes (and, for data-dependent maps,
//! tensor contents) into a concrete task graph.
//!
//! One job per module: [`dims`] solves the dims, [`layout`] numbers tasks and counters,
//! this module builds the adjacency ([`Csr`]), [`counts`] checks the trigger counts,
//! [`order`] orders the tasks, and `error` says what went wrong ([`ResolveError`]).

pub mod counts;
mod csr;
pub mod dims;
mod error;
pub mod layout;
pub mod order;

pub use counts::{CountProblem, CountProblemKind};
pub use csr::Csr;
pub use dims::{DimStep, dim_plan, resolve_dims};
pub use error::ResolveError;
pub use layout::{EventLayout, GroupLayout};

use crate::affine::Affine;

/// The host bytes that resolving and scheduling take per task and per event element, an
/// upper estimate (the maps' lists before they are packed, the packed maps, the order and
/// the schedule's arrays).
pub const BYTES_PER_ITEM: u64 = 96;
/// The estimate from which resolution first asks the allocator for it (256 MB, about
/// 2.8 million tasks and elements).
pub const PROBED_BYTES: u64 = 256 << 20;
use crate::spec::{Count, EventAccess, GraphSpec, Index};

/// Index of a task: tasks are numbered group by group, row-major inside each domain.
pub type TaskId = u32;

/// What a resolution knows besides the tensor shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// At launch: index and count tensors are read, every access is resolved, and a
    /// violated count rule or a cycle is an error of [`Resolved::new`].
    Launch,
    /// At compile time, over sample shapes with no tensor contents: data-dependent
    /// accesses are left out and per-element counts are not read; the caller inspects
    /// [`Resolved::count_problems`] and [`Resolved::topological_order`] itself.
    ShapesOnly,
}

/// What resolution needs to know about the tensors passed at launch.
pub trait LaunchTensors {
    /// The shape of tensor parameter `t`.
    fn shape(&self, t: u16) -> Vec<i64>;
    /// The contents of integer tensor parameter `t` (read only for tensors used as
    /// data-dependent indices or per-element counts), row-major.
    fn read_integers(&self, t: u16) -> Vec<i64>;
}

/// A concrete task graph: dims, tasks, event elements and the maps between them.
#[derive(Clone, Debug)]
pub struct Resolved<'g> {
    /// The description this was resolved from.
    pub spec: &'g GraphSpec,
    /// What was read to build it.
    pub mode: Mode,
    /// Value of every dim.
    pub dims: Vec<i64>,
    /// Resolved tensor shapes.
    pub shapes: Vec<Vec<i64>>,
    /// Task numbering per group.
    pub groups: Vec<GroupLayout>,
    /// Counter layout per event.
    pub events: Vec<EventLayout>,
    /// Total tasks.
    pub n_tasks: u32,
    /// Total event elements.
    pub n_elements: u32,
    /// Signals that complete each element in one launch (0 where nothing waits).
    pub target: Vec<u32>,
    /// Signals each element receives in one launch.
    pub signals: Vec<u32>,
    /// Task → distinct elements it waits on.
    pub waits: Csr,
    /// Element → distinct tasks that wait on it.
    pub consumers: Csr,
    /// Element → distinct tasks that signal it.
    pub producers: Csr,
    /// One topological order of all tasks (producers before consumers), deterministic.
    pub order: Vec<TaskId>,
    /// Snapshot of integer tensors used as indices or counts (by tensor parameter).
    pub index_data: Vec<Option<Vec<i64>>>,
}

impl<'g> Resolved<'g> {
    /// Resolves `spec` for the tensors of one launch ([`Mode::Launch`]).
    pub fn new(spec: &'g GraphSpec, tensors: &dyn LaunchTensors) -> Result<Self, ResolveError> {
        let shapes: Vec<Vec<i64>> = (0..spec.tensors.len() as u16).map(|t| tensors.shape(t)).collect();
        let mut index_data = vec![None; spec.tensors.len()];
        for t in data_tensors(spec) {
            index_data[t as usize] = Some(tensors.read_integers(t));
        }
        let mut r = Self::build(spec, shapes, index_data, Mode::Launch)?;
        if let Some(p) = r.count_problems().first() {
            return Err(r.count_error(p));
        }
        r.order = r.topological_order().map_err(|cycle| r.cycle_error(&cycle))?;
        if let Some(race) = crate::race::find(&r).first() {
            return Err(ResolveError::Race { message: race.to_string() });
        }
        Ok(r)
    }

    /// Resolves `spec` for sample shapes at compile time ([`Mode::ShapesOnly`]).
    pub fn shapes_only(spec: &'g GraphSpec, shapes: Vec<Vec<i64>>) -> Result<Self, ResolveError> {
        Self::build(spec, shapes, vec![None; spec.tensors.len()], Mode::ShapesOnly)
    }

    fn build(
        spec: &'g GraphSpec,
        shapes: Vec<Vec<i64>>,
        index_data: Vec<Option<Vec<i64>>>,
        mode: Mode,
    ) -> Result<Self, ResolveError> {
        let dims = resolve_dims(spec, &shapes)?;
        let groups: Vec<GroupLayout> =
            layout::place("tasks", spec.groups.iter().map(|g| (&g.name, &*g.domain)), &dims)?
                .into_iter()
                .map(|(first, domain, len)| GroupLayout { first, domain, len })
                .collect();
        let events: Vec<EventLayout> =
            layout::place("event elements", spec.events.iter().map(|e| (&e.name, &*e.shape)), &dims)?
                .into_iter()
                .map(|(offset, shape, len)| EventLayout { offset, shape, len })
                .collect();
        let mut r = Resolved {
            spec,
            mode,
            dims,
            shapes,
            n_tasks: groups.last().map_or(0, |g| g.first + g.len),
            n_elements: events.last().map_or(0, |e| e.offset + e.len),
            groups,
            events,
            target: Vec::new(),
            signals: Vec::new(),
            waits: Csr::default(),
            consumers: Csr::default(),
            producers: Csr::default(),
            order: Vec::new(),
            index_data,
        };
        r.reserve_memory()?;
        r.build_maps()?;
        Ok(r)
    }

    /// Checks, before the maps are built, that the allocator gives the host memory they
    /// and a schedule need (about [`BYTES_PER_ITEM`] a task and an event element), so that
    /// a launch too large for this machine is an error and not an aborted process. Graphs
    /// below [`PROBED_BYTES`] are not probed: every launch resolves, and an allocation of
    /// that size fails no more often than any other. (Where the system overcommits memory,
    /// the allocator grants more than it has, and only the operating system can refuse.)
    fn reserve_memory(&self) -> Result<(), ResolveError> {
        let bytes = (u64::from(self.n_tasks) + u64::from(self.n_elements)) * BYTES_PER_ITEM;
        if bytes < PROBED_BYTES {
            return Ok(());
        }
        let refused = usize::try_from(bytes).map_or(true, |b| Vec::<u8>::new().try_reserve_exact(b).is_err());
        if refused {
            return Err(ResolveError::OutOfMemory { tasks: self.n_tasks, elements: self.n_elements, bytes });
        }
        Ok(())
    }

    /// The group a task belongs to.
    pub fn group_of(&self, task: TaskId) -> usize {
        self.groups.partition_point(|g| g.first + g.len <= task)
    }

    /// The group of a task and its tile indices within the group.
    pub fn vars_of(&self, task: TaskId) -> (usize, Vec<i64>) {
        let g = self.group_of(task);
        (g, layout::unflatten(task - self.groups[g].first, &self.groups[g].domain))
    }

    /// A readable name of a task: `group[i, j]`.
    pub fn describe_task(&self, task: TaskId) -> String {
        let (g, vars) = self.vars_of(task);
        let idx: Vec<String> = vars.iter().map(i64::to_string).collect();
        format!("{}[{}]", self.spec.groups[g].name, idx.join(", "))
    }

    /// The event and coordinates of a flat element index.
    pub fn element_coords(&self, element: u32) -> (usize, Vec<i64>) {
        let e = self.events.partition_point(|l| l.offset + l.len <= element);
        (e, layout::unflatten(element - self.events[e].offset, &self.events[e].shape))
    }

    /// A readable name of an element: `done[3]`.
    pub fn describe_element(&self, element: u32) -> String {
        let (e, c) = self.element_coords(element);
        let idx: Vec<String> = c.iter().map(i64::to_string).collect();
        format!("{}[{}]", self.spec.events[e].name, idx.join(", "))
    }
    /// Appends the flat elements that `access` touches for a task with tile indices
    /// `vars` (ranges expanded, data-dependent coordinates read from the snapshot).
    pub fn access_elements(&self, access: &EventAccess, vars: &[i64], out: &mut Vec<u32>) -> Result<(), String> {
        self.access_elements_with(access, vars, out, &|t, pos| self.snapshot_value(t, pos))
    }

    /// As [`Resolved::access_elements`], reading data-dependent coordinates through
    /// `read(tensor, row-major position)`: the CPU backend reads routing data from the
    /// live tensor this way. A negative value read for a run (`tokens[e, 0 .. 16]`) or
    /// from routing data stands for no element (padding); any other value outside the
    /// event is an error.
    pub fn access_elements_with(
        &self,
        access: &EventAccess,
        vars: &[i64],
        out: &mut Vec<u32>,
        read: &dyn Fn(u16, i64) -> Result<i64, String>,
    ) -> Result<(), String> {
        let layout = &self.events[access.event as usize];
        // the coordinates each dimension takes
        let mut coords: Vec<Vec<i64>> = Vec::with_capacity(access.index.len());
        for (d, ix) in access.index.iter().enumerate() {
            let extent = layout.shape[d];
            let (lo, hi) = match ix {
                Index::At(a) => {
                    let v = a.eval(vars, &self.dims);
                    (v, v + 1)
                }
                Index::Range { start, end } => (start.eval(vars, &self.dims), end.eval(vars, &self.dims)),
                Index::All => (0, extent),
                Index::Data { tensor, at, along } => {
                    let mut values = Vec::new();
                    for pos in self.data_positions(*tensor, at, along.as_ref(), vars)? {
                        let v = read(*tensor, pos)?;
                        if v < 0 && (along.is_some() || self.spec.is_routing(*tensor)) {
                            continue;
                        }
                        if v < 0 || v >= extent {
                            return Err(format!(
                                "coordinate {d} is {v}, read from `{}`, outside 0..{extent}",
                                self.spec.tensors[*tensor as usize].name
                            ));
                        }
                        values.push(v);
                    }
                    coords.push(values);
                    continue;
                }
            };
            if lo < 0 || hi > extent || (lo >= hi && !matches!(ix, Index::Range { .. } | Index::All)) {
                return Err(format!("coordinate {d} spans {lo}..{hi}, outside 0..{extent}"));
            }
            coords.push((lo..hi).collect());
        }
        if coords.iter().any(Vec::is_empty) {
            return Ok(());
        }
        // row-major walk over the product
        let mut cur = vec![0usize; coords.len()];
        loop {
            let flat = cur.iter().zip(&coords).zip(&layout.shape).fold(0i64, |acc, ((&k, c), &s)| acc * s + c[k]);
            out.push(layout.offset + flat as u32);
            let mut k = cur.len();
            loop {
                if k == 0 {
                    return Ok(());
                }
                k -= 1;
                cur[k] += 1;
                if cur[k] < coords[k].len() {
                    break;
                }
                cur[k] = 0;
            }
        }
    }

    /// The row-major positions of tensor `tensor` that a data index reads: `at`, or the
    /// run of `along`. An error when one lies outside the tensor.
    pub fn data_positions(
        &self,
        tensor: u16,
        at: &[Affine],
        along: Option<&(u16, Affine)>,
        vars: &[i64],
    ) -> Result<Vec<i64>, String> {
        let shape = &self.shapes[tensor as usize];
        let mut pos: Vec<i64> = at.iter().map(|a| a.eval(vars, &self.dims)).collect();
        let (coord, len) = along.map_or((0, 1), |(c, l)| (*c as usize, l.eval(vars, &self.dims)));
        let mut out = Vec::with_capacity(len.max(0) as usize);
        for step in 0..len {
            if step > 0 {
                pos[coord] += 1;
            }
            let mut flat = 0i64;
            for (d, &v) in pos.iter().enumerate() {
                if v < 0 || v >= shape[d] {
                    return Err(format!(
                        "index tensor `{}` read at coordinate {d} = {v}, outside 0..{}",
                        self.spec.tensors[tensor as usize].name, shape[d]
                    ));
                }
                flat = flat * shape[d] + v;
            }
            out.push(flat);
        }
        Ok(out)
    }

    fn snapshot_value(&self, tensor: u16, pos: i64) -> Result<i64, String> {
        let data = self.index_data[tensor as usize].as_ref().ok_or_else(|| {
            format!("`{}` is routing data, read only during the launch", self.spec.tensors[tensor as usize].name)
        })?;
        Ok(data[pos as usize])
    }

    /// Whether every data-dependent coordinate of `access` can be read from the snapshot
    /// (at launch, for tensors the host reads).
    pub fn is_known(&self, access: &EventAccess) -> bool {
        access
            .index
            .iter()
            .all(|ix| !matches!(ix, Index::Data { tensor, .. } if self.index_data[*tensor as usize].is_none()))
    }

    /// Whether the signals of event `e` are all known to resolution: false for an event
    /// signalled through routing data (at launch) or any data (at compile time), or by a
    /// group with a run-time condition (an inactive task signals nothing, so the tally
    /// over every task is only an upper bound). Such an event takes its declared count
    /// (fixed or per element) as its target, and the device checks it instead: a missing
    /// signal is a watchdog report, one past the count an overcount error.
    pub fn signals_known(&self, e: usize) -> bool {
        self.signals_data_known(e) && !self.signalled_conditionally(e)
    }

    /// Whether every signal of event `e` has coordinates that resolution can read (no
    /// routing data at launch, no data at all at compile time).
    pub fn signals_data_known(&self, e: usize) -> bool {
        self.spec
            .groups
            .iter()
            .flat_map(|g| g.signals.iter())
            .filter(|s| s.event as usize == e)
            .all(|s| self.is_known(s))
    }

    /// Whether a group with a run-time condition signals event `e`.
    pub fn signalled_conditionally(&self, e: usize) -> bool {
        self.spec.groups.iter().any(|g| g.condition.is_some() && g.signals.iter().any(|s| s.event as usize == e))
    }

    fn build_maps(&mut self) -> Result<(), ResolveError> {
        let n = self.n_elements as usize;
        let mut signals = vec![0u32; n];
        let mut producers: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut consumers: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut waits: Vec<Vec<u32>> = Vec::with_capacity(self.n_tasks as usize);
        let mut buf = Vec::new();
        for task in 0..self.n_tasks {
            let (g, vars) = self.vars_of(task);
            let group = &self.spec.groups[g];
            for acc in group.signals.iter() {
                let known = self.is_known(acc);
                if !known && self.mode == Mode::ShapesOnly {
                    continue;
                }
                buf.clear();
                if known {
                    self.access_elements(acc, &vars, &mut buf).map_err(|m| self.oob(task, acc, m))?;
                } else {
                    // routing data, written during the launch: the task may signal any
                    // element along the coordinates it reads, so it is ordered before every
                    // waiter of them (a static schedule must not queue a waiter ahead of
                    // it); the signals themselves are counted on the device
                    let whole = self.unknown_as_whole(acc);
                    self.access_elements(&whole, &vars, &mut buf).map_err(|m| self.oob(task, acc, m))?;
                    for &el in &buf {
                        let p = &mut producers[el as usize];
                        if p.last() != Some(&task) {
                            p.push(task);
                        }
                    }
                    continue;
                }
                for &el in &buf {
                    let s = &mut signals[el as usize];
                    *s = s.checked_add(1).ok_or_else(|| ResolveError::TooLarge {
                        what: format!("the signals of {}", self.describe_element(el)),
                    })?;
                    let p = &mut producers[el as usize];
                    if p.last() != Some(&task) {
                        p.push(task);
                    }
                }
            }
            let mut mine = Vec::new();
            for acc in group.waits.iter().filter(|a| self.is_known(a)) {
                buf.clear();
                self.access_elements(acc, &vars, &mut buf).map_err(|m| self.oob(task, acc, m))?;
                mine.extend_from_slice(&buf);
            }
            mine.sort_unstable();
            mine.dedup();
            for &el in &mine {
                consumers[el as usize].push(task);
            }
            waits.push(mine);
        }
        self.signals = signals;
        self.target = self.targets(&consumers)?;
        let csr = |rows: &[Vec<u32>], what: &str| {
            Csr::from_rows(rows).ok_or_else(|| ResolveError::TooLarge { what: format!("the {what} entries") })
        };
        self.waits = csr(&waits, "task → waited element")?;
        self.consumers = csr(&consumers, "element → consumer")?;
        self.producers = csr(&producers, "element → producer")?;
        Ok(())
    }

    /// `access` with every coordinate that reads unknown data widened to its whole
    /// dimension.
    pub fn unknown_as_whole(&self, access: &EventAccess) -> EventAccess {
        let unknown =
            |ix: &Index| matches!(ix, Index::Data { tensor, .. } if self.index_data[*tensor as usize].is_none());
        EventAccess {
            index: access.index.iter().map(|ix| if unknown(ix) { Index::All } else { ix.clone() }).collect(),
            ..access.clone()
        }
    }

    fn oob(&self, task: TaskId, acc: &EventAccess, message: String) -> ResolveError {
        ResolveError::OutOfBounds {
            task: self.describe_task(task),
            event: self.spec.events[acc.event as usize].name.to_string(),
            message,
        }
    }

    /// The element whose completion decides whether `task` is active: the single element
    /// of its group's first `wait!`, for a group with a condition.
    pub fn guard_element(&self, task: TaskId) -> Option<u32> {
        let (g, vars) = self.vars_of(task);
        let guard = self.spec.groups[g].guard()?;
        let mut out = Vec::new();
        self.access_elements(guard, &vars, &mut out).ok()?;
        (out.len() == 1).then(|| out[0])
    }

    /// Tasks a task depends on (the producers of the elements it waits on).
    pub fn dependencies(&self, task: TaskId) -> impl Iterator<Item = TaskId> + '_ {
        self.waits.row(task as usize).iter().flat_map(|&el| self.producers.row(el as usize).iter().copied())
    }
}

/// Tensors whose contents resolution reads at launch: data-dependent indices and
/// per-element counts that are inputs (routing data written by the launch is read only
/// where it is used, see [`GraphSpec::is_routing`]).
pub fn data_tensors(spec: &GraphSpec) -> Vec<u16> {
    let mut out = Vec::new();
    for e in spec.events.iter() {
        if let Count::PerElement { tensor } = e.count {
            out.push(tensor);
        }
    }
    for g in spec.groups.iter() {
        for acc in g.waits.iter().chain(g.signals.iter()) {
            for ix in acc.index.iter() {
                if let Index::Data { tensor, .. } = ix {
                    out.push(*tensor);
                }
            }
        }
    }
    out.retain(|&t| !spec.is_routing(t));
    out.sort_unstable();
    out.dedup();
    out
}
