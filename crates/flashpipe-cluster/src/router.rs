//! One node's router (paper Fig. 3), without I/O: frames come in on a port, frames to send
//! come out with the port to send them on.
//!
//! Ports: the local host (if one is attached), the local device, and any number of links
//! (a linear array has a left and a right one), with a next-hop table by device id.
//!
//! Every request entering the router, from the host or from a link, gets a controller tag
//! from a bounded free queue and a table row (source port, the tag the source used, host,
//! the port it went out on, hops), so hosts using the same tags never collide; its ack,
//! coming back on that port, is renamed to the source's tag and sent to the source port,
//! and the tag goes back to the free queue. Each output (the device and each link) has its
//! own free queue of `tags` tags: a request passing through holds its tag here while it
//! waits for one at the next router, and with one shared queue, requests crossing a link
//! in both directions could hold every tag on both sides and wait for each other forever;
//! with a queue per output, tags towards one neighbour wait only on tags further the same
//! way or on a device, never in a cycle on a line. With no free tag for its output a
//! request is held in its host's bounded queue, and a weighted arbiter
//! ([`crate::arbiter::Weighted`], costs per kind) picks which host's request goes next: each
//! host offers its oldest request whose output has a free tag (requests to one output keep
//! their order), so a request waiting for a busy output never blocks one of the same host
//! to another. With its host's queue full the request is answered `Busy`, never dropped.
//!
//! Requests route by device id; each link crossed adds one to the frame's hop count. At
//! the device's node the [`crate::shares::Shares`] refuse a program or erase outside the
//! host's share with `NotOwner` before the device sees it. A link going down fails every
//! request that went out on it with `Unreachable{device, hop}` and returns its tags; rows
//! whose source was that link are orphaned (their upstream router answers them) and free
//! their tag when the ack comes back; the host's connection going down
//! ([`Router::host_down`]) orphans the host's rows the same way.
//! [`Router::assert_tags_balanced`] checks that no tag leaks.

use std::collections::{BTreeMap, VecDeque};

use flashpipe_flash::{CommandKind, FlashRequest};

use crate::arbiter::{RequestCosts, Weighted};
use crate::shares::Shares;
use crate::wire::{Frame, Message, Status, WireAck};

/// A port of the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Port {
    /// The attached host.
    Host,
    /// The node's own device.
    Device,
    /// A link to a neighbour, by index.
    Link(usize),
}

/// A router's configuration.
#[derive(Debug, Clone)]
pub struct RouterConfig {
    /// The device id of this node's device.
    pub device: u32,
    /// Whether a host is attached.
    pub has_host: bool,
    /// Link ports.
    pub links: usize,
    /// The link towards each other device.
    pub next_hop: BTreeMap<u32, usize>,
    /// Controller tags per output (the device and each link): requests in flight through
    /// this router to that output.
    pub tags: u32,
    /// Requests held per host while no tag is free.
    pub queue_limit: u32,
    /// Each host's weight (index: host id); the length is the cluster's host count.
    pub host_weights: Vec<u32>,
    /// What each kind of request costs its host's share.
    pub costs: RequestCosts,
    /// Who may program and erase this device's blocks; `None` lets every host.
    pub shares: Option<Shares>,
}

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouterConfigError {
    /// A bound that must be at least 1 is 0.
    #[error("{field} is 0; it must be at least 1")]
    Zero {
        /// The field.
        field: &'static str,
    },
    /// A next hop names a link the router does not have.
    #[error("next hop for device {device} is link {link}, but the node has {links} links")]
    NoSuchLink {
        /// The device.
        device: u32,
        /// The link named.
        link: usize,
        /// Links.
        links: usize,
    },
    /// The next-hop table routes the node's own device to a link.
    #[error("next hop table routes the node's own device {device} to a link")]
    OwnDeviceRouted {
        /// The device.
        device: u32,
    },
    /// Shares of another device.
    #[error("shares are for device {shares}, the node's device is {device}")]
    SharesOfAnotherDevice {
        /// The shares' device.
        shares: u32,
        /// The node's.
        device: u32,
    },
}

