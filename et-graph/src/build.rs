//! Short constructors for writing a [`GraphSpec`] by hand (tests, tools, graphs built
//! without the macro).
//!
//! ```
//! use et_graph::build::*;
//! use et_graph::{Access, Count, DType};
//! // row blocks of 32: partial[i, j] signals done[i]; total[i] waits on it
//! let spec = graph(
//!     "split_row_sum",
//!     vec![symbolic("R")],
//!     vec![tensor("a", DType::F32, vec![dim(0).scale(32), lit(128)], Access::Read)],
//!     vec![event("done", vec![dim(0)], Count::Inferred)],
//!     vec![
//!         group("partial", &["i", "j"], vec![dim(0), lit(4)], vec![], vec![at(0, vec![point(var(0))])]),
//!         group("total", &["i"], vec![dim(0)], vec![at(0, vec![point(var(0))])], vec![]),
//!     ],
//! );
//! assert!(et_graph::check::check(&spec).is_empty());
//! ```

use std::borrow::Cow;

use crate::affine::{Affine, Term};
use crate::spec::*;

/// Tile index `k` of the group.
pub fn var(k: u16) -> Affine {
    Affine::term(Term::Var(k))
}

/// Dim `k` of the graph.
pub fn dim(k: u16) -> Affine {
    Affine::term(Term::Dim(k))
}

/// A constant.
pub fn lit(c: i64) -> Affine {
    Affine::constant(c)
}

/// An access to `event` at `index` ([`group`] sets its statement position).
pub fn at(event: u16, index: Vec<Index>) -> EventAccess {
    EventAccess { event, index: Cow::Owned(index), stmt: 0 }
}

/// A tile of `tensor` with constant extents ([`with_tiles`] sets its statement position).
pub fn tile(tensor: u16, index: Vec<Affine>, size: Vec<i64>, access: Access) -> TileAccess {
    tile_of(tensor, index, size.into_iter().map(Affine::constant).collect(), access)
}

/// A tile of `tensor` whose extents are affine in dims (`[dim(0), lit(64)]`).
pub fn tile_of(tensor: u16, index: Vec<Affine>, size: Vec<Affine>, access: Access) -> TileAccess {
    TileAccess { tensor, index: Cow::Owned(index), size: Cow::Owned(size), access, stmt: 0 }
}

/// A single-coordinate index.
pub fn point(a: Affine) -> Index {
    Index::At(a)
}

/// An unbounded symbolic dim.
pub fn symbolic(name: &'static str) -> DimSpec {
    DimSpec { name: name.into(), kind: DimKind::Symbolic { max: None } }
}

/// A tensor parameter.
pub fn tensor(name: &'static str, dtype: DType, shape: Vec<Affine>, access: Access) -> TensorSpec {
    TensorSpec { name: name.into(), dtype, shape: Cow::Owned(shape), access }
}

/// An event tensor.
pub fn event(name: &'static str, shape: Vec<Affine>, count: Count) -> EventSpec {
    EventSpec { name: name.into(), shape: Cow::Owned(shape), count }
}

/// A tile group with no tile accesses and cost 1. Its body is the waits in order, then
/// one op call (see [`with_tiles`]), then the signals.
pub fn group(
    name: &'static str,
    vars: &[&'static str],
    domain: Vec<Affine>,
    mut waits: Vec<EventAccess>,
    mut signals: Vec<EventAccess>,
) -> GroupSpec {
    let op = waits.len() as u16;
    for (k, w) in waits.iter_mut().enumerate() {
        w.stmt = k as u16;
    }
    for (k, s) in signals.iter_mut().enumerate() {
        s.stmt = op + 1 + k as u16;
    }
    GroupSpec {
        name: name.into(),
        vars: vars.iter().map(|v| Cow::Borrowed(*v)).collect(),
        domain: Cow::Owned(domain),
        waits: Cow::Owned(waits),
        signals: Cow::Owned(signals),
        tiles: Cow::Borrowed(&[]),
        cost: 1,
        condition: None,
    }
}

/// `group` with `tiles` as the arguments of its one op call, between its waits and its
/// signals.
pub fn with_tiles(mut group: GroupSpec, mut tiles: Vec<TileAccess>) -> GroupSpec {
    for t in &mut tiles {
        t.stmt = group.waits.len() as u16;
    }
    group.tiles = Cow::Owned(tiles);
    group
}

/// A graph with the static schedule.
pub fn graph(
    name: &'static str,
    dims: Vec<DimSpec>,
    tensors: Vec<TensorSpec>,
    events: Vec<EventSpec>,
    groups: Vec<GroupSpec>,
) -> GraphSpec {
    GraphSpec {
        name: name.into(),
        dims: Cow::Owned(dims),
        tensors: Cow::Owned(tensors),
        events: Cow::Owned(events),
        groups: Cow::Owned(groups),
        schedule: ScheduleKind::Static,
    }
}
