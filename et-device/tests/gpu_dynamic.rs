//! The dynamic schedule's queue on a real GPU (ignored where there is none): a wide
//! fan-out whose branches are long chains, dispatched early in batches and waiting in
//! place; a chain whose every step has two producers, so each step goes through the
//! completion path and the local next-task slot; a long single chain; and a graph stuck
//! on a missing signal, which the watchdog must stop with a named error; and a routed
//! signal past its element's count, which the launch must report.

use std::time::{Duration, Instant};

use et_core::prelude::*;
use et_core::{Error, relative_error};
use et_device::Cuda;

fn gpu() -> Cuda {
    Cuda::new(0).unwrap_or_else(|e| panic!("this test needs a CUDA GPU: {e}"))
}

/// One root fans out to W lanes; lane `w` is a chain of L steps,
/// `acc[w, i + 1] = acc[w, i] + x[w, i + 1]`; the sink waits on every lane's end.
/// Every lane task has a single producer (early dispatch); the sink has W (ready path).
#[megakernel(schedule = "dynamic", threads = 128)]
pub fn fan_chains(
    x: &Tensor<f32, { [W, L + 1] }>,
    zero: &Tensor<f32, { [1, 1] }>,
    base: &mut Tensor<f32, { [1, 1] }>,
    acc: &mut Tensor<f32, { [W, L + 1] }>,
    total: &mut Tensor<f32, { [1, 1] }>,
) {
    let go = event!([1]);
    let c = event!([W, L + 1]);
    tile!(root[z] in [1] {
        add(zero.tile([0, 0], [1, 1]), zero.tile([0, 0], [1, 1]), base.tile([0, 0], [1, 1]));
        signal!(go[0]);
    });
    tile!(start[w] in [W] {
        wait!(go[0]);
        add(base.tile([0, 0], [1, 1]), x.tile([w, 0], [1, 1]), acc.tile([w, 0], [1, 1]));
        signal!(c[w, 0]);
    });
    tile!(step[w, i] in [W, L] {
        wait!(c[w, i]);
        add(acc.tile([w, i], [1, 1]), x.tile([w, i + 1], [1, 1]), acc.tile([w, i + 1], [1, 1]));
        signal!(c[w, i + 1]);
    });
    tile!(sink[z] in [1] {
        wait!(c[.., L]);
        add(acc.tile([0, L], [1, 1]), acc.tile([W - 1, L], [1, 1]), total.tile([0, 0], [1, 1]));
    });
}

/// A chain whose step `i` waits on `c[i]` (from step `i - 1`) and on `k[i]` (from its own
/// kick task): two producers, so no step is early and each is released by the completion
/// of `c[i]`, into the completing CTA's local slot. `acc[i + 1] = acc[i] + 2 x[i]`.
#[megakernel(schedule = "dynamic", threads = 128)]
pub fn two_producer_chain(
    x: &Tensor<f32, { [N] }>,
    zero: &Tensor<f32, { [1] }>,
    y: &mut Tensor<f32, { [N] }>,
    acc: &mut Tensor<f32, { [N + 1] }>,
) {
    let c = event!([N + 1]);
    let k = event!([N]);
    tile!(start[z] in [1] {
        add(zero.tile([0], [1]), zero.tile([0], [1]), acc.tile([0], [1]));
        signal!(c[0]);
    });
    tile!(kick[i] in [N] {
        add(x.tile([i], [1]), x.tile([i], [1]), y.tile([i], [1]));
        signal!(k[i]);
    });
    tile!(step[i] in [N] {
        wait!(c[i]);
        wait!(k[i]);
        add(acc.tile([i], [1]), y.tile([i], [1]), acc.tile([i + 1], [1]));
        signal!(c[i + 1]);
    });
}

/// Routing written in the launch, one signal too many: with K = E = 2 both experts take
/// every token, `pick[e]` signals `taken[t]` for each token on its list, and `taken`
/// completes at one signal. The second signal of an element is an over-signal.
#[megakernel(schedule = "dynamic", dims(E = 2, K = 2, C = 4, T <= 4))]
pub fn picked_twice(
    topk: &Tensor<i32, { [T, K] }>,
    x: &Tensor<f32, { [N] }>,
    counts: &mut Tensor<i32, { [E] }>,
    tokens: &mut Tensor<i32, { [E, C] }>,
    y: &mut Tensor<f32, { [N] }>,
) {
    let taken = event!([N], count = 1);
    tile!(pick[e] in [E] {
        moe_group(topk.tile([0, 0], [T, K]), e, counts.tile([e], [1]), tokens.tile([e, 0], [1, C]));
        signal!(taken[tokens[e, 0 .. C]]);
    });
    tile!(take[t] in [N] {
        wait!(taken[t]);
        add(x.tile([t], [1]), x.tile([t], [1]), y.tile([t], [1]));
    });
}

