//! The error type of launches and backends.

use std::fmt;

use et_graph::ResolveError;

/// One task blocked in a deadlock or stopped by the watchdog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockedWait {
    /// The task, e.g. `total[3]`.
    pub task: String,
    /// The event element it waits for, e.g. `done[3]`.
    pub element: String,
    /// The counter's value in this launch.
    pub value: u32,
    /// The value that completes the element.
    pub expected: u32,
}

impl fmt::Display for BlockedWait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task {} waits on {} (count {} of {})", self.task, self.element, self.value, self.expected)
    }
}

/// Everything that can go wrong in a launch.
#[derive(Debug)]
pub enum Error {
    /// The tensors do not fit the megakernel's declaration, or (after an observed CPU
    /// launch, [`crate::LaunchOptions::observe`]) the routing the launch wrote let two
    /// tasks race.
    Resolve {
        /// The megakernel.
        kernel: String,
        /// What does not fit (boxed: it is the largest error, and every `Result` carries
        /// its size).
        error: Box<ResolveError>,
    },
    /// A host tensor was built with an inconsistent shape.
    Shape(String),
    /// A launch option has a value no launch can honour.
    InvalidOption {
        /// The option's field name in `LaunchOptions`.
        option: &'static str,
        /// Why, and what to use instead.
        message: String,
    },
    /// No task can make progress: every waiting task, its element and its count.
    Deadlock {
        /// The megakernel.
        kernel: String,
        /// The blocked waits (and, for the dynamic schedule, tasks never made ready).
        blocked: Vec<BlockedWait>,
    },
    /// The device watchdog stopped the kernel: a wait exceeded the time limit.
    Watchdog {
        /// The megakernel.
        kernel: String,
        /// The wait that timed out.
        wait: BlockedWait,
        /// The limit.
        limit: std::time::Duration,
    },
    /// A task read an index value outside the event dimension it indexes (a value
    /// written during the launch, or an input changed after the launch checked it).
    Index {
        /// The megakernel.
        kernel: String,
        /// The task, e.g. `down[3, 0, 1]`.
        task: String,
        /// The index tensor.
        tensor: String,
        /// The position read.
        at: Vec<i64>,
        /// The value read.
        value: i64,
        /// The extent it must be below.
        bound: i64,
    },
    /// An element received more signals than its count (a count declared for, or read
    /// for, an event signalled through routing data or by a group with a run-time
    /// condition, whose signals resolution cannot count): the
    /// tasks waiting on it may have run before the late producer's writes. Detected by the
    /// CPU backend and by the GPU's dynamic schedule; the GPU's static schedule signals
    /// without reading the counter back and does not detect it.
    Overcount {
        /// The megakernel.
        kernel: String,
        /// The task whose signal went past the count, e.g. `down[3, 0, 1]`.
        task: String,
        /// The event element, e.g. `done[5]`.
        element: String,
        /// The signals received, this one included.
        value: u32,
        /// The count that completes the element.
        expected: u32,
    },
    /// A task panicked (a tile op's assertion on the CPU backend).
    TaskPanic {
        /// The task.
        task: String,
        /// The panic message.
        message: String,
    },
    /// The backend is not available on this machine (no CUDA driver, no GPU, no NVRTC).
    Unavailable(String),
    /// Compiling the generated CUDA failed; the log names the user's file and line.
    Compile {
        /// The megakernel.
        kernel: String,
        /// NVRTC's log.
        log: String,
    },
    /// A device API call failed.
    Device(String),
    /// Reading or writing a file (trace, cache) failed.
    Io(std::io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Resolve { kernel, error } => write!(f, "megakernel `{kernel}`: {error}"),
            Error::Shape(m) => write!(f, "{m}"),
            Error::InvalidOption { option, message } => write!(f, "invalid launch option `{option}`: {message}"),
            Error::Deadlock { kernel, blocked } => {
                write!(f, "deadlock in megakernel `{kernel}`: no task can make progress")?;
                for b in blocked {
                    write!(f, "\n  {b}")?;
                }
                Ok(())
            }
            Error::Watchdog { kernel, wait, limit } => {
                write!(f, "watchdog stopped megakernel `{kernel}` after {limit:?}: {wait}")
            }
            Error::Index { kernel, task, tensor, at, value, bound } => {
                let at: Vec<String> = at.iter().map(i64::to_string).collect();
                write!(
                    f,
                    "megakernel `{kernel}` stopped: task {task} read {value} from index tensor `{tensor}` at [{}], outside 0..{bound}",
                    at.join(", ")
                )
            }
            Error::Overcount { kernel, task, element, value, expected } => write!(
                f,
                "megakernel `{kernel}` stopped: task {task} signalled {element} past its count ({value} signals of \
                 {expected}), so the tasks waiting on it may have run before this producer's writes"
            ),
            Error::TaskPanic { task, message } => write!(f, "task {task} panicked: {message}"),
            Error::Unavailable(m) => write!(f, "backend unavailable: {m}"),
            Error::Compile { kernel, log } => write!(f, "CUDA compilation of megakernel `{kernel}` failed:\n{log}"),
            Error::Device(m) => write!(f, "device error: {m}"),
            Error::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// Wraps a resolution error of the megakernel `kernel` (for `map_err`).
    pub fn resolve(kernel: &str) -> impl FnOnce(ResolveError) -> Error + '_ {
        move |error| Error::Resolve { kernel: kernel.to_string(), error: Box::new(error) }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
