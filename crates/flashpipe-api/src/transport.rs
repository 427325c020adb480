//! [`Transport`]: how a command reaches an engine and its answer comes back, whether the
//! engine runs in this process (its thread, or stepped by the caller) or behind a
//! server's socket or rings. [`TransportExt`] gives every transport one method per
//! command, written once here.
//!
//! Everything is generic and monomorphised: no `dyn`, no boxing on the path of a
//! command, so a transport costs what its own submit and wait cost.

use crate::command::{Command, FileResult, Payloads, Reply};
use crate::error::{ApiError, ErrorCode};
use crate::kind::CommandKind;
use crate::values::{AttributeChange, CopyMethod, CopyReport, FileOwner, FileStat, FsStats};

/// Names one submitted command; its completion carries it back.
pub type Ticket = u64;

/// One completion: the command's ticket and its outcome.
pub type Completion<P, E> = (Ticket, Result<Reply<P>, E>);

/// What one command may ask of a transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest read one command may ask for.
    pub max_read_bytes: u64,
    /// The largest write one command may carry.
    pub max_write_bytes: u64,
    /// Most files one [`Command::ReadFiles`] may name.
    pub max_read_files_count: usize,
    /// Most bytes (the files' sizes added up) one [`Command::ReadFiles`] may ask for.
    pub max_read_files_bytes: u64,
    /// Most commands one client may have outstanding.
    pub max_in_flight: usize,
}

/// An answer of the wrong kind for the command asked (a server that breaks the
/// protocol; the in-process engine never does).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a {asked} command was answered with a {answered} reply; the server does not follow the protocol")]
pub struct MismatchedReply {
    /// The command's kind name.
    pub asked: &'static str,
    /// The answer's name.
    pub answered: &'static str,
}

impl From<MismatchedReply> for ApiError {
    fn from(error: MismatchedReply) -> ApiError {
        ApiError::new(ErrorCode::Internal, error.to_string())
    }
}

/// An error that has an [`ErrorCode`] (so generic code can tell, say, a file that exists
/// from any other failure).
pub trait CodedError {
    /// The error's code.
    fn code(&self) -> ErrorCode;
}

impl CodedError for ApiError {
    fn code(&self) -> ErrorCode {
        self.code
    }
}

/// A way to an engine: submit commands, wait for their completions in any order.
pub trait Transport {
    /// The payloads commands and answers carry on this transport.
    type P: Payloads;
    /// How a command, or the transport itself, fails.
    type Error: From<MismatchedReply> + CodedError;

    /// Submits `command` (waiting while the engine's queue is full); its ticket.
    fn submit(&mut self, command: Command<Self::P>) -> Result<Ticket, Self::Error>;

    /// Waits for the next completion of this client's commands, in any order (one kept
    /// back by [`Transport::wait_for`] first).
    fn wait(&mut self) -> Result<Completion<Self::P, Self::Error>, Self::Error>;

    /// Waits for the completion of `ticket`, keeping the others that arrive first for
    /// [`Transport::wait`].
    fn wait_for(&mut self, ticket: Ticket) -> Result<Reply<Self::P>, Self::Error>;

    /// A write payload of `length_bytes` to fill and hand to [`Command::Write`] (an
    /// engine buffer, an inline buffer, or a slot of the client's write pool).
    fn write_buffer(
        &mut self,
        length_bytes: usize,
    ) -> Result<<Self::P as Payloads>::Write, Self::Error>;

    /// What one command may ask.
    fn limits(&self) -> Limits;

    /// Commands submitted and not yet reaped.
    fn outstanding(&self) -> usize;
}

fn mismatched<P: Payloads>(asked: CommandKind, reply: &Reply<P>) -> MismatchedReply {
    MismatchedReply {
        asked: asked.name(),
        answered: reply.name(),
    }
}

/// One method per command over any [`Transport`], each submitting its command and
/// waiting for its own answer.
pub trait TransportExt: Transport {
    /// Submits `command` and waits for its own completion (others are kept for later).
    fn call(&mut self, command: Command<Self::P>) -> Result<Reply<Self::P>, Self::Error> {
        let ticket = self.submit(command)?;
        self.wait_for(ticket)
    }

    /// Calls a command answered [`Reply::Done`].
    fn call_done(&mut self, command: Command<Self::P>) -> Result<(), Self::Error> {
        let kind = command.kind();
        match self.call(command)? {
            Reply::Done => Ok(()),
            other => Err(mismatched(kind, &other).into()),
        }
    }

    /// Creates an empty file.
    fn create(&mut self, name: &str) -> Result<(), Self::Error> {
        self.call_done(Command::Create {
            name: name.to_string(),
        })
    }

