//! The ranking proof that lets a cycle of tile groups through when a tile index strictly
//! advances around it: the layer loop, where `attn[l, ..]` waits `h[l, ..]` and signals
//! `a[l, ..]`, and `mlp[l, ..]` waits `a[l, ..]` and signals `h[l + 1, ..]`.
//!
//! The group graph (signaller → waiter, through events) then has the cycle `attn` →
//! `mlp` → `attn`, yet the task graph is acyclic: every dependency goes from layer `l` to
//! layer `l` or `l + 1`, and only forward. The proof makes that argument for any size:
//!
//! - each group `g` of a strongly connected component gets a *rank*: one of its tile
//!   indices, `r_g(x) = x[pos(g)]`;
//! - each pair of groups `p → c` in the component gets a *weight* `w(p, c)`: a lower
//!   bound of `r_c(y) - r_p(x)` over every pair of tasks `p[x]`, `c[y]` where `c[y]` waits
//!   on an element that `p[x]` signals. It is derived coordinate by coordinate from the
//!   access maps: a signal and a wait meet in coordinate `d` only if their intervals
//!   overlap (`lo_s <= hi_w` and `lo_w <= hi_s`); an inequality of the form
//!   `β (y[j] - x[i]) + k >= 0` bounds the rank difference. A `..` or a data-dependent
//!   coordinate can be anything, so it bounds nothing; an inequality that mentions any
//!   other tile index or a symbolic dim bounds nothing either;
//! - the proof holds when every edge inside the component has a weight, every group's
//!   edges to itself have weight `>= 0`, and every cycle of two or more groups has total
//!   weight `>= 1` (an edge may go back, `-1`, when the others advance further).
//!
//! Then no cycle of tasks runs through two groups: along a cycle of tasks the rank
//! differences sum to zero, but they are at least the weights of the group-level closed
//! walk it follows, which splits into self-edges (each `>= 0`) and at least one cycle of
//! two or more groups (`>= 1`). Cycles of tasks within one group (a chain that waits on
//! itself) are not this module's concern: the exact rules check them per task.
//!
//! The search tries every assignment of rank positions (pruned as soon as an edge has no
//! weight), so it finds a proof whenever one rank index per group suffices; ranks that
//! need a combination of indices (`i + j`) are not tried, and such a cycle is rejected.

use crate::affine::{Affine, Term};
use crate::spec::{EventAccess, GraphSpec, Index};

/// The most rank assignments the search visits before it gives up (and the cycle is
/// rejected): bounds the compile time on large components.
const MAX_VISITS: usize = 1 << 16;

/// What the access maps say about `r_c(y) - r_p(x)` over the dependent task pairs of one
/// group pair. `Never` is the identity of `Step::min`: no task pair depends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// No task of the consumer waits on an element a task of the producer signals.
    Never,
    /// The rank difference is at least this much for every dependent pair.
    AtLeast(i64),
    /// Nothing bounds the rank difference from below.
    Unbounded,
}

impl Step {
    /// The bound that holds for both (a dependency may come through either).
    fn min(self, other: Step) -> Step {
        match (self, other) {
            (Step::Never, s) | (s, Step::Never) => s,
            (Step::Unbounded, _) | (_, Step::Unbounded) => Step::Unbounded,
            (Step::AtLeast(a), Step::AtLeast(b)) => Step::AtLeast(a.min(b)),
        }
    }
}

/// A linear form over the producer's tile indices `x`, the consumer's tile indices `y`
/// and the symbolic dims, plus a constant (static dims are folded in).
#[derive(Clone, Debug)]
struct Form {
    x: Vec<i64>,
    y: Vec<i64>,
    dims: Vec<i64>,
    constant: i64,
}

impl Form {
    /// `a` with its tile indices read as the producer's (`consumer == false`) or the
    /// consumer's.
    fn new(spec: &GraphSpec, a: &Affine, nx: usize, ny: usize, consumer: bool) -> Form {
        let a = a.substitute_static(&spec.dims);
        let mut f = Form { x: vec![0; nx], y: vec![0; ny], dims: vec![0; spec.dims.len()], constant: a.constant };
        for &(t, c) in a.terms.iter() {
            match t {
                Term::Var(v) if consumer => f.y[v as usize] += c,
                Term::Var(v) => f.x[v as usize] += c,
                Term::Dim(d) => f.dims[d as usize] += c,
            }
        }
        f
    }

