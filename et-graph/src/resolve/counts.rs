//! The trigger-count rules: how many signals complete each event element, and where the
//! declared counts disagree with the signals the graph really sends.

use super::{Mode, ResolveError, Resolved, TaskId};
use crate::spec::Count;

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
    /// An explicit or per-element count disagrees with the signals.
    Mismatch {
        /// Signals received per launch.
        signals: u32,
        /// The count given.
        count: i64,
    },
    /// An explicit count below zero (`count = N - 2` at `N = 1`).
    Negative {
        /// The count given.
        count: i64,
    },
    /// A count above every signal the element can receive: its producers include a group
    /// with a run-time condition, and even with every such task active the count is not
    /// reached, so the tasks waiting on it could never run.
    Unreachable {
        /// The signals the element receives when every conditional producer runs.
        most: u32,
        /// The count given (declared, or read per element at launch).
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

impl Resolved<'_> {
    /// Per-element completion targets: per-element counts as read from their tensor, the
    /// signals received elsewhere (0 where nothing waits).
    pub(super) fn targets(&self, consumers: &[Vec<u32>]) -> Result<Vec<u32>, ResolveError> {
        let mut target = vec![0u32; self.signals.len()];
        for (e, ev) in self.spec.events.iter().enumerate() {
            let layout = &self.events[e];
            let range = layout.offset as usize..(layout.offset + layout.len) as usize;
            match (&ev.count, self.mode) {
                (Count::PerElement { tensor }, Mode::Launch) => {
                    let err = |message: String| ResolveError::Count { event: ev.name.to_string(), message };
                    let name = &self.spec.tensors[*tensor as usize].name;
                    let data = self.index_data[*tensor as usize].as_deref().unwrap_or_default();
                    if data.len() != layout.len as usize {
                        return Err(err(format!(
                            "the count tensor `{name}` has {} elements, the event has {}",
                            data.len(),
                            layout.len
                        )));
                    }
                    for (&c, el) in data.iter().zip(range) {
                        target[el] = device_count(c).ok_or_else(|| {
                            err(format!("run-time count {c} of {} is invalid", self.describe_element(el as u32)))
                        })?;
                    }
                }
                (Count::Fixed(a), _) if !self.signals_known(e) => {
                    // signalled through routing data or by a conditional group: the count
                    // is the declared one (a negative one is a count problem)
                    let count = a.eval(&[], &self.dims);
                    if count < 0 {
                        continue;
                    }
                    let count = device_count(count).ok_or_else(|| ResolveError::Count {
                        event: ev.name.to_string(),
                        message: format!("count {count} is invalid"),
                    })?;
                    for el in range.filter(|&el| !consumers[el].is_empty()) {
                        target[el] = count;
                    }
                }
                _ => {
                    for el in range.filter(|&el| !consumers[el].is_empty()) {
                        target[el] = self.signals[el];
                    }
                }
            }
        }
        Ok(target)
    }

    /// The count rules over the resolved sizes: an explicit count is not negative; every
    /// waited element of an event with an inferred or explicit count is signalled (unless
    /// the explicit count is 0), its signal count is uniform over the event's waited
    /// elements and equals an explicit count; every element of a per-element event
    /// receives exactly its count (at launch, when the counts are read). An event with a
    /// declared count whose signals resolution cannot tally (see
    /// [`Resolved::signals_known`]: routing data, any data at compile time, or a group
    /// with a condition) is counted on the device instead. An inferred count signalled
    /// by a conditional group is the tally over every task (its waiters are inactive
    /// wherever a producer of their element is, see `check_conditional_signals`) and is checked here; a
    /// declared one must not exceed that tally, an upper bound of what can arrive.
    pub fn count_problems(&self) -> Vec<CountProblem> {
        let mut out = Vec::new();
        for (e, ev) in self.spec.events.iter().enumerate() {
            let layout = &self.events[e];
            if let Count::Fixed(a) = &ev.count {
                let count = a.eval(&[], &self.dims);
                if count < 0 {
                    let kind = CountProblemKind::Negative { count };
                    out.push(CountProblem { event: e as u16, element: layout.offset, kind });
                    continue;
                }
            }
            let elements = layout.offset..layout.offset + layout.len;
            // a conditional producer's event takes its declared count, which the tally over
            // every task bounds from above
            if !matches!(ev.count, Count::Inferred) && self.signals_data_known(e) && self.signalled_conditionally(e) {
                let count = |el: u32| match &ev.count {
                    Count::Fixed(a) => Some(a.eval(&[], &self.dims)),
                    _ => (self.mode == Mode::Launch).then(|| self.target[el as usize] as i64),
                };
                let over = elements.clone().filter(|&el| !self.consumers.row(el as usize).is_empty()).find_map(|el| {
                    let (most, count) = (self.signals[el as usize], count(el)?);
                    (count > most as i64).then_some((el, CountProblemKind::Unreachable { most, count }))
                });
                if let Some((element, kind)) = over {
                    out.push(CountProblem { event: e as u16, element, kind });
                }
                continue;
            }
            let tallied = match ev.count {
                Count::Inferred => self.signals_data_known(e),
                _ => self.signals_known(e),
            };
            if !tallied {
                continue;
            }
            let fixed = match &ev.count {
                Count::PerElement { .. } => {
                    let exact = |el: &u32| {
                        let (s, t) = (self.signals[*el as usize], self.target[*el as usize]);
                        (s != t).then_some(CountProblemKind::Mismatch { signals: s, count: t as i64 })
                    };
                    if self.mode == Mode::Launch
                        && let Some((element, kind)) = elements.clone().find_map(|el| Some((el, exact(&el)?)))
                    {
                        out.push(CountProblem { event: e as u16, element, kind });
                    }
                    continue;
                }
                Count::Fixed(a) => Some(a.eval(&[], &self.dims)),
                Count::Inferred => None,
            };
            let mut uniform: Option<(u32, u32)> = None;
            for el in elements {
                let Some(&consumer) = self.consumers.row(el as usize).first() else {
                    continue;
                };
                let s = self.signals[el as usize];
                let kind = match (fixed, uniform) {
                    _ if s == 0 && fixed != Some(0) => Some(CountProblemKind::NeverSignalled { consumer }),
                    (Some(count), _) if count != s as i64 => Some(CountProblemKind::Mismatch { signals: s, count }),
                    (_, None) => {
                        uniform = Some((s, el));
                        None
                    }
                    (_, Some((u, other))) if u != s => {
                        Some(CountProblemKind::NotUniform { signals: s, other, other_signals: u })
                    }
                    _ => None,
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
        // a negative count names only its event, which may have no elements to describe
        let name = match p.kind {
            CountProblemKind::Negative { .. } => String::new(),
            _ => self.describe_element(p.element),
        };
        let message = match p.kind {
            CountProblemKind::NeverSignalled { consumer } => {
                format!("{name} is waited on by {} but no task signals it", self.describe_task(consumer))
            }
            CountProblemKind::Mismatch { signals, count } => {
                format!(
                    "{name} receives {signals} signal{} but its count is {count}",
                    if signals == 1 { "" } else { "s" }
                )
            }
            CountProblemKind::Negative { count } => format!("its count is {count}, but a count must be ≥ 0"),
            CountProblemKind::Unreachable { most, count } => format!(
                "{name} receives at most {most} signal{} (every conditional producer active) but its count is {count}, \
                 so the tasks waiting on it could never run",
                if most == 1 { "" } else { "s" }
            ),
            CountProblemKind::NotUniform { signals, other, other_signals } => format!(
                "trigger count is not uniform: {} receives {other_signals} signal{}, {name} receives {signals}",
                self.describe_element(other),
                if other_signals == 1 { "" } else { "s" }
            ),
        };
        ResolveError::Count { event: self.spec.events[p.event as usize].name.to_string(), message }
    }
}

/// `count` as the device holds it, if it is one: counts stay in `0 ..= i32::MAX`, since the
/// device compares counters by wrapping differences (`(int)(v - want) >= 0`).
fn device_count(count: i64) -> Option<u32> {
    u32::try_from(count).ok().filter(|&c| c <= i32::MAX as u32)
}
