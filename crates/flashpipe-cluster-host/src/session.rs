//! A host session: one long-lived, pipelined connection from a host to the node it is
//! attached to, carrying many tagged requests at once.
//!
//! - [`HostSession::open`] connects (hello and key proof: [`crate::handshake`]; TCP, or
//!   the node's Unix socket and rings with `link = "shm"`) and starts
//!   one reader thread, which decodes frames (every length bounded by the wire limits
//!   before anything is allocated) and hands them over a channel;
//! - [`HostSession::submit`] frames a request and writes it on the caller's thread. At
//!   most [`SessionOptions::in_flight_limit`] requests are in flight (the host's tag
//!   budget: no more than the node holds per host, so the node never answers `Busy` to
//!   this host alone); past it the request is handed back. Each request keeps its frame
//!   until its ack, so a `Busy` answer (other hosts filled the node) sends it again after
//!   [`BUSY_RETRY`];
//! - [`HostSession::poll`] reaps acks without blocking; [`HostSession::wait`] polls, spins
//!   for its wait policy's window, then blocks on the channel until an ack or the next
//!   request's deadline.
//!
//! Faults are named, never silent: when the connection drops (the node died, or closed
//! it), every request in flight is answered `Unreachable { device, hop: 0 }` at once, with
//! a [`LocalFailure`] saying what happened; a request with no ack after
//! [`SessionOptions::ack_timeout`] is answered the same way. Tags are reclaimed either
//! way; [`HostSession::counters`] counts what was sent, answered, failed and retried.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use flashpipe_base::wait::{WaitPolicy, Waiter};
use flashpipe_cluster::wire::{self, EncodeError, Frame, Message, Status, WireAck, WireLimits};
use flashpipe_flash::{CommandKind, FlashRequest};

use crate::conn::{read_frame, Inbound, ReadError};
use crate::handshake::{connect_host, host_node, HandshakeError};
use crate::host_stream::HostStream;
use crate::loaded::LoadedDescription;

/// Requests a host keeps in flight by default: the node's hold queue per host (64), so
/// its own requests alone never make the node answer `Busy`.
pub const DEFAULT_IN_FLIGHT_LIMIT: usize = 64;
/// How long a request waits for its ack by default before it is failed.
pub const DEFAULT_ACK_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request answered `Busy` waits before it is sent again.
pub const BUSY_RETRY: Duration = Duration::from_millis(1);
/// The spin window of [`HostSession::wait`] by default: a futex wake costs about 50 us
/// on this machine, a page read of the paced device about 100 us.
pub const DEFAULT_SPIN_US: u32 = 50;

/// How a session runs.
#[derive(Debug, Clone, Copy)]
pub struct SessionOptions {
    /// Requests in flight at most (at least 1).
    pub in_flight_limit: usize,
    /// How long a request may wait for its ack.
    pub ack_timeout: Duration,
    /// How [`HostSession::wait`] waits.
    pub wait: WaitPolicy,
}

impl Default for SessionOptions {
    fn default() -> SessionOptions {
        SessionOptions {
            in_flight_limit: DEFAULT_IN_FLIGHT_LIMIT,
            ack_timeout: DEFAULT_ACK_TIMEOUT,
            wait: WaitPolicy::spin_us(DEFAULT_SPIN_US),
        }
    }
}

/// What happened on the host's side when a request was failed without an ack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalFailure {
    /// The connection to the node dropped.
    ConnectionLost {
        /// The host's node.
        node: u32,
        /// Why, in words.
        reason: String,
    },
    /// No ack came within the session's ack timeout.
    TimedOut {
        /// The host's node.
        node: u32,
        /// How long the request waited.
        waited_ms: u64,
    },
}

impl std::fmt::Display for LocalFailure {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LocalFailure::ConnectionLost { node, reason } => {
                write!(
                    formatter,
                    "the connection to node {node} was lost ({reason})"
                )
            }
            LocalFailure::TimedOut { node, waited_ms } => write!(
                formatter,
                "node {node} gave no ack in {waited_ms} ms (is it overloaded or stopped?)"
            ),
        }
    }
}

