//! A simulated network of NBD disk nodes in virtual time: the ground that
//! [`super::sim::SimNbdDevice`] runs on.
//!
//! A [`SimNetwork`] is one discrete-event world: a `flashpipe_sim::Timeline` (one event
//! queue ordered by (virtual time, sequence number) and the [`VirtualClock`] it moves),
//! and its nodes, each behind a `flashpipe_sim::Link`. A network stands alone or joins a
//! `flashpipe_sim::World` ([`SimNetwork::join`]) beside disks and flash arrays. Each node is an in-simulation
//! NBD server over a [`RamDisk`] behind a seeded link to one client connection at a time.
//! Bytes on the link are the protocol's own (`crate::wire`): each connection to a node is
//! served by the real server's transmission core
//! ([`crate::server::core::NbdServerCore`]), which cuts the client's bytes into requests,
//! checks them as the real server does and hands out device jobs that the node carries out
//! on its RAM disk; the core encodes the replies (simple replies or structured chunks),
//! which the client decodes with the real client's code.
//!
//! Faults, per node ([`SimLinkConfig`]), all drawn from the node's seeded generator:
//! - a delay per message in each direction (the link keeps each direction in order, as a
//!   stream does) and a service delay per request at the node, so replies come back out
//!   of order;
//! - a failing device ([`SimNetwork::set_failure_probability`]): a job completes with an
//!   I/O error, answered by the core's error path;
//! - a message lost with its connection (the sender's side sees the connection reset
//!   after a delay), or lost silently with it (a partition: only the client's reply
//!   timeout notices, [`SimNetwork::partition`]); a reply whose magic is garbled (a
//!   protocol violation); the node closing a connection on a request; a connection
//!   attempt refused;
//! - [`SimNetwork::restart_node`]: the node loses every change since its last flush (FUA
//!   writes excepted) and resets its connection;
//! - [`SimNetwork::take_down`]: the node is gone (its connection reset, every attempt
//!   refused) until [`SimNetwork::bring_up`]. Its RAM disk keeps what it holds.
//!
//! Nothing reads the wall clock, starts a thread or iterates a hash map, so a seed fixes
//! the whole history; [`SimNetwork::history_fingerprint`] sums it up for replay checks.

mod serving;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use flashpipe_device::{
    run_one, DeviceError, DeviceErrorKind, IoBuf, Operation, RamDisk, SplitMix64, VirtualClock,
};
use flashpipe_sim::{Link, LinkFaults, Timeline};

use crate::server::core::NbdServerCore;
use crate::wire;

use flashpipe_nbd_client::NbdExport;
use serving::connection_core;

/// Bytes per block of a node's RAM disk (every NBD request of the client is a multiple).
const NODE_DISK_BLOCK_BYTES: u32 = 512;

/// How a node's link and service misbehave: the simulator's link faults (delays, a
/// service time, and the chances of a reset, a silent loss, a garbled reply, a close and
/// a refused attempt).
pub type SimLinkConfig = LinkFaults;

/// One disk node: its export and its link.
#[derive(Debug, Clone, PartialEq)]
pub struct SimNodeConfig {
    /// The node's name; the client device is named `nbd+sim://NAME/`.
    pub name: String,
    /// Export size in bytes (a multiple of 512).
    pub size_bytes: u64,
    /// Whether the node answers with structured replies (else simple ones).
    pub structured_replies: bool,
    /// The export's maximum payload (requests above it are cut into parts).
    pub maximum_payload_bytes: u32,
    /// The link's faults.
    pub link: SimLinkConfig,
}

/// What the network hands a client device.
#[derive(Debug)]
pub(crate) enum Delivery {
    /// One reply message (a simple reply, or one structured chunk) on `connection`.
    Reply { connection: u64, bytes: Vec<u8> },
    /// `connection` was reset.
    Lost { connection: u64, reason: String },
    /// A connection attempt succeeded.
    Connected { connection: u64, export: NbdExport },
    /// A connection attempt failed.
    Refused { reason: String },
    /// A timer the client set ([`SimNetwork::schedule_tick`]) is due.
    Tick,
}

