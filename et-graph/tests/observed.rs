//! The race rule on an observed launch (`race::find_observed`): the signals that arrived
//! are the only happens-before edges, and the element runs the ops touched are the boxes.

use et_graph::build::*;
use et_graph::observed::{Observed, TaskRun, Touch};
use et_graph::race::{find, find_observed};
use et_graph::{Access, Count, DType, GraphSpec, Resolved};

/// `w[i]` writes `y[i]` and signals `done[i]`; `r[i]` waits on `done[i]`, then reads the
/// whole of `y` (its box) and writes `out[i]`. Tasks: `w[0..4]` are 0..4, `r[0..4]` 4..8.
fn gather() -> GraphSpec {
    graph(
        "gather",
        vec![],
        vec![
            tensor("y", DType::F32, vec![lit(4)], Access::Write),
            tensor("out", DType::F32, vec![lit(4)], Access::Write),
        ],
        vec![event("done", vec![lit(4)], Count::Fixed(lit(1)))],
        vec![
            with_tiles(
                group("w", &["i"], vec![lit(4)], vec![], vec![at(0, vec![point(var(0))])]),
                vec![tile(0, vec![var(0)], vec![1], Access::Write)],
            ),
            with_tiles(
                group("r", &["i"], vec![lit(4)], vec![at(0, vec![point(var(0))])], vec![]),
                vec![tile(0, vec![lit(0)], vec![4], Access::Read), tile(1, vec![var(0)], vec![1], Access::Write)],
            ),
        ],
    )
}

fn touch(tensor: u16, after: Option<u16>, write: bool, at: i64) -> Touch {
    Touch { tensor, after, write, start: at, end: at + 1 }
}

/// The launch in which `w[i]` signalled `done[signal_of[i]]` and `r[i]` read `y[read_of[i]]`.
fn launch(signal_of: [u32; 4], read_of: [i64; 4]) -> Observed {
    let mut tasks = Vec::new();
    for (i, &el) in signal_of.iter().enumerate() {
        let touches = vec![touch(0, None, true, i as i64)];
        tasks.push(Some(TaskRun { active: true, signals: vec![vec![el]], touches }));
    }
    for (i, &j) in read_of.iter().enumerate() {
        let touches = vec![touch(0, Some(0), false, j), touch(1, Some(0), true, i as i64)];
        tasks.push(Some(TaskRun { active: true, signals: Vec::new(), touches }));
    }
    Observed { tasks }
}

fn races(observed: &Observed) -> Vec<String> {
    let spec = gather();
    let r = Resolved::shapes_only(&spec, vec![vec![4], vec![4]]).unwrap();
    find_observed(&r, observed).iter().map(|race| race.to_string()).collect()
}

#[test]
fn the_elements_an_op_touched_inside_its_box_decide() {
    let spec = gather();
    let r = Resolved::shapes_only(&spec, vec![vec![4], vec![4]]).unwrap();
    // by the boxes, `r[0]` reads `y[1]` before `w[1]` is known to have written it
    assert!(!find(&r).is_empty());
    // each reader touched only the element its own event orders
    assert_eq!(races(&launch([0, 1, 2, 3], [0, 1, 2, 3])), Vec::<String>::new());
    // `r[0]` read `y[1]`: the race is named with the element
    let found = races(&launch([0, 1, 2, 3], [1, 1, 2, 3]));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("data race: `r[0]` reads `y[1]` written by `w[1]`"), "{found:?}");
    assert!(found[0].ends_with(", as this launch routed its signals"), "{found:?}");
}

#[test]
fn only_the_signals_that_arrived_order_tasks() {
    // `w[0]` and `w[1]` signalled each other's element: `r[0]` waited for `w[1]`, not
    // for the `w[0]` whose element it read
    let found = races(&launch([1, 0, 2, 3], [0, 1, 2, 3]));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("data race: `r[0]` reads `y[0]` written by `w[0]`"), "{found:?}");
    // a writer that never ran wrote nothing
    let mut observed = launch([1, 0, 2, 3], [0, 1, 2, 3]);
    observed.tasks[0] = None;
    observed.tasks[1].as_mut().unwrap().signals = vec![vec![0, 1]];
    assert_eq!(races(&observed), Vec::<String>::new());
}
