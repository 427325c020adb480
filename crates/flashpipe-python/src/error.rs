//! Errors, mapped once: every failure of the binding is a [`StoreError`], which answers
//! [`StoreError::kind`] once, the same in process and through a server; the kind names
//! the Python class it is raised as (`flashpipe._errors`, the `flashpipe.Error`
//! hierarchy). The kinds follow the CLI's error kinds (docs/cli.md, exit statuses) and the
//! messages are the engine's, the server's or the store's own words.

use flashpipe_api::{CodedError, ErrorCode};
use flashpipe_client::{ClientError, ConnectError};
use flashpipe_engine::EngineError;
use flashpipe_store::{StoreCloseError, StoreLockError, StoreOpenError};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// What kind of failure an error is: one Python class each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A named file, store file or device does not exist (`flashpipe.NotFound`).
    NotFound,
    /// The target exists already (`flashpipe.Exists`).
    Exists,
    /// The user may not do this: modes, the server's access rule, a read-only store
    /// (`flashpipe.PermissionDenied`).
    Permission,
    /// Another process holds the store, or a limit of the server is reached for now
    /// (`flashpipe.Busy`).
    Busy,
    /// An argument is wrong (`flashpipe.Invalid`, a `ValueError`).
    Invalid,
    /// Stored data failed a checksum or format check (`flashpipe.Corrupt`).
    Corrupt,
    /// The store or a device is full (`flashpipe.NoSpace`).
    NoSpace,
    /// An operating-system or device failure (`flashpipe.IoError`).
    Io,
    /// The server could not be reached, or the connection to it broke
    /// (`flashpipe.ConnectionLost`).
    Network,
    /// The store was closed (`flashpipe.Closed`).
    Closed,
    /// A kernel refused its run or failed on its input (`flashpipe.KernelFailed`).
    Kernel,
    /// Anything else: a bug or an unforeseen condition (`flashpipe.Internal`).
    Internal,
}

impl ErrorKind {
    /// The name of the kind's class in `flashpipe._errors`.
    pub fn class_name(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "NotFound",
            ErrorKind::Exists => "Exists",
            ErrorKind::Permission => "PermissionDenied",
            ErrorKind::Busy => "Busy",
            ErrorKind::Invalid => "Invalid",
            ErrorKind::Corrupt => "Corrupt",
            ErrorKind::NoSpace => "NoSpace",
            ErrorKind::Io => "IoError",
            ErrorKind::Network => "ConnectionLost",
            ErrorKind::Closed => "Closed",
            ErrorKind::Kernel => "KernelFailed",
            ErrorKind::Internal => "Internal",
        }
    }

    /// The kind of a refusal with the command set's error `code`, by the one table
    /// ([`ErrorCode::class`]) the CLI's exit statuses follow too.
    pub fn of_code(code: ErrorCode) -> ErrorKind {
        use flashpipe_api::ErrorClass as K;
        match code.class() {
            K::NotFound => ErrorKind::NotFound,
            K::Exists => ErrorKind::Exists,
            K::Invalid => ErrorKind::Invalid,
            K::NoSpace => ErrorKind::NoSpace,
            K::Permission => ErrorKind::Permission,
            K::Io => ErrorKind::Io,
            K::Corrupt => ErrorKind::Corrupt,
            K::Busy => ErrorKind::Busy,
            K::Network => ErrorKind::Network,
            K::Kernel => ErrorKind::Kernel,
            K::Internal => ErrorKind::Internal,
        }
    }

    /// The kind of an operating system's error.
    pub fn of_io(error: &std::io::Error) -> ErrorKind {
        use std::io::ErrorKind as Io;
        match error.kind() {
            Io::NotFound => ErrorKind::NotFound,
            Io::AlreadyExists => ErrorKind::Exists,
            Io::PermissionDenied => ErrorKind::Permission,
            Io::StorageFull | Io::QuotaExceeded | Io::FileTooLarge => ErrorKind::NoSpace,
            Io::InvalidInput | Io::InvalidFilename => ErrorKind::Invalid,
            Io::InvalidData => ErrorKind::Corrupt,
            Io::ConnectionRefused
            | Io::ConnectionReset
            | Io::ConnectionAborted
            | Io::NotConnected
            | Io::TimedOut
            | Io::BrokenPipe => ErrorKind::Network,
            _ => ErrorKind::Io,
        }
    }
}

