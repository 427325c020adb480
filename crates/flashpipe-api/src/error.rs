//! Typed errors every transport reports: [`ErrorCode`] (with its number on the serve
//! protocol's wire, docs/protocol.md, "Error codes") and [`ApiError`].

use std::fmt;

/// What went wrong, as a number on the wire (docs/protocol.md, "Error codes"). Codes
/// below 100 are the engine's and file system's errors; 100 and up are the server's
/// own (limits, grants, protocol). A code this version does not know decodes as
/// [`ErrorCode::Unknown`], so a newer server's errors still reach an older client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// No file has this name.
    NotFound,
    /// A file with this name exists already.
    Exists,
    /// The name breaks the rules (UTF-8, 1..=255 bytes, no '/' or NUL).
    BadName,
    /// Not enough free blocks.
    NoSpace,
    /// A read past the end of the file.
    ReadPastEnd,
    /// The file would exceed the file system's capacity.
    FileTooLarge,
    /// The store is read-only.
    ReadOnly,
    /// An earlier device failure left the mount unusable.
    Unusable,
    /// A data block failed its checksum.
    DataChecksumMismatch,
    /// A device failed.
    Device,
    /// A copy by reference is not possible.
    NotByReference,
    /// Every engine read buffer is held.
    ReadBuffersExhausted,
    /// A read larger than the engine's limit (the limit is given).
    ReadTooLarge,
    /// A read-files request naming more files than allowed (the limit is given).
    TooManyFiles,
    /// A read-files request asking for more bytes than allowed (the limit is given).
    ReadFilesTooLarge,
    /// A file of a read-files request left out: the batch took its buffers.
    BatchBuffersFull,
    /// The engine's queue or the client's engine queue is full.
    EngineBusy,
    /// The engine has stopped.
    EngineStopped,
    /// A stale file handle.
    StaleHandle,
    /// A buffer unsuitable for a direct read.
    BadBuffer,
    /// fsck could not run.
    CheckFailed,
    /// Any other engine error.
    Internal,
    /// Attributes that cannot be stored (a mode with bits outside `0o7777`).
    BadAttributes,
    /// The server has as many clients as it allows (the limit is given); the connection
    /// is closed.
    TooManyClients,
    /// The client has as many requests in flight as it may (the limit is given).
    TooManyInFlight,
    /// The client's requests would hold more bytes than it may (the limit is given).
    ClientBytesInFlight,
    /// All clients' requests would hold more bytes than the server allows (the limit is
    /// given).
    ServerBytesInFlight,
    /// The client holds as many read handles as it may (the limit is given).
    TooManyReadHandles,
    /// A write larger than the server takes in one request (the limit is given).
    WriteTooLarge,
    /// A write by grant names a slot not granted to this client, or a length past the
    /// slot (the limit is given: the slot size).
    NotGranted,
    /// Every write slot of the client's pool is granted (the limit is given).
    NoWriteSlots,
    /// No protocol version in common (the server's is given); the connection is closed.
    UnsupportedVersion,
    /// A frame that could not be decoded; the connection is closed.
    MalformedFrame,
    /// The server is stopping and takes no new requests.
    ShuttingDown,
    /// A request that needs mapped memory on a connection that does not map it.
    NotMapped,
    /// The first frame was not a hello, or a hello came twice.
    HandshakeRequired,
    /// The request was cancelled by the client (a kernel run stopped at a file
    /// boundary and committed nothing).
    Cancelled,
    /// The server runs as many kernels at once as it allows (the limit is given).
    TooManyKernelRuns,
    /// A kernel run cannot start: unknown kernel, bad options, bad output names or
    /// thread counts, an output that exists without `--force`.
    BadKernelRun,
    /// The kernel failed on an input (the message names the file and offset).
    KernelFailed,
    /// All clients together hold as many read handles as the server allows (the limit
    /// is given).
    ServerReadHandles,
    /// The client's user holds as many of the server's connections as one user may (the
    /// limit is given); the connection is closed.
    TooManyClientsForUser,
    /// The client did not finish its hello within the server's handshake time limit (the
    /// limit in milliseconds is given); the connection is closed.
    HandshakeTimeout,
    /// A kernel option names a host path, which a client may not do through a server
    /// (the message names the option and what to give instead).
    HostPathOption,
    /// A device image of the served store shrank or was removed under the server; the
    /// server takes no more writes (reads of what is left go on).
    StoreDeviceChanged,
    /// The client's user may not use this store (the store's access rule: its owner,
    /// root, and the group `serve --allow-group` names); the connection is closed.
    AccessDenied,
    /// A code this version does not know.
    Unknown(u16),
}

