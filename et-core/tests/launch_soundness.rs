//! Bad run-time data on the CPU backend, through `#[megakernel]`'s generated `launch`:
//! index and count tensors inconsistent with the signals, routing data out of range,
//! dims past their bounds, shapes past `usize`. Each is an error naming what is wrong,
//! under both schedules and under chaos; never a hang, a panic or a silent result.

use et_core::prelude::*;
use et_core::{Error, Result};

/// Input routing: token copy `(t, k)` signals expert `topk[t, k]`, whose element
/// completes at `counts[e]` signals.
#[megakernel(dims(T = 4))]
pub fn routed_input(
    topk: &Tensor<i32, { [T, 2] }>,
    counts: &Tensor<i32, { [E] }>,
    x: &Tensor<f32, { [T, 8] }>,
    slots: &mut Tensor<f32, { [T * 2, 8] }>,
    y: &mut Tensor<f32, { [E, 8] }>,
) {
    let arrived = event!([E], count = dyn(counts));
    tile!(route[t, k] in [T, 2] {
        add(x.tile([t, 0], [1, 8]), x.tile([t, 0], [1, 8]), slots.tile([t * 2 + k, 0], [1, 8]));
        signal!(arrived[topk[t, k]]);
    });
    tile!(expert[e] in [E] {
        wait!(arrived[..]);
        add(slots.tile([0, 0], [1, 8]), slots.tile([0, 0], [1, 8]), y.tile([e, 0], [1, 8]));
    });
}

/// Routing written in the launch: `group[e]` lists expert `e`'s tokens and signals
/// `done[t]` through the list, which completes at the declared count of 1, though each
/// token is picked by two experts (K = 2): one signal too many.
#[megakernel(dims(E = 4, K = 2, C = 8, T <= 8))]
pub fn routed_count_one(
    topk: &Tensor<i32, { [T, K] }>,
    x: &Tensor<f32, { [N] }>,
    counts: &mut Tensor<i32, { [E] }>,
    tokens: &mut Tensor<i32, { [E, C] }>,
    out: &mut Tensor<f32, { [N] }>,
) {
    let done = event!([N], count = 1);
    tile!(group[e] in [E] {
        moe_group(topk.tile([0, 0], [T, K]), e, counts.tile([e], [1]), tokens.tile([e, 0], [1, C]));
        signal!(done[tokens[e, 0 .. C]]);
    });
    tile!(fin[t] in [N] {
        wait!(done[t]);
        add(x.tile([t], [1]), x.tile([t], [1]), out.tile([t], [1]));
    });
}

/// As [`routed_count_one`], with each token's count read from `want`.
#[megakernel(dims(E = 4, K = 2, C = 8, T <= 8))]
pub fn routed_dyn(
    topk: &Tensor<i32, { [T, K] }>,
    x: &Tensor<f32, { [N] }>,
    want: &Tensor<u32, { [N] }>,
    counts: &mut Tensor<i32, { [E] }>,
    tokens: &mut Tensor<i32, { [E, C] }>,
    out: &mut Tensor<f32, { [N] }>,
) {
    let done = event!([N], count = dyn(want));
    tile!(group[e] in [E] {
        moe_group(topk.tile([0, 0], [T, K]), e, counts.tile([e], [1]), tokens.tile([e, 0], [1, C]));
        signal!(done[tokens[e, 0 .. C]]);
    });
    tile!(fin[t] in [N] {
        wait!(done[t]);
        add(x.tile([t], [1]), x.tile([t], [1]), out.tile([t], [1]));
    });
}

/// Both schedules, each in order and under two chaos seeds.
fn every_option() -> Vec<LaunchOptions> {
    let mut v = Vec::new();
    for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
        for chaos in [None, Some(1), Some(2)] {
            v.push(LaunchOptions { schedule: Some(schedule), chaos, trace: None, ..Default::default() });
        }
    }
    v
}

/// Every token picked by two distinct experts (4 tokens, 4 experts).
const TWO_EACH: [i32; 8] = [0, 1, 1, 2, 2, 3, 3, 0];

