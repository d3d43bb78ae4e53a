//! The kernel-argument ABI: what `et_main(const et::Runtime, const EtArgs)` receives,
//! described once, in Rust.
//!
//! `TensorArg` and `Runtime` are `#[repr(C)]` structures with a field list; the per-kernel
//! `EtArgs` layout follows from the [`GraphSpec`]. The C declarations compiled into every
//! kernel ([`c_declarations`], [`ArgsLayout::c_declaration`]) and the bytes a backend
//! packs ([`ArgsLayout::pack`]) are both derived from these, and the C side carries a
//! `static_assert` on every size and offset, so a mismatch fails to compile.

use std::fmt::Write;

use et_graph::{Count, GraphSpec, Resolved};

use crate::error::{Error, Result};
use crate::raw::RawTensor;

pub use et_graph::MAX_RANK;

/// An event count in `EtArgs::event_target` meaning "read the element's count from
/// `Runtime::targets`" (events whose count is given per element).
pub const PER_ELEMENT: u32 = u32::MAX;

/// Bytes of dynamic shared memory a launch gives beyond the arena its ops declare, so
/// that the kernel can align the arena to 128 bytes (`ET_SMEM_SLACK`).
pub const SMEM_SLACK: usize = 128;

/// The dynamic shared memory a kernel whose ops declare an arena of `arena` bytes must be
/// launched with: the arena and [`SMEM_SLACK`], which the prelude's `et::arena_capacity`
/// takes off again; 0 without an arena. Every launcher of op code (the backends, the
/// kernel-per-operator baselines) gives this, so that an op finds the room it declared.
pub const fn launch_smem_bytes(arena: usize) -> usize {
    if arena == 0 { 0 } else { arena + SMEM_SLACK }
}

/// Words per task in the trace buffer (`ET_TRACE_WORDS`): `(SM << 32) | CTA`, the start,
/// the end, and when the task's last wait ended (the start for a task without a wait),
/// all in global-timer nanoseconds.
pub const TRACE_WORDS: usize = 4;

/// Words of the dynamic schedule's state (`Runtime::dyn_state`) for `n_tasks` tasks: four
/// counters, a 64-bit ready slot per task and a pending count per task.
pub const fn dyn_state_words(n_tasks: u32) -> usize {
    4 + 3 * n_tasks as usize
}

/// How a queue entry (static queue table, dynamic seeds and ready slots) packs a task's
/// group above its task id, so that the kernel finds the group in O(1): the group in the
/// upper `32 - shift` bits, the task id in the lower `shift` (`ET_TASK_SHIFT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskWords {
    /// Bits of the task id.
    pub shift: u32,
}

impl TaskWords {
    /// The packing for a megakernel of `n_groups` tile groups: as few group bits as hold
    /// every group index (at least one).
    pub const fn new(n_groups: usize) -> Self {
        let bits = usize::BITS - n_groups.saturating_sub(1).leading_zeros();
        let bits = if bits == 0 { 1 } else { bits };
        TaskWords { shift: 32 - bits }
    }

    /// The most tasks a graph may have under this packing.
    pub const fn max_tasks(&self) -> u64 {
        1u64 << self.shift
    }

    /// Checks that `n_tasks` fit beside the group bits (the last entry also stays below
    /// `u32::MAX`: the dynamic queue stores entries plus one).
    pub fn check(&self, kernel: &str, n_tasks: u32) -> Result<()> {
        if n_tasks as u64 > self.max_tasks() - 1 {
            return Err(Error::Shape(format!(
                "megakernel `{kernel}` resolves to {n_tasks} tasks; with {} bits for its group index a queue entry holds at most {} task ids",
                32 - self.shift,
                self.max_tasks() - 1
            )));
        }
        Ok(())
    }

    /// The entry of `task` of group `group` (both checked by [`TaskWords::check`]).
    pub const fn entry(&self, group: usize, task: u32) -> u32 {
        ((group as u32) << self.shift) | task
    }
}

/// One field of a C structure of the ABI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// The field's name on both sides.
    pub name: &'static str,
    /// The C type of one element.
    pub c_type: &'static str,
    /// The array length, or `None` for a scalar.
    pub len: Option<usize>,
    /// The byte offset in the structure.
    pub offset: usize,
}

