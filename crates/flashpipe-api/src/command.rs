//! The command set, once: what a client asks ([`Command`]) and what it is answered
//! ([`Reply`]), generic over the payloads that differ between transports ([`Payloads`]):
//! the in-process engine hands aligned buffers back and forth, the wire carries bytes or
//! shared-memory windows, the served client holds views of the server's memory.

use std::fmt::Debug;

use crate::kind::CommandKind;
use crate::values::{AttributeChange, CopyMethod, CopyReport, FileOwner, FileStat, FsStats};

/// The payload types of one transport: what a write carries, what a completed write
/// hands back, what a read answers with, what a check reports, and how one file of a
/// batched read fails.
pub trait Payloads {
    /// The bytes of a write (an engine buffer, inline bytes or a granted slot).
    type Write: Debug;
    /// What a completed write hands back (the engine's buffer, or the bytes written).
    type Written: Debug;
    /// Read data (an engine pool buffer's window, inline bytes or a shared window).
    type Read: Debug;
    /// What a check found (the full report, or its summary as sent).
    type Check: Debug;
    /// Why one file of a [`Command::ReadFiles`] was not read.
    type FileError: Debug;
}

/// One file of a [`Reply::Files`]: its data, or why it was not read.
pub type FileResult<P> = Result<<P as Payloads>::Read, <P as Payloads>::FileError>;

/// A client's request, addressed by file name (HWFS 3.3.1: file name, operation, offset,
/// length).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command<P: Payloads> {
    /// Create an empty file.
    Create {
        /// The new file's name.
        name: String,
    },
    /// Write `data` at `offset_bytes`; the answer is [`Reply::Written`]. When
    /// `offset_bytes` is a multiple of the FS block size, the engine's default write path
    /// sends whole FS blocks to the device straight from the buffer (no copy). The answer
    /// comes when this write's own device requests have completed, possibly before
    /// earlier writes to other blocks.
    Write {
        /// The file.
        name: String,
        /// Where the bytes go.
        offset_bytes: u64,
        /// The bytes (their length is the length written).
        data: P::Write,
    },
    /// Read `length_bytes` at `offset_bytes`.
    Read {
        /// The file.
        name: String,
        /// Where to start.
        offset_bytes: u64,
        /// How many bytes (at most the transport's `max_read_bytes`).
        length_bytes: u64,
    },
    /// Read several whole small files in one command; the answer is one
    /// [`Reply::Files`] with every file's data or its own error, in `names` order.
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
    /// Rename a file. Without `replace` the target must not exist; with it an existing
    /// target is replaced (both take effect in the same commit; the replaced file's data
    /// stays intact until that commit is durable).
    Rename {
        /// Current name.
        from: String,
        /// New name.
        to: String,
        /// Replace `to` if it exists.
        replace: bool,
    },
    /// Create `to` as a copy of the whole file `from` (`to` must not exist). With a
    /// reference method on a store whose device remaps (an FTL on flash), whole blocks
    /// are remapped and no data moves; sharing makes the copy point at the source's
    /// blocks.
    Copy {
        /// The source file.
        from: String,
        /// The new file.
        to: String,
        /// By sharing, by reference (or fail, or fall back to bytes) or by bytes.
        method: CopyMethod,
    },
    /// Change what a user set of a file's attributes (`chmod`, `chown`, `touch -d`):
    /// each attribute kept, set or cleared. Committed by the next flush, like a truncate.
    /// A mode with bits outside `0o7777` (a file type, say) is refused, changing nothing.
    SetAttributes {
        /// The file.
        name: String,
        /// Permission bits (`0o7777` at most).
        mode: AttributeChange<u32>,
        /// Owner ids.
        owner: AttributeChange<FileOwner>,
        /// Wall-clock modification time, ns since the Unix epoch.
        modified_wall_ns: AttributeChange<i64>,
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

impl<P: Payloads> Command<P> {
    /// The command's kind.
    pub fn kind(&self) -> CommandKind {
        match self {
            Command::Create { .. } => CommandKind::Create,
            Command::Write { .. } => CommandKind::Write,
            Command::Read { .. } => CommandKind::Read,
            Command::ReadFiles { .. } => CommandKind::ReadFiles,
            Command::Truncate { .. } => CommandKind::Truncate,
            Command::Delete { .. } => CommandKind::Delete,
            Command::Rename { replace, .. } => CommandKind::rename(*replace),
            Command::Copy { .. } => CommandKind::Copy,
            Command::SetAttributes { .. } => CommandKind::SetAttributes,
            Command::Stat { .. } => CommandKind::Stat,
            Command::List => CommandKind::List,
            Command::Stats => CommandKind::Stats,
            Command::Flush => CommandKind::Flush,
            Command::Check => CommandKind::Check,
        }
    }

    /// The same command over other payloads, a write's bytes mapped by `map` (the only
    /// payload a command carries); `map` may refuse (a write slot not granted).
    pub fn map_write<Q: Payloads, E>(
        self,
        map: impl FnOnce(P::Write) -> Result<Q::Write, E>,
    ) -> Result<Command<Q>, E> {
        Ok(match self {
            Command::Create { name } => Command::Create { name },
            Command::Write {
                name,
                offset_bytes,
                data,
            } => Command::Write {
                name,
                offset_bytes,
                data: map(data)?,
            },
            Command::Read {
                name,
                offset_bytes,
                length_bytes,
            } => Command::Read {
                name,
                offset_bytes,
                length_bytes,
            },
            Command::ReadFiles { names } => Command::ReadFiles { names },
            Command::Truncate { name, size_bytes } => Command::Truncate { name, size_bytes },
            Command::Delete { name } => Command::Delete { name },
            Command::Rename { from, to, replace } => Command::Rename { from, to, replace },
            Command::Copy { from, to, method } => Command::Copy { from, to, method },
            Command::SetAttributes {
                name,
                mode,
                owner,
                modified_wall_ns,
            } => Command::SetAttributes {
                name,
                mode,
                owner,
                modified_wall_ns,
            },
            Command::Stat { name } => Command::Stat { name },
            Command::List => Command::List,
            Command::Stats => Command::Stats,
            Command::Flush => Command::Flush,
            Command::Check => Command::Check,
        })
    }
}

/// The answer to a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply<P: Payloads> {
    /// The command needed no other answer (create, truncate, delete, rename, set
    /// attributes, flush).
    Done,
    /// A write completed; the engine hands its buffer back for reuse, the wire says how
    /// many bytes were written.
    Written {
        /// The write's payload handed back.
        buffer: P::Written,
    },
    /// Data of a read.
    Data(P::Read),
    /// Data of a [`Command::ReadFiles`]: each file's whole data or its own error, in the
    /// order of the command's names.
    Files(Vec<Result<P::Read, P::FileError>>),
    /// One file.
    Stat(FileStat),
    /// Every file, by name.
    List(Vec<FileStat>),
    /// Space and counts.
    Stats(FsStats),
    /// What the check found.
    Check(P::Check),
    /// What a copy did.
    Copied(CopyReport),
}

