//! CPU backend: hand-built graphs under both schedules, chaos, deadlock detection.

mod common;

use std::time::{Duration, Instant};

use common::*;
use et_core::__private::{Access, Count, DType, Index};
use et_core::cpu::TaskContext;
use et_core::ops::add;
use et_core::{Backend, Cpu, Error, LaunchOptions, Placement, RawTensor, ScheduleKind, Tensor};

/// Launches `k` on 4 CPU workers. Every caller passes views of tensors alive for the
/// call, with the written ones from `raw_mut`.
fn run(k: &TestKernel, args: &[RawTensor], options: &LaunchOptions) -> et_core::Result<et_core::LaunchReport> {
    // SAFETY: see above.
    unsafe { Cpu::with_workers(4).launch(&k.entry(), args, options) }
}

fn every_schedule() -> Vec<LaunchOptions> {
    let mut v = Vec::new();
    for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
        for placement in [Placement::RoundRobin, Placement::CostAware] {
            v.push(LaunchOptions { schedule: Some(schedule), placement, trace: None, ..Default::default() });
        }
    }
    v
}

#[test]
fn split_row_sum_matches_sequential_at_several_sizes() {
    let k = split_row_sum(false);
    for (seed, rows_blocks) in [1usize, 2, 5, 9].into_iter().enumerate() {
        let a = Tensor::<f32>::random(&[rows_blocks * 32, 128], seed as u64);
        let (part_ref, c_ref) = split_row_sum_reference(&a);
        for opts in every_schedule() {
            let mut part = Tensor::<f32>::poisoned(&[rows_blocks * 32, 4]);
            let mut c = Tensor::<f32>::poisoned(&[rows_blocks * 32]);
            let report = run(&k, &[a.raw(), part.raw_mut(), c.raw_mut()], &opts).unwrap();
            assert_eq!(report.tasks as usize, rows_blocks * 5);
            assert_eq!(part.as_slice(), &part_ref[..], "{opts:?}");
            assert_eq!(c.as_slice(), &c_ref[..], "{opts:?}");
        }
    }
}

/// chain: out[0] = 0; out[i + 1] = out[i] + a[i], step i waiting for step i - 1.
fn chain() -> TestKernel {
    fn seed(cx: &TaskContext<'_>) {
        cx.output::<f32>(1).tile_mut([0], [1]).set([0], 0.0);
        cx.signal(0);
    }
    fn step(cx: &TaskContext<'_>) {
        let i = cx.var(0);
        cx.wait(0);
        let (a, out) = (cx.input::<f32>(0), cx.output::<f32>(1));
        add(out.tile_ref([i], [1]), a.tile([i], [1]), out.tile([i + 1], [1]));
        cx.after_op();
        cx.signal(0);
    }
    kernel(
        "chain",
        vec![symbolic("N")],
        vec![
            tensor("a", DType::F32, vec![dim(0)], Access::Read),
            tensor("out", DType::F32, vec![dim(0).add(&lit(1))], Access::Write),
        ],
        vec![event("e", vec![dim(0).add(&lit(1))], Count::Inferred)],
        vec![
            group("seed", &["z"], vec![lit(1)], vec![], vec![at(0, vec![point(lit(0))])]),
            group(
                "step",
                &["i"],
                vec![dim(0)],
                vec![at(0, vec![point(var(0))])],
                vec![at(0, vec![point(var(0).add(&lit(1)))])],
            ),
        ],
        &[seed, step],
    )
}

#[test]
fn chain_matches_sequential() {
    let k = chain();
    for n in [1usize, 7, 40] {
        let a = Tensor::<f32>::random(&[n], n as u64);
        let mut want = vec![0f32; n + 1];
        for i in 0..n {
            want[i + 1] = want[i] + a.as_slice()[i];
        }
        for opts in every_schedule() {
            let mut out = Tensor::<f32>::poisoned(&[n + 1]);
            run(&k, &[a.raw(), out.raw_mut()], &opts).unwrap();
            assert_eq!(out.as_slice(), &want[..], "n = {n}, {opts:?}");
        }
    }
}

