//! Why a kernel aborted, from the record its first aborting CTA wrote (`Runtime::error`
//! in the prelude): a wait that outlived the watchdog, CTAs idle on the ready queue, an
//! index value out of range, a routed signal past its element's count, or an integer
//! scalar argument that does not fit its op's parameter type.

use std::time::Duration;

use et_core::graph::Resolved;
use et_core::{BlockedWait, Error, RawTensor, TileOp};

/// Length of the record in `u32`s: six `u64` words
/// `[task, element, value, expected, tensor, position]`.
pub(crate) const RECORD_WORDS: usize = 12;
/// `element` of a record written by CTAs idle on the dynamic ready queue.
const READY_QUEUE: u32 = u32::MAX;
/// `element` of a record written by `load_index` (`ET_INDEX_FAULT` in the prelude).
const INDEX_FAULT: u32 = u32::MAX - 1;
/// `element` of a record written by `Ctx::overcount` (`ET_OVERCOUNT` in the prelude).
const OVERCOUNT: u32 = u32::MAX - 2;
/// `element` of a record written by `ScalarArg` (`ET_SCALAR_FAULT` in the prelude).
const SCALAR_FAULT: u32 = u32::MAX - 3;

/// A decoded record.
#[derive(Debug, PartialEq)]
pub(crate) enum Abort {
    /// A wait on `element` saw `value` of `expected` signals when the watchdog fired.
    Wait { task: u32, element: u32, value: u32, expected: u32 },
    /// Every CTA waited on the ready queue, and nothing was pushed, for the watchdog's limit.
    ReadyQueue,
    /// Task `task` read `value` at element `position` of index tensor `tensor`, outside
    /// `0..bound` (the extent of the event dimension it indexes).
    Index { task: u32, tensor: usize, position: u64, value: i64, bound: i64 },
    /// Task `task` gave `element` its `value`-th signal of the launch, past its count
    /// `expected` (dynamic schedule: the adds there return the counter).
    Overcount { task: u32, element: u32, value: u32, expected: u32 },
    /// Task `task` passed `value` as argument `position` of the body's op call `call`,
    /// outside `lo ..= hi`, the range of the op's CUDA parameter type.
    Scalar { task: u32, call: usize, position: usize, value: i64, lo: i64, hi: i64 },
}

impl Abort {
    /// Decodes the record's words.
    pub fn decode(rec: &[u32]) -> Abort {
        let word = |k: usize| rec[2 * k] as u64 | (rec[2 * k + 1] as u64) << 32;
        let (task, element) = (word(0) as u32, word(1) as u32);
        match element {
            READY_QUEUE => Abort::ReadyQueue,
            INDEX_FAULT => Abort::Index {
                task,
                tensor: word(4) as usize,
                position: word(5),
                value: word(2) as i64,
                bound: word(3) as i64,
            },
            OVERCOUNT => {
                Abort::Overcount { task, element: word(4) as u32, value: word(2) as u32, expected: word(3) as u32 }
            }
            SCALAR_FAULT => Abort::Scalar {
                task,
                call: (word(5) >> 16) as usize,
                position: (word(5) & 0xffff) as usize,
                value: word(2) as i64,
                lo: word(3) as i64,
                hi: word(4) as i64,
            },
            _ => Abort::Wait { task, element, value: word(2) as u32, expected: word(3) as u32 },
        }
    }

    /// The error this abort is. `ops` are the megakernel's op calls in body order,
    /// `counters` reads the event counters (only the ready-queue case needs them) and
    /// `epoch` is the aborted launch's.
    pub fn into_error(
        self,
        r: &Resolved<'_>,
        args: &[RawTensor],
        ops: &[TileOp],
        limit: Duration,
        counters: impl FnOnce() -> Result<Vec<u32>, Error>,
        epoch: u32,
    ) -> Result<Error, Error> {
        let kernel = r.spec.name.to_string();
        let wait = match self {
            Abort::Wait { task, element, value, expected } => {
                BlockedWait { task: r.describe_task(task), element: r.describe_element(element), value, expected }
            }
            Abort::ReadyQueue => never_ready(r, &counters()?, epoch).unwrap_or(BlockedWait {
                task: "(none found)".into(),
                element: "the dynamic ready queue".into(),
                value: 0,
                expected: 1,
            }),
            Abort::Index { task, tensor, position, value, bound } => {
                let name = r.spec.tensors.get(tensor).map_or("?".to_string(), |t| t.name.to_string());
                let at = args.get(tensor).map_or(vec![position as i64], |a| unravel_strided(position, a));
                return Ok(Error::Index { kernel, task: r.describe_task(task), tensor: name, at, value, bound });
            }
            Abort::Overcount { task, element, value, expected } => {
                let (task, element) = (r.describe_task(task), r.describe_element(element));
                return Ok(Error::Overcount { kernel, task, element, value, expected });
            }
            // the CPU backend's `TryFrom` panics in the task: the same error here
            Abort::Scalar { task, call, position, value, lo, hi } => {
                let op = ops.get(call).map_or("?", |op| op.path);
                let message = format!(
                    "scalar argument {} of tile op `{op}` (call {call}) = {value} does not fit the op's CUDA \
                     parameter type ({lo} ..= {hi})",
                    position + 1
                );
                return Ok(Error::TaskPanic { task: r.describe_task(task), message });
            }
        };
        Ok(Error::Watchdog { kernel, wait, limit })
    }
}