impl ErrorCode {
    /// The code's number on the wire.
    pub fn to_wire(self) -> u16 {
        match self {
            ErrorCode::NotFound => 1,
            ErrorCode::Exists => 2,
            ErrorCode::BadName => 3,
            ErrorCode::NoSpace => 4,
            ErrorCode::ReadPastEnd => 5,
            ErrorCode::FileTooLarge => 6,
            ErrorCode::ReadOnly => 7,
            ErrorCode::Unusable => 8,
            ErrorCode::DataChecksumMismatch => 9,
            ErrorCode::Device => 10,
            ErrorCode::NotByReference => 11,
            ErrorCode::ReadBuffersExhausted => 12,
            ErrorCode::ReadTooLarge => 13,
            ErrorCode::TooManyFiles => 14,
            ErrorCode::ReadFilesTooLarge => 15,
            ErrorCode::BatchBuffersFull => 16,
            ErrorCode::EngineBusy => 17,
            ErrorCode::EngineStopped => 18,
            ErrorCode::StaleHandle => 19,
            ErrorCode::BadBuffer => 20,
            ErrorCode::CheckFailed => 21,
            ErrorCode::Internal => 22,
            ErrorCode::BadAttributes => 23,
            ErrorCode::TooManyClients => 100,
            ErrorCode::TooManyInFlight => 101,
            ErrorCode::ClientBytesInFlight => 102,
            ErrorCode::ServerBytesInFlight => 103,
            ErrorCode::TooManyReadHandles => 104,
            ErrorCode::WriteTooLarge => 105,
            ErrorCode::NotGranted => 106,
            ErrorCode::NoWriteSlots => 107,
            ErrorCode::UnsupportedVersion => 108,
            ErrorCode::MalformedFrame => 109,
            ErrorCode::ShuttingDown => 110,
            ErrorCode::NotMapped => 111,
            ErrorCode::HandshakeRequired => 112,
            ErrorCode::Cancelled => 113,
            ErrorCode::TooManyKernelRuns => 114,
            ErrorCode::BadKernelRun => 115,
            ErrorCode::KernelFailed => 116,
            ErrorCode::ServerReadHandles => 117,
            ErrorCode::TooManyClientsForUser => 119,
            ErrorCode::HandshakeTimeout => 120,
            ErrorCode::HostPathOption => 121,
            ErrorCode::StoreDeviceChanged => 122,
            ErrorCode::AccessDenied => 118,
            ErrorCode::Unknown(code) => code,
        }
    }

    /// The code numbered `code` on the wire ([`ErrorCode::Unknown`] for one this
    /// version does not know).
    pub fn from_wire(code: u16) -> ErrorCode {
        ALL_KNOWN_CODES
            .iter()
            .copied()
            .find(|known| known.to_wire() == code)
            .unwrap_or(ErrorCode::Unknown(code))
    }
}

/// Every code this version knows.
pub const ALL_KNOWN_CODES: [ErrorCode; 46] = [
    ErrorCode::NotFound,
    ErrorCode::Exists,
    ErrorCode::BadName,
    ErrorCode::NoSpace,
    ErrorCode::ReadPastEnd,
    ErrorCode::FileTooLarge,
    ErrorCode::ReadOnly,
    ErrorCode::Unusable,
    ErrorCode::DataChecksumMismatch,
    ErrorCode::Device,
    ErrorCode::NotByReference,
    ErrorCode::ReadBuffersExhausted,
    ErrorCode::ReadTooLarge,
    ErrorCode::TooManyFiles,
    ErrorCode::ReadFilesTooLarge,
    ErrorCode::BatchBuffersFull,
    ErrorCode::EngineBusy,
    ErrorCode::EngineStopped,
    ErrorCode::StaleHandle,
    ErrorCode::BadBuffer,
    ErrorCode::CheckFailed,
    ErrorCode::Internal,
    ErrorCode::BadAttributes,
    ErrorCode::TooManyClients,
    ErrorCode::TooManyInFlight,
    ErrorCode::ClientBytesInFlight,
    ErrorCode::ServerBytesInFlight,
    ErrorCode::TooManyReadHandles,
    ErrorCode::WriteTooLarge,
    ErrorCode::NotGranted,
    ErrorCode::NoWriteSlots,
    ErrorCode::UnsupportedVersion,
    ErrorCode::MalformedFrame,
    ErrorCode::ShuttingDown,
    ErrorCode::NotMapped,
    ErrorCode::HandshakeRequired,
    ErrorCode::Cancelled,
    ErrorCode::TooManyKernelRuns,
    ErrorCode::BadKernelRun,
    ErrorCode::KernelFailed,
    ErrorCode::ServerReadHandles,
    ErrorCode::TooManyClientsForUser,
    ErrorCode::HandshakeTimeout,
    ErrorCode::HostPathOption,
    ErrorCode::StoreDeviceChanged,
    ErrorCode::AccessDenied,
];

/// A command's failure as every transport reports it (the served protocol calls it a
/// remote error): the code, the engine error's (or the server's) message, and the limit
/// where one applies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// What went wrong.
    pub code: ErrorCode,
    /// The engine error's Display text, or the server's own words.
    pub message: String,
    /// The limit that was reached, where one applies.
    pub limit: Option<u64>,
}

impl ApiError {
    /// An error with a code, a message and no limit.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            limit: None,
        }
    }

    /// An error about a limit reached.
    pub fn limit(code: ErrorCode, message: impl Into<String>, limit: u64) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            limit: Some(limit),
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorCode::Unknown(code) => write!(formatter, "unknown error code {code}"),
            known => write!(formatter, "{known:?}"),
        }
    }
}
