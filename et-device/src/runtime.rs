//! The device-side runtime state of one resolved task graph, and the kernel arguments
//! packed from it by the ABI of `et_core::abi` (`Runtime` and `EtArgs`).

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DeviceRepr, ValidAsZeroBits};
pub(crate) use et_core::abi::Runtime;
use et_core::abi::{ArgsLayout, EtArgs, TaskWords};
use et_core::graph::resolve::LaunchTensors;
use et_core::graph::schedule::{DynamicPlan, EARLY_LEVELS, EarlyBatches, Placement, StaticSchedule};
use et_core::graph::{GraphSpec, Resolved, ScheduleKind};
use et_core::{Error, RawTensor};

use crate::cache::Lru;

/// Device buffers for one resolved graph under one schedule and grid: the tables the
/// kernel reads, its counters, and the epoch that makes a counter reset unnecessary.
pub(crate) struct GraphState {
    /// The resolved graph this state was built for (reused while shapes and data match).
    /// Borrows `spec`: declared first so that it is dropped first, and handed out only
    /// through [`GraphState::resolved`], at the lifetime of `&self`.
    resolved: Resolved<'static>,
    /// The graph description `resolved` borrows, owned here so that the state outlives
    /// the launch's kernel reference; behind an `Arc` (a shared, aliasable pointer) so
    /// that moving the state neither moves it nor invalidates the borrow.
    _spec: Arc<GraphSpec>,
    /// Names this state for the launches in flight on it (unique in the process).
    pub id: u64,
    pub schedule: ScheduleKind,
    pub epoch: u32,
    pub counters: CudaSlice<u32>,
    pub dyn_state: CudaSlice<u32>,
    /// Whether `dyn_state` is zero for the next launch, or a memset that zeroes it is
    /// queued on the stream: a dynamic launch queues one after its kernel.
    pub queue_zeroed: bool,
    pub trace: CudaSlice<u64>,
    pub abort_flag: CudaSlice<u32>,
    pub error_record: CudaSlice<u32>,
    n_seeds: u32,
    targets: CudaSlice<u32>,
    queue_offsets: CudaSlice<u32>,
    queue_tasks: CudaSlice<u32>,
    /// Pairs (queue entry, batch + 1 or 0) of the tasks ready at the start.
    seeds: CudaSlice<u32>,
    /// Element -> the consumers its completion may make ready (early tasks left out).
    consumer_offsets: CudaSlice<u32>,
    /// Quadruples (queue entry, incomplete waited elements at the start, batch + 1 or 0, 0).
    consumers: CudaSlice<u32>,
    /// Early-dispatch batches (`EarlyBatches`): offsets, and pairs (queue entry, batch + 1 or 0).
    batch_offsets: CudaSlice<u32>,
    batch_items: CudaSlice<u32>,
    /// `EtArgs` for this graph, without the tensors.
    args: EtArgs,
    layout: ArgsLayout,
    /// The counters zeroed before every launch: those of the events whose signals per
    /// launch depend on the launch's data (`GraphSpec::resets_per_launch`), adjacent
    /// ranges merged.
    pub resets: Vec<Range<usize>>,
    /// The `EtArgs` blocks of the last launches' tensors.
    packed: PackedSets,
}

/// The `EtArgs` blocks packed for the last few sets of tensors launched on one state, most
/// recent first: a launch over the same tensors (a decode step over its persistent
/// buffers) reuses its block. A decoder alternates between two sets (each step writes the
/// next one's ids and positions), so keeping one block missed at every step, and packing
/// took 6-8 us of a launch's host time (RESULTS run 52).
pub(crate) struct PackedSets {
    sets: Lru<Vec<RawTensor>, Vec<u8>>,
}

impl PackedSets {
    /// The sets kept.
    pub const KEPT: usize = 4;

    pub fn new() -> Self {
        PackedSets { sets: Lru::new(Self::KEPT) }
    }

    /// The tensors of the set used last (none before the first).
    pub fn last(&self) -> &[RawTensor] {
        self.sets.newest_key().map_or(&[], |args| args.as_slice())
    }

    /// The block of `args`: the kept one, or, for a set not kept, `pack`'s once `check`
    /// passes. What `check` judges must depend only on the tensors (and what the owner
    /// keeps fixed), since a kept set is not checked again. A failed check or packing
    /// leaves the kept sets as they were.
    pub fn get_or_pack(
        &mut self,
        args: &[RawTensor],
        check: impl FnOnce() -> Result<(), Error>,
        pack: impl FnOnce() -> Result<Vec<u8>, Error>,
    ) -> Result<&[u8], Error> {
        let (block, _) = self.sets.get_or_try_insert(args, || {
            check()?;
            Ok::<_, Error>((args.to_vec(), pack()?))
        })?;
        Ok(block)
    }
}