/// A frame to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// Where.
    pub port: Port,
    /// The input it belongs to, for the output's arbiters: the port the request or ack
    /// came in on (a refusal: the request's port; a link's failures: that link).
    pub from: Port,
    /// What.
    pub frame: Frame,
}

/// Why an incoming frame was refused (nothing changed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouterError {
    /// A port the router does not have, or a link that is down.
    #[error("frame on a port that is absent or down")]
    PortUnavailable,
    /// A request from the device, or an ack from the host.
    #[error("a {what} cannot come in on this port")]
    WrongDirection {
        /// What came in.
        what: &'static str,
    },
    /// An ack for a tag not in flight on that port (late, duplicated or forged).
    #[error("ack for controller tag {tag}, which is not in flight on that port")]
    UnknownTag {
        /// The tag.
        tag: u64,
    },
    /// Credits belong to the link, not to the router.
    #[error("credit frames are handled by the link, not the router")]
    Credit,
}

/// A row of the tag table.
#[derive(Debug, Clone)]
struct Row {
    source: Port,
    source_tag: u64,
    host: u32,
    out: Port,
    device: u32,
    hops: u8,
    kind: CommandKind,
    /// The source is gone; the ack only frees the tag.
    orphaned: bool,
}

/// A request held for a tag.
#[derive(Debug, Clone)]
struct Held {
    source: Port,
    hops: u8,
    request: FlashRequest,
}

/// Counts of what the router did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouterCounters {
    /// Requests given a controller tag.
    pub renamed: u64,
    /// Requests answered `Busy`.
    pub busy: u64,
    /// Requests answered `Unreachable`.
    pub unreachable: u64,
    /// Requests answered `NotOwner`.
    pub not_owner: u64,
    /// Acks that freed an orphaned row.
    pub orphan_acks: u64,
}

/// The controller tags: a free queue per output and the table, indexed by tag; tags
/// `o * per_output .. (o + 1) * per_output` belong to output `o` (the device 0, link `i`
/// at `1 + i`).
#[derive(Debug)]
struct TagTable {
    rows: Vec<Option<Row>>,
    free: Vec<VecDeque<u32>>,
    per_output: u32,
}

impl TagTable {
    fn output_of(port: Port) -> usize {
        match port {
            Port::Device => 0,
            Port::Link(link) => 1 + link,
            Port::Host => unreachable!("no request goes out to the host"),
        }
    }

    fn release(&mut self, tag: u32) {
        let output = (tag / self.per_output) as usize;
        self.free[output].push_back(tag);
    }

    fn free_count(&self) -> usize {
        self.free.iter().map(VecDeque::len).sum()
    }
}

/// Requests waiting for a tag, one queue per host, and the arbiter among the hosts.
#[derive(Debug)]
struct HoldQueues {
    queues: Vec<VecDeque<Held>>,
    arbiter: Weighted,
}

/// One node's router.
#[derive(Debug)]
pub struct Router {
    config: RouterConfig,
    tags: TagTable,
    hold: HoldQueues,
    links_up: Vec<bool>,
    counters: RouterCounters,
}

