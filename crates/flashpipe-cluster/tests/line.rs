//! Four router cores in a line (the paper's rack), a host on every node and an in-memory
//! device behind each, driven by one seeded loop that delivers frames in random order:
//! every request gets exactly one ack with its host's tag, routes cross 0 to 3 hops, and a
//! link going down mid-run leaks no tag. Frames between nodes pass each link's output stage
//! (a rotating-priority arbiter per datapath, two tokens per virtual channel, credits
//! returned frame by frame) and the wire's encoder and decoder.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use flashpipe_base::random::SplitMix64;
use flashpipe_cluster::arbiter::RequestCosts;
use flashpipe_cluster::credits::CreditReceiver;
use flashpipe_cluster::description::{line_text, ClusterDescription};
use flashpipe_cluster::output::{input_of, OutputStage};
use flashpipe_cluster::router::{Output, Port, Router};
use flashpipe_cluster::wire::{
    self, Channel, Frame, Message, PagePayload, Status, WireAck, WireLimits,
};
use flashpipe_flash::{AckStatus, FlashAddress, FlashCommand, FlashRequest};

const NODES: u32 = 4;
const HOST_TAGS: u64 = 12;
/// Input ports of an output stage: host, device, two links.
const INPUTS: usize = 4;
/// Frames an output stage holds per channel and input.
const QUEUE_LIMIT: usize = 256;
/// Tokens per channel on a link.
const WINDOW: u32 = 2;
const LIMITS: WireLimits = WireLimits {
    max_page_bytes: 8,
    max_spare_bytes: 2,
};

fn description(hosts: u32) -> ClusterDescription {
    let ports: Vec<u16> = (0..NODES).map(|node| 7400 + node as u16).collect();
    let attachments: Vec<u32> = (0..hosts).collect();
    let text = line_text(&ports, "minflash", "n", &attachments, 4096 / hosts);
    ClusterDescription::from_toml(&text).unwrap()
}

/// Something the loop will do.
enum Event {
    /// A frame arrives at a node's port; `link` names the (from, to) nodes of a link hop.
    Deliver {
        node: u32,
        port: Port,
        frame: Frame,
        link: Option<(u32, u32)>,
    },
    /// A node's device finishes a request.
    DeviceDone { node: u32, request: FlashRequest },
}

struct Host {
    node: u32,
    free_tags: Vec<u64>,
    /// Tag -> the device asked.
    outstanding: HashMap<u64, u32>,
    acks: u64,
}

struct World {
    description: ClusterDescription,
    routers: Vec<Router>,
    devices: Vec<HashMap<FlashAddress, Vec<u8>>>,
    events: Vec<Event>,
    hops_seen: BTreeSet<u8>,
    statuses: BTreeMap<&'static str, u64>,
    /// Each link direction's output stage, by (from, to) node.
    stages: HashMap<(u32, u32), OutputStage>,
    /// Each link direction's credit receiver, by (from, to) node.
    receivers: HashMap<(u32, u32), CreditReceiver>,
    /// The link that is down, as (left, right).
    down: Option<(u32, u32)>,
}

impl World {
    /// The link port of `node` that leads to its neighbour `other`.
    fn link_to(&self, node: u32, other: u32) -> usize {
        let neighbours = self.description.neighbours(node);
        neighbours.iter().position(|&id| id == other).unwrap()
    }

    /// Puts a router's outputs on the wire: every frame is encoded and decoded on the way.
    fn route(&mut self, node: u32, outputs: Vec<Output>) {
        for Output { port, from, frame } in outputs {
            let bytes = wire::encode(&frame, LIMITS).unwrap();
            let (frame, _) = wire::decode(&bytes, LIMITS).unwrap();
            match port {
                Port::Host => self.events.push(Event::Deliver {
                    node,
                    port: Port::Host,
                    frame,
                    link: None,
                }),
                Port::Device => {
                    let Message::Request(request) = frame.message else {
                        panic!("only requests go to the device");
                    };
                    assert_eq!(
                        request.command.address().device,
                        node,
                        "routed to the right device"
                    );
                    self.events.push(Event::DeviceDone { node, request });
                }
                Port::Link(link) => {
                    let neighbour = self.description.neighbours(node)[link];
                    let stage = self.stages.get_mut(&(node, neighbour)).unwrap();
                    stage.push(input_of(from), frame).unwrap();
                    self.pump(node, neighbour);
                }
            }
        }
    }

    /// Sends what the output stage from `from` to `to` lets go (arbiters and tokens).
    fn pump(&mut self, from: u32, to: u32) {
        if self.down == Some((from.min(to), from.max(to))) {
            return;
        }
        let back = self.link_to(to, from);
        let stage = self.stages.get_mut(&(from, to)).unwrap();
        while let Some(frame) = stage.next_frame() {
            let bytes = wire::encode(&frame, LIMITS).unwrap();
            let (frame, _) = wire::decode(&bytes, LIMITS).unwrap();
            self.events.push(Event::Deliver {
                node: to,
                port: Port::Link(back),
                frame,
                link: Some((from, to)),
            });
        }
    }

