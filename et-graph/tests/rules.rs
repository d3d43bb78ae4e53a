//! The rule checker, the sample-size choice and the launch-time checks of `Resolved::new`.

use et_graph::build::*;
use et_graph::check::{MAX_SAMPLE_TASKS, Severity, check, sample_dims};
use et_graph::resolve::LaunchTensors;
use et_graph::{Access, Count, DType, DimKind, DimSpec, GraphSpec, ResolveError, Resolved};

/// Shapes and integer contents of the launch tensors.
struct Launch(Vec<Vec<i64>>, Vec<Vec<i64>>);

impl LaunchTensors for Launch {
    fn shape(&self, t: u16) -> Vec<i64> {
        self.0[t as usize].clone()
    }
    fn read_integers(&self, t: u16) -> Vec<i64> {
        self.1[t as usize].clone()
    }
}

fn shapes(s: Vec<Vec<i64>>) -> Launch {
    let n = s.len();
    Launch(s, vec![Vec::new(); n])
}

fn static_dim(name: &'static str, v: i64) -> DimSpec {
    DimSpec { name: name.into(), kind: DimKind::Static(v) }
}

/// `p[i]` signals `done[i]`, `t[i]` waits on it: sound at every size.
fn producer_consumer() -> GraphSpec {
    graph(
        "pc",
        vec![symbolic("R")],
        vec![tensor("a", DType::F32, vec![dim(0)], Access::Read)],
        vec![event("done", vec![dim(0)], Count::Inferred)],
        vec![
            group("p", &["i"], vec![dim(0)], vec![], vec![at(0, vec![point(var(0))])]),
            group("t", &["i"], vec![dim(0)], vec![at(0, vec![point(var(0))])], vec![]),
        ],
    )
}

#[test]
fn a_sound_graph_has_no_diagnostics() {
    assert_eq!(check(&producer_consumer()), vec![]);
}

#[test]
fn a_bound_witness_is_the_smallest_failing_size() {
    // t[i] waits on done[i + 1]: out of bounds already at R = 1
    let mut spec = producer_consumer();
    spec.groups.to_mut()[1].waits = vec![at(0, vec![point(var(0).add(&lit(1)))])].into();
    let d = check(&spec);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].severity, Severity::Error);
    assert_eq!(d[0].help.as_deref(), Some("it fails for R = 1"), "{d:?}");
}

#[test]
fn a_signalled_event_that_nothing_waits_on_is_a_note() {
    let mut spec = producer_consumer();
    spec.groups.to_mut()[1].waits = vec![].into();
    let d = check(&spec);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].severity, Severity::Note);
    assert!(d[0].message.contains("event `done` is signalled but never waited on"), "{}", d[0].message);
}

/// `t[i]` in [2] waits on `e[1 - i]` and signals `e[i]`: t[0] and t[1] wait on each other.
fn crossed_pair() -> GraphSpec {
    graph(
        "crossed",
        vec![],
        vec![],
        vec![event("e", vec![lit(2)], Count::Inferred)],
        vec![group(
            "t",
            &["i"],
            vec![lit(2)],
            vec![at(0, vec![point(lit(1).sub(&var(0)))])],
            vec![at(0, vec![point(var(0))])],
        )],
    )
}

#[test]
fn a_task_cycle_is_printed_closed_on_its_first_task() {
    let d = check(&crossed_pair());
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].message, "dependency cycle between tasks: t[0] -> t[1] -> t[0]");
    let err = Resolved::new(&crossed_pair(), &shapes(vec![])).unwrap_err();
    assert_eq!(err, ResolveError::Cycle { tasks: vec!["t[0]".into(), "t[1]".into(), "t[0]".into()] });
}

#[test]
fn a_group_cycle_is_printed_closed() {
    let spec = graph(
        "ring",
        vec![],
        vec![],
        vec![event("x", vec![lit(1)], Count::Inferred), event("y", vec![lit(1)], Count::Inferred)],
        vec![
            group("a", &["i"], vec![lit(1)], vec![at(1, vec![point(lit(0))])], vec![at(0, vec![point(lit(0))])]),
            group("b", &["i"], vec![lit(1)], vec![at(0, vec![point(lit(0))])], vec![at(1, vec![point(lit(0))])]),
        ],
    );
    let d = check(&spec);
    assert_eq!(d[0].message, "dependency cycle between tile groups: `a` -> `b` -> `a`");
}

