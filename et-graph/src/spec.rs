//! The static description of a megakernel: what the macro emits and the runtime reads.

use std::borrow::Cow;
use std::fmt;

use crate::affine::Affine;

/// A list that is `'static` borrowed data in generated code and owned in the macro.
pub type List<T> = Cow<'static, [T]>;
/// A name that is `'static` in generated code and owned in the macro.
pub type Name = Cow<'static, str>;

/// The highest rank of a tensor parameter, a tile and a tile group's domain: the macro
/// checks it, and the kernel ABI (`et_core::abi`) sizes its arrays by it.
pub const MAX_RANK: usize = 4;

/// Element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// IEEE binary32.
    F32,
    /// bfloat16 (8-bit exponent, 7-bit mantissa).
    BF16,
    /// IEEE binary16.
    F16,
    /// 32-bit signed integer (routing tables, indices).
    I32,
    /// 32-bit unsigned integer (counts).
    U32,
}

impl DType {
    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::BF16 | DType::F16 => 2,
        }
    }

    /// The Rust spelling used in `Tensor<dtype, ..>`.
    pub const fn rust_name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::BF16 => "bf16",
            DType::F16 => "f16",
            DType::I32 => "i32",
            DType::U32 => "u32",
        }
    }

    /// The C++ spelling in generated CUDA (the prelude defines `et::bf16` and `et::f16`).
    pub const fn cuda_name(self) -> &'static str {
        match self {
            DType::F32 => "float",
            DType::BF16 => "et::bf16",
            DType::F16 => "et::f16",
            DType::I32 => "int",
            DType::U32 => "unsigned int",
        }
    }

    /// Parses the Rust spelling of a dtype.
    pub fn from_rust_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.rust_name() == name)
    }

    /// Every dtype, in declaration order.
    pub const ALL: [DType; 5] = [DType::F32, DType::BF16, DType::F16, DType::I32, DType::U32];

    /// Whether values of this dtype can be used as data-dependent indices.
    pub const fn is_integer(self) -> bool {
        matches!(self, DType::I32 | DType::U32)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.rust_name())
    }
}

/// How a named dimension gets its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DimKind {
    /// Fixed when the megakernel is compiled (`dims(H = 2048)`).
    Static(i64),
    /// Resolved at launch from the tensors' shapes; `max` sizes scratch and bounds checks.
    Symbolic {
        /// Upper bound declared with `dims(B <= 256)`, if any.
        max: Option<i64>,
    },
}

/// A named dimension of the megakernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DimSpec {
    /// The name the user wrote (`B`, `H`).
    pub name: Name,
    /// Static value or symbolic.
    pub kind: DimKind,
}

/// Whether a tensor parameter (`&Tensor` or `&mut Tensor`), or a tile of it used by an
/// op, is read or written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// `&Tensor<..>` (an input), or a tile an op reads.
    Read,
    /// `&mut Tensor<..>` (an output or scratch), or a tile an op may write.
    Write,
}

/// A tensor parameter of the megakernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// Parameter name.
    pub name: Name,
    /// Element type.
    pub dtype: DType,
    /// Declared shape, each extent an affine expression of dims.
    pub shape: List<Affine>,
    /// Read or written.
    pub access: Access,
}

/// How many signals complete one element of an event tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Count {
    /// Inferred from the signal maps; must be uniform over the waited elements.
    Inferred,
    /// Given by the user (`count = 4`), checked against the inference.
    Fixed(Affine),
    /// Read per element at run time from a `u32`/`i32` tensor parameter with the event's
    /// shape (`count = dyn(counts)`); each must equal the signals its element receives.
    PerElement {
        /// Index of the tensor parameter that holds the counts.
        tensor: u16,
    },
}

/// An event tensor: a multi-dimensional array of counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventSpec {
    /// Variable name given with `let name = event!(..)`.
    pub name: Name,
    /// Shape, affine in dims.
    pub shape: List<Affine>,
    /// Trigger count.
    pub count: Count,
}

/// One coordinate of an access map (`e[i, ..]`, `e[k*8 .. k*8+8]`, `e[topk[t, k]]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Index {
    /// A single affine coordinate.
    At(Affine),
    /// Every coordinate in `start .. end` (end exclusive).
    Range {
        /// First coordinate.
        start: Affine,
        /// One past the last coordinate.
        end: Affine,
    },
    /// Every coordinate of the dimension (`..`).
    All,
    /// A coordinate read at run time from an integer tensor (`topk[t, k]`), or one
    /// coordinate per value of a run of positions (`tokens[e, m * 16 .. m * 16 + 16]`).
    Data {
        /// Index of the tensor parameter read.
        tensor: u16,
        /// Position read (the run's first), affine in the task's tile indices and dims.
        at: List<Affine>,
        /// A run of positions: coordinate `along.0` of `at` advances over `along.1`
        /// values, and the access touches one element per value read.
        along: Option<(u16, Affine)>,
    },
}