/// Defines a `#[repr(C)]` structure and its field list with the C type of each field.
macro_rules! abi_struct {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident: $rust:ty => $c:literal $([$len:expr])?,)* }) => {
        $(#[$doc])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: $rust,)*
        }

        impl $name {
            /// The fields in declaration order, with their offsets in this Rust type.
            pub const FIELDS: &'static [Field] = &[$(Field {
                name: stringify!($field),
                c_type: $c,
                len: abi_struct!(@len $($len)?),
                offset: ::core::mem::offset_of!($name, $field),
            },)*];
        }
    };
    (@len) => { None };
    (@len $len:expr) => { Some($len) };
}

abi_struct! {
    /// A tensor argument (`et::TensorArg`): address, extents and strides in elements;
    /// dimensions past the tensor's rank are 0.
    TensorArg {
        /// Address of element 0 in the backend's memory.
        ptr: u64 => "void*",
        /// Extents.
        shape: [i64; MAX_RANK] => "long long" [MAX_RANK],
        /// Strides in elements.
        stride: [i64; MAX_RANK] => "long long" [MAX_RANK],
    }
}

abi_struct! {
    /// The runtime state of one launch (`et::Runtime`): device tables that depend on the
    /// resolved graph and the schedule. What is small travels in `EtArgs` instead, in
    /// parameter space, which acquire loads do not invalidate.
    Runtime {
        /// One counter per event element, monotonic across launches.
        counters: u64 => "unsigned int*",
        /// Per-element counts (events whose count is per element).
        targets: u64 => "const unsigned int*",
        /// Static schedule: per CTA, grid + 1 entries.
        queue_offsets: u64 => "const unsigned int*",
        /// Static schedule: task ids.
        queue_tasks: u64 => "const unsigned int*",
        /// Dynamic schedule: tasks ready at the start, as (queue entry, batch + 1 or 0).
        seeds: u64 => "const uint2*",
        /// Dynamic schedule: element -> the consumers its completion may make ready
        /// (CSR offsets; early tasks are not listed).
        consumer_offsets: u64 => "const unsigned int*",
        /// Dynamic schedule: (queue entry, waited elements incomplete at the start,
        /// batch + 1 or 0, unused).
        consumers: u64 => "const uint4*",
        /// Dynamic schedule: batch -> early tasks it pushes (CSR offsets).
        batch_offsets: u64 => "const unsigned int*",
        /// Dynamic schedule: the early tasks of every batch, as (queue entry, batch + 1 or 0).
        batch_items: u64 => "const uint2*",
        /// Dynamic schedule: `[head, tail, waiting, local, ready[n_tasks] (u64 slots),
        /// pending_done[n_tasks]]` (`DYN_STATE_WORDS`), zeroed per launch.
        dyn_state: u64 => "unsigned int*",
        /// Set once by the watchdog.
        abort_flag: u64 => "unsigned int*",
        /// The watchdog's record: `[task, element, value, expected]`.
        error: u64 => "unsigned long long*",
        /// [`TRACE_WORDS`] words per task, or null.
        trace: u64 => "unsigned long long*",
        /// Host-mapped word set to 1 on abort (read after the synchronisation).
        host_status: u64 => "unsigned int*",
        /// The longest a wait may take.
        watchdog_ns: u64 => "unsigned long long",
        /// Launches since the counters were zeroed, this one included.
        epoch: u32 => "unsigned int",
        /// Tasks in the graph.
        n_tasks: u32 => "unsigned int",
        /// Dynamic schedule: number of seeds.
        n_seeds: u32 => "unsigned int",
        /// Whether the dynamic schedule runs.
        dynamic: i32 => "int",
    }
}

impl TensorArg {
    /// The argument for `raw`. Errors when its rank exceeds [`MAX_RANK`].
    pub fn new(raw: &RawTensor) -> Result<Self> {
        if raw.shape.len() > MAX_RANK || raw.strides.len() != raw.shape.len() {
            return Err(Error::Shape(format!(
                "a kernel argument has rank {} (strides {}); kernels take tensors of rank at most {MAX_RANK}",
                raw.shape.len(),
                raw.strides.len()
            )));
        }
        let mut arg = TensorArg { ptr: raw.addr, ..Default::default() };
        arg.shape[..raw.shape.len()].copy_from_slice(&raw.shape);
        arg.stride[..raw.strides.len()].copy_from_slice(&raw.strides);
        Ok(arg)
    }
}

