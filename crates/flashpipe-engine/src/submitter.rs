//! Submitting commands with a reply queue of the caller's choosing.
//!
//! An [`EngineClient`](crate::EngineClient) owns its reply queue, so one thread submits
//! and waits. A server connection wants one thread reading requests from its socket and
//! submitting them, and another sending the answers back as they complete: a
//! [`CommandSender`] submits under tickets the caller picks, answered on a queue the
//! caller owns. The caller keeps at most the queue's capacity of commands outstanding
//! (the engine answers with a non-blocking send and treats a full queue as a broken
//! promise).

use crossbeam_channel::Sender;
use flashpipe_device::IoBuf;

use crate::client::{Completion, Ticket};
use crate::command::{Command, EngineError};
use crate::engine::{EngineConfig, Envelope, Message};

/// Submits commands to the engine, each answered on a queue the caller names.
#[derive(Clone)]
pub struct CommandSender {
    messages: Sender<Message>,
    config: EngineConfig,
    block_bytes: u64,
}

/// A read whose bytes go into a caller's destination ([`CommandSender::submit_read_into`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadInto {
    /// The file.
    pub name: String,
    /// Where the range starts (a multiple of the block size).
    pub offset_bytes: u64,
    /// Bytes to read.
    pub length_bytes: u64,
}

impl CommandSender {
    pub(crate) fn new(
        messages: Sender<Message>,
        config: EngineConfig,
        block_bytes: u64,
    ) -> CommandSender {
        CommandSender {
            messages,
            config,
            block_bytes,
        }
    }

    /// Submits `command` under `ticket`, waiting while the engine's queue is full; its
    /// completion goes to `reply_to`, which must have room for every command the caller
    /// has outstanding on it.
    pub fn submit(
        &self,
        ticket: Ticket,
        command: Command,
        reply_to: &Sender<Completion>,
    ) -> Result<(), EngineError> {
        self.messages
            .send(Message::Command(Envelope {
                ticket,
                command,
                reply_to: reply_to.clone(),
                destination: None,
            }))
            .map_err(|_| EngineError::Stopped)
    }

    /// Submits a read of `length_bytes` of `name` at `offset_bytes` (a multiple of
    /// [`CommandSender::block_bytes`]) under `ticket`, its bytes read straight into
    /// `destination` (which must hold the length rounded up to whole blocks) instead of
    /// a pool buffer; answered as [`CommandSender::submit`] says, with read data whose
    /// buffer is `destination` (no pool slot). The read counts among the reads in flight
    /// and its blocks' checksums are verified in `destination`.
    pub fn submit_read_into(
        &self,
        ticket: Ticket,
        read: ReadInto,
        destination: IoBuf,
        reply_to: &Sender<Completion>,
    ) -> Result<(), EngineError> {
        let command = Command::Read {
            name: read.name,
            offset_bytes: read.offset_bytes,
            length_bytes: read.length_bytes,
        };
        self.messages
            .send(Message::Command(Envelope {
                ticket,
                command,
                reply_to: reply_to.clone(),
                destination: Some(destination),
            }))
            .map_err(|_| EngineError::Stopped)
    }

    /// The file system's block size: a read into a destination starts on a block and
    /// fills whole blocks.
    pub fn block_bytes(&self) -> u64 {
        self.block_bytes
    }

    /// How the engine was started (its read limits).
    pub fn config(&self) -> EngineConfig {
        self.config
    }
}
