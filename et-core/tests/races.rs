//! Data races: each racy graph is rejected at launch by the race rule, and, run without
//! the tile annotations that the rule reads, really gives wrong results under chaos.

mod common;

use common::*;
use et_core::__private::{Access, Count, Cow, CudaSource, DType, GraphSpec, TileAccess};
use et_core::cpu::{CpuTaskFn, TaskContext};
use et_core::graph::ResolveError;
use et_core::ops::{add, row_sum};
use et_core::{Backend, Cpu, Error, Kernel, LaunchOptions, RawTensor, ScheduleKind, Tensor};

/// The same kernel with `tiles` as the arguments of each group's op call (between its
/// waits and its signals): what the macro would emit, and what the race rule reads.
fn annotated(k: &TestKernel, tiles: Vec<Vec<TileAccess>>) -> GraphSpec {
    let mut graph = k.kernel.graph.clone();
    for (g, t) in graph.groups.to_mut().iter_mut().zip(tiles) {
        *g = with_tiles(g.clone(), t);
    }
    graph
}

fn with_graph(graph: GraphSpec, cpu: &'static [CpuTaskFn]) -> TestKernel {
    let cuda = CudaSource { body: Cow::Borrowed(""), ops: &[], block_threads: 128, smem: &[], sites: &[] };
    TestKernel { kernel: Kernel { graph, cuda, module_path: module_path!(), file: file!() }, cpu }
}

fn launch(k: &TestKernel, args: &[RawTensor], opts: &LaunchOptions) -> et_core::Result<et_core::LaunchReport> {
    // SAFETY: every argument is a live host tensor of the test, written ones from
    // `raw_mut` of a tensor used for nothing else during the call.
    unsafe { Cpu::with_workers(4).launch(&k.entry(), args, opts) }
}

/// Runs `k` under chaos with seeds `0..seeds`; how many give a result other than `want`.
fn wrong_seeds(k: &TestKernel, seeds: u64, run: impl Fn(&TestKernel, &LaunchOptions) -> Vec<f32>, want: &[f32]) -> u64 {
    (0..seeds)
        .filter(|&seed| {
            let schedule = if seed % 2 == 0 { ScheduleKind::Static } else { ScheduleKind::Dynamic };
            let opts = LaunchOptions { chaos: Some(seed), schedule: Some(schedule), ..Default::default() };
            run(k, &opts) != want
        })
        .count() as u64
}

fn assert_race(err: Error, wanted: &str) {
    let Error::Resolve { error, .. } = &err else { panic!("expected a race, got {err}") };
    let ResolveError::Race { message } = &**error else { panic!("expected a race, got {err}") };
    assert!(message.starts_with("data race: ") && message.contains(wanted), "{message}");
}

fn split_row_sum_tiles() -> Vec<Vec<TileAccess>> {
    vec![
        vec![
            tile(0, vec![var(0), var(1)], vec![32, 32], Access::Read),
            tile(1, vec![var(0), var(1)], vec![32, 1], Access::Write),
        ],
        vec![tile(1, vec![var(0), lit(0)], vec![32, 4], Access::Read), tile(2, vec![var(0)], vec![32], Access::Write)],
    ]
}

fn run_split_row_sum(a: &Tensor<f32>) -> impl Fn(&TestKernel, &LaunchOptions) -> Vec<f32> + '_ {
    move |k, opts| {
        let rows = a.shape()[0];
        let mut part = Tensor::<f32>::poisoned(&[rows, 4]);
        let mut c = Tensor::<f32>::poisoned(&[rows]);
        launch(k, &[a.raw(), part.raw_mut(), c.raw_mut()], opts).unwrap();
        c.into_vec()
    }
}

#[test]
fn forgotten_wait() {
    let racy = split_row_sum(true);
    let a = Tensor::<f32>::random(&[4 * 32, 128], 21);
    let (_, want) = split_row_sum_reference(&a);
    let checked = with_graph(annotated(&racy, split_row_sum_tiles()), racy.cpu);
    let mut part = Tensor::<f32>::zeros(&[128, 4]);
    let mut c = Tensor::<f32>::zeros(&[128]);
    let err = launch(&checked, &[a.raw(), part.raw_mut(), c.raw_mut()], &LaunchOptions::default()).unwrap_err();
    assert_race(err, "`total[0]` reads `part[0..32, 0..4]` written by `partial[0, 0]`");
    // the correct graph, annotated the same way, is accepted
    let correct = split_row_sum(false);
    let ok = with_graph(annotated(&correct, split_row_sum_tiles()), correct.cpu);
    assert_eq!(run_split_row_sum(&a)(&ok, &LaunchOptions::default()), want);
    assert!(wrong_seeds(&racy, 100, run_split_row_sum(&a), &want) > 0, "chaos never exposed the race");
}

