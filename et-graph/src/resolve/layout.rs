//! Where tasks and event counters sit in their flat numberings, and decoding a flat
//! index back into coordinates (the one task decode of the Rust side).

use super::{ResolveError, TaskId};
use crate::affine::Affine;
use crate::spec::Name;

/// Where a group's tasks sit in the task numbering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupLayout {
    /// First task of the group.
    pub first: TaskId,
    /// Resolved domain extents.
    pub domain: Vec<i64>,
    /// Number of tasks.
    pub len: u32,
}

/// Where an event's counters sit in the flat counter array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventLayout {
    /// First counter of the event.
    pub offset: u32,
    /// Resolved shape.
    pub shape: Vec<i64>,
    /// Number of elements.
    pub len: u32,
}

/// The most tasks, or event elements, a launch may number: the device's indices are
/// `u32`, and its abort records use the top four values as markers (`ET_SCALAR_FAULT`,
/// `ET_INDEX_FAULT`, `ET_OVERCOUNT` and the ready queue's: `MAX_FLAT ..= u32::MAX`),
/// which must not name a real element.
pub const MAX_FLAT: u32 = u32::MAX - 3;

/// Lays boxes (`what` names them: "tasks", "elements") one after another in a flat u32
/// numbering: `(start, extents, len)` per box. Products and sums are checked, so a total
/// past [`MAX_FLAT`] is an error rather than a wrapped index.
pub(crate) fn place<'s>(
    what: &str,
    boxes: impl Iterator<Item = (&'s Name, &'s [Affine])>,
    dims: &[i64],
) -> Result<Vec<(u32, Vec<i64>, u32)>, ResolveError> {
    let mut out = Vec::new();
    let mut start = 0u32;
    for (name, extents) in boxes {
        let ext: Vec<i64> = extents.iter().map(|e| e.eval(&[], dims).max(0)).collect();
        let shown = || ext.iter().map(i64::to_string).collect::<Vec<_>>().join(" x ");
        let len = ext
            .iter()
            .try_fold(1u32, |acc, &x| u32::try_from(x).ok().and_then(|x| acc.checked_mul(x)))
            .ok_or_else(|| ResolveError::TooLarge { what: format!("the {what} of `{name}` ({})", shown()) })?;
        out.push((start, ext, len));
        start = start.checked_add(len).filter(|&end| end <= MAX_FLAT).ok_or_else(|| ResolveError::TooLarge {
            what: format!("the {what} in total (up to `{name}`, {} + {len})", start),
        })?;
    }
    Ok(out)
}

/// The row-major coordinates of flat index `rest` in a box of `extents`.
pub(crate) fn unflatten(mut rest: u32, extents: &[i64]) -> Vec<i64> {
    let mut coords = vec![0; extents.len()];
    for k in (0..coords.len()).rev() {
        let e = extents[k].max(1) as u32;
        coords[k] = (rest % e) as i64;
        rest /= e;
    }
    coords
}
