//! Resolving a [`GraphSpec`] against real tensor shapes (and, for data-dependent maps,
//! tensor contents) into a concrete task graph.

use std::fmt;

use crate::affine::Affine;
use crate::spec::{Count, DimKind, EventAccess, GraphSpec, Index};

/// Index of a task: tasks are numbered group by group, row-major inside each domain.
pub type TaskId = u32;

/// A compressed list of lists (`offsets.len() == rows + 1`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Csr {
    /// Row `r` is `items[offsets[r] .. offsets[r + 1]]`.
    pub offsets: Vec<u32>,
    /// Concatenated rows.
    pub items: Vec<u32>,
}

impl Csr {
    fn from_rows(rows: &[Vec<u32>]) -> Csr {
        let mut offsets = Vec::with_capacity(rows.len() + 1);
        let mut items = Vec::new();
        offsets.push(0);
        for r in rows {
            items.extend_from_slice(r);
            offsets.push(items.len() as u32);
        }
        Csr { offsets, items }
    }

    /// Row `r`.
    pub fn row(&self, r: usize) -> &[u32] {
        &self.items[self.offsets[r] as usize..self.offsets[r + 1] as usize]
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }
}

/// Where a group's tasks sit in the task numbering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupLayout {
    /// First task of the group.
    pub first: TaskId,
    /// Resolved domain extents.
    pub domain: Vec<i64>,
    /// Number of tasks.
    pub len: u32,
}

/// Where an event's counters sit in the flat counter array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventLayout {
    /// First counter of the event.
    pub offset: u32,
    /// Resolved shape.
    pub shape: Vec<i64>,
    /// Number of elements.
    pub len: u32,
}

/// Why a graph could not be resolved for the given tensors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResolveError {
    /// A tensor was passed with the wrong number of dimensions.
    Rank {
        /// Tensor parameter name.
        tensor: String,
        /// Declared rank.
        expected: usize,
        /// Rank passed.
        got: usize,
    },
    /// A tensor's extent disagrees with its declaration.
    Shape {
        /// Tensor parameter name.
        tensor: String,
        /// Dimension of the tensor.
        dim: usize,
        /// The declared extent, e.g. `R*32`.
        declared: String,
        /// Its value under the resolved dims.
        expected: Option<i64>,
        /// The extent passed.
        got: i64,
        /// How the dims involved were resolved.
        because: String,
    },
    /// A symbolic dim could not be determined or is outside its declared bound.
    Dim {
        /// Dim name.
        dim: String,
        /// Explanation.
        message: String,
    },
    /// An event access fell outside the event (data-dependent indices).
    OutOfBounds {
        /// Task description, e.g. `partial[1, 2]`.
        task: String,
        /// Event name.
        event: String,
        /// Explanation.
        message: String,
    },
    /// A waited element is never signalled, or counts disagree.
    Count {
        /// Event name.
        event: String,
        /// Explanation.
        message: String,
    },
    /// The task graph has a cycle.
    Cycle {
        /// Tasks on the cycle, described.
        tasks: Vec<String>,
    },
    /// Two tasks access overlapping tensor boxes, one writing, unordered by events.
    Race {
        /// The race, described ([`crate::race::Race`]).
        message: String,
    },
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveError::Rank { tensor, expected, got } => {
                write!(f, "tensor `{tensor}` has {got} dimensions, but the megakernel declares {expected}")
            }
            ResolveError::Shape { tensor, dim, declared, expected, got, because } => {
                write!(f, "tensor `{tensor}` dimension {dim} is {got}, but the megakernel declares `{declared}`")?;
                if let Some(e) = expected {
                    write!(f, " = {e}")?;
                }
                if !because.is_empty() {
                    write!(f, " ({because})")?;
                }
                Ok(())
            }
            ResolveError::Dim { dim, message } => write!(f, "dim `{dim}`: {message}"),
            ResolveError::OutOfBounds { task, event, message } => {
                write!(f, "task {task}: access to event `{event}` out of bounds: {message}")
            }
            ResolveError::Count { event, message } => write!(f, "event `{event}`: {message}"),
            ResolveError::Cycle { tasks } => {
                write!(f, "the task graph has a cycle: {}", tasks.join(" -> "))
            }
            ResolveError::Race { message } => f.write_str(message),
        }
    }
}

