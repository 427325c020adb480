//! What clients ask the engine, what it answers, and how it fails.

use std::ops::Deref;
use std::sync::Arc;

use flashpipe_api::{ApiError, CodedError, ErrorCode, MismatchedReply, Payloads, StreamPayloads};
use flashpipe_device::{DeviceError, IoBuf, PoolExhausted};
use flashpipe_fs::{
    CopyError, FileIoError, FlushError, FsckError, FsckReport, NamespaceError, SetAttributesError,
};

/// The engine's payloads: a write carries an aligned buffer and gets it back, a read
/// answers with a window of an engine pool buffer, a check with the full fsck report, and
/// one file of a batched read fails with its own engine error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Local;

impl Payloads for Local {
    type Write = IoBuf;
    type Written = IoBuf;
    type Read = ReadData;
    type Check = FsckReport;
    type FileError = EngineError;
}

impl StreamPayloads for Local {
    fn write_bytes_mut(write: &mut IoBuf) -> &mut [u8] {
        write.as_mut_slice()
    }

    fn set_write_len(write: &mut IoBuf, length_bytes: usize) {
        write.set_len(length_bytes);
    }

    fn written_bytes(written: &IoBuf) -> u64 {
        written.len() as u64
    }

    fn reuse_written(written: IoBuf) -> Option<IoBuf> {
        Some(written)
    }

    fn read_bytes(read: &ReadData) -> &[u8] {
        read.bytes()
    }
}

/// A client's request to the filesystem core (HWFS 3.3.1: file name, operation, offset,
/// length), addressed by name: the one command set ([`flashpipe_api::Command`]) over the
/// engine's payloads. A write's buffer comes back in [`Reply::Written`]; whole FS blocks
/// of a block-aligned write go to the device straight from it on the default write path.
pub type Command = flashpipe_api::Command<Local>;

/// The engine's answer to a command ([`flashpipe_api::Reply`] over the engine's payloads).
pub type Reply = flashpipe_api::Reply<Local>;

/// Most files one [`Command::ReadFiles`] may name.
pub const READ_FILES_MAX_COUNT: usize = 256;

/// Most engine pool buffers one [`Command::ReadFiles`] takes: its files are packed into
/// as few buffers as their blocks need, and a file that would need a buffer past this
/// many is answered [`EngineError::BatchBuffersFull`] (read it in a later command). A
/// caller that holds one credit per pool buffer reserves `min(files, this)` for a batch.
/// Four: the byte limit ([`read_files_max_bytes`]) is four full reads, so a batch of files
/// that lie together fits (256 files of 2 KiB on 16 KiB blocks take four buffers), and a
/// reader with eight credits keeps two batches in flight.
pub const READ_FILES_MAX_BUFFERS: usize = 4;

/// Most bytes (the files' sizes added up) one [`Command::ReadFiles`] may ask for on an
/// engine whose single reads are limited to `max_read_bytes`: four full reads' worth.
pub fn read_files_max_bytes(max_read_bytes: u64) -> u64 {
    4 * max_read_bytes
}

/// The pool buffer behind a [`ReadData`]: owned by one read, or shared by the files of a
/// batched read that came in one device request (the buffer returns to the pool when the
/// last of them is dropped).
#[derive(Debug)]
pub(crate) enum ReadBuffer {
    Owned(IoBuf),
    Shared(Arc<IoBuf>),
}

impl Deref for ReadBuffer {
    type Target = IoBuf;

    fn deref(&self) -> &IoBuf {
        match self {
            ReadBuffer::Owned(buffer) => buffer,
            ReadBuffer::Shared(buffer) => buffer,
        }
    }
}

/// Data read by the engine: an engine-owned aligned buffer (from its bounded pool) and
/// the window of it holding the requested bytes. Dropping it returns the buffer (a buffer
/// shared by several files of one [`Command::ReadFiles`] returns with the last of them).
#[derive(Debug)]
pub struct ReadData {
    pub(crate) buffer: ReadBuffer,
    pub(crate) window_start: usize,
    pub(crate) length_bytes: usize,
}