#[test]
fn totals_past_u32_are_an_error_not_a_wrap() {
    // [R, R] with R = 65537 is 4295098369 tasks, 131073 more than u32 holds
    let spec = graph(
        "square",
        vec![symbolic("R")],
        vec![tensor("a", DType::F32, vec![dim(0)], Access::Read)],
        vec![],
        vec![group("g", &["i", "j"], vec![dim(0), dim(0)], vec![], vec![])],
    );
    let err = Resolved::new(&spec, &shapes(vec![vec![65537]])).unwrap_err();
    assert!(matches!(err, ResolveError::TooLarge { .. }), "{err}");
    assert!(err.to_string().contains("the tasks of `g` (65537 x 65537)"), "{err}");
    // two groups that fit alone but not together
    let mut two = spec.clone();
    two.groups.to_mut()[0].domain = vec![dim(0), lit(65535)].into();
    two.groups.to_mut().push(group("h", &["i", "j"], vec![dim(0), lit(65535)], vec![], vec![]));
    let err = Resolved::new(&two, &shapes(vec![vec![65537]])).unwrap_err();
    assert!(err.to_string().contains("the tasks in total"), "{err}");
    // and the event elements
    let ev = graph(
        "events",
        vec![symbolic("R")],
        vec![tensor("a", DType::F32, vec![dim(0)], Access::Read)],
        vec![event("e", vec![dim(0), dim(0)], Count::Inferred)],
        vec![],
    );
    let err = Resolved::new(&ev, &shapes(vec![vec![65537]])).unwrap_err();
    assert!(err.to_string().contains("the event elements of `e`"), "{err}");
}

/// `p[k]` in [K] signals `e[idx[k]]`; `t[j]` in [E] waits on `e[j]`, counts per element.
fn routed() -> GraphSpec {
    graph(
        "routed",
        vec![symbolic("K"), symbolic("E")],
        vec![
            tensor("idx", DType::I32, vec![dim(0)], Access::Read),
            tensor("counts", DType::U32, vec![dim(1)], Access::Read),
        ],
        vec![event("e", vec![dim(1)], Count::PerElement { tensor: 1 })],
        vec![
            group(
                "p",
                &["k"],
                vec![dim(0)],
                vec![],
                vec![at(0, vec![et_graph::Index::Data { tensor: 0, at: vec![var(0)].into(), along: None }])],
            ),
            group("t", &["j"], vec![dim(1)], vec![at(0, vec![point(var(0))])], vec![]),
        ],
    )
}

#[test]
fn per_element_counts_must_equal_the_signals_received() {
    let spec = routed();
    let idx = vec![0, 2, 2, 0, 2];
    let ok = Launch(vec![vec![5], vec![3]], vec![idx.clone(), vec![2, 0, 3]]);
    let r = Resolved::new(&spec, &ok).unwrap();
    assert_eq!(r.target, vec![2, 0, 3]);
    // e[2] receives 3 signals, the count says 4: an error, not a hang at run time
    let bad = Launch(vec![vec![5], vec![3]], vec![idx.clone(), vec![2, 0, 4]]);
    let err = Resolved::new(&spec, &bad).unwrap_err();
    assert_eq!(err.to_string(), "event `e`: e[2] receives 3 signals but its count is 4");
    // more signals than the count is as wrong as fewer
    let over = Launch(vec![vec![5], vec![3]], vec![idx, vec![1, 0, 3]]);
    let err = Resolved::new(&spec, &over).unwrap_err();
    assert_eq!(err.to_string(), "event `e`: e[0] receives 2 signals but its count is 1");
}

#[test]
fn large_samples_are_shrunk_to_fit() {
    // p[i, h, k] in [R, H, 8] with H = 4096: R = 16 would be 524288 tasks
    let spec = graph(
        "wide",
        vec![symbolic("R"), static_dim("H", 4096)],
        vec![tensor("a", DType::F32, vec![dim(0)], Access::Read)],
        vec![],
        vec![group("p", &["i", "h", "k"], vec![dim(0), dim(1), lit(8)], vec![], vec![])],
    );
    let samples = sample_dims(&spec).unwrap();
    let rs: Vec<i64> = samples.iter().map(|d| d[0]).collect();
    assert_eq!(rs, vec![1, 2, 3, 5, 4]);
    assert!(samples.iter().all(|d| d[0] * 4096 * 8 <= MAX_SAMPLE_TASKS));
    let mut bounded = spec.clone();
    bounded.dims.to_mut()[0].kind = DimKind::Symbolic { max: Some(64) };
    // the bound's sample, min(64, 16) = 16, is halved to 8, the largest that fits
    let rs: Vec<i64> = sample_dims(&bounded).unwrap().iter().map(|d| d[0]).collect();
    assert_eq!(rs, vec![1, 2, 3, 5, 8]);
}