/// The C declarations of the ABI that every kernel is compiled with: `ET_MAX_RANK`,
/// `ET_PER_ELEMENT`, `et::TensorArg` and `et::Runtime`, each checked field by field.
pub fn c_declarations() -> String {
    let mut s = format!(
        "// ---- kernel ABI (generated from et_core::abi; static_asserts keep both sides equal)\n\
         #define ET_MAX_RANK {MAX_RANK}\n#define ET_PER_ELEMENT 0x{PER_ELEMENT:x}u\n#define ET_SMEM_SLACK {SMEM_SLACK}\n#define ET_TRACE_WORDS {TRACE_WORDS}\n\
         // NVRTC's front end has no __builtin_offsetof; __INTADDR__ is its constant form\n\
         #ifdef __CUDACC_RTC__\n#define ET_OFFSETOF(T, f) __INTADDR__(&(((T*)0)->f))\n\
         #else\n#define ET_OFFSETOF(T, f) __builtin_offsetof(T, f)\n#endif\n\nnamespace et {{\n"
    );
    c_struct(&mut s, "TensorArg", TensorArg::FIELDS, size_of::<TensorArg>());
    c_struct(&mut s, "Runtime", Runtime::FIELDS, size_of::<Runtime>());
    s.push_str("} // namespace et\n");
    s
}

/// Appends `struct name { fields };` and a `static_assert` on its size and every offset.
fn c_struct(s: &mut String, name: &str, fields: &[Field], size: usize) {
    let _ = writeln!(s, "struct {name} {{");
    for f in fields {
        match f.len {
            Some(n) => _ = writeln!(s, "    {} {}[{n}];", f.c_type, f.name),
            None => _ = writeln!(s, "    {} {};", f.c_type, f.name),
        }
    }
    let _ = writeln!(s, "}};");
    let _ = writeln!(s, "static_assert(sizeof({name}) == {size}, \"{name}: size differs from et_core::abi\");");
    for f in fields {
        let _ = writeln!(
            s,
            "static_assert(ET_OFFSETOF({name}, {}) == {}, \"{name}::{}: offset differs from et_core::abi\");",
            f.name, f.offset, f.name
        );
    }
}

/// The values of one launch's `EtArgs`, field by field (see [`ArgsLayout`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EtArgs {
    /// The tensors, in signature order.
    pub t: Vec<TensorArg>,
    /// The value of every dim.
    pub dims: Vec<i64>,
    /// Each event's first counter.
    pub event_offset: Vec<i64>,
    /// Each event's count (the same for all its waited elements), or [`PER_ELEMENT`].
    pub event_target: Vec<u32>,
    /// Each group's first task id, then the total number of tasks.
    pub group_first: Vec<u32>,
    /// Each group's domain extents, [`MAX_RANK`] per group, 1 past the group's rank.
    pub group_domain: Vec<u32>,
}

/// The layout of one megakernel's `EtArgs`: the fields of [`EtArgs`] as C arrays whose
/// lengths follow from the graph (at least 1 each: C has no empty arrays).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgsLayout {
    /// The fields in declaration order.
    pub fields: [Field; 6],
    /// `sizeof(EtArgs)`.
    pub size: usize,
    /// How queue entries pack the group (`ET_TASK_SHIFT`).
    pub tasks: TaskWords,
}

impl ArgsLayout {
    /// The layout for `spec`, by the C rules (each field at its alignment, the size a
    /// multiple of the largest).
    pub fn new(spec: &GraphSpec) -> Self {
        let (events, groups) = (spec.events.len().max(1), spec.groups.len().max(1));
        let fields = [
            ("t", "et::TensorArg", spec.tensors.len(), align_of::<TensorArg>(), size_of::<TensorArg>()),
            ("dims", "long long", spec.dims.len(), 8, 8),
            ("event_offset", "long long", events, 8, 8),
            ("event_target", "unsigned int", events, 4, 4),
            ("group_first", "unsigned int", groups + 1, 4, 4),
            ("group_domain", "unsigned int", groups * MAX_RANK, 4, 4),
        ];
        let mut end = 0usize;
        let fields = fields.map(|(name, c_type, len, align, size)| {
            let offset = end.next_multiple_of(align);
            let len = len.max(1);
            end = offset + len * size;
            Field { name, c_type, len: Some(len), offset }
        });
        ArgsLayout { fields, size: end.next_multiple_of(8), tasks: TaskWords::new(spec.groups.len()) }
    }