fn run_input(topk: [i32; 8], counts: &[i32], options: &LaunchOptions) -> Result<et_core::LaunchReport> {
    let topk = Tensor::from_vec(&[4, 2], topk.to_vec()).unwrap();
    let counts = Tensor::from_vec(&[counts.len()], counts.to_vec()).unwrap();
    let x = Tensor::<f32>::random(&[4, 8], 1);
    let mut slots = Tensor::<f32>::poisoned(&[8, 8]);
    let mut y = Tensor::<f32>::poisoned(&[counts.len(), 8]);
    routed_input::launch_with(&Cpu::new(), options, &topk, &counts, &x, &mut slots, &mut y)
}

#[test]
fn input_routing_out_of_range_or_miscounted_is_a_launch_error() {
    for o in every_option() {
        assert_eq!(run_input(TWO_EACH, &[2, 2, 2, 2], &o).unwrap().tasks, 12);
        for (topk, counts, want) in [
            (
                [0, 1, 1, 2, 2, 3, 3, 4],
                [2, 2, 2, 2],
                "task route[3, 1]: access to event `arrived` out of bounds: coordinate 0 is 4, read from `topk`, outside 0..4",
            ),
            ([0, 1, 1, 2, 2, 3, 3, -1], [2, 2, 2, 2], "coordinate 0 is -1, read from `topk`, outside 0..4"),
            (TWO_EACH, [2, 3, 2, 2], "arrived[1] receives 2 signals but its count is 3"),
            (TWO_EACH, [2, 1, 2, 2], "arrived[1] receives 2 signals but its count is 1"),
            (TWO_EACH, [2, -2, 2, 2], "run-time count -2 of arrived[1] is invalid"),
        ] {
            let err = run_input(topk, &counts, &o).unwrap_err();
            assert!(matches!(err, Error::Resolve { .. }), "{err}");
            assert!(err.to_string().contains(want), "{o:?}: {err}");
        }
    }
}

/// Launches [`routed_count_one`] (`want: None`) or [`routed_dyn`] for 4 tokens and `n`
/// elements of `done`.
fn run_live(topk: [i32; 8], n: usize, want: Option<&[u32]>, options: &LaunchOptions) -> Result<Vec<f32>> {
    let topk = Tensor::from_vec(&[4, 2], topk.to_vec()).unwrap();
    let x = Tensor::<f32>::random(&[n], 1);
    let (mut counts, mut tokens) = (Tensor::<i32>::zeros(&[4]), Tensor::<i32>::zeros(&[4, 8]));
    let mut out = Tensor::<f32>::poisoned(&[n]);
    let cpu = Cpu::new();
    match want {
        None => routed_count_one::launch_with(&cpu, options, &topk, &x, &mut counts, &mut tokens, &mut out)?,
        Some(w) => {
            let w = Tensor::from_vec(&[n], w.to_vec()).unwrap();
            routed_dyn::launch_with(&cpu, options, &topk, &x, &w, &mut counts, &mut tokens, &mut out)?
        }
    };
    Ok(out.into_vec())
}

#[test]
fn more_routed_signals_than_the_declared_count_stop_the_launch() {
    for o in every_option() {
        let err = run_live(TWO_EACH, 4, None, &o).unwrap_err();
        let Error::Overcount { kernel, task, element, value, expected } = &err else { panic!("{o:?}: {err}") };
        assert_eq!(
            (kernel.as_str(), task.starts_with("group["), element.starts_with("done[")),
            ("routed_count_one", true, true),
            "{err}"
        );
        assert_eq!((*value, *expected), (2, 1), "{err}");
        assert!(err.to_string().contains("past its count (2 signals of 1)"), "{err}");
    }
}

