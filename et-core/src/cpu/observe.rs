//! The CPU backend's observer: while a task of an observed launch runs, its worker
//! thread logs the element runs that the task's tiles touch in the launch's written
//! tensors, the signals it sends and where it stands in its body. After the launch the
//! logs become an [`et_graph::observed::Observed`], on which the race rule is exact for
//! that launch's routing.
//!
//! The log is thread-local because a tile (`TileRef`, `TileMut`) has no way back to its
//! task: it only knows that it was cut from an observed tensor, and the thread it runs on
//! runs one task at a time.

use std::cell::RefCell;
use std::collections::HashMap;

use et_graph::observed::{TaskRun, Touch};

use crate::raw::RawTensor;

/// A run of bytes touched in one stretch of the body.
#[derive(Clone, Copy)]
struct Run {
    after: Option<u16>,
    write: bool,
    start: usize,
    end: usize,
}

/// What the running task did so far.
pub(crate) struct TaskLog {
    after: Option<u16>,
    runs: Vec<Run>,
    /// The runs of this stretch of the body by (end address, written): where a touch
    /// extends one.
    open: HashMap<(usize, bool), usize>,
    /// Per direction (read, write): the last run started, which a re-read falls into.
    last: [Option<usize>; 2],
    signals: Vec<Vec<u32>>,
    active: bool,
}

thread_local! {
    static LOG: RefCell<Option<TaskLog>> = const { RefCell::new(None) };
}

/// Starts the log of a task with `signals` signal statements on this thread.
pub(crate) fn begin(signals: usize) {
    let log = TaskLog {
        after: None,
        runs: Vec::new(),
        open: HashMap::new(),
        last: [None; 2],
        signals: vec![Vec::new(); signals],
        active: true,
    };
    LOG.with(|l| *l.borrow_mut() = Some(log));
}

/// Ends this thread's task log.
pub(crate) fn end() -> Option<TaskLog> {
    LOG.with(|l| l.borrow_mut().take())
}

/// A tile of an observed tensor touched `bytes` bytes at `addr`.
pub(crate) fn touch(addr: usize, bytes: usize, write: bool) {
    LOG.with(|l| {
        let mut l = l.borrow_mut();
        let Some(log) = l.as_mut() else { return };
        // the run that ends where this touch starts grows: a loop over the rows of a
        // tile, column by column, keeps one run per row
        if let Some(k) = log.open.remove(&(addr, write)) {
            log.runs[k].end += bytes;
            log.open.insert((log.runs[k].end, write), k);
            return;
        }
        let dir = usize::from(write);
        if let Some(k) = log.last[dir] {
            let run = &log.runs[k];
            if run.start <= addr && addr + bytes <= run.end {
                return;
            }
        }
        log.last[dir] = Some(log.runs.len());
        log.open.insert((addr + bytes, write), log.runs.len());
        log.runs.push(Run { after: log.after, write, start: addr, end: addr + bytes });
    });
}

/// The task finished the `wait!` or `signal!` at body position `stmt`.
pub(crate) fn passed(stmt: u16) {
    LOG.with(|l| {
        if let Some(log) = l.borrow_mut().as_mut() {
            log.after = Some(stmt);
            // a run never spans a wait or a signal
            log.open.clear();
            log.last = [None; 2];
        }
    });
}

/// Signal statement `k` reached `elements`.
pub(crate) fn signalled(k: usize, elements: &[u32]) {
    LOG.with(|l| {
        if let Some(log) = l.borrow_mut().as_mut() {
            log.signals[k].extend_from_slice(elements);
        }
    });
}

/// The task's condition is false: it stops after its guard.
pub(crate) fn inactive() {
    LOG.with(|l| {
        if let Some(log) = l.borrow_mut().as_mut() {
            log.active = false;
        }
    });
}

impl TaskLog {
    /// The log in tensor terms: byte runs become element runs of the written tensors
    /// (`args`, by parameter; only tiles cut from written tensors are observed, and
    /// only row-major ones, whose memory offsets are their element positions).
    pub(crate) fn into_run(self, args: &[RawTensor]) -> TaskRun {
        let mut touches = Vec::with_capacity(self.runs.len());
        for run in self.runs {
            // a run may cross from one tensor into another that happens to follow it in
            // memory: each tensor gets its part
            for (t, a) in args.iter().enumerate() {
                let (base, size) = (a.addr as usize, a.dtype.size());
                let (start, end) = (run.start.max(base), run.end.min(base + a.len() * size));
                if start < end {
                    touches.push(Touch {
                        tensor: t as u16,
                        after: run.after,
                        write: run.write,
                        start: ((start - base) / size) as i64,
                        end: (end - base).div_ceil(size) as i64,
                    });
                }
            }
        }
        TaskRun { active: self.active, signals: self.signals, touches }
    }
}