/// diamond per block b: s = x + x; l = s + s and r = s + x (both after s); y = l + r.
fn diamond() -> TestKernel {
    fn top(cx: &TaskContext<'_>) {
        let b = cx.var(0);
        let (x, s) = (cx.input::<f32>(0), cx.output::<f32>(1));
        add(x.tile([b], [16]), x.tile([b], [16]), s.tile([b], [16]));
        cx.signal(0);
    }
    fn left(cx: &TaskContext<'_>) {
        let b = cx.var(0);
        cx.wait(0);
        let (s, l) = (cx.output::<f32>(1), cx.output::<f32>(2));
        add(s.tile_ref([b], [16]), s.tile_ref([b], [16]), l.tile([b], [16]));
        cx.signal(0);
    }
    fn right(cx: &TaskContext<'_>) {
        let b = cx.var(0);
        cx.wait(0);
        let (x, s, r) = (cx.input::<f32>(0), cx.output::<f32>(1), cx.output::<f32>(3));
        add(s.tile_ref([b], [16]), x.tile([b], [16]), r.tile([b], [16]));
        cx.signal(0);
    }
    fn bottom(cx: &TaskContext<'_>) {
        let b = cx.var(0);
        cx.wait(0);
        cx.after_op();
        cx.wait(1);
        let (l, r, y) = (cx.output::<f32>(2), cx.output::<f32>(3), cx.output::<f32>(4));
        add(l.tile_ref([b], [16]), r.tile_ref([b], [16]), y.tile([b], [16]));
    }
    let n = || vec![dim(0).scale(16)];
    let e = |name| event(name, vec![dim(0)], Count::Inferred);
    let b = || vec![point(var(0))];
    kernel(
        "diamond",
        vec![symbolic("B")],
        vec![
            tensor("x", DType::F32, n(), Access::Read),
            tensor("s", DType::F32, n(), Access::Write),
            tensor("l", DType::F32, n(), Access::Write),
            tensor("r", DType::F32, n(), Access::Write),
            tensor("y", DType::F32, n(), Access::Write),
        ],
        vec![e("top"), e("left"), e("right")],
        vec![
            group("top", &["b"], vec![dim(0)], vec![], vec![at(0, b())]),
            group("left", &["b"], vec![dim(0)], vec![at(0, b())], vec![at(1, b())]),
            group("right", &["b"], vec![dim(0)], vec![at(0, b())], vec![at(2, b())]),
            group("bottom", &["b"], vec![dim(0)], vec![at(1, b()), at(2, b())], vec![]),
        ],
        &[top, left, right, bottom],
    )
}

#[test]
fn diamond_matches_sequential() {
    let k = diamond();
    for blocks in [1usize, 4, 13] {
        let x = Tensor::<f32>::random(&[blocks * 16], 7);
        let want: Vec<f32> = x
            .as_slice()
            .iter()
            .map(|&v| {
                let s = v + v;
                (s + s) + (s + v)
            })
            .collect();
        for opts in every_schedule() {
            let mut t: Vec<Tensor<f32>> = (0..4).map(|_| Tensor::poisoned(&[blocks * 16])).collect();
            run(&k, &[x.raw(), t[0].raw_mut(), t[1].raw_mut(), t[2].raw_mut(), t[3].raw_mut()], &opts).unwrap();
            assert_eq!(t[3].as_slice(), &want[..], "{opts:?}");
        }
    }
}

/// all-to-one: part[k] = a[k] + a[k] for K workers, then one task waits on every
/// element of `e` (a `..` range) and sums the rows.
fn all_to_one() -> TestKernel {
    fn worker(cx: &TaskContext<'_>) {
        let k = cx.var(0);
        let (a, part) = (cx.input::<f32>(0), cx.output::<f32>(1));
        add(a.tile([k, 0], [1, 8]), a.tile([k, 0], [1, 8]), part.tile([k, 0], [1, 8]));
        cx.signal(0);
    }
    fn gather(cx: &TaskContext<'_>) {
        cx.wait(0);
        let (part, out) = (cx.output::<f32>(1), cx.output::<f32>(2));
        let rows = part.shape()[0] as usize;
        let p = part.tile_ref([0, 0], [rows, 8]);
        let mut o = out.tile_mut([0], [rows]);
        for r in 0..rows {
            o.set([r], (0..8).map(|c| p.get([r, c])).sum());
        }
    }
    kernel(
        "all_to_one",
        vec![symbolic("K")],
        vec![
            tensor("a", DType::F32, vec![dim(0), lit(8)], Access::Read),
            tensor("part", DType::F32, vec![dim(0), lit(8)], Access::Write),
            tensor("out", DType::F32, vec![dim(0)], Access::Write),
        ],
        vec![event("e", vec![dim(0)], Count::Inferred)],
        vec![
            group("worker", &["k"], vec![dim(0)], vec![], vec![at(0, vec![point(var(0))])]),
            group("gather", &["z"], vec![lit(1)], vec![at(0, vec![Index::All])], vec![]),
        ],
        &[worker, gather],
    )
}