    /// `struct EtArgs { .. };` with its `static_assert`s.
    pub fn c_declaration(&self) -> String {
        let mut s = String::from("\n#line 1 \"<et kernel arguments>\"\n");
        let _ = writeln!(s, "#define ET_TASK_SHIFT {}", self.tasks.shift);
        c_struct(&mut s, "EtArgs", &self.fields, self.size);
        s
    }

    /// The bytes of `args` in this layout. Errors when a field has more values than the
    /// layout holds (fields with fewer are zero-filled: the C arrays have at least one
    /// element).
    pub fn pack(&self, args: &EtArgs) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.size];
        let [t, dims, event_offset, event_target, group_first, group_domain] = &self.fields;
        let tensors: Vec<[u8; size_of::<TensorArg>()]> = args.t.iter().map(tensor_bytes).collect();
        put(&mut out, t, &tensors)?;
        put(&mut out, dims, &args.dims.iter().map(|v| v.to_ne_bytes()).collect::<Vec<_>>())?;
        put(&mut out, event_offset, &args.event_offset.iter().map(|v| v.to_ne_bytes()).collect::<Vec<_>>())?;
        put(&mut out, event_target, &args.event_target.iter().map(|v| v.to_ne_bytes()).collect::<Vec<_>>())?;
        put(&mut out, group_first, &args.group_first.iter().map(|v| v.to_ne_bytes()).collect::<Vec<_>>())?;
        put(&mut out, group_domain, &args.group_domain.iter().map(|v| v.to_ne_bytes()).collect::<Vec<_>>())?;
        Ok(out)
    }
}

/// The bytes of one `TensorArg`, each field at its offset.
fn tensor_bytes(a: &TensorArg) -> [u8; size_of::<TensorArg>()] {
    let mut b = [0u8; size_of::<TensorArg>()];
    let [ptr, shape, stride] = TensorArg::FIELDS else { unreachable!("TensorArg has three fields") };
    b[ptr.offset..ptr.offset + 8].copy_from_slice(&a.ptr.to_ne_bytes());
    for d in 0..MAX_RANK {
        b[shape.offset + 8 * d..shape.offset + 8 * d + 8].copy_from_slice(&a.shape[d].to_ne_bytes());
        b[stride.offset + 8 * d..stride.offset + 8 * d + 8].copy_from_slice(&a.stride[d].to_ne_bytes());
    }
    b
}

/// Writes the elements of one array field.
fn put<const N: usize>(out: &mut [u8], field: &Field, values: &[[u8; N]]) -> Result<()> {
    let len = field.len.unwrap_or(1);
    if values.len() > len {
        return Err(Error::Shape(format!(
            "kernel argument `EtArgs::{}` holds {len} values, {} were given",
            field.name,
            values.len()
        )));
    }
    for (k, v) in values.iter().enumerate() {
        out[field.offset + k * N..field.offset + (k + 1) * N].copy_from_slice(v);
    }
    Ok(())
}

impl EtArgs {
    /// The graph-dependent fields for the resolved graph `r` (`t` empty: see
    /// [`EtArgs::with_tensors`]).
    pub fn for_graph(r: &Resolved<'_>) -> Self {
        let event_target = r
            .events
            .iter()
            .zip(r.spec.events.iter())
            .map(|(layout, e)| match e.count {
                Count::PerElement { .. } => PER_ELEMENT,
                // the count rules give every waited element of an event the same target
                _ => (layout.offset..layout.offset + layout.len)
                    .map(|el| r.target[el as usize])
                    .find(|&t| t > 0)
                    .unwrap_or(0),
            })
            .collect();
        let mut group_first: Vec<u32> = r.groups.iter().map(|g| g.first).collect();
        group_first.push(r.n_tasks);
        let group_domain = r
            .groups
            .iter()
            .flat_map(|g| (0..MAX_RANK).map(|d| g.domain.get(d).copied().unwrap_or(1).max(1) as u32))
            .collect();
        EtArgs {
            t: Vec::new(),
            dims: r.dims.clone(),
            event_offset: r.events.iter().map(|e| e.offset as i64).collect(),
            event_target,
            group_first,
            group_domain,
        }
    }

