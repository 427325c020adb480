//! Submitting commands with a reply queue of the caller's choosing.
//!
//! An [`EngineClient`](crate::EngineClient) owns its reply queue, so one thread submits
//! and waits. A server connection wants one thread reading requests from its socket and
//! submitting them, and another sending the answers back as they complete: a
//! [`CommandSender`] submits under tickets the caller picks, answered on a queue the
//! caller owns. The caller keeps at most the queue's capacity of commands outstanding
//! (the engine answers with a non-blocking send and treats a full queue as a broken
//! promise).

use std::os::fd::BorrowedFd;

use crossbeam_channel::Sender;
use flashpipe_device::IoBuf;

use crate::client::{Completion, Ticket};
use crate::command::{Command, EngineError};
use crate::engine::{EngineConfig, Envelope, Message};
use crate::inbound::{InboundSource, ReplyTo, Submission};
use crate::inputs::Bell;
use crate::writes::checksums_for;

/// Submits commands to the engine, each answered on a queue the caller names.
#[derive(Clone)]
pub struct CommandSender {
    messages: Sender<Message>,
    bell: Bell,
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
        bell: Bell,
        config: EngineConfig,
        block_bytes: u64,
    ) -> CommandSender {
        CommandSender {
            messages,
            bell,
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
        self.submit_to(ticket, command, ReplyTo::Queue(reply_to.clone()))
    }

    /// Submits `command` under `ticket`, waiting while the engine's queue is full; its
    /// completion goes where `reply_to` says.
    pub fn submit_to(
        &self,
        ticket: Ticket,
        command: Command,
        reply_to: ReplyTo,
    ) -> Result<(), EngineError> {
        self.submit_whole(Envelope {
            ticket,
            command,
            reply_to,
            destination: None,
            write_checksums: None,
        })
    }

    /// Hands the engine a source to poll on its own thread from now on
    /// ([`crate::inbound`]). The engine drops it when it closes, overruns its budget, or
    /// when the engine takes no sources ([`CommandSender::takes_sources`] false) or has
    /// as many as it may: its owner learns that from its `Drop`.
    pub fn add_source(&self, source: Box<dyn InboundSource>) -> Result<(), EngineError> {
        self.send(Message::AddSource(source))
    }

    /// True when the engine parks on a doorbell and so takes inbound sources.
    pub fn takes_sources(&self) -> bool {
        self.bell.is_present()
    }

    /// Wakes the engine if it is parked: a source's owner rings after it changed what
    /// the source's poll sees (closed it), a ring client after each push (through its
    /// own mapping of the doorbell, [`CommandSender::with_doorbell_fd`]).
    pub fn ring(&self) {
        self.bell.ring();
    }

    /// Runs `with` on the descriptor of the engine's doorbell page (to pass to a ring
    /// client); `None` when the engine has no doorbell.
    pub fn with_doorbell_fd<T>(&self, with: impl FnOnce(BorrowedFd<'_>) -> T) -> Option<T> {
        self.bell.with_fd(with)
    }

    fn send(&self, message: Message) -> Result<(), EngineError> {
        self.messages
            .send(message)
            .map_err(|_| EngineError::Stopped)?;
        self.bell.ring();
        Ok(())
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
        self.submit_whole(Envelope {
            ticket,
            command,
            reply_to: ReplyTo::Queue(reply_to.clone()),
            destination: Some(destination),
            write_checksums: None,
        })
    }

    /// Submits `submission` as it is (its answer where its `reply_to` says, a read's
    /// bytes into its `destination` when it has one, as
    /// [`CommandSender::submit_read_into`] says), waiting while the engine's queue is
    /// full. A write that comes without its blocks' checksums gets them here, on the
    /// calling thread ([`checksums_for`]), so the engine thread does not compute them.
    pub fn submit_whole(&self, mut submission: Submission) -> Result<(), EngineError> {
        if submission.write_checksums.is_none() {
            submission.write_checksums = checksums_for(
                &submission.command,
                self.config.write_path,
                self.block_bytes,
            );
        }
        self.send(Message::Command(submission))
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