/// Split row sum whose `partial` signals `done[i]` before writing its partial sum.
fn signal_before_write() -> TestKernel {
    fn partial(cx: &TaskContext<'_>) {
        let (i, j) = (cx.var(0), cx.var(1));
        cx.signal(0);
        let (a, part) = (cx.input::<f32>(0), cx.output::<f32>(1));
        row_sum(a.tile([i, j], [32, 32]), part.tile([i, j], [32, 1]));
        cx.after_op();
    }
    fn total(cx: &TaskContext<'_>) {
        let i = cx.var(0);
        cx.wait(0);
        let (part, c) = (cx.output::<f32>(1), cx.output::<f32>(2));
        row_sum(part.tile_ref([i, 0], [32, 4]), c.tile([i], [32]));
        cx.after_op();
    }
    with_graph(split_row_sum(false).kernel.graph, &[partial, total])
}

#[test]
fn signal_before_the_write() {
    let racy = signal_before_write();
    let a = Tensor::<f32>::random(&[4 * 32, 128], 22);
    let (_, want) = split_row_sum_reference(&a);
    let mut graph = annotated(&racy, split_row_sum_tiles());
    // partial's body: the signal (statement 0), then the op (statement 1)
    let partial = &mut graph.groups.to_mut()[0];
    partial.signals.to_mut()[0].stmt = 0;
    partial.tiles.to_mut().iter_mut().for_each(|t| t.stmt = 1);
    let checked = with_graph(graph, racy.cpu);
    let mut part = Tensor::<f32>::zeros(&[128, 4]);
    let mut c = Tensor::<f32>::zeros(&[128]);
    let err = launch(&checked, &[a.raw(), part.raw_mut(), c.raw_mut()], &LaunchOptions::default()).unwrap_err();
    assert_race(err, "`total[0]` reads `part[0..32, 0..4]` written by `partial[0, 0]`");
    assert!(wrong_seeds(&racy, 100, run_split_row_sum(&a), &want) > 0, "chaos never exposed the race");
}

/// `fill[k]` writes `s[k] = x[k] + x[k]`, signals `filled[k]`; `consume[k]` waits, reads
/// `s[k]` into `y[k] = s[k] + x[k]`; `refill[k]` waits on `filled[k]` too and overwrites
/// `s[k] = x[k] + s[k]`, without waiting for `consume[k]`.
fn write_after_read() -> TestKernel {
    fn fill(cx: &TaskContext<'_>) {
        let k = cx.var(0);
        let (x, s) = (cx.input::<f32>(0), cx.output::<f32>(1));
        add(x.tile([k], [8]), x.tile([k], [8]), s.tile([k], [8]));
        cx.after_op();
        cx.signal(0);
    }
    fn consume(cx: &TaskContext<'_>) {
        let k = cx.var(0);
        cx.wait(0);
        let (x, s, y) = (cx.input::<f32>(0), cx.output::<f32>(1), cx.output::<f32>(2));
        add(s.tile_ref([k], [8]), x.tile([k], [8]), y.tile([k], [8]));
        cx.after_op();
    }
    fn refill(cx: &TaskContext<'_>) {
        let k = cx.var(0);
        cx.wait(0);
        let (x, s) = (cx.input::<f32>(0), cx.output::<f32>(1));
        add(x.tile([k], [8]), s.tile_ref([k], [8]), s.tile([k], [8]));
        cx.after_op();
    }
    let n = || vec![dim(0).scale(8)];
    let wait = || vec![at(0, vec![point(var(0))])];
    kernel(
        "write_after_read",
        vec![symbolic("K")],
        vec![
            tensor("x", DType::F32, n(), Access::Read),
            tensor("s", DType::F32, n(), Access::Write),
            tensor("y", DType::F32, n(), Access::Write),
        ],
        vec![event("filled", vec![dim(0)], Count::Inferred)],
        vec![
            group("fill", &["k"], vec![dim(0)], vec![], wait()),
            group("consume", &["k"], vec![dim(0)], wait(), vec![]),
            group("refill", &["k"], vec![dim(0)], wait(), vec![]),
        ],
        &[fill, consume, refill],
    )
}