impl Router {
    /// A router with every tag free and every link up.
    pub fn new(config: RouterConfig) -> Result<Router, RouterConfigError> {
        for (field, value) in [
            ("tags", config.tags as usize),
            ("queue limit", config.queue_limit as usize),
            ("host count", config.host_weights.len()),
            (
                "smallest host weight",
                config.host_weights.iter().copied().min().unwrap_or(0) as usize,
            ),
            (
                "smallest request cost",
                config
                    .costs
                    .read
                    .min(config.costs.write)
                    .min(config.costs.erase) as usize,
            ),
        ] {
            if value == 0 {
                return Err(RouterConfigError::Zero { field });
            }
        }
        for (&device, &link) in &config.next_hop {
            if device == config.device {
                return Err(RouterConfigError::OwnDeviceRouted { device });
            }
            if link >= config.links {
                return Err(RouterConfigError::NoSuchLink {
                    device,
                    link,
                    links: config.links,
                });
            }
        }
        if let Some(shares) = &config.shares {
            if shares.device() != config.device {
                return Err(RouterConfigError::SharesOfAnotherDevice {
                    shares: shares.device(),
                    device: config.device,
                });
            }
        }
        Ok(Router {
            tags: TagTable {
                rows: vec![None; config.tags as usize * (1 + config.links)],
                free: (0..1 + config.links as u32)
                    .map(|output| (output * config.tags..(output + 1) * config.tags).collect())
                    .collect(),
                per_output: config.tags,
            },
            hold: HoldQueues {
                queues: vec![VecDeque::new(); config.host_weights.len()],
                arbiter: Weighted::new(config.host_weights.clone(), config.costs.max()),
            },
            links_up: vec![true; config.links],
            counters: RouterCounters::default(),
            config,
        })
    }

    /// What the router did so far.
    pub fn counters(&self) -> &RouterCounters {
        &self.counters
    }

    /// Controller tags in use (over every output).
    pub fn in_flight(&self) -> usize {
        self.tags.rows.len() - self.tags.free_count()
    }

    /// Requests held for a tag.
    pub fn held(&self) -> usize {
        self.hold.queues.iter().map(VecDeque::len).sum()
    }

    /// Whether a link is up.
    pub fn link_is_up(&self, link: usize) -> bool {
        self.links_up.get(link).copied().unwrap_or(false)
    }

    fn port_available(&self, port: Port) -> bool {
        match port {
            Port::Host => self.config.has_host,
            Port::Device => true,
            Port::Link(link) => self.link_is_up(link),
        }
    }

    /// Takes one frame that came in on `port`; returns the frames to send.
    pub fn receive(&mut self, port: Port, frame: Frame) -> Result<Vec<Output>, RouterError> {
        if !self.port_available(port) {
            return Err(RouterError::PortUnavailable);
        }
        let mut out = Vec::new();
        match frame.message {
            Message::Credit(_) => return Err(RouterError::Credit),
            Message::Request(request) => {
                if port == Port::Device {
                    return Err(RouterError::WrongDirection { what: "request" });
                }
                self.admit(port, frame.hops, request, &mut out);
            }
            Message::Ack(ack) => {
                if port == Port::Host {
                    return Err(RouterError::WrongDirection { what: "ack" });
                }
                self.on_ack(port, frame.hops, ack, &mut out)?;
            }
        }
        self.dispatch_held(&mut out);
        Ok(out)
    }

    /// Answers a request without giving it a tag.
    fn answer(
        source: Port,
        hops: u8,
        request: &FlashRequest,
        status: Status,
        out: &mut Vec<Output>,
    ) {
        out.push(Output {
            port: source,
            from: source,
            frame: Frame {
                hops,
                message: Message::Ack(WireAck {
                    tag: request.tag,
                    host: request.host,
                    kind: request.command.kind(),
                    status,
                    payload: None,
                }),
            },
        });
    }

    fn admit(&mut self, source: Port, hops: u8, request: FlashRequest, out: &mut Vec<Output>) {
        let host_count = self.config.host_weights.len() as u32;
        if request.host >= host_count {
            let status = Status::UnknownHost {
                host: request.host,
                host_count,
            };
            Self::answer(source, hops, &request, status, out);
            return;
        }
        let queue = &mut self.hold.queues[request.host as usize];
        if queue.len() >= self.config.queue_limit as usize {
            self.counters.busy += 1;
            let status = Status::Busy {
                queue_limit: self.config.queue_limit,
            };
            Self::answer(source, hops, &request, status, out);
            return;
        }
        queue.push_back(Held {
            source,
            hops,
            request,
        });
    }