/// Why an operation of the binding failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The engine in this process refused or failed the command.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The server refused or failed the command, or the connection to it broke.
    #[error(transparent)]
    Served(#[from] ClientError),
    /// The store could not be opened in this process.
    #[error(transparent)]
    Open(#[from] StoreOpenError),
    /// Closing the store in this process failed (its changes since the last commit may
    /// be lost).
    #[error(transparent)]
    Close(#[from] StoreCloseError),
    /// The store's server answered but could not be used.
    #[error("{store}: {source}")]
    Connect {
        /// The store file.
        store: String,
        /// Why.
        source: ConnectError,
    },
    /// A local file (the source of a put, the store file) could not be read.
    #[error("{what}: {source}")]
    Local {
        /// What was being read, with its path.
        what: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A change asked of a store opened with `read_only=True`.
    #[error("{store} was opened read-only (read_only=True); open it again without read_only to change it")]
    ReadOnly {
        /// The store file.
        store: String,
    },
    /// An operation on a store after `close()`.
    #[error("the store {store} is closed; open it again with flashpipe.Store(path)")]
    Closed {
        /// The store file.
        store: String,
    },
    /// A put's target exists and `replace` was not given.
    #[error("{name} exists in the store; give replace=True to replace it")]
    Exists {
        /// The name.
        name: String,
    },
    /// An argument is wrong.
    #[error("{0}")]
    Invalid(String),
    /// A call while a kernel run is in flight on the store's connection.
    #[error("a kernel run is in flight on {store}: read it to its end or close it first (or open a second Store for other calls)")]
    KernelRunInFlight {
        /// The store file.
        store: String,
    },
    /// Commands of an earlier call are still in flight and their answers cannot come (the
    /// connection broke).
    #[error("{outstanding} earlier command(s) of this store never got their answers (the connection to the server broke); open the store again")]
    Unsettled {
        /// The commands still in flight.
        outstanding: usize,
    },
    /// The store answered in a way the command set does not allow here.
    #[error("{0}")]
    Unexpected(String),
    /// Through a server, another client changed the file while it was read in several
    /// requests.
    #[error("{name} changed while it was being read (another client of the server wrote, replaced or removed it); read it again")]
    ChangedWhileRead {
        /// The file.
        name: String,
    },
}

impl StoreError {
    /// The kind of the failure (the Python class it is raised as).
    pub fn kind(&self) -> ErrorKind {
        match self {
            StoreError::Engine(error) => ErrorKind::of_code(error.code()),
            StoreError::Served(error) => match error {
                ClientError::Remote(remote) | ClientError::Closed(remote) => {
                    ErrorKind::of_code(remote.code)
                }
                ClientError::ConnectionLost(_)
                | ClientError::Protocol(_)
                | ClientError::Malformed(_) => ErrorKind::Network,
                ClientError::LimitReached { .. } => ErrorKind::Invalid,
                ClientError::NothingInFlight => ErrorKind::Internal,
            },
            StoreError::Open(error) => open_kind(error),
            StoreError::Close(StoreCloseError::Engine(error)) => ErrorKind::of_code(error.code()),
            StoreError::Close(_) => ErrorKind::Io,
            StoreError::Connect { source, .. } => match source {
                ConnectError::Connect { source, .. } => match ErrorKind::of_io(source) {
                    ErrorKind::Permission => ErrorKind::Permission,
                    _ => ErrorKind::Network,
                },
                ConnectError::Handshake(_) => ErrorKind::Network,
                ConnectError::Refused(remote) => ErrorKind::of_code(remote.code),
                ConnectError::ForeignServer { .. } => ErrorKind::Permission,
                ConnectError::OtherStore { .. } => ErrorKind::Invalid,
            },
            StoreError::Local { source, .. } => ErrorKind::of_io(source),
            StoreError::ReadOnly { .. } => ErrorKind::Permission,
            StoreError::Closed { .. } => ErrorKind::Closed,
            StoreError::Exists { .. } => ErrorKind::Exists,
            StoreError::Invalid(_) => ErrorKind::Invalid,
            StoreError::ChangedWhileRead { .. } => ErrorKind::Busy,
            StoreError::Unexpected(_) => ErrorKind::Internal,
            StoreError::Unsettled { .. } => ErrorKind::Network,
            StoreError::KernelRunInFlight { .. } => ErrorKind::Busy,
        }
    }

    /// The command set's code, where the store refused.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            StoreError::Engine(error) => Some(error.code()),
            StoreError::Served(error) => error.remote().map(|remote| remote.code),
            _ => None,
        }
    }
}

/// The kind of a failure to open a store in this process.
fn open_kind(error: &StoreOpenError) -> ErrorKind {
    match error {
        StoreOpenError::Config(config) => match config {
            flashpipe_store::StoreConfigError::Io { source, .. } => ErrorKind::of_io(source),
            flashpipe_store::StoreConfigError::Syntax { .. } => ErrorKind::Corrupt,
            _ => ErrorKind::Invalid,
        },
        StoreOpenError::MissingDevice { .. } => ErrorKind::NotFound,
        StoreOpenError::Lock(StoreLockError::Held { .. }) => ErrorKind::Busy,
        StoreOpenError::Lock(StoreLockError::Io { source, .. }) => ErrorKind::of_io(source),
        StoreOpenError::RamDevices { .. }
        | StoreOpenError::OtherStoresDevices { .. }
        | StoreOpenError::WrongDeviceSize { .. } => ErrorKind::Invalid,
        StoreOpenError::Mount { .. } => ErrorKind::Corrupt,
        _ => ErrorKind::Io,
    }
}

impl From<StoreError> for PyErr {
    fn from(error: StoreError) -> PyErr {
        raise(error.kind(), error.to_string())
    }
}

/// A Python exception of `kind`'s class saying `message`; a `RuntimeError` when the
/// pure-Python part of the package (`flashpipe._errors`) cannot be imported.
pub fn raise(kind: ErrorKind, message: String) -> PyErr {
    Python::attach(|py| {
        let class = py
            .import("flashpipe._errors")
            .and_then(|module| module.getattr(kind.class_name()))
            .and_then(|class| class.cast_into::<PyType>().map_err(PyErr::from));
        match class {
            Ok(class) => PyErr::from_type(class, message),
            Err(_) => PyRuntimeError::new_err(message),
        }
    })
}

/// A wrong argument, as `flashpipe.Invalid`.
pub fn invalid(message: impl Into<String>) -> PyErr {
    raise(ErrorKind::Invalid, message.into())
}
