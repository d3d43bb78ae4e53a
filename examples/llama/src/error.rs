//! The crate's error type: every failure names what it concerns (a file, a tensor, a
//! config key, an input) so that a user can act on the message alone.

use std::path::PathBuf;

/// What went wrong while reading a config or checkpoint, or running the reference.
#[derive(Debug)]
pub enum Error {
    /// A model config is malformed, unsupported or inconsistent.
    Config(String),
    /// A file could not be read or written.
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A safetensors file (or its index) could not be parsed or written.
    Format {
        /// The file concerned.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A tensor the model needs is not in the checkpoint.
    MissingTensor {
        /// Hugging Face name of the tensor.
        name: String,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// A tensor of the checkpoint has the wrong shape or an unsupported dtype.
    BadTensor {
        /// Hugging Face name of the tensor.
        name: String,
        /// The file that holds it.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// An argument of a decode step or generation is out of range.
    Input(String),
    /// The backend failed: an upload, a download or a megakernel launch.
    Backend(et_core::Error),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Config(m) => write!(f, "model config: {m}"),
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Format { path, message } => write!(f, "{}: {message}", path.display()),
            Error::MissingTensor { name, path } => write!(f, "tensor `{name}` is missing from {}", path.display()),
            Error::BadTensor { name, path, message } => write!(f, "tensor `{name}` in {}: {message}", path.display()),
            Error::Input(m) => write!(f, "{m}"),
            Error::Backend(e) => write!(f, "backend: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Backend(e) => Some(e),
            _ => None,
        }
    }
}

impl Error {
    /// An [`Error::Io`] for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }

    /// An [`Error::Format`] for `path`.
    pub(crate) fn format(path: impl Into<PathBuf>) -> impl FnOnce(String) -> Error {
        let path = path.into();
        move |message| Error::Format { path, message }
    }
}

impl From<et_core::Error> for Error {
    fn from(e: et_core::Error) -> Self {
        Error::Backend(e)
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
