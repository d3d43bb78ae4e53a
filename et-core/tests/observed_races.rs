//! Races that only the launch's own routing decides, on the CPU backend. The race rule
//! at launch must assume that a signal through routing data the launch writes may reach
//! every waiter, and that a task switched off by its condition still signals; the
//! observed launch (`LaunchOptions::observe`, on by default for such megakernels)
//! checks the rule again on the signals that arrived and the elements the ops touched.

use et_core::prelude::*;
use et_core::{Error, Result};

/// `group[e]` writes `y[e]` and lists expert `e`'s tokens, then signals `done[t]` for
/// each listed token; `fin[t]` reads `y[t]` after `done[t]`. That is ordered only where
/// token `t` was picked by expert `t`: which `group` task reaches `fin[t]` is decided by
/// `topk`, and `tokens` is written by the launch.
#[megakernel(dims(E = 4, K = 2, C = 8, T <= 8))]
pub fn routed_read(
    topk: &Tensor<i32, { [T, K] }>,
    x: &Tensor<f32, { [E] }>,
    counts: &mut Tensor<i32, { [E] }>,
    tokens: &mut Tensor<i32, { [E, C] }>,
    y: &mut Tensor<f32, { [E] }>,
    out: &mut Tensor<f32, { [E] }>,
) {
    let done = event!([E], count = 2);
    tile!(group[e] in [E] {
        add(x.tile([e], [1]), x.tile([e], [1]), y.tile([e], [1]));
        moe_group(topk.tile([0, 0], [T, K]), e, counts.tile([e], [1]), tokens.tile([e, 0], [1, C]));
        signal!(done[tokens[e, 0 .. C]]);
    });
    tile!(fin[t] in [E] {
        wait!(done[t]);
        add(y.tile([t], [1]), y.tile([t], [1]), out.tile([t], [1]));
    });
}

/// `a` writes `y`; `w` reads it after `ready`, which `b` signals and `gate` signals too
/// when its condition holds, after waiting for `a`. Only an active `gate` orders `a`
/// before `w`; `want` is the count that arrives either way.
#[megakernel(dims(N = 4))]
pub fn gated_read(
    flag: &Tensor<i32, { [1] }>,
    want: &Tensor<u32, { [1] }>,
    x: &Tensor<f32, { [N] }>,
    y: &mut Tensor<f32, { [N] }>,
    z: &mut Tensor<f32, { [N] }>,
) {
    let written = event!([1]);
    let ready = event!([1], count = dyn(want));
    tile!(a[i] in [1] {
        add(x.tile([i], [N]), x.tile([i], [N]), y.tile([i], [N]));
        signal!(written[i]);
    });
    tile!(gate[i] in [1] if i < flag[0] {
        wait!(written[i]);
        signal!(ready[i]);
    });
    tile!(b[i] in [1] {
        signal!(ready[i]);
    });
    tile!(w[i] in [1] {
        wait!(ready[i]);
        add(y.tile([i], [N]), y.tile([i], [N]), z.tile([i], [N]));
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

fn run_routed(topk: [i32; 8], options: &LaunchOptions) -> Result<(Vec<f32>, Vec<f32>)> {
    let topk = Tensor::from_vec(&[4, 2], topk.to_vec()).unwrap();
    let x = Tensor::<f32>::random(&[4], 7);
    let (mut counts, mut tokens) = (Tensor::<i32>::poisoned(&[4]), Tensor::<i32>::poisoned(&[4, 8]));
    let (mut y, mut out) = (Tensor::<f32>::poisoned(&[4]), Tensor::<f32>::poisoned(&[4]));
    routed_read::launch_with(&Cpu::new(), options, &topk, &x, &mut counts, &mut tokens, &mut y, &mut out)?;
    Ok((x.into_vec(), out.into_vec()))
}

#[test]
fn a_read_that_the_launch_routing_leaves_unordered_is_a_race_error() {
    // token t is picked by expert t (and t + 1): every `fin[t]` is ordered after `group[t]`
    let ordered = [0, 3, 1, 0, 2, 1, 3, 2];
    // token 0 is picked by experts 1 and 2, not by 0, which writes `y[0]`
    let unordered = [1, 2, 2, 3, 3, 0, 0, 1];
    for o in every_option() {
        let (x, out) = run_routed(ordered, &o).unwrap_or_else(|e| panic!("{o:?}: {e}"));
        for (t, (&x, &got)) in x.iter().zip(&out).enumerate() {
            assert_eq!(got, 4.0 * x, "out[{t}], {o:?}");
        }
        let err = run_routed(unordered, &o).unwrap_err();
        let Error::Resolve { kernel, .. } = &err else { panic!("{o:?}: {err}") };
        assert_eq!(kernel, "routed_read");
        let text = err.to_string();
        assert!(text.contains("data race: `fin[0]` reads `y[0]` written by `group[0]`"), "{o:?}: {text}");
        assert!(text.contains("as this launch routed its signals"), "{text}");
    }
}

#[test]
fn observing_can_be_turned_off_and_on() {
    let unordered = [1, 2, 2, 3, 3, 0, 0, 1];
    let off = LaunchOptions { observe: Some(false), ..Default::default() };
    // unchecked, the launch runs (its answer may be wrong: that is what observing is for)
    run_routed(unordered, &off).unwrap();
    // a megakernel whose routing the host knows can be observed too, and passes
    let on = LaunchOptions { observe: Some(true), ..Default::default() };
    let (x, out) = run_gated(1, 2, &on).unwrap();
    assert!(x.iter().zip(&out).all(|(&x, &o)| o == 4.0 * x), "{out:?}");
}

fn run_gated(flag: i32, want: u32, options: &LaunchOptions) -> Result<(Vec<f32>, Vec<f32>)> {
    let flag = Tensor::from_vec(&[1], vec![flag]).unwrap();
    let want = Tensor::from_vec(&[1], vec![want]).unwrap();
    let x = Tensor::<f32>::random(&[4], 3);
    let (mut y, mut z) = (Tensor::<f32>::poisoned(&[4]), Tensor::<f32>::poisoned(&[4]));
    gated_read::launch_with(&Cpu::new(), options, &flag, &want, &x, &mut y, &mut z)?;
    Ok((x.into_vec(), z.into_vec()))
}

#[test]
fn a_read_ordered_only_through_a_task_its_condition_switched_off_is_a_race_error() {
    for o in every_option() {
        let (x, z) = run_gated(1, 2, &o).unwrap_or_else(|e| panic!("{o:?}: {e}"));
        assert!(x.iter().zip(&z).all(|(&x, &z)| z == 4.0 * x), "{o:?}: {z:?}");
        let err = run_gated(0, 1, &o).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("data race: `w[0]` reads `y[0..4]` written by `a[0]`"), "{o:?}: {text}");
    }
}
