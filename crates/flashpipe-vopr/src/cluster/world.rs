//! The network of the cluster campaign: the nodes, the links between neighbours (each
//! direction a [`Pipe`]: 0.5 us per hop and the preset's link bandwidth), the hosts and
//! their PCIe links, as one [`Component`] of the seed's world. Frames cross every link
//! encoded and decoded with the cluster's wire format.
//!
//! Faults: a link severed (a frame lost on a lossy link, a partition, a node crash) loses
//! what is in flight on it; each end notices after a seeded timeout and takes the link
//! down, and the link reconnects when both ends are up and the partition is over. A node
//! crash loses its router and queues and cuts its device's requests in flight; its host
//! notices after a timeout and fails its requests in flight; the node restarts once its
//! device has finished the cut requests. A host restart resets its connection (the node
//! takes the host port down) and a new host process, its tags from 1 again, connects
//! later. A slow node delays every frame it sends.

use flashpipe_cluster::output::LeftoverOutputs;
use flashpipe_cluster::router::Port;
use flashpipe_cluster::wire::{self, Frame, WireLimits};
use flashpipe_flash::FlashRequest;
use flashpipe_sim::{Component, EventQueue, FaultKind, Pipe, SplitMix64};

use super::check::Published;
use super::hosts::{status_name, Shape, SimHost};
use super::node::SimNode;
use flashpipe_cluster::wire::Message;

/// One-way latency of an inter-controller hop (the paper's 0.5 us).
pub const HOP_NS: u64 = 500;
/// One-way latency of a host's PCIe link.
pub const HOST_LINK_NS: u64 = 1_000;
/// Shortest and longest time an end takes to notice its link is gone.
const NOTICE_NS: (u64, u64) = (20_000, 200_000);
/// Shortest and longest time a severed link takes to reconnect.
const RECONNECT_NS: (u64, u64) = (100_000, 1_000_000);
/// How long a crashed node waits for its device again, at least, before it restarts.
const RESTART_POLL_NS: u64 = 10_000;

/// A link between two neighbours.
pub(crate) struct SimLink {
    /// (node, the link's index at that node), both ends.
    pub(crate) ends: [(usize, usize); 2],
    pub(crate) connected: bool,
    pub(crate) epoch: u64,
    /// Direction `e` carries frames from `ends[e]` to the other end.
    pipes: [Pipe; 2],
    partitioned_until_ns: u64,
    /// Chance a frame is lost (and the link with it), until a time.
    loss: Option<(f64, u64)>,
}

/// What the network did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetCounts {
    /// Frames carried on links and host links.
    pub frames: u64,
    /// Frames lost with their link (sent on a severed link or lost on a lossy one).
    pub frames_lost: u64,
    /// Times a link was severed.
    pub links_severed: u64,
    /// Node crashes.
    pub crashes: u64,
    /// Faults of the plan that struck.
    pub faults_struck: u64,
    /// Acks received by hosts.
    pub acks: u64,
}

enum Event {
    LinkArrive {
        link: usize,
        to_end: usize,
        epoch: u64,
        bytes: Vec<u8>,
    },
    HostToNode {
        host: usize,
        epoch: u64,
        bytes: Vec<u8>,
    },
    NodeToHost {
        host: usize,
        epoch: u64,
        bytes: Vec<u8>,
    },
    Notice {
        link: usize,
        end: usize,
    },
    Reconnect {
        link: usize,
    },
    HostNotice {
        host: usize,
        epoch: u64,
    },
    Restart {
        node: usize,
    },
    HostRestart {
        host: usize,
    },
    HostReconnect {
        host: usize,
    },
    Fault {
        kind: FaultKind,
        duration_ns: u64,
    },
    Kick,
}

/// The whole cluster.
pub(crate) struct Net {
    pub(crate) nodes: Vec<SimNode>,
    pub(crate) links: Vec<SimLink>,
    pub(crate) hosts: Vec<SimHost>,
    /// Per host: [to its node, to the host].
    host_pipes: Vec<[Pipe; 2]>,
    /// Per node: the link id of each of its link indexes.
    node_links: Vec<Vec<usize>>,
    /// Per node: the host attached, if any.
    node_host: Vec<Option<usize>>,
    pub(crate) shape: Shape,
    pub(crate) published: Published,
    events: EventQueue<Event>,
    rng: SplitMix64,
    limits: WireLimits,
    pub(crate) finding: Option<String>,
    pub(crate) fingerprint: u64,
    pub(crate) counts: NetCounts,
    now_ns: u64,
}