/// Coordinates of element offset `p` of a tensor with these strides (the device computes
/// offsets through the strides); row-major by its shape when the strides do not decide.
fn unravel_strided(p: u64, a: &RawTensor) -> Vec<i64> {
    let mut order: Vec<usize> = (0..a.shape.len()).collect();
    order.sort_by_key(|&d| std::cmp::Reverse(a.strides[d]));
    let mut rest = p as i64;
    let mut at = vec![0; a.shape.len()];
    for d in order {
        let s = a.strides[d].max(1);
        at[d] = rest / s;
        rest %= s;
    }
    if at.iter().zip(&a.shape).all(|(&x, &n)| x < n.max(1)) { at } else { unravel(p, &a.shape) }
}

/// Row-major coordinates of flat position `p` in `shape`.
fn unravel(mut p: u64, shape: &[i64]) -> Vec<i64> {
    let mut at = vec![0; shape.len()];
    for (d, &ext) in shape.iter().enumerate().rev() {
        let ext = ext.max(1) as u64;
        at[d] = (p % ext) as i64;
        p /= ext;
    }
    at
}

/// The first waited element left incomplete in this launch, and a task waiting on it.
fn never_ready(r: &Resolved<'_>, counters: &[u32], epoch: u32) -> Option<BlockedWait> {
    (0..r.n_elements as usize).find_map(|el| {
        let target = r.target[el];
        let consumer = *r.consumers.row(el).first()?;
        let value = counters[el].wrapping_sub(epoch.wrapping_sub(1).wrapping_mul(target));
        (target > 0 && value < target).then(|| BlockedWait {
            task: r.describe_task(consumer),
            element: r.describe_element(el as u32),
            value,
            expected: target,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(words: [u64; 6]) -> Vec<u32> {
        words.iter().flat_map(|&w| [w as u32, (w >> 32) as u32]).collect()
    }

    #[test]
    fn records_decode_to_their_cause() {
        assert_eq!(
            Abort::decode(&record([3, 7, 8, 9, 0, 0])),
            Abort::Wait { task: 3, element: 7, value: 8, expected: 9 }
        );
        assert_eq!(Abort::decode(&record([0, u32::MAX as u64, 0, 1, 0, 0])), Abort::ReadyQueue);
        assert_eq!(
            Abort::decode(&record([5, (u32::MAX - 1) as u64, (-2i64) as u64, 4, 1, 11])),
            Abort::Index { task: 5, tensor: 1, position: 11, value: -2, bound: 4 }
        );
        assert_eq!(
            Abort::decode(&record([2, (u32::MAX - 2) as u64, 3, 1, 6, 0])),
            Abort::Overcount { task: 2, element: 6, value: 3, expected: 1 }
        );
        assert_eq!(
            Abort::decode(&record([
                4,
                (u32::MAX - 3) as u64,
                3_000_000_000,
                (-(1i64 << 31)) as u64,
                (1 << 31) - 1,
                1 << 16 | 2
            ])),
            Abort::Scalar { task: 4, call: 1, position: 2, value: 3_000_000_000, lo: -(1 << 31), hi: (1 << 31) - 1 }
        );
        assert_eq!(RECORD_WORDS, record([0; 6]).len());
    }

    #[test]
    fn an_index_fault_names_the_kernel_task_tensor_position_and_value() {
        use et_core::graph::resolve::LaunchTensors;
        struct Shapes;
        impl LaunchTensors for Shapes {
            fn shape(&self, t: u16) -> Vec<i64> {
                [vec![64, 128], vec![64, 4], vec![64]][t as usize].clone()
            }
            fn read_integers(&self, _: u16) -> Vec<i64> {
                Vec::new()
            }
        }
        let kernel = &splitk::split_row_sum::KERNEL;
        let ops = kernel.cuda.ops;
        let r = Resolved::new(&kernel.graph, &Shapes).unwrap();
        let shapes: [&[usize]; 3] = [&[64, 128], &[64, 4], &[64]];
        let args: Vec<RawTensor> = shapes.iter().map(|s| RawTensor::new(0, et_core::DType::F32, s)).collect();
        let abort = Abort::Index { task: 0, tensor: 1, position: 9, value: 70, bound: 64 };
        let err = abort.into_error(&r, &args, &[], Duration::from_secs(1), || unreachable!(), 1).unwrap().to_string();
        let task = r.describe_task(0);
        for part in ["`split_row_sum`", &format!("task {task}"), "`part`", "at [2, 1]", "read 70", "outside 0..64"] {
            assert!(err.contains(part), "`{part}` missing from: {err}");
        }
        // an over-signal names the task and the element like the CPU backend's
        let abort = Abort::Overcount { task: 0, element: 1, value: 2, expected: 1 };
        let err = abort.into_error(&r, &args, &[], Duration::from_secs(1), || unreachable!(), 1).unwrap();
        let Error::Overcount { kernel, task: t, element, value, expected } = &err else { panic!("{err}") };
        assert_eq!(
            (kernel.as_str(), t, element, *value, *expected),
            ("split_row_sum", &task, &r.describe_element(1), 2, 1)
        );
        // a scalar that does not fit is the task's panic, as on the CPU backend
        let abort = Abort::Scalar { task: 0, call: 1, position: 2, value: -1, lo: 0, hi: u32::MAX as i64 };
        let err = abort.into_error(&r, &args, ops, Duration::from_secs(1), || unreachable!(), 1).unwrap();
        let Error::TaskPanic { task: t, message } = &err else { panic!("{err}") };
        assert_eq!(t, &task);
        let op = format!("scalar argument 3 of tile op `{}` (call 1) = -1 does not fit", ops[1].path);
        assert!(message.starts_with(&op) && message.ends_with("(0 ..= 4294967295)"), "{message}");
    }
}