    /// Writes `data` at `offset_bytes` of file `name`; what the write hands back.
    fn write(
        &mut self,
        name: &str,
        offset_bytes: u64,
        data: <Self::P as Payloads>::Write,
    ) -> Result<<Self::P as Payloads>::Written, Self::Error> {
        match self.call(Command::Write {
            name: name.to_string(),
            offset_bytes,
            data,
        })? {
            Reply::Written { buffer } => Ok(buffer),
            other => Err(mismatched(CommandKind::Write, &other).into()),
        }
    }

    /// Reads `length_bytes` at `offset_bytes` of file `name`.
    fn read(
        &mut self,
        name: &str,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<<Self::P as Payloads>::Read, Self::Error> {
        match self.call(Command::Read {
            name: name.to_string(),
            offset_bytes,
            length_bytes,
        })? {
            Reply::Data(data) => Ok(data),
            other => Err(mismatched(CommandKind::Read, &other).into()),
        }
    }

    /// Reads the files `names` whole: each file's data or its own error, in order.
    fn read_files(&mut self, names: Vec<String>) -> Result<Vec<FileResult<Self::P>>, Self::Error> {
        match self.call(Command::ReadFiles { names })? {
            Reply::Files(files) => Ok(files),
            other => Err(mismatched(CommandKind::ReadFiles, &other).into()),
        }
    }

    /// Sets file `name`'s size.
    fn truncate(&mut self, name: &str, size_bytes: u64) -> Result<(), Self::Error> {
        self.call_done(Command::Truncate {
            name: name.to_string(),
            size_bytes,
        })
    }

    /// Changes what a user set of file `name`'s attributes: each kept, set or cleared.
    fn set_attributes(
        &mut self,
        name: &str,
        mode: AttributeChange<u32>,
        owner: AttributeChange<FileOwner>,
        modified_wall_ns: AttributeChange<i64>,
    ) -> Result<(), Self::Error> {
        self.call_done(Command::SetAttributes {
            name: name.to_string(),
            mode,
            owner,
            modified_wall_ns,
        })
    }

    /// Deletes file `name`.
    fn delete(&mut self, name: &str) -> Result<(), Self::Error> {
        self.call_done(Command::Delete {
            name: name.to_string(),
        })
    }

    /// Renames `from` to `to`, which must not exist.
    fn rename(&mut self, from: &str, to: &str) -> Result<(), Self::Error> {
        self.call_done(Command::Rename {
            from: from.to_string(),
            to: to.to_string(),
            replace: false,
        })
    }

    /// Renames `from` to `to`, replacing `to` if it exists.
    fn rename_replacing(&mut self, from: &str, to: &str) -> Result<(), Self::Error> {
        self.call_done(Command::Rename {
            from: from.to_string(),
            to: to.to_string(),
            replace: true,
        })
    }

    /// Copies the whole file `from` to the new file `to`.
    fn copy(
        &mut self,
        from: &str,
        to: &str,
        method: CopyMethod,
    ) -> Result<CopyReport, Self::Error> {
        match self.call(Command::Copy {
            from: from.to_string(),
            to: to.to_string(),
            method,
        })? {
            Reply::Copied(report) => Ok(report),
            other => Err(mismatched(CommandKind::Copy, &other).into()),
        }
    }

    /// Facts about file `name`.
    fn stat(&mut self, name: &str) -> Result<FileStat, Self::Error> {
        match self.call(Command::Stat {
            name: name.to_string(),
        })? {
            Reply::Stat(stat) => Ok(stat),
            other => Err(mismatched(CommandKind::Stat, &other).into()),
        }
    }

    /// Every file.
    fn list(&mut self) -> Result<Vec<FileStat>, Self::Error> {
        match self.call(Command::List)? {
            Reply::List(stats) => Ok(stats),
            other => Err(mismatched(CommandKind::List, &other).into()),
        }
    }

    /// Space and counts.
    fn stats(&mut self) -> Result<FsStats, Self::Error> {
        match self.call(Command::Stats)? {
            Reply::Stats(stats) => Ok(stats),
            other => Err(mismatched(CommandKind::Stats, &other).into()),
        }
    }

    /// Makes every change so far durable.
    fn flush(&mut self) -> Result<(), Self::Error> {
        self.call_done(Command::Flush)
    }

    /// Checks the durable image.
    fn check(&mut self) -> Result<<Self::P as Payloads>::Check, Self::Error> {
        match self.call(Command::Check)? {
            Reply::Check(report) => Ok(report),
            other => Err(mismatched(CommandKind::Check, &other).into()),
        }
    }
}

impl<T: Transport + ?Sized> TransportExt for T {}
