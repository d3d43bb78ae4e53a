//! Running a resolved graph on worker threads, under either schedule.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use et_graph::observed::{Observed, TaskRun};
use et_graph::schedule::{DynamicPlan, SplitMix64, StaticSchedule, random_order};
use et_graph::{Resolved, ScheduleKind, TaskId};

use super::context::{CpuTaskFn, TaskContext};
use super::monitor::Monitor;
use crate::backend::{KernelEntry, LaunchOptions, LaunchReport};
use crate::error::{BlockedWait, Error, Result};
use crate::kernel::Kernel;
use crate::raw::RawTensor;
use crate::trace::{TaskSpan, write_chrome_trace};

/// `ReadyQueue::pending` of a task found inactive by its condition.
const INACTIVE: u32 = u32::MAX;

/// Unwind payload that stops a task when the launch is aborted.
pub(crate) struct Aborted;

struct ReadyQueue {
    ready: VecDeque<TaskId>,
    pending: Vec<u32>,
    running: usize,
    done: u32,
}

/// Shared state of one launch.
pub(crate) struct Execution<'a> {
    pub(crate) kernel: &'a Kernel,
    tasks: &'a [CpuTaskFn],
    pub(crate) resolved: Resolved<'a>,
    pub(crate) args: &'a [RawTensor],
    pub(crate) options: &'a LaunchOptions,
    pub(crate) counters: Vec<AtomicU32>,
    pub(crate) monitor: Monitor,
    queue: Option<(Mutex<ReadyQueue>, Condvar)>,
    abort: AtomicBool,
    failure: Mutex<Option<Error>>,
    spans: Mutex<Vec<TaskSpan>>,
    /// The runs of an observed launch (`LaunchOptions::observe`), by task.
    observed: Option<Mutex<Vec<Option<TaskRun>>>>,
    start: Instant,
}