fn dynamic() -> LaunchOptions {
    LaunchOptions { schedule: Some(ScheduleKind::Dynamic), trace: None, ..Default::default() }
}

/// The sequential reference of `fan_chains`: per lane, prefix sums of `x` in order.
fn lanes_reference(x: &Tensor<f32>, w: usize, l: usize) -> Vec<f32> {
    let mut acc = vec![0f32; w * (l + 1)];
    for lane in 0..w {
        acc[lane * (l + 1)] = 0.0 + x.get(&[lane, 0]);
        for i in 0..l {
            acc[lane * (l + 1) + i + 1] = acc[lane * (l + 1) + i] + x.get(&[lane, i + 1]);
        }
    }
    acc
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn wide_fan_out_of_long_chains_equals_the_sequential_reference() {
    let gpu = gpu();
    // 1 + W + W·L + 1 tasks: up to 60,002 tasks through batches of early dispatch
    for (seed, (w, l)) in [(1usize, 1usize), (3, 50), (300, 40), (1000, 60), (7, 2000)].into_iter().enumerate() {
        let x = Tensor::<f32>::random(&[w, l + 1], 40 + seed as u64);
        let dx = gpu.upload(&x).unwrap();
        let zero = gpu.upload(&Tensor::<f32>::zeros(&[1, 1])).unwrap();
        let want = lanes_reference(&x, w, l);
        // repeated launches: the counters carry over (epochs), the queue state does not
        for launch in 0..3 {
            let mut base = gpu.poisoned::<f32>(&[1, 1]).unwrap();
            let mut acc = gpu.poisoned::<f32>(&[w, l + 1]).unwrap();
            let mut total = gpu.poisoned::<f32>(&[1, 1]).unwrap();
            let report =
                fan_chains::launch_with(&gpu, &dynamic(), &dx, &zero, &mut base, &mut acc, &mut total).unwrap();
            assert_eq!(report.tasks as usize, 2 + w + w * l);
            let got = gpu.download(&acc).unwrap();
            assert_eq!(got.as_slice(), &want[..], "W = {w}, L = {l}, launch {launch}");
            let sum = want[l] + want[(w - 1) * (l + 1) + l];
            assert_eq!(gpu.download(&total).unwrap().as_slice(), &[sum], "W = {w}, L = {l}, launch {launch}");
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_chain_of_two_producer_steps_runs_through_the_local_slot_in_order() {
    let gpu = gpu();
    for n in [1usize, 133, 5000] {
        let x = Tensor::<f32>::random(&[n], n as u64);
        let dx = gpu.upload(&x).unwrap();
        let zero = gpu.upload(&Tensor::<f32>::zeros(&[1])).unwrap();
        let mut want = vec![0f32; n + 1];
        for i in 0..n {
            want[i + 1] = want[i] + (x.as_slice()[i] + x.as_slice()[i]);
        }
        for _ in 0..2 {
            let mut y = gpu.poisoned::<f32>(&[n]).unwrap();
            let mut acc = gpu.poisoned::<f32>(&[n + 1]).unwrap();
            two_producer_chain::launch_with(&gpu, &dynamic(), &dx, &zero, &mut y, &mut acc).unwrap();
            assert_eq!(gpu.download(&acc).unwrap().as_slice(), &want[..], "N = {n}");
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_long_dynamic_chain_and_the_splitk_fan_in_stay_correct() {
    let gpu = gpu();
    for n in [1, 1000, 20000] {
        ui_tests::chain_dynamic::check(&gpu, n, None);
    }
    // many seeds, fan-in of four per output tile: the ready path under load
    use splitk::{K_SLICE, SPLITS, TILE, gemm_reference, splitk_gemm};
    let (m, n, k) = (32 * TILE, 32 * TILE, SPLITS * K_SLICE);
    let a = Tensor::<bf16>::random(&[m, k], 3);
    let b = Tensor::<bf16>::random(&[k, n], 4);
    let (da, db) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    let mut part = gpu.poisoned::<f32>(&[m * SPLITS, n]).unwrap();
    let mut c = gpu.poisoned::<bf16>(&[m, n]).unwrap();
    splitk_gemm::launch_with(&gpu, &dynamic(), &da, &db, &mut part, &mut c).unwrap();
    let err = relative_error(&gpu.download(&c).unwrap(), &gemm_reference(&a, &b));
    assert!(err < 1e-2, "relative error {err}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_missing_signal_in_an_early_chain_is_a_named_watchdog_error() {
    use et_core::__private::{BackendTensor, Cow, KernelEntry};
    let gpu = gpu();
    // The CUDA of `fan_chains` with step[1, 3] skipping its signal: step[1, 4] and the
    // lane's later steps, dispatched early, wait in place on elements that never complete.
    let mut lying = fan_chains::KERNEL.clone();
    let body = lying.cuda.body.to_string();
    let at = body.find("et_group_2(").expect("the step group");
    let signal = "ctx.signal(et_signals, el, args.event_target[1], false);";
    let (head, tail) = body.split_at(at);
    assert!(tail.contains(signal));
    let tail = tail.replacen(signal, &format!("if (!(v_w == 1 && v_i == 3)) {signal}"), 1);
    lying.cuda.body = Cow::Owned(format!("{head}{tail}"));
    let entry = KernelEntry { kernel: &lying, cpu_tasks: fan_chains::ENTRY.cpu_tasks };
    let (w, l) = (4usize, 12usize);
    let x = gpu.upload(&Tensor::<f32>::random(&[w, l + 1], 5)).unwrap();
    let zero = gpu.upload(&Tensor::<f32>::zeros(&[1, 1])).unwrap();
    let mut base = gpu.poisoned::<f32>(&[1, 1]).unwrap();
    let mut acc = gpu.poisoned::<f32>(&[w, l + 1]).unwrap();
    let mut total = gpu.poisoned::<f32>(&[1, 1]).unwrap();
    let opts = LaunchOptions { watchdog: Duration::from_millis(500), ..dynamic() };
    let args = [x.raw(), zero.raw(), base.raw_mut(), acc.raw_mut(), total.raw_mut()];
    let t0 = Instant::now();
    // SAFETY: live tensors of this backend, the written ones borrowed mutably above and used
    // for nothing else until the launch returns.
    let err = unsafe { gpu.launch(&entry, &args, &opts) }.unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(3), "took {:?}", t0.elapsed());
    let Error::Watchdog { wait, .. } = &err else { panic!("expected the watchdog, got {err}") };
    // whichever of the lane's waiting steps timed out first names itself and its element
    let j: usize = wait
        .task
        .strip_prefix("step[1, ")
        .and_then(|s| s.strip_suffix(']'))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("expected a step of lane 1: {err}"));
    assert!((4..l).contains(&j), "{err}");
    assert_eq!(wait.element, format!("c[1, {j}]"), "{err}");
    assert_eq!((wait.value, wait.expected), (0, 1), "{err}");
    // the honest kernel runs next, in the same context
    let xs = gpu.download(&x).unwrap();
    fan_chains::launch_with(&gpu, &dynamic(), &x, &zero, &mut base, &mut acc, &mut total).unwrap();
    assert_eq!(gpu.download(&acc).unwrap().as_slice(), &lanes_reference(&xs, w, l)[..]);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_routed_signal_past_the_count_stops_the_launch_naming_task_and_element() {
    let gpu = gpu();
    let topk = gpu.upload(&Tensor::from_vec(&[4, 2], vec![0, 1, 1, 0, 0, 1, 1, 0]).unwrap()).unwrap();
    let x = gpu.upload(&Tensor::<f32>::random(&[4], 3)).unwrap();
    let mut counts = gpu.poisoned::<i32>(&[2]).unwrap();
    let mut tokens = gpu.poisoned::<i32>(&[2, 4]).unwrap();
    let mut y = gpu.poisoned::<f32>(&[4]).unwrap();
    for _ in 0..3 {
        let err = picked_twice::launch_with(&gpu, &dynamic(), &topk, &x, &mut counts, &mut tokens, &mut y).unwrap_err();
        let Error::Overcount { kernel, task, element, value, expected } = &err else { panic!("{err}") };
        assert_eq!(kernel, "picked_twice", "{err}");
        assert!(task.starts_with("pick["), "{err}");
        assert!(element.starts_with("taken["), "{err}");
        assert_eq!((*value, *expected), (2, 1), "{err}");
    }
    // the context stays usable: an honest kernel runs next
    let (w, l) = (2usize, 3usize);
    let x = gpu.upload(&Tensor::<f32>::random(&[w, l + 1], 6)).unwrap();
    let zero = gpu.upload(&Tensor::<f32>::zeros(&[1, 1])).unwrap();
    let (mut base, mut total) = (gpu.poisoned::<f32>(&[1, 1]).unwrap(), gpu.poisoned::<f32>(&[1, 1]).unwrap());
    let mut acc = gpu.poisoned::<f32>(&[w, l + 1]).unwrap();
    fan_chains::launch_with(&gpu, &dynamic(), &x, &zero, &mut base, &mut acc, &mut total).unwrap();
    let xs = gpu.download(&x).unwrap();
    assert_eq!(gpu.download(&acc).unwrap().as_slice(), &lanes_reference(&xs, w, l)[..]);
}

#[test]
#[ignore = "needs NVRTC: run with --ignored where libnvrtc is"]
fn the_queue_test_kernels_compile_to_sm90_cubin() {
    let compiler = et_device::Compiler::new("sm_90a").unwrap_or_else(|e| panic!("{e}")).with_cache_dir(None);
    for k in [&fan_chains::KERNEL, &two_producer_chain::KERNEL, &picked_twice::KERNEL] {
        if let Err(e) = compiler.compile_source(k.name(), &k.cuda_source()) {
            panic!("{}: {e}", k.name());
        }
    }
}