#[test]
fn a_graph_too_large_to_sample_is_a_note_not_silence() {
    // [H, H] with H = 1024 static: even the smallest sample has 1048576 tasks
    let spec = graph(
        "huge",
        vec![symbolic("R"), static_dim("H", 1024)],
        vec![tensor("a", DType::F32, vec![dim(0)], Access::Read)],
        vec![event("e", vec![dim(1)], Count::Inferred)],
        vec![
            group("p", &["i", "j"], vec![dim(1), dim(1)], vec![], vec![at(0, vec![point(var(0))])]),
            group("t", &["i"], vec![dim(1)], vec![at(0, vec![point(var(0))])], vec![]),
        ],
    );
    assert_eq!(sample_dims(&spec), Err(vec![1, 1024]));
    let d = check(&spec);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].severity, Severity::Note);
    assert!(d[0].message.contains("not checked at compile time (with R = 1)"), "{}", d[0].message);
    assert!(d[0].message.contains("1049600 tasks"), "{}", d[0].message);
}

#[test]
fn a_graph_escaping_the_samples_is_rejected_at_launch() {
    // p[i] in [16] signals done[i]; t[i] in [R] waits on done[i] of [R + 16]: covered for
    // every sampled R (at most 5), uncovered from R = 17 on
    let spec = graph(
        "escape",
        vec![symbolic("R")],
        vec![tensor("a", DType::F32, vec![dim(0)], Access::Read)],
        vec![event("done", vec![dim(0).add(&lit(16))], Count::Inferred)],
        vec![
            group("p", &["i"], vec![lit(16)], vec![], vec![at(0, vec![point(var(0))])]),
            group("t", &["i"], vec![dim(0)], vec![at(0, vec![point(var(0))])], vec![]),
        ],
    );
    assert_eq!(check(&spec), vec![]);
    assert!(Resolved::new(&spec, &shapes(vec![vec![16]])).is_ok());
    let err = Resolved::new(&spec, &shapes(vec![vec![17]])).unwrap_err();
    assert_eq!(err.to_string(), "event `done`: done[16] is waited on by t[16] but no task signals it");
}

/// `p[i]` in [`domain`] signals `e[index]` (`e` has shape [`extent`]); `t[i]` in [R] waits `e[i]`.
fn with_numbers(extent: et_graph::Affine, domain: et_graph::Affine, index: et_graph::Affine) -> GraphSpec {
    graph(
        "numbers",
        vec![symbolic("R")],
        vec![tensor("a", DType::F32, vec![dim(0)], Access::Read)],
        vec![event("e", vec![extent], Count::Inferred)],
        vec![
            group("p", &["i"], vec![domain], vec![], vec![at(0, vec![point(index)])]),
            group("t", &["i"], vec![dim(0)], vec![at(0, vec![point(var(0))])], vec![]),
        ],
    )
}

#[test]
fn numbers_past_two_to_the_48_are_an_error_not_an_overflow() {
    // 2^62 R: the bounds proof would compute (2^62 R - 1) * 2^62, the samples 16 * 2^62
    let huge = dim(0).scale(1 << 62);
    let d = check(&with_numbers(huge.clone(), huge.clone(), var(0)));
    assert_eq!(d.len(), 2, "{d:?}");
    assert!(d[0].message.starts_with("extent 0 of event `e` is too large: it can reach 4611686018427387904"), "{d:?}");
    assert!(d[1].message.starts_with("extent 0 of the domain of `p` is too large"), "{d:?}");
    // an index whose tile index is bounded by a large domain
    let d = check(&with_numbers(dim(0), dim(0).scale(1 << 40), var(0).scale(1 << 20)));
    assert!(d.iter().any(|d| d.message.starts_with("index 0 of an access of `p` is too large")), "{d:?}");
    // below the limit everything is checked as usual
    let d = check(&with_numbers(dim(0).scale(1 << 40), dim(0), var(0).scale(1 << 40)));
    assert!(d.iter().all(|d| !d.message.contains("too large")), "{d:?}");
}

#[test]
fn a_domain_or_event_extent_that_can_be_negative_is_an_error() {
    // p in [R - 5]: negative up to R = 4, and the samples (up to R = 5) have no `p` task
    let d = check(&with_numbers(dim(0), dim(0).add(&lit(-5)), var(0)));
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].message, "the extent `R - 5` in the domain of `p` can be negative");
    assert_eq!(d[0].help.as_deref(), Some("it fails for R = 1"));
    // a constant domain of 0 or less never runs
    let d = check(&with_numbers(dim(0), lit(0), var(0)));
    assert_eq!(d[0].message, "the extent `0` in the domain of `p` leaves it no tasks, so it never runs");
    // an event shape
    let d = check(&with_numbers(dim(0).add(&lit(-2)), dim(0), lit(0)));
    assert_eq!(d[0].message, "the extent `R - 2` in the shape of event `e` can be negative", "{d:?}");
    // R - 1 is 0 for one R and never negative: allowed (a layer loop's `[L - 1, B]`)
    let d = check(&with_numbers(dim(0), dim(0).add(&lit(-1)), var(0)));
    assert!(d.iter().all(|d| !d.message.contains("extent")), "{d:?}");
}