    /// Where a request goes: an output, or a refusal (which needs no tag).
    fn route(&self, request: &FlashRequest, hops: u8) -> Result<Port, Status> {
        let device = request.command.address().device;
        if device == self.config.device {
            if let Some(Err(status)) = self.config.shares.as_ref().map(|s| s.check(request)) {
                return Err(status);
            }
            return Ok(Port::Device);
        }
        match self.config.next_hop.get(&device) {
            Some(&link) if self.links_up[link] => Ok(Port::Link(link)),
            _ => Err(Status::Unreachable { device, hop: hops }),
        }
    }

    /// The position of a host's oldest held request that can go now (refused, or its
    /// output has a free tag), with its cost.
    fn first_ready(&self, host: usize) -> Option<(usize, u32)> {
        self.hold.queues[host]
            .iter()
            .position(|held| match self.route(&held.request, held.hops) {
                Ok(port) => !self.tags.free[TagTable::output_of(port)].is_empty(),
                Err(_) => true,
            })
            .map(|index| {
                let kind = self.hold.queues[host][index].request.command.kind();
                (index, self.config.costs.of(kind))
            })
    }

    /// Gives free tags to held requests, host by host as the arbiter picks.
    fn dispatch_held(&mut self, out: &mut Vec<Output>) {
        loop {
            let ready: Vec<Option<(usize, u32)>> = (0..self.hold.queues.len())
                .map(|host| self.first_ready(host))
                .collect();
            let heads: Vec<Option<u32>> = ready
                .iter()
                .map(|entry| entry.map(|(_, cost)| cost))
                .collect();
            let Some(host) = self.hold.arbiter.pick(&heads) else {
                return;
            };
            let (index, _) = ready[host].expect("the arbiter picks a host with a ready request");
            let held = self.hold.queues[host]
                .remove(index)
                .expect("the ready request is in its host's queue");
            self.dispatch(held, out);
        }
    }

    /// Routes one request: refused, or renamed and sent on.
    fn dispatch(&mut self, held: Held, out: &mut Vec<Output>) {
        let Held {
            source,
            hops,
            request,
        } = held;
        let device = request.command.address().device;
        let port = match self.route(&request, hops) {
            Ok(port) => port,
            Err(status) => {
                match status {
                    Status::NotOwner { .. } => self.counters.not_owner += 1,
                    _ => self.counters.unreachable += 1,
                }
                Self::answer(source, hops, &request, status, out);
                return;
            }
        };
        let tag = self.tags.free[TagTable::output_of(port)]
            .pop_front()
            .expect("dispatch runs with a free tag for its output");
        let slot = &mut self.tags.rows[tag as usize];
        assert!(slot.is_none(), "a free tag has no row");
        *slot = Some(Row {
            source,
            source_tag: request.tag,
            host: request.host,
            out: port,
            device,
            hops,
            kind: request.command.kind(),
            orphaned: false,
        });
        self.counters.renamed += 1;
        let out_hops = match port {
            Port::Link(_) => hops.saturating_add(1),
            _ => hops,
        };
        out.push(Output {
            port,
            from: source,
            frame: Frame {
                hops: out_hops,
                message: Message::Request(FlashRequest {
                    tag: u64::from(tag),
                    ..request
                }),
            },
        });
    }

    fn on_ack(
        &mut self,
        port: Port,
        hops: u8,
        ack: WireAck,
        out: &mut Vec<Output>,
    ) -> Result<(), RouterError> {
        let unknown = RouterError::UnknownTag { tag: ack.tag };
        let index = usize::try_from(ack.tag).map_err(|_| unknown.clone())?;
        let matches = self
            .tags
            .rows
            .get(index)
            .and_then(Option::as_ref)
            .is_some_and(|row| row.out == port && row.kind == ack.kind && row.host == ack.host);
        if !matches {
            return Err(unknown);
        }
        let row = self.tags.rows[index]
            .take()
            .expect("the row was just found");
        self.tags.release(index as u32);
        if row.orphaned {
            self.counters.orphan_acks += 1;
            return Ok(());
        }
        // The device's ack carries the hops its request made; acks keep them on the way back.
        let hops = if port == Port::Device { row.hops } else { hops };
        out.push(Output {
            port: row.source,
            from: port,
            frame: Frame {
                hops,
                message: Message::Ack(WireAck {
                    tag: row.source_tag,
                    ..ack
                }),
            },
        });
        Ok(())
    }