impl Execution<'_> {
    /// Whether this launch logs its tasks' touches and signals.
    pub(crate) fn observing(&self) -> bool {
        self.observed.is_some()
    }

    pub(crate) fn aborted(&self) -> bool {
        self.abort.load(Ordering::Acquire)
    }

    pub(crate) fn fail(&self, e: Error) {
        let mut f = self.failure.lock().unwrap();
        if f.is_none() {
            *f = Some(e);
        }
        self.abort.store(true, Ordering::Release);
        if let Some((_, cv)) = &self.queue {
            cv.notify_all();
        }
    }

    pub(crate) fn fail_deadlock(&self, blocked: Vec<BlockedWait>) -> ! {
        self.fail(Error::Deadlock { kernel: self.kernel.name().to_string(), blocked });
        std::panic::resume_unwind(Box::new(Aborted))
    }

    /// Dynamic schedule: an element just completed; release its consumers.
    pub(crate) fn element_complete(&self, el: u32) {
        let Some((q, cv)) = &self.queue else { return };
        let mut q = q.lock().unwrap();
        let mut pushed = false;
        for &c in self.resolved.consumers.row(el as usize) {
            if q.pending[c as usize] == INACTIVE {
                continue;
            }
            // a task with a condition is judged when its guard completes: an inactive one
            // is never queued and counts as done
            if self.resolved.guard_element(c) == Some(el) {
                let (g, vars) = self.resolved.vars_of(c);
                if !super::context::condition_holds(self, g, &vars) {
                    q.pending[c as usize] = INACTIVE;
                    q.done += 1;
                    pushed = true;
                    continue;
                }
            }
            q.pending[c as usize] -= 1;
            if q.pending[c as usize] == 0 {
                q.ready.push_back(c);
                pushed = true;
            }
        }
        if pushed {
            cv.notify_all();
        }
    }

    /// Runs one task; returns false when the launch must stop.
    fn run_task(&self, task: TaskId, worker: usize, rng: &mut Option<SplitMix64>) -> bool {
        let (group, vars) = self.resolved.vars_of(task);
        let ctx = TaskContext { exec: self, task, group, vars, worker, rng: RefCell::new(rng.take()) };
        ctx.chaos_delay();
        if self.observing() {
            super::observe::begin(self.resolved.spec.groups[group].signals.len());
        }
        let t0 = self.start.elapsed();
        let result = catch_unwind(AssertUnwindSafe(|| (self.tasks[group])(&ctx)));
        let t1 = self.start.elapsed();
        if let (Some(runs), Some(log)) = (&self.observed, super::observe::end()) {
            runs.lock().unwrap()[task as usize] = Some(log.into_run(self.args));
        }
        *rng = ctx.rng.into_inner();
        match result {
            Ok(()) => {
                if self.options.trace.is_some() {
                    self.spans.lock().unwrap().push(TaskSpan {
                        task: self.resolved.describe_task(task),
                        track: worker as u32,
                        start_us: t0.as_secs_f64() * 1e6,
                        ready_us: t0.as_secs_f64() * 1e6,
                        end_us: t1.as_secs_f64() * 1e6,
                    });
                }
                !self.aborted()
            }
            Err(payload) if payload.is::<Aborted>() => false,
            Err(payload) => {
                let message = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "(non-string panic)".into());
                drop_payload(payload);
                self.fail(Error::TaskPanic { task: self.resolved.describe_task(task), message });
                false
            }
        }
    }

    fn static_worker(&self, worker: usize, queue: &[TaskId], mut rng: Option<SplitMix64>) {
        for &task in queue {
            if self.aborted() || !self.run_task(task, worker, &mut rng) {
                return;
            }
        }
        if let Some(report) = self.monitor.retire(&self.resolved, &self.counters) {
            self.fail(Error::Deadlock { kernel: self.kernel.name().to_string(), blocked: report });
        }
    }

    fn dynamic_worker(&self, worker: usize, mut rng: Option<SplitMix64>) {
        let (q, cv) = self.queue.as_ref().expect("dynamic queue");
        loop {
            let task = {
                let mut g = q.lock().unwrap();
                loop {
                    if self.aborted() || g.done == self.resolved.n_tasks {
                        return;
                    }
                    if !g.ready.is_empty() {
                        let k = rng.as_mut().map_or(0, |r| r.below(g.ready.len()));
                        let t = g.ready.remove(k).unwrap();
                        g.running += 1;
                        break t;
                    }
                    if g.running == 0 {
                        let blocked = self.never_ready(&g);
                        drop(g);
                        self.fail(Error::Deadlock { kernel: self.kernel.name().to_string(), blocked });
                        return;
                    }
                    g = cv.wait_timeout(g, Duration::from_millis(5)).unwrap().0;
                }
            };
            let ok = self.run_task(task, worker, &mut rng);
            let mut g = q.lock().unwrap();
            g.running -= 1;
            g.done += 1;
            cv.notify_all();
            if !ok {
                return;
            }
        }
    }

    /// Tasks that can never become ready, with the first incomplete element of each.
    fn never_ready(&self, q: &ReadyQueue) -> Vec<BlockedWait> {
        let r = &self.resolved;
        let mut out = Vec::new();
        for t in 0..r.n_tasks {
            if q.pending[t as usize] == 0 || q.pending[t as usize] == INACTIVE {
                continue;
            }
            if let Some(&el) = r
                .waits
                .row(t as usize)
                .iter()
                .find(|&&el| self.counters[el as usize].load(Ordering::Acquire) < r.target[el as usize])
            {
                out.push(BlockedWait {
                    task: r.describe_task(t),
                    element: r.describe_element(el),
                    value: self.counters[el as usize].load(Ordering::Acquire),
                    expected: r.target[el as usize],
                });
            }
        }
        out
    }
}

/// Whether a launch is observed: as asked, else exactly where the race rule at launch
/// cannot see the real signal targets.
fn observes(kernel: &Kernel, options: &LaunchOptions) -> bool {
    options.observe.unwrap_or_else(|| kernel.graph.routes_at_run_time())
}