#[test]
fn write_after_read_without_waiting_for_the_reader() {
    let racy = write_after_read();
    let blocks = 16;
    let x = Tensor::<f32>::random(&[blocks * 8], 23);
    let want: Vec<f32> = x.as_slice().iter().map(|&v| (v + v) + v).collect();
    let run = |k: &TestKernel, opts: &LaunchOptions| {
        let mut s = Tensor::<f32>::poisoned(&[blocks * 8]);
        let mut y = Tensor::<f32>::poisoned(&[blocks * 8]);
        launch(k, &[x.raw(), s.raw_mut(), y.raw_mut()], opts).unwrap();
        y.into_vec()
    };
    let k8 = |t: u16, a: Access| tile(t, vec![var(0)], vec![8], a);
    let tiles = vec![
        vec![k8(0, Access::Read), k8(1, Access::Write)],
        vec![k8(1, Access::Read), k8(0, Access::Read), k8(2, Access::Write)],
        vec![k8(0, Access::Read), k8(1, Access::Read), k8(1, Access::Write)],
    ];
    let mut s = Tensor::<f32>::zeros(&[blocks * 8]);
    let mut y = Tensor::<f32>::zeros(&[blocks * 8]);
    let checked = with_graph(annotated(&racy, tiles), racy.cpu);
    let err = launch(&checked, &[x.raw(), s.raw_mut(), y.raw_mut()], &LaunchOptions::default()).unwrap_err();
    assert_race(err, "`consume[0]` reads `s[0..8]` written by `refill[0]`");
    assert!(wrong_seeds(&racy, 100, run, &want) > 0, "chaos never exposed the race");
}

#[test]
fn overlapping_writes_of_two_groups() {
    // `wide[i]` writes y[16i..16i+16] = x + x; `narrow[i]` writes y[8i..8i+8] = x; unordered
    fn wide(cx: &TaskContext<'_>) {
        let i = cx.var(0);
        let (x, y) = (cx.input::<f32>(0), cx.output::<f32>(1));
        cx.after_op();
        add(x.tile([i], [16]), x.tile([i], [16]), y.tile([i], [16]));
    }
    fn narrow(cx: &TaskContext<'_>) {
        let i = cx.var(0);
        let (x, z, y) = (cx.input::<f32>(0), cx.input::<f32>(2), cx.output::<f32>(1));
        cx.after_op();
        add(x.tile([i], [8]), z.tile([i], [8]), y.tile([i], [8]));
    }
    let n = || vec![dim(0).scale(16)];
    let racy = kernel(
        "overlapping_writes",
        vec![symbolic("N")],
        vec![
            tensor("x", DType::F32, n(), Access::Read),
            tensor("y", DType::F32, n(), Access::Write),
            tensor("zero", DType::F32, n(), Access::Read),
        ],
        vec![],
        vec![
            group("wide", &["i"], vec![dim(0)], vec![], vec![]),
            group("narrow", &["i"], vec![dim(0).scale(2)], vec![], vec![]),
        ],
        &[wide, narrow],
    );
    let blocks = 8;
    let x = Tensor::<f32>::random(&[blocks * 16], 24);
    let zero = Tensor::<f32>::zeros(&[blocks * 16]);
    let run = |k: &TestKernel, opts: &LaunchOptions| {
        let mut y = Tensor::<f32>::poisoned(&[blocks * 16]);
        launch(k, &[x.raw(), y.raw_mut(), zero.raw()], opts).unwrap();
        y.into_vec()
    };
    // the result of one order: every wide write after the narrow ones
    let want: Vec<f32> = x.as_slice().iter().map(|&v| v + v).collect();
    let tiles = vec![
        vec![tile(0, vec![var(0)], vec![16], Access::Read), tile(1, vec![var(0)], vec![16], Access::Write)],
        vec![
            tile(0, vec![var(0)], vec![8], Access::Read),
            tile(2, vec![var(0)], vec![8], Access::Read),
            tile(1, vec![var(0)], vec![8], Access::Write),
        ],
    ];
    let mut y = Tensor::<f32>::zeros(&[blocks * 16]);
    let checked = with_graph(annotated(&racy, tiles), racy.cpu);
    let err = launch(&checked, &[x.raw(), y.raw_mut(), zero.raw()], &LaunchOptions::default()).unwrap_err();
    assert_race(err, "`wide[0]` and `narrow[0]` both write `y[0..8]`");
    assert!(wrong_seeds(&racy, 100, run, &want) > 0, "chaos never showed another order of the two writes");
}
