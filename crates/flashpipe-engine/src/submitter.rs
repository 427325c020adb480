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

use crate::client::{Completion, Ticket};
use crate::command::{Command, EngineError};
use crate::engine::{EngineConfig, Envelope, Message};

/// Submits commands to the engine, each answered on a queue the caller names.
#[derive(Clone)]
pub struct CommandSender {
    messages: Sender<Message>,
    config: EngineConfig,
}

impl CommandSender {
    pub(crate) fn new(messages: Sender<Message>, config: EngineConfig) -> CommandSender {
        CommandSender { messages, config }
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
            }))
            .map_err(|_| EngineError::Stopped)
    }

    /// How the engine was started (its read limits).
    pub fn config(&self) -> EngineConfig {
        self.config
    }
}
