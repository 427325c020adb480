//! The node's router thread: one router core, one output stage per output port, a credit
//! receiver per link, and the device. It never blocks on a socket: it takes frames from
//! each connection's bounded channel or a shared-memory link's input ring, hands encoded
//! frames to each writer's bounded channel or the peer's ring without waiting (a frame that
//! does not fit waits in the port's one pending slot), and sleeps only on the node's
//! doorbell ([`crate::bell`]), until the device's next event at the latest: it polls its
//! inputs for the doorbell window first (spin, then yield), then parks.
//!
//! An input whose outputs do not fit their output stage (`QueueFull`) keeps them in order
//! and takes no new frame until they are queued, so every queue stays bounded: the reader
//! of a paused connection blocks on its full channel and the socket backs up to the peer.
//! A paused link is still read for its Credit frames: they return tokens to this node's
//! stages (perhaps the very stage the input waits for), so they are taken at once, and the
//! requests and acks read past meanwhile wait in the input's held queue, bounded by the
//! tokens the peer may spend (the window times the channels; a peer sending past its tokens
//! is closed as a bad peer).
//! A connection that takes no frame for [`STALL_LIMIT`] while frames wait for it (its
//! writer's channel full, or, on a link, no token returned all that time) is closed, and
//! its requests in flight answered, so a peer that stops reading or crediting cannot hold
//! the other ports for longer.
//!
//! The device is the node's [`FlashArray`] paced to wall time: its virtual clock is the
//! virtual time it was opened at plus the wall time since, so an ack leaves when the model
//! completes it. Requests reach it with their device id rewritten to 0 (the array holds the
//! node's one device); acks carry no device id.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flashpipe_base::wait::WaitPolicy;
use flashpipe_cluster::credits::CreditReceiver;
use flashpipe_cluster::output::{input_of, port_of, LeftoverOutputs, OutputStage, DEVICE_INPUT};
use flashpipe_cluster::router::{Output, Port, Router};
use flashpipe_cluster::wire::{self, Channel, Frame, Message, Status, WireAck, WireLimits};
use flashpipe_flash::{FlashArray, FlashError};
use flashpipe_shm::Doorbell;

use crate::bell::NodeBell;
use crate::link::{Link, Received};
use crate::node::NodeLimits;

/// Frames taken from one connection before the others get their turn.
const DRAIN_BATCH: usize = 32;
/// The longest sleep with nothing to do.
const IDLE_WAIT: Duration = Duration::from_millis(20);
/// How long a connection may leave its writer's channel full, or a link its stage without
/// tokens while frames wait, before it is closed.
const STALL_LIMIT: Duration = Duration::from_secs(10);
/// The sleep while a port waits for room (a full writer or output stage).
const BLOCKED_WAIT: Duration = Duration::from_millis(1);

/// What the router thread needs.
pub(crate) struct RouterLoop {
    pub router: Router,
    pub array: FlashArray,
    pub limits: WireLimits,
    pub node_limits: NodeLimits,
    pub links: usize,
    /// Neighbour node ids, by link index (for logs).
    pub neighbours: Vec<u32>,
    /// The host attached to this node: every request on the host port must be its own.
    pub host: Option<u32>,
    pub attach: Receiver<(Port, Link)>,
    /// The router's handle of the node's doorbell (it parks on it).
    pub doorbell: Doorbell,
    /// The in-process producers' side of the same doorbell.
    pub bell: Arc<NodeBell>,
    /// How long the router polls its inputs before it parks.
    pub wait_policy: WaitPolicy,
    pub stopping: Arc<AtomicBool>,
}

/// What the node did, for its last line.
#[derive(Debug, Clone, Default)]
pub struct NodeSummary {
    /// Requests given a controller tag.
    pub renamed: u64,
    /// Requests the device carried out.
    pub device_requests: u64,
    /// Requests answered `Unreachable`.
    pub unreachable: u64,
    /// Requests answered `NotOwner`.
    pub not_owner: u64,
    /// Requests answered `Busy`.
    pub busy: u64,
    /// Connections closed for a bad frame, a bad credit or a refused frame.
    pub bad_peers: u64,
}

struct PortState {
    port: Port,
    conn: Option<Link>,
    stage: OutputStage,
    credits_in: Option<CreditReceiver>,
    pending: Option<Vec<u8>>,
    /// Since when the pending frame has waited for room in the writer's channel, or the
    /// stage's frames for a token.
    blocked_since: Option<Instant>,
    /// Outputs of frames from this input that did not fit their stage yet, in order.
    leftovers: VecDeque<Output>,
    /// Requests and acks read past while `leftovers` waited (a link's Credit frames are
    /// taken meanwhile), in order; taken before any new frame.
    held: VecDeque<Frame>,
}