/// A scheduled happening.
#[derive(Debug)]
enum NetworkEvent {
    /// Client bytes reach the node.
    ArriveAtNode {
        node: usize,
        connection: u64,
        bytes: Vec<u8>,
    },
    /// The node finished a request; its reply enters the link.
    ServiceDone {
        node: usize,
        connection: u64,
        replies: Vec<Vec<u8>>,
    },
    /// Something reaches the client.
    ArriveAtClient { node: usize, delivery: Delivery },
    /// The client tries to connect.
    ConnectAttempt { node: usize, attempt: u64 },
    /// A node taken down for a while ([`SimNetwork::take_down_for`]) is back.
    BringUp { node: usize },
}

impl NetworkEvent {
    fn node(&self) -> usize {
        match self {
            NetworkEvent::ArriveAtNode { node, .. }
            | NetworkEvent::ServiceDone { node, .. }
            | NetworkEvent::ArriveAtClient { node, .. }
            | NetworkEvent::ConnectAttempt { node, .. }
            | NetworkEvent::BringUp { node } => *node,
        }
    }

    fn kind_code(&self) -> u64 {
        match self {
            NetworkEvent::ArriveAtNode { .. } => 1,
            NetworkEvent::ServiceDone { .. } => 2,
            NetworkEvent::ArriveAtClient { delivery, .. } => match delivery {
                Delivery::Reply { .. } => 3,
                Delivery::Lost { .. } => 4,
                Delivery::Connected { .. } => 5,
                Delivery::Refused { .. } => 6,
                Delivery::Tick => 8,
            },
            NetworkEvent::ConnectAttempt { .. } => 7,
            NetworkEvent::BringUp { .. } => 9,
        }
    }
}

/// One node's state.
struct Node {
    config: SimNodeConfig,
    export: NbdExport,
    disk: RamDisk,
    generator: SplitMix64,
    /// The node's link: its faults and the last arrival each way (a stream keeps its
    /// order).
    link: Link,
    up: bool,
    live_connection: Option<u64>,
    /// The server's transmission core of the live connection (a new one per
    /// connection).
    server: NbdServerCore,
    inbox: VecDeque<Delivery>,
    requests_served: u64,
    /// Blocks (of [`NODE_DISK_BLOCK_BYTES`]) changed since the node's last flush, with
    /// their contents before: what a restart reverts.
    unflushed_originals: BTreeMap<u64, Vec<u8>>,
    /// Chance that the node fails a request with `EIO` (a failing device behind it;
    /// [`SimNetwork::set_failure_probability`]). No draw is made while it is zero.
    failure_probability: f64,
    /// The connection attempt the node's client waits for (a device dropped or replaced
    /// while reconnecting leaves its attempt behind, which must not take the node).
    awaited_attempt: Option<u64>,
}

impl Node {
    /// `connection` is the node's live one, served by a new transmission core.
    fn open_connection(&mut self, connection: u64) {
        self.live_connection = Some(connection);
        self.server = connection_core(self.export.size_bytes, self.export.structured_replies);
    }
}

/// The whole network behind the mutex.
struct NetworkState {
    timeline: Timeline<NetworkEvent>,
    seed_generator: SplitMix64,
    nodes: Vec<Node>,
    next_connection: u64,
    fingerprint: u64,
    events_run: u64,
    counters: SimNetworkCounters,
}

/// What happened on a network so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimNetworkCounters {
    /// Connections reset (a lost message, a node closing, a node going down).
    pub connections_reset: u64,
    /// Connection attempts refused.
    pub attempts_refused: u64,
    /// Connections lost silently (partitions).
    pub connections_partitioned: u64,
    /// Node restarts ([`SimNetwork::restart_node`]).
    pub node_restarts: u64,
    /// Blocks a restart reverted (writes acknowledged but not flushed, lost).
    pub blocks_reverted: u64,
    /// Replies garbled on the way.
    pub replies_garbled: u64,
    /// Connections made by scheduled attempts (reconnects).
    pub reconnects: u64,
    /// Requests the nodes carried out (re-issued ones counted again).
    pub requests_served: u64,
    /// Requests a failing node answered with `EIO` ([`SimNetwork::set_failure_probability`]).
    pub requests_failed: u64,
}

/// One simulated network of NBD disk nodes. Clones share it.
#[derive(Clone)]
pub struct SimNetwork {
    state: Arc<Mutex<NetworkState>>,
}

impl std::fmt::Debug for SimNetwork {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        formatter
            .debug_struct("SimNetwork")
            .field("now_ns", &state.timeline.now_ns())
            .field("nodes", &state.nodes.len())
            .field("events_run", &state.events_run)
            .finish()
    }
}