impl Index {
    /// Whether the coordinate depends on tensor data.
    pub fn is_data_dependent(&self) -> bool {
        matches!(self, Index::Data { .. })
    }
}

/// A `wait!` or `signal!` in a tile body: which event elements it touches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventAccess {
    /// Index of the event in [`GraphSpec::events`].
    pub event: u16,
    /// One [`Index`] per event dimension.
    pub index: List<Index>,
    /// Position of the statement in the tile body (waits, signals and op calls counted
    /// together): what the race rule orders accesses by.
    pub stmt: u16,
}

impl EventAccess {
    /// Whether any coordinate depends on tensor data.
    pub fn is_data_dependent(&self) -> bool {
        self.index.iter().any(Index::is_data_dependent)
    }
}

/// A tile of a tensor used by a tile op: `t.tile([idx..], [size..])` covers
/// `idx[d] * size[d] .. idx[d] * size[d] + size[d]` in each dimension `d`. An extent may
/// be symbolic (`[B, 64]`); the index of that dimension is then a constant, so that the
/// box start stays affine (`check::check_bounds` enforces both).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileAccess {
    /// Index of the tensor parameter.
    pub tensor: u16,
    /// Tile coordinates, affine in tile indices and dims.
    pub index: List<Affine>,
    /// Tile extents, affine in dims (never in tile indices); usually constants.
    pub size: List<Affine>,
    /// Whether the op reads or writes the tile (from the op's signature).
    pub access: Access,
    /// Position of the op call in the tile body (as [`EventAccess::stmt`]).
    pub stmt: u16,
}

/// How a [`Condition`] compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cmp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

impl Cmp {
    /// Whether `a <op> b` holds.
    pub fn holds(self, a: i64, b: i64) -> bool {
        match self {
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
            Cmp::Eq => a == b,
            Cmp::Ne => a != b,
        }
    }

    /// The operator as written.
    pub const fn symbol(self) -> &'static str {
        match self {
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
            Cmp::Eq => "==",
            Cmp::Ne => "!=",
        }
    }

    /// The comparison with its two sides swapped (`a < b` is `b > a`).
    pub const fn flipped(self) -> Cmp {
        match self {
            Cmp::Lt => Cmp::Gt,
            Cmp::Le => Cmp::Ge,
            Cmp::Gt => Cmp::Lt,
            Cmp::Ge => Cmp::Le,
            Cmp::Eq => Cmp::Eq,
            Cmp::Ne => Cmp::Ne,
        }
    }
}

/// When a task of a group exists: `lhs <cmp> tensor[at]`, read on the device (or the CPU
/// worker) after the group's first `wait!`, its guard. A task whose condition is false is
/// inactive: it runs nothing after the guard and signals nothing. Under the dynamic
/// schedule it is never queued.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// Affine in the tile indices and dims.
    pub lhs: Affine,
    /// The comparison.
    pub cmp: Cmp,
    /// The integer tensor read.
    pub tensor: u16,
    /// The position read, affine in the tile indices and dims.
    pub at: List<Affine>,
}

/// A tile group: `tile!(name[i, j] in [D0, D1] { .. })`, one task per domain point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSpec {
    /// Group name.
    pub name: Name,
    /// Names of the tile indices (`i`, `j`).
    pub vars: List<Name>,
    /// Extent of each tile index, affine in dims.
    pub domain: List<Affine>,
    /// `wait!` statements in body order.
    pub waits: List<EventAccess>,
    /// `signal!` statements in body order.
    pub signals: List<EventAccess>,
    /// Tensor tiles touched by the body's ops, in call and argument order.
    pub tiles: List<TileAccess>,
    /// Relative cost of one task, used by cost-aware static placement.
    pub cost: u32,
    /// `tile!(.. if m * 16 < counts[e] { .. })`: when a task exists.
    pub condition: Option<Condition>,
}

/// A read of integer tensor data by a task outside its ops: a data-dependent index of a
/// `signal!`, or a group's condition. Reads of tensors that the launch writes (routing
/// data) must happen after the write, which the race rule checks like a tile read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataRead {
    /// The tensor read.
    pub tensor: u16,
    /// The position read (the first of a run).
    pub at: Vec<Affine>,
    /// A run of positions along one coordinate (see [`Index::Data`]).
    pub along: Option<(u16, Affine)>,
    /// The statement position the read happens at.
    pub stmt: u16,
    /// Where it is: the condition, or coordinate `coord` of signal `signal`.
    pub site: ReadSite,
}