#[test]
fn all_to_one_matches_sequential() {
    let k = all_to_one();
    for n in [1usize, 6, 33] {
        let a = Tensor::<f32>::random(&[n, 8], 3);
        let want: Vec<f32> = (0..n).map(|r| (0..8).map(|c| a.get(&[r, c]) + a.get(&[r, c])).sum()).collect();
        for opts in every_schedule() {
            let mut part = Tensor::<f32>::poisoned(&[n, 8]);
            let mut out = Tensor::<f32>::poisoned(&[n]);
            run(&k, &[a.raw(), part.raw_mut(), out.raw_mut()], &opts).unwrap();
            assert_eq!(out.as_slice(), &want[..], "{opts:?}");
        }
    }
}

/// one-to-many: one task computes s = x + x, then K tasks each wait on it and write
/// y[k] = s + a[k].
fn one_to_many() -> TestKernel {
    fn producer(cx: &TaskContext<'_>) {
        let (x, s) = (cx.input::<f32>(0), cx.output::<f32>(2));
        add(x.tile([0], [8]), x.tile([0], [8]), s.tile([0], [8]));
        cx.signal(0);
    }
    fn consumer(cx: &TaskContext<'_>) {
        let k = cx.var(0);
        cx.wait(0);
        let (a, s, y) = (cx.input::<f32>(1), cx.output::<f32>(2), cx.output::<f32>(3));
        add(s.tile_ref([0], [8]), a.tile([k], [8]), y.tile([k], [8]));
    }
    kernel(
        "one_to_many",
        vec![symbolic("K")],
        vec![
            tensor("x", DType::F32, vec![lit(8)], Access::Read),
            tensor("a", DType::F32, vec![dim(0).scale(8)], Access::Read),
            tensor("s", DType::F32, vec![lit(8)], Access::Write),
            tensor("y", DType::F32, vec![dim(0).scale(8)], Access::Write),
        ],
        vec![event("ready", vec![lit(1)], Count::Inferred)],
        vec![
            group("producer", &["z"], vec![lit(1)], vec![], vec![at(0, vec![point(lit(0))])]),
            group("consumer", &["k"], vec![dim(0)], vec![at(0, vec![point(lit(0))])], vec![]),
        ],
        &[producer, consumer],
    )
}

#[test]
fn one_to_many_matches_sequential() {
    let k = one_to_many();
    for n in [1usize, 5, 30] {
        let x = Tensor::<f32>::random(&[8], 1);
        let a = Tensor::<f32>::random(&[n * 8], 2);
        let want: Vec<f32> =
            (0..n * 8).map(|i| (x.as_slice()[i % 8] + x.as_slice()[i % 8]) + a.as_slice()[i]).collect();
        for opts in every_schedule() {
            let mut s = Tensor::<f32>::poisoned(&[8]);
            let mut y = Tensor::<f32>::poisoned(&[n * 8]);
            run(&k, &[x.raw(), a.raw(), s.raw_mut(), y.raw_mut()], &opts).unwrap();
            assert_eq!(y.as_slice(), &want[..], "{opts:?}");
        }
    }
}

fn chaos_run(k: &TestKernel, a: &Tensor<f32>, seed: u64, schedule: ScheduleKind) -> (Vec<f32>, Vec<f32>) {
    let rows = a.shape()[0];
    let mut part = Tensor::<f32>::poisoned(&[rows, 4]);
    let mut c = Tensor::<f32>::poisoned(&[rows]);
    let opts = LaunchOptions { chaos: Some(seed), schedule: Some(schedule), trace: None, ..Default::default() };
    run(k, &[a.raw(), part.raw_mut(), c.raw_mut()], &opts).unwrap();
    (part.into_vec(), c.into_vec())
}

#[test]
fn chaos_200_seeds_bit_identical_on_a_correct_graph() {
    let k = split_row_sum(false);
    let a = Tensor::<f32>::random(&[4 * 32, 128], 11);
    let (part_ref, c_ref) = split_row_sum_reference(&a);
    for seed in 0..200u64 {
        let schedule = if seed % 2 == 0 { ScheduleKind::Static } else { ScheduleKind::Dynamic };
        let (part, c) = chaos_run(&k, &a, seed, schedule);
        assert_eq!(part, part_ref, "seed {seed}");
        assert_eq!(
            c.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            c_ref.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "seed {seed}"
        );
    }
}

