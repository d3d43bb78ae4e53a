//! Schedules: static per-worker queues cut from one topological order, the starting
//! state of the dynamic ready queue, and the device's early-dispatch batches.
//!
//! Why slices of one order: every queue lists its tasks in the order they appear in one
//! global topological order, so the earliest unfinished task of that order is always at
//! the head of its queue with all its producers finished. In-order execution of the
//! queues therefore always makes progress: no static schedule built here can deadlock a
//! correct graph.

use crate::resolve::order::{ReadySet, kahn};
use crate::resolve::{Resolved, TaskId};

/// Per-worker (per-SM) task queues.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaticSchedule {
    /// `queues[w]` is executed in order by worker `w`.
    pub queues: Vec<Vec<TaskId>>,
}

/// How tasks are placed on workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Placement {
    /// Task `k` of the order goes to worker `k % workers`.
    RoundRobin,
    /// List scheduling: each task goes to the worker where it can start earliest given
    /// per-group costs and a fixed cost per cross-worker dependency hop.
    #[default]
    CostAware,
}

impl StaticSchedule {
    /// Builds queues from the resolved graph's deterministic topological order.
    pub fn build(r: &Resolved<'_>, workers: usize, placement: Placement) -> StaticSchedule {
        Self::from_order(r, &r.order, workers, placement)
    }

    /// Builds queues from a given topological order.
    pub fn from_order(r: &Resolved<'_>, order: &[TaskId], workers: usize, placement: Placement) -> StaticSchedule {
        let workers = workers.max(1);
        let mut queues = vec![Vec::new(); workers];
        match placement {
            Placement::RoundRobin => {
                for (k, &t) in order.iter().enumerate() {
                    queues[k % workers].push(t);
                }
            }
            Placement::CostAware => {
                // Costs in arbitrary units: one unit of group cost is one task of cost 1,
                // and every dependency adds HOP (signal latency) wherever its producer ran.
                // Measured on the H200 (benches/RESULTS.md, runs 4 and 6), a same-SM hop
                // (1.13 us) is no cheaper than a cross-SM one (0.72 us), so the model
                // gives no discount for keeping a chain on one worker.
                const HOP: u64 = 1;
                let mut free = vec![0u64; workers];
                let mut finish = vec![0u64; r.n_tasks as usize];
                for &t in order {
                    let cost = r.spec.groups[r.group_of(t)].cost.max(1) as u64;
                    let ready = r.dependencies(t).map(|d| finish[d as usize] + HOP).max().unwrap_or(0);
                    let best = (0..workers).min_by_key(|&w| (ready.max(free[w]), free[w], w)).unwrap_or(0);
                    finish[t as usize] = ready.max(free[best]) + cost;
                    free[best] = finish[t as usize];
                    queues[best].push(t);
                }
            }
        }
        StaticSchedule { queues }
    }

    /// Checks the schedule's invariants: every task exactly once, and all queues
    /// subsequences of one topological order. Returns a description of the first violation.
    pub fn validate(&self, r: &Resolved<'_>) -> Result<(), String> {
        let n = r.n_tasks as usize;
        let mut pos = vec![(usize::MAX, 0usize); n];
        for (w, q) in self.queues.iter().enumerate() {
            for (k, &t) in q.iter().enumerate() {
                if t as usize >= n {
                    return Err(format!("queue {w} holds task {t}, but there are {n} tasks"));
                }
                if pos[t as usize].0 != usize::MAX {
                    return Err(format!("task {} is scheduled twice", r.describe_task(t)));
                }
                pos[t as usize] = (w, k);
            }
        }
        if let Some(t) = pos.iter().position(|p| p.0 == usize::MAX) {
            return Err(format!("task {} is not scheduled", r.describe_task(t as u32)));
        }
        // The queues are slices of one topological order iff the graph made of the
        // dependency edges plus the "next in my queue" edges is acyclic.
        let deps = (0..n as u32).flat_map(|t| r.dependencies(t).map(move |d| (d, t)));
        let next_in_queue = self.queues.iter().flat_map(|q| q.windows(2).map(|w| (w[0], w[1])));
        let seen = kahn(n, deps.chain(next_in_queue), Vec::new()).0.len();
        if seen == n { Ok(()) } else { Err("the queues are not slices of one topological order".into()) }
    }
}

/// The starting state of the dynamic ready queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DynamicPlan {
    /// Per task: waited elements not yet complete at the start (elements whose target is
    /// 0 are complete from the start).
    pub pending: Vec<u32>,
    /// Tasks that wait on nothing incomplete: the queue's seed, in task order.
    pub seeds: Vec<TaskId>,
}

impl DynamicPlan {
    /// Computes the seed and per-task pending counts.
    pub fn new(r: &Resolved<'_>) -> DynamicPlan {
        let pending: Vec<u32> = (0..r.n_tasks as usize)
            .map(|t| r.waits.row(t).iter().filter(|&&el| r.target[el as usize] > 0).count() as u32)
            .collect();
        let seeds = (0..r.n_tasks).filter(|&t| pending[t as usize] == 0).collect();
        DynamicPlan { pending, seeds }
    }
}

