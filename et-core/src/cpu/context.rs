//! What a CPU task body sees: its tile indices, its tensors, and wait/signal.

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use et_graph::TaskId;
use et_graph::schedule::SplitMix64;

use super::exec::{Aborted, Execution};
use crate::dtype::Element;
use crate::tile::{InTensor, OutTensor};

/// The CPU implementation of one tile group: runs one task (waits, ops, signals).
pub type CpuTaskFn = fn(&TaskContext<'_>);

/// The context of one running task on the CPU backend. Generated task functions receive
/// it; `wait!`/`signal!` lower to [`TaskContext::wait`]/[`TaskContext::signal`].
pub struct TaskContext<'a> {
    pub(crate) exec: &'a Execution<'a>,
    pub(crate) task: TaskId,
    pub(crate) group: usize,
    pub(crate) vars: Vec<i64>,
    pub(crate) worker: usize,
    pub(crate) rng: RefCell<Option<SplitMix64>>,
}

impl<'a> TaskContext<'a> {
    /// Tile index `k` of this task (`i` of `tile!(g[i, j] in ..)` is index 0).
    pub fn var(&self, k: usize) -> i64 {
        self.vars[k]
    }

    /// Value of dim `k` (in the megakernel's dim order).
    pub fn dim(&self, k: usize) -> i64 {
        self.exec.resolved.dims[k]
    }

    /// Tensor parameter `t`, read-only.
    pub fn input<T: Element>(&self, t: usize) -> InTensor<'a, T> {
        // SAFETY: the argument outlives the launch; the event protocol orders this
        // task's reads after the writes it waits for (what chaos mode tests).
        unsafe { InTensor::bind(&self.exec.args[t]) }
    }

    /// Tensor parameter `t`, writable.
    pub fn output<T: Element>(&self, t: usize) -> OutTensor<'a, T> {
        // SAFETY: as `input`; the argument was passed as `&mut`, so nothing outside the
        // launch aliases it.
        unsafe { OutTensor::bind(&self.exec.args[t]) }
    }

    /// Blocks until every element of wait number `access` of this task's group is
    /// complete. Unwinds (caught by the worker) when the launch is aborted.
    pub fn wait(&self, access: usize) {
        self.chaos_delay();
        let exec = self.exec;
        let spec = &exec.resolved.spec.groups[self.group].waits[access];
        let mut elements = Vec::new();
        exec.resolved.access_elements(spec, &self.vars, &mut elements).expect("access resolved at launch");
        for el in elements {
            self.wait_element(el);
        }
    }

    fn wait_element(&self, el: u32) {
        let exec = self.exec;
        let counter = &exec.counters[el as usize];
        let target = exec.resolved.target[el as usize];
        for _ in 0..64 {
            if counter.load(Ordering::Acquire) >= target {
                return;
            }
            std::hint::spin_loop();
        }
        if let Some(report) = exec.monitor.block(self.worker, self.task, el, &exec.resolved, &exec.counters) {
            exec.fail_deadlock(report);
        }
        let mut last_check = Instant::now();
        loop {
            if counter.load(Ordering::Acquire) >= target {
                exec.monitor.unblock(self.worker);
                return;
            }
            if exec.aborted() {
                exec.monitor.unblock(self.worker);
                std::panic::resume_unwind(Box::new(Aborted));
            }
            if last_check.elapsed() > Duration::from_millis(2) {
                last_check = Instant::now();
                if let Some(report) = exec.monitor.recheck(&exec.resolved, &exec.counters) {
                    exec.fail_deadlock(report);
                }
            }
            std::thread::yield_now();
        }
    }

    /// Signals every element of signal number `access` of this task's group (release).
    pub fn signal(&self, access: usize) {
        self.chaos_delay();
        let exec = self.exec;
        let spec = &exec.resolved.spec.groups[self.group].signals[access];
        let mut elements = Vec::new();
        exec.resolved.access_elements(spec, &self.vars, &mut elements).expect("access resolved at launch");
        for el in elements {
            let now = exec.counters[el as usize].fetch_add(1, Ordering::AcqRel) + 1;
            if now == exec.resolved.target[el as usize] {
                exec.element_complete(el);
            }
        }
    }

    /// Called by generated code after each tile op: a chaos point.
    pub fn after_op(&self) {
        self.chaos_delay();
    }

    pub(crate) fn chaos_delay(&self) {
        let mut rng = self.rng.borrow_mut();
        let Some(rng) = rng.as_mut() else { return };
        match rng.below(8) {
            0 => std::thread::sleep(Duration::from_micros(rng.below(200) as u64)),
            1 | 2 => std::thread::yield_now(),
            _ => {}
        }
    }
}