#[test]
fn chaos_exposes_a_missing_dependency() {
    let k = split_row_sum(true);
    let a = Tensor::<f32>::random(&[4 * 32, 128], 12);
    let (_, c_ref) = split_row_sum_reference(&a);
    let wrong = (0..200u64)
        .filter(|&seed| {
            let schedule = if seed % 2 == 0 { ScheduleKind::Static } else { ScheduleKind::Dynamic };
            chaos_run(&k, &a, seed, schedule).1 != c_ref
        })
        .count();
    assert!(wrong > 0, "200 chaos seeds never exposed the missing wait");
    eprintln!("missing wait exposed by {wrong} of 200 seeds");
}

/// `e` is `dyn` with its count read from `counts`; K producers signal `e[0]` once each,
/// and the consumer waits on it. With `lie`, producer 0's body skips its signal (a task
/// function that breaks the graph's promise, which only the executor can catch).
fn dyn_count(lie: bool) -> TestKernel {
    fn producer(cx: &TaskContext<'_>) {
        cx.signal(0);
    }
    fn lying_producer(cx: &TaskContext<'_>) {
        if cx.var(0) != 0 {
            cx.signal(0);
        }
    }
    fn consumer(cx: &TaskContext<'_>) {
        cx.wait(0);
        cx.output::<f32>(1).tile_mut([0], [1]).set([0], 1.0);
    }
    kernel(
        "dyn_count",
        vec![symbolic("K")],
        vec![
            tensor("counts", DType::U32, vec![lit(1)], Access::Read),
            tensor("flag", DType::F32, vec![lit(1)], Access::Write),
            tensor("k_sized", DType::F32, vec![dim(0)], Access::Read),
        ],
        vec![event("e", vec![lit(1)], Count::PerElement { tensor: 0 })],
        vec![
            group("producer", &["k"], vec![dim(0)], vec![], vec![at(0, vec![point(lit(0))])]),
            group("consumer", &["z"], vec![lit(1)], vec![at(0, vec![point(lit(0))])], vec![]),
        ],
        if lie { &[lying_producer, consumer] } else { &[producer, consumer] },
    )
}

#[test]
fn dyn_count_equal_to_signals_completes() {
    let k = dyn_count(false);
    for opts in every_schedule() {
        let counts = Tensor::<u32>::from_vec(&[1], vec![3]).unwrap();
        let mut flag = Tensor::<f32>::poisoned(&[1]);
        let ks = Tensor::<f32>::zeros(&[3]);
        run(&k, &[counts.raw(), flag.raw_mut(), ks.raw()], &opts).unwrap();
        assert_eq!(flag.as_slice(), &[1.0]);
    }
}

#[test]
fn dyn_count_unequal_to_signals_is_a_launch_error() {
    let k = dyn_count(false);
    let counts = Tensor::<u32>::from_vec(&[1], vec![4]).unwrap(); // only 3 signals come
    let mut flag = Tensor::<f32>::poisoned(&[1]);
    let ks = Tensor::<f32>::zeros(&[3]);
    let err = run(&k, &[counts.raw(), flag.raw_mut(), ks.raw()], &LaunchOptions::default()).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("event `e`") && text.contains("e[0] receives 3 signals but its count is 4"), "{text}");
    assert_eq!(flag.as_slice()[0].to_bits(), Tensor::<f32>::poisoned(&[1]).as_slice()[0].to_bits());
}

#[test]
fn deadlock_is_reported_fast_naming_task_and_element() {
    let k = dyn_count(true);
    for opts in every_schedule() {
        let counts = Tensor::<u32>::from_vec(&[1], vec![3]).unwrap(); // producer[0] never signals
        let mut flag = Tensor::<f32>::poisoned(&[1]);
        let ks = Tensor::<f32>::zeros(&[3]);
        let t0 = Instant::now();
        let err = run(&k, &[counts.raw(), flag.raw_mut(), ks.raw()], &opts).unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(1), "took {:?}", t0.elapsed());
        let Error::Deadlock { blocked, .. } = &err else { panic!("expected a deadlock, got {err}") };
        assert_eq!(blocked.len(), 1, "{err}");
        assert_eq!(blocked[0].task, "consumer[0]");
        assert_eq!(blocked[0].element, "e[0]");
        assert_eq!((blocked[0].value, blocked[0].expected), (2, 3));
        let text = err.to_string();
        assert!(text.contains("consumer[0]") && text.contains("e[0]") && text.contains("2 of 3"), "{text}");
    }
}

