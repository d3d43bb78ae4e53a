//! A conditional producer's event with the count that arrives (`count = dyn(..)`, 0 where
//! the producer is inactive): the count is taken as declared and checked by the counters
//! (CPU workers here), not held to the tally over every task.

use et_core::prelude::*;
use et_core::{Error, LaunchOptions, ScheduleKind};

/// The repro: `p[i]` signals `e[i]` only where `0 < c[i]`; `t[i]` waits on `e[i]`.
#[megakernel]
pub fn cond_dyn(
    c: &Tensor<i32, { [N] }>,
    cnt: &Tensor<u32, { [N] }>,
    x: &Tensor<f32, { [N] }>,
    y: &mut Tensor<f32, { [N] }>,
    z: &mut Tensor<f32, { [N] }>,
) {
    let g = event!([N]);
    let e = event!([N], count = dyn(cnt));
    tile!(s[i] in [N] { signal!(g[i]); });
    tile!(p[i] in [N] if 0 < c[i] {
        wait!(g[i]);
        add(x.tile([i], [1]), x.tile([i], [1]), y.tile([i], [1]));
        signal!(e[i]);
    });
    tile!(t[i] in [N] {
        wait!(e[i]);
        add(x.tile([i], [1]), x.tile([i], [1]), z.tile([i], [1]));
    });
}

fn tensors(active: &[bool]) -> (Tensor<i32>, Tensor<u32>, Tensor<f32>) {
    let n = active.len();
    let c = Tensor::from_vec(&[n], active.iter().map(|&a| a as i32).collect()).unwrap();
    let cnt = Tensor::from_vec(&[n], active.iter().map(|&a| a as u32).collect()).unwrap();
    (c, cnt, Tensor::<f32>::random(&[n], n as u64))
}

#[test]
fn the_count_that_arrives_runs_under_chaos() {
    let cpu = Cpu::with_workers(4);
    for active in [vec![true, false], vec![false; 3], vec![true; 3], vec![false, true, true, false, true]] {
        let (c, cnt, x) = tensors(&active);
        let n = active.len();
        let xs = x.as_slice().to_vec();
        let plain = {
            let (mut y, mut z) = (Tensor::<f32>::zeros(&[n]), Tensor::<f32>::zeros(&[n]));
            cond_dyn::launch(&cpu, &c, &cnt, &x, &mut y, &mut z).unwrap();
            for i in 0..n {
                assert_eq!(y.as_slice().to_vec()[i], if active[i] { 2.0 * xs[i] } else { 0.0 }, "{active:?}");
                assert_eq!(z.as_slice().to_vec()[i], 2.0 * xs[i], "{active:?}");
            }
            (y.as_slice().to_vec(), z.as_slice().to_vec())
        };
        for schedule in [ScheduleKind::Dynamic, ScheduleKind::Static] {
            for seed in 0..30 {
                let (mut y, mut z) = (Tensor::<f32>::zeros(&[n]), Tensor::<f32>::zeros(&[n]));
                let opts = LaunchOptions { chaos: Some(seed), schedule: Some(schedule), ..Default::default() };
                cond_dyn::launch_with(&cpu, &opts, &c, &cnt, &x, &mut y, &mut z)
                    .unwrap_or_else(|e| panic!("{active:?} {schedule:?} seed {seed}: {e}"));
                assert_eq!(
                    (y.as_slice().to_vec(), z.as_slice().to_vec()),
                    plain,
                    "{active:?} {schedule:?} seed {seed}"
                );
            }
        }
    }
}

#[test]
fn a_count_that_does_not_arrive_is_a_launch_error_not_a_hang() {
    let cpu = Cpu::new();
    let (c, _, x) = tensors(&[true, false]);
    let (mut y, mut z) = (Tensor::<f32>::zeros(&[2]), Tensor::<f32>::zeros(&[2]));
    // a count of 1 where the producer is inactive: the wait never finishes
    let too_many = Tensor::<u32>::from_vec(&[2], vec![1, 1]).unwrap();
    let err = cond_dyn::launch(&cpu, &c, &too_many, &x, &mut y, &mut z).unwrap_err();
    assert!(matches!(err, Error::Deadlock { .. }), "{err}");
    // a count of 0 where the producer is active: one signal past the count
    let too_few = Tensor::<u32>::from_vec(&[2], vec![0, 0]).unwrap();
    let err = cond_dyn::launch(&cpu, &c, &too_few, &x, &mut y, &mut z).unwrap_err();
    assert!(matches!(err, Error::Overcount { .. }), "{err}");
}