    /// A frame arrives over the link `from` -> `to`: credits feed the reverse stage; any
    /// other frame frees a place on its channel (a credit goes back) and goes to the router.
    fn arrive(&mut self, from: u32, to: u32, port: Port, frame: Frame) {
        if let Message::Credit(credit) = frame.message {
            self.stages
                .get_mut(&(to, from))
                .unwrap()
                .on_credit(credit)
                .unwrap();
            self.pump(to, from);
            return;
        }
        let channel = Channel::of(&frame.message).unwrap();
        if let Some(credit) = self
            .receivers
            .get_mut(&(from, to))
            .unwrap()
            .on_freed(channel)
        {
            let credit = Frame {
                hops: 0,
                message: Message::Credit(credit),
            };
            self.stages
                .get_mut(&(to, from))
                .unwrap()
                .push(input_of(port), credit)
                .unwrap();
            self.pump(to, from);
        }
        let outputs = self.routers[to as usize].receive(port, frame).unwrap();
        self.route(to, outputs);
    }

    fn device_ack(&mut self, node: u32, request: FlashRequest) -> Frame {
        let page = &mut self.devices[node as usize];
        let (payload, kind) = match request.command {
            FlashCommand::ReadPage { address } => (
                Some(PagePayload {
                    data: page.get(&address).cloned().unwrap_or_else(|| vec![0xFF; 8]),
                    spare: vec![],
                }),
                flashpipe_flash::CommandKind::Read,
            ),
            FlashCommand::WritePage { address, data, .. } => {
                page.insert(address, data);
                (None, flashpipe_flash::CommandKind::Write)
            }
            FlashCommand::EraseBlock { .. } => (None, flashpipe_flash::CommandKind::Erase),
            FlashCommand::CopyBack { .. } => unreachable!("the wire does not carry copy-back"),
        };
        Frame::from(WireAck {
            tag: request.tag,
            host: request.host,
            kind,
            status: Status::Flash(AckStatus::CLEAN),
            payload,
        })
    }

    fn link_down(&mut self, left: u32) {
        let right = left + 1;
        for (node, other) in [(left, right), (right, left)] {
            let link = self.link_to(node, other);
            let outputs = self.routers[node as usize].link_down(link);
            self.route(node, outputs);
        }
        self.down = Some((left, right));
        for pair in [(left, right), (right, left)] {
            self.stages
                .insert(pair, OutputStage::new(INPUTS, QUEUE_LIMIT, Some(WINDOW)));
        }
        self.events.retain(|event| {
            !matches!(event, Event::Deliver { link: Some((from, to)), .. }
                if (*from, *to) == (left, right) || (*from, *to) == (right, left))
        });
    }
}

fn request(random: &mut SplitMix64, host: u32, tag: u64, hosts: u32) -> (u32, FlashRequest) {
    let device = random.below(u64::from(NODES)) as u32;
    let quarter = 4096 / hosts;
    // Mostly the host's own blocks, sometimes another's (refused unless a read).
    let owner = if random.chance(0.9) {
        host
    } else {
        random.below(u64::from(hosts)) as u32
    };
    let address = FlashAddress {
        device,
        bus: random.below(8) as u32,
        chip: random.below(8) as u32,
        block: owner * quarter + random.below(4) as u32,
        page: random.below(4) as u32,
    };
    let command = match random.below(10) {
        0..=5 => FlashCommand::ReadPage { address },
        6..=8 => FlashCommand::WritePage {
            address,
            data: tag.to_le_bytes().to_vec(),
            spare: vec![host as u8],
        },
        _ => FlashCommand::EraseBlock { address },
    };
    (device, FlashRequest { tag, host, command })
}

