//! One flash node of the cluster campaign, driven as `flashpipe-cluster-node`'s router
//! loop drives the real one: the same [`Router`] core, one [`OutputStage`] per output
//! port (credits on links), a [`CreditReceiver`] per link input, outputs that do not fit
//! their stage kept in order and their input not read until they do, and the device (a
//! [`Device`]: the node's `FlashArray` in virtual time) fed from the device port's stage
//! with its device id rewritten to 0. Processing takes no virtual time; frames leaving on
//! the host port and the links are handed to the world, which carries them.
//!
//! A crash loses the router, the stages and the queues; the device keeps its pages and
//! its requests in flight are cut (see [`crate::cluster::device`]). Planted bugs
//! ([`ClusterBug`]) hook in here.

use std::collections::VecDeque;

use flashpipe_cluster::credits::CreditReceiver;
use flashpipe_cluster::output::{input_of, port_of, LeftoverOutputs, OutputStage, DEVICE_INPUT};
use flashpipe_cluster::router::{Output, Port, Router, RouterConfig};
use flashpipe_cluster::wire::{Channel, Frame, Message, Status, WireAck};
use flashpipe_flash::{AckStatus, CommandKind};
use flashpipe_sim::SplitMix64;

use super::device::Device;
use super::ClusterBug;

/// A node's bounds: the node process's values by default; smaller ones make tags, hold
/// queues, tokens and stage queues run out, so the paths that wait are taken often.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLimits {
    /// Controller tags of each router.
    pub tags: u32,
    /// Requests each router holds per host while no tag is free.
    pub queue_limit: u32,
    /// Tokens per virtual channel on a link.
    pub link_window: u32,
    /// Tokens a receiver gives back at once.
    pub credit_batch: u32,
    /// Frames an output stage holds per channel and input.
    pub stage_frames: usize,
}

impl NodeLimits {
    /// The node process's bounds.
    pub const NODE_PROCESS: NodeLimits = NodeLimits {
        tags: 64,
        queue_limit: 64,
        link_window: 16,
        credit_batch: 4,
        stage_frames: 64,
    };
}
/// Rounds of processing one call may run before it is called stuck.
const PROCESS_ROUNDS_MAX: usize = 100_000;

/// One port's queues.
pub(crate) struct PortState {
    pub(crate) stage: OutputStage,
    pub(crate) credits_in: Option<CreditReceiver>,
    pub(crate) leftovers: VecDeque<Output>,
    pub(crate) inbox: VecDeque<Frame>,
    /// The connection's epoch while the port is attached (the device port: always).
    pub(crate) attached: Option<u64>,
}

fn fresh_stage(port: Port, inputs: usize, limits: NodeLimits) -> OutputStage {
    OutputStage::for_port(port, inputs, limits.stage_frames, limits.link_window)
}

fn fresh_ports(inputs: usize, limits: NodeLimits) -> Vec<PortState> {
    (0..inputs)
        .map(|index| PortState {
            stage: fresh_stage(port_of(index), inputs, limits),
            credits_in: None,
            leftovers: VecDeque::new(),
            inbox: VecDeque::new(),
            attached: (index == DEVICE_INPUT).then_some(0),
        })
        .collect()
}

/// A planted bug's trigger: it strikes once, on the first chance the seed draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Planted {
    pub(crate) bug: ClusterBug,
    pub(crate) struck: bool,
}

/// One node.
pub(crate) struct SimNode {
    pub(crate) id: u32,
    config: RouterConfig,
    limits: NodeLimits,
    /// The router; `None` while the node is down.
    pub(crate) router: Option<Router>,
    pub(crate) ports: Vec<PortState>,
    pub(crate) device: Device,
    /// Extra delay on every frame the node sends, until the time given.
    pub(crate) slow: Option<(u64, u64)>,
    pub(crate) planted: Option<Planted>,
    rng: SplitMix64,
    /// Requests the device carried out.
    pub(crate) device_requests: u64,
}

impl SimNode {
    pub(crate) fn new(
        config: RouterConfig,
        limits: NodeLimits,
        device: Device,
        planted: Option<ClusterBug>,
        rng: SplitMix64,
    ) -> Result<SimNode, String> {
        let inputs = 2 + config.links;
        let router = Router::new(config.clone())
            .map_err(|error| format!("node {}: router refused: {error}", config.device))?;
        let mut node = SimNode {
            id: config.device,
            config,
            limits,
            router: Some(router),
            ports: fresh_ports(inputs, limits),
            device,
            slow: None,
            planted: planted.map(|bug| Planted { bug, struck: false }),
            rng,
            device_requests: 0,
        };
        for link in 0..node.config.links {
            let failed = node.router_mut().link_down(link);
            assert!(
                failed.is_empty(),
                "nothing is in flight before the node starts"
            );
        }
        Ok(node)
    }

    pub(crate) fn alive(&self) -> bool {
        self.router.is_some()
    }

    fn router_mut(&mut self) -> &mut Router {
        self.router.as_mut().expect("a live node has a router")
    }

    /// Links of the node.
    pub(crate) fn links(&self) -> usize {
        self.config.links
    }