impl std::error::Error for ResolveError {}

/// What resolution needs to know about the tensors passed at launch.
pub trait LaunchTensors {
    /// The shape of tensor parameter `t`.
    fn shape(&self, t: u16) -> Vec<i64>;
    /// The contents of integer tensor parameter `t` (read only for tensors used as
    /// data-dependent indices or dynamic counts), row-major.
    fn read_integers(&self, t: u16) -> Vec<i64>;
}

/// A concrete task graph: dims, tasks, event elements and the maps between them.
#[derive(Clone, Debug)]
pub struct Resolved<'g> {
    /// The description this was resolved from.
    pub spec: &'g GraphSpec,
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
    analysis: bool,
}

/// A violated count rule, found at one element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountProblem {
    /// The event.
    pub event: u16,
    /// The first element found in violation.
    pub element: u32,
    /// What is wrong.
    pub kind: CountProblemKind,
}

/// What is wrong with an element's count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CountProblemKind {
    /// Waited on by `consumer`, signalled by no task.
    NeverSignalled {
        /// A task that waits on it.
        consumer: TaskId,
    },
    /// An explicit count disagrees with the signals.
    FixedMismatch {
        /// Signals received per launch.
        signals: u32,
        /// The explicit count.
        count: i64,
    },
    /// Another waited element of the same event receives a different number of signals.
    NotUniform {
        /// Signals received by this element.
        signals: u32,
        /// The other element.
        other: u32,
        /// Signals received by the other element.
        other_signals: u32,
    },
}

impl<'g> Resolved<'g> {
    /// Resolves `spec` for the tensors of one launch.
    pub fn new(spec: &'g GraphSpec, tensors: &dyn LaunchTensors) -> Result<Self, ResolveError> {
        let shapes: Vec<Vec<i64>> = (0..spec.tensors.len() as u16).map(|t| tensors.shape(t)).collect();
        let dims = resolve_dims(spec, &shapes)?;
        let mut index_data = vec![None; spec.tensors.len()];
        for t in data_tensors(spec) {
            index_data[t as usize] = Some(tensors.read_integers(t));
        }

        let mut r = Self::layout(spec, dims, shapes, index_data);
        r.build_maps()?;
        if let Some(p) = r.count_problems().first() {
            return Err(r.count_error(p));
        }
        r.order = r.topological_order()?;
        if let Some(race) = crate::race::find(&r).first() {
            return Err(ResolveError::Race { message: race.to_string() });
        }
        Ok(r)
    }

    fn layout(spec: &'g GraphSpec, dims: Vec<i64>, shapes: Vec<Vec<i64>>, index_data: Vec<Option<Vec<i64>>>) -> Self {
        let mut groups = Vec::new();
        let mut first = 0u32;
        for g in spec.groups.iter() {
            let domain: Vec<i64> = g.domain.iter().map(|e| e.eval(&[], &dims)).collect();
            let len = domain.iter().map(|&d| d.max(0)).product::<i64>() as u32;
            groups.push(GroupLayout { first, domain, len });
            first += len;
        }
        let mut events = Vec::new();
        let mut offset = 0u32;
        for e in spec.events.iter() {
            let shape: Vec<i64> = e.shape.iter().map(|x| x.eval(&[], &dims)).collect();
            let len = shape.iter().map(|&d| d.max(0)).product::<i64>() as u32;
            events.push(EventLayout { offset, shape, len });
            offset += len;
        }
        Resolved {
            analysis: false,
            spec,
            dims,
            shapes,
            groups,
            events,
            n_tasks: first,
            n_elements: offset,
            target: Vec::new(),
            signals: Vec::new(),
            waits: Csr::default(),
            consumers: Csr::default(),
            producers: Csr::default(),
            order: Vec::new(),
            index_data,
        }
    }

