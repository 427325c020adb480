//! What clients ask the engine, what it answers, and how it fails.

use std::ops::Deref;
use std::sync::Arc;

use flashpipe_device::{DeviceError, IoBuf, PoolExhausted};
use flashpipe_fs::{
    CopyError, CopyMethod, CopyReport, FileIoError, FileStat, FlushError, FsStats, FsckError,
    FsckReport, NamespaceError,
};

/// A client's request to the filesystem core (HWFS 3.3.1: file name, operation, offset,
/// length), addressed by name.
#[derive(Debug)]
pub enum Command {
    /// Create an empty file.
    Create {
        /// The new file's name.
        name: String,
    },
    /// Write `data` at `offset_bytes`; the buffer comes back in [`Reply::Written`]. When
    /// `offset_bytes` is a multiple of the FS block size, the whole FS blocks go to the
    /// device straight from `data` on the default write path (no copy; the engine holds
    /// it until they are written).
    /// The answer comes when this write's own device requests have completed, possibly
    /// before earlier writes to other blocks.
    Write {
        /// The file.
        name: String,
        /// Where the bytes go.
        offset_bytes: u64,
        /// The bytes (its `len()` is the length written).
        data: IoBuf,
    },
    /// Read `length_bytes` at `offset_bytes` into an engine-owned buffer.
    Read {
        /// The file.
        name: String,
        /// Where to start.
        offset_bytes: u64,
        /// How many bytes (at most the engine's `max_read_bytes`).
        length_bytes: u64,
    },
    /// Read several whole small files in one message (at most [`READ_FILES_MAX_COUNT`]
    /// files and [`read_files_max_bytes`] bytes together, each at most the engine's
    /// `max_read_bytes`). The files are planned together from their block maps and
    /// physically adjacent files share one device request and one pool buffer; the answer
    /// is one [`Reply::Files`] with every file's data or its own error, in `names` order.
    ReadFiles {
        /// The files, whole.
        names: Vec<String>,
    },
    /// Set a file's size.
    Truncate {
        /// The file.
        name: String,
        /// The new size.
        size_bytes: u64,
    },
    /// Delete a file.
    Delete {
        /// The file.
        name: String,
    },
    /// Rename a file; the target must not exist.
    Rename {
        /// Current name.
        from: String,
        /// New name.
        to: String,
    },
    /// Rename a file, replacing the target if it exists (both take effect in the same
    /// commit; the replaced file's data stays intact until that commit is durable).
    RenameReplacing {
        /// Current name.
        from: String,
        /// New name (replaced if it exists).
        to: String,
    },
    /// Create `to` as a copy of the whole file `from` (`to` must not exist). With a
    /// reference method on a store whose device remaps (an FTL on flash), whole blocks
    /// are remapped and no data moves.
    Copy {
        /// The source file.
        from: String,
        /// The new file.
        to: String,
        /// By reference (or fail, or fall back to bytes) or by bytes.
        method: CopyMethod,
    },
    /// Facts about one file.
    Stat {
        /// The file.
        name: String,
    },
    /// Every file.
    List,
    /// Space and counts (df).
    Stats,
    /// Make every change so far durable.
    Flush,
    /// Check the durable image (flush first to check the current state).
    Check,
}

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

/// The engine's answer to a command.
#[derive(Debug)]
pub enum Reply {
    /// The command needed no other answer.
    Done,
    /// A write completed; its buffer is handed back for reuse.
    Written {
        /// The command's buffer.
        buffer: IoBuf,
    },
    /// Data of a read.
    Data(ReadData),
    /// Data of a [`Command::ReadFiles`]: each file's whole data or its own error, in the
    /// order of the command's names.
    Files(Vec<Result<ReadData, EngineError>>),
    /// One file.
    Stat(FileStat),
    /// Every file, by name.
    List(Vec<FileStat>),
    /// Space and counts.
    Stats(FsStats),
    /// An fsck report.
    Check(FsckReport),
    /// What a copy did.
    Copied(CopyReport),
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
    /// The engine has stopped.
    #[error("the engine has stopped")]
    Stopped,
}