#[test]
fn a_range_empty_for_every_task_is_an_error() {
    // t[i] waits on done[i .. i]: no element, so it orders nothing
    let mut spec = producer_consumer();
    let empty = et_graph::Index::Range { start: var(0), end: var(0) };
    spec.groups.to_mut()[1].waits = vec![at(0, vec![empty])].into();
    let d = check(&spec);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].message, "range of index 0 of event `done` is empty for every task of `t`, so it waits on nothing");
    // 0 .. i is empty for t[0] only: allowed
    spec.groups.to_mut()[1].waits = vec![at(0, vec![et_graph::Index::Range { start: lit(0), end: var(0) }])].into();
    assert_eq!(check(&spec), vec![]);
}

/// `p[i]` over `[N - 1]` signals `e[i]`; `last[i]` over `[N - 1]` waits on `e[N - 2]`;
/// `fin` waits on all of `e`. At `N = 1`, `e` is empty and so are both groups' domains.
fn empty_at_one() -> GraphSpec {
    let n_minus = |c: i64| dim(0).add(&lit(-c));
    graph(
        "empty_at_one",
        vec![symbolic("N")],
        vec![tensor("x", DType::F32, vec![dim(0)], Access::Read)],
        vec![event("e", vec![n_minus(1)], Count::Inferred)],
        vec![
            group("p", &["i"], vec![n_minus(1)], vec![], vec![at(0, vec![point(var(0))])]),
            group("last", &["i"], vec![n_minus(1)], vec![at(0, vec![point(n_minus(2))])], vec![]),
            group("fin", &["z"], vec![lit(1)], vec![at(0, vec![et_graph::Index::All])], vec![]),
        ],
    )
}

#[test]
fn an_index_is_bounded_where_its_group_has_tasks() {
    // `N - 2` is negative only at N = 1, where `last` has no task
    assert_eq!(check(&empty_at_one()), vec![]);
    // `N - 3` is negative at N = 2, where it has one: the witness is that size
    let mut spec = empty_at_one();
    spec.groups.to_mut()[1].waits = vec![at(0, vec![point(dim(0).add(&lit(-3)))])].into();
    let d = check(&spec);
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].message.starts_with("index 0 of event `e` can be negative"), "{d:?}");
    assert_eq!(d[0].help.as_deref(), Some("it fails for N = 2"));
}

#[test]
fn a_full_range_over_an_empty_axis_is_no_element() {
    let spec = empty_at_one();
    for n in [1, 2, 5] {
        let res = Resolved::new(&spec, &shapes(vec![vec![n]])).unwrap_or_else(|e| panic!("N = {n}: {e}"));
        // p and last have N - 1 tasks each, fin one
        assert_eq!(res.n_tasks as i64, 2 * (n - 1) + 1, "N = {n}");
    }
}

#[test]
fn a_run_of_routing_positions_that_can_be_empty_is_an_error() {
    // p[k] signals e[idx[k .. k + len]]
    let with_run = |len: et_graph::Affine| {
        let mut spec = routed();
        let run = et_graph::Index::Data { tensor: 0, at: vec![var(0)].into(), along: Some((0, len)) };
        spec.groups.to_mut()[0].signals = vec![at(0, vec![run])].into();
        spec.tensors.to_mut()[0].shape = vec![dim(0).add(&lit(4))].into();
        check(&spec)
    };
    let d = with_run(lit(-2));
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].message, "the run along index 0 of tensor `idx` can be empty: its length is `-2`");
    assert!(with_run(lit(0))[0].message.contains("can be empty"));
    assert!(with_run(lit(3)).iter().all(|d| !d.message.contains("run")));
}

/// `s[e]` signals `g[e]`; `up[e]` (if `e < counts[e]`, guarded by `g[e]`) signals
/// `d[e]`; `fin[e]` waits on `d[e]`.
/// What `fin`, the waiter of `d[e]` that the conditional `up[e]` signals, looks like.
#[derive(Clone, Copy)]
enum Fin {
    /// No condition: it waits `d[e]`.
    Unconditional,
    /// `up`'s condition, guarded by its wait on `d[e]` itself.
    GuardedByD,
    /// `up`'s condition, guarded by `g[e]` (every `s` signals it), then `d[e]`.
    SameCondition,
    /// A weaker condition (`e - 1 < counts[e]`, true where `up`'s may not be), guarded by
    /// `g[e]`, then `d[e]`.
    WeakerCondition,
    /// A stronger condition (`e + 1 < counts[e]`, which implies `up`'s), guarded by `g[e]`,
    /// then `d[e]`.
    StrongerCondition,
    /// `up`'s condition, guarded by `g[e]`, then `d[e + 1]`: the element of another `up`.
    OtherElement,
}

