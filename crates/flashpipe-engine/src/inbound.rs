//! Inbound sources: inputs the engine thread polls itself, beside its command queue
//! (docs/design/27-served-path.md).
//!
//! A server connection whose requests arrive in a shared-memory ring need not hand them
//! to the engine through a reading thread of its own: it registers an [`InboundSource`]
//! ([`crate::CommandSender::add_source`]) and the engine thread pops the requests itself,
//! so a served command crosses two threads (the client's and the engine's), as an
//! in-process one does. The engine does not learn the protocol: the source decodes its
//! frames, runs its checks and hands the engine plain [`Submission`]s; its answers go
//! where each submission says ([`ReplyTo`]), possibly a [`CompletionSink`] that answers on
//! the engine thread too.
//!
//! What a source cannot do to the engine: take more than its turn. Each poll is given a
//! budget ([`SOURCE_BUDGET`]); a source that hands over more is answered
//! [`EngineError::SourceOverBudget`] for the extra and dropped. Sources are polled round
//! robin from a start that moves by one every round, and the command queue takes its
//! turn beside them (up to [`QUEUE_BUDGET`] messages a round, in at least one round of
//! [`crate::QUEUE_LOOK_EVERY`] while the sources have work, in every round when they
//! have none), so no input starves another. At most [`MAX_INBOUND_SOURCES`] are registered at once; one more is dropped
//! at once. Dropping a source is how the engine lets it go (it has closed, overran, or
//! there was no room): its owner learns it from its `Drop`.

use std::collections::VecDeque;
use std::sync::Arc;

use crossbeam_channel::{Sender, TrySendError};
use flashpipe_device::IoBuf;
use flashpipe_fs::BlockChecksums;

use crate::client::{Completion, Ticket};
use crate::command::{Command, EngineError, Reply};
use crate::engine::Message;

/// Most commands one source may hand over in one poll.
pub const SOURCE_BUDGET: usize = 16;

/// Most messages taken from the command queue in one round, beside the sources' turns.
pub const QUEUE_BUDGET: usize = 16;

/// Most inbound sources registered with one engine at once.
pub const MAX_INBOUND_SOURCES: usize = 4096;

/// Where the engine answers one command.
#[derive(Clone)]
pub enum ReplyTo {
    /// A queue the submitter reaps (an [`crate::EngineClient`], a connection's
    /// answering thread); it must have room for every command outstanding on it.
    Queue(Sender<Completion>),
    /// A sink called on the engine thread with each completion.
    Sink(Arc<dyn CompletionSink>),
}

impl ReplyTo {
    /// Hands one completion over; a queue whose reaper went away is ignored.
    pub(crate) fn answer(&self, ticket: Ticket, result: Result<Reply, EngineError>) {
        match self {
            ReplyTo::Queue(queue) => match queue.try_send((ticket, result)) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                Err(TrySendError::Full(_)) => {
                    panic!("client reply queue overflowed its outstanding limit")
                }
            },
            ReplyTo::Sink(sink) => sink.complete(ticket, result),
        }
    }
}

/// Takes completions on the engine thread: it must not block (a full outlet defers the
/// answer to another thread) and must be quick (the engine serves nothing meanwhile).
pub trait CompletionSink: Send + Sync {
    /// The command submitted under `ticket` finished with `result`.
    fn complete(&self, ticket: Ticket, result: Result<Reply, EngineError>);

    /// A read's file name, once the engine is done with it (its file opened, its read
    /// started or answered): a sink whose source decodes names may keep the allocation
    /// for the next read's. Dropped by default.
    fn take_back_name(&self, name: String) {
        drop(name);
    }
}

/// A command handed to the engine, with where to answer it.
pub struct Submission {
    /// The submitter's name for the command; its completion carries it back.
    pub ticket: Ticket,
    /// What to do.
    pub command: Command,
    /// Where the answer goes.
    pub reply_to: ReplyTo,
    /// Where a read's bytes go instead of a pool buffer (a client's region, mapped by a
    /// server: [`crate::submitter::CommandSender::submit_read_into`]); `None` for every
    /// other command.
    pub destination: Option<IoBuf>,
    /// A write's whole blocks' checksums computed by the submitting thread (a client's,
    /// a server connection's), so the engine thread does not pass over the bytes a
    /// second time; `None` for every other command, and for a write whose blocks the
    /// engine checksums itself. The engine uses them only when
    /// they describe the write's buffer on its block size.
    pub write_checksums: Option<BlockChecksums>,
}

/// Whether a source goes on after a poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceState {
    /// Poll it again.
    Open,
    /// It has ended: the engine drops it.
    Closed,
}

/// An input the engine thread polls itself (a ring connection's request ring).
pub trait InboundSource: Send {
    /// Takes at most `budget` commands that are ready now, without waiting, handing each
    /// to `submit` in order; `Closed` once the source has ended (its peer gone, a broken
    /// record). Requests it answers itself (refused by its checks) do not count.
    fn poll(&mut self, budget: usize, submit: &mut dyn FnMut(Submission)) -> SourceState;
}

/// The sources registered with one engine, polled round robin.
#[derive(Default)]
pub(crate) struct Sources {
    list: Vec<Box<dyn InboundSource>>,
    start: usize,
    /// Which sources of the round to drop, kept between rounds (a round allocates
    /// nothing once it has seen as many sources).
    dropped: Vec<bool>,
}

impl Sources {
    /// Registers `source`; false (and it is dropped) when [`MAX_INBOUND_SOURCES`] are
    /// registered already.
    pub(crate) fn add(&mut self, source: Box<dyn InboundSource>) -> bool {
        if self.list.len() >= MAX_INBOUND_SOURCES {
            return false;
        }
        self.list.push(source);
        true
    }

    /// Sources registered now.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// Polls every source once, from a start that moves by one each round, queueing
    /// what they hand over on `pending`; drops the sources that closed or overran.
    pub(crate) fn poll_round(&mut self, pending: &mut VecDeque<Message>) {
        let count = self.list.len();
        if count == 0 {
            return;
        }
        self.dropped.clear();
        self.dropped.resize(count, false);
        let mut any_dropped = false;
        for step in 0..count {
            let at = (self.start + step) % count;
            let drop_it = !poll_one(&mut *self.list[at], pending);
            self.dropped[at] = drop_it;
            any_dropped |= drop_it;
        }
        self.start = (self.start + 1) % count;
        if any_dropped {
            let mut flags = self.dropped.iter();
            self.list
                .retain(|_| !flags.next().copied().unwrap_or(false));
            self.start = 0;
        }
    }
}

/// Polls one source with its budget; false when it must be dropped (it closed, or it
/// handed over more than its budget: the extra commands are answered with an error).
fn poll_one(source: &mut dyn InboundSource, pending: &mut VecDeque<Message>) -> bool {
    let mut taken = 0usize;
    let state = source.poll(SOURCE_BUDGET, &mut |submission: Submission| {
        taken += 1;
        if taken > SOURCE_BUDGET {
            let error = EngineError::SourceOverBudget {
                budget: SOURCE_BUDGET,
            };
            submission.reply_to.answer(submission.ticket, Err(error));
        } else {
            pending.push_back(Message::Command(submission));
        }
    });
    state == SourceState::Open && taken <= SOURCE_BUDGET
}

#[cfg(test)]
#[path = "inbound_tests.rs"]
mod tests;
