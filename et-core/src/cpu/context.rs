//! What a CPU task body sees: its tile indices, its tensors, and wait/signal.

use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use et_graph::TaskId;
use et_graph::schedule::SplitMix64;

use super::exec::{Aborted, Execution};
use crate::dtype::Element;
use crate::error::Error;
use crate::raw::RawTensor;
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
    ///
    /// # Panics
    /// When the megakernel declares `t` read-only (`&Tensor`): the launch borrowed it
    /// shared, so writing it would write through a shared borrow. The worker reports the
    /// panic as the task's error.
    pub fn output<T: Element>(&self, t: usize) -> OutTensor<'a, T> {
        let spec = &self.exec.resolved.spec.tensors[t];
        assert!(
            spec.access == et_graph::Access::Write,
            "tensor `{}` is read-only in this megakernel (`&Tensor`), so it cannot be bound for writing",
            spec.name
        );
        // SAFETY: as `input`; the argument was passed as `&mut` (the assertion above), so
        // nothing outside the launch aliases it.
        unsafe {
            if self.exec.observing() {
                OutTensor::bind_observed(&self.exec.args[t])
            } else {
                OutTensor::bind(&self.exec.args[t])
            }
        }
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
        if exec.observing() {
            super::observe::passed(spec.stmt);
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
    /// Data-dependent coordinates through routing data are read from the live tensor
    /// here; a value outside the event stops the launch with [`Error::Index`].
    pub fn signal(&self, access: usize) {
        self.chaos_delay();
        let exec = self.exec;
        let spec = &exec.resolved.spec.groups[self.group].signals[access];
        let mut elements = Vec::new();
        let last = Cell::new((0u16, 0i64, 0i64));
        let read = |t: u16, pos: i64| {
            let v = match &exec.resolved.index_data[t as usize] {
                Some(snapshot) => snapshot[pos as usize],
                None => read_integer(&exec.args[t as usize], pos),
            };
            last.set((t, pos, v));
            Ok(v)
        };
        if exec.resolved.access_elements_with(spec, &self.vars, &mut elements, &read).is_err() {
            let (t, pos, value) = last.get();
            let (ev, coord) = spec
                .index
                .iter()
                .position(|ix| matches!(ix, et_graph::Index::Data { tensor, .. } if *tensor == t))
                .map_or((0, 0), |c| (spec.event as usize, c));
            let bound = exec.resolved.events[ev].shape.get(coord).copied().unwrap_or(0);
            let shape = &exec.args[t as usize].shape;
            exec.fail(Error::Index {
                kernel: exec.kernel.name().to_string(),
                task: exec.resolved.describe_task(self.task),
                tensor: exec.resolved.spec.tensors[t as usize].name.to_string(),
                at: unravel(pos, shape),
                value,
                bound,
            });
            std::panic::resume_unwind(Box::new(Aborted));
        }
        if exec.observing() {
            super::observe::signalled(access, &elements);
            super::observe::passed(spec.stmt);
        }
        for el in elements {
            let now = exec.counters[el as usize].fetch_add(1, Ordering::AcqRel) + 1;
            let target = exec.resolved.target[el as usize];
            if now == target {
                exec.element_complete(el);
            } else if now > target && !exec.resolved.consumers.row(el as usize).is_empty() {
                self.overcount(el, now, target);
            }
        }
    }

    /// Stops the launch with [`Error::Overcount`]: element `el` received signal `value`
    /// of a count of `expected`. Only signals through routing data or from a group with a
    /// run-time condition can get here (resolution counts every other signal against the
    /// count), and its waiters were released at the count, before this task's writes: a
    /// wrong answer, not a result.
    fn overcount(&self, el: u32, value: u32, expected: u32) -> ! {
        let exec = self.exec;
        exec.fail(Error::Overcount {
            kernel: exec.kernel.name().to_string(),
            task: exec.resolved.describe_task(self.task),
            element: exec.resolved.describe_element(el),
            value,
            expected,
        });
        std::panic::resume_unwind(Box::new(Aborted))
    }

    /// Whether this task is active: its group's condition (`tile!(.. if m * 16 <
    /// counts[e] { .. })`) on the live tensor, true without one. Generated code calls it
    /// right after the guard `wait!`, and returns when it is false.
    pub fn condition(&self) -> bool {
        let holds = condition_holds(self.exec, self.group, &self.vars);
        if !holds && self.exec.observing() {
            super::observe::inactive();
        }
        holds
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

/// Whether the condition of `group` holds for the task with tile indices `vars`.
pub(crate) fn condition_holds(exec: &Execution<'_>, group: usize, vars: &[i64]) -> bool {
    let r = &exec.resolved;
    let Some(c) = &r.spec.groups[group].condition else {
        return true;
    };
    let lhs = c.lhs.eval(vars, &r.dims);
    let raw = &exec.args[c.tensor as usize];
    let at: Vec<i64> = c.at.iter().map(|a| a.eval(vars, &r.dims)).collect();
    let pos = at.iter().zip(&raw.shape).fold(0i64, |acc, (&x, &s)| acc * s + x);
    c.cmp.holds(lhs, read_integer(raw, pos))
}

/// The integer at row-major position `pos` of a live host tensor (through its strides).
fn read_integer(raw: &RawTensor, pos: i64) -> i64 {
    let at = unravel(pos, &raw.shape);
    let off: i64 = at.iter().zip(&raw.strides).map(|(a, s)| a * s).sum();
    // SAFETY: `Backend::launch`'s contract: `raw` describes live host memory of its dtype
    // (an integer dtype, checked by the rules: 4 bytes) for the whole launch, and `pos`
    // lies inside its shape (the bounds rule); a writer is ordered before this read by the
    // events the race rule checks, and where a routing escapes it the relaxed load
    // (`crate::relaxed`) reads a wrong value that the observer reports, not a torn one.
    unsafe {
        let p = (raw.addr as *const u32).offset(off as isize);
        let v = crate::relaxed::load(p);
        match raw.dtype {
            crate::dtype::DType::U32 => v as i64,
            _ => v as i32 as i64,
        }
    }
}

/// Row-major coordinates of flat position `p` in `shape`.
fn unravel(mut p: i64, shape: &[i64]) -> Vec<i64> {
    let mut at = vec![0; shape.len()];
    for (d, &ext) in shape.iter().enumerate().rev() {
        let ext = ext.max(1);
        at[d] = p % ext;
        p /= ext;
    }
    at
}