impl<P: Payloads> Reply<P> {
    /// The answer's name, for messages ("data", "stat", ...).
    pub fn name(&self) -> &'static str {
        match self {
            Reply::Done => "done",
            Reply::Written { .. } => "written",
            Reply::Data(_) => "data",
            Reply::Files(_) => "files",
            Reply::Stat(_) => "stat",
            Reply::List(_) => "list",
            Reply::Stats(_) => "stats",
            Reply::Check(_) => "check",
            Reply::Copied(_) => "copied",
        }
    }

    /// The same answer over other payloads: each of its payloads mapped (a read's data to
    /// a shared window, a write's buffer to its length, a check report to its summary,
    /// a file's error to its wire form).
    pub fn map_payloads<Q: Payloads>(self, map: &mut impl ReplyMap<P, Q>) -> Reply<Q> {
        match self {
            Reply::Done => Reply::Done,
            Reply::Written { buffer } => Reply::Written {
                buffer: map.written(buffer),
            },
            Reply::Data(data) => Reply::Data(map.read(data)),
            Reply::Files(files) => Reply::Files(
                files
                    .into_iter()
                    .map(|file| match file {
                        Ok(data) => Ok(map.read(data)),
                        Err(error) => Err(map.file_error(error)),
                    })
                    .collect(),
            ),
            Reply::Stat(stat) => Reply::Stat(stat),
            Reply::List(stats) => Reply::List(stats),
            Reply::Stats(stats) => Reply::Stats(stats),
            Reply::Check(report) => Reply::Check(map.check(report)),
            Reply::Copied(report) => Reply::Copied(report),
        }
    }
}

/// How [`Reply::map_payloads`] maps each payload of an answer.
pub trait ReplyMap<P: Payloads, Q: Payloads> {
    /// A completed write's payload.
    fn written(&mut self, written: P::Written) -> Q::Written;
    /// Read data (of a read, or of one file of a batch).
    fn read(&mut self, read: P::Read) -> Q::Read;
    /// One file's error in a batch.
    fn file_error(&mut self, error: P::FileError) -> Q::FileError;
    /// A check's report.
    fn check(&mut self, check: P::Check) -> Q::Check;
}