    /// Resolves for compile-time analysis: data-dependent accesses are left out, dynamic
    /// counts are not read, and neither count rules nor cycles are errors (the caller
    /// inspects [`Resolved::count_problems`] and [`Resolved::topological_order`]).
    pub fn for_analysis(spec: &'g GraphSpec, shapes: Vec<Vec<i64>>) -> Result<Self, ResolveError> {
        let dims = resolve_dims(spec, &shapes)?;
        let mut r = Self::layout(spec, dims, shapes, vec![None; spec.tensors.len()]);
        r.analysis = true;
        r.build_maps()?;
        Ok(r)
    }

    /// The group a task belongs to.
    pub fn group_of(&self, task: TaskId) -> usize {
        self.groups.partition_point(|g| g.first + g.len <= task)
    }

    /// The tile indices of a task within its group.
    pub fn vars_of(&self, task: TaskId) -> (usize, Vec<i64>) {
        let g = self.group_of(task);
        let layout = &self.groups[g];
        let mut rest = (task - layout.first) as i64;
        let mut vars = vec![0; layout.domain.len()];
        for k in (0..vars.len()).rev() {
            vars[k] = rest % layout.domain[k];
            rest /= layout.domain[k];
        }
        (g, vars)
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
        let layout = &self.events[e];
        let mut rest = (element - layout.offset) as i64;
        let mut coords = vec![0; layout.shape.len()];
        for k in (0..coords.len()).rev() {
            coords[k] = rest % layout.shape[k];
            rest /= layout.shape[k];
        }
        (e, coords)
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
        let layout = &self.events[access.event as usize];
        let mut ranges = Vec::with_capacity(access.index.len());
        for (d, ix) in access.index.iter().enumerate() {
            let extent = layout.shape[d];
            let (lo, hi) = match ix {
                Index::At(a) => {
                    let v = a.eval(vars, &self.dims);
                    (v, v + 1)
                }
                Index::Range { start, end } => (start.eval(vars, &self.dims), end.eval(vars, &self.dims)),
                Index::All => (0, extent),
                Index::Data { tensor, at } => {
                    let v = self.read_index(*tensor, at, vars)?;
                    (v, v + 1)
                }
            };
            if lo < 0 || hi > extent || (lo >= hi && !matches!(ix, Index::Range { .. })) {
                return Err(format!("coordinate {d} spans {lo}..{hi}, outside 0..{extent}"));
            }
            ranges.push((lo, hi));
        }
        // row-major walk over the box
        let mut cur: Vec<i64> = ranges.iter().map(|r| r.0).collect();
        if ranges.iter().any(|r| r.0 >= r.1) {
            return Ok(());
        }
        loop {
            let flat = cur.iter().zip(&layout.shape).fold(0i64, |acc, (&c, &s)| acc * s + c);
            out.push(layout.offset + flat as u32);
            let mut k = cur.len();
            loop {
                if k == 0 {
                    return Ok(());
                }
                k -= 1;
                cur[k] += 1;
                if cur[k] < ranges[k].1 {
                    break;
                }
                cur[k] = ranges[k].0;
            }
            if cur.is_empty() {
                return Ok(());
            }
        }
    }

    fn read_index(&self, tensor: u16, at: &[Affine], vars: &[i64]) -> Result<i64, String> {
        let shape = &self.shapes[tensor as usize];
        let data = self.index_data[tensor as usize].as_ref().ok_or("index tensor not read")?;
        let mut flat = 0i64;
        for (d, a) in at.iter().enumerate() {
            let v = a.eval(vars, &self.dims);
            if v < 0 || v >= shape[d] {
                return Err(format!(
                    "index tensor `{}` read at coordinate {d} = {v}, outside 0..{}",
                    self.spec.tensors[tensor as usize].name, shape[d]
                ));
            }
            flat = flat * shape[d] + v;
        }
        Ok(data[flat as usize])
    }

    fn for_each_task(
        &self,
        mut f: impl FnMut(TaskId, usize, &[i64]) -> Result<(), ResolveError>,
    ) -> Result<(), ResolveError> {
        for task in 0..self.n_tasks {
            let (g, vars) = self.vars_of(task);
            f(task, g, &vars)?;
        }
        Ok(())
    }