/// An ack as the session hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionAck {
    /// The ack (the request's tag and host; a local failure carries `Unreachable`).
    pub ack: WireAck,
    /// The device the request was for (as sent).
    pub device: u32,
    /// Links the request crossed to its device (0 for a local failure).
    pub hops: u8,
    /// Set when the session failed the request itself.
    pub failure: Option<LocalFailure>,
}

/// Why a request was not taken.
#[derive(Debug, thiserror::Error)]
pub enum SessionSubmitError {
    /// The session has its limit of requests in flight; reap some and send again.
    #[error("{limit} requests are in flight already")]
    Full {
        /// The limit.
        limit: usize,
        /// The request, handed back.
        request: Box<FlashRequest>,
    },
    /// The tag is in flight already.
    #[error("tag {tag} is in flight already")]
    DuplicateTag {
        /// The tag.
        tag: u64,
    },
    /// The request names another host than the session's.
    #[error("the request names host {named}, but this session is host {host}")]
    OtherHost {
        /// The host named.
        named: u32,
        /// The session's host.
        host: u32,
    },
    /// The request cannot be framed.
    #[error("the request does not fit the cluster's frames: {0}")]
    Encode(#[from] EncodeError),
}

/// Counts of a session's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionCounters {
    /// Requests taken.
    pub submitted: u64,
    /// Acks the node sent for them.
    pub acked: u64,
    /// Requests the session failed itself (connection lost, timed out).
    pub failed: u64,
    /// Frames sent again after `Busy`.
    pub busy_retries: u64,
    /// Acks for no request in flight (late, after a timeout), dropped.
    pub stray_acks: u64,
}

/// What ended a blocking wait.
enum Woke {
    /// The reader handed something over.
    Message(Inbound),
    /// A deadline or a `Busy` resend is due.
    Deadline,
    /// The reader is gone.
    Gone,
}

/// A request in flight.
struct Pending {
    device: u32,
    kind: CommandKind,
    sent_at: Instant,
    frame: Vec<u8>,
}

/// A pipelined connection of one host to its node (see the module doc).
pub struct HostSession {
    host: u32,
    node: u32,
    limits: WireLimits,
    options: SessionOptions,
    stream: HostStream,
    inbound: Receiver<Inbound>,
    reader: Option<JoinHandle<()>>,
    in_flight: HashMap<u64, Pending>,
    busy: VecDeque<(Instant, u64)>,
    ready: VecDeque<SessionAck>,
    lost: Option<String>,
    counters: SessionCounters,
}

impl HostSession {
    /// Connects host `host` of the loaded cluster to its node.
    pub fn open(
        loaded: &LoadedDescription,
        host: u32,
        options: SessionOptions,
    ) -> Result<HostSession, HandshakeError> {
        assert!(options.in_flight_limit > 0, "a session sends something");
        let node = host_node(loaded, host)?;
        let mut stream = connect_host(loaded, host, node)?;
        let connection_error = |error: std::io::Error| HandshakeError::Connect {
            node,
            address: "its connection".to_string(),
            detail: error.to_string(),
        };
        stream
            .set_write_timeout(Some(options.ack_timeout))
            .map_err(connection_error)?;
        let mut reading = stream.reader(None).map_err(connection_error)?;
        let (sender, inbound) = channel();
        let limits = loaded.limits;
        let reader = std::thread::Builder::new()
            .name(format!("cluster-host-{host}"))
            .spawn(move || {
                let mut buffer = Vec::with_capacity(limits.max_frame_bytes());
                let reason = loop {
                    match read_frame(&mut reading, limits, &mut buffer) {
                        Ok(Some(frame)) => {
                            if sender.send(Inbound::Frame(frame)).is_err() {
                                return;
                            }
                        }
                        Ok(None) => break "the node closed the connection".to_string(),
                        Err(ReadError::Wire(error)) => {
                            break format!("the node sent a bad frame: {error}")
                        }
                        Err(ReadError::Io(error)) => break format!("connection failed: {error}"),
                    }
                };
                reading.shutdown();
                let _ = sender.send(Inbound::Closed(reason));
            })
            .map_err(connection_error)?;
        Ok(HostSession {
            host,
            node,
            limits,
            options,
            stream,
            inbound,
            reader: Some(reader),
            in_flight: HashMap::new(),
            busy: VecDeque::new(),
            ready: VecDeque::new(),
            lost: None,
            counters: SessionCounters::default(),
        })
    }