fn conditional(fin_kind: Fin, count: Count) -> GraphSpec {
    let cond = |lhs| et_graph::Condition { lhs, cmp: et_graph::Cmp::Lt, tensor: 0, at: vec![var(0)].into() };
    let mut up = group("up", &["e"], vec![dim(0)], vec![at(0, vec![point(var(0))])], vec![at(1, vec![point(var(0))])]);
    up.condition = Some(cond(var(0)));
    let e = || vec![point(var(0))];
    let (waits, condition) = match fin_kind {
        Fin::Unconditional => (vec![at(1, e())], None),
        // its guard is its first statement, the wait on d[e]
        Fin::GuardedByD => (vec![at(1, e())], Some(cond(var(0)))),
        Fin::SameCondition => (vec![at(0, e()), at(1, e())], Some(cond(var(0)))),
        Fin::WeakerCondition => (vec![at(0, e()), at(1, e())], Some(cond(var(0).sub(&lit(1))))),
        Fin::StrongerCondition => (vec![at(0, e()), at(1, e())], Some(cond(var(0).add(&lit(1))))),
        Fin::OtherElement => (vec![at(0, e()), at(1, vec![point(var(0).add(&lit(1)))])], Some(cond(var(0)))),
    };
    // `d[e + 1]` stays inside `d` over `e < E - 1`
    let domain = if matches!(fin_kind, Fin::OtherElement) { dim(0).sub(&lit(1)) } else { dim(0) };
    let mut fin = group("fin", &["e"], vec![domain], waits, vec![]);
    fin.condition = condition;
    graph(
        "conditional",
        vec![symbolic("E")],
        vec![tensor("counts", DType::I32, vec![dim(0)], Access::Read)],
        vec![event("g", vec![dim(0)], Count::Inferred), event("d", vec![dim(0)], count)],
        vec![group("s", &["e"], vec![dim(0)], vec![], vec![at(0, vec![point(var(0))])]), up, fin],
    )
}

#[test]
fn a_wait_that_an_inactive_producer_can_leave_waiting_is_an_error() {
    let messages =
        |fin| -> Vec<String> { check(&conditional(fin, Count::Inferred)).into_iter().map(|d| d.message).collect() };
    let waits = "`fin` waits on event `d`, which `up` signals only when its condition holds";
    assert_eq!(messages(Fin::Unconditional), [waits]);
    assert_eq!(messages(Fin::WeakerCondition), [waits]);
    assert_eq!(messages(Fin::OtherElement), [waits]);
    // a guard is waited before the condition is read, whatever the condition
    assert_eq!(
        messages(Fin::GuardedByD),
        ["the guard of `fin`'s condition waits on event `d`, which `up` signals only when its condition holds"]
    );
    // the producer's condition over the same element, after a guard every task signals
    assert_eq!(messages(Fin::SameCondition), Vec::<String>::new());
    // or one that implies it: every active `fin[e]` finds `up[e]` active
    assert_eq!(messages(Fin::StrongerCondition), Vec::<String>::new());
    // a declared count states what arrives
    let declared = check(&conditional(Fin::Unconditional, Count::Fixed(lit(1))));
    assert!(declared.iter().all(|d| !d.message.contains("only when its condition holds")), "{declared:?}");
}

/// `p` and `q` wait on each other through `a` and `b`, and so do `r` and `s` through `c`
/// and `d`; `t` and `u` each wait on an element they signal.
fn independent_problems() -> GraphSpec {
    let i = || vec![point(var(0))];
    graph(
        "independent",
        vec![symbolic("N")],
        vec![tensor("x", DType::F32, vec![dim(0)], Access::Read)],
        ["a", "b", "c", "d", "e", "f"].map(|n| event(n, vec![dim(0)], Count::Inferred)).to_vec(),
        vec![
            group("p", &["i"], vec![dim(0)], vec![at(0, i())], vec![at(1, i())]),
            group("q", &["i"], vec![dim(0)], vec![at(1, i())], vec![at(0, i())]),
            group("r", &["i"], vec![dim(0)], vec![at(2, i())], vec![at(3, i())]),
            group("s", &["i"], vec![dim(0)], vec![at(3, i())], vec![at(2, i())]),
            group("t", &["i"], vec![dim(0)], vec![at(4, i())], vec![at(4, i())]),
            group("u", &["i"], vec![dim(0)], vec![at(5, i())], vec![at(5, i())]),
        ],
    )
}

#[test]
fn independent_cycles_and_self_waits_are_each_reported() {
    let messages: Vec<String> = check(&independent_problems()).into_iter().map(|d| d.message).collect();
    assert_eq!(
        messages,
        [
            "dependency cycle between tile groups: `p` -> `q` -> `p`",
            "dependency cycle between tile groups: `r` -> `s` -> `r`",
        ],
    );
    // without the group cycles, the sample sizes find both self-waits
    let mut spec = independent_problems();
    spec.groups.to_mut().drain(0..4);
    let messages: Vec<String> = check(&spec).into_iter().map(|d| d.message).collect();
    assert_eq!(
        messages,
        [
            "task `t[0]` waits on `e[0]`, which it signals itself (with N = 1)",
            "task `u[0]` waits on `f[0]`, which it signals itself (with N = 1)",
        ],
    );
}

