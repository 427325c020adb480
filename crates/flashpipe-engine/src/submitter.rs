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

use crate::client::{Completion, Ticket};
use crate::command::{Command, EngineError};
use crate::engine::{EngineConfig, Envelope, Message};
use crate::inbound::{InboundSource, ReplyTo};
use crate::inputs::Bell;

/// Submits commands to the engine, each answered on a queue the caller names.
#[derive(Clone)]
pub struct CommandSender {
    messages: Sender<Message>,
    bell: Bell,
    config: EngineConfig,
}

impl CommandSender {
    pub(crate) fn new(
        messages: Sender<Message>,
        bell: Bell,
        config: EngineConfig,
    ) -> CommandSender {
        CommandSender {
            messages,
            bell,
            config,
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
        self.send(Message::Command(Envelope {
            ticket,
            command,
            reply_to,
        }))
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

    /// How the engine was started (its read limits).
    pub fn config(&self) -> EngineConfig {
        self.config
    }
}