#[test]
fn shape_mismatch_names_tensor_and_dimension() {
    let k = split_row_sum(false);
    let a = Tensor::<f32>::zeros(&[64, 128]);
    let mut part = Tensor::<f32>::zeros(&[96, 4]);
    let mut c = Tensor::<f32>::zeros(&[64]);
    let err = run(&k, &[a.raw(), part.raw_mut(), c.raw_mut()], &LaunchOptions::default()).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("tensor `part` dimension 0 is 96"), "{text}");
    assert!(text.contains("`R` = 2 from `a` dimension 0"), "{text}");
}

#[test]
fn wrong_width_is_rejected_before_running() {
    let k = split_row_sum(false);
    let a = Tensor::<f32>::zeros(&[32, 64]);
    let mut part = Tensor::<f32>::zeros(&[32, 4]);
    let mut c = Tensor::<f32>::zeros(&[32]);
    let err = run(&k, &[a.raw(), part.raw_mut(), c.raw_mut()], &LaunchOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Resolve { .. }), "{err}");
}

#[test]
fn cpu_trace_has_every_task() {
    let k = split_row_sum(false);
    let a = Tensor::<f32>::random(&[3 * 32, 128], 5);
    let mut part = Tensor::<f32>::zeros(&[96, 4]);
    let mut c = Tensor::<f32>::zeros(&[96]);
    let path = std::env::temp_dir().join(format!("et-cpu-trace-{}.json", std::process::id()));
    let opts = LaunchOptions { trace: Some(path.clone()), ..Default::default() };
    run(&k, &[a.raw(), part.raw_mut(), c.raw_mut()], &opts).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert_eq!(text.matches("\"ph\":\"X\"").count(), 15);
    assert!(text.contains("\"name\":\"total[2]\""));
    // a path that cannot be written: an error naming it as the trace's
    let opts = LaunchOptions { trace: Some("/nonexistent-et-dir/t.json".into()), ..Default::default() };
    let err = run(&k, &[a.raw(), part.raw_mut(), c.raw_mut()], &opts).unwrap_err().to_string();
    assert!(err.contains("the trace path") && err.contains("/nonexistent-et-dir/t.json"), "{err}");
}

#[test]
fn task_panic_is_an_error_not_a_crash() {
    fn boom(cx: &TaskContext<'_>) {
        if cx.var(0) == 2 {
            panic!("tile op assertion");
        }
        cx.signal(0);
    }
    fn after(cx: &TaskContext<'_>) {
        cx.wait(0);
    }
    let k = kernel(
        "boom",
        vec![symbolic("K")],
        vec![tensor("x", DType::F32, vec![dim(0)], Access::Read)],
        vec![event("e", vec![dim(0)], Count::Inferred)],
        vec![
            group("boom", &["k"], vec![dim(0)], vec![], vec![at(0, vec![point(var(0))])]),
            group("after", &["k"], vec![dim(0)], vec![at(0, vec![point(var(0))])], vec![]),
        ],
        &[boom, after],
    );
    let x = Tensor::<f32>::zeros(&[4]);
    for opts in every_schedule() {
        let err = run(&k, &[x.raw()], &opts).unwrap_err();
        assert!(err.to_string().contains("task boom[2] panicked: tile op assertion"), "{err}");
    }
}

#[test]
fn zero_workers_and_zero_watchdog_are_errors_naming_the_option() {
    let k = split_row_sum(false);
    let a = Tensor::<f32>::random(&[32, 128], 1);
    let (mut part, mut c) = (Tensor::<f32>::zeros(&[32, 4]), Tensor::<f32>::zeros(&[32]));
    for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
        let zero_workers = LaunchOptions { schedule: Some(schedule), workers: Some(0), ..Default::default() };
        let err = run(&k, &[a.raw(), part.raw_mut(), c.raw_mut()], &zero_workers).unwrap_err();
        assert!(matches!(err, Error::InvalidOption { option: "workers", .. }), "{err}");
        assert!(err.to_string().starts_with("invalid launch option `workers`"), "{err}");
        let zero_watchdog = LaunchOptions { schedule: Some(schedule), watchdog: Duration::ZERO, ..Default::default() };
        let err = run(&k, &[a.raw(), part.raw_mut(), c.raw_mut()], &zero_watchdog).unwrap_err();
        assert!(matches!(err, Error::InvalidOption { option: "watchdog", .. }), "{err}");
    }
}