fn fresh_stage(port: Port, inputs: usize, limits: NodeLimits) -> OutputStage {
    OutputStage::for_port(port, inputs, limits.stage_frames, limits.link_window)
}

struct State {
    router: Router,
    array: FlashArray,
    limits: WireLimits,
    node_limits: NodeLimits,
    neighbours: Vec<u32>,
    /// The host attached to this node (requests on the host port must be its own).
    host: Option<u32>,
    ports: Vec<PortState>,
    base_ns: u64,
    started: Instant,
    summary: NodeSummary,
}

impl RouterLoop {
    /// Runs until the stop flag is set; then closes every connection and syncs the image.
    pub fn run(self) -> Result<NodeSummary, FlashError> {
        let RouterLoop {
            mut router,
            array,
            limits,
            node_limits,
            links,
            neighbours,
            host,
            attach,
            mut doorbell,
            bell,
            wait_policy,
            stopping,
        } = self;
        for link in 0..links {
            let failed = router.link_down(link);
            assert!(
                failed.is_empty(),
                "nothing is in flight before the node starts"
            );
        }
        let inputs = 2 + links;
        let ports = (0..inputs)
            .map(|index| {
                let port = port_of(index);
                PortState {
                    port,
                    conn: None,
                    stage: fresh_stage(port, inputs, node_limits),
                    credits_in: None,
                    pending: None,
                    blocked_since: None,
                    leftovers: VecDeque::new(),
                    held: VecDeque::new(),
                }
            })
            .collect();
        let mut state = State {
            base_ns: array.now_ns(),
            router,
            array,
            limits,
            node_limits,
            neighbours,
            host,
            ports,
            started: Instant::now(),
            summary: NodeSummary::default(),
        };
        'turns: while !stopping.load(Ordering::SeqCst) {
            bell.take();
            loop {
                match attach.try_recv() {
                    Ok((port, conn)) => state.attach(port, conn),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => break 'turns,
                }
            }
            state.flush_leftovers();
            state.drain_inputs();
            state.poll_device();
            state.pump();
            let park_us = u64::try_from(state.wait_for().as_micros()).unwrap_or(u64::MAX);
            doorbell.wait(wait_policy, Some(park_us), || {
                let ready =
                    bell.rung() || stopping.load(Ordering::SeqCst) || state.has_input_or_room();
                ready.then_some(())
            });
        }
        for index in 0..state.ports.len() {
            if let Some(mut conn) = state.ports[index].conn.take() {
                conn.close();
            }
        }
        let counters = state.router.counters();
        state.summary.renamed = counters.renamed;
        state.summary.unreachable = counters.unreachable;
        state.summary.not_owner = counters.not_owner;
        state.summary.busy = counters.busy;
        state.router.assert_tags_balanced();
        state.array.sync()?;
        Ok(state.summary)
    }
}

impl State {
    fn name(&self, port: Port) -> String {
        match port {
            Port::Host => "the host".to_string(),
            Port::Device => "the device".to_string(),
            Port::Link(link) => format!("node {}", self.neighbours[link]),
        }
    }

    fn attach(&mut self, port: Port, conn: Link) {
        let index = input_of(port);
        if self.ports[index].conn.is_some() {
            self.detach(index, "replaced by a new connection from the same peer");
        }
        tracing::info!(peer = %conn.peer(), "{} connected", self.name(port));
        let inputs = self.ports.len();
        let node_limits = self.node_limits;
        let state = &mut self.ports[index];
        state.conn = Some(conn);
        state.stage = fresh_stage(port, inputs, node_limits);
        state.pending = None;
        state.blocked_since = None;
        state.held.clear();
        if let Port::Link(link) = port {
            state.credits_in = Some(CreditReceiver::new(node_limits.credit_batch));
            self.router.link_up(link);
        }
    }

    fn detach(&mut self, index: usize, reason: &str) {
        let Some(mut conn) = self.ports[index].conn.take() else {
            return;
        };
        conn.close();
        let port = self.ports[index].port;
        tracing::info!(peer = %conn.peer(), "{} disconnected: {reason}", self.name(port));
        let inputs = self.ports.len();
        let node_limits = self.node_limits;
        let state = &mut self.ports[index];
        state.stage = fresh_stage(port, inputs, node_limits);
        state.pending = None;
        state.blocked_since = None;
        state.credits_in = None;
        state.held.clear();
        for other in &mut self.ports {
            other.leftovers.retain(|output| output.port != port);
        }
        let outputs = match port {
            Port::Link(link) => self.router.link_down(link),
            Port::Host => self.router.host_down(),
            Port::Device => Vec::new(),
        };
        self.push_outputs(outputs);
    }

