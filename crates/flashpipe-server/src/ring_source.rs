//! A ring connection served on the engine thread (protocol version 6,
//! docs/design/27-served-path.md): the connection registers a [`RingSource`] with the
//! engine, which pops the request ring itself, and its answers go back through a
//! [`RingSink`] that pushes them into the reply ring on the engine thread too. A served
//! command then crosses two threads, the client's and the engine's.
//!
//! The source decodes frames with the socket's limits (`max_body_bytes`) and runs the
//! reading thread's checks (`connection::take_request`): a request they refuse is
//! answered from here, a bad record or frame closes this connection only. Nothing here
//! waits: a pop that finds the ring empty returns, and a frame that does not fit the
//! reply ring now (or a larger one than a single record, or the ring busy with another
//! sender) is handed to the connection's answering thread, which waits for room as on
//! the reading-thread path. That hand-off is bounded ([`deferred_capacity`]): a client
//! that lets it fill (it sends while it does not drain its replies) is taken as gone.

use std::cell::{Cell, RefCell};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Sender, TrySendError};
use flashpipe_engine::{
    Completion, CompletionSink, EngineError, InboundSource, Reply, ReplyTo, SourceState,
    Submission, Ticket,
};
use flashpipe_protocol::{
    decode_frame_keeping, encode_frame, encode_frame_into, ErrorCode, Frame, KeptBuffers,
    RemoteError, HEADER_BYTES,
};
use flashpipe_shm::ring_stream::stream_record_bytes;
use flashpipe_shm::{FrameRing, PushOutcome, RingWait};

use crate::connection::Connection;
use crate::state::Counters;

/// Frames a deferred hand-off holds beyond the connection's requests in flight (the
/// answers of requests refused without reaching the engine).
const DEFERRED_REFUSALS: usize = 64;

/// Capacity of a connection's deferred hand-off: one answer per request in flight, and
/// [`DEFERRED_REFUSALS`] more.
pub(crate) fn deferred_capacity(max_in_flight: usize) -> usize {
    max_in_flight.max(1) + DEFERRED_REFUSALS
}

