//! A client of the engine: submits commands through the engine's bounded queue and
//! reaps its own completions; a [`Transport`], so the command set's methods
//! ([`flashpipe_api::TransportExt`]) and file streams ([`flashpipe_api::write_stream`],
//! [`flashpipe_api::read_stream`]) work over it.
//!
//! Waiting for a completion spins, then parks, as the engine's configuration says
//! ([`crate::handoff`]); [`EngineClient::submit_all`] and
//! [`EngineClient::wait_completions`] hand several commands over and take several
//! completions back per call.

use std::collections::VecDeque;

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};
use flashpipe_api::{Limits, Transport};
use flashpipe_device::IoBuf;

use crate::command::{Command, EngineError, Local, Reply};
use crate::engine::{EngineConfig, Envelope, Message};
use crate::handoff::{self, WaitCounts};
use crate::inbound::ReplyTo;
use crate::inputs::Bell;
use crate::writes::checksums_for;

/// A ticket names one submitted command; its completion carries it back.
pub type Ticket = flashpipe_api::Ticket;

/// One client's connection to the engine.
pub struct EngineClient {
    messages: Sender<Message>,
    bell: Bell,
    replies_sender: Sender<(Ticket, Result<Reply, EngineError>)>,
    replies: Receiver<(Ticket, Result<Reply, EngineError>)>,
    stashed: VecDeque<(Ticket, Result<Reply, EngineError>)>,
    next_ticket: Ticket,
    outstanding: usize,
    outstanding_limit: usize,
    config: EngineConfig,
    block_bytes: u64,
    reply_waits: WaitCounts,
}

/// One completion: the command's ticket and its outcome.
pub type Completion = (Ticket, Result<Reply, EngineError>);

impl EngineClient {
    pub(crate) fn new(
        messages: Sender<Message>,
        bell: Bell,
        outstanding_limit: usize,
        config: EngineConfig,
        block_bytes: u64,
    ) -> EngineClient {
        let outstanding_limit = outstanding_limit.max(1);
        let (replies_sender, replies) = bounded(outstanding_limit);
        EngineClient {
            messages,
            bell,
            replies_sender,
            replies,
            stashed: VecDeque::new(),
            next_ticket: 1,
            outstanding: 0,
            outstanding_limit,
            config,
            block_bytes,
            reply_waits: WaitCounts::default(),
        }
    }

    /// How this client's waits for completions ended so far.
    pub fn reply_waits(&self) -> WaitCounts {
        self.reply_waits
    }

    /// Commands submitted and not yet reaped.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// The largest read one command may ask for.
    pub fn max_read_bytes(&self) -> u64 {
        self.config.max_read_bytes as u64
    }

    /// Most files one [`Command::ReadFiles`] may name.
    pub fn max_read_files_count(&self) -> usize {
        crate::command::READ_FILES_MAX_COUNT
    }

    /// Most bytes (file sizes added up) one [`Command::ReadFiles`] may ask for.
    pub fn max_read_files_bytes(&self) -> u64 {
        crate::command::read_files_max_bytes(self.max_read_bytes())
    }

    /// Submits a command, waiting while the engine's queue is full (back-pressure).
    pub fn submit(&mut self, command: Command) -> Result<Ticket, EngineError> {
        let envelope = self.envelope(command)?;
        self.messages
            .send(Message::Command(envelope))
            .map_err(|_| EngineError::Stopped)?;
        self.bell.ring();
        Ok(self.accept())
    }

    /// Submits a command or fails at once when the engine's queue is full.
    pub fn try_submit(&mut self, command: Command) -> Result<Ticket, EngineError> {
        let envelope = self.envelope(command)?;
        match self.messages.try_send(Message::Command(envelope)) {
            Ok(()) => {
                self.bell.ring();
                Ok(self.accept())
            }
            Err(TrySendError::Full(_)) => Err(EngineError::QueueFull {
                capacity: self.config.command_queue_capacity,
            }),
            Err(TrySendError::Disconnected(_)) => Err(EngineError::Stopped),
        }
    }

    /// Submits every command of `commands` in order (waiting while the engine's queue is
    /// full), their tickets in the same order. Refused whole, before any is sent, when
    /// they would take this client past its outstanding limit.
    pub fn submit_all(&mut self, commands: Vec<Command>) -> Result<Vec<Ticket>, EngineError> {
        if self.outstanding + commands.len() > self.outstanding_limit {
            return Err(EngineError::TooManyOutstanding {
                limit: self.outstanding_limit,
            });
        }
        commands
            .into_iter()
            .map(|command| self.submit(command))
            .collect()
    }

    fn envelope(&mut self, command: Command) -> Result<Envelope, EngineError> {
        if self.outstanding >= self.outstanding_limit {
            return Err(EngineError::TooManyOutstanding {
                limit: self.outstanding_limit,
            });
        }
        let write_checksums = checksums_for(&command, self.config.write_path, self.block_bytes);
        Ok(Envelope {
            ticket: self.next_ticket,
            command,
            reply_to: ReplyTo::Queue(self.replies_sender.clone()),
            destination: None,
            write_checksums,
        })
    }

    fn accept(&mut self) -> Ticket {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.outstanding += 1;
        ticket
    }