#[test]
fn a_huge_worker_count_is_clamped_not_a_crash() {
    let k = split_row_sum(false);
    let a = Tensor::<f32>::random(&[64, 128], 2);
    let (mut part, mut c) = (Tensor::<f32>::poisoned(&[64, 4]), Tensor::<f32>::poisoned(&[64]));
    for schedule in [ScheduleKind::Static, ScheduleKind::Dynamic] {
        let opts = LaunchOptions { schedule: Some(schedule), workers: Some(1 << 40), ..Default::default() };
        // SAFETY: live host tensors, the written ones borrowed mutably for the call.
        let report = unsafe { Cpu::new().launch(&k.entry(), &[a.raw(), part.raw_mut(), c.raw_mut()], &opts) }.unwrap();
        assert_eq!(report.workers, 10, "one worker per task of the 10");
        assert_eq!(c.as_slice(), &split_row_sum_reference(&a).1[..]);
    }
}

#[test]
fn a_run_time_kernel_is_launched_and_dropped_without_leaking() {
    // built, launched and dropped each round: nothing has to outlive the launch
    for rows in [1usize, 3] {
        let k = split_row_sum(false);
        let a = Tensor::<f32>::random(&[rows * 32, 128], rows as u64);
        let (mut part, mut c) = (Tensor::<f32>::poisoned(&[rows * 32, 4]), Tensor::<f32>::poisoned(&[rows * 32]));
        run(&k, &[a.raw(), part.raw_mut(), c.raw_mut()], &LaunchOptions::default()).unwrap();
        assert_eq!(c.as_slice(), &split_row_sum_reference(&a).1[..]);
        drop(k);
    }
}

#[test]
fn an_entry_whose_task_functions_do_not_match_the_groups_is_an_error() {
    let k = split_row_sum(false);
    let entry = et_core::KernelEntry { kernel: &k.kernel, cpu_tasks: &k.cpu[..1] };
    let a = Tensor::<f32>::random(&[32, 128], 1);
    let (mut part, mut c) = (Tensor::<f32>::zeros(&[32, 4]), Tensor::<f32>::zeros(&[32]));
    // SAFETY: live tensors, the written ones from `raw_mut`.
    let err =
        unsafe { Cpu::with_workers(2).launch(&entry, &[a.raw(), part.raw_mut(), c.raw_mut()], &Default::default()) }
            .unwrap_err();
    assert!(err.to_string().contains("2 tile groups but 1 CPU task functions"), "{err}");
}

/// A panic whose payload panics again when dropped.
struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("the payload's drop panics");
    }
}

/// `chain` whose steps run `body` after their wait.
fn chain_with(body: fn(&TaskContext<'_>)) -> TestKernel {
    let mut k = chain();
    k.cpu = Box::leak(Box::new([k.cpu[0], body]));
    k
}

#[test]
fn a_panic_payload_that_panics_when_dropped_is_still_the_tasks_error() {
    fn step(cx: &TaskContext<'_>) {
        cx.wait(0);
        std::panic::panic_any(PanicsOnDrop);
    }
    let k = chain_with(step);
    let a = Tensor::<f32>::zeros(&[3]);
    for opts in every_schedule() {
        let mut out = Tensor::<f32>::poisoned(&[4]);
        let err = run(&k, &[a.raw(), out.raw_mut()], &opts).unwrap_err();
        let Error::TaskPanic { task, message } = &err else { panic!("{opts:?}: {err}") };
        assert_eq!((task.as_str(), message.as_str()), ("step[0]", "(non-string panic)"), "{opts:?}");
    }
}

#[test]
fn binding_a_read_only_tensor_for_writing_is_the_tasks_error() {
    fn step(cx: &TaskContext<'_>) {
        cx.wait(0);
        cx.output::<f32>(0).tile_mut([cx.var(0)], [1]).set([0], 99.0);
    }
    let k = chain_with(step);
    let a = Tensor::<f32>::zeros(&[3]);
    let mut out = Tensor::<f32>::poisoned(&[4]);
    let err = run(&k, &[a.raw(), out.raw_mut()], &LaunchOptions::default()).unwrap_err();
    let Error::TaskPanic { message, .. } = &err else { panic!("{err}") };
    assert!(message.contains("tensor `a` is read-only in this megakernel"), "{err}");
    assert!(a.as_slice().iter().all(|&v| v == 0.0), "the input was written");
}
