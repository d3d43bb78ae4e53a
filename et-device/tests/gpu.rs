//! The CUDA backend on a real GPU (ignored where there is none): results equal the CPU
//! reference, one compilation per schedule serves every size, the watchdog turns a bad
//! dependency into an error, traces list every task that ran.

use std::time::{Duration, Instant};

use et_core::prelude::*;
use et_core::{Deferral, Error, Prepared, relative_error};
use et_device::{Cuda, CudaTensor};
use splitk::{K_SLICE, SPLITS, TILE, gemm_reference, split_row_sum, splitk_gemm};
use ui_tests::{
    chain_dynamic, layer_loop, moe_routing, prefetch_diamond, ranges, scalar_index_arguments,
    split_row_sum as ui_split, static_dims_counts,
};

fn gpu() -> Cuda {
    Cuda::new(0).unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"))
}

#[test]
fn no_gpu_is_an_error_not_a_panic() {
    // runs everywhere: where there is a GPU it opens; elsewhere the error says why
    match Cuda::new(0) {
        Ok(gpu) => assert!(gpu.sm_count() > 0),
        Err(Error::Unavailable(why)) => {
            // the message names what is missing, in the order Cuda::new looks
            let cause = if et_device::driver_available().is_err() {
                "the CUDA driver library (libcuda.so) was not found"
            } else if why.contains("NVRTC") {
                "NVRTC (libnvrtc.so.13) was not found"
            } else {
                "sees no GPU"
            };
            assert!(why.contains(cause), "expected `{cause}` in: {why}");
        }
        Err(other) => panic!("expected Unavailable, got {other}"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn splitk_gemm_equals_the_reference_at_several_sizes_with_one_compilation_per_schedule() {
    let cache = std::env::temp_dir().join(format!("et-gpu-cache-{}", std::process::id()));
    let gpu = gpu().with_cache_dir(Some(cache.clone()));
    let mut compilations = 0;
    for (seed, (mt, nt)) in [(1usize, 1usize), (4, 3), (16, 16), (33, 5)].into_iter().enumerate() {
        let (m, n, k) = (mt * TILE, nt * TILE, SPLITS * K_SLICE);
        let a = Tensor::<bf16>::random(&[m, k], 100 + seed as u64);
        let b = Tensor::<bf16>::random(&[k, n], 200 + seed as u64);
        let want = gemm_reference(&a, &b);
        for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
            let (da, db) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
            let mut part = gpu.poisoned::<f32>(&[m * SPLITS, n]).unwrap();
            let mut c = gpu.poisoned::<bf16>(&[m, n]).unwrap();
            let opts = LaunchOptions { schedule: Some(schedule), trace: None, ..Default::default() };
            let report = splitk_gemm::launch_with(&gpu, &opts, &da, &db, &mut part, &mut c).unwrap();
            compilations += report.compiled as usize;
            let err = relative_error(&gpu.download(&c).unwrap(), &want);
            assert!(err < 1e-2, "{mt}x{nt} tiles, {schedule:?}: relative error {err}");
        }
    }
    assert_eq!(compilations, 2, "one module per schedule serves every size");
    std::fs::remove_dir_all(&cache).ok();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_kernel_precompiled_on_another_thread_launches_without_compiling() {
    let cache = std::env::temp_dir().join(format!("et-precompile-cache-{}", std::process::id()));
    let gpu = gpu().with_cache_dir(Some(cache.clone()));
    let a = Tensor::<f32>::random(&[64 * 32, 128], 6);
    // NVRTC on one thread while this one uploads, as a model's weights would
    let (ran, da) = std::thread::scope(|s| {
        let compile = s.spawn(|| gpu.precompile(&split_row_sum::KERNEL, ScheduleKind::Dynamic));
        let da = gpu.upload(&a).unwrap();
        (compile.join().unwrap().unwrap(), da)
    });
    assert!(ran, "an empty cache: NVRTC ran");
    let opts = LaunchOptions { schedule: Some(ScheduleKind::Dynamic), ..Default::default() };
    let want = splitk::row_sum_reference(&a);
    for launch in 0..2 {
        let mut part = gpu.poisoned::<f32>(&[64 * 32, 4]).unwrap();
        let mut c = gpu.poisoned::<f32>(&[64 * 32]).unwrap();
        let report = split_row_sum::launch_with(&gpu, &opts, &da, &mut part, &mut c).unwrap();
        assert!(!report.compiled, "launch {launch}: the module was loaded ahead");
        // the first launch resolves the task graph, the second finds it
        assert_eq!(report.host_graph.is_zero(), launch == 1, "launch {launch}: {report:?}");
        assert!(report.host_module.is_zero(), "launch {launch}: the module was loaded ahead: {report:?}");
        assert!(report.host_graph <= report.host_prepare, "{report:?}");
        assert!(relative_error(&gpu.download(&c).unwrap(), &want) < 1e-5);
    }
    assert!(!gpu.precompile(&split_row_sum::KERNEL, ScheduleKind::Dynamic).unwrap(), "loaded already");
    std::fs::remove_dir_all(&cache).ok();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_launch_prepared_on_another_thread_finds_its_module_and_task_graph() {
    let cache = std::env::temp_dir().join(format!("et-prepare-cache-{}", std::process::id()));
    let gpu = gpu().with_cache_dir(Some(cache.clone()));
    let rows = 64 * 32;
    let shapes = [vec![rows, 128], vec![rows, 4], vec![rows]];
    let a = Tensor::<f32>::random(&[rows, 128], 7);
    let opts = LaunchOptions { schedule: Some(ScheduleKind::Static), ..Default::default() };
    // wrong shapes, and options the GPU cannot run, fail before any compile
    let err = gpu.prepare(&split_row_sum::KERNEL, &[vec![rows, 128], vec![rows, 4], vec![32]], &opts).unwrap_err();
    assert!(err.to_string().contains("`c`"), "{err}");
    let chaos = LaunchOptions { chaos: Some(1), ..opts.clone() };
    assert!(matches!(gpu.prepare(&split_row_sum::KERNEL, &shapes, &chaos), Err(Error::Unavailable(_))));
    assert_eq!(gpu.compiler().compilations(), 0);
    // module and graph on one thread while this one uploads, as a model's weights would
    let (prepared, da) = std::thread::scope(|s| {
        let prepare = s.spawn(|| gpu.prepare(&split_row_sum::KERNEL, &shapes, &opts));
        let da = gpu.upload(&a).unwrap();
        (prepare.join().unwrap().unwrap(), da)
    });
    assert_eq!(prepared, Prepared { compiled: true, graph: true });
    let want = splitk::row_sum_reference(&a);
    for launch in 0..2 {
        let mut part = gpu.poisoned::<f32>(&[rows, 4]).unwrap();
        let mut c = gpu.poisoned::<f32>(&[rows]).unwrap();
        let report = split_row_sum::launch_with(&gpu, &opts, &da, &mut part, &mut c).unwrap();
        assert!(!report.compiled && report.host_module.is_zero(), "launch {launch}: {report:?}");
        assert!(report.host_graph.is_zero(), "launch {launch}: the graph was prepared: {report:?}");
        assert!(relative_error(&gpu.download(&c).unwrap(), &want) < 1e-5);
    }
    assert_eq!(gpu.prepare(&split_row_sum::KERNEL, &shapes, &opts).unwrap(), Prepared::default(), "ready already");
    let launch = |options: &LaunchOptions| {
        let mut part = gpu.poisoned::<f32>(&[rows, 4]).unwrap();
        let mut c = gpu.poisoned::<f32>(&[rows]).unwrap();
        let report = split_row_sum::launch_with(&gpu, options, &da, &mut part, &mut c).unwrap();
        assert!(relative_error(&gpu.download(&c).unwrap(), &want) < 1e-5);
        report
    };
    // other options are another state: a grid of 7 CTAs is resolved by its launch
    assert!(!launch(&LaunchOptions { workers: Some(7), ..opts.clone() }).host_graph.is_zero());
    // the kernel's own schedule (no `schedule`), and more workers than fit (clamped as the
    // launch clamps them), prepared and found
    let many = LaunchOptions { workers: Some(gpu.sm_count() * 10), ..Default::default() };
    assert_eq!(gpu.prepare(&split_row_sum::KERNEL, &shapes, &many).unwrap(), Prepared { compiled: false, graph: true });
    let report = launch(&many);
    assert!(report.host_graph.is_zero() && report.host_module.is_zero(), "{report:?}");
    // other shapes are another graph: the launch resolves it
    let small = Tensor::<f32>::random(&[32, 128], 8);
    let (ds, mut part, mut c) =
        (gpu.upload(&small).unwrap(), gpu.poisoned::<f32>(&[32, 4]).unwrap(), gpu.poisoned::<f32>(&[32]).unwrap());
    let report = split_row_sum::launch_with(&gpu, &opts, &ds, &mut part, &mut c).unwrap();
    assert!(!report.host_graph.is_zero(), "{report:?}");
    assert!(relative_error(&gpu.download(&c).unwrap(), &splitk::row_sum_reference(&small)) < 1e-5);
    // a graph that reads its tensors' data (routed counts) is left to the launch
    let shapes = [vec![16, 2], vec![3], vec![16, 8], vec![32, 8], vec![3, 8]];
    let prepared = gpu.prepare(&moe_routing::moe_gather::KERNEL, &shapes, &LaunchOptions::default()).unwrap();
    assert_eq!(prepared, Prepared { compiled: true, graph: false });
    moe_routing::check(&gpu, 3, 1, None);
    std::fs::remove_dir_all(&cache).ok();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn repeated_launches_need_no_counter_or_queue_reset() {
    let gpu = gpu();
    let a = Tensor::<f32>::random(&[64 * 32, 128], 5);
    let da = gpu.upload(&a).unwrap();
    let want = splitk::row_sum_reference(&a);
    // the event counters count on across launches (epochs); the dynamic schedule's ready
    // queue is zeroed after each launch, for the next
    for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
        let opts = LaunchOptions { schedule: Some(schedule), ..Default::default() };
        let mut part = gpu.poisoned::<f32>(&[64 * 32, 4]).unwrap();
        for i in 0..50 {
            let mut c = gpu.poisoned::<f32>(&[64 * 32]).unwrap();
            split_row_sum::launch_with(&gpu, &opts, &da, &mut part, &mut c).unwrap();
            let err = relative_error(&gpu.download(&c).unwrap(), &want);
            assert!(err < 1e-5, "{schedule:?}, launch {i}: error {err}");
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn ui_programs_on_the_gpu_equal_their_references() {
    let gpu = gpu();
    for rows in [1, 7, 100] {
        ui_split::check(&gpu, rows, None);
    }
    for n in [1, 64, 1000] {
        chain_dynamic::check(&gpu, n, None);
    }
    for k in [1, 10, 50] {
        ranges::check(&gpu, k, None);
    }
    for experts in [1, 3, 8] {
        for seed in 0..3 {
            moe_routing::check(&gpu, experts, seed, None);
        }
    }
    for batch in [1, 5, 16] {
        static_dims_counts::check(&gpu, batch, None);
    }
    for blocks in [1, 9, 300] {
        prefetch_diamond::check(&gpu, blocks, None);
    }
    for layers in [1, 4, 32] {
        for batch in [1, 5, 64] {
            layer_loop::check(&gpu, layers, batch, None);
        }
    }
    for n in [1, 5, 64] {
        scalar_index_arguments::check(&gpu, n, None);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_scalar_argument_that_does_not_fit_is_the_task_panic_the_cpu_reports() {
    let gpu = gpu();
    for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
        let options = LaunchOptions { schedule: Some(schedule), ..Default::default() };
        let message = scalar_index_arguments::too_far(&gpu, &options);
        for part in ["scalar argument 3 of tile op `", "::shifted` (call 0)", "(-2147483648 ..= 2147483647)"] {
            assert!(message.contains(part), "{schedule:?}: `{part}` missing from: {message}");
        }
        // the backend goes on working
        scalar_index_arguments::check(&gpu, 64, None);
    }
}

/// Routes 32 token copies evenly to 4 experts; returns the launch inputs.
fn moe_inputs(gpu: &Cuda) -> (CudaTensor<u32>, CudaTensor<f32>, CudaTensor<f32>, CudaTensor<f32>) {
    let routes: Vec<u32> = (0..32).map(|i| (i % 4) as u32).collect();
    let topk = gpu.upload(&Tensor::from_vec(&[16, 2], routes).unwrap()).unwrap();
    let x = gpu.upload(&Tensor::<f32>::random(&[16, 8], 1)).unwrap();
    (topk, x, gpu.poisoned::<f32>(&[32, 8]).unwrap(), gpu.poisoned::<f32>(&[4, 8]).unwrap())
}

/// `moe_gather` made to hang. A checked graph cannot hang, so the hang is made below the
/// checks: its CUDA with token 3's route tasks skipping their signal, which the graph
/// promises. Token 3 routes to experts 2 and 3, so `arrived[2]` gets 7 of its 8.
fn hanging_moe_gather() -> et_core::Kernel {
    let mut lying = ui_tests::moe_routing::moe_gather::KERNEL.clone();
    let signal = "ctx.signal(et_signals, el, args.event_target[0], false);";
    assert!(lying.cuda.body.contains(signal));
    let body = lying.cuda.body.replacen(signal, &format!("if (v_t != 3) {signal}"), 1);
    lying.cuda.body = et_core::__private::Cow::Owned(body);
    lying
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn watchdog_names_the_stuck_wait_and_the_context_survives() {
    use et_core::__private::{BackendTensor, KernelEntry};
    use ui_tests::moe_routing::moe_gather;
    let gpu = gpu();
    let lying = hanging_moe_gather();
    let entry = KernelEntry { kernel: &lying, cpu_tasks: moe_gather::ENTRY.cpu_tasks };
    // both paths of the watchdog: CTAs stuck in a wait (static), and CTAs stuck on the
    // ready queue because no task becomes ready (dynamic)
    for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
        let opts = LaunchOptions { schedule: Some(schedule), trace: None, ..Default::default() };
        let (topk, x, mut slots, mut y) = moe_inputs(&gpu);
        let counts = gpu.upload(&Tensor::from_vec(&[4], vec![8u32, 8, 8, 8]).unwrap()).unwrap();
        let args = [topk.raw(), counts.raw(), x.raw(), slots.raw_mut(), y.raw_mut()];
        let t0 = Instant::now();
        // SAFETY: live tensors of this backend, the written ones borrowed mutably above
        // and used for nothing else until the launch returns.
        let err = unsafe { gpu.launch(&entry, &args, &opts) }.unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(3), "{schedule:?}: took {:?}", t0.elapsed());
        let Error::Watchdog { wait, .. } = &err else { panic!("{schedule:?}: expected the watchdog, got {err}") };
        assert!(wait.task.starts_with("expert["), "{schedule:?}: {err}");
        assert_eq!(wait.element, "arrived[2]", "{schedule:?}: {err}");
        assert_eq!((wait.value, wait.expected), (7, 8), "{schedule:?}: {err}");
        // the next launches work, with the same and with other data
        moe_gather::launch_with(&gpu, &opts, &topk, &counts, &x, &mut slots, &mut y).unwrap();
        moe_routing::check(&gpu, 4, 7, None);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn an_index_value_changed_on_the_device_is_a_named_error_not_an_out_of_bounds_access() {
    use et_core::__private::{BackendTensor, Cow, KernelEntry};
    use ui_tests::moe_routing::moe_gather;
    let gpu = gpu();
    // The host checks the index data at launch; here the device changes it afterwards:
    // the CUDA of `moe_gather` with `route[1, 0]` overwriting `topk[1, 0]` with 99 (of
    // 4 experts) before reading it, as a task of the same launch could.
    let mut stale = moe_gather::KERNEL.clone();
    let signal = "    __syncthreads();\n    {\n        et::SignalBatch& et_signals = et_tail;\n    {\n        { const long long el = args.event_offset[0]";
    assert!(stale.cuda.body.contains(signal));
    let write = "    if (v_t == 1 && v_k == 0 && threadIdx.x == 0) *(volatile unsigned int*)((unsigned int*)args.t[0].ptr + 2) = 99u;\n";
    stale.cuda.body = Cow::Owned(stale.cuda.body.replacen(signal, &format!("{write}{signal}"), 1));
    let entry = KernelEntry { kernel: &stale, cpu_tasks: moe_gather::ENTRY.cpu_tasks };
    for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
        let opts = LaunchOptions { schedule: Some(schedule), trace: None, ..Default::default() };
        let (mut topk, x, mut slots, mut y) = moe_inputs(&gpu);
        let counts = gpu.upload(&Tensor::from_vec(&[4], vec![8u32, 8, 8, 8]).unwrap()).unwrap();
        let args = [topk.raw_mut(), counts.raw(), x.raw(), slots.raw_mut(), y.raw_mut()];
        // SAFETY: live tensors of this backend, the written ones borrowed mutably above
        // and used for nothing else until the launch returns.
        let err = unsafe { gpu.launch(&entry, &args, &opts) }.unwrap_err().to_string();
        for part in ["`moe_gather`", "task route[1, 0]", "`topk`", "at [1, 0]", "read 99", "outside 0..4"] {
            assert!(err.contains(part), "{schedule:?}: `{part}` missing from: {err}");
        }
        // the backend goes on working
        moe_routing::check(&gpu, 4, 7, None);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn dynamic_counts_under_the_static_schedule_equal_the_dynamic_schedule() {
    use ui_tests::moe_routing::moe_gather;
    let gpu = gpu();
    let (topk, x, mut slots, _) = moe_inputs(&gpu);
    let counts = gpu.upload(&Tensor::from_vec(&[4], vec![8u32, 8, 8, 8]).unwrap()).unwrap();
    let mut results = Vec::new();
    for schedule in [ScheduleKind::Dynamic, ScheduleKind::Static, ScheduleKind::Static] {
        let opts = LaunchOptions { schedule: Some(schedule), trace: None, ..Default::default() };
        let mut y = gpu.poisoned::<f32>(&[4, 8]).unwrap();
        moe_gather::launch_with(&gpu, &opts, &topk, &counts, &x, &mut slots, &mut y).unwrap();
        results.push(gpu.download(&y).unwrap());
    }
    // the sequential reference: expert e sums x + x over the token copies routed to it
    let xs = gpu.download(&x).unwrap();
    let want: Vec<f32> = (0..4)
        .flat_map(|e| {
            let xs = &xs;
            (0..8).map(move |c| (0..32).filter(|s| s % 4 == e).map(|s| 2.0 * xs.get(&[s / 2, c])).sum::<f32>())
        })
        .collect();
    assert!(relative_error(&results[0], &Tensor::from_vec(&[4, 8], want).unwrap()) < 1e-5);
    assert_eq!(results[0], results[1]);
    assert_eq!(results[1], results[2], "a second static launch (next epoch) agrees");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn trace_is_valid_json_with_every_task() {
    let gpu = gpu();
    let (m, n, k) = (8 * TILE, 4 * TILE, SPLITS * K_SLICE);
    let a = gpu.upload(&Tensor::<bf16>::random(&[m, k], 1)).unwrap();
    let b = gpu.upload(&Tensor::<bf16>::random(&[k, n], 2)).unwrap();
    let mut part = gpu.poisoned::<f32>(&[m * SPLITS, n]).unwrap();
    let mut c = gpu.poisoned::<bf16>(&[m, n]).unwrap();
    let path = std::env::temp_dir().join(format!("et-gpu-trace-{}.json", std::process::id()));
    let opts = LaunchOptions { trace: Some(path.clone()), ..Default::default() };
    let report = splitk_gemm::launch_with(&gpu, &opts, &a, &b, &mut part, &mut c).unwrap();
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let events = json["traceEvents"].as_array().unwrap();
    let tasks: Vec<&serde_json::Value> =
        events.iter().filter(|e| e["ph"] == "X" && e["cat"] != et_core::trace::WAIT_CATEGORY).collect();
    assert_eq!(tasks.len(), report.tasks as usize);
    // each task that waited has one nested wait slice inside its own
    let waits = events.iter().filter(|e| e["cat"] == et_core::trace::WAIT_CATEGORY);
    assert!(waits.clone().all(|w| tasks.iter().any(|t| t["tid"] == w["tid"] && t["ts"] == w["ts"])));
    assert!(waits.count() <= tasks.len());
    assert!(tasks.iter().all(|t| t["dur"].as_f64().unwrap() >= 0.0));
    assert!(tasks.iter().any(|t| t["name"] == "reduce[7, 3]"));
    std::fs::remove_file(&path).ok();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn wrong_shapes_are_errors_on_the_gpu_too() {
    let gpu = gpu();
    let a = gpu.upload(&Tensor::<f32>::zeros(&[64, 128])).unwrap();
    let mut part = gpu.upload(&Tensor::<f32>::zeros(&[64, 4])).unwrap();
    let mut c = gpu.upload(&Tensor::<f32>::zeros(&[65])).unwrap();
    let err = split_row_sum::launch(&gpu, &a, &mut part, &mut c).unwrap_err().to_string();
    assert!(err.contains("tensor `c` dimension 0 is 65"), "{err}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn observing_is_a_cpu_feature_and_asking_the_gpu_for_it_is_an_error() {
    let gpu = gpu();
    let a = gpu.upload(&Tensor::<f32>::zeros(&[64, 128])).unwrap();
    let mut part = gpu.upload(&Tensor::<f32>::zeros(&[64, 4])).unwrap();
    let mut c = gpu.upload(&Tensor::<f32>::zeros(&[64])).unwrap();
    let observed = LaunchOptions { observe: Some(true), ..Default::default() };
    let err = split_row_sum::launch_with(&gpu, &observed, &a, &mut part, &mut c).unwrap_err();
    assert!(matches!(err, Error::Unavailable(_)), "{err}");
    assert!(err.to_string().contains("observing a launch"), "{err}");
    // `None` (observe where the CPU would) and `Some(false)` launch
    for observe in [None, Some(false)] {
        let options = LaunchOptions { observe, ..Default::default() };
        split_row_sum::launch_with(&gpu, &options, &a, &mut part, &mut c).unwrap();
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn views_share_memory_and_launch_like_tensors() {
    let gpu = gpu();
    // two stacked inputs of 3 row blocks each; run on the second through a row view
    let stacked = Tensor::<f32>::random(&[2 * 96, 128], 9);
    let d = gpu.upload(&stacked).unwrap();
    let second = d.rows(96..192).unwrap();
    assert_eq!(second.shape(), &[96, 128]);
    let mut part = gpu.poisoned::<f32>(&[96, 4]).unwrap();
    let mut c = gpu.poisoned::<f32>(&[96]).unwrap();
    split_row_sum::launch(&gpu, &second, &mut part, &mut c).unwrap();
    let host_second = Tensor::from_vec(&[96, 128], stacked.as_slice()[96 * 128..].to_vec()).unwrap();
    assert!(relative_error(&gpu.download(&c).unwrap(), &splitk::row_sum_reference(&host_second)) < 1e-5);
    // a reshaped view downloads the same elements
    let flat = gpu.download(&d.reshape(&[2 * 96 * 128]).unwrap()).unwrap();
    assert_eq!(flat.as_slice(), stacked.as_slice());
    assert!(d.rows(100..300).is_err() && d.reshape(&[7]).is_err());
    // a writable view: the kernel writes rows 32..64 of a larger output, nothing else
    let mut c2 = gpu.upload(&Tensor::<f32>::zeros(&[3 * 32])).unwrap();
    let first = gpu.upload(&Tensor::from_vec(&[32, 128], stacked.as_slice()[..32 * 128].to_vec()).unwrap()).unwrap();
    let mut part2 = gpu.poisoned::<f32>(&[32, 4]).unwrap();
    split_row_sum::launch(&gpu, &first, &mut part2, &mut c2.rows_mut(32..64).unwrap()).unwrap();
    let got = gpu.download(&c2).unwrap();
    let want = splitk::row_sum_reference(&gpu.download(&first).unwrap());
    assert!(got.as_slice()[..32].iter().chain(&got.as_slice()[64..]).all(|&v| v == 0.0));
    let middle = Tensor::from_vec(&[32], got.as_slice()[32..64].to_vec()).unwrap();
    assert!(relative_error(&middle, &want) < 1e-5);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_view_swapped_out_of_its_borrow_is_still_rejected_as_an_alias() {
    let gpu = gpu();
    let a = gpu.upload(&Tensor::<f32>::zeros(&[32, 128])).unwrap();
    let mut buf = gpu.poisoned::<f32>(&[32, 4]).unwrap();
    // `escaped` takes the view's tensor, outliving the borrow of `buf`
    let mut escaped = gpu.poisoned::<f32>(&[32, 4]).unwrap();
    std::mem::swap(&mut *buf.rows_mut(0..32).unwrap(), &mut escaped);
    let mut rows = buf.rows_mut(0..8).unwrap();
    let mut c = rows.reshape_mut(&[32]).unwrap();
    let err = split_row_sum::launch(&gpu, &a, &mut escaped, &mut c).unwrap_err().to_string();
    assert!(err.contains("`part` is written and shares memory with tensor `c`"), "{err}");
    // the check runs once per set of tensors: a rejected set is not kept, so it is
    // rejected again, after a good set was launched on the same state too
    let mut part = gpu.poisoned::<f32>(&[32, 4]).unwrap();
    let mut good = gpu.poisoned::<f32>(&[32]).unwrap();
    split_row_sum::launch(&gpu, &a, &mut part, &mut good).unwrap();
    let again = split_row_sum::launch(&gpu, &a, &mut escaped, &mut c).unwrap_err().to_string();
    assert_eq!(again, err);
}

#[test]
fn the_backend_can_be_shared_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Cuda>();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn deferred_launches_run_in_order_and_settle_with_their_times() {
    let gpu = gpu();
    // back to back on one state: under the dynamic schedule each launch finds the ready
    // queue zeroed by the memset queued after the one before it
    for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
        deferred_launches_under(&gpu, schedule);
    }
}

fn deferred_launches_under(gpu: &Cuda, schedule: ScheduleKind) {
    let (rows, launches) = (64 * 32, 100);
    let a = Tensor::<f32>::random(&[rows, 128], 6);
    let da = gpu.upload(&a).unwrap();
    let mut part = gpu.poisoned::<f32>(&[rows, 4]).unwrap();
    let mut c = gpu.poisoned::<f32>(&[rows]).unwrap();
    let mut log = gpu.poisoned::<f32>(&[launches, rows]).unwrap();
    let poison = vec![f32::NAN; rows];
    let want = splitk::row_sum_reference(&a);
    // SAFETY: every tensor launched lives until `settle` below, and only this backend's
    // operations touch them meanwhile.
    let deferred = LaunchOptions {
        defer: Some(unsafe { Deferral::new() }),
        trace: None,
        schedule: Some(schedule),
        ..Default::default()
    };
    // more launches than may be in flight at once: the oldest are settled on the way
    for k in 0..launches {
        let report = split_row_sum::launch_with(gpu, &deferred, &da, &mut part, &mut c).unwrap();
        assert!(!report.completed && report.elapsed.is_zero(), "launch {k}: {report:?}");
        // stream order: the copy sees this launch's sums, the poison lands after the copy
        gpu.copy_into(&c, &mut log, k * rows).unwrap();
        gpu.write(&mut c, &poison).unwrap();
    }
    let reports = gpu.settle().unwrap();
    assert_eq!(reports.len(), launches);
    assert!(reports.iter().all(|r| r.completed && !r.elapsed.is_zero()), "{:?}", reports.first());
    assert!(gpu.settle().unwrap().is_empty(), "reports are handed out once");
    let log = gpu.download(&log).unwrap();
    for (k, sums) in log.as_slice().chunks(rows).enumerate() {
        let got = Tensor::from_vec(&[rows], sums.to_vec()).unwrap();
        assert!(relative_error(&got, &want) < 1e-5, "{schedule:?}: launch {k}");
    }
    // a download settles the launches before it: its data is theirs
    split_row_sum::launch_with(gpu, &deferred, &da, &mut part, &mut c).unwrap();
    assert!(relative_error(&gpu.download(&c).unwrap(), &want) < 1e-5);
    assert_eq!(gpu.settle().unwrap().len(), 1);
    // a copy past the end of its destination is an error
    let err = gpu.copy_into(&c, &mut log_tail(gpu, rows), 1).unwrap_err();
    assert!(err.to_string().contains("from element 1 on"), "{err}");
}

fn log_tail(gpu: &Cuda, rows: usize) -> CudaTensor<f32> {
    gpu.poisoned::<f32>(&[rows]).unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_deferred_launch_that_hangs_is_the_error_of_what_settles_it_and_the_launches_after_it_recover() {
    use et_core::__private::{BackendTensor, KernelEntry};
    use ui_tests::moe_routing::moe_gather;
    let gpu = gpu();
    let lying = hanging_moe_gather();
    let entry = KernelEntry { kernel: &lying, cpu_tasks: moe_gather::ENTRY.cpu_tasks };
    let is_the_hang = |err: &Error| matches!(err, Error::Watchdog { wait, .. } if wait.element == "arrived[2]");
    // SAFETY: every tensor launched lives until the settles below.
    let deferred = LaunchOptions { defer: Some(unsafe { Deferral::new() }), trace: None, ..Default::default() };
    let (topk, x, mut slots, mut y) = moe_inputs(&gpu);
    let counts = gpu.upload(&Tensor::from_vec(&[4], vec![8u32, 8, 8, 8]).unwrap()).unwrap();
    let a = Tensor::<f32>::random(&[64, 128], 8);
    let da = gpu.upload(&a).unwrap();
    let mut part = gpu.poisoned::<f32>(&[64, 4]).unwrap();
    let mut c = gpu.poisoned::<f32>(&[64]).unwrap();
    let args = [topk.raw(), counts.raw(), x.raw(), slots.raw_mut(), y.raw_mut()];
    // 1. settled by `settle`: a launch of another kernel queued behind it is dropped
    // SAFETY: live tensors of this backend, kept until the settles below, written ones
    // borrowed mutably above and used for nothing else meanwhile.
    let report = unsafe { gpu.launch(&entry, &args, &deferred) }.unwrap();
    assert!(!report.completed);
    split_row_sum::launch_with(&gpu, &deferred, &da, &mut part, &mut c).unwrap();
    let t0 = Instant::now();
    let err = gpu.settle().unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(5), "took {:?}", t0.elapsed());
    assert!(is_the_hang(&err), "expected the watchdog on `arrived[2]`, got {err}");
    assert!(gpu.settle().unwrap().is_empty(), "the launch behind it is not reported");
    // 2. settled by the next launch of a kernel whose task graph reads index data on the
    // host (`topk`): that launch returns the hang's error and is not enqueued itself
    unsafe { gpu.launch(&entry, &args, &deferred) }.unwrap();
    let err = unsafe { gpu.launch(&entry, &args, &deferred) }.unwrap_err();
    assert!(is_the_hang(&err), "expected the watchdog on `arrived[2]`, got {err}");
    assert!(gpu.settle().unwrap().is_empty());
    // every state was reset: the honest kernels run, waiting and deferred
    moe_gather::launch(&gpu, &topk, &counts, &x, &mut slots, &mut y).unwrap();
    moe_routing::check(&gpu, 4, 7, None);
    split_row_sum::launch_with(&gpu, &deferred, &da, &mut part, &mut c).unwrap();
    assert!(relative_error(&gpu.download(&c).unwrap(), &splitk::row_sum_reference(&a)) < 1e-5);
}