fn mix(fingerprint: u64, value: u64) -> u64 {
    SplitMix64::new(fingerprint ^ value.rotate_left(17)).next_u64()
}

impl Net {
    /// A network of `nodes` in a linear array (node `i` linked to `i + 1`) and `hosts`,
    /// every link connected and every host attached.
    pub(crate) fn new(
        nodes: Vec<SimNode>,
        hosts: Vec<SimHost>,
        shape: Shape,
        limits: WireLimits,
        link_bytes_per_second: u64,
        host_bytes_per_second: u64,
        rng: SplitMix64,
    ) -> Net {
        let mut links = Vec::new();
        let mut node_links = vec![Vec::new(); nodes.len()];
        for left in 0..nodes.len().saturating_sub(1) {
            let right = left + 1;
            let id = links.len();
            let ends = [
                (left, node_links[left].len()),
                (right, node_links[right].len()),
            ];
            node_links[left].push(id);
            node_links[right].push(id);
            links.push(SimLink {
                ends,
                connected: false,
                epoch: 0,
                pipes: [
                    Pipe::new(HOP_NS, link_bytes_per_second),
                    Pipe::new(HOP_NS, link_bytes_per_second),
                ],
                partitioned_until_ns: 0,
                loss: None,
            });
        }
        for (index, node) in nodes.iter().enumerate() {
            assert_eq!(
                node.links(),
                node_links[index].len(),
                "a linear array's links"
            );
        }
        let mut node_host = vec![None; nodes.len()];
        for (index, host) in hosts.iter().enumerate() {
            node_host[host.node as usize] = Some(index);
        }
        let host_pipes = hosts
            .iter()
            .map(|_| {
                [
                    Pipe::new(HOST_LINK_NS, host_bytes_per_second),
                    Pipe::new(HOST_LINK_NS, host_bytes_per_second),
                ]
            })
            .collect();
        let mut net = Net {
            nodes,
            links,
            hosts,
            host_pipes,
            node_links,
            node_host,
            shape,
            published: Published::default(),
            events: EventQueue::new(),
            rng,
            limits,
            finding: None,
            fingerprint: 0,
            counts: NetCounts::default(),
            now_ns: 0,
        };
        for link in 0..net.links.len() {
            net.reconnect(link, 0);
        }
        for host in 0..net.hosts.len() {
            let node = net.hosts[host].node as usize;
            let epoch = net.hosts[host].epoch;
            let outputs = net.nodes[node].attach(Port::Host, epoch);
            assert!(outputs.is_empty(), "a fresh node has nothing to fail");
        }
        net
    }

    fn find(&mut self, finding: String) {
        if self.finding.is_none() {
            self.finding = Some(finding);
        }
    }

    /// Lets the hosts issue again at the next step (after their mode changed).
    pub(crate) fn kick(&mut self) {
        self.events.schedule(self.now_ns, Event::Kick);
    }

    /// Ends every slow spell and lossy spell still running (the fairness phase runs with
    /// no fault).
    pub(crate) fn heal(&mut self) {
        for node in &mut self.nodes {
            node.slow = None;
        }
        for link in &mut self.links {
            link.loss = None;
        }
    }

    /// Puts a host restart on the queue (the host process killed and started again).
    pub(crate) fn plan_host_restart(&mut self, at_ns: u64, host: usize) {
        self.events.schedule(at_ns, Event::HostRestart { host });
    }

    /// Puts a fault of the plan on the queue.
    pub(crate) fn plan_fault(&mut self, at_ns: u64, kind: FaultKind, duration_ns: u64) {
        self.events
            .schedule(at_ns, Event::Fault { kind, duration_ns });
    }

    fn draw_ns(&mut self, range: (u64, u64)) -> u64 {
        range.0 + self.rng.below(range.1 - range.0 + 1)
    }

    fn encode(&mut self, frame: &Frame) -> Option<Vec<u8>> {
        match wire::encode(frame, self.limits) {
            Ok(bytes) => Some(bytes),
            Err(error) => {
                self.find(format!("a frame could not be encoded: {error}"));
                None
            }
        }
    }

