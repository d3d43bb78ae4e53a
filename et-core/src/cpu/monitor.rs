//! Exact deadlock detection for the static schedule.
//!
//! Every worker that blocks registers the element it waits for. When all live workers
//! are registered and none of their elements is complete, no task is running that could
//! signal one, so no progress is possible: that is a deadlock, found without timeouts.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use et_graph::{Resolved, TaskId};

use crate::error::BlockedWait;

#[derive(Default)]
struct State {
    blocked: Vec<Option<(TaskId, u32)>>,
    live: usize,
}

pub(crate) struct Monitor {
    state: Mutex<State>,
}

impl Monitor {
    pub(crate) fn new(workers: usize) -> Self {
        Monitor { state: Mutex::new(State { blocked: vec![None; workers], live: workers }) }
    }

    /// Registers a blocked wait; returns the deadlock report if this completes one.
    pub(crate) fn block(
        &self,
        worker: usize,
        task: TaskId,
        element: u32,
        r: &Resolved<'_>,
        counters: &[AtomicU32],
    ) -> Option<Vec<BlockedWait>> {
        let mut s = self.state.lock().unwrap();
        s.blocked[worker] = Some((task, element));
        Self::deadlock(&s, r, counters)
    }

    pub(crate) fn unblock(&self, worker: usize) {
        self.state.lock().unwrap().blocked[worker] = None;
    }

    /// Re-examines the state (called periodically by blocked workers).
    pub(crate) fn recheck(&self, r: &Resolved<'_>, counters: &[AtomicU32]) -> Option<Vec<BlockedWait>> {
        Self::deadlock(&self.state.lock().unwrap(), r, counters)
    }

    /// A worker finished its queue; the remaining ones may now all be blocked.
    pub(crate) fn retire(&self, r: &Resolved<'_>, counters: &[AtomicU32]) -> Option<Vec<BlockedWait>> {
        let mut s = self.state.lock().unwrap();
        s.live -= 1;
        Self::deadlock(&s, r, counters)
    }

    fn deadlock(s: &State, r: &Resolved<'_>, counters: &[AtomicU32]) -> Option<Vec<BlockedWait>> {
        let blocked: Vec<(TaskId, u32)> = s.blocked.iter().flatten().copied().collect();
        if s.live == 0 || blocked.len() < s.live {
            return None;
        }
        let mut report = Vec::new();
        for (task, el) in blocked {
            let value = counters[el as usize].load(Ordering::Acquire);
            let expected = r.target[el as usize];
            if value >= expected {
                return None; // it is about to wake up
            }
            report.push(BlockedWait { task: r.describe_task(task), element: r.describe_element(el), value, expected });
        }
        Some(report)
    }
}