#[test]
fn launch_shapes_that_push_an_expression_past_two_to_the_48_are_an_error() {
    // compile time counts the unbounded R as 1; at launch R = 2^29 puts index 2^20 i at 2^49
    let spec = with_numbers(dim(0).scale(1 << 20), dim(0), var(0).scale(1 << 20));
    assert!(check(&spec).iter().all(|d| !d.message.contains("too large")));
    let err = Resolved::new(&spec, &shapes(vec![vec![1 << 29]])).unwrap_err();
    assert!(matches!(err, ResolveError::Magnitude { .. }), "{err}");
    assert!(err.to_string().starts_with("extent 0 of event `e`, which can reach 562949953421312"), "{err}");
    // solving R from an extent near i64::MAX: `got - rest` itself overflows
    let mut near = spec.clone();
    near.tensors.to_mut()[0].shape = vec![dim(0).add(&lit(-(1 << 47)))].into();
    let err = Resolved::new(&near, &shapes(vec![vec![i64::MAX]])).unwrap_err();
    assert!(matches!(err, ResolveError::Magnitude { .. }), "{err}");
    assert!(err.to_string().contains("`R` as solved from `a` dimension 0"), "{err}");
    // a tile of extent 0 (an error of its own) still bounds its index: no overflow in
    // the race rule's `index * extent` arithmetic
    let reader = group("r", &["i"], vec![dim(0)], vec![], vec![]);
    let a = tile_of(0, vec![var(0).scale(1 << 40)], vec![lit(0)], Access::Read);
    let empty_tile = graph(
        "empty_tile",
        vec![symbolic("R")],
        vec![tensor("a", DType::F32, vec![dim(0)], Access::Read)],
        vec![],
        vec![with_tiles(reader, vec![a])],
    );
    let err = Resolved::new(&empty_tile, &shapes(vec![vec![1 << 30]])).unwrap_err();
    assert!(matches!(err, ResolveError::Magnitude { .. }), "{err}");
    // small shapes solve as before
    assert_eq!(et_graph::resolve::resolve_dims(&spec, &[vec![16]]), Ok(vec![16]));
}

/// `conditional(Fin::Unconditional, ..)` with its count read per element from a second tensor, `cnt`.
fn conditional_dyn() -> GraphSpec {
    let mut spec = conditional(Fin::Unconditional, Count::PerElement { tensor: 1 });
    spec.tensors.to_mut().push(tensor("cnt", DType::U32, vec![dim(0)], Access::Read));
    spec
}

#[test]
fn a_conditional_producer_takes_the_count_that_arrives() {
    let spec = conditional_dyn();
    assert!(check(&spec).iter().all(|d| d.severity != Severity::Error), "{:?}", check(&spec));
    // up[1] is inactive (1 < counts[1] is false): d[1] receives no signal, its count says 0
    let launch = Launch(vec![vec![2], vec![2]], vec![vec![2, 1], vec![1, 0]]);
    let r = Resolved::new(&spec, &launch).unwrap();
    assert_eq!(&r.target[2..4], &[1, 0]);
    // the count is the device's to check: resolution does not hold it to the tally over
    // every task, which is only an upper bound
    let all = Launch(vec![vec![2], vec![2]], vec![vec![2, 2], vec![1, 1]]);
    assert_eq!(&Resolved::new(&spec, &all).unwrap().target[2..4], &[1, 1]);
    // a fixed count of a conditional producer's event is taken as declared too
    let fixed = conditional(Fin::Unconditional, Count::Fixed(lit(0)));
    let r = Resolved::new(&fixed, &Launch(vec![vec![2]], vec![vec![0, 0]])).unwrap();
    assert_eq!(&r.target[2..4], &[0, 0]);
}

/// `up[e, f]` (`e < counts[e]`) signals `d[e]` for each `f`: at most `F` signals, which
/// `fin[e]` waits for with the declared `count`.
fn conditional_fan_in(count: Count) -> GraphSpec {
    let cond = et_graph::Condition { lhs: var(0), cmp: et_graph::Cmp::Lt, tensor: 0, at: vec![var(0)].into() };
    let mut up = group(
        "up",
        &["e", "f"],
        vec![dim(0), dim(1)],
        vec![at(0, vec![point(var(0))])],
        vec![at(1, vec![point(var(0))])],
    );
    up.condition = Some(cond);
    graph(
        "fan_in",
        vec![symbolic("E"), symbolic("F")],
        vec![
            tensor("counts", DType::I32, vec![dim(0)], Access::Read),
            tensor("x", DType::F32, vec![dim(1)], Access::Read),
        ],
        vec![event("g", vec![dim(0)], Count::Inferred), event("d", vec![dim(0)], count)],
        vec![
            group("s", &["e"], vec![dim(0)], vec![], vec![at(0, vec![point(var(0))])]),
            up,
            group("fin", &["e"], vec![dim(0)], vec![at(1, vec![point(var(0))])], vec![]),
        ],
    )
}

