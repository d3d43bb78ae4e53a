//! The device-side runtime state of one resolved task graph, and the `#[repr(C)]`
//! structures the generated kernel reads (their layout matches `prelude.cuh`).

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DriverError};
use et_core::RawTensor;
use et_core::graph::schedule::{DynamicPlan, Placement, StaticSchedule};
use et_core::graph::{Resolved, ScheduleKind};
use std::sync::Arc;

/// Must match `et::TensorArg`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct TensorArg {
    pub ptr: u64,
    pub shape: [i64; 4],
    pub stride: [i64; 4],
}

/// Must match `et::Runtime`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Runtime {
    pub counters: u64,
    pub targets: u64,
    pub event_offset: u64,
    pub queue_offsets: u64,
    pub queue_tasks: u64,
    pub group_first: u64,
    pub group_domain: u64,
    pub seeds: u64,
    pub consumer_offsets: u64,
    pub consumers: u64,
    pub pending_init: u64,
    pub dyn_state: u64,
    pub abort_flag: u64,
    pub error: u64,
    pub trace: u64,
    pub host_status: u64,
    pub watchdog_ns: u64,
    pub epoch: u32,
    pub n_tasks: u32,
    pub n_seeds: u32,
    pub n_groups: i32,
    pub dynamic: i32,
    pub pad: i32,
}

/// The argument block `EtArgs` of a generated kernel: tensors, then dims.
pub(crate) fn kernel_args(args: &[RawTensor], dims: &[i64]) -> Vec<u64> {
    let mut words = Vec::with_capacity(args.len() * 9 + dims.len().max(1));
    for a in args.iter() {
        let mut t = TensorArg { ptr: a.addr, ..Default::default() };
        for (d, (&s, &st)) in a.shape.iter().zip(&a.strides).enumerate() {
            t.shape[d] = s;
            t.stride[d] = st;
        }
        words.push(t.ptr);
        words.extend(t.shape.iter().map(|&v| v as u64));
        words.extend(t.stride.iter().map(|&v| v as u64));
    }
    if args.is_empty() {
        words.extend([0u64; 9]);
    }
    words.extend(dims.iter().map(|&d| d as u64));
    if dims.is_empty() {
        words.push(0);
    }
    words
}

/// Device buffers for one resolved graph under one schedule and grid: the tables the
/// kernel reads, its counters, and the epoch that makes a counter reset unnecessary.
pub(crate) struct GraphState {
    /// The resolved graph this state was built for (reused while shapes and data match).
    pub resolved: Resolved<'static>,
    pub schedule: ScheduleKind,
    pub n_tasks: u32,
    pub n_seeds: u32,
    pub n_groups: i32,
    pub epoch: u32,
    pub counters: CudaSlice<u32>,
    pub dyn_state: CudaSlice<u32>,
    pub trace: CudaSlice<u64>,
    tables: Vec<CudaSlice<u32>>,
    event_offset: CudaSlice<i64>,
    group_domain: CudaSlice<i64>,
}

fn upload<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    v: &[T],
) -> Result<CudaSlice<T>, DriverError> {
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
        let mut group_first: Vec<u32> = r.groups.iter().map(|g| g.first).collect();
        group_first.push(r.n_tasks);
        let mut group_domain = Vec::with_capacity(r.groups.len() * 4);
        for g in &r.groups {
            for d in 0..4 {
                group_domain.push(g.domain.get(d).copied().unwrap_or(1));
            }
        }
        let event_offset: Vec<i64> = r.events.iter().map(|e| e.offset as i64).collect();
        let tables = vec![
            upload(stream, &r.target)?,
            upload(stream, &offsets)?,
            upload(stream, &tasks)?,
            upload(stream, &group_first)?,
            upload(stream, &plan.seeds)?,
            upload(stream, &r.consumers.offsets)?,
            upload(stream, &r.consumers.items)?,
            upload(stream, &plan.pending)?,
            // abort flag, error record (4 u64 = 8 u32)
            stream.alloc_zeros::<u32>(1)?,
            stream.alloc_zeros::<u32>(8)?,
        ];
        Ok(GraphState {
            n_tasks: r.n_tasks,
            n_seeds: plan.seeds.len() as u32,
            n_groups: r.groups.len() as i32,
            epoch: 0,
            counters: stream.alloc_zeros::<u32>((r.n_elements as usize).max(1))?,
            dyn_state: stream.alloc_zeros::<u32>(2 + 2 * r.n_tasks as usize)?,
            trace: stream.alloc_zeros::<u64>(3 * (r.n_tasks as usize).max(1))?,
            tables,
            event_offset: upload(stream, &event_offset)?,
            group_domain: upload(stream, &group_domain)?,
            resolved,
            schedule,
        })
    }

    pub fn error_record(&self) -> &CudaSlice<u32> {
        &self.tables[9]
    }

    pub fn abort_flag_mut(&mut self) -> &mut CudaSlice<u32> {
        &mut self.tables[8]
    }

    pub fn runtime(&self, watchdog_ns: u64, trace: bool, host_status: u64) -> Runtime {
        let t = &self.tables;
        Runtime {
            counters: ptr(&self.counters),
            targets: ptr(&t[0]),
            event_offset: ptr(&self.event_offset),
            queue_offsets: ptr(&t[1]),
            queue_tasks: ptr(&t[2]),
            group_first: ptr(&t[3]),
            group_domain: ptr(&self.group_domain),
            seeds: ptr(&t[4]),
            consumer_offsets: ptr(&t[5]),
            consumers: ptr(&t[6]),
            pending_init: ptr(&t[7]),
            dyn_state: ptr(&self.dyn_state),
            abort_flag: ptr(&t[8]),
            error: ptr(&t[9]),
            trace: if trace { ptr(&self.trace) } else { 0 },
            host_status,
            watchdog_ns,
            epoch: self.epoch,
            n_tasks: self.n_tasks,
            n_seeds: self.n_seeds,
            n_groups: self.n_groups,
            dynamic: (self.schedule == ScheduleKind::Dynamic) as i32,
            pad: 0,
        }
    }
}
