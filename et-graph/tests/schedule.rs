//! Schedule construction over resolved graphs at several symbolic sizes.

use et_graph::build::*;
use et_graph::resolve::LaunchTensors;
use et_graph::schedule::{DynamicPlan, EarlyBatches, Placement, SplitMix64, StaticSchedule, random_order};
use et_graph::{Access, Count, DType, GraphSpec, Index, Resolved};

struct Shapes(Vec<Vec<i64>>);

impl LaunchTensors for Shapes {
    fn shape(&self, t: u16) -> Vec<i64> {
        self.0[t as usize].clone()
    }
    fn read_integers(&self, _: u16) -> Vec<i64> {
        unreachable!("no data-dependent maps here")
    }
}

/// partial[i, j] -> total[i] (split-K), then a chain over the totals, then a
/// fan-in over every chain element: three dependency shapes in one graph.
fn mixed() -> GraphSpec {
    graph(
        "mixed",
        vec![symbolic("R")],
        vec![tensor("a", DType::F32, vec![dim(0).scale(32), lit(128)], Access::Read)],
        vec![event("done", vec![dim(0)], Count::Inferred), event("chain", vec![dim(0).add(&lit(1))], Count::Inferred)],
        vec![
            group("partial", &["i", "j"], vec![dim(0), lit(4)], vec![], vec![at(0, vec![point(var(0))])]),
            group("start", &["z"], vec![lit(1)], vec![], vec![at(1, vec![point(lit(0))])]),
            group(
                "total",
                &["i"],
                vec![dim(0)],
                vec![at(0, vec![point(var(0))]), at(1, vec![point(var(0))])],
                vec![at(1, vec![point(var(0).add(&lit(1)))])],
            ),
            group("fanin", &["z"], vec![lit(1)], vec![at(1, vec![Index::All])], vec![]),
        ],
    )
}

fn resolve(spec: &GraphSpec, r: i64) -> Resolved<'_> {
    Resolved::new(spec, &Shapes(vec![vec![r * 32, 128]])).unwrap()
}

#[test]
fn every_task_once_and_queues_are_slices_of_one_order() {
    let spec = mixed();
    for r in [1, 2, 3, 8, 31] {
        let res = resolve(&spec, r);
        assert_eq!(res.n_tasks as i64, 4 * r + 1 + r + 1);
        for workers in [1, 2, 3, 7, 132] {
            for placement in [Placement::RoundRobin, Placement::CostAware] {
                let s = StaticSchedule::build(&res, workers, placement);
                assert_eq!(s.queues.len(), workers);
                s.validate(&res).unwrap_or_else(|e| panic!("R={r} workers={workers} {placement:?}: {e}"));
                let mut all: Vec<u32> = s.queues.concat();
                all.sort_unstable();
                assert_eq!(all, (0..res.n_tasks).collect::<Vec<_>>());
            }
        }
        let mut rng = SplitMix64::new(r as u64);
        for _ in 0..20 {
            let order = random_order(&res, &mut rng);
            let s = StaticSchedule::from_order(&res, &order, 5, Placement::RoundRobin);
            s.validate(&res).unwrap();
        }
    }
}

#[test]
fn validate_rejects_an_order_that_breaks_a_dependency() {
    let spec = mixed();
    let res = resolve(&spec, 2);
    let mut order = res.order.clone();
    order.reverse();
    let s = StaticSchedule { queues: vec![order] };
    assert!(s.validate(&res).is_err());
    let dup = StaticSchedule { queues: vec![res.order.clone(), vec![0]] };
    assert!(dup.validate(&res).unwrap_err().contains("twice"));
}

#[test]
fn schedules_are_deterministic() {
    let spec = mixed();
    let res = resolve(&spec, 5);
    let a = StaticSchedule::build(&res, 4, Placement::CostAware);
    let b = StaticSchedule::build(&resolve(&spec, 5), 4, Placement::CostAware);
    assert_eq!(a, b);
}

#[test]
fn cost_aware_placement_charges_a_hop_on_the_same_worker_too() {
    // On the H200 a same-SM hop is no cheaper than a cross-SM one, so the model must not
    // pull a sequential chain onto its producer's worker: with every dependency charged,
    // each chain task goes to the least-loaded worker, which is never the one that just
    // ran its predecessor while another worker is idle.
    let spec = mixed();
    let res = resolve(&spec, 6);
    let s = StaticSchedule::build(&res, 4, Placement::CostAware);
    let worker_of = |t: u32| s.queues.iter().position(|q| q.contains(&t)).unwrap();
    let totals: Vec<usize> = (0..6).map(|i| worker_of(res.groups[2].first + i)).collect();
    let moves = totals.windows(2).filter(|w| w[0] != w[1]).count();
    assert_eq!(moves, 5, "chain placed on workers {totals:?}");
    s.validate(&res).unwrap();
}

#[test]
fn dynamic_plan_seeds_tasks_without_waits() {
    let spec = mixed();
    let res = resolve(&spec, 3);
    let plan = DynamicPlan::new(&res);
    // partial (12) and start (1) wait on nothing
    assert_eq!(plan.seeds.len(), 13);
    let total0 = res.groups[2].first as usize;
    assert_eq!(plan.pending[total0], 2);
    let fanin = res.groups[3].first as usize;
    assert_eq!(plan.pending[fanin], 4);
    // inverse map: done[1] is consumed by total[1] alone
    assert_eq!(res.consumers.row(1), &[total0 as u32 + 1]);
}

