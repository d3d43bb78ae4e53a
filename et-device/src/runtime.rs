//! The device-side runtime state of one resolved task graph, and the structures the
//! generated kernel reads: `#[repr(C)] Runtime` (matches `et::Runtime` in the prelude)
//! and the `EtArgs` block (matches the struct the macro generates).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DeviceRepr, DriverError, ValidAsZeroBits};
use et_core::RawTensor;
use et_core::graph::schedule::{DynamicPlan, Placement, StaticSchedule};
use et_core::graph::{Count, Resolved, ScheduleKind};

/// Must match `et::Runtime`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Runtime {
    pub counters: u64,
    pub targets: u64,
    pub queue_offsets: u64,
    pub queue_tasks: u64,
    pub seeds: u64,
    pub consumer_offsets: u64,
    pub consumers: u64,
    pub dyn_state: u64,
    pub abort_flag: u64,
    pub error: u64,
    pub trace: u64,
    pub host_status: u64,
    pub watchdog_ns: u64,
    pub epoch: u32,
    pub n_tasks: u32,
    pub n_seeds: u32,
    pub dynamic: i32,
}

/// `ET_PER_ELEMENT` in the prelude: the event's counts are read per element.
const PER_ELEMENT: u32 = u32::MAX;

/// Device buffers for one resolved graph under one schedule and grid: the tables the
/// kernel reads, its counters, and the epoch that makes a counter reset unnecessary.
pub(crate) struct GraphState {
    /// The resolved graph this state was built for (reused while shapes and data match).
    pub resolved: Resolved<'static>,
    pub schedule: ScheduleKind,
    pub epoch: u32,
    pub counters: CudaSlice<u32>,
    pub dyn_state: CudaSlice<u32>,
    pub trace: CudaSlice<u64>,
    pub abort_flag: CudaSlice<u32>,
    pub error_record: CudaSlice<u32>,
    n_seeds: u32,
    targets: CudaSlice<u32>,
    queue_offsets: CudaSlice<u32>,
    queue_tasks: CudaSlice<u32>,
    seeds: CudaSlice<u32>,
    consumer_offsets: CudaSlice<u32>,
    /// Pairs (consumer task, its incomplete waited elements at the start).
    consumers: CudaSlice<u32>,
    /// The tail of `EtArgs` for this graph: event offsets and counts, group layout.
    layout: Vec<u8>,
}

fn upload<T: DeviceRepr + ValidAsZeroBits>(stream: &Arc<CudaStream>, v: &[T]) -> Result<CudaSlice<T>, DriverError> {
    if v.is_empty() {
        // a zero-length allocation has no address; keep one element so every table has one
        return stream.alloc_zeros::<T>(1);
    }
    stream.clone_htod(v)
}

fn ptr<T>(s: &CudaSlice<T>) -> u64 {
    s.device_ptr(s.stream()).0
}

impl GraphState {
    pub fn new(
        stream: &Arc<CudaStream>,
        resolved: Resolved<'static>,
        schedule: ScheduleKind,
        grid: usize,
        placement: Placement,
    ) -> Result<Self, DriverError> {
        let r = &resolved;
        let (offsets, tasks) = match schedule {
            ScheduleKind::Static => {
                let s = StaticSchedule::build(r, grid, placement);
                let mut offsets = vec![0u32];
                let mut tasks = Vec::with_capacity(r.n_tasks as usize);
                for q in &s.queues {
                    tasks.extend_from_slice(q);
                    offsets.push(tasks.len() as u32);
                }
                (offsets, tasks)
            }
            ScheduleKind::Dynamic => (vec![0; grid + 1], Vec::new()),
        };
        let plan = DynamicPlan::new(r);
        let layout = layout_words(r);
        let consumers: Vec<u32> = r.consumers.items.iter().flat_map(|&t| [t, plan.pending[t as usize]]).collect();
        Ok(GraphState {
            schedule,
            epoch: 0,
            counters: stream.alloc_zeros::<u32>((r.n_elements as usize).max(1))?,
            dyn_state: stream.alloc_zeros::<u32>(2 + 2 * r.n_tasks as usize)?,
            trace: stream.alloc_zeros::<u64>(3 * (r.n_tasks as usize).max(1))?,
            abort_flag: stream.alloc_zeros::<u32>(1)?,
            error_record: stream.alloc_zeros::<u32>(8)?,
            n_seeds: plan.seeds.len() as u32,
            targets: upload(stream, &r.target)?,
            queue_offsets: upload(stream, &offsets)?,
            queue_tasks: upload(stream, &tasks)?,
            seeds: upload(stream, &plan.seeds)?,
            consumer_offsets: upload(stream, &r.consumers.offsets)?,
            consumers: upload(stream, &consumers)?,
            layout,
            resolved,
        })
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

    /// The `EtArgs` block of a launch, laid out as the generated C struct: tensors
    /// (9 words each), dims, event offsets (i64), event counts (u32), group first task
    /// (u32, one more than groups), group domains (u32, 4 per group), padded to 8 bytes.
    pub fn kernel_args(&self, args: &[RawTensor]) -> Vec<u8> {
        let mut b: Vec<u8> = Vec::with_capacity(args.len() * 72 + 64 + self.layout.len());
        let word = |b: &mut Vec<u8>, v: i64| b.extend_from_slice(&v.to_ne_bytes());
        for a in args {
            word(&mut b, a.addr as i64);
            for d in 0..4 {
                word(&mut b, a.shape.get(d).copied().unwrap_or(0));
            }
            for d in 0..4 {
                word(&mut b, a.strides.get(d).copied().unwrap_or(0));
            }
        }
        if args.is_empty() {
            b.extend_from_slice(&[0u8; 72]);
        }
        for &d in &self.resolved.dims {
            word(&mut b, d);
        }
        if self.resolved.dims.is_empty() {
            word(&mut b, 0);
        }
        b.extend_from_slice(&self.layout);
        b
    }
}

/// The graph-dependent tail of `EtArgs` (see [`GraphState::kernel_args`]).
fn layout_words(r: &Resolved<'_>) -> Vec<u8> {
    let mut b = Vec::new();
    let events = r.events.len().max(1);
    for k in 0..events {
        let off = r.events.get(k).map_or(0, |e| e.offset as i64);
        b.extend_from_slice(&off.to_ne_bytes());
    }
    for k in 0..events {
        let count = match r.spec.events.get(k) {
            None => 0,
            Some(e) if matches!(e.count, Count::PerElement { .. }) => PER_ELEMENT,
            Some(_) => {
                // the count rules make every waited element's target equal
                let layout = &r.events[k];
                (layout.offset..layout.offset + layout.len)
                    .map(|el| r.target[el as usize])
                    .find(|&t| t > 0)
                    .unwrap_or(0)
            }
        };
        b.extend_from_slice(&count.to_ne_bytes());
    }
    for g in &r.groups {
        b.extend_from_slice(&g.first.to_ne_bytes());
    }
    b.extend_from_slice(&r.n_tasks.to_ne_bytes());
    for g in &r.groups {
        for d in 0..4 {
            let ext = g.domain.get(d).copied().unwrap_or(1).max(1) as u32;
            b.extend_from_slice(&ext.to_ne_bytes());
        }
    }
    while b.len() % 8 != 0 {
        b.push(0);
    }
    b
}