    fn decode(&mut self, bytes: &[u8]) -> Option<Frame> {
        match wire::decode(bytes, self.limits) {
            Ok((frame, used)) if used == bytes.len() => Some(frame),
            Ok((_, used)) => {
                self.find(format!(
                    "a frame of {} bytes decoded as {used}",
                    bytes.len()
                ));
                None
            }
            Err(error) => {
                self.find(format!("a frame sent could not be decoded: {error}"));
                None
            }
        }
    }

    fn slow_ns(&self, node: usize, now_ns: u64) -> u64 {
        match self.nodes[node].slow {
            Some((extra_ns, until_ns)) if now_ns < until_ns => extra_ns,
            _ => 0,
        }
    }

    fn send_from_node(&mut self, node: usize, port: Port, frame: Frame, now_ns: u64) {
        let Some(bytes) = self.encode(&frame) else {
            return;
        };
        let extra_ns = self.slow_ns(node, now_ns);
        self.counts.frames += 1;
        match port {
            Port::Host => {
                let host = self.node_host[node].expect("a node with a host port has a host");
                let at_ns = self.host_pipes[host][1].send(now_ns, bytes.len() as u64, extra_ns);
                let epoch = self.hosts[host].epoch;
                self.events
                    .schedule(at_ns, Event::NodeToHost { host, epoch, bytes });
            }
            Port::Link(index) => {
                let link = self.node_links[node][index];
                let end = usize::from(self.links[link].ends[0].0 != node);
                if !self.links[link].connected {
                    self.counts.frames_lost += 1;
                    return;
                }
                if let Some((chance, until_ns)) = self.links[link].loss {
                    if now_ns < until_ns && self.rng.chance(chance) {
                        self.counts.frames_lost += 1;
                        self.sever(link, now_ns);
                        return;
                    }
                }
                let state = &mut self.links[link];
                let at_ns = state.pipes[end].send(now_ns, bytes.len() as u64, extra_ns);
                let event = Event::LinkArrive {
                    link,
                    to_end: 1 - end,
                    epoch: state.epoch,
                    bytes,
                };
                self.events.schedule(at_ns, event);
            }
            Port::Device => unreachable!("the device port is served inside the node"),
        }
    }

    fn send_from_host(&mut self, host: usize, request: FlashRequest, now_ns: u64) {
        let frame = Frame {
            hops: 0,
            message: Message::Request(request),
        };
        let Some(bytes) = self.encode(&frame) else {
            return;
        };
        self.counts.frames += 1;
        let at_ns = self.host_pipes[host][0].send(now_ns, bytes.len() as u64, 0);
        let epoch = self.hosts[host].epoch;
        self.events
            .schedule(at_ns, Event::HostToNode { host, epoch, bytes });
    }

    /// Severs a link: what is on it is lost, each live end notices later, and it
    /// reconnects after a while (after the partition, if one holds it).
    fn sever(&mut self, link: usize, now_ns: u64) {
        if !self.links[link].connected {
            return;
        }
        self.counts.links_severed += 1;
        self.links[link].connected = false;
        self.links[link].epoch += 1;
        for end in 0..2 {
            let notice_ns = self.draw_ns(NOTICE_NS);
            self.events
                .schedule(now_ns + notice_ns, Event::Notice { link, end });
        }
        let reconnect_ns = self.draw_ns(RECONNECT_NS);
        let at_ns = (now_ns + reconnect_ns).max(self.links[link].partitioned_until_ns);
        self.events.schedule(at_ns, Event::Reconnect { link });
    }

    fn detach(&mut self, node: usize, port: Port) {
        let outputs = self.nodes[node].detach(port);
        self.nodes[node].push_outputs(outputs);
    }

    fn reconnect(&mut self, link: usize, now_ns: u64) {
        let state = &self.links[link];
        if state.connected {
            return;
        }
        if now_ns < state.partitioned_until_ns {
            let at_ns = state.partitioned_until_ns;
            self.events.schedule(at_ns, Event::Reconnect { link });
            return;
        }
        let ends = state.ends;
        if ends.iter().any(|&(node, _)| !self.nodes[node].alive()) {
            return;
        }
        for (node, index) in ends {
            self.detach(node, Port::Link(index));
        }
        let state = &mut self.links[link];
        state.epoch += 1;
        state.connected = true;
        let epoch = state.epoch;
        for (node, index) in ends {
            let outputs = self.nodes[node].attach(Port::Link(index), epoch);
            self.nodes[node].push_outputs(outputs);
        }
    }