/// Levels of early dispatch one batch spans: a popped task pushes its single-producer
/// descendants this many levels deep (see [`EarlyBatches`]).
pub const EARLY_LEVELS: u32 = 4;

/// Early dispatch for the device's dynamic schedule.
///
/// A task whose waited elements are all signalled by one other task (its single producer:
/// a chain link, or one branch of a fan-out) is *early*: it is not pushed when its
/// elements complete but when its producer is taken by a CTA, and the CTA that takes it
/// waits on its events in place, as under the static schedule, so a dependency costs the
/// signal's latency and no queue round trip. Early tasks form a forest under their
/// producers; a task at depth `d` of it is pushed in the batch of its ancestor at depth
/// `levels * ((d - 1) / levels)`, the batch root, when that root is taken. Every batch lists
/// producers before consumers, so one task's producer is always taken (by another CTA)
/// before it, or lies earlier in the ring: no CTA can wait in place on a task behind itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EarlyBatches {
    /// Per task: whether it is early (pushed by its batch root, never by a completion).
    pub early: Vec<bool>,
    /// Per task: 1 + the index of the batch it pushes when taken, 0 when it has none.
    pub batch_of: Vec<u32>,
    /// Batch `b` is `items[offsets[b] .. offsets[b + 1]]`, each task after its producer.
    pub offsets: Vec<u32>,
    /// The early tasks of every batch, concatenated.
    pub items: Vec<TaskId>,
}

impl EarlyBatches {
    /// Finds the early tasks of `r` (tasks with pending waits in `plan` and exactly one
    /// producer task) and cuts their forest into batches `levels` deep (at least 1).
    /// Tasks of a group with a condition are never early, nor batch roots: they are
    /// queued only when their guard shows them active, so nothing may wait for them to
    /// be taken.
    pub fn new(r: &Resolved<'_>, plan: &DynamicPlan, levels: u32) -> EarlyBatches {
        let n = r.n_tasks as usize;
        let levels = levels.max(1);
        let mut producer = vec![u32::MAX; n];
        let mut depth = vec![0u32; n];
        // the order lists producers first, so a producer's depth is known before its consumers'
        for &t in &r.order {
            let t = t as usize;
            let conditional = |t: usize| r.spec.groups[r.group_of(t as TaskId)].condition.is_some();
            if plan.pending[t] == 0 || conditional(t) {
                continue;
            }
            let mut deps = r.dependencies(t as TaskId);
            let Some(p) = deps.next() else { continue };
            if deps.all(|d| d == p) && !conditional(p as usize) {
                producer[t] = p;
                depth[t] = depth[p as usize] + 1;
            }
        }
        let mut members: Vec<Vec<TaskId>> = vec![Vec::new(); n];
        for &t in &r.order {
            let d = depth[t as usize];
            if d == 0 {
                continue;
            }
            let mut root = producer[t as usize];
            for _ in 0..(d - 1) % levels {
                root = producer[root as usize];
            }
            members[root as usize].push(t);
        }
        let mut batch_of = vec![0u32; n];
        let mut offsets = vec![0u32];
        let mut items = Vec::new();
        for (root, m) in members.iter().enumerate().filter(|(_, m)| !m.is_empty()) {
            items.extend_from_slice(m);
            offsets.push(items.len() as u32);
            batch_of[root] = (offsets.len() - 1) as u32;
        }
        EarlyBatches { early: depth.iter().map(|&d| d > 0).collect(), batch_of, offsets, items }
    }
}

/// A small deterministic generator (SplitMix64) for chaos schedules and test inputs.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// Seeds the generator.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `[0, 1)`.
    pub fn unit_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// Takes a uniformly random ready task: the chaos policy for Kahn's algorithm.
struct RandomReady<'a> {
    ready: Vec<u32>,
    rng: &'a mut SplitMix64,
}

impl ReadySet for RandomReady<'_> {
    fn push(&mut self, node: u32) {
        self.ready.push(node);
    }
    fn pop(&mut self) -> Option<u32> {
        (!self.ready.is_empty()).then(|| self.ready.swap_remove(self.rng.below(self.ready.len())))
    }
}

/// A random topological order (Kahn's algorithm picking a random ready task), for chaos.
/// On a cyclic graph (never a [`Mode::Launch`](crate::resolve::Mode) resolution) it stops
/// short of the blocked tasks.
pub fn random_order(r: &Resolved<'_>, rng: &mut SplitMix64) -> Vec<TaskId> {
    let edges = (0..r.n_tasks).flat_map(|t| r.dependencies(t).map(move |d| (d, t)));
    kahn(r.n_tasks as usize, edges, RandomReady { ready: Vec::new(), rng }).0
}