#[test]
fn a_run_time_count_unequal_to_the_routed_signals_is_an_error_naming_task_and_element() {
    for o in every_option() {
        let got = run_live(TWO_EACH, 4, Some(&[2, 2, 2, 2]), &o).unwrap();
        assert!(got.iter().all(|v| v.is_finite()), "{o:?}: {got:?}");
        // fewer signals than the count: the waiter can never run
        let err = run_live(TWO_EACH, 4, Some(&[2, 3, 2, 2]), &o).unwrap_err();
        let Error::Deadlock { blocked, .. } = &err else { panic!("{o:?}: {err}") };
        assert_eq!(blocked.len(), 1, "{err}");
        assert_eq!((blocked[0].task.as_str(), blocked[0].element.as_str()), ("fin[1]", "done[1]"), "{err}");
        assert_eq!((blocked[0].value, blocked[0].expected), (2, 3), "{err}");
        // more signals than the count (0 included): the waiter was released too early
        for low in [1, 0] {
            let err = run_live(TWO_EACH, 4, Some(&[2, low, 2, 2]), &o).unwrap_err();
            let Error::Overcount { element, value, expected, .. } = &err else { panic!("{o:?}: {err}") };
            assert_eq!((element.as_str(), *value, *expected), ("done[1]", low + 1, low), "{err}");
        }
    }
}

#[test]
fn routing_data_past_the_event_is_an_index_error() {
    for o in every_option() {
        // token ids reach 3, `done` has 2 elements
        let err = run_live(TWO_EACH, 2, None, &o).unwrap_err();
        let Error::Index { tensor, value, bound, .. } = &err else { panic!("{o:?}: {err}") };
        assert_eq!((tensor.as_str(), *bound), ("tokens", 2), "{err}");
        assert!(*value >= 2, "{err}");
    }
}

#[test]
fn a_shape_past_usize_is_an_error_not_a_short_tensor() {
    let err = Tensor::<f32>::from_vec(&[1 << 32, 1 << 32], vec![]).unwrap_err();
    assert!(err.to_string().contains("is too large: its extents' product passes 2^63"), "{err}");
    let full = std::panic::catch_unwind(|| Tensor::<f32>::zeros(&[1 << 32, 1 << 32, 2]));
    let message = *full.unwrap_err().downcast::<String>().unwrap();
    assert!(message.contains("[4294967296, 4294967296, 2] is too large"), "{message}");
    // no element, but strides past i64: refused as well, not a wrapped stride at launch
    let err = Tensor::<f32>::from_vec(&[0, 1 << 40, 1 << 40], vec![]).unwrap_err();
    assert!(err.to_string().contains("is too large"), "{err}");
    // an empty tensor whose strides fit is fine
    assert_eq!(Tensor::<f32>::from_vec(&[0, 1 << 20, 1 << 20], vec![]).unwrap().strides(), [1 << 40, 1 << 20, 1]);
}

#[test]
fn preparing_a_launch_checks_its_shapes_and_options_as_the_launch_would() {
    let cpu = Cpu::new();
    let kernel = &routed_input::KERNEL;
    let shapes = |e: usize| vec![vec![4, 2], vec![e], vec![4, 8], vec![8, 8], vec![e, 8]];
    let options = LaunchOptions::default();
    // the CPU backend compiles nothing and keeps no graph state
    assert_eq!(cpu.prepare(kernel, &shapes(3), &options).unwrap(), et_core::Prepared::default());
    // the same errors as a launch over tensors of those shapes
    let mut bad = shapes(3);
    bad[4] = vec![2, 8];
    let err = cpu.prepare(kernel, &bad, &options).unwrap_err().to_string();
    assert!(err.contains("`y`") && err.contains("routed_input"), "{err}");
    let err = cpu.prepare(kernel, &shapes(3)[..4], &options).unwrap_err().to_string();
    assert!(err.contains("takes 5 tensors, 4 were given"), "{err}");
    bad = shapes(3);
    bad[0] = vec![4, 2, 1];
    let err = cpu.prepare(kernel, &bad, &options).unwrap_err().to_string();
    assert!(err.contains("`topk`"), "{err}");
    let none = LaunchOptions { workers: Some(0), ..Default::default() };
    assert!(matches!(cpu.prepare(kernel, &shapes(3), &none), Err(Error::InvalidOption { option: "workers", .. })));
    // an extent past i64 is too large, not a negative one
    let err = cpu.prepare(kernel, &shapes(usize::MAX), &options).unwrap_err().to_string();
    assert!(err.contains("too large"), "{err}");
}