#[test]
fn a_count_above_every_signal_that_can_arrive_is_an_error() {
    // one conditional signal per element, a count of 2: unreachable at every size
    let d = check(&conditional(Fin::Unconditional, Count::Fixed(lit(2))));
    assert!(
        d.iter().any(|d| d.severity == Severity::Error
            && d.message.starts_with("count 2 can never be reached: `d[0]` receives at most 1 signal per launch")),
        "{d:?}"
    );
    let launch = Launch(vec![vec![2]], vec![vec![2, 2]]);
    let err = Resolved::new(&conditional(Fin::Unconditional, Count::Fixed(lit(2))), &launch).unwrap_err().to_string();
    assert!(err.contains("d[0] receives at most 1 signal") && err.contains("could never run"), "{err}");
    // reachable from F = 2 on: it compiles, and only a launch at F = 1 is refused
    let spec = conditional_fan_in(Count::Fixed(lit(2)));
    assert!(check(&spec).iter().all(|d| d.severity != Severity::Error), "{:?}", check(&spec));
    assert!(Resolved::new(&spec, &Launch(vec![vec![2], vec![2]], vec![vec![2, 2]])).is_ok());
    let err = Resolved::new(&spec, &Launch(vec![vec![2], vec![1]], vec![vec![2, 2]])).unwrap_err().to_string();
    assert!(err.contains("receives at most 1 signal"), "{err}");
    // per-element counts: only at launch (their values are data), and only above the tally
    let dynamic = conditional_dyn();
    let over = Launch(vec![vec![2], vec![2]], vec![vec![2, 2], vec![2, 0]]);
    let err = Resolved::new(&dynamic, &over).unwrap_err().to_string();
    assert!(err.contains("d[0] receives at most 1 signal") && err.contains("its count is 2"), "{err}");
}

#[test]
fn an_inferred_count_of_a_conditional_producer_is_still_checked() {
    // `fin` shares the condition: the count is the tally over every task, checked as ever
    // and is checked as ever: `up[e]` signalling d[0] leaves d[1] unsignalled
    let mut spec = conditional(Fin::SameCondition, Count::Inferred);
    spec.groups.to_mut()[1].signals = vec![at(1, vec![point(lit(0))])].into();
    let r = Resolved::shapes_only(&spec, vec![vec![2]]).unwrap();
    let p = r.count_problems();
    assert!(
        matches!(
            p[..],
            [et_graph::resolve::CountProblem { kind: et_graph::resolve::CountProblemKind::NeverSignalled { .. }, .. }]
        ),
        "{p:?}"
    );
}

#[test]
fn an_explicit_count_of_zero_needs_no_signal() {
    let mut spec = producer_consumer();
    spec.events.to_mut()[0].count = Count::Fixed(lit(0));
    spec.groups.to_mut()[0].signals = vec![].into();
    let d = check(&spec);
    assert!(d.iter().all(|d| d.severity != Severity::Error), "{d:?}");
    let r = Resolved::new(&spec, &shapes(vec![vec![3]])).unwrap();
    assert_eq!(r.target, vec![0, 0, 0]);
    // an inferred count still wants a signal
    spec.events.to_mut()[0].count = Count::Inferred;
    assert!(check(&spec).iter().any(|d| d.message.contains("no task signals it")));
}

#[test]
fn a_negative_count_is_named_as_such() {
    let mut spec = producer_consumer();
    spec.events.to_mut()[0].count = Count::Fixed(dim(0).sub(&lit(2)));
    let d = check(&spec);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].message, "the count of event `done` is -1, but a count must be ≥ 0 (with R = 1)");
    let err = Resolved::new(&spec, &shapes(vec![vec![1]])).unwrap_err();
    assert_eq!(err.to_string(), "event `done`: its count is -1, but a count must be ≥ 0");
    // at R = 3 the count is 1, what arrives
    assert!(Resolved::new(&spec, &shapes(vec![vec![3]])).is_ok());
    // the same count on an extra event that is empty at launch (its layout's offset is
    // then past every element): still the error, not a panic describing an element
    let mut spec = producer_consumer();
    let events = spec.events.to_mut();
    events.push(event("empty", vec![lit(1).sub(&dim(0))], Count::Fixed(dim(0).sub(&lit(2)))));
    let err = Resolved::new(&spec, &shapes(vec![vec![1]])).unwrap_err();
    assert_eq!(err.to_string(), "event `empty`: its count is -1, but a count must be ≥ 0");
}

