//! What one launch actually did: the signals that arrived and the elements its ops
//! touched, as the CPU backend records them when it observes a launch.
//!
//! The race rule at launch ([`race::find`](crate::race::find)) is exact only where the
//! host knows every signal's target. A signal through routing data that the launch
//! itself writes, or a task that a run-time condition switches off, is resolved there as
//! "may reach every waiter", which orders tasks that the real run does not order.
//! [`race::find_observed`](crate::race::find_observed) runs the same rule on an
//! [`Observed`] instead: the happens-before edges are the signals that really arrived,
//! and the boxes are the element runs the ops really touched, so it is exact for the
//! routing of that launch (as a sanitizer is for one run's inputs).

use crate::resolve::TaskId;

/// One launch as it ran, task by task.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// Per task (by [`TaskId`]): what it did, or `None` for a task that never ran (a task
    /// found inactive by its condition under the dynamic schedule).
    pub tasks: Vec<Option<TaskRun>>,
}

/// What one task did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskRun {
    /// False for a task that stopped at its condition: it ran its guard `wait!`, read
    /// the condition, and nothing else.
    pub active: bool,
    /// Per signal statement of the group (by number): the elements it signalled, empty
    /// for one the task never reached.
    pub signals: Vec<Vec<u32>>,
    /// Runs of elements the task's ops touched, in tensors the launch writes.
    pub touches: Vec<Touch>,
}

/// A run of consecutive elements of one tensor, touched by one task between two of its
/// synchronising statements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Touch {
    /// The tensor parameter.
    pub tensor: u16,
    /// Body position of the last `wait!` or `signal!` the task ran before the touch
    /// (`None`: before any), which places the touch among the body's ops.
    pub after: Option<u16>,
    /// Whether the elements were written (else read).
    pub write: bool,
    /// Row-major element positions `start .. end` of the tensor.
    pub start: i64,
    /// End of the run (exclusive).
    pub end: i64,
}

impl Observed {
    /// The run of `task`, if it ran.
    pub fn task(&self, task: TaskId) -> Option<&TaskRun> {
        self.tasks.get(task as usize).and_then(Option::as_ref)
    }
}

/// Receives one box of a run: `start .. end` per dimension.
pub type BoxSink<'a> = dyn FnMut(&[(i64, i64)]) + 'a;

/// Splits the row-major run `start .. end` of a tensor of `shape` into at most
/// `2 * rank - 1` boxes (`start .. end` per dimension), calling `push` for each.
pub fn run_boxes(shape: &[i64], start: i64, end: i64, push: &mut BoxSink<'_>) {
    if start >= end || shape.is_empty() {
        if start < end {
            push(&[]);
        }
        return;
    }
    split(shape, start, end, push, &mut Vec::with_capacity(shape.len()));
}

/// `prefix` fixes the leading coordinates; `start .. end` are positions inside the
/// sub-tensor of `shape`.
fn split(shape: &[i64], start: i64, end: i64, push: &mut BoxSink<'_>, prefix: &mut Vec<(i64, i64)>) {
    let inner: i64 = shape[1..].iter().product();
    if shape.len() == 1 || inner == 0 {
        prefix.push((start, end));
        if shape.len() > 1 {
            prefix.extend(shape[1..].iter().map(|&s| (0, s)));
        }
        push(prefix);
        prefix.truncate(prefix.len() - shape.len());
        return;
    }
    let (first, last) = (start / inner, (end - 1) / inner);
    let whole = |row: i64, pos: i64| pos == row * inner;
    let mut lo = first;
    if !whole(first, start) || (first == last && end != (last + 1) * inner) {
        // a partial leading row: recurse inside it
        let stop = end.min((first + 1) * inner);
        prefix.push((first, first + 1));
        split(&shape[1..], start - first * inner, stop - first * inner, push, prefix);
        prefix.pop();
        lo = first + 1;
    }
    let hi = if end == (last + 1) * inner { last + 1 } else { last };
    if lo < hi {
        prefix.push((lo, hi));
        prefix.extend(shape[1..].iter().map(|&s| (0, s)));
        push(prefix);
        prefix.truncate(prefix.len() - shape.len());
    }
    if hi == last && last >= lo && end != (last + 1) * inner {
        prefix.push((last, last + 1));
        split(&shape[1..], 0, end - last * inner, push, prefix);
        prefix.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boxes(shape: &[i64], start: i64, end: i64) -> Vec<Vec<(i64, i64)>> {
        let mut out = Vec::new();
        run_boxes(shape, start, end, &mut |b| out.push(b.to_vec()));
        out
    }

    /// Every position of the run lies in exactly one box, and no other position does.
    fn covers_exactly(shape: &[i64], start: i64, end: i64) {
        let found = boxes(shape, start, end);
        let total: i64 = shape.iter().product();
        for p in 0..total {
            let mut at = vec![0; shape.len()];
            let mut q = p;
            for d in (0..shape.len()).rev() {
                at[d] = q % shape[d];
                q /= shape[d];
            }
            let hits = found.iter().filter(|b| b.iter().zip(&at).all(|(&(lo, hi), &x)| lo <= x && x < hi)).count();
            assert_eq!(
                hits,
                usize::from(start <= p && p < end),
                "position {p} of {shape:?}, run {start}..{end}: {found:?}"
            );
        }
        assert!(found.len() < 2 * shape.len(), "{found:?}");
    }

    #[test]
    fn a_run_becomes_few_boxes_that_cover_it_exactly() {
        for shape in [vec![7], vec![3, 5], vec![2, 3, 4], vec![4, 1, 3]] {
            let total: i64 = shape.iter().product();
            for start in 0..total {
                for end in start + 1..=total {
                    covers_exactly(&shape, start, end);
                }
            }
        }
        assert_eq!(boxes(&[4, 8], 8, 24), vec![vec![(1, 3), (0, 8)]]);
        assert_eq!(boxes(&[4, 8], 3, 5), vec![vec![(0, 1), (3, 5)]]);
    }
}
