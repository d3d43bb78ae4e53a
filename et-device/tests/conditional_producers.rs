//! A conditional producer's event with the count that arrives (`count = dyn(..)`, 0 where
//! the producer is inactive): the count is taken as declared and checked by the counters
//! (the CPU workers, and on a GPU, where there is one, the device's), not held to the
//! tally over every task.

use std::time::Duration;

use et_core::prelude::*;
use et_core::{Error, LaunchOptions, ScheduleKind};
use et_device::Cuda;

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
    // a count above every signal that can arrive (2, where only `p[0]` signals `e[0]`): a
    // launch error before anything runs, not a deadlock
    let beyond = Tensor::<u32>::from_vec(&[2], vec![2, 0]).unwrap();
    let err = cond_dyn::launch(&cpu, &c, &beyond, &x, &mut y, &mut z).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, Error::Resolve { .. }), "{err}");
    assert!(message.contains("cond_dyn") && message.contains("e[0] receives at most 1 signal"), "{err}");
}

#[test]
#[ignore = "needs NVRTC: run with --ignored where libnvrtc is"]
fn the_conditional_kernel_compiles_to_sm90_cubin_for_each_schedule() {
    let compiler = et_device::Compiler::new("sm_90a").unwrap_or_else(|e| panic!("{e}")).with_cache_dir(None);
    for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
        if let Err(e) = compiler.compile_kernel(&cond_dyn::KERNEL, schedule) {
            panic!("{schedule:?}: {e}");
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn on_the_gpu_the_count_that_arrives_runs_and_a_wrong_one_is_reported() {
    let gpu = Cuda::new(0).unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"));
    let on = |schedule| LaunchOptions {
        schedule: Some(schedule),
        watchdog: Duration::from_millis(500),
        ..Default::default()
    };
    for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
        for active in [vec![true, false], vec![false; 3], vec![true; 3], vec![false, true, true, false, true]] {
            let (c, cnt, x) = tensors(&active);
            let n = active.len();
            let (dc, dcnt, dx) = (gpu.upload(&c).unwrap(), gpu.upload(&cnt).unwrap(), gpu.upload(&x).unwrap());
            let (mut y, mut z) = (gpu.poisoned::<f32>(&[n]).unwrap(), gpu.poisoned::<f32>(&[n]).unwrap());
            cond_dyn::launch_with(&gpu, &on(schedule), &dc, &dcnt, &dx, &mut y, &mut z)
                .unwrap_or_else(|e| panic!("{active:?} {schedule:?}: {e}"));
            let (y, z) = (gpu.download(&y).unwrap(), gpu.download(&z).unwrap());
            for i in 0..n {
                // y is written only where the producer ran: its poison stays elsewhere
                if active[i] {
                    assert_eq!(y.as_slice()[i], 2.0 * x.as_slice()[i], "{active:?} {schedule:?}");
                }
                assert_eq!(z.as_slice()[i], 2.0 * x.as_slice()[i], "{active:?} {schedule:?}");
            }
        }
        // a count of 1 where the producer is inactive: the watchdog names the waiter
        let (c, _, x) = tensors(&[true, false]);
        let too_many = Tensor::<u32>::from_vec(&[2], vec![1, 1]).unwrap();
        let (dc, dx, dcnt) = (gpu.upload(&c).unwrap(), gpu.upload(&x).unwrap(), gpu.upload(&too_many).unwrap());
        let (mut y, mut z) = (gpu.poisoned::<f32>(&[2]).unwrap(), gpu.poisoned::<f32>(&[2]).unwrap());
        let err = cond_dyn::launch_with(&gpu, &on(schedule), &dc, &dcnt, &dx, &mut y, &mut z).unwrap_err();
        let Error::Watchdog { wait, .. } = &err else { panic!("{schedule:?}: expected the watchdog, got {err}") };
        assert_eq!((wait.task.as_str(), wait.element.as_str()), ("t[1]", "e[1]"), "{schedule:?}: {err}");
    }
    // a count of 0 where the producer is active: the dynamic schedule reads the counter
    // back and reports the signal past the count (the static one does not look)
    let (c, _, x) = tensors(&[true, false]);
    let too_few = Tensor::<u32>::from_vec(&[2], vec![0, 0]).unwrap();
    let (dc, dx, dcnt) = (gpu.upload(&c).unwrap(), gpu.upload(&x).unwrap(), gpu.upload(&too_few).unwrap());
    let (mut y, mut z) = (gpu.poisoned::<f32>(&[2]).unwrap(), gpu.poisoned::<f32>(&[2]).unwrap());
    let err = cond_dyn::launch_with(&gpu, &on(ScheduleKind::Dynamic), &dc, &dcnt, &dx, &mut y, &mut z).unwrap_err();
    let Error::Overcount { task, element, .. } = &err else { panic!("expected an overcount, got {err}") };
    assert_eq!((task.as_str(), element.as_str()), ("p[0]", "e[0]"), "{err}");
}
