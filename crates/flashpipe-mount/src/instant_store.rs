//! The mount's tests' transport: [`Instant`] answers each command the moment it is
//! submitted with what its [`Answers`] store says, keeps the answers in order, and hands
//! them back in order or by ticket, with limits of 1 MiB reads and writes and 8 commands
//! in flight. A test store then writes only what it answers.

use std::collections::VecDeque;

use flashpipe_api::{
    ApiError, Command, Completion, ErrorCode, Limits, Reply, Ticket, Transport, VecPayloads,
};

/// Bytes of the largest read and write.
const MIB: u64 = 1 << 20;

/// A test store: the answer to one command.
pub(crate) trait Answers {
    /// Answers `command`.
    fn answer(&mut self, command: Command<VecPayloads>) -> Result<Reply<VecPayloads>, ApiError>;
}

/// A transport over a test store (module doc).
pub(crate) struct Instant<A> {
    /// The store.
    pub store: A,
    answers: VecDeque<Completion<VecPayloads, ApiError>>,
    next_ticket: Ticket,
}

impl<A> Instant<A> {
    /// A transport over `store`, nothing outstanding.
    pub fn new(store: A) -> Instant<A> {
        Instant {
            store,
            answers: VecDeque::new(),
            next_ticket: 1,
        }
    }
}

impl<A: Answers> Transport for Instant<A> {
    type P = VecPayloads;
    type Error = ApiError;

    fn submit(&mut self, command: Command<VecPayloads>) -> Result<Ticket, ApiError> {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        let answer = self.store.answer(command);
        self.answers.push_back((ticket, answer));
        Ok(ticket)
    }

    fn wait(&mut self) -> Result<Completion<VecPayloads, ApiError>, ApiError> {
        self.answers
            .pop_front()
            .ok_or_else(|| ApiError::new(ErrorCode::EngineBusy, "nothing outstanding"))
    }

    fn wait_for(&mut self, ticket: Ticket) -> Result<Reply<VecPayloads>, ApiError> {
        let at = self
            .answers
            .iter()
            .position(|(id, _)| *id == ticket)
            .ok_or_else(|| ApiError::new(ErrorCode::EngineBusy, "no such ticket"))?;
        self.answers.remove(at).expect("found").1
    }

    fn write_buffer(&mut self, length_bytes: usize) -> Result<Vec<u8>, ApiError> {
        Ok(vec![0; length_bytes])
    }

    fn limits(&self) -> Limits {
        Limits {
            max_read_bytes: MIB,
            max_write_bytes: MIB,
            max_read_files_count: 4,
            max_read_files_bytes: MIB,
            max_in_flight: 8,
        }
    }

    fn outstanding(&self) -> usize {
        self.answers.len()
    }
}