    /// `self - other`.
    fn sub(&self, other: &Form) -> Form {
        let diff = |a: &[i64], b: &[i64]| a.iter().zip(b).map(|(p, q)| p - q).collect();
        Form {
            x: diff(&self.x, &other.x),
            y: diff(&self.y, &other.y),
            dims: diff(&self.dims, &other.dims),
            constant: self.constant - other.constant,
        }
    }
}

/// The bounds on `y[j] - x[i]` one necessary inequality `e >= 0` gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bound {
    /// The inequality can never hold: the accesses never meet.
    Impossible,
    /// `y[j] - x[i] >= k`.
    Lower(i64),
    /// `y[j] - x[i] <= k`.
    Upper(i64),
    /// Nothing about the rank difference.
    Nothing,
}

fn bound(e: &Form, i: usize, j: usize) -> Bound {
    let others = e.x.iter().enumerate().any(|(k, &c)| k != i && c != 0)
        || e.y.iter().enumerate().any(|(k, &c)| k != j && c != 0)
        || e.dims.iter().any(|&c| c != 0);
    if others {
        return Bound::Nothing;
    }
    // a group without tile indices (`p[] in []`) has no rank position: 0 stands in
    let (a, b) = (e.x.get(i).copied().unwrap_or(0), e.y.get(j).copied().unwrap_or(0));
    match (a, b) {
        (0, 0) if e.constant < 0 => Bound::Impossible,
        (0, 0) => Bound::Nothing,
        // b (y - x) + k >= 0
        _ if a == -b && b > 0 => Bound::Lower((-e.constant).div_euclid(b) + ((-e.constant).rem_euclid(b) != 0) as i64),
        _ if a == -b => Bound::Upper(e.constant.div_euclid(-b)),
        _ => Bound::Nothing,
    }
}

/// `lo ..= hi` of one coordinate of an access, or `None` when it can be anything.
fn interval(ix: &Index) -> Option<(Affine, Affine)> {
    match ix {
        Index::At(a) => Some((a.clone(), a.clone())),
        Index::Range { start, end } => Some((start.clone(), end.sub(&Affine::constant(1)))),
        Index::All | Index::Data { .. } => None,
    }
}

/// The bound on `y[j] - x[i]` over the tasks `p[x]`, `c[y]` where signal `s` of `p`
/// and wait `w` of `c` touch a common element.
fn pair_step(spec: &GraphSpec, p: usize, i: usize, s: &EventAccess, c: usize, j: usize, w: &EventAccess) -> Step {
    if s.event != w.event {
        return Step::Never;
    }
    let (nx, ny) = (spec.groups[p].vars.len(), spec.groups[c].vars.len());
    let (mut lower, mut upper) = (None::<i64>, None::<i64>);
    for (si, wi) in s.index.iter().zip(w.index.iter()) {
        let (Some((lo_s, hi_s)), Some((lo_w, hi_w))) = (interval(si), interval(wi)) else {
            continue;
        };
        let side = |a: &Affine, consumer| Form::new(spec, a, nx, ny, consumer);
        // the intervals overlap: lo_s <= hi_w and lo_w <= hi_s
        for e in [side(&hi_w, true).sub(&side(&lo_s, false)), side(&hi_s, false).sub(&side(&lo_w, true))] {
            match bound(&e, i, j) {
                Bound::Impossible => return Step::Never,
                Bound::Lower(k) => lower = Some(lower.map_or(k, |l| l.max(k))),
                Bound::Upper(k) => upper = Some(upper.map_or(k, |u| u.min(k))),
                Bound::Nothing => {}
            }
        }
    }
    match (lower, upper) {
        (Some(l), Some(u)) if l > u => Step::Never,
        (Some(l), _) => Step::AtLeast(l),
        (None, _) => Step::Unbounded,
    }
}

