//! The prefetched GEMV chain (ui pass program `gemv_chain`): the generated order and (on
//! a GPU) its result against the host reference; `nvrtc_compile` compiles it for sm_90a.

use et_core::{LaunchOptions, ScheduleKind};
use ui_tests::gemv_chain::{self, gemv_chain as chain};

#[test]
fn the_prefetch_is_generated_before_the_wait_and_the_arena_is_sized_from_the_ops() {
    let body = &chain::KERNEL.cuda.body;
    let group = &body[body.find("et_group_1(").expect("the step group")..];
    let group = &group[..group.find("\n}\n").expect("its end")];
    let prefetch = group.find("::gemv_prefetch(").expect("the prefetch call");
    let wait = group.find("ctx.wait_done(").expect("the wait");
    let consume = group.find("::gemv_consume(").expect("the consume call");
    assert!(prefetch < wait && wait < consume, "{group}");
    // a range wait: the threads poll the step's 16 elements, one barrier joins them
    assert_eq!(group.matches("wait_done").count(), 1, "{group}");
    assert!(group.contains("k += blockDim.x"), "{group}");
    // static extents reach CUDA as template arguments
    assert!(group.contains("et::make_tile<et::bf16, 2, et::Ext<16, 256>>"), "{group}");
    // both calls take the arena: 128 bytes of mbarrier line and 16 x 256 bf16
    assert_eq!(chain::KERNEL.cuda.smem, [8320, 8320, 8320, 8320]);
    assert_eq!(chain::KERNEL.arena_bytes(), 8320);
    let src = chain::KERNEL.cuda_source();
    assert!(src.contains("#define ET_SMEM_ARG_1 , ctx.smem()"), "the consume call gets the arena");
    assert_eq!(chain::KERNEL.cuda.block_threads, et_core::DEFAULT_THREADS);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_prefetched_gemv_chain_equals_the_reference_on_both_schedules() {
    let gpu = et_device::Cuda::new(0).unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"));
    for steps in [1, 2, 7, 40] {
        for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
            for seed in 0..2 {
                let options = LaunchOptions { schedule: Some(schedule), ..Default::default() };
                let err = gemv_chain::check(&gpu, steps, 100 * steps as u64 + seed, &options);
                // bf16 outputs (8 significant bits) summed in another order, step after step
                assert!(err < 2e-2, "{steps} steps, {schedule:?}, seed {seed}: relative error {err}");
            }
        }
    }
}

/// `gemv_consume` without the prefetch of its own tile: none at all, or another tile's.
/// The GPU then reads the weights from global memory (the CPU always does).
mod mismatched {
    use et_core::prelude::*;

    /// Consume without any prefetch.
    #[megakernel]
    pub fn consume_alone(
        w: &Tensor<bf16, { [N * 16, 256] }>,
        x: &Tensor<bf16, { [4, 256] }>,
        y: &mut Tensor<bf16, { [4, N * 16] }>,
    ) {
        tile!(step[n] in [N] {
            gemv_consume(w.tile([n, 0], [16, 256]), x.tile([0, 0], [4, 256]), y.tile([0, n], [4, 16]));
        });
    }

    /// Prefetch of the next tile (wrapping), consume of this one.
    #[megakernel]
    pub fn consume_other(
        w: &Tensor<bf16, { [N * 16, 256] }>,
        x: &Tensor<bf16, { [4, 256] }>,
        y: &mut Tensor<bf16, { [4, N * 16] }>,
    ) {
        tile!(step[n] in [N] {
            gemv_prefetch(w.tile([N - 1 - n, 0], [16, 256]));
            gemv_consume(w.tile([n, 0], [16, 256]), x.tile([0, 0], [4, 256]), y.tile([0, n], [4, 16]));
        });
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_consume_without_its_own_prefetch_reads_global_memory_and_is_right() {
    use et_core::prelude::*;
    let gpu = et_device::Cuda::new(0).unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"));
    for n in [1usize, 2, 5] {
        let w = Tensor::<bf16>::random(&[n * 16, 256], n as u64);
        let x = Tensor::<bf16>::random(&[4, 256], 7);
        let mut want = Tensor::<bf16>::zeros(&[4, n * 16]);
        mismatched::consume_alone::launch(&Cpu::new(), &w, &x, &mut want).unwrap();
        let (dw, dx) = (gpu.upload(&w).unwrap(), gpu.upload(&x).unwrap());
        for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
            let options = LaunchOptions { schedule: Some(schedule), ..Default::default() };
            let mut y = gpu.poisoned::<bf16>(&[4, n * 16]).unwrap();
            mismatched::consume_alone::launch_with(&gpu, &options, &dw, &dx, &mut y).unwrap();
            let err = et_core::relative_error(&gpu.download(&y).unwrap(), &want);
            assert!(err < 1e-2, "alone, {n} tiles, {schedule:?}: relative error {err}");
            let mut y = gpu.poisoned::<bf16>(&[4, n * 16]).unwrap();
            mismatched::consume_other::launch_with(&gpu, &options, &dw, &dx, &mut y).unwrap();
            let err = et_core::relative_error(&gpu.download(&y).unwrap(), &want);
            assert!(err < 1e-2, "other, {n} tiles, {schedule:?}: relative error {err}");
        }
    }
}

#[test]
#[ignore = "needs NVRTC: run with --ignored where libnvrtc is"]
fn the_mismatched_pairs_compile_to_sm90_cubin() {
    let compiler = et_device::Compiler::new("sm_90a").unwrap_or_else(|e| panic!("{e}")).with_cache_dir(None);
    for k in [&mismatched::consume_alone::KERNEL, &mismatched::consume_other::KERNEL] {
        for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
            if let Err(e) = compiler.compile_kernel(k, schedule) {
                panic!("{} {schedule:?}: {e}", k.name());
            }
        }
    }
}