/// The name a node's client device carries.
pub fn sim_node_uri(node_name: &str) -> String {
    format!("nbd+sim://{node_name}/")
}

impl SimNetwork {
    /// An empty network at virtual time zero whose every random choice derives from
    /// `seed`.
    pub fn new(seed: u64) -> SimNetwork {
        SimNetwork::with_clock(seed, VirtualClock::new())
    }

    /// An empty network on a shared clock (which it only moves forward).
    pub fn with_clock(seed: u64, clock: VirtualClock) -> SimNetwork {
        SimNetwork {
            state: Arc::new(Mutex::new(NetworkState {
                timeline: Timeline::with_clock(clock),
                seed_generator: SplitMix64::new(seed),
                nodes: Vec::new(),
                next_connection: 1,
                fingerprint: 0xcbf2_9ce4_8422_2325,
                events_run: 0,
                counters: SimNetworkCounters::default(),
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, NetworkState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A network that lives in `world`: on its clock, seeded from its seed, and
    /// registered as one of its components.
    pub fn join(world: &mut flashpipe_sim::World) -> SimNetwork {
        let network = SimNetwork::with_clock(world.draw_seed(), world.clock().clone());
        world.register(Box::new(network.clone()));
        network
    }

    /// The network's virtual clock.
    pub fn clock(&self) -> VirtualClock {
        self.lock().timeline.clock().clone()
    }

    /// The current virtual time.
    pub fn now_ns(&self) -> u64 {
        self.lock().timeline.now_ns()
    }

    /// The time of the earliest pending event, if any.
    pub fn next_event_ns(&self) -> Option<u64> {
        self.lock().timeline.next_due_ns()
    }

    /// Adds a node (its RAM disk all zeros); returns its index. Bad settings are an
    /// `Open` error naming the node.
    pub fn add_node(&self, config: SimNodeConfig) -> Result<usize, DeviceError> {
        let name: Arc<str> = Arc::from(sim_node_uri(&config.name));
        let open_error = |detail: String| DeviceError::new(&name, DeviceErrorKind::Open { detail });
        let link = Link::new(config.link).map_err(|error| open_error(error.to_string()))?;
        let block = u64::from(NODE_DISK_BLOCK_BYTES);
        if config.size_bytes == 0 || config.size_bytes % block != 0 {
            return Err(open_error(format!(
                "export size {} is not a positive multiple of {block} bytes",
                config.size_bytes
            )));
        }
        if config.maximum_payload_bytes < NODE_DISK_BLOCK_BYTES
            || config.maximum_payload_bytes > wire::MAX_PAYLOAD_BYTES
        {
            return Err(open_error(format!(
                "maximum payload {} outside {NODE_DISK_BLOCK_BYTES}..={}",
                config.maximum_payload_bytes,
                wire::MAX_PAYLOAD_BYTES
            )));
        }
        let mut state = self.lock();
        let disk = RamDisk::with_clock(
            &config.name,
            NODE_DISK_BLOCK_BYTES,
            config.size_bytes / block,
            64,
            state.timeline.clock().as_clock(),
        )?;
        let export = NbdExport {
            size_bytes: config.size_bytes,
            transmission_flags: wire::TRANSMISSION_FLAG_HAS_FLAGS
                | wire::TRANSMISSION_FLAG_SEND_FLUSH
                | wire::TRANSMISSION_FLAG_SEND_FUA
                | wire::TRANSMISSION_FLAG_SEND_TRIM,
            minimum_block_bytes: NODE_DISK_BLOCK_BYTES,
            preferred_block_bytes: 4096,
            maximum_payload_bytes: config.maximum_payload_bytes,
            structured_replies: config.structured_replies,
            entered_with_go: true,
        };
        let generator = SplitMix64::new(state.seed_generator.next_u64());
        state.nodes.push(Node {
            config,
            export,
            disk,
            generator,
            link,
            up: true,
            live_connection: None,
            server: connection_core(export.size_bytes, export.structured_replies),
            inbox: VecDeque::new(),
            requests_served: 0,
            unflushed_originals: BTreeMap::new(),
            failure_probability: 0.0,
            awaited_attempt: None,
        });
        Ok(state.nodes.len() - 1)
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.lock().nodes.len()
    }

    /// Node `node`'s name.
    ///
    /// # Panics
    /// When `node` is not a node of this network.
    pub fn node_name(&self, node: usize) -> String {
        self.lock().nodes[node].config.name.clone()
    }

    /// Requests node `node` has carried out.
    pub fn requests_served(&self, node: usize) -> u64 {
        self.lock().nodes[node].requests_served
    }

    /// The node is gone: its connection resets and every attempt is refused, until
    /// [`SimNetwork::bring_up`]. Its disk keeps its contents.
    pub fn take_down(&self, node: usize) {
        let mut state = self.lock();
        state.nodes[node].up = false;
        state.sever(node, "the disk node went down");
    }

    /// The node's live connection is partitioned: every message on it is lost from now
    /// on and no reset reaches the client (only its reply timeout notices).
    pub fn partition(&self, node: usize) {
        self.lock().partition(node);
    }

    /// The node restarts at once: every block written or trimmed since its last flush
    /// (FUA writes excepted) reverts to what it held before, and its connection resets.
    /// What the client acknowledged and no flush covered is lost, as on a server whose
    /// host lost power.
    pub fn restart_node(&self, node: usize) {
        self.lock().restart_node(node);
    }

    /// The node is back: connection attempts may succeed again.
    pub fn bring_up(&self, node: usize) {
        self.lock().nodes[node].up = true;
    }

    /// Takes the node down ([`SimNetwork::take_down`]) and brings it back `duration_ns`
    /// of virtual time later (a reboot the client's reconnects may outlast).
    pub fn take_down_for(&self, node: usize, duration_ns: u64) {
        let mut state = self.lock();
        state.nodes[node].up = false;
        state.sever(node, "the disk node went down");
        let at_ns = state.timeline.now_ns().saturating_add(duration_ns);
        state.schedule(at_ns, NetworkEvent::BringUp { node });
    }

    /// Slows the node by `factor`: its link delays and its service time are multiplied
    /// (a device that got slow, a congested path). 1 leaves it as it is.
    ///
    /// # Panics
    /// When `factor` is zero.
    pub fn slow_down(&self, node: usize, factor: u32) {
        assert!(factor > 0, "a slow-down factor is at least 1");
        let mut state = self.lock();
        let target = &mut state.nodes[node];
        let mut faults = *target.link.faults();
        let factor = u64::from(factor);
        faults.delay_ns_min = faults.delay_ns_min.saturating_mul(factor);
        faults.delay_ns_max = faults.delay_ns_max.saturating_mul(factor);
        faults.service_ns_max = faults.service_ns_max.saturating_mul(factor);
        target.link.set_faults(faults);
    }

    /// Sets the chance (0.0..=1.0) that the node fails a request with `EIO`, as a failing
    /// device behind its server would; 0 stops it.
    ///
    /// # Panics
    /// When `probability` lies outside 0.0..=1.0.
    pub fn set_failure_probability(&self, node: usize, probability: f64) {
        assert!(
            (0.0..=1.0).contains(&probability),
            "failure probability {probability} outside 0.0..=1.0"
        );
        self.lock().nodes[node].failure_probability = probability;
    }

    /// Runs the earliest pending event, moving virtual time to it; false when nothing
    /// is pending.
    pub fn run_next_event(&self) -> bool {
        self.lock().run_next_event()
    }

    /// A sum of the history so far (each event's time, node and kind, in order): two
    /// runs with the same seed and the same calls give the same value.
    pub fn history_fingerprint(&self) -> u64 {
        self.lock().fingerprint
    }

    /// Resets, refusals, reconnects and requests so far.
    pub fn counters(&self) -> SimNetworkCounters {
        self.lock().counters
    }

    /// Events run so far.
    pub fn events_run(&self) -> u64 {
        self.lock().events_run
    }

    /// Connects to `node` at once, without faults (opening a device).
    pub(crate) fn connect_now(&self, node: usize) -> Result<(u64, NbdExport), String> {
        let mut state = self.lock();
        let state = &mut *state;
        let Some(target) = state.nodes.get_mut(node) else {
            return Err(format!("the network has no node {node}"));
        };
        if !target.up {
            return Err("connection refused: the disk node is down".to_string());
        }
        let connection = state.next_connection;
        state.next_connection += 1;
        target.open_connection(connection);
        target.awaited_attempt = None;
        target.inbox.clear();
        Ok((connection, target.export))
    }

    /// Schedules a connection attempt to `node` after `delay_ns`; its outcome is
    /// delivered as [`Delivery::Connected`] or [`Delivery::Refused`].
    pub(crate) fn schedule_connect(&self, node: usize, delay_ns: u64) {
        let mut state = self.lock();
        let at_ns = state.timeline.now_ns().saturating_add(delay_ns);
        let attempt = state.timeline.next_sequence();
        state.nodes[node].awaited_attempt = Some(attempt);
        state.schedule(at_ns, NetworkEvent::ConnectAttempt { node, attempt });
    }

    /// The node's client no longer waits for a connection attempt (it was dropped).
    pub(crate) fn cancel_connect(&self, node: usize) {
        self.lock().nodes[node].awaited_attempt = None;
    }

    /// Delivers [`Delivery::Tick`] to `node`'s client at `at_ns` (a timer).
    pub(crate) fn schedule_tick(&self, node: usize, at_ns: u64) {
        let mut state = self.lock();
        let at_ns = at_ns.max(state.timeline.now_ns());
        let delivery = Delivery::Tick;
        state.schedule(at_ns, NetworkEvent::ArriveAtClient { node, delivery });
    }

    /// Sends client bytes on `connection` (lost silently when the connection is already
    /// dead: its reset is delivered, or on its way).
    pub(crate) fn send_to_node(&self, node: usize, connection: u64, bytes: Vec<u8>) {
        let mut state = self.lock();
        if state.nodes[node].live_connection != Some(connection) {
            return;
        }
        if state.draw_silent_loss(node) {
            state.partition(node);
            return;
        }
        let severed = {
            let target = &mut state.nodes[node];
            target.link.draw_sever(&mut target.generator)
        };
        if severed {
            state.sever(
                node,
                "the link dropped a request and the connection was reset",
            );
            return;
        }
        let at_ns = state.arrival_to_node_ns(node);
        state.schedule(
            at_ns,
            NetworkEvent::ArriveAtNode {
                node,
                connection,
                bytes,
            },
        );
    }

    /// The client closed `connection` (after a loss it noticed, or when dropped).
    pub(crate) fn close(&self, node: usize, connection: u64) {
        let mut state = self.lock();
        if state.nodes[node].live_connection == Some(connection) {
            state.nodes[node].live_connection = None;
        }
    }

    /// Runs every event due by now, then takes what reached `node`'s client.
    pub(crate) fn take_deliveries(&self, node: usize) -> Vec<Delivery> {
        let mut state = self.lock();
        state.run_due_events();
        state.nodes[node].inbox.drain(..).collect()
    }
}

impl NetworkState {
    fn schedule(&mut self, at_ns: u64, event: NetworkEvent) {
        self.timeline.schedule(at_ns, event);
    }

    /// When a message the client sends now reaches the node (the link's forward way).
    fn arrival_to_node_ns(&mut self, node: usize) -> u64 {
        let now_ns = self.timeline.now_ns();
        let target = &mut self.nodes[node];
        target
            .link
            .forward_arrival_ns(now_ns, &mut target.generator)
    }

    /// When a message the node sends now reaches the client (the backward way).
    fn arrival_to_client_ns(&mut self, node: usize) -> u64 {
        let now_ns = self.timeline.now_ns();
        let target = &mut self.nodes[node];
        target
            .link
            .backward_arrival_ns(now_ns, &mut target.generator)
    }

    fn draw_silent_loss(&mut self, node: usize) -> bool {
        let target = &mut self.nodes[node];
        target.link.draw_silent_loss(&mut target.generator)
    }

    /// Ends the node's live connection without a word to the client.
    fn partition(&mut self, node: usize) {
        if self.nodes[node].live_connection.take().is_some() {
            self.counters.connections_partitioned += 1;
        }
    }

    /// Ends the node's live connection; the client hears of it after a delay.
    fn sever(&mut self, node: usize, reason: &str) {
        let Some(connection) = self.nodes[node].live_connection.take() else {
            return;
        };
        self.counters.connections_reset += 1;
        let at_ns = self.arrival_to_client_ns(node);
        let delivery = Delivery::Lost {
            connection,
            reason: reason.to_string(),
        };
        self.schedule(at_ns, NetworkEvent::ArriveAtClient { node, delivery });
    }

    fn run_due_events(&mut self) {
        while let Some((at_ns, event)) = self.timeline.pop_due() {
            self.run_event(at_ns, event);
        }
    }

    fn run_next_event(&mut self) -> bool {
        let Some((at_ns, event)) = self.timeline.pop_next() else {
            return false;
        };
        self.run_event(at_ns, event);
        true
    }

    fn run_event(&mut self, at_ns: u64, event: NetworkEvent) {
        self.events_run += 1;
        for value in [at_ns, event.node() as u64, event.kind_code()] {
            self.fingerprint = (self.fingerprint ^ value).wrapping_mul(0x0100_0000_01b3);
        }
        match event {
            NetworkEvent::ArriveAtNode {
                node,
                connection,
                bytes,
            } => self.serve(node, connection, &bytes),
            NetworkEvent::ServiceDone {
                node,
                connection,
                replies,
            } => self.send_replies(node, connection, replies),
            NetworkEvent::ArriveAtClient { node, delivery } => {
                self.nodes[node].inbox.push_back(delivery);
            }
            NetworkEvent::ConnectAttempt { node, attempt } => {
                if self.nodes[node].awaited_attempt == Some(attempt) {
                    self.nodes[node].awaited_attempt = None;
                    self.attempt_connect(node);
                }
            }
            NetworkEvent::BringUp { node } => self.nodes[node].up = true,
        }
    }

    fn attempt_connect(&mut self, node: usize) {
        let refused = !self.nodes[node].up || {
            let target = &mut self.nodes[node];
            target.link.draw_refuse(&mut target.generator)
        };
        if refused {
            self.counters.attempts_refused += 1;
        } else {
            self.counters.reconnects += 1;
        }
        let delivery = if !self.nodes[node].up {
            Delivery::Refused {
                reason: "connection refused: the disk node is down".to_string(),
            }
        } else if refused {
            Delivery::Refused {
                reason: "connection refused (simulated)".to_string(),
            }
        } else {
            let connection = self.next_connection;
            self.next_connection += 1;
            self.nodes[node].open_connection(connection);
            Delivery::Connected {
                connection,
                export: self.nodes[node].export,
            }
        };
        let at_ns = self.arrival_to_client_ns(node);
        self.schedule(at_ns, NetworkEvent::ArriveAtClient { node, delivery });
    }

    fn send_replies(&mut self, node: usize, connection: u64, replies: Vec<Vec<u8>>) {
        for mut bytes in replies {
            if self.nodes[node].live_connection != Some(connection) {
                return;
            }
            if self.draw_silent_loss(node) {
                self.partition(node);
                return;
            }
            let severed = {
                let target = &mut self.nodes[node];
                target.link.draw_sever(&mut target.generator)
            };
            if severed {
                self.sever(
                    node,
                    "the link dropped a reply and the connection was reset",
                );
                return;
            }
            self.maybe_garble(node, &mut bytes);
            let at_ns = self.arrival_to_client_ns(node);
            let delivery = Delivery::Reply { connection, bytes };
            self.schedule(at_ns, NetworkEvent::ArriveAtClient { node, delivery });
        }
    }

    /// Flips one bit of a reply's magic (its first four bytes), by the link's chance.
    fn maybe_garble(&mut self, node: usize, bytes: &mut [u8]) {
        let target = &mut self.nodes[node];
        if bytes.len() < 4 || !target.link.draw_garble(&mut target.generator) {
            return;
        }
        let bit = target.generator.below(32);
        bytes[(bit / 8) as usize] ^= 1 << (bit % 8);
        self.counters.replies_garbled += 1;
    }

    fn restart_node(&mut self, node: usize) {
        self.counters.node_restarts += 1;
        let target = &mut self.nodes[node];
        let originals = std::mem::take(&mut target.unflushed_originals);
        self.counters.blocks_reverted += originals.len() as u64;
        for (block, contents) in originals {
            let operation = Operation::Write {
                first_block: block,
                buffer: IoBuf::from_slice(&contents),
            };
            run_one(&mut target.disk, operation).expect("a RAM disk write inside its bounds");
        }
        self.sever(node, "the disk node restarted");
    }
}

impl flashpipe_sim::Component for SimNetwork {
    fn name(&self) -> &'static str {
        "simulated network"
    }

    fn next_due_ns(&self) -> Option<u64> {
        self.next_event_ns()
    }

    fn run_due(&mut self, _now_ns: u64) {
        self.lock().run_due_events();
    }
}