thread_local! {
    /// True while this thread runs a source's poll or a sink's completion: the
    /// connection's sends must not wait here.
    static ON_ENGINE_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// True while the engine thread serves a ring source or its sink.
pub(crate) fn sending_must_not_wait() -> bool {
    ON_ENGINE_THREAD.with(Cell::get)
}

/// Marks the current thread as the engine's for the life of the guard.
struct EngineThreadMark;

impl EngineThreadMark {
    fn set() -> EngineThreadMark {
        ON_ENGINE_THREAD.with(|mark| mark.set(true));
        EngineThreadMark
    }
}

impl Drop for EngineThreadMark {
    fn drop(&mut self) {
        ON_ENGINE_THREAD.with(|mark| mark.set(false));
    }
}

/// Capacity the engine thread's encoding buffer keeps between frames; a larger frame's
/// allocation is let go after it is sent.
const KEPT_ENCODING_BYTES: usize = 64 << 10;

thread_local! {
    /// The engine thread's encoding buffer, kept between frames.
    static ENCODED: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Encodes `frame` into this thread's kept buffer and hands the bytes to `send` (a
/// buffer of its own when the kept one is in use).
pub(crate) fn with_encoded(frame: &Frame, send: impl FnOnce(&[u8])) {
    ENCODED.with(|kept| match kept.try_borrow_mut() {
        Ok(mut bytes) => {
            bytes.clear();
            encode_frame_into(frame, &mut bytes);
            send(&bytes);
            if bytes.capacity() > KEPT_ENCODING_BYTES {
                *bytes = Vec::new();
            }
        }
        Err(_) => send(&encode_frame(frame)),
    });
}

/// Pushes an encoded frame without waiting when it fits one record and the reply ring
/// is free and has room; otherwise hands it to the answering thread. False when the
/// connection must end (the ring is corrupt or closed, or the hand-off is full).
pub(crate) fn push_or_defer(connection: &Connection, bytes: &[u8]) -> bool {
    let Some(rings) = connection.rings() else {
        return false;
    };
    if let Ok(mut ring) = rings.replies.try_lock() {
        if bytes.len() <= stream_record_bytes(&ring) {
            match ring.try_push(bytes) {
                Ok(PushOutcome::Pushed) => {
                    Counters::add(&connection.state.counters.frames_sent, 1);
                    Counters::add(&connection.state.counters.bytes_sent, bytes.len() as u64);
                    return true;
                }
                Ok(PushOutcome::Full) => {}
                Err(error) => {
                    tracing::info!(connection = connection.id, %error, "cannot push into the reply ring; closing");
                    return false;
                }
            }
        }
    }
    match connection.deferred_sender().try_send(bytes.to_vec()) {
        Ok(()) => true,
        Err(TrySendError::Full(_)) => {
            tracing::info!(
                connection = connection.id,
                "the client keeps sending but does not take its answers; closing"
            );
            false
        }
        Err(TrySendError::Disconnected(_)) => false,
    }
}

/// Names of reads the engine gave back that a sink keeps for the decoding of the next
/// reads (more are let go).
const KEPT_NAMES: usize = 64;

/// Takes a ring connection's completions on the engine thread.
pub(crate) struct RingSink {
    connection: Arc<Connection>,
    /// Names of reads the engine is done with, for the source's decoding.
    names: Mutex<Vec<String>>,
    /// Held so the answering thread lives until the engine answered everything this
    /// connection handed it (its queue ends when the last sink is dropped).
    _answers_alive: Sender<Completion>,
}

impl RingSink {
    /// Moves the names kept here onto `spare_names` (its allocation grows to the
    /// steady state once).
    fn give_names_to(&self, spare_names: &mut Vec<String>) {
        spare_names.append(&mut self.lock_names());
    }

    fn lock_names(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.names.lock().expect("no panic holding the kept names")
    }
}

impl CompletionSink for RingSink {
    fn complete(&self, ticket: Ticket, result: Result<Reply, EngineError>) {
        let _mark = EngineThreadMark::set();
        crate::replies::answer_one(&self.connection, ticket, result);
    }

    fn take_back_name(&self, name: String) {
        let mut names = self.lock_names();
        if names.len() < KEPT_NAMES {
            names.push(name);
        }
    }
}

/// The engine's view of a ring connection's request ring.
pub(crate) struct RingSource {
    connection: Arc<Connection>,
    requests: FrameRing,
    sink: Arc<RingSink>,
    /// Bytes popped and not yet cut into frames.
    pending: Vec<u8>,
    /// The last record popped (its allocation reused).
    record: Vec<u8>,
    /// What decoding keeps: the last release's handles, spare names for reads.
    kept: KeptBuffers,
}

/// What the request ring holds next.
enum Popped {
    /// A whole frame other than a release.
    Frame(Frame),
    /// A release frame, its handles in the kept buffers' `released`.
    Release,
    /// No whole frame yet.
    Nothing,
}

impl RingSource {
    /// The source of `connection`, which reads `requests`; `answers_to` is the
    /// answering thread's queue, kept open while commands are in flight.
    pub(crate) fn new(
        connection: Arc<Connection>,
        requests: FrameRing,
        answers_to: Sender<Completion>,
    ) -> RingSource {
        let sink = Arc::new(RingSink {
            connection: Arc::clone(&connection),
            names: Mutex::new(Vec::with_capacity(KEPT_NAMES)),
            _answers_alive: answers_to,
        });
        RingSource {
            connection,
            requests,
            sink,
            pending: Vec::new(),
            record: Vec::new(),
            kept: KeptBuffers::default(),
        }
    }

    /// The next whole frame popped from the ring (decoded into the kept buffers: a
    /// release's handles, a read's name into a name the sink took back); an error for a
    /// corrupt ring or a frame the checks refuse.
    fn next_frame(&mut self) -> Result<Popped, RemoteError> {
        let max_body_bytes = self.connection.state.limits.max_body_bytes;
        loop {
            if let Some(length) = frame_length(&self.pending, max_body_bytes)? {
                if self.pending.len() >= length {
                    if self.kept.spare_names.is_empty() {
                        self.sink.give_names_to(&mut self.kept.spare_names);
                    }
                    let frame = decode_frame_keeping(&self.pending[..length], &mut self.kept)
                        .map_err(|error| malformed(error.to_string()))?;
                    self.pending.drain(..length);
                    return Ok(frame.map_or(Popped::Release, Popped::Frame));
                }
            }
            let came = self
                .requests
                .pop_into(RingWait::NoWait, &mut self.record)
                .map_err(|error| malformed(error.to_string()))?;
            if !came {
                return Ok(Popped::Nothing);
            }
            self.pending.extend_from_slice(&self.record);
        }
    }
}

/// The length of the frame at the start of `bytes` (header and body), once its header
/// is there; an error when the header is bad or announces a body over the limit.
fn frame_length(bytes: &[u8], max_body_bytes: u32) -> Result<Option<usize>, RemoteError> {
    let Some(header) = bytes.first_chunk::<HEADER_BYTES>() else {
        return Ok(None);
    };
    let header = flashpipe_protocol::decode_header(header, max_body_bytes)
        .map_err(|error| malformed(error.to_string()))?;
    Ok(Some(HEADER_BYTES + header.body_length_bytes as usize))
}

fn malformed(message: String) -> RemoteError {
    RemoteError::new(ErrorCode::MalformedFrame, message)
}

impl InboundSource for RingSource {
    fn poll(&mut self, budget: usize, submit: &mut dyn FnMut(Submission)) -> SourceState {
        let _mark = EngineThreadMark::set();
        if self.connection.is_peer_gone() {
            return SourceState::Closed;
        }
        let mut drained = false;
        // Frames answered here count too, so one poll stays bounded whatever they are.
        for _ in 0..budget {
            let frame = match self.next_frame() {
                Ok(Popped::Frame(frame)) => frame,
                Ok(Popped::Release) => {
                    crate::connection::take_release(&self.connection, &self.kept.released);
                    continue;
                }
                Ok(Popped::Nothing) => {
                    drained = true;
                    break;
                }
                Err(error) => {
                    Counters::add(&self.connection.state.counters.malformed_frames, 1);
                    crate::connection::close_with(&self.connection, error);
                    return SourceState::Closed;
                }
            };
            let sink = &self.sink;
            let mut to_engine = |ticket, command, destination| {
                submit(Submission {
                    ticket,
                    command,
                    reply_to: ReplyTo::Sink(sink.clone()),
                    destination,
                    write_checksums: None,
                });
                Ok(())
            };
            if !crate::connection::take_frame(&self.connection, frame, &mut to_engine) {
                return SourceState::Closed;
            }
        }
        if drained && self.requests.is_closed() {
            return SourceState::Closed;
        }
        SourceState::Open
    }
}
