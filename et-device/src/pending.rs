//! Launches enqueued and not yet settled: what settling one needs (its events, status
//! word, state and module), and the reports of those settled but not yet handed out.
//!
//! A deferred launch (`LaunchOptions::defer`) returns once its kernel is enqueued, so the
//! host can prepare the next launch while it runs. Each launch in flight has its own
//! host-mapped status word and its own pair of timing events, so that an abort is
//! attributed to the launch that raised it and every kernel's time is its own.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaEvent, DriverError};
use et_core::LaunchReport;

use crate::modules::Loaded;

/// Launches in flight at most; one more waits for the oldest first. Deep enough that the
/// GPU never runs dry behind a host that enqueues faster than kernels finish.
pub(crate) const MAX_IN_FLIGHT: usize = 64;
/// Host-mapped status words: one per launch in flight, the next launch's among them.
pub(crate) const STATUS_SLOTS: usize = MAX_IN_FLIGHT + 1;
/// Reports of settled deferred launches kept for `Backend::settle`; older ones are dropped.
const KEPT_REPORTS: usize = 4096;

/// One launch enqueued and not yet settled.
pub(crate) struct InFlight {
    /// Its report as the launch returned it (`completed: false`).
    pub report: LaunchReport,
    /// The megakernel's name, for a fault's message.
    pub kernel: String,
    /// Its op calls in body order, which an abort record names by position.
    pub ops: &'static [et_core::TileOp],
    /// The `GraphState` it ran on (`GraphState::id`), read after an abort.
    pub state: u64,
    /// The epoch it ran at (an abort's counters are read against it).
    pub epoch: u32,
    pub watchdog: Duration,
    /// Its status word.
    pub slot: usize,
    pub start: CudaEvent,
    pub end: CudaEvent,
    /// Keeps the module loaded while the kernel may still run (a module evicted from the
    /// cache meanwhile is unloaded only when this drops).
    pub _module: Arc<Loaded>,
}

/// The launches in flight, oldest first, and what settling them produced.
pub(crate) struct Pending {
    queue: VecDeque<InFlight>,
    /// Timing events of settled launches, for the next ones.
    spare: Vec<(CudaEvent, CudaEvent)>,
    /// Reports of settled deferred launches, for `Backend::settle`.
    finished: VecDeque<LaunchReport>,
    /// Launches enqueued so far (the status slot of the next is this modulo the slots).
    launched: usize,
}

impl Drop for Pending {
    /// A kernel still in flight keeps its module and state (dropped with the backend)
    /// until it has finished: waiting for the newest launch waits for them all.
    fn drop(&mut self) {
        if let Some(newest) = self.queue.back() {
            let _ = newest.end.synchronize();
        }
    }
}

impl Pending {
    pub fn new() -> Self {
        Pending { queue: VecDeque::new(), spare: Vec::new(), finished: VecDeque::new(), launched: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub fn is_full(&self) -> bool {
        self.queue.len() >= MAX_IN_FLIGHT
    }

    /// The status word of the next launch: free, since at most `MAX_IN_FLIGHT` launches
    /// (consecutive ones) hold theirs.
    pub fn next_slot(&self) -> usize {
        self.launched % STATUS_SLOTS
    }

    /// A pair of timing events for the next launch (a settled launch's, or new ones).
    pub fn events(&mut self, ctx: &Arc<CudaContext>) -> Result<(CudaEvent, CudaEvent), DriverError> {
        match self.spare.pop() {
            Some(pair) => Ok(pair),
            None => {
                let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
                Ok((ctx.new_event(timing)?, ctx.new_event(timing)?))
            }
        }
    }

    /// Records a launch just enqueued.
    pub fn push(&mut self, launch: InFlight) {
        debug_assert!(!self.is_full(), "a launch was enqueued with every status word taken");
        self.launched += 1;
        self.queue.push_back(launch);
    }

    /// The oldest launch in flight.
    pub fn front(&self) -> Option<&InFlight> {
        self.queue.front()
    }

    /// Launches in flight.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Puts a launch taken out back at the front (kept after a fault).
    pub fn push_front(&mut self, launch: InFlight) {
        self.queue.push_front(launch);
    }

    /// Takes the oldest launch out (to settle it).
    pub fn pop(&mut self) -> Option<InFlight> {
        self.queue.pop_front()
    }

    /// Takes every launch out, oldest first (they are lost: an earlier one failed).
    pub fn drain(&mut self) -> Vec<InFlight> {
        self.queue.drain(..).collect()
    }

    /// Returns a settled launch's events for reuse.
    pub fn recycle(&mut self, start: CudaEvent, end: CudaEvent) {
        self.spare.push((start, end));
    }

    /// Keeps a settled deferred launch's report for `Backend::settle`.
    pub fn finish(&mut self, report: LaunchReport) {
        if self.finished.len() == KEPT_REPORTS {
            self.finished.pop_front();
        }
        self.finished.push_back(report);
    }

    /// The kept reports, oldest first, handed out once.
    pub fn take_finished(&mut self) -> Vec<LaunchReport> {
        self.finished.drain(..).collect()
    }
}