    fn build_maps(&mut self) -> Result<(), ResolveError> {
        let n = self.n_elements as usize;
        let mut signals = vec![0u32; n];
        let mut producers: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut consumers: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut waits: Vec<Vec<u32>> = Vec::with_capacity(self.n_tasks as usize);
        let mut buf = Vec::new();
        let spec = self.spec;
        self.for_each_task(|task, g, vars| {
            let group = &spec.groups[g];
            for acc in group.signals.iter() {
                if self.analysis && acc.is_data_dependent() {
                    continue;
                }
                buf.clear();
                self.access_elements(acc, vars, &mut buf).map_err(|m| self.oob(task, acc, m))?;
                for &el in &buf {
                    signals[el as usize] += 1;
                    let p = &mut producers[el as usize];
                    if p.last() != Some(&task) {
                        p.push(task);
                    }
                }
            }
            let mut mine = Vec::new();
            for acc in group.waits.iter() {
                if self.analysis && acc.is_data_dependent() {
                    continue;
                }
                buf.clear();
                self.access_elements(acc, vars, &mut buf).map_err(|m| self.oob(task, acc, m))?;
                mine.extend_from_slice(&buf);
            }
            mine.sort_unstable();
            mine.dedup();
            for &el in &mine {
                consumers[el as usize].push(task);
            }
            waits.push(mine);
            Ok(())
        })?;
        self.target = self.targets(&signals, &consumers)?;
        self.signals = signals;
        self.waits = Csr::from_rows(&waits);
        self.consumers = Csr::from_rows(&consumers);
        self.producers = Csr::from_rows(&producers);
        Ok(())
    }

    fn oob(&self, task: TaskId, acc: &EventAccess, message: String) -> ResolveError {
        ResolveError::OutOfBounds {
            task: self.describe_task(task),
            event: self.spec.events[acc.event as usize].name.to_string(),
            message,
        }
    }

    /// Per-element completion targets, with the count rules checked on the real sizes.
    fn targets(&self, signals: &[u32], consumers: &[Vec<u32>]) -> Result<Vec<u32>, ResolveError> {
        let mut target = vec![0u32; signals.len()];
        for (e, ev) in self.spec.events.iter().enumerate() {
            let layout = &self.events[e];
            let range = layout.offset as usize..(layout.offset + layout.len) as usize;
            match &ev.count {
                Count::Dynamic { tensor } if !self.analysis => {
                    let err = |message: String| ResolveError::Count { event: ev.name.to_string(), message };
                    let data = self.index_data[*tensor as usize].as_ref().expect("count tensor read");
                    if data.len() != layout.len as usize {
                        return Err(err(format!(
                            "the count tensor `{}` has {} elements, the event has {}",
                            self.spec.tensors[*tensor as usize].name,
                            data.len(),
                            layout.len
                        )));
                    }
                    for (k, el) in range.enumerate() {
                        let c = data[k];
                        if !(0..=u32::MAX as i64 / 4).contains(&c) {
                            return Err(err(format!(
                                "run-time count {c} of {} is invalid",
                                self.describe_element(el as u32)
                            )));
                        }
                        target[el] = c as u32;
                    }
                }
                _ => {
                    for el in range {
                        if !consumers[el].is_empty() {
                            target[el] = signals[el];
                        }
                    }
                }
            }
        }
        Ok(target)
    }