    fn drain_inputs(&mut self) {
        for index in 0..self.ports.len() {
            for _ in 0..DRAIN_BATCH {
                let paused = !self.ports[index].leftovers.is_empty();
                if paused && !self.reads_past(index) {
                    break;
                }
                if !paused {
                    if let Some(frame) = self.ports[index].held.pop_front() {
                        self.on_frame(index, frame);
                        continue;
                    }
                }
                let Some(conn) = &mut self.ports[index].conn else {
                    break;
                };
                match conn.try_recv() {
                    Received::Frame(frame) => {
                        let credit = matches!(frame.message, Message::Credit(_));
                        if paused && !credit {
                            if self.ports[index].held.len() >= self.hold_limit() {
                                let reason = format!(
                                    "it sent more than its {} tokens per channel allow",
                                    self.node_limits.link_window
                                );
                                self.refuse_peer(index, &reason);
                                break;
                            }
                            self.ports[index].held.push_back(frame);
                        } else {
                            self.on_frame(index, frame);
                        }
                    }
                    Received::Closed(reason) => {
                        self.detach(index, &reason);
                        break;
                    }
                    Received::Empty => {
                        if !paused && self.ports[index].held.is_empty() {
                            self.return_all_credits(index);
                        }
                        break;
                    }
                }
            }
        }
    }

    /// Whether the paused input `index` is read on for Credit frames: a link is (its held
    /// queue is bounded by the peer's tokens); the host sends no credits.
    fn reads_past(&self, index: usize) -> bool {
        matches!(self.ports[index].port, Port::Link(_))
    }

    /// The most frames a link's held queue takes: every token the peer may spend (a frame's
    /// token is returned only after the router took it), so one more is a peer past its
    /// tokens.
    fn hold_limit(&self) -> usize {
        self.node_limits.link_window as usize * Channel::ALL.len()
    }

    fn return_all_credits(&mut self, index: usize) {
        let state = &mut self.ports[index];
        if let Some(receiver) = &mut state.credits_in {
            for credit in receiver.flush() {
                state.stage.push_credit(index, credit);
            }
        }
    }

    fn refuse_peer(&mut self, index: usize, reason: &str) {
        self.summary.bad_peers += 1;
        let peer = self.peer(index);
        tracing::warn!(peer = %peer, "closing this connection only: {reason}");
        self.detach(index, reason);
    }

    fn on_frame(&mut self, index: usize, frame: Frame) {
        let port = self.ports[index].port;
        if let Message::Credit(credit) = frame.message {
            let result = match port {
                Port::Link(_) => self.ports[index]
                    .stage
                    .on_credit(credit)
                    .map_err(|error| error.to_string()),
                _ => Err("a host sends no credit frames".to_string()),
            };
            if let Err(reason) = result {
                self.refuse_peer(index, &reason);
            }
            return;
        }
        if let (Port::Host, Message::Request(request)) = (port, &frame.message) {
            if Some(request.host) != self.host {
                let reason = format!(
                    "a request on the host port says it is from host {}, not this node's host",
                    request.host
                );
                self.refuse_peer(index, &reason);
                return;
            }
        }
        let channel = Channel::of(&frame.message);
        match self.router.receive(port, frame) {
            Ok(outputs) => self.push_outputs(outputs),
            Err(error) => {
                let peer = self.peer(index);
                tracing::warn!(peer = %peer, "refused a frame from {}: {error}", self.name(port));
            }
        }
        let state = &mut self.ports[index];
        if let (Some(receiver), Some(channel)) = (&mut state.credits_in, channel) {
            if let Some(credit) = receiver.on_freed(channel) {
                state.stage.push_credit(index, credit);
            }
        }
    }

    /// The peer on port `index`'s connection, for log lines (empty when none).
    fn peer(&self, index: usize) -> String {
        self.ports[index]
            .conn
            .as_ref()
            .map_or_else(String::new, |conn| conn.peer().to_string())
    }

    fn virtual_now_ns(&self) -> u64 {
        let elapsed = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.base_ns.saturating_add(elapsed)
    }