    /// The host.
    pub fn host(&self) -> u32 {
        self.host
    }

    /// The node the host is attached to.
    pub fn node(&self) -> u32 {
        self.node
    }

    /// Requests sent and not yet handed back as acks (answered ones waiting to be reaped
    /// count as no longer in flight).
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Acks waiting to be reaped.
    pub fn ready(&self) -> usize {
        self.ready.len()
    }

    /// Why the connection was lost, once it was.
    pub fn lost(&self) -> Option<&str> {
        self.lost.as_deref()
    }

    /// The session's counts.
    pub fn counters(&self) -> SessionCounters {
        self.counters
    }

    /// Sends `request` (its `host` must be the session's). After the connection is lost
    /// a request is taken and answered at once with the failure.
    pub fn submit(&mut self, request: FlashRequest) -> Result<(), SessionSubmitError> {
        if request.host != self.host {
            return Err(SessionSubmitError::OtherHost {
                named: request.host,
                host: self.host,
            });
        }
        if self.in_flight.contains_key(&request.tag) {
            return Err(SessionSubmitError::DuplicateTag { tag: request.tag });
        }
        if self.in_flight.len() >= self.options.in_flight_limit {
            return Err(SessionSubmitError::Full {
                limit: self.options.in_flight_limit,
                request: Box::new(request),
            });
        }
        let device = request.command.address().device;
        let kind = request.command.kind();
        let tag = request.tag;
        let frame = wire::encode(
            &Frame {
                hops: 0,
                message: Message::Request(request),
            },
            self.limits,
        )?;
        self.counters.submitted += 1;
        self.in_flight.insert(
            tag,
            Pending {
                device,
                kind,
                sent_at: Instant::now(),
                frame,
            },
        );
        self.send(tag);
        Ok(())
    }

    /// Writes the frame of `tag`; a failed write loses the connection.
    fn send(&mut self, tag: u64) {
        if self.lost.is_some() {
            self.fail_all();
            return;
        }
        let pending = self.in_flight.get(&tag).expect("a request in flight");
        if let Err(error) = self.stream.write_all(&pending.frame) {
            self.lose(format!("sending failed: {error}"));
        }
    }