#[test]
fn a_count_mismatch_of_one_signal_is_singular() {
    let mut spec = producer_consumer();
    spec.events.to_mut()[0].count = Count::Fixed(lit(2));
    let err = Resolved::new(&spec, &shapes(vec![vec![2]])).unwrap_err();
    assert_eq!(err.to_string(), "event `done`: done[0] receives 1 signal but its count is 2");
}

/// `a[l]` in [L] waits on `h[2l]` and signals `g[2l]`, `g[2l + 1]`; `b[m]` in [2L] waits on
/// `g[m]` and signals `h[m + 2]`: the tasks are acyclic (`a[l]` -> `b[2l]` -> `a[l + 1]`),
/// but no one tile index per group advances with equal coefficients.
fn different_scales() -> GraphSpec {
    let two_l = || dim(0).scale(2);
    graph(
        "scales",
        vec![symbolic("L")],
        vec![tensor("x", DType::F32, vec![dim(0)], Access::Read)],
        vec![event("h", vec![two_l().add(&lit(2))], Count::Inferred), event("g", vec![two_l()], Count::Inferred)],
        vec![
            group("seed", &["z"], vec![lit(1)], vec![], vec![at(0, vec![point(lit(0))])]),
            group(
                "a",
                &["l"],
                vec![dim(0)],
                vec![at(0, vec![point(var(0).scale(2))])],
                vec![at(1, vec![point(var(0).scale(2))]), at(1, vec![point(var(0).scale(2).add(&lit(1)))])],
            ),
            group(
                "b",
                &["m"],
                vec![two_l()],
                vec![at(1, vec![point(var(0))])],
                vec![at(0, vec![point(var(0).add(&lit(2)))])],
            ),
        ],
    )
}

#[test]
fn an_unproven_cycle_of_acyclic_tasks_is_not_called_a_dependency_cycle() {
    let spec = different_scales();
    // the tasks are acyclic at launch
    assert!(Resolved::new(&spec, &shapes(vec![vec![4]])).is_ok());
    let d = check(&spec);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].severity, Severity::Error);
    assert!(d[0].message.contains("with no tile index proven to advance around it"), "{}", d[0].message);
    assert!(!d[0].message.contains("dependency cycle"), "{}", d[0].message);
    // a real cycle keeps its name
    let d = check(&crossed_pair_groups());
    assert!(d.iter().any(|d| d.message.starts_with("dependency cycle between tile groups")), "{d:?}");
}

/// `left[i]` waits on `pong[i]` and signals `ping[i]`, `right[i]` the reverse.
fn crossed_pair_groups() -> GraphSpec {
    graph(
        "pingpong",
        vec![symbolic("N")],
        vec![tensor("x", DType::F32, vec![dim(0)], Access::Read)],
        vec![event("ping", vec![dim(0)], Count::Inferred), event("pong", vec![dim(0)], Count::Inferred)],
        vec![
            group("left", &["i"], vec![dim(0)], vec![at(1, vec![point(var(0))])], vec![at(0, vec![point(var(0))])]),
            group("right", &["i"], vec![dim(0)], vec![at(0, vec![point(var(0))])], vec![at(1, vec![point(var(0))])]),
        ],
    )
}

#[test]
fn a_graph_too_large_for_host_memory_is_an_error_not_an_abort() {
    // 4e9 tasks and 2e9 elements ask for about 576 GB: refused by the allocator wherever
    // the kernel refuses allocations past what it has (Linux's default heuristic, 0, or
    // strict accounting, 2); with "always overcommit" (1) it would be granted and then
    // touched, so the check is skipped there and on machines with that much memory.
    let overcommit = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kb = |key: &str| -> Option<u64> {
        meminfo.lines().find(|l| l.starts_with(key))?.split_whitespace().nth(1)?.parse().ok()
    };
    let total_gb = kb("MemTotal:").zip(kb("SwapTotal:")).map(|(m, s)| (m + s) / 1_000_000);
    if !matches!(overcommit.trim(), "0" | "2") || total_gb.is_none_or(|gb| gb >= 400) {
        eprintln!("skipped: vm.overcommit_memory {overcommit:?}, memory and swap {total_gb:?} GB");
        return;
    }
    let err = Resolved::new(&producer_consumer(), &shapes(vec![vec![2_000_000_000]])).unwrap_err();
    assert!(matches!(err, ResolveError::OutOfMemory { tasks: 4_000_000_000, elements: 2_000_000_000, .. }), "{err}");
    assert!(err.to_string().contains("needs about 576.0 GB of host memory to resolve"), "{err}");
}
