//! Symbolic tile extents (`t.tile([0, j], [B, 64])`): the bounds rule proves them for
//! every admissible size, rejects extents that use tile indices and symbolic extents whose
//! index moves, and the race rule places their boxes with the dims' values.

use et_graph::build::*;
use et_graph::check::{Location, Severity, check};
use et_graph::{Access, Affine, DType, DimKind, DimSpec, GraphSpec, Resolved};

fn bounded(name: &'static str, max: i64) -> DimSpec {
    DimSpec { name: name.into(), kind: DimKind::Symbolic { max: Some(max) } }
}

/// dims `B <= 16`, `N`; `x: [B, 64 * N]`; group `g[j] in [N]` reads `x.tile(index, size)`.
fn reader(index: Vec<Affine>, size: Vec<Affine>, shape: Vec<Affine>) -> GraphSpec {
    graph(
        "reader",
        vec![bounded("B", 16), symbolic("N")],
        vec![tensor("x", DType::F32, shape, Access::Read)],
        vec![],
        vec![with_tiles(group("g", &["j"], vec![dim(1)], vec![], vec![]), vec![tile_of(0, index, size, Access::Read)])],
    )
}

fn batch_by_columns() -> Vec<Affine> {
    vec![dim(0), dim(1).scale(64)]
}

fn errors(spec: &GraphSpec) -> Vec<et_graph::check::Diagnostic> {
    check(spec).into_iter().filter(|d| d.severity == Severity::Error).collect()
}

#[test]
fn a_whole_symbolic_extent_at_a_constant_index_is_accepted() {
    // x.tile([0, j], [B, 64]) over x: [B, 64 * N]
    let spec = reader(vec![lit(0), var(0)], vec![dim(0), lit(64)], batch_by_columns());
    assert_eq!(check(&spec), vec![]);
}

#[test]
fn a_symbolic_extent_past_its_tensor_is_rejected_with_the_failing_size() {
    // x.tile([1, j], [B, 64]) covers rows B .. 2B of a tensor of B rows
    let spec = reader(vec![lit(1), var(0)], vec![dim(0), lit(64)], batch_by_columns());
    let d = errors(&spec);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].location, Location::Tile { group: 0, tile: 0, coord: Some(0) });
    assert!(d[0].message.contains("out of bounds") && d[0].message.contains("B .. 2*B"), "{}", d[0].message);
    assert_eq!(d[0].help.as_deref(), Some("it fails for B = 1"));
    // [2 * B, ..] of a tensor with B + 16 rows fits only while B <= 16: the max proves it
    let fits = reader(vec![lit(0), var(0)], vec![dim(0).scale(2), lit(64)], vec![dim(0).add(&lit(16)), dim(1)]);
    assert!(errors(&fits).iter().all(|d| !d.message.contains("dimension 0")), "{:?}", errors(&fits));
    let over = reader(vec![lit(0), var(0)], vec![dim(0).scale(2), lit(64)], vec![dim(0).add(&lit(15)), dim(1)]);
    let d = errors(&over);
    assert!(d.iter().any(|d| d.message.contains("dimension 0") && d.help.as_deref() == Some("it fails for B = 16")));
}

#[test]
fn a_symbolic_extent_whose_index_moves_is_rejected_at_the_index() {
    // x.tile([j, 0], [B, 64]) would start at j * B: not affine
    let spec = reader(vec![var(0), lit(0)], vec![dim(0), lit(64)], vec![dim(0).scale(4), dim(1).scale(64)]);
    let d = errors(&spec);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].location, Location::Tile { group: 0, tile: 0, coord: Some(0) });
    assert!(d[0].message.contains("extent `B` is symbolic must have a constant index"), "{}", d[0].message);
    assert!(d[0].message.contains("this index is `j`"), "{}", d[0].message);
    assert!(d[0].help.as_deref().unwrap().contains("`[L, B, H]` with index `[l, 0, 0]`"));
    // a symbolic index is no better: B * N is not affine either
    let spec = reader(vec![dim(1), lit(0)], vec![dim(0), lit(64)], vec![dim(0).scale(4), dim(1).scale(64)]);
    assert!(errors(&spec)[0].message.contains("this index is `N`"));
}

#[test]
fn an_extent_must_not_use_tile_indices_and_must_be_at_least_one() {
    let spec = reader(vec![lit(0), lit(0)], vec![var(0), lit(64)], batch_by_columns());
    let d = errors(&spec);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].location, Location::TileExtent { group: 0, tile: 0, dim: 0 });
    assert!(d[0].message.contains("the tile extent `j` depends on a tile index of `g`"), "{}", d[0].message);
    // B - 1 is 0 at B = 1
    let spec = reader(vec![lit(0), var(0)], vec![dim(0).sub(&lit(1)), lit(64)], batch_by_columns());
    let d = errors(&spec);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].location, Location::TileExtent { group: 0, tile: 0, dim: 0 });
    assert!(d[0].message.contains("`B - 1` can be less than 1"), "{}", d[0].message);
    assert_eq!(d[0].help.as_deref(), Some("it fails for B = 1"));
}

#[test]
fn symbolic_boxes_race_exactly_at_launch() {
    // w[j] in [N] writes y.tile([0, 0], [B, 64]) for every j: all tasks write one box
    let racy = graph(
        "racy",
        vec![bounded("B", 16), symbolic("N")],
        vec![
            tensor("x", DType::F32, vec![dim(0), dim(1)], Access::Read),
            tensor("y", DType::F32, vec![dim(0), lit(64)], Access::Write),
        ],
        vec![],
        vec![with_tiles(
            group("w", &["j"], vec![dim(1)], vec![], vec![]),
            vec![tile_of(1, vec![lit(0), lit(0)], vec![dim(0), lit(64)], Access::Write)],
        )],
    );
    assert!(errors(&racy).is_empty(), "bounds hold: {:?}", errors(&racy));
    let one = Resolved::shapes_only(&racy, vec![vec![3, 1], vec![3, 64]]).unwrap();
    assert!(et_graph::race::find(&one).is_empty(), "a single task cannot race");
    let two = Resolved::shapes_only(&racy, vec![vec![3, 2], vec![3, 64]]).unwrap();
    let races = et_graph::race::find(&two);
    assert_eq!(races.len(), 1, "{races:?}");
    // the box spans B = 3 rows
    assert!(races[0].to_string().contains("`y[0..3, 0..64]`"), "{}", races[0]);
}