/// Whether some task of `p` may signal, through `s`, an element that some task of `c`
/// waits on through `w`: false only when the access maps prove the two never meet.
pub fn pair_meets(spec: &GraphSpec, p: usize, s: &EventAccess, c: usize, w: &EventAccess) -> bool {
    // the rank positions matter only for the bound, not for whether the accesses meet
    pair_step(spec, p, 0, s, c, 0, w) != Step::Never
}

/// The weight of the group pair `p → c` with ranks `x[i]` and `y[j]`: the bound that
/// holds for every (signal of `p`, wait of `c`) pair on a common event.
pub fn step(spec: &GraphSpec, p: usize, i: usize, c: usize, j: usize) -> Step {
    let mut out = Step::Never;
    for s in spec.groups[p].signals.iter() {
        for w in spec.groups[c].waits.iter() {
            out = out.min(pair_step(spec, p, i, s, c, j, w));
        }
    }
    out
}

/// Proves that no cycle of tasks runs through two or more of the groups `scc` (a
/// strongly connected component of the group graph): returns the rank position found
/// for each group of `scc`, in its order, or `None` when one rank index per group does
/// not give a proof (see the module documentation).
pub fn prove_progress(spec: &GraphSpec, scc: &[usize]) -> Option<Vec<usize>> {
    let k = scc.len();
    // positions whose self-edges never go back
    let candidates: Vec<Vec<usize>> = scc
        .iter()
        .map(|&g| {
            (0..spec.groups[g].vars.len())
                .filter(|&i| matches!(step(spec, g, i, g, i), Step::Never | Step::AtLeast(0..)))
                .collect()
        })
        .collect();
    // weights[a][b][i][j] for the pairs of distinct groups that share an event
    let shares = |a: usize, b: usize| {
        spec.groups[a].signals.iter().any(|s| spec.groups[b].waits.iter().any(|w| w.event == s.event))
    };
    let weights: Vec<Vec<Option<Vec<Vec<Step>>>>> = (0..k)
        .map(|a| {
            (0..k)
                .map(|b| {
                    let (p, c) = (scc[a], scc[b]);
                    (a != b && shares(p, c)).then(|| {
                        (0..spec.groups[p].vars.len())
                            .map(|i| (0..spec.groups[c].vars.len()).map(|j| step(spec, p, i, c, j)).collect())
                            .collect()
                    })
                })
                .collect()
        })
        .collect();
    let mut search = Search { weights: &weights, candidates: &candidates, chosen: Vec::new(), visits: 0 };
    search.assign().then_some(search.chosen)
}

struct Search<'a> {
    weights: &'a [Vec<Option<Vec<Vec<Step>>>>],
    candidates: &'a [Vec<usize>],
    chosen: Vec<usize>,
    visits: usize,
}