/// Where a [`DataRead`] is written in the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadSite {
    /// The group's condition.
    Condition,
    /// Coordinate `coord` of signal number `signal`.
    Signal {
        /// Index among the group's signals.
        signal: u16,
        /// The coordinate.
        coord: u16,
    },
}

impl GroupSpec {
    /// The `wait!` that guards the group's condition: its first (a rule makes it the
    /// body's first statement); none without a condition. The condition is read when
    /// its element completes, so a guard is waited by active and inactive tasks alike.
    pub fn guard(&self) -> Option<&EventAccess> {
        self.condition.as_ref()?;
        self.waits.iter().min_by_key(|w| w.stmt)
    }

    /// Every read of tensor data outside ops, in a fixed order (the condition first,
    /// then the signals' data indices in body order).
    pub fn data_reads(&self) -> Vec<DataRead> {
        let mut out = Vec::new();
        if let Some(c) = &self.condition {
            // the condition is read right after its guard
            let stmt = self.guard().map_or(0, |w| w.stmt + 1);
            out.push(DataRead { tensor: c.tensor, at: c.at.to_vec(), along: None, stmt, site: ReadSite::Condition });
        }
        for (k, s) in self.signals.iter().enumerate() {
            for (c, ix) in s.index.iter().enumerate() {
                if let Index::Data { tensor, at, along } = ix {
                    out.push(DataRead {
                        tensor: *tensor,
                        at: at.to_vec(),
                        along: along.clone(),
                        stmt: s.stmt,
                        site: ReadSite::Signal { signal: k as u16, coord: c as u16 },
                    });
                }
            }
        }
        out
    }
}

/// Static or dynamic scheduling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ScheduleKind {
    /// Per-SM queues cut from one topological order, built on the host.
    #[default]
    Static,
    /// A device-side ready queue fed by the signals that complete event elements.
    Dynamic,
}

/// The whole description of one megakernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphSpec {
    /// The megakernel's function name.
    pub name: Name,
    /// Named dims, static and symbolic.
    pub dims: List<DimSpec>,
    /// Tensor parameters in signature order.
    pub tensors: List<TensorSpec>,
    /// Event tensors in declaration order.
    pub events: List<EventSpec>,
    /// Tile groups in declaration order.
    pub groups: List<GroupSpec>,
    /// Default schedule.
    pub schedule: ScheduleKind,
}

impl GraphSpec {
    /// Whether tensor `t` is routing data: an integer tensor that the launch writes and
    /// that is read as indices or a condition. Its contents exist only on the device
    /// (or the CPU workers) during the launch, so the host never reads it, and event
    /// maps through it are resolved where they are used.
    pub fn is_routing(&self, t: u16) -> bool {
        self.tensors[t as usize].access == Access::Write
    }

    /// Whether which tasks a launch runs or which elements their signals reach depends
    /// on data the launch itself writes or on a group condition: then the race rule at
    /// launch, which must assume every such signal may reach every waiter, is not exact,
    /// and the CPU backend observes the launch (`LaunchOptions::observe`).
    pub fn routes_at_run_time(&self) -> bool {
        (0..self.events.len() as u16).any(|e| self.resets_per_launch(e))
    }

    /// Whether event `e`'s signals per launch depend on data of the launch: it is
    /// signalled by a group with a condition, or through routing data. Its counters are
    /// zeroed before every launch (elsewhere they count on across launches, see the
    /// epoch in the runtime protocol), since an element may receive no signal in one
    /// launch and its count in the next.
    pub fn resets_per_launch(&self, e: u16) -> bool {
        self.groups.iter().any(|g| {
            g.signals.iter().filter(|s| s.event == e).any(|s| {
                g.condition.is_some()
                    || s.index.iter().any(|ix| matches!(ix, Index::Data { tensor, .. } if self.is_routing(*tensor)))
            })
        })
    }
}

/// How a tile op uses one of its parameters: the op's signature says it
/// (`TileRef` reads, `TileMut` writes, anything else is a scalar).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgKind {
    /// A `TileRef`: the op reads the tile.
    Read,
    /// A `TileMut`: the op writes (and may read) the tile.
    Write,
    /// A scalar argument (an affine integer or a float literal).
    Scalar,
}

impl ArgKind {
    /// Whether the op may write through this argument.
    pub const fn is_write(self) -> bool {
        matches!(self, ArgKind::Write)
    }
}