    /// Waits for the next completion of this client's commands, in any order.
    pub fn next_completion(&mut self) -> Result<(Ticket, Result<Reply, EngineError>), EngineError> {
        if let Some(completion) = self.stashed.pop_front() {
            return Ok(completion);
        }
        if self.outstanding == 0 {
            return Err(EngineError::TooManyOutstanding { limit: 0 });
        }
        self.receive_reply()
    }

    /// Waits for at least one completion of this client's commands, then appends to
    /// `completions` every other that has arrived, without waiting again; the number
    /// appended. A burst of replies thus costs one wait at most.
    pub fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, EngineError> {
        let before = completions.len();
        completions.push(self.next_completion()?);
        while let Some(completion) = self.try_next_completion() {
            completions.push(completion);
        }
        Ok(completions.len() - before)
    }

    /// Waits for the next reply on the queue, spinning then parking as configured.
    fn receive_reply(&mut self) -> Result<Completion, EngineError> {
        let completion =
            handoff::receive(&self.replies, self.config.handoff, &mut self.reply_waits)
                .map_err(|_| EngineError::Stopped)?;
        self.outstanding -= 1;
        Ok(completion)
    }

    /// The next completion of this client's commands if one has arrived, without waiting
    /// (for clients of a [`crate::SteppedEngine`] on the same thread).
    pub fn try_next_completion(&mut self) -> Option<(Ticket, Result<Reply, EngineError>)> {
        if let Some(completion) = self.stashed.pop_front() {
            return Some(completion);
        }
        let completion = self.replies.try_recv().ok()?;
        self.outstanding -= 1;
        Some(completion)
    }

    /// Submits a command and waits for its own completion (others are kept for later).
    pub fn call(&mut self, command: Command) -> Result<Reply, EngineError> {
        let ticket = self.submit(command)?;
        self.wait_for_ticket(ticket)
    }

    fn wait_for_ticket(&mut self, ticket: Ticket) -> Result<Reply, EngineError> {
        if let Some(at) = self.stashed.iter().position(|(id, _)| *id == ticket) {
            let (_, result) = self.stashed.remove(at).expect("the position just found");
            return result;
        }
        loop {
            let completion = self.receive_reply()?;
            if completion.0 == ticket {
                return completion.1;
            }
            self.stashed.push_back(completion);
        }
    }

    /// Writes everything `source` yields into file `name` (created, or truncated if it
    /// exists), `chunk_bytes` per command with up to `in_flight` commands outstanding
    /// ([`flashpipe_api::write_stream`]). Calls `progress` with the bytes written so far.
    /// Returns the bytes written.
    pub fn write_stream(
        &mut self,
        name: &str,
        source: &mut dyn std::io::Read,
        chunk_bytes: usize,
        in_flight: usize,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64, StreamError> {
        flashpipe_api::write_stream(self, name, source, chunk_bytes, in_flight, progress)
    }

    /// Reads file `name` from its start to its end into `sink`, `chunk_bytes` per command
    /// with up to `in_flight` reads outstanding, delivering the data in order
    /// ([`flashpipe_api::read_stream`]). Calls `progress` with the bytes delivered so far.
    /// Returns the bytes delivered.
    pub fn read_stream(
        &mut self,
        name: &str,
        sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
        chunk_bytes: u64,
        in_flight: usize,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64, StreamError> {
        flashpipe_api::read_stream(self, name, sink, chunk_bytes, in_flight, progress)
    }

    /// Reads file `name` whole into memory ([`EngineClient::read_stream`] into a vector,
    /// with no progress reports).
    pub fn read_to_vec(
        &mut self,
        name: &str,
        chunk_bytes: u64,
        in_flight: usize,
    ) -> Result<Vec<u8>, StreamError> {
        let mut contents = Vec::new();
        let mut sink = |bytes: &[u8]| {
            contents.extend_from_slice(bytes);
            Ok(())
        };
        self.read_stream(name, &mut sink, chunk_bytes, in_flight, &mut |_| {})?;
        Ok(contents)
    }
}

/// The engine client is a [`Transport`]: of an engine thread, or of a [`crate::SteppedEngine`]
/// stepped by another thread (a client on the stepping thread itself reaps with
/// [`EngineClient::try_next_completion`], since a wait would block the steps it waits
/// for).
impl Transport for EngineClient {
    type P = Local;
    type Error = EngineError;

    fn submit(&mut self, command: Command) -> Result<Ticket, EngineError> {
        EngineClient::submit(self, command)
    }

    fn wait(&mut self) -> Result<Completion, EngineError> {
        self.next_completion()
    }

    fn wait_for(&mut self, ticket: Ticket) -> Result<Reply, EngineError> {
        self.wait_for_ticket(ticket)
    }

    fn write_buffer(&mut self, length_bytes: usize) -> Result<IoBuf, EngineError> {
        Ok(IoBuf::zeroed(length_bytes))
    }

    fn limits(&self) -> Limits {
        Limits {
            max_read_bytes: self.max_read_bytes(),
            max_write_bytes: u64::MAX,
            max_read_files_count: self.max_read_files_count(),
            max_read_files_bytes: self.max_read_files_bytes(),
            max_in_flight: self.outstanding_limit,
        }
    }

    fn outstanding(&self) -> usize {
        self.outstanding
    }
}

/// A streaming transfer through the engine failed: in the engine
/// ([`flashpipe_api::StreamError::Transport`]), or in the local source or sink.
pub type StreamError = flashpipe_api::StreamError<EngineError>;