    fn poll_device(&mut self) {
        let now_ns = self.virtual_now_ns();
        self.array.run_until(now_ns);
        if !self.ports[DEVICE_INPUT].leftovers.is_empty() {
            return;
        }
        let mut acks = Vec::new();
        self.array.poll_acks(&mut acks);
        for ack in acks {
            let frame = Frame::from_device_ack(ack);
            match self.router.receive(Port::Device, frame) {
                Ok(outputs) => self.push_outputs(outputs),
                Err(error) => tracing::error!("the router refused the device's ack: {error}"),
            }
        }
    }

    fn pump(&mut self) {
        while let Some(frame) = self.ports[DEVICE_INPUT].stage.next_frame() {
            let Message::Request(mut request) = frame.message else {
                tracing::error!("the router sent the device something other than a request");
                continue;
            };
            let (tag, host, kind) = (request.tag, request.host, request.command.kind());
            request.command.set_device(0);
            self.summary.device_requests += 1;
            if let Err(error) = self.array.submit(request) {
                tracing::error!("the device refused a request: {error}");
                let busy = Frame::from(WireAck {
                    tag,
                    host,
                    kind,
                    status: Status::Busy {
                        queue_limit: self.array.options().host_queue_depth,
                    },
                    payload: None,
                });
                if let Ok(outputs) = self.router.receive(Port::Device, busy) {
                    self.push_outputs(outputs);
                }
            }
        }
        for index in 0..self.ports.len() {
            if index == DEVICE_INPUT {
                continue;
            }
            let mut writer_gone = false;
            let mut stalled = false;
            let limits = self.limits;
            let state = &mut self.ports[index];
            let Some(conn) = &mut state.conn else {
                while state.stage.next_frame().is_some() {}
                continue;
            };
            loop {
                let bytes = match state.pending.take() {
                    Some(bytes) => bytes,
                    None => match state.stage.next_frame() {
                        Some(frame) => match wire::encode(&frame, limits) {
                            Ok(bytes) => bytes,
                            Err(error) => {
                                tracing::error!("a frame could not be encoded: {error}");
                                continue;
                            }
                        },
                        None => {
                            if state.stage.queued() > 0 {
                                let since = *state.blocked_since.get_or_insert_with(Instant::now);
                                stalled = since.elapsed() > STALL_LIMIT;
                            }
                            break;
                        }
                    },
                };
                match conn.try_send(bytes) {
                    Ok(()) => state.blocked_since = None,
                    Err(Some(bytes)) => {
                        state.pending = Some(bytes);
                        let since = *state.blocked_since.get_or_insert_with(Instant::now);
                        stalled = since.elapsed() > STALL_LIMIT;
                        break;
                    }
                    Err(None) => {
                        writer_gone = true;
                        break;
                    }
                }
            }
            if writer_gone {
                self.detach(index, "its writer ended");
            } else if stalled {
                let reason = format!(
                    "it took no frame for {} s (a peer that stops reading or returning tokens would hold the node's other ports)",
                    STALL_LIMIT.as_secs()
                );
                self.refuse_peer(index, &reason);
            }
        }
    }

    /// Whether a shared-memory link has something to take, or room again for the frame
    /// it could not take (the doorbell's poll).
    fn has_input_or_room(&self) -> bool {
        self.ports.iter().any(|state| {
            state.conn.as_ref().is_some_and(|conn| {
                conn.has_input() || (state.pending.is_some() && conn.has_room())
            })
        })
    }

    fn wait_for(&self) -> Duration {
        let blocked = self.ports.iter().any(|state| {
            state.pending.is_some() || !state.leftovers.is_empty() || !state.held.is_empty()
        });
        if blocked {
            return BLOCKED_WAIT;
        }
        match self.array.next_event_ns() {
            Some(next_ns) => {
                let until_ns = next_ns.saturating_sub(self.virtual_now_ns());
                Duration::from_nanos(until_ns).min(IDLE_WAIT)
            }
            None => IDLE_WAIT,
        }
    }
}

impl LeftoverOutputs for State {
    fn leftovers(&mut self, input: usize) -> Option<&mut VecDeque<Output>> {
        self.ports.get_mut(input).map(|state| &mut state.leftovers)
    }

    fn attached_stage(&mut self, port: Port) -> Option<&mut OutputStage> {
        let index = input_of(port);
        if port != Port::Device && self.ports[index].conn.is_none() {
            tracing::debug!("dropped a frame for {}: not connected", self.name(port));
            return None;
        }
        Some(&mut self.ports[index].stage)
    }
}
