//! The engine's errors as typed wire errors: a code, the engine error's Display text
//! and the limit where one applies.

use flashpipe_engine::EngineError;
use flashpipe_fs::{CopyError, FileIoError, FlushError, NamespaceError};
use flashpipe_protocol::{ErrorCode, RemoteError};

/// The wire form of an engine error.
pub(crate) fn remote_error(error: &EngineError) -> RemoteError {
    let (code, limit) = code_and_limit(error);
    RemoteError {
        code,
        message: error.to_string(),
        limit,
    }
}

fn code_and_limit(error: &EngineError) -> (ErrorCode, Option<u64>) {
    match error {
        EngineError::Namespace(error) => (namespace_code(error), None),
        EngineError::FileIo(error) => file_io_code(error),
        EngineError::Copy(CopyError::NotByReference { .. }) => (ErrorCode::NotByReference, None),
        EngineError::Copy(CopyError::Namespace(error)) => (namespace_code(error), None),
        EngineError::Copy(CopyError::Io(error)) => file_io_code(error),
        EngineError::Flush(FlushError::NoSpace { .. }) => (ErrorCode::NoSpace, None),
        EngineError::Flush(FlushError::Unusable { .. }) => (ErrorCode::Unusable, None),
        EngineError::Flush(FlushError::Device(_)) | EngineError::Device(_) => {
            (ErrorCode::Device, None)
        }
        EngineError::Check(_) => (ErrorCode::CheckFailed, None),
        EngineError::ReadBuffersExhausted(_) => (ErrorCode::ReadBuffersExhausted, None),
        EngineError::ReadTooLarge { max_read_bytes, .. } => {
            (ErrorCode::ReadTooLarge, Some(*max_read_bytes))
        }
        EngineError::TooManyFiles { limit, .. } => (ErrorCode::TooManyFiles, Some(*limit as u64)),
        EngineError::ReadFilesTooLarge { limit_bytes, .. } => {
            (ErrorCode::ReadFilesTooLarge, Some(*limit_bytes))
        }
        EngineError::BatchBuffersFull { limit } => {
            (ErrorCode::BatchBuffersFull, Some(*limit as u64))
        }
        EngineError::TooManyOutstanding { limit } => (ErrorCode::EngineBusy, Some(*limit as u64)),
        EngineError::QueueFull { capacity } => (ErrorCode::EngineBusy, Some(*capacity as u64)),
        EngineError::Stopped => (ErrorCode::EngineStopped, None),
    }
}

fn namespace_code(error: &NamespaceError) -> ErrorCode {
    match error {
        NamespaceError::BadName { .. } => ErrorCode::BadName,
        NamespaceError::NotFound { .. } => ErrorCode::NotFound,
        NamespaceError::Exists { .. } => ErrorCode::Exists,
        NamespaceError::StaleHandle { .. } => ErrorCode::StaleHandle,
        NamespaceError::NoSpace { .. } => ErrorCode::NoSpace,
        NamespaceError::Unusable { .. } => ErrorCode::Unusable,
        NamespaceError::ReadOnly { .. } => ErrorCode::ReadOnly,
    }
}

fn file_io_code(error: &FileIoError) -> (ErrorCode, Option<u64>) {
    match error {
        FileIoError::StaleHandle { .. } => (ErrorCode::StaleHandle, None),
        FileIoError::ReadPastEnd { size_bytes, .. } => (ErrorCode::ReadPastEnd, Some(*size_bytes)),
        FileIoError::FileTooLarge {
            limit_size_bytes, ..
        } => (ErrorCode::FileTooLarge, Some(*limit_size_bytes)),
        FileIoError::NoSpace { .. } => (ErrorCode::NoSpace, None),
        FileIoError::BadBuffer { .. } => (ErrorCode::BadBuffer, None),
        FileIoError::Unusable { .. } => (ErrorCode::Unusable, None),
        FileIoError::DataChecksumMismatch { .. } => (ErrorCode::DataChecksumMismatch, None),
        FileIoError::ReadOnly { .. } => (ErrorCode::ReadOnly, None),
        FileIoError::Device(_) => (ErrorCode::Device, None),
    }
}