    /// Whether a planted bug of this kind strikes now (once per run, by a seeded chance).
    fn strikes(&mut self, bug: ClusterBug, chance: f64) -> bool {
        match &mut self.planted {
            Some(planted) if planted.bug == bug && !planted.struck => {
                if self.rng.chance(chance) {
                    planted.struck = true;
                    return true;
                }
                false
            }
            _ => false,
        }
    }

    /// Attaches a connection on a port (host or link) with its epoch.
    pub(crate) fn attach(&mut self, port: Port, epoch: u64) -> Vec<Output> {
        let index = input_of(port);
        let mut out = Vec::new();
        if self.ports[index].attached.is_some() {
            out = self.detach(port);
        }
        let inputs = self.ports.len();
        let state = &mut self.ports[index];
        state.attached = Some(epoch);
        state.stage = fresh_stage(port, inputs, self.limits);
        if let Port::Link(link) = port {
            state.credits_in = Some(CreditReceiver::new(self.limits.credit_batch));
            self.router_mut().link_up(link);
        }
        out
    }

    /// The connection on a port is gone: its stage and queues are dropped and the router
    /// told (a link going down fails what went out on it). Returns the router's outputs,
    /// which the caller pushes.
    pub(crate) fn detach(&mut self, port: Port) -> Vec<Output> {
        let index = input_of(port);
        if self.ports[index].attached.take().is_none() {
            return Vec::new();
        }
        let inputs = self.ports.len();
        let state = &mut self.ports[index];
        state.stage = fresh_stage(port, inputs, self.limits);
        state.credits_in = None;
        state.inbox.clear();
        for other in &mut self.ports {
            other.leftovers.retain(|output| output.port != port);
        }
        let outputs = match port {
            Port::Link(link) => self.router_mut().link_down(link),
            Port::Host => self.router_mut().host_down(),
            Port::Device => Vec::new(),
        };
        if matches!(port, Port::Link(_)) && self.strikes(ClusterBug::LinkDownUnanswered, 0.5) {
            return Vec::new();
        }
        outputs
    }

    /// The node crashes: router, stages and queues are lost; the device's requests in
    /// flight are cut.
    pub(crate) fn crash(&mut self, generator: &mut SplitMix64) {
        self.router = None;
        self.ports = fresh_ports(self.ports.len(), self.limits);
        self.device.cut_power(generator);
    }

    /// The node starts again with a fresh router (links down until they reconnect).
    pub(crate) fn restart(&mut self) -> Result<(), String> {
        assert!(!self.alive(), "only a crashed node restarts");
        let mut router = Router::new(self.config.clone())
            .map_err(|error| format!("node {}: router refused: {error}", self.id))?;
        for link in 0..self.config.links {
            let failed = router.link_down(link);
            assert!(failed.is_empty(), "nothing is in flight after a restart");
        }
        self.router = Some(router);
        self.ports = fresh_ports(self.ports.len(), self.limits);
        Ok(())
    }

    /// Takes frames from the inboxes whose input is not held; returns whether any moved.
    fn drain_inboxes(&mut self) -> Result<bool, String> {
        let mut moved = false;
        for index in 0..self.ports.len() {
            while self.ports[index].leftovers.is_empty() {
                let Some(frame) = self.ports[index].inbox.pop_front() else {
                    break;
                };
                moved = true;
                self.on_frame(index, frame)?;
            }
            if self.ports[index].inbox.is_empty() {
                let state = &mut self.ports[index];
                if let Some(receiver) = &mut state.credits_in {
                    for credit in receiver.flush() {
                        state.stage.push_credit(index, credit);
                        moved = true;
                    }
                }
            }
        }
        Ok(moved)
    }

    fn on_frame(&mut self, index: usize, frame: Frame) -> Result<(), String> {
        let port = port_of(index);
        if let Message::Credit(credit) = frame.message {
            if matches!(port, Port::Link(_)) && self.strikes(ClusterBug::CreditDropped, 0.05) {
                return Ok(());
            }
            return self.ports[index]
                .stage
                .on_credit(credit)
                .map_err(|error| format!("node {}: a link's credit refused: {error}", self.id));
        }
        let channel = Channel::of(&frame.message);
        let outputs = self
            .router_mut()
            .receive(port, frame)
            .map_err(|error| format!("node {}: the router refused a frame: {error}", self.id))?;
        self.push_outputs(outputs);
        let state = &mut self.ports[index];
        if let (Some(receiver), Some(channel)) = (&mut state.credits_in, channel) {
            if let Some(credit) = receiver.on_freed(channel) {
                state.stage.push_credit(index, credit);
            }
        }
        Ok(())
    }

    /// Feeds the device's ready acks to the router (while the device port's outputs fit).
    fn poll_device(&mut self) -> Result<bool, String> {
        if !self.ports[DEVICE_INPUT].leftovers.is_empty() {
            return Ok(false);
        }
        let acks = self.device.poll();
        if self.router.is_none() {
            assert!(acks.is_empty(), "a crashed node's acks are all cut");
            return Ok(false);
        }
        let moved = !acks.is_empty();
        for ack in acks {
            self.feed_device_ack(Frame::from_device_ack(ack))?;
        }
        Ok(moved)
    }