/// A chain of R steps from `start`, three leaves fanning out of `start`, and `mixed`'s
/// fan-in shape: `sum` waits on every chain element (many producers).
fn chain_and_fan() -> GraphSpec {
    graph(
        "chain_and_fan",
        vec![symbolic("R")],
        vec![tensor("a", DType::F32, vec![dim(0).add(&lit(1))], Access::Read)],
        vec![event("c", vec![dim(0).add(&lit(1))], Count::Inferred)],
        vec![
            group("start", &["z"], vec![lit(1)], vec![], vec![at(0, vec![point(lit(0))])]),
            group(
                "step",
                &["i"],
                vec![dim(0)],
                vec![at(0, vec![point(var(0))])],
                vec![at(0, vec![point(var(0).add(&lit(1)))])],
            ),
            group("leaf", &["j"], vec![lit(3)], vec![at(0, vec![point(lit(0))])], vec![]),
            group("sum", &["z"], vec![lit(1)], vec![at(0, vec![Index::All])], vec![]),
        ],
    )
}

#[test]
fn early_batches_cover_each_single_producer_task_once_after_its_producer() {
    let spec = chain_and_fan();
    for (r, levels) in [(1i64, 1u32), (7, 2), (9, 4), (30, 4)] {
        let res = Resolved::new(&spec, &Shapes(vec![vec![r + 1]])).unwrap();
        let plan = DynamicPlan::new(&res);
        let b = EarlyBatches::new(&res, &plan, levels);
        let (start, step, leaf, sum) = (0u32, res.groups[1].first, res.groups[2].first, res.groups[3].first);
        // every step and leaf has one producer; the seed and the fan-in are not early
        let early: Vec<u32> = (0..res.n_tasks).filter(|&t| b.early[t as usize]).collect();
        let mut want: Vec<u32> = (step..step + r as u32).chain(leaf..leaf + 3).collect();
        want.sort();
        assert_eq!(early, want, "R = {r}");
        assert!(!b.early[start as usize] && !b.early[sum as usize]);
        let mut seen = vec![0; res.n_tasks as usize];
        for (root, &k) in b.batch_of.iter().enumerate().filter(|(_, k)| **k != 0) {
            let batch = &b.items[b.offsets[k as usize - 1] as usize..b.offsets[k as usize] as usize];
            assert!(!batch.is_empty());
            for (pos, &t) in batch.iter().enumerate() {
                seen[t as usize] += 1;
                let producer = res.dependencies(t).next().unwrap();
                assert!(
                    producer == root as u32 || batch[..pos].contains(&producer),
                    "R = {r}, levels {levels}: task {t} before its producer {producer} in the batch of {root}"
                );
            }
            // a batch spans at most `levels` levels of the chain
            let steps = batch.iter().filter(|&&t| t >= step && t < step + r as u32).count();
            assert!(steps <= levels as usize, "R = {r}: {steps} steps in one batch");
        }
        for (t, (&times, &early)) in seen.iter().zip(&b.early).enumerate() {
            assert_eq!(times, early as u32, "R = {r}, levels {levels}: task {t} pushed {times} times");
        }
        // the seed's batch holds the leaves and the first `levels` steps
        let first = b.batch_of[start as usize] as usize;
        assert_eq!(b.offsets[first] - b.offsets[first - 1], 3 + (r as u32).min(levels));
    }
}

#[test]
fn counts_are_inferred_per_element() {
    let spec = mixed();
    let res = resolve(&spec, 3);
    // done[i]: 4 partials; chain[k]: 1 signal
    assert_eq!(&res.target[0..3], &[4, 4, 4]);
    assert_eq!(&res.target[3..7], &[1, 1, 1, 1]);
}

#[test]
fn dims_resolve_with_clear_errors() {
    let spec = mixed();
    let err = Resolved::new(&spec, &Shapes(vec![vec![33, 128]])).unwrap_err().to_string();
    assert!(err.contains("tensor `a` dimension 0 is 33"), "{err}");
    let err = Resolved::new(&spec, &Shapes(vec![vec![64, 100]])).unwrap_err().to_string();
    assert!(err.contains("declares `128`"), "{err}");
    let err = Resolved::new(&spec, &Shapes(vec![vec![64]])).unwrap_err().to_string();
    assert!(err.contains("has 1 dimension, but the megakernel declares 2"), "{err}");
}

#[test]
fn a_static_extent_mismatch_names_the_dim_and_says_its_value_once() {
    // `a: [R, D]` with D = 8 static, passed 4 columns
    let mut spec = mixed();
    spec.dims.to_mut().push(et_graph::DimSpec { name: "D".into(), kind: et_graph::DimKind::Static(8) });
    spec.tensors.to_mut()[0].shape = vec![dim(0).scale(32), dim(1)].into();
    let err = Resolved::new(&spec, &Shapes(vec![vec![64, 4]])).unwrap_err().to_string();
    assert_eq!(err, "tensor `a` dimension 1 is 4, but the megakernel declares `D` = 8 (`D` is static)");
    // a literal extent (or a static dim written in as its value) is said once
    let err = Resolved::new(&mixed(), &Shapes(vec![vec![64, 100]])).unwrap_err().to_string();
    assert_eq!(err, "tensor `a` dimension 1 is 100, but the megakernel declares `128`");
}