fn run(seed: u64, hosts: u32) {
    let description = description(hosts);
    let routers = (0..NODES)
        .map(|node| {
            Router::new(
                description
                    .router_config(node, 8, 4, RequestCosts::REFLEX)
                    .unwrap(),
            )
            .unwrap()
        })
        .collect();
    let pairs: Vec<(u32, u32)> = (0..NODES - 1)
        .flat_map(|n| [(n, n + 1), (n + 1, n)])
        .collect();
    let stages = pairs
        .iter()
        .map(|&pair| (pair, OutputStage::new(INPUTS, QUEUE_LIMIT, Some(WINDOW))))
        .collect();
    let receivers = pairs
        .iter()
        .map(|&pair| (pair, CreditReceiver::new(1)))
        .collect();
    let mut world = World {
        description,
        routers,
        devices: vec![HashMap::new(); NODES as usize],
        events: Vec::new(),
        hops_seen: BTreeSet::new(),
        statuses: BTreeMap::new(),
        stages,
        receivers,
        down: None,
    };
    let mut hosts_state: Vec<Host> = (0..hosts)
        .map(|host| Host {
            node: host,
            free_tags: (0..HOST_TAGS).collect(),
            outstanding: HashMap::new(),
            acks: 0,
        })
        .collect();
    let mut random = SplitMix64::new(seed);
    let mut issued = 0u64;
    let issue_until = 4_000u64;
    let mut step = 0u64;
    let link_down_at = 1_500 + random.below(1_000);
    let mut link_is_down = false;
    loop {
        step += 1;
        if !link_is_down && step == link_down_at {
            world.link_down(random.below(u64::from(NODES - 1)) as u32);
            link_is_down = true;
        }
        // Hosts issue while they have tags, until the budget is spent.
        if issued < issue_until && random.chance(0.5) {
            let host = random.below(u64::from(hosts)) as usize;
            let state = &mut hosts_state[host];
            if let Some(tag) = state.free_tags.pop() {
                let (device, request) = request(&mut random, host as u32, tag, hosts);
                state.outstanding.insert(tag, device);
                issued += 1;
                let node = state.node;
                let frame = Frame {
                    hops: 0,
                    message: Message::Request(request),
                };
                let outputs = world.routers[node as usize]
                    .receive(Port::Host, frame)
                    .unwrap();
                world.route(node, outputs);
            }
            continue;
        }
        if world.events.is_empty() {
            if issued >= issue_until {
                break;
            }
            continue;
        }
        let index = random.index_below(world.events.len());
        match world.events.swap_remove(index) {
            Event::DeviceDone { node, request } => {
                let ack = world.device_ack(node, request);
                let outputs = world.routers[node as usize]
                    .receive(Port::Device, ack)
                    .unwrap();
                world.route(node, outputs);
            }
            Event::Deliver {
                node,
                port: Port::Host,
                frame,
                ..
            } => {
                let Message::Ack(ack) = frame.message else {
                    panic!("only acks reach a host");
                };
                let state = &mut hosts_state[node as usize];
                assert_eq!(ack.host, node, "the ack reached its own host");
                let device = state.outstanding.remove(&ack.tag).unwrap_or_else(|| {
                    panic!("host {node}: ack for tag {}, not outstanding", ack.tag)
                });
                state.free_tags.push(ack.tag);
                state.acks += 1;
                let distance = device.abs_diff(node) as u8;
                let name = match ack.status {
                    Status::Flash(AckStatus::Ok { .. }) => {
                        assert_eq!(frame.hops, distance, "hops of an answered request");
                        world.hops_seen.insert(frame.hops);
                        "ok"
                    }
                    Status::Unreachable {
                        device: failed,
                        hop,
                    } => {
                        assert!(
                            link_is_down,
                            "nothing is unreachable before the link goes down"
                        );
                        assert_eq!(failed, device);
                        assert!(hop < distance.max(1), "the hop {hop} lies on the path");
                        "unreachable"
                    }
                    Status::NotOwner {
                        device: refused, ..
                    } => {
                        assert_eq!(refused, device);
                        "not owner"
                    }
                    Status::Busy { .. } => "busy",
                    other => panic!("unexpected status {other:?}"),
                };
                *world.statuses.entry(name).or_default() += 1;
            }
            Event::Deliver {
                node,
                port,
                frame,
                link,
            } => {
                let (from, to) = link.expect("frames between nodes cross a link");
                assert_eq!(to, node);
                world.arrive(from, to, port, frame);
            }
        }
    }
    for state in &hosts_state {
        assert!(
            state.outstanding.is_empty(),
            "host {}: requests never answered",
            state.node
        );
    }
    assert_eq!(
        hosts_state.iter().map(|state| state.acks).sum::<u64>(),
        issued
    );
    for stage in world.stages.values() {
        assert_eq!(
            stage.queued(),
            0,
            "seed {seed}: frames left waiting for tokens"
        );
    }
    for router in &world.routers {
        router.assert_tags_balanced();
        assert_eq!(router.in_flight(), 0, "no tag leaked");
        assert_eq!(router.held(), 0);
    }
    assert_eq!(
        world.hops_seen,
        BTreeSet::from([0, 1, 2, 3]),
        "seed {seed}: routes of 0-3 hops"
    );
    for status in ["ok", "unreachable", "not owner", "busy"] {
        assert!(
            world.statuses.contains_key(status),
            "seed {seed}: no {status} ack in {:?}",
            world.statuses
        );
    }
}

#[test]
fn every_request_gets_one_ack_and_no_tag_leaks() {
    for seed in 0..12 {
        run(seed, 2 + (seed % 3) as u32);
    }
}