pub(crate) fn run<'a>(
    entry: &KernelEntry<'a>,
    resolved: Resolved<'a>,
    args: &[RawTensor],
    options: &LaunchOptions,
    workers: usize,
) -> Result<LaunchReport> {
    let kernel = entry.kernel;
    let schedule = options.schedule.unwrap_or(kernel.graph.schedule);
    let mut chaos = options.chaos.map(SplitMix64::new);
    let queues = match schedule {
        ScheduleKind::Static => {
            let s = match chaos.as_mut() {
                Some(rng) => {
                    // a random topological order, each task on a random worker: still
                    // slices of one order
                    let order = random_order(&resolved, rng);
                    let mut queues = vec![Vec::new(); workers];
                    for t in order {
                        queues[rng.below(workers)].push(t);
                    }
                    StaticSchedule { queues }
                }
                None => StaticSchedule::build(&resolved, workers, options.placement),
            };
            debug_assert!(s.validate(&resolved).is_ok());
            Some(s.queues)
        }
        ScheduleKind::Dynamic => None,
    };
    let queue = (schedule == ScheduleKind::Dynamic).then(|| {
        let plan = DynamicPlan::new(&resolved);
        let ready = plan.seeds.iter().copied().collect();
        (Mutex::new(ReadyQueue { ready, pending: plan.pending, running: 0, done: 0 }), Condvar::new())
    });
    let counters = (0..resolved.n_elements).map(|_| AtomicU32::new(0)).collect();
    let tasks = resolved.n_tasks;
    let exec = Execution {
        kernel,
        tasks: entry.cpu_tasks,
        resolved,
        args,
        options,
        counters,
        monitor: Monitor::new(workers),
        queue,
        abort: AtomicBool::new(false),
        failure: Mutex::new(None),
        spans: Mutex::new(Vec::new()),
        observed: observes(kernel, options).then(|| Mutex::new(vec![None; tasks as usize])),
        start: Instant::now(),
    };
    let seeds: Vec<Option<SplitMix64>> =
        (0..workers).map(|w| chaos.as_mut().map(|r| SplitMix64::new(r.next_u64() ^ w as u64))).collect();
    std::thread::scope(|s| {
        for (w, rng) in seeds.into_iter().enumerate() {
            let exec = &exec;
            let queue = queues.as_ref().map(|q| &q[w][..]);
            let spawned =
                std::thread::Builder::new().name(format!("et-cpu-{w}")).spawn_scoped(s, move || match queue {
                    Some(q) => exec.static_worker(w, q, rng),
                    None => exec.dynamic_worker(w, rng),
                });
            if let Err(e) = spawned {
                // the workers already running see the abort at their next wait
                exec.fail(Error::Unavailable(format!("starting CPU worker {w} of {workers}: {e}")));
                break;
            }
        }
    });
    let elapsed = exec.start.elapsed();
    if let Some(e) = exec.failure.lock().unwrap().take() {
        return Err(e);
    }
    if let Some(runs) = exec.observed {
        let observed = Observed { tasks: runs.into_inner().unwrap() };
        if let Some(race) = et_graph::race::find_observed(&exec.resolved, &observed).first() {
            let error = et_graph::ResolveError::Race { message: race.to_string() };
            return Err(Error::resolve(kernel.name())(error));
        }
    }
    if let Some(path) = &options.trace {
        let mut spans = std::mem::take(&mut *exec.spans.lock().unwrap());
        spans.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
        write_chrome_trace(path, kernel.name(), "worker", &spans)?;
    }
    Ok(LaunchReport {
        backend: format!("cpu ({workers} workers{})", if options.chaos.is_some() { ", chaos" } else { "" }),
        schedule,
        tasks,
        workers,
        elapsed,
        completed: true,
        compiled: false,
        host_prepare: Duration::ZERO,
        host_module: Duration::ZERO,
        host_graph: Duration::ZERO,
        host_submit: Duration::ZERO,
    })
}

/// Drops a task's panic payload where a panic in its `Drop` cannot unwind out of the
/// worker (a scoped thread's panic would end the whole launch in a panic): such a second
/// payload is leaked.
fn drop_payload(payload: Box<dyn std::any::Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}