fn device_err(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| Error::Device(format!("{what}: {e:?}"))
}

fn upload<T: DeviceRepr + ValidAsZeroBits>(stream: &Arc<CudaStream>, v: &[T]) -> Result<CudaSlice<T>, Error> {
    if v.is_empty() {
        // a zero-length allocation has no address; keep one element so every table has one
        return stream.alloc_zeros::<T>(1).map_err(device_err("uploading the schedule"));
    }
    stream.clone_htod(v).map_err(device_err("uploading the schedule"))
}

fn ptr<T>(s: &CudaSlice<T>) -> u64 {
    s.device_ptr(s.stream()).0
}

impl GraphState {
    /// Resolves `spec` over the launch's tensors and uploads its tables.
    pub fn new(
        stream: &Arc<CudaStream>,
        spec: &GraphSpec,
        tensors: &dyn LaunchTensors,
        schedule: ScheduleKind,
        grid: usize,
        placement: Placement,
    ) -> Result<Self, Error> {
        let spec = Arc::new(spec.clone());
        // SAFETY: the allocation behind `spec` is owned by the returned state, which
        // never mutates it, drops it only after `resolved` (field order), and hands
        // `resolved` out only at the lifetime of its own borrow.
        let spec_ref: &'static GraphSpec = unsafe { &*Arc::as_ptr(&spec) };
        let resolved = Resolved::new(spec_ref, tensors).map_err(Error::resolve(&spec_ref.name))?;
        let r = &resolved;
        // queue entries carry the task's group (decoded in O(1) by the kernel)
        let words = TaskWords::new(r.spec.groups.len());
        words.check(&r.spec.name, r.n_tasks)?;
        let entry = |t: u32| words.entry(r.group_of(t), t);
        let (offsets, tasks) = match schedule {
            ScheduleKind::Static => {
                let s = StaticSchedule::build(r, grid, placement);
                let mut offsets = vec![0u32];
                let mut tasks = Vec::with_capacity(r.n_tasks as usize);
                for q in &s.queues {
                    tasks.extend(q.iter().map(|&t| entry(t)));
                    offsets.push(tasks.len() as u32);
                }
                (offsets, tasks)
            }
            ScheduleKind::Dynamic => (vec![0; grid + 1], Vec::new()),
        };
        let plan = DynamicPlan::new(r);
        let early = EarlyBatches::new(r, &plan, EARLY_LEVELS);
        let args = EtArgs::for_graph(r);
        let layout = ArgsLayout::new(r.spec);
        let alloc = device_err("allocating the graph state");
        // a completion releases only the consumers that are not early (their batch root pushes those)
        let mut consumer_offsets = vec![0u32];
        let mut consumers: Vec<u32> = Vec::new();
        for el in 0..r.n_elements as usize {
            for &t in r.consumers.row(el).iter().filter(|&&t| !early.early[t as usize]) {
                // the fourth word marks the consumer's guard: its condition is judged there
                let guard = u32::from(r.guard_element(t) == Some(el as u32));
                consumers.extend([entry(t), plan.pending[t as usize], early.batch_of[t as usize], guard]);
            }
            consumer_offsets.push((consumers.len() / 4) as u32);
        }
        let mut resets: Vec<Range<usize>> = Vec::new();
        for (e, layout) in r.events.iter().enumerate() {
            if layout.len > 0 && r.spec.resets_per_launch(e as u16) {
                let range = layout.offset as usize..(layout.offset + layout.len) as usize;
                match resets.last_mut() {
                    Some(last) if last.end == range.start => last.end = range.end,
                    _ => resets.push(range),
                }
            }
        }
        let tagged = |t: u32| [entry(t), early.batch_of[t as usize]];
        let seeds: Vec<u32> = plan.seeds.iter().flat_map(|&t| tagged(t)).collect();
        let batch_items: Vec<u32> = early.items.iter().flat_map(|&t| tagged(t)).collect();
        static STATES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Ok(GraphState {
            id: STATES.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            schedule,
            epoch: 0,
            counters: stream.alloc_zeros::<u32>((r.n_elements as usize).max(1)).map_err(&alloc)?,
            dyn_state: stream.alloc_zeros::<u32>(et_core::abi::dyn_state_words(r.n_tasks)).map_err(&alloc)?,
            queue_zeroed: true,
            trace: stream
                .alloc_zeros::<u64>(et_core::abi::TRACE_WORDS * (r.n_tasks as usize).max(1))
                .map_err(&alloc)?,
            abort_flag: stream.alloc_zeros::<u32>(1).map_err(&alloc)?,
            error_record: stream.alloc_zeros::<u32>(crate::abort::RECORD_WORDS).map_err(&alloc)?,
            n_seeds: plan.seeds.len() as u32,
            targets: upload(stream, &r.target)?,
            queue_offsets: upload(stream, &offsets)?,
            queue_tasks: upload(stream, &tasks)?,
            seeds: upload(stream, &seeds)?,
            consumer_offsets: upload(stream, &consumer_offsets)?,
            consumers: upload(stream, &consumers)?,
            batch_offsets: upload(stream, &early.offsets)?,
            batch_items: upload(stream, &batch_items)?,
            args,
            layout,
            resets,
            packed: PackedSets::new(),
            resolved,
            _spec: spec,
        })
    }

