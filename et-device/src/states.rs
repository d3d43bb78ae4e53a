//! The cache of device states (schedule tables, counters) of resolved task graphs.
//!
//! A state serves a launch only if everything it was built from is equal: the kernel's
//! graph description (compared as data, so a kernel built at run time at a reused address
//! cannot hit another's state), the dims, the schedule, the grid, the placement, and the
//! index data read from the launch's tensors, compared element by element. At most
//! [`CAPACITY`] states are kept; a new one evicts the least recently used (its device
//! buffers are freed).

use std::borrow::Cow;

use et_core::LaunchOptions;
use et_core::graph::GraphSpec;
use et_core::graph::ScheduleKind;
use et_core::graph::schedule::Placement;

use crate::cache::Lru;
use crate::runtime::GraphState;

/// States kept per backend.
pub(crate) const CAPACITY: usize = 64;

/// What a state was built from.
#[derive(Debug, PartialEq)]
pub(crate) struct StateKey {
    spec: GraphSpec,
    launch: Launch,
    dims: Vec<i64>,
    data: Vec<Option<Vec<i64>>>,
}

/// The launch options a state depends on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Launch {
    pub schedule: ScheduleKind,
    pub grid: usize,
    pub placement: Placement,
}

impl Launch {
    /// What a launch with `options` runs: under `schedule`, on the options' workers or
    /// else one CTA per SM of the device's `sms`, at most the `max_grid` CTAs of its
    /// module that fit the device at once. `launch` and `prepare` key their states by it.
    pub fn new(options: &LaunchOptions, schedule: ScheduleKind, sms: usize, max_grid: usize) -> Self {
        Launch { schedule, grid: options.workers.unwrap_or(sms).clamp(1, max_grid), placement: options.placement }
    }
}

/// A launch's [`StateKey`], borrowed (looking a state up allocates nothing).
pub(crate) struct StateProbe<'a> {
    pub spec: &'a GraphSpec,
    pub launch: Launch,
    pub dims: &'a [i64],
    /// Per tensor parameter, the integers of an index tensor (`None` for the others).
    pub data: &'a [Option<Vec<i64>>],
}

impl StateProbe<'_> {
    /// The owned key, stored beside a new state.
    pub fn to_key(&self) -> StateKey {
        StateKey { spec: self.spec.clone(), launch: self.launch, dims: self.dims.to_vec(), data: self.data.to_vec() }
    }
}

impl PartialEq<StateProbe<'_>> for StateKey {
    fn eq(&self, p: &StateProbe<'_>) -> bool {
        // cheapest comparisons first
        self.launch == p.launch && self.dims == p.dims && self.data == p.data && same_spec(&self.spec, p.spec)
    }
}

/// Whether two graph descriptions are equal, as `==` says, without walking the lists
/// that both borrow from the same `'static` data (a generated kernel's lists are
/// `'static`, and a key's clone of them borrows the same data): `'static` data is never
/// freed, so its address cannot be reused by another description. Comparing the Llama
/// step's description in full took about 3 us a launch.
pub(crate) fn same_spec(a: &GraphSpec, b: &GraphSpec) -> bool {
    #[allow(clippy::ptr_arg, reason = "whether the list is borrowed is what is asked")]
    fn same<T: ?Sized + ToOwned + PartialEq>(a: &Cow<'static, T>, b: &Cow<'static, T>) -> bool {
        match (a, b) {
            (Cow::Borrowed(x), Cow::Borrowed(y)) if std::ptr::eq(*x, *y) => true,
            _ => **a == **b,
        }
    }
    a.schedule == b.schedule
        && same(&a.name, &b.name)
        && same(&a.dims, &b.dims)
        && same(&a.tensors, &b.tensors)
        && same(&a.events, &b.events)
        && same(&a.groups, &b.groups)
}

/// The device states of one backend.
pub(crate) type StateCache = Lru<StateKey, GraphState>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_differ_by_index_data_compared_in_full() {
        let spec = &splitk::split_row_sum::KERNEL.graph;
        let launch = Launch { schedule: ScheduleKind::Static, grid: 4, placement: Placement::default() };
        let data = vec![None, Some(vec![1, 2, 3])];
        let (changed, shorter) = (vec![None, Some(vec![1, 2, 4])], vec![None, Some(vec![1, 2])]);
        let probe = |data| StateProbe { spec, launch, dims: &[2], data };
        let key = probe(&data).to_key();
        assert!(key == probe(&data));
        // one index value differs: another state, whatever a hash of the data would say
        assert!(key != probe(&changed));
        assert!(key != probe(&shorter));
        assert!(key != StateProbe { dims: &[3], ..probe(&data) });
        assert!(key != StateProbe { launch: Launch { grid: 5, ..launch }, ..probe(&data) });
        let other = &splitk::splitk_gemm::KERNEL.graph;
        assert!(key != StateProbe { spec: other, ..probe(&data) });
    }

    #[test]
    fn a_launch_runs_the_workers_asked_for_within_what_fits() {
        let asked = |workers| LaunchOptions { workers, ..Default::default() };
        let grid = |options: &LaunchOptions| Launch::new(options, ScheduleKind::Static, 132, 264).grid;
        assert_eq!(grid(&asked(None)), 132, "one CTA per SM by default");
        assert_eq!(grid(&asked(Some(7))), 7);
        assert_eq!(grid(&asked(Some(1000))), 264, "at most what fits at once");
        assert_eq!(Launch::new(&asked(None), ScheduleKind::Static, 132, 100).grid, 100);
        let placed = LaunchOptions { placement: Placement::RoundRobin, ..Default::default() };
        assert_eq!(Launch::new(&placed, ScheduleKind::Dynamic, 4, 8).placement, Placement::RoundRobin);
    }

    #[test]
    fn specs_compare_by_address_only_where_both_borrow_the_same_static_data() {
        let spec = &splitk::split_row_sum::KERNEL.graph;
        assert!(same_spec(spec, &spec.clone()));
        // an owned copy is compared in full: equal content is equal
        let owned = GraphSpec { tensors: Cow::Owned(spec.tensors.to_vec()), ..spec.clone() };
        assert!(same_spec(spec, &owned) && same_spec(&owned, spec));
        let mut renamed = owned.tensors.to_vec();
        renamed[0].name = "renamed".into();
        let changed = GraphSpec { tensors: Cow::Owned(renamed), ..spec.clone() };
        assert!(!same_spec(spec, &changed) && !same_spec(&changed, &owned));
        assert_eq!(same_spec(spec, &changed), *spec == changed);
        let dynamic = GraphSpec { schedule: ScheduleKind::Dynamic, ..spec.clone() };
        assert!(!same_spec(spec, &dynamic));
        assert!(!same_spec(spec, &splitk::splitk_gemm::KERNEL.graph));
    }
}