impl Search<'_> {
    fn weight(&self, a: usize, b: usize) -> Step {
        self.weights[a][b].as_ref().map_or(Step::Never, |w| w[self.chosen[a]][self.chosen[b]])
    }

    /// Depth first over the groups in order; an edge without a weight prunes at once.
    fn assign(&mut self) -> bool {
        let t = self.chosen.len();
        if t == self.candidates.len() {
            return self.cycles_advance();
        }
        for &i in &self.candidates[t] {
            self.visits += 1;
            if self.visits > MAX_VISITS {
                return false;
            }
            self.chosen.push(i);
            let bounded = (0..t).all(|u| self.weight(u, t) != Step::Unbounded && self.weight(t, u) != Step::Unbounded);
            if bounded && self.assign() {
                return true;
            }
            self.chosen.pop();
        }
        false
    }

    /// Every cycle has total weight >= 1: with `w' = k w - 1` a simple cycle (at most
    /// `k` edges) is negative exactly when its weight is `<= 0`; Bellman-Ford finds one.
    fn cycles_advance(&self) -> bool {
        let k = self.candidates.len();
        let edges: Vec<(usize, usize, i128)> = (0..k)
            .flat_map(|a| (0..k).map(move |b| (a, b)))
            .filter_map(|(a, b)| match self.weight(a, b) {
                Step::AtLeast(w) => Some((a, b, k as i128 * w as i128 - 1)),
                Step::Never | Step::Unbounded => None,
            })
            .collect();
        let mut dist = vec![0i128; k];
        for _ in 0..k {
            let mut changed = false;
            for &(a, b, w) in &edges {
                if dist[a] + w < dist[b] {
                    dist[b] = dist[a] + w;
                    changed = true;
                }
            }
            if !changed {
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::*;
    use crate::check::{Diagnostic, check_group_cycles};
    use crate::resolve::Resolved;
    use crate::spec::{Access, Count, DType, EventSpec, GroupSpec};

    const L: u16 = 0;
    const B: u16 = 1;
    const H: u16 = 0;
    const A: u16 = 1;

    /// Dims `L`, `B` (fixed by `x: [L, B]`), events `h` and `a` (`[L, B]`) and `more`.
    fn spec(h: Vec<crate::affine::Affine>, more: Vec<EventSpec>, groups: Vec<GroupSpec>) -> GraphSpec {
        let mut events = vec![event("h", h, Count::Inferred), event("a", vec![dim(L), dim(B)], Count::Inferred)];
        events.extend(more);
        graph(
            "layers",
            vec![symbolic("L"), symbolic("B")],
            vec![
                tensor("x", DType::F32, vec![dim(L), dim(B)], Access::Read),
                tensor("route", DType::U32, vec![dim(L), dim(B)], Access::Read),
            ],
            events,
            groups,
        )
    }

    /// `attn[l, b]` waits `h[wait, b]` and signals `a[l, b]`; `mlp[l, b]` waits `a[l, b]`
    /// and signals `h[signal, b]`.
    fn layer_loop(h: Vec<crate::affine::Affine>, wait: Index, signal: Index) -> GraphSpec {
        let lb = || vec![point(var(0)), point(var(1))];
        spec(
            h,
            vec![],
            vec![
                group(
                    "attn",
                    &["l", "b"],
                    vec![dim(L), dim(B)],
                    vec![at(H, vec![wait, point(var(1))])],
                    vec![at(A, lb())],
                ),
                group(
                    "mlp",
                    &["l", "b"],
                    vec![dim(L), dim(B)],
                    vec![at(A, lb())],
                    vec![at(H, vec![signal, point(var(1))])],
                ),
            ],
        )
    }

    fn l_plus(k: i64) -> Index {
        point(var(0).add(&lit(k)))
    }

    fn cycles(spec: &GraphSpec) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        check_group_cycles(spec, &mut out);
        out
    }

    /// The task graph at `L = B = n` for n in 1..=5 (the proof claims every size).
    fn acyclic_at_small_sizes(spec: &GraphSpec) -> bool {
        (1..=5i64).all(|n| {
            let shapes = spec.tensors.iter().map(|t| t.shape.iter().map(|e| e.eval(&[], &[n, n])).collect()).collect();
            Resolved::shapes_only(spec, shapes).unwrap().topological_order().is_ok()
        })
    }

    fn accepted(spec: &GraphSpec) {
        assert_eq!(cycles(spec), vec![], "the proof should accept this loop");
        assert!(acyclic_at_small_sizes(spec), "accepted, but the task graph has a cycle");
    }

    /// Rejected, as a dependency cycle where the task graph has one at a small size, else
    /// as a cycle that no tile index is proven to advance around.
    fn rejected(spec: &GraphSpec, cycle: &str) {
        let d = cycles(spec);
        assert_eq!(d.len(), 1, "{d:?}");
        let want = if acyclic_at_small_sizes(spec) {
            format!("cycle between tile groups {cycle} with no tile index proven to advance around it")
        } else {
            format!("dependency cycle between tile groups: {cycle}")
        };
        assert_eq!(d[0].message, want);
    }

    #[test]
    fn the_layer_loop_is_accepted_with_l_as_the_rank() {
        let s = layer_loop(vec![dim(L).add(&lit(1)), dim(B)], l_plus(0), l_plus(1));
        accepted(&s);
        assert_eq!(prove_progress(&s, &[0, 1]), Some(vec![0, 0]));
        assert_eq!(step(&s, 0, 0, 1, 0), Step::AtLeast(0));
        assert_eq!(step(&s, 1, 0, 0, 0), Step::AtLeast(1));
        // b stays the same along both edges: as a rank it would not advance
        assert_eq!(step(&s, 1, 1, 0, 1), Step::AtLeast(0));
        // and l of one group says nothing about b of the other
        assert_eq!(step(&s, 1, 0, 0, 1), Step::Unbounded);
    }

    #[test]
    fn a_loop_through_three_groups_is_accepted() {
        let lb = || vec![point(var(0)), point(var(1))];
        let s = spec(
            vec![dim(L).add(&lit(1)), dim(B)],
            vec![event("n", vec![dim(L), dim(B)], Count::Inferred)],
            vec![
                group("attn", &["l", "b"], vec![dim(L), dim(B)], vec![at(H, lb())], vec![at(A, lb())]),
                group("norm", &["l", "b"], vec![dim(L), dim(B)], vec![at(A, lb())], vec![at(2, lb())]),
                group(
                    "mlp",
                    &["l", "b"],
                    vec![dim(L), dim(B)],
                    vec![at(2, lb())],
                    vec![at(H, vec![l_plus(1), point(var(1))])],
                ),
            ],
        );
        accepted(&s);
    }

    #[test]
    fn groups_without_tile_indices_have_no_rank_but_do_not_panic() {
        // s[] signals a[0, 0]; t[l, b] waits a[l, b]: they meet at t[0, 0] only
        let s = spec(
            vec![dim(L), dim(B)],
            vec![],
            vec![
                group("s", &[], vec![], vec![], vec![at(A, vec![point(lit(0)), point(lit(0))])]),
                group("t", &["l", "b"], vec![dim(L), dim(B)], vec![at(A, vec![point(var(0)), point(var(1))])], vec![]),
            ],
        );
        let (sig, wait) = (&s.groups[0].signals[0], &s.groups[1].waits[0]);
        assert!(pair_meets(&s, 0, sig, 1, wait));
        // a signal of a[1, 0] never meets a wait of a[0, b]
        let far = EventAccess { index: vec![point(lit(1)), point(lit(0))].into(), ..sig.clone() };
        let row0 = EventAccess { index: vec![point(lit(0)), point(var(1))].into(), ..wait.clone() };
        assert!(!pair_meets(&s, 0, &far, 1, &row0));
    }

    #[test]
    fn a_loop_that_advances_by_two_is_accepted() {
        let s = layer_loop(vec![dim(L).add(&lit(2)), dim(B)], l_plus(0), l_plus(2));
        accepted(&s);
        assert_eq!(step(&s, 1, 0, 0, 0), Step::AtLeast(2));
    }

    #[test]
    fn offsets_by_dims_cancel() {
        // h declared [L + B + 1, B]: attn waits h[l + B], mlp signals h[l + B + 1]
        let lb = point(var(0).add(&dim(B)));
        let s = layer_loop(vec![dim(L).add(&dim(B)).add(&lit(1)), dim(B)], lb, point(var(0).add(&dim(B)).add(&lit(1))));
        accepted(&s);
    }

    #[test]
    fn ranges_cover_every_coordinate_and_still_advance() {
        // attn[l, b] waits the whole row h[l, ..] and every earlier layer h[0 .. l + 1, b]
        let lb = || vec![point(var(0)), point(var(1))];
        let s = spec(
            vec![dim(L).add(&lit(1)), dim(B)],
            vec![],
            vec![
                group(
                    "attn",
                    &["l", "b"],
                    vec![dim(L), dim(B)],
                    vec![
                        at(H, vec![point(var(0)), Index::All]),
                        at(H, vec![Index::Range { start: lit(0), end: var(0).add(&lit(1)) }, point(var(1))]),
                    ],
                    vec![at(A, lb())],
                ),
                group(
                    "mlp",
                    &["l", "b"],
                    vec![dim(L), dim(B)],
                    vec![at(A, lb())],
                    vec![at(H, vec![l_plus(1), point(var(1))])],
                ),
            ],
        );
        accepted(&s);
    }

    #[test]
    fn equal_indices_around_the_loop_are_rejected() {
        let s = layer_loop(vec![dim(L), dim(B)], l_plus(0), l_plus(0));
        rejected(&s, "`attn` -> `mlp` -> `attn`");
        assert!(!acyclic_at_small_sizes(&s), "a real cycle: attn[l] -> mlp[l] -> attn[l]");
    }

    #[test]
    fn an_index_that_goes_back_is_rejected() {
        // attn[l] waits h[l + 1], mlp[l] signals h[l]: the rank l falls along mlp -> attn
        let s = layer_loop(vec![dim(L).add(&lit(1)), dim(B)], l_plus(1), l_plus(0));
        rejected(&s, "`attn` -> `mlp` -> `attn`");
        assert_eq!(step(&s, 1, 0, 0, 0), Step::AtLeast(-1));
    }

    #[test]
    fn a_data_dependent_coordinate_proves_nothing() {
        let route = Index::Data { tensor: 1, at: vec![var(0), var(1)].into(), along: None };
        let s = layer_loop(vec![dim(L).add(&lit(1)), dim(B)], l_plus(0), route);
        rejected(&s, "`attn` -> `mlp` -> `attn`");
        assert_eq!(step(&s, 1, 0, 0, 0), Step::Unbounded);
    }

    #[test]
    fn a_wait_on_every_layer_proves_nothing() {
        let s = layer_loop(vec![dim(L).add(&lit(1)), dim(B)], Index::All, l_plus(1));
        rejected(&s, "`attn` -> `mlp` -> `attn`");
        assert!(!acyclic_at_small_sizes(&s), "a real cycle: attn[0] waits h[1] from mlp[0]");
    }

    /// `p[i, j]` waits `f[i, j] + pw` and signals `e[i, j] + ps`; `q[i, j]` waits
    /// `e[i, j] + qw` and signals `f[i, j] + qs`: `p -> q` moves `(i, j)` by `ps - qw`,
    /// `q -> p` by `qs - pw`. Events `[L + 2, B + 2]`, domains `[L, B]`.
    fn crossed(pw: [i64; 2], ps: [i64; 2], qw: [i64; 2], qs: [i64; 2]) -> GraphSpec {
        let big = || vec![dim(L).add(&lit(2)), dim(B).add(&lit(2))];
        let ij = |d: [i64; 2]| vec![point(var(0).add(&lit(d[0]))), point(var(1).add(&lit(d[1])))];
        graph(
            "crossed",
            vec![symbolic("L"), symbolic("B")],
            vec![tensor("x", DType::F32, vec![dim(L), dim(B)], Access::Read)],
            vec![event("e", big(), Count::Inferred), event("f", big(), Count::Inferred)],
            vec![
                group("p", &["i", "j"], vec![dim(L), dim(B)], vec![at(1, ij(pw))], vec![at(0, ij(ps))]),
                group("q", &["i", "j"], vec![dim(L), dim(B)], vec![at(0, ij(qw))], vec![at(1, ij(qs))]),
            ],
        )
    }

    #[test]
    fn indices_that_advance_on_different_edges_without_composing_are_rejected() {
        // p -> q moves (i, j) by (+1, -1), q -> p by (-1, +1): a real cycle
        // p[i, j] -> q[i + 1, j - 1] -> p[i, j]
        let s = crossed([1, 0], [1, 0], [0, 1], [0, 1]);
        rejected(&s, "`p` -> `q` -> `p`");
        assert!(!acyclic_at_small_sizes(&s));
        // (+1, -2) then (-2, +1): acyclic (both indices fall around the loop), but the
        // proof only looks for an index that advances, and rejects it
        let s = crossed([2, 0], [1, 0], [0, 2], [0, 1]);
        rejected(&s, "`p` -> `q` -> `p`");
        assert!(acyclic_at_small_sizes(&s));
    }

    #[test]
    fn an_index_may_fall_on_one_edge_when_it_advances_around_the_loop() {
        // (+2, -1) then (-1, +2): i advances by 1 around the loop (and so does j)
        let s = crossed([1, 0], [2, 0], [0, 1], [0, 2]);
        accepted(&s);
        assert_eq!(prove_progress(&s, &[0, 1]), Some(vec![0, 0]));
        assert_eq!(step(&s, 1, 0, 0, 0), Step::AtLeast(-1));
    }

    #[test]
    fn different_indices_compose_when_one_never_falls() {
        // (+1, 0) then (-1, +1): i falls on q -> p, but j never falls and advances once
        let s = crossed([1, 0], [1, 0], [0, 0], [0, 1]);
        accepted(&s);
        assert_eq!(prove_progress(&s, &[0, 1]), Some(vec![1, 1]));
    }

    #[test]
    fn a_self_edge_that_goes_back_breaks_the_proof() {
        // the layer loop, plus attn[l] waiting s[l + 1], which attn[l + 1] signals:
        // attn[l] -> mlp[l] -> attn[l + 1] -> attn[l] is a real cycle
        let lb = || vec![point(var(0)), point(var(1))];
        let s = spec(
            vec![dim(L).add(&lit(1)), dim(B)],
            vec![event("s", vec![dim(L).add(&lit(1)), dim(B)], Count::Inferred)],
            vec![
                group(
                    "attn",
                    &["l", "b"],
                    vec![dim(L), dim(B)],
                    vec![at(H, lb()), at(2, vec![l_plus(1), point(var(1))])],
                    vec![at(A, lb()), at(2, lb())],
                ),
                group(
                    "mlp",
                    &["l", "b"],
                    vec![dim(L), dim(B)],
                    vec![at(A, lb())],
                    vec![at(H, vec![l_plus(1), point(var(1))])],
                ),
            ],
        );
        rejected(&s, "`attn` -> `mlp` -> `attn`");
        assert!(!acyclic_at_small_sizes(&s));
        assert_eq!(step(&s, 0, 0, 0, 0), Step::AtLeast(-1));
    }

    /// Soundness on many small random loops: whatever the proof accepts has an acyclic
    /// task graph at every sampled size (and it accepts some of them, so this is no
    /// vacuous test).
    #[test]
    fn every_accepted_random_loop_is_acyclic() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n) as i64
        };
        let (mut accepted_loops, mut rejected_loops) = (0, 0);
        for _ in 0..2000 {
            let k = 2 + next(2) as u16;
            let mut coord = || match next(7) {
                0 | 1 => point(var(0).add(&lit(next(3)))),
                2 => point(var(1).add(&lit(next(3)))),
                3 => point(lit(next(3))),
                4 => Index::All,
                5 => {
                    let start = var(0).add(&lit(next(2)));
                    Index::Range { end: start.add(&lit(2)), start }
                }
                _ => Index::Range { start: lit(0), end: var(0).add(&lit(1 + next(2))) },
            };
            let groups: Vec<GroupSpec> = (0..k)
                .map(|g| {
                    let wait = at((g + k - 1) % k, vec![coord(), coord()]);
                    let signal = at(g, vec![coord(), coord()]);
                    group(["p", "q", "r"][g as usize], &["i", "j"], vec![dim(L), dim(L)], vec![wait], vec![signal])
                })
                .collect();
            let s = graph(
                "random",
                vec![symbolic("L"), symbolic("B")],
                vec![tensor("x", DType::F32, vec![dim(L), dim(B)], Access::Read)],
                (0..k).map(|_| event("e", vec![dim(L).add(&lit(3)), dim(L).add(&lit(3))], Count::Inferred)).collect(),
                groups,
            );
            if cycles(&s).is_empty() {
                accepted_loops += 1;
                assert!(acyclic_at_small_sizes(&s), "accepted a cyclic task graph: {s:?}");
            } else {
                rejected_loops += 1;
            }
        }
        assert!(accepted_loops > 100 && rejected_loops > 100, "{accepted_loops} accepted, {rejected_loops} rejected");
    }
}