    /// Moves acks that have arrived into `acks`, without blocking; returns how many.
    pub fn poll(&mut self, acks: &mut Vec<SessionAck>) -> usize {
        loop {
            match self.inbound.try_recv() {
                Ok(inbound) => self.take(inbound),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    self.lose("the connection's reader stopped".to_string());
                    break;
                }
            }
        }
        self.resend_busy();
        self.expire();
        let count = self.ready.len();
        acks.extend(self.ready.drain(..));
        count
    }

    /// Waits until at least one ack is ready and moves the ready ones into `acks`; 0
    /// only when nothing is in flight. Never longer than the ack timeout of the oldest
    /// request in flight.
    pub fn wait(&mut self, acks: &mut Vec<SessionAck>) -> usize {
        loop {
            if self.poll(acks) > 0 {
                return acks.len();
            }
            if self.in_flight.is_empty() {
                return 0;
            }
            let until = self.next_deadline();
            let inbound = &self.inbound;
            let (woke, _) = Waiter::new(self.options.wait).wait(
                || match inbound.try_recv() {
                    Ok(message) => Some(Woke::Message(message)),
                    Err(TryRecvError::Disconnected) => Some(Woke::Gone),
                    Err(TryRecvError::Empty) => None,
                },
                || {
                    let timeout = until.saturating_duration_since(Instant::now());
                    match inbound.recv_timeout(timeout) {
                        Ok(message) => Woke::Message(message),
                        Err(RecvTimeoutError::Timeout) => Woke::Deadline,
                        Err(RecvTimeoutError::Disconnected) => Woke::Gone,
                    }
                },
            );
            match woke {
                Woke::Message(inbound) => self.take(inbound),
                Woke::Deadline => {}
                Woke::Gone => self.lose("the connection's reader stopped".to_string()),
            }
        }
    }

    /// The earliest instant something must happen: a `Busy` resend or a deadline.
    fn next_deadline(&self) -> Instant {
        let timeout = self
            .in_flight
            .values()
            .map(|pending| pending.sent_at + self.options.ack_timeout)
            .min()
            .unwrap_or_else(|| Instant::now() + self.options.ack_timeout);
        match self.busy.front() {
            Some(&(due, _)) => timeout.min(due),
            None => timeout,
        }
    }

    fn take(&mut self, inbound: Inbound) {
        let frame = match inbound {
            Inbound::Frame(frame) => frame,
            Inbound::Closed(reason) => {
                self.lose(reason);
                return;
            }
        };
        let Message::Ack(ack) = frame.message else {
            // Credits and requests are not a host's to take: nothing to do.
            return;
        };
        let matches = self
            .in_flight
            .get(&ack.tag)
            .is_some_and(|pending| pending.kind == ack.kind && ack.host == self.host);
        if !matches {
            self.counters.stray_acks += 1;
            return;
        }
        if let Status::Busy { .. } = ack.status {
            self.counters.busy_retries += 1;
            self.busy.push_back((Instant::now() + BUSY_RETRY, ack.tag));
            return;
        }
        let pending = self.in_flight.remove(&ack.tag).expect("matched above");
        self.counters.acked += 1;
        self.ready.push_back(SessionAck {
            ack,
            device: pending.device,
            hops: frame.hops,
            failure: None,
        });
    }

    fn resend_busy(&mut self) {
        let now = Instant::now();
        while let Some(&(due, tag)) = self.busy.front() {
            if due > now {
                break;
            }
            self.busy.pop_front();
            if self.in_flight.contains_key(&tag) {
                self.send(tag);
            }
        }
    }

    fn expire(&mut self) {
        let now = Instant::now();
        let timeout = self.options.ack_timeout;
        let expired: Vec<u64> = self
            .in_flight
            .iter()
            .filter(|(_, pending)| now.duration_since(pending.sent_at) >= timeout)
            .map(|(&tag, _)| tag)
            .collect();
        for tag in expired {
            let pending = self.in_flight.remove(&tag).expect("listed above");
            let waited_ms = now.duration_since(pending.sent_at).as_millis() as u64;
            let failure = LocalFailure::TimedOut {
                node: self.node,
                waited_ms,
            };
            self.fail(tag, pending, failure);
        }
        self.busy
            .retain(|(_, tag)| self.in_flight.contains_key(tag));
    }

    /// The connection is gone: every request in flight is failed.
    fn lose(&mut self, reason: String) {
        if self.lost.is_none() {
            tracing::warn!(node = self.node, host = self.host, "cluster host: {reason}");
            self.stream.shutdown();
            self.lost = Some(reason);
        }
        self.fail_all();
    }

    fn fail_all(&mut self) {
        let reason = self.lost.clone().expect("failing all follows a loss");
        let mut tags: Vec<u64> = self.in_flight.keys().copied().collect();
        tags.sort_unstable();
        for tag in tags {
            let pending = self.in_flight.remove(&tag).expect("listed above");
            let failure = LocalFailure::ConnectionLost {
                node: self.node,
                reason: reason.clone(),
            };
            self.fail(tag, pending, failure);
        }
        self.busy.clear();
    }

    fn fail(&mut self, tag: u64, pending: Pending, failure: LocalFailure) {
        self.counters.failed += 1;
        self.ready.push_back(SessionAck {
            ack: WireAck {
                tag,
                host: self.host,
                kind: pending.kind,
                status: Status::Unreachable {
                    device: pending.device,
                    hop: 0,
                },
                payload: None,
            },
            device: pending.device,
            hops: 0,
            failure: Some(failure),
        });
    }
}

impl Drop for HostSession {
    fn drop(&mut self) {
        self.stream.shutdown();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}
