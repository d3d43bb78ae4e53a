//! The split-K megakernels on the CPU backend, at several symbolic sizes, under chaos.

use et_core::prelude::*;
use et_core::relative_error;
use splitk::{K_SLICE, SPLITS, TILE, gemm_reference, row_sum_reference, split_row_sum, splitk_gemm};

#[test]
fn splitk_gemm_matches_reference_at_several_sizes_and_schedules() {
    let cpu = Cpu::with_workers(4);
    for (seed, (mt, nt)) in [(1usize, 1usize), (2, 3), (3, 1)].into_iter().enumerate() {
        let (m, n, k) = (mt * TILE, nt * TILE, SPLITS * K_SLICE);
        let a = Tensor::<bf16>::random(&[m, k], 10 + seed as u64);
        let b = Tensor::<bf16>::random(&[k, n], 20 + seed as u64);
        let want = gemm_reference(&a, &b);
        for (i, schedule) in [ScheduleKind::Static, ScheduleKind::Dynamic].into_iter().enumerate() {
            for chaos in [None, Some(seed as u64 * 7 + i as u64)] {
                let mut part = Tensor::<f32>::poisoned(&[m * SPLITS, n]);
                let mut c = Tensor::<bf16>::poisoned(&[m, n]);
                let opts = LaunchOptions { schedule: Some(schedule), chaos, trace: None, ..Default::default() };
                let report = splitk_gemm::launch_with(&cpu, &opts, &a, &b, &mut part, &mut c).unwrap();
                assert_eq!(report.tasks as usize, mt * nt * (SPLITS + 1));
                let err = relative_error(&c, &want);
                assert!(err < 1e-2, "{mt}x{nt} {schedule:?} chaos {chaos:?}: error {err}");
            }
        }
    }
}

#[test]
fn split_row_sum_under_chaos() {
    let cpu = Cpu::with_workers(4);
    for r in [1usize, 3, 6] {
        let a = Tensor::<f32>::random(&[r * 32, 128], r as u64);
        let want = row_sum_reference(&a);
        for seed in 0..20 {
            let mut part = Tensor::<f32>::poisoned(&[r * 32, 4]);
            let mut c = Tensor::<f32>::poisoned(&[r * 32]);
            let opts = LaunchOptions { chaos: Some(seed), trace: None, ..Default::default() };
            split_row_sum::launch_with(&cpu, &opts, &a, &mut part, &mut c).unwrap();
            assert!(relative_error(&c, &want) < 1e-5);
        }
    }
}

#[test]
fn wrong_shapes_are_clear_errors() {
    let cpu = Cpu::new();
    let a = Tensor::<f32>::zeros(&[64, 128]);
    let mut part = Tensor::<f32>::zeros(&[64, 4]);
    let mut c = Tensor::<f32>::zeros(&[96]);
    let err = split_row_sum::launch(&cpu, &a, &mut part, &mut c).unwrap_err().to_string();
    assert!(err.contains("tensor `c` dimension 0 is 96, but the megakernel declares `32*R` = 64"), "{err}");
}

#[test]
fn kernels_are_registered_with_cuda_source() {
    let names: Vec<&str> = et_core::registered_kernels().iter().map(|k| k.kernel.name()).collect();
    assert!(names.contains(&"splitk_gemm") && names.contains(&"split_row_sum"), "{names:?}");
    let src = splitk_gemm::KERNEL.cuda_source();
    assert!(src.contains("extern \"C\" __global__"));
    assert!(src.contains("__device__ void matmul"));
    assert!(src.contains("#line"));
    assert!(src.contains("lib.rs\""), "line directives name the user's file");
}