    /// The count rules over the resolved sizes: every waited element of a non-dynamic
    /// event is signalled, its signal count is uniform over the event's waited elements,
    /// and equals an explicit count.
    pub fn count_problems(&self) -> Vec<CountProblem> {
        let mut out = Vec::new();
        for (e, ev) in self.spec.events.iter().enumerate() {
            if matches!(ev.count, Count::Dynamic { .. }) {
                continue;
            }
            let fixed = match &ev.count {
                Count::Fixed(a) => Some(a.eval(&[], &self.dims)),
                _ => None,
            };
            let layout = &self.events[e];
            let mut uniform: Option<(u32, u32)> = None;
            for el in layout.offset..layout.offset + layout.len {
                let Some(&consumer) = self.consumers.row(el as usize).first() else {
                    continue;
                };
                let s = self.signals[el as usize];
                let kind = if s == 0 {
                    Some(CountProblemKind::NeverSignalled { consumer })
                } else if fixed.is_some_and(|f| f != s as i64) {
                    Some(CountProblemKind::FixedMismatch { signals: s, count: fixed.unwrap() })
                } else {
                    match uniform {
                        None => {
                            uniform = Some((s, el));
                            None
                        }
                        Some((u, other)) if u != s => {
                            Some(CountProblemKind::NotUniform { signals: s, other, other_signals: u })
                        }
                        _ => None,
                    }
                };
                if let Some(kind) = kind {
                    out.push(CountProblem { event: e as u16, element: el, kind });
                    break;
                }
            }
        }
        out
    }

    /// Formats a count problem as the launch-time error.
    pub fn count_error(&self, p: &CountProblem) -> ResolveError {
        let name = self.describe_element(p.element);
        let message = match p.kind {
            CountProblemKind::NeverSignalled { consumer } => {
                format!("{name} is waited on by {} but no task signals it", self.describe_task(consumer))
            }
            CountProblemKind::FixedMismatch { signals, count } => {
                format!("{name} receives {signals} signals but its count is {count}")
            }
            CountProblemKind::NotUniform { signals, other, other_signals } => format!(
                "trigger count is not uniform: {} receives {other_signals} signals, {name} receives {signals}",
                self.describe_element(other)
            ),
        };
        ResolveError::Count { event: self.spec.events[p.event as usize].name.to_string(), message }
    }

    /// Tasks a task depends on (the producers of the elements it waits on).
    pub fn dependencies(&self, task: TaskId) -> impl Iterator<Item = TaskId> + '_ {
        self.waits.row(task as usize).iter().flat_map(|&el| self.producers.row(el as usize).iter().copied())
    }

    /// One topological order of the tasks by Kahn's algorithm, smallest ready task
    /// first; on a cycle, an error naming the tasks on one.
    pub fn topological_order(&self) -> Result<Vec<TaskId>, ResolveError> {
        let n = self.n_tasks as usize;
        let mut indegree = vec![0u32; n];
        let mut succ: Vec<Vec<u32>> = vec![Vec::new(); n];
        for t in 0..n as u32 {
            let mut deps: Vec<u32> = self.dependencies(t).collect();
            deps.sort_unstable();
            deps.dedup();
            for d in deps {
                indegree[t as usize] += 1;
                succ[d as usize].push(t);
            }
        }
        let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<u32>> =
            (0..n as u32).filter(|&t| indegree[t as usize] == 0).map(std::cmp::Reverse).collect();
        let mut order = Vec::with_capacity(n);
        while let Some(std::cmp::Reverse(t)) = ready.pop() {
            order.push(t);
            for &s in &succ[t as usize] {
                indegree[s as usize] -= 1;
                if indegree[s as usize] == 0 {
                    ready.push(std::cmp::Reverse(s));
                }
            }
        }
        if order.len() == n {
            return Ok(order);
        }
        // walk back along unfinished dependencies until a task repeats
        let start = (0..n as u32).find(|&t| indegree[t as usize] > 0).expect("a blocked task");
        let mut path = vec![start];
        loop {
            let cur = *path.last().unwrap();
            let next = self.dependencies(cur).find(|&d| indegree[d as usize] > 0).expect("a blocked dependency");
            if let Some(pos) = path.iter().position(|&p| p == next) {
                let mut cycle: Vec<String> = path[pos..].iter().rev().map(|&t| self.describe_task(t)).collect();
                cycle.push(self.describe_task(next));
                return Err(ResolveError::Cycle { tasks: cycle });
            }
            path.push(next);
        }
    }
}