    fn crash(&mut self, node: usize, down_ns: u64, now_ns: u64) {
        if !self.nodes[node].alive() {
            return;
        }
        self.counts.crashes += 1;
        self.nodes[node].crash(&mut self.rng);
        for link in self.node_links[node].clone() {
            self.sever(link, now_ns);
        }
        if let Some(host) = self.node_host[node] {
            self.hosts[host].epoch += 1;
            let epoch = self.hosts[host].epoch;
            let notice_ns = self.draw_ns(NOTICE_NS);
            self.events
                .schedule(now_ns + notice_ns, Event::HostNotice { host, epoch });
        }
        self.events
            .schedule(now_ns + down_ns, Event::Restart { node });
    }

    fn restart(&mut self, node: usize, now_ns: u64) {
        if self.nodes[node].alive() {
            return;
        }
        if self.nodes[node].device.in_flight() > 0 {
            let next_ns = self.nodes[node].device.next_event_ns().unwrap_or(now_ns);
            let at_ns = next_ns.max(now_ns + RESTART_POLL_NS);
            self.events.schedule(at_ns, Event::Restart { node });
            return;
        }
        if let Err(finding) = self.nodes[node].restart() {
            self.find(finding);
            return;
        }
        if let Some(host) = self.node_host[node] {
            let state = &mut self.hosts[host];
            if state.connected {
                state.fail_outstanding();
            }
            state.epoch += 1;
            state.connected = true;
            let epoch = state.epoch;
            let outputs = self.nodes[node].attach(Port::Host, epoch);
            assert!(outputs.is_empty(), "a restarted node has nothing to fail");
        }
        for link in self.node_links[node].clone() {
            self.reconnect(link, now_ns);
        }
    }

    /// The host process dies: its node takes the host port down at once (the connection
    /// resets), the host's requests in flight are lost with it, and a new host process
    /// (tags from 1 again) connects after a while.
    fn restart_host(&mut self, host: usize, now_ns: u64) {
        let node = self.hosts[host].node as usize;
        self.counts.faults_struck += 1;
        if self.nodes[node].alive() {
            self.detach(node, Port::Host);
        }
        let state = &mut self.hosts[host];
        state.epoch += 1;
        state.restart();
        let reconnect_ns = self.draw_ns(RECONNECT_NS);
        self.events
            .schedule(now_ns + reconnect_ns, Event::HostReconnect { host });
    }

    fn link_of(&self, node: usize) -> Option<usize> {
        let links = &self.node_links[node];
        (!links.is_empty()).then(|| links[node % links.len()])
    }

    fn strike(&mut self, kind: FaultKind, duration_ns: u64, now_ns: u64) {
        self.counts.faults_struck += 1;
        match kind {
            FaultKind::Crash => {}
            FaultKind::RestartNode { node } | FaultKind::Outage { node, .. } => {
                self.crash(node, duration_ns, now_ns);
            }
            FaultKind::Partition { node } => {
                if let Some(link) = self.link_of(node) {
                    let until_ns = now_ns + duration_ns;
                    let state = &mut self.links[link];
                    state.partitioned_until_ns = state.partitioned_until_ns.max(until_ns);
                    self.sever(link, now_ns);
                }
            }
            FaultKind::SlowDevice { node, factor } => {
                self.nodes[node].slow = Some((u64::from(factor) * 2_000, now_ns + duration_ns));
            }
            FaultKind::FailingDevice {
                node, failure_ppm, ..
            } => {
                if let Some(link) = self.link_of(node) {
                    let chance = f64::from(failure_ppm) / 10_000_000.0;
                    self.links[link].loss = Some((chance, now_ns + duration_ns));
                }
            }
        }
    }