    /// Marks a link down: requests that went out on it fail with `Unreachable`, requests
    /// that came in on it are orphaned or, if still held, forgotten (the router upstream
    /// answers them). Returns the frames to send.
    pub fn link_down(&mut self, link: usize) -> Vec<Output> {
        let mut out = Vec::new();
        if !self.link_is_up(link) {
            return out;
        }
        self.links_up[link] = false;
        let port = Port::Link(link);
        for tag in 0..self.tags.rows.len() {
            let Some(row) = self.tags.rows[tag].as_mut() else {
                continue;
            };
            if row.source == port {
                row.orphaned = true;
            }
            if row.out != port {
                continue;
            }
            let row = self.tags.rows[tag].take().expect("the row was just seen");
            self.tags.release(tag as u32);
            if row.orphaned {
                continue;
            }
            self.counters.unreachable += 1;
            out.push(Output {
                port: row.source,
                from: port,
                frame: Frame {
                    hops: row.hops,
                    message: Message::Ack(WireAck {
                        tag: row.source_tag,
                        host: row.host,
                        kind: row.kind,
                        status: Status::Unreachable {
                            device: row.device,
                            hop: row.hops,
                        },
                        payload: None,
                    }),
                },
            });
        }
        for queue in &mut self.hold.queues {
            queue.retain(|held| held.source != port);
        }
        self.dispatch_held(&mut out);
        out
    }

    /// The attached host's connection is gone: rows whose source is the host are orphaned
    /// (their acks, when they come back, only free the tag) and its requests still held
    /// for a tag are forgotten. Nothing is sent to the host afterwards for those requests;
    /// a host connecting again starts with no request in flight. Returns the frames to send
    /// (held requests of other sources given the tags now free).
    pub fn host_down(&mut self) -> Vec<Output> {
        let mut out = Vec::new();
        for row in self.tags.rows.iter_mut().flatten() {
            if row.source == Port::Host {
                row.orphaned = true;
            }
        }
        for queue in &mut self.hold.queues {
            queue.retain(|held| held.source != Port::Host);
        }
        self.dispatch_held(&mut out);
        out
    }

    /// Marks a link up again.
    pub fn link_up(&mut self, link: usize) {
        if let Some(up) = self.links_up.get_mut(link) {
            *up = true;
        }
    }

    /// Panics unless every controller tag is either free (once, in its output's queue) or
    /// held by one row (going out on its output).
    pub fn assert_tags_balanced(&self) {
        let mut seen = vec![false; self.tags.rows.len()];
        for (output, free) in self.tags.free.iter().enumerate() {
            for &tag in free {
                let tag = tag as usize;
                assert_eq!(
                    tag / self.tags.per_output as usize,
                    output,
                    "tag {tag} is free in another output's queue"
                );
                assert!(!seen[tag], "tag {tag} is free twice");
                assert!(self.tags.rows[tag].is_none(), "free tag {tag} has a row");
                seen[tag] = true;
            }
        }
        for (tag, row) in self.tags.rows.iter().enumerate() {
            if let Some(row) = row {
                let output = TagTable::output_of(row.out);
                assert_eq!(
                    tag / self.tags.per_output as usize,
                    output,
                    "tag {tag} is in use on another output"
                );
            }
        }
        let in_use = self.tags.rows.iter().filter(|row| row.is_some()).count();
        let free = self.tags.free_count();
        assert_eq!(
            free + in_use,
            self.tags.rows.len(),
            "tags leaked: {free} free, {in_use} in use, {} in all",
            self.tags.rows.len()
        );
    }
}

#[cfg(test)]
#[path = "router_tests.rs"]
mod tests;