    /// These arguments with the launch's tensors. Errors when a rank exceeds [`MAX_RANK`].
    pub fn with_tensors(&self, tensors: &[RawTensor]) -> Result<Self> {
        Ok(EtArgs { t: tensors.iter().map(TensorArg::new).collect::<Result<_>>()?, ..self.clone() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_layouts_are_the_c_layouts_the_declarations_assert() {
        assert_eq!(size_of::<TensorArg>(), 8 + 2 * 8 * MAX_RANK);
        let decl = c_declarations();
        assert!(decl.contains("static_assert(sizeof(TensorArg) == 72,"), "{decl}");
        assert!(decl.contains("static_assert(ET_OFFSETOF(Runtime, epoch) == 120,"), "{decl}");
        assert!(decl.contains("    const uint4* consumers;"), "{decl}");
        assert!(decl.contains("    long long shape[4];"), "{decl}");
        assert_eq!(decl.matches("static_assert(").count(), 2 + TensorArg::FIELDS.len() + Runtime::FIELDS.len());
    }

    #[test]
    fn args_layout_aligns_fields_and_packs_at_their_offsets() {
        use et_graph::build::*;
        let spec = graph(
            "k",
            vec![symbolic("N")],
            vec![tensor("x", et_graph::DType::F32, vec![dim(0)], et_graph::Access::Read)],
            vec![event("e", vec![dim(0)], Count::Inferred)],
            vec![group("g", &["i"], vec![dim(0)], vec![], vec![])],
        );
        let layout = ArgsLayout::new(&spec);
        let offsets: Vec<usize> = layout.fields.iter().map(|f| f.offset).collect();
        // t: 72, dims: 8, event_offset: 8, event_target: 4, group_first: 2 x 4, group_domain: 4 x 4
        assert_eq!(offsets, [0, 72, 80, 88, 92, 100]);
        assert_eq!(layout.size, 120);
        let raw = RawTensor::new(0x1000, et_graph::DType::F32, &[6]);
        let args = EtArgs {
            t: vec![TensorArg::new(&raw).unwrap()],
            dims: vec![6],
            event_offset: vec![0],
            event_target: vec![1],
            group_first: vec![0, 6],
            group_domain: vec![6, 1, 1, 1],
        };
        let bytes = layout.pack(&args).unwrap();
        assert_eq!(bytes.len(), 120);
        assert_eq!(bytes[0..8], 0x1000u64.to_ne_bytes());
        assert_eq!(bytes[8..16], 6i64.to_ne_bytes());
        assert_eq!(bytes[40..48], 1i64.to_ne_bytes(), "stride of dimension 0");
        assert_eq!(bytes[72..80], 6i64.to_ne_bytes());
        assert_eq!(bytes[96..100], 6u32.to_ne_bytes(), "total tasks after the first group");
        assert_eq!(bytes[100..104], 6u32.to_ne_bytes());
        let decl = layout.c_declaration();
        assert!(decl.contains("    et::TensorArg t[1];") && decl.contains("sizeof(EtArgs) == 120"), "{decl}");
        let too_many = EtArgs { dims: vec![1, 2], ..args };
        assert!(layout.pack(&too_many).unwrap_err().to_string().contains("EtArgs::dims"));
    }

    #[test]
    fn task_words_pack_the_group_above_the_task_and_check_the_totals() {
        assert_eq!(TaskWords::new(0).shift, 31);
        assert_eq!(TaskWords::new(1).shift, 31);
        assert_eq!(TaskWords::new(2).shift, 31);
        assert_eq!(TaskWords::new(3).shift, 30);
        assert_eq!(TaskWords::new(4).shift, 30);
        assert_eq!(TaskWords::new(5).shift, 29);
        assert_eq!(TaskWords::new(64).shift, 26);
        let w = TaskWords::new(5);
        let e = w.entry(4, 12345);
        assert_eq!((e >> w.shift, e & ((1 << w.shift) - 1)), (4, 12345));
        assert!(w.check("k", (1 << 29) - 1).is_ok());
        let err = w.check("k", 1 << 29).unwrap_err().to_string();
        assert!(err.contains("megakernel `k`") && err.contains("3 bits"), "{err}");
        let layout = ArgsLayout::new(&et_graph::build::graph("k", vec![], vec![], vec![], vec![]));
        assert!(layout.c_declaration().contains("#define ET_TASK_SHIFT 31\n"));
    }

    #[test]
    fn rank_above_the_maximum_is_an_error() {
        let raw = RawTensor::new(0, et_graph::DType::F32, &[1; MAX_RANK + 1]);
        assert!(TensorArg::new(&raw).unwrap_err().to_string().contains("rank 5"));
    }
}