impl ReadData {
    /// The bytes read.
    pub fn bytes(&self) -> &[u8] {
        &self.buffer[self.window_start..self.window_start + self.length_bytes]
    }

    /// Number of bytes read.
    pub fn len(&self) -> usize {
        self.length_bytes
    }

    /// Where the bytes start inside the pool buffer: with [`ReadData::pool_slot`], the
    /// bytes sit at `slot * buffer_size_bytes + window_start` of the pool's region (the
    /// address a client process that mapped a shared pool reads them at).
    pub fn window_start(&self) -> usize {
        self.window_start
    }

    /// True when the bytes sit in an engine pool buffer (always, for reads that
    /// reached the device; the engine never copies them).
    pub fn is_pooled(&self) -> bool {
        self.buffer.pool_slot().is_some()
    }

    /// The engine pool slot holding the bytes (pool id, slot), if pooled; files of one
    /// [`Command::ReadFiles`] that came in one device request share a slot.
    pub fn pool_slot(&self) -> Option<(u64, u32)> {
        self.buffer.pool_slot()
    }

    /// True for a zero-length read.
    pub fn is_empty(&self) -> bool {
        self.length_bytes == 0
    }
}

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A name-level failure (missing file, bad name, exists, no space).
    #[error(transparent)]
    Namespace(#[from] NamespaceError),
    /// A data-level failure (read past the end, disk full, device error).
    #[error(transparent)]
    FileIo(#[from] FileIoError),
    /// A copy failed (including "cannot copy by reference").
    #[error(transparent)]
    Copy(#[from] CopyError),
    /// A flush failed.
    #[error(transparent)]
    Flush(#[from] FlushError),
    /// Attributes could not be set (a missing file, a mode outside the permission bits).
    #[error(transparent)]
    SetAttributes(#[from] SetAttributesError),
    /// The check failed to run.
    #[error(transparent)]
    Check(#[from] FsckError),
    /// A device request failed outside the file system's own calls (engine reads).
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// Every engine read buffer is held by clients; drop some read data and retry.
    #[error("engine read buffers exhausted ({0}); drop read data you no longer need")]
    ReadBuffersExhausted(#[from] PoolExhausted),
    /// A read asks for more than one engine buffer holds.
    #[error("read of {length_bytes} bytes exceeds the engine's limit of {max_read_bytes} bytes per read")]
    ReadTooLarge {
        /// Bytes asked for.
        length_bytes: u64,
        /// The limit.
        max_read_bytes: u64,
    },
    /// A read into a caller's destination does not start on a block.
    #[error("read into a region at offset {offset_bytes} does not start on a block of {block_bytes} bytes; start it on a multiple of the block size")]
    ReadIntoUnaligned {
        /// Where the read starts in the file.
        offset_bytes: u64,
        /// The file system's block size.
        block_bytes: u64,
    },
    /// A read into a caller's destination needs more room than the destination has.
    #[error("read into a region needs {span_bytes} bytes of room (its length rounded up to whole blocks) and the destination holds {destination_bytes}; give it more room")]
    DestinationTooSmall {
        /// Bytes the read writes (whole blocks).
        span_bytes: u64,
        /// Bytes the destination holds.
        destination_bytes: u64,
    },
    /// A [`Command::ReadFiles`] names more files than one command may.
    #[error("read of {count} files in one command exceeds the engine's limit of {limit} files")]
    TooManyFiles {
        /// Files named.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// The files of a [`Command::ReadFiles`] hold more bytes together than one command may.
    #[error("read of {total_bytes} bytes of files in one command exceeds the engine's limit of {limit_bytes} bytes")]
    ReadFilesTooLarge {
        /// The files' sizes added up.
        total_bytes: u64,
        /// The limit.
        limit_bytes: u64,
    },
    /// A file of a [`Command::ReadFiles`] was not read because the batch already takes
    /// its most pool buffers; it was not attempted and may be read in another command.
    #[error("file left out of a batched read: the batch already takes its {limit} engine buffers; read it in another command")]
    BatchBuffersFull {
        /// Buffers one batch may take ([`READ_FILES_MAX_BUFFERS`]).
        limit: usize,
    },
    /// The client already has as many commands outstanding as its completion queue holds.
    #[error("client has {limit} commands outstanding, its limit; reap completions first")]
    TooManyOutstanding {
        /// The client's limit.
        limit: usize,
    },
    /// The engine's command queue is full (non-blocking submit only).
    #[error("engine command queue full ({capacity} commands)")]
    QueueFull {
        /// The queue's capacity.
        capacity: usize,
    },
    /// An inbound source handed over more commands in one poll than its budget: the
    /// extra ones are answered with this and the source is dropped.
    #[error("an inbound source handed over more than its budget of {budget} commands in one poll; it is closed")]
    SourceOverBudget {
        /// Commands one poll may hand over.
        budget: usize,
    },
    /// The engine has stopped.
    #[error("the engine has stopped")]
    Stopped,
    /// A command was answered with a reply of another kind (the engine never does; the
    /// command set's generic methods name it rather than panic).
    #[error(transparent)]
    MismatchedReply(#[from] MismatchedReply),
}

impl EngineError {
    /// The error as every transport reports it: a code, this error's Display text, and
    /// the limit where one applies (what a server sends its client).
    pub fn to_api(&self) -> ApiError {
        let (code, limit) = code_and_limit(self);
        ApiError {
            code,
            message: self.to_string(),
            limit,
        }
    }
}

impl CodedError for EngineError {
    fn code(&self) -> ErrorCode {
        code_and_limit(self).0
    }
}

fn code_and_limit(error: &EngineError) -> (ErrorCode, Option<u64>) {
    match error {
        EngineError::Namespace(error) => (namespace_code(error), None),
        EngineError::FileIo(error) => file_io_code(error),
        EngineError::Copy(CopyError::NotByReference { .. }) => (ErrorCode::NotByReference, None),
        EngineError::Copy(CopyError::Namespace(error)) => (namespace_code(error), None),
        EngineError::Copy(CopyError::Io(error)) => file_io_code(error),
        EngineError::SetAttributes(SetAttributesError::Namespace(error)) => {
            (namespace_code(error), None)
        }
        EngineError::SetAttributes(SetAttributesError::Bad(_)) => (ErrorCode::BadAttributes, None),
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
        EngineError::ReadIntoUnaligned { block_bytes, .. } => {
            (ErrorCode::BadBuffer, Some(*block_bytes))
        }
        EngineError::DestinationTooSmall {
            destination_bytes, ..
        } => (ErrorCode::BadBuffer, Some(*destination_bytes)),
        EngineError::TooManyFiles { limit, .. } => (ErrorCode::TooManyFiles, Some(*limit as u64)),
        EngineError::ReadFilesTooLarge { limit_bytes, .. } => {
            (ErrorCode::ReadFilesTooLarge, Some(*limit_bytes))
        }
        EngineError::BatchBuffersFull { limit } => {
            (ErrorCode::BatchBuffersFull, Some(*limit as u64))
        }
        EngineError::TooManyOutstanding { limit } => (ErrorCode::EngineBusy, Some(*limit as u64)),
        EngineError::QueueFull { capacity } => (ErrorCode::EngineBusy, Some(*capacity as u64)),
        EngineError::SourceOverBudget { budget } => (ErrorCode::EngineBusy, Some(*budget as u64)),
        EngineError::Stopped => (ErrorCode::EngineStopped, None),
        EngineError::MismatchedReply(_) => (ErrorCode::Internal, None),
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