    /// The resolved graph of this state.
    pub fn resolved(&self) -> &Resolved<'_> {
        &self.resolved
    }

    pub fn runtime(&self, watchdog_ns: u64, trace: bool, host_status: u64) -> Runtime {
        Runtime {
            counters: ptr(&self.counters),
            targets: ptr(&self.targets),
            queue_offsets: ptr(&self.queue_offsets),
            queue_tasks: ptr(&self.queue_tasks),
            seeds: ptr(&self.seeds),
            consumer_offsets: ptr(&self.consumer_offsets),
            consumers: ptr(&self.consumers),
            batch_offsets: ptr(&self.batch_offsets),
            batch_items: ptr(&self.batch_items),
            dyn_state: ptr(&self.dyn_state),
            abort_flag: ptr(&self.abort_flag),
            error: ptr(&self.error_record),
            trace: if trace { ptr(&self.trace) } else { 0 },
            host_status,
            watchdog_ns,
            epoch: self.epoch,
            n_tasks: self.resolved.n_tasks,
            n_seeds: self.n_seeds,
            dynamic: (self.schedule == ScheduleKind::Dynamic) as i32,
        }
    }

    /// The tensors of the last launch on this state (the shapes every launch on it has),
    /// for an abort's message.
    pub fn last_args(&self) -> &[RawTensor] {
        self.packed.last()
    }

    /// The `EtArgs` block of a launch over `args`, packed by the ABI's layout (the last
    /// [`PackedSets::KEPT`] sets of tensors keep theirs). `check` judges a set not kept:
    /// what it checks must depend only on the tensors and this state's graph, since a kept
    /// set is not checked again.
    pub fn kernel_args(
        &mut self,
        args: &[RawTensor],
        check: impl FnOnce() -> Result<(), Error>,
    ) -> Result<&[u8], Error> {
        let (layout, base) = (&self.layout, &self.args);
        self.packed.get_or_pack(args, check, || layout.pack(&base.with_tensors(args)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use et_core::DType;

    fn set(addr: u64) -> Vec<RawTensor> {
        vec![RawTensor::new(addr, DType::F32, &[4, 8]), RawTensor::new(addr + 0x1000, DType::I32, &[4])]
    }

    #[test]
    fn alternating_sets_are_packed_and_checked_once_each() {
        let mut sets = PackedSets::new();
        let (mut checks, mut packs) = (0, 0);
        for step in 0..10u64 {
            let args = set(0x10000 * (1 + step % 2));
            let block = sets
                .get_or_pack(
                    &args,
                    || {
                        checks += 1;
                        Ok(())
                    },
                    || {
                        packs += 1;
                        Ok(vec![(step % 2) as u8])
                    },
                )
                .unwrap()
                .to_vec();
            assert_eq!(block, [(step % 2) as u8], "each set keeps its own block");
            assert_eq!(sets.last(), args.as_slice());
        }
        assert_eq!((checks, packs), (2, 2));
    }

    #[test]
    fn a_set_that_fails_is_not_kept_and_the_oldest_set_goes_first() {
        let mut sets = PackedSets::new();
        let ok = || Ok(());
        let pack = || Ok(vec![0u8]);
        sets.get_or_pack(&set(0x10000), ok, pack).unwrap();
        let refused = || Err(Error::Shape("aliased".into()));
        assert!(sets.get_or_pack(&set(0x20000), refused, pack).is_err());
        assert!(sets.get_or_pack(&set(0x20000), refused, pack).is_err(), "checked again");
        assert!(sets.get_or_pack(&set(0x20000), ok, || Err(Error::Shape("no".into()))).is_err());
        assert_eq!(sets.last(), set(0x10000).as_slice(), "failures leave the kept sets as they were");
        // KEPT more sets push the first out: it is checked and packed again
        for i in 0..PackedSets::KEPT as u64 {
            sets.get_or_pack(&set(0x100000 * (i + 1)), ok, pack).unwrap();
        }
        let mut checked = false;
        sets.get_or_pack(
            &set(0x10000),
            || {
                checked = true;
                Ok(())
            },
            pack,
        )
        .unwrap();
        assert!(checked);
    }
}