    fn on_event(&mut self, event: Event, now_ns: u64) {
        match event {
            Event::LinkArrive {
                link,
                to_end,
                epoch,
                bytes,
            } => {
                if self.links[link].epoch != epoch {
                    self.counts.frames_lost += 1;
                    return;
                }
                let (node, index) = self.links[link].ends[to_end];
                let port_epoch = self.nodes[node]
                    .ports
                    .get(2 + index)
                    .and_then(|p| p.attached);
                if !self.nodes[node].alive() || port_epoch != Some(epoch) {
                    self.counts.frames_lost += 1;
                    return;
                }
                if let Some(frame) = self.decode(&bytes) {
                    self.nodes[node].ports[2 + index].inbox.push_back(frame);
                }
            }
            Event::HostToNode { host, epoch, bytes } => {
                let node = self.hosts[host].node as usize;
                if self.hosts[host].epoch != epoch || !self.nodes[node].alive() {
                    self.counts.frames_lost += 1;
                    return;
                }
                if let Some(frame) = self.decode(&bytes) {
                    self.nodes[node].ports[0].inbox.push_back(frame);
                }
            }
            Event::NodeToHost { host, epoch, bytes } => {
                if self.hosts[host].epoch != epoch || !self.hosts[host].connected {
                    self.counts.frames_lost += 1;
                    return;
                }
                let Some(frame) = self.decode(&bytes) else {
                    return;
                };
                self.counts.acks += 1;
                if let Message::Ack(ack) = &frame.message {
                    let status = status_name(&ack.status);
                    let mut fingerprint = mix(self.fingerprint, now_ns);
                    fingerprint = mix(fingerprint, (host as u64) << 48 | ack.tag);
                    for byte in status.bytes() {
                        fingerprint = mix(fingerprint, u64::from(byte));
                    }
                    self.fingerprint = fingerprint;
                }
                let Net {
                    hosts,
                    shape,
                    published,
                    ..
                } = self;
                if let Err(finding) = hosts[host].on_ack(frame, now_ns, shape, published) {
                    self.find(finding);
                }
            }
            Event::Notice { link, end } => {
                let (node, index) = self.links[link].ends[end];
                let attached = self.nodes[node]
                    .ports
                    .get(2 + index)
                    .and_then(|p| p.attached);
                let current = self.links[link].connected.then_some(self.links[link].epoch);
                if self.nodes[node].alive() && attached.is_some() && attached != current {
                    self.detach(node, Port::Link(index));
                }
            }
            Event::Reconnect { link } => self.reconnect(link, now_ns),
            Event::HostNotice { host, epoch } => {
                let state = &mut self.hosts[host];
                if state.epoch == epoch && state.connected {
                    state.connected = false;
                    state.fail_outstanding();
                }
            }
            Event::Restart { node } => self.restart(node, now_ns),
            Event::HostRestart { host } => self.restart_host(host, now_ns),
            Event::HostReconnect { host } => {
                let node = self.hosts[host].node as usize;
                let state = &mut self.hosts[host];
                if state.connected || !self.nodes[node].alive() {
                    return;
                }
                state.epoch += 1;
                state.connected = true;
                let epoch = state.epoch;
                let outputs = self.nodes[node].attach(Port::Host, epoch);
                self.nodes[node].push_outputs(outputs);
            }
            Event::Fault { kind, duration_ns } => self.strike(kind, duration_ns, now_ns),
            Event::Kick => {}
        }
    }

    /// Lets every node move what it can, then every host issue what it may.
    fn settle(&mut self, now_ns: u64) {
        for node in 0..self.nodes.len() {
            match self.nodes[node].process() {
                Ok(sent) => {
                    for (port, frame) in sent {
                        self.send_from_node(node, port, frame, now_ns);
                    }
                }
                Err(finding) => self.find(finding),
            }
        }
        for host in 0..self.hosts.len() {
            loop {
                let Net {
                    hosts,
                    shape,
                    published,
                    ..
                } = self;
                let Some(request) = hosts[host].next_request(shape, published) else {
                    break;
                };
                self.send_from_host(host, request, now_ns);
            }
        }
    }
}

impl Component for Net {
    fn name(&self) -> &'static str {
        "cluster"
    }

    fn next_due_ns(&self) -> Option<u64> {
        let devices = self
            .nodes
            .iter()
            .filter_map(|node| node.device.next_event_ns());
        devices.chain(self.events.next_due_ns()).min()
    }

    fn run_due(&mut self, now_ns: u64) {
        self.now_ns = now_ns;
        for node in &mut self.nodes {
            node.device.run_until(now_ns);
        }
        while let Some((_, event)) = self.events.pop_due(now_ns) {
            self.on_event(event, now_ns);
        }
        self.settle(now_ns);
    }
}
