//! Why a graph could not be resolved for the tensors of one launch.

use std::fmt;

/// Why a graph could not be resolved for the given tensors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResolveError {
    /// A tensor was passed with the wrong number of dimensions.
    Rank {
        /// Tensor parameter name.
        tensor: String,
        /// Declared rank.
        expected: usize,
        /// Rank passed.
        got: usize,
    },
    /// A tensor's extent disagrees with its declaration.
    Shape {
        /// Tensor parameter name.
        tensor: String,
        /// Dimension of the tensor.
        dim: usize,
        /// The declared extent, e.g. `R*32`.
        declared: String,
        /// Its value under the resolved dims.
        expected: Option<i64>,
        /// The extent passed.
        got: i64,
        /// How the dims involved were resolved.
        because: String,
    },
    /// A symbolic dim could not be determined or is outside its declared bound.
    Dim {
        /// Dim name.
        dim: String,
        /// Explanation.
        message: String,
    },
    /// An event access fell outside the event (data-dependent indices).
    OutOfBounds {
        /// Task description, e.g. `partial[1, 2]`.
        task: String,
        /// Event name.
        event: String,
        /// Explanation.
        message: String,
    },
    /// A waited element is never signalled, or counts disagree.
    Count {
        /// Event name.
        event: String,
        /// Explanation.
        message: String,
    },
    /// The task graph has a cycle.
    Cycle {
        /// Tasks on the cycle, producer before consumer, the first repeated at the end.
        tasks: Vec<String>,
    },
    /// Two tasks access overlapping tensor boxes, one writing, unordered by events.
    Race {
        /// The race, described ([`crate::race::Race`]).
        message: String,
    },
    /// An extent, index or count reaches 2^48 or more at these shapes (see
    /// [`crate::check::MAX_MAGNITUDE`]), so it could overflow 64-bit arithmetic.
    Magnitude {
        /// What is too large, e.g. "extent 0 of event `e` (2^50)".
        what: String,
    },
    /// A total does not fit the device's 32-bit task, element and offset indices.
    TooLarge {
        /// What overflows, e.g. "the tasks of group `g` (65537 x 65537)".
        what: String,
    },
    /// The host memory that resolving the task graph needs could not be allocated.
    OutOfMemory {
        /// Tasks of the launch.
        tasks: u32,
        /// Event elements of the launch.
        elements: u32,
        /// The estimate that the allocator refused.
        bytes: u64,
    },
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveError::Rank { tensor, expected, got } => {
                write!(
                    f,
                    "tensor `{tensor}` has {got} dimension{}, but the megakernel declares {expected}",
                    if *got == 1 { "" } else { "s" }
                )
            }
            ResolveError::Shape { tensor, dim, declared, expected, got, because } => {
                write!(f, "tensor `{tensor}` dimension {dim} is {got}, but the megakernel declares `{declared}`")?;
                // a constant extent (a literal, or a static dim the macro wrote in) is its value
                if let Some(e) = expected.filter(|e| e.to_string() != *declared) {
                    write!(f, " = {e}")?;
                }
                if !because.is_empty() {
                    write!(f, " ({because})")?;
                }
                Ok(())
            }
            ResolveError::Dim { dim, message } => write!(f, "dim `{dim}`: {message}"),
            ResolveError::OutOfBounds { task, event, message } => {
                write!(f, "task {task}: access to event `{event}` out of bounds: {message}")
            }
            ResolveError::Count { event, message } => write!(f, "event `{event}`: {message}"),
            ResolveError::Cycle { tasks } => {
                write!(f, "the task graph has a cycle: {}", tasks.join(" -> "))
            }
            ResolveError::Race { message } => f.write_str(message),
            ResolveError::Magnitude { what } => {
                write!(
                    f,
                    "{what} is too large at these shapes: a megakernel's extents, indices and counts must stay below 2^48"
                )
            }
            ResolveError::TooLarge { what } => {
                write!(f, "{what} exceed the device's 32-bit index range (at most {})", super::layout::MAX_FLAT)
            }
            ResolveError::OutOfMemory { tasks, elements, bytes } => write!(
                f,
                "a task graph of {tasks} tasks and {elements} event elements needs about {:.1} GB of host memory \
                 to resolve, and the allocator refused it",
                *bytes as f64 / 1e9
            ),
        }
    }
}

impl std::error::Error for ResolveError {}