    fn feed_device_ack(&mut self, frame: Frame) -> Result<(), String> {
        let outputs = self
            .router_mut()
            .receive(Port::Device, frame)
            .map_err(|error| {
                format!(
                    "node {}: the router refused the device's ack: {error}",
                    self.id
                )
            })?;
        self.push_outputs(outputs);
        Ok(())
    }

    /// Sends what the stages let go: the device port's requests to the device, the
    /// others' frames into `sent`. Returns whether anything moved.
    fn pump(&mut self, sent: &mut Vec<(Port, Frame)>) -> Result<bool, String> {
        let mut moved = false;
        while let Some(frame) = self.ports[DEVICE_INPUT].stage.next_frame() {
            moved = true;
            let Message::Request(mut request) = frame.message else {
                return Err(format!(
                    "node {}: the router sent the device something other than a request",
                    self.id
                ));
            };
            let (tag, host, kind) = (request.tag, request.host, request.command.kind());
            request.command.set_device(0);
            if kind == CommandKind::Write && self.strikes(ClusterBug::ProgramAckedUndone, 0.1) {
                let lie = WireAck {
                    tag,
                    host,
                    kind,
                    status: Status::Flash(AckStatus::CLEAN),
                    payload: None,
                };
                self.feed_device_ack(Frame {
                    hops: 0,
                    message: Message::Ack(lie),
                })?;
                continue;
            }
            self.device_requests += 1;
            if let Err(error) = self.device.submit(request) {
                return Err(format!(
                    "node {}: the device refused a request: {error}",
                    self.id
                ));
            }
        }
        for index in 0..self.ports.len() {
            if index == DEVICE_INPUT {
                continue;
            }
            let port = port_of(index);
            let attached = self.ports[index].attached.is_some();
            while let Some(frame) = self.ports[index].stage.next_frame() {
                moved = true;
                if attached {
                    sent.push((port, frame));
                }
            }
        }
        Ok(moved)
    }

    /// Runs the node until nothing moves; returns the frames to carry.
    pub(crate) fn process(&mut self) -> Result<Vec<(Port, Frame)>, String> {
        let mut sent = Vec::new();
        if !self.alive() {
            self.device.poll();
            return Ok(sent);
        }
        for _ in 0..PROCESS_ROUNDS_MAX {
            let mut moved = self.flush_leftovers();
            moved |= self.drain_inboxes()?;
            moved |= self.poll_device()?;
            moved |= self.pump(&mut sent)?;
            if !moved {
                return Ok(sent);
            }
        }
        Err(format!(
            "node {}: still moving frames after {PROCESS_ROUNDS_MAX} rounds (a livelock)",
            self.id
        ))
    }

    /// Why the node is not at rest, if it is not: tags in use, requests held, frames
    /// queued, tokens not returned, device requests in flight.
    pub(crate) fn unrest(&self) -> Option<String> {
        let id = self.id;
        let Some(router) = &self.router else {
            return Some(format!("node {id} is down at the end"));
        };
        router.assert_tags_balanced();
        if router.in_flight() > 0 {
            return Some(format!(
                "node {id}: {} controller tags still in use with nothing in flight (tags leaked)",
                router.in_flight()
            ));
        }
        if router.held() > 0 {
            return Some(format!(
                "node {id}: {} requests still held for a tag",
                router.held()
            ));
        }
        if self.device.in_flight() > 0 {
            return Some(format!(
                "node {id}: {} requests still at the device",
                self.device.in_flight()
            ));
        }
        for (index, state) in self.ports.iter().enumerate() {
            let port = port_of(index);
            if state.stage.queued() > 0 || !state.leftovers.is_empty() || !state.inbox.is_empty() {
                return Some(format!(
                    "node {id}: frames still queued at port {}",
                    port_name(port)
                ));
            }
            if let Port::Link(link) = port {
                if state.attached.is_none() {
                    return Some(format!("node {id}: link {link} is still down at the end"));
                }
                for channel in Channel::ALL {
                    let tokens = state.stage.tokens(channel).unwrap_or(0);
                    let window = self.limits.link_window;
                    if tokens != window {
                        return Some(format!(
                            "node {id}: link {link} holds {tokens} of its {window} tokens on channel {} at rest (credits leaked)",
                            channel.code()
                        ));
                    }
                }
            }
        }
        None
    }
}

impl LeftoverOutputs for SimNode {
    fn leftovers(&mut self, input: usize) -> Option<&mut VecDeque<Output>> {
        self.ports.get_mut(input).map(|state| &mut state.leftovers)
    }

    fn attached_stage(&mut self, port: Port) -> Option<&mut OutputStage> {
        let state = &mut self.ports[input_of(port)];
        state.attached.is_some().then_some(&mut state.stage)
    }
}

/// A port's name in findings.
pub(crate) fn port_name(port: Port) -> String {
    match port {
        Port::Host => "host".to_string(),
        Port::Device => "device".to_string(),
        Port::Link(link) => format!("link {link}"),
    }
}