/// Tensors whose contents resolution reads: data-dependent indices and dynamic counts.
pub fn data_tensors(spec: &GraphSpec) -> Vec<u16> {
    let mut out = Vec::new();
    for e in spec.events.iter() {
        if let Count::Dynamic { tensor } = e.count {
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
    out.sort_unstable();
    out.dedup();
    out
}

/// Resolves every dim from the tensor shapes: static dims take their value; a symbolic
/// dim is solved from the first extent of the form `c*D + k` whose other dims are known.
pub fn resolve_dims(spec: &GraphSpec, shapes: &[Vec<i64>]) -> Result<Vec<i64>, ResolveError> {
    let mut dims: Vec<Option<i64>> = spec
        .dims
        .iter()
        .map(|d| match d.kind {
            DimKind::Static(v) => Some(v),
            DimKind::Symbolic { .. } => None,
        })
        .collect();
    let mut source: Vec<String> = vec![String::new(); dims.len()];
    for (t, ts) in spec.tensors.iter().enumerate() {
        if shapes[t].len() != ts.shape.len() {
            return Err(ResolveError::Rank {
                tensor: ts.name.to_string(),
                expected: ts.shape.len(),
                got: shapes[t].len(),
            });
        }
    }
    let mut progress = true;
    while progress {
        progress = false;
        for (t, ts) in spec.tensors.iter().enumerate() {
            for (k, extent) in ts.shape.iter().enumerate() {
                let unknown: Vec<_> = extent
                    .terms
                    .iter()
                    .filter_map(|&(term, c)| match term {
                        crate::Term::Dim(d) if dims[d as usize].is_none() => Some((d, c)),
                        _ => None,
                    })
                    .collect();
                let [(d, c)] = unknown[..] else { continue };
                let known: Vec<i64> = dims.iter().map(|v| v.unwrap_or(0)).collect();
                let rest = extent.eval(&[], &known);
                let got = shapes[t][k];
                let name = &spec.dims[d as usize].name;
                if (got - rest) % c != 0 || (got - rest) / c < 1 {
                    let dn: Vec<&str> = spec.dims.iter().map(|d| &*d.name).collect();
                    return Err(ResolveError::Shape {
                        tensor: ts.name.to_string(),
                        dim: k,
                        declared: extent.display(&[], &dn).to_string(),
                        expected: None,
                        got,
                        because: format!("no positive whole value of `{name}` gives {got}"),
                    });
                }
                dims[d as usize] = Some((got - rest) / c);
                source[d as usize] = format!("`{name}` = {} from `{}` dimension {k}", (got - rest) / c, ts.name);
                progress = true;
            }
        }
    }
    let mut out = Vec::with_capacity(dims.len());
    for (d, v) in dims.iter().enumerate() {
        let spec_d = &spec.dims[d];
        let Some(v) = *v else {
            return Err(ResolveError::Dim {
                dim: spec_d.name.to_string(),
                message: "no tensor shape determines it; use it in a parameter's shape as `c*D + k`".into(),
            });
        };
        if let DimKind::Symbolic { max: Some(m) } = spec_d.kind
            && v > m
        {
            return Err(ResolveError::Dim {
                dim: spec_d.name.to_string(),
                message: format!("resolved to {v} ({}), above its declared bound {m}", source[d]),
            });
        }
        out.push(v);
    }
    let dn: Vec<&str> = spec.dims.iter().map(|d| &*d.name).collect();
    for (t, ts) in spec.tensors.iter().enumerate() {
        for (k, extent) in ts.shape.iter().enumerate() {
            let want = extent.eval(&[], &out);
            if want != shapes[t][k] {
                let because: Vec<String> = extent
                    .terms
                    .iter()
                    .filter_map(|&(term, _)| match term {
                        crate::Term::Dim(d) if !source[d as usize].is_empty() => Some(source[d as usize].clone()),
                        _ => None,
                    })
                    .collect();
                return Err(ResolveError::Shape {
                    tensor: ts.name.to_string(),
                    dim: k,
                    declared: extent.display(&[], &dn).to_string(),
                    expected: Some(want),
                    got: shapes[t][k],
                    because: because.join(", "),
                });
            }
        }
    }
    Ok(out)
}
