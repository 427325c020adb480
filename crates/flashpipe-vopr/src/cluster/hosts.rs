//! The hosts of the cluster campaign: each attached to one node, owning a share of every
//! device's blocks, issuing a seeded workload (erase an owned block, program its pages in
//! order, read pages of any device, published ones checked) with illegal requests mixed
//! in (program or erase a block it does not own, program out of order, program a page
//! already programmed) that must get their typed refusal. Every ack is judged as it
//! arrives: a request gets exactly one, of its kind and host, with the status its request
//! deserves, or a failure that names the device and the hop.

use std::collections::{BTreeMap, BTreeSet};

use flashpipe_cluster::wire::{Frame, Message, Status};
use flashpipe_flash::{
    AckStatus, CommandKind, FlashAddress, FlashCommand, FlashRequest, RuleViolation,
};
use flashpipe_sim::SplitMix64;

use super::check::{address_of, page_contents, page_text, BlockKey, PageKey, Published};

/// The shape every host draws its requests in.
#[derive(Debug, Clone)]
pub(crate) struct Shape {
    pub(crate) nodes: u32,
    pub(crate) hosts: u32,
    pub(crate) buses: u32,
    pub(crate) chips: u32,
    pub(crate) pages: u32,
    pub(crate) data_bytes: usize,
    pub(crate) spare_bytes: usize,
    /// Blocks (of every chip) each host owns: host `h` owns `h * n .. (h + 1) * n`.
    pub(crate) blocks_per_host: u32,
}

/// Blocks past the hosts' shares that nobody owns.
pub(crate) const UNOWNED_BLOCKS: u32 = 2;

impl Shape {
    /// Links between a node and a device in the linear array.
    pub(crate) fn hops(&self, node: u32, device: u32) -> u8 {
        node.abs_diff(device) as u8
    }

    fn used_blocks(&self) -> u32 {
        self.hosts * self.blocks_per_host + UNOWNED_BLOCKS
    }
}

/// What a host knows of one of its blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum View {
    /// Erased, then programmed up to (not including) `next`.
    Erased { next: u32 },
    /// A request on it failed: erase before programming again.
    Unknown,
    /// It answered BadBlock.
    Bad,
}

/// What an ack must say.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expect {
    Erase,
    Program {
        page: PageKey,
        seed: u64,
    },
    Read {
        page: PageKey,
        check: Option<(u64, u64)>,
    },
    NotOwner {
        device: u32,
        block: u32,
    },
    OutOfOrder {
        expected_page: u32,
        page: u32,
    },
    NotErased {
        block: u32,
        page: u32,
    },
}

#[derive(Debug, Clone)]
struct Pending {
    expect: Expect,
    kind: CommandKind,
    device: u32,
    /// The host's own block the request is on (one request per block at a time).
    own_block: Option<BlockKey>,
}

/// What a host is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Issue nothing more.
    Idle,
    /// The seeded mixed workload, `budget` requests more.
    Mixed { budget: u64 },
    /// Read back these pages (each checked).
    Sweep { pages: Vec<PageKey> },
    /// Read pages of one device, each chip in turn, counting what completes within the
    /// window.
    Fairness { device: u32, window_ns: (u64, u64) },
}

/// What a host saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostCounts {
    /// Requests issued.
    pub issued: u64,
    /// Acks received (or requests failed when the host's node went down).
    pub answered: u64,
    /// Legal requests carried out.
    pub carried_out: u64,
    /// Illegal requests refused with their typed status.
    pub refused_as_due: u64,
    /// Requests failed by a fault (unreachable, busy, the node down).
    pub failed_by_faults: u64,
    /// Of those, requests a router answered Busy.
    pub busy: u64,
    /// Reads whose data was checked against what was acknowledged.
    pub reads_checked: u64,
    /// Reads completed inside the fairness window.
    pub window_reads: u64,
}

/// One host.
pub(crate) struct SimHost {
    pub(crate) id: u32,
    /// The node it is attached to.
    pub(crate) node: u32,
    /// The connection's epoch; frames of an older one are lost.
    pub(crate) epoch: u64,
    pub(crate) connected: bool,
    pub(crate) mode: Mode,
    pub(crate) counts: HostCounts,
    outstanding: BTreeMap<u64, Pending>,
    next_tag: u64,
    limit: usize,
    views: BTreeMap<BlockKey, View>,
    busy: BTreeSet<BlockKey>,
    rng: SplitMix64,
}

impl SimHost {
    pub(crate) fn new(id: u32, node: u32, limit: usize, rng: SplitMix64) -> SimHost {
        SimHost {
            id,
            node,
            epoch: 0,
            connected: true,
            mode: Mode::Idle,
            counts: HostCounts::default(),
            outstanding: BTreeMap::new(),
            next_tag: 1,
            limit,
            views: BTreeMap::new(),
            busy: BTreeSet::new(),
            rng,
        }
    }

    pub(crate) fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    pub(crate) fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    /// The requests still waiting for an ack, named for a finding.
    pub(crate) fn describe_outstanding(&self) -> String {
        let mut text = String::new();
        for (index, (tag, pending)) in self.outstanding.iter().take(4).enumerate() {
            if index > 0 {
                text.push(',');
            }
            text.push_str(&format!(
                " tag {tag} ({} to device {})",
                kind_name(pending.kind),
                pending.device
            ));
        }
        text
    }

    fn view(&self, block: BlockKey) -> View {
        self.views.get(&block).copied().unwrap_or(View::Unknown)
    }

    fn random_page(&mut self, shape: &Shape, device: u32) -> PageKey {
        (
            device,
            self.rng.below(u64::from(shape.buses)) as u32,
            self.rng.below(u64::from(shape.chips)) as u32,
            self.rng.below(u64::from(shape.used_blocks())) as u32,
            self.rng.below(u64::from(shape.pages)) as u32,
        )
    }

    fn random_own_block(&mut self, shape: &Shape) -> BlockKey {
        (
            self.rng.below(u64::from(shape.nodes)) as u32,
            self.rng.below(u64::from(shape.buses)) as u32,
            self.rng.below(u64::from(shape.chips)) as u32,
            self.id * shape.blocks_per_host
                + self.rng.below(u64::from(shape.blocks_per_host)) as u32,
        )
    }

    /// The next request to send, if the host may send one now.
    pub(crate) fn next_request(
        &mut self,
        shape: &Shape,
        published: &mut Published,
    ) -> Option<FlashRequest> {
        if !self.connected || self.outstanding.len() >= self.limit {
            return None;
        }
        let (command, pending) = match &mut self.mode {
            Mode::Idle => return None,
            Mode::Sweep { pages } => {
                let page = pages.pop()?;
                self.read(page, published)
            }
            Mode::Fairness { device, .. } => {
                let device = *device;
                let chips = shape.buses * shape.chips;
                let chip = (self.counts.issued % u64::from(chips)) as u32;
                let (_, _, _, block, page) = self.random_page(shape, device);
                let page = (device, chip % shape.buses, chip / shape.buses, block, page);
                self.read(page, published)
            }
            Mode::Mixed { budget } => {
                if *budget == 0 {
                    return None;
                }
                *budget -= 1;
                self.draw_mixed(shape, published)
            }
        };
        let tag = self.next_tag;
        self.next_tag += 1;
        if let Some(block) = pending.own_block {
            self.busy.insert(block);
        }
        self.outstanding.insert(tag, pending);
        self.counts.issued += 1;
        Some(FlashRequest {
            tag,
            host: self.id,
            command,
        })
    }

    fn read(&mut self, page: PageKey, published: &Published) -> (FlashCommand, Pending) {
        let pending = Pending {
            expect: Expect::Read {
                page,
                check: published.expect(page),
            },
            kind: CommandKind::Read,
            device: page.0,
            own_block: None,
        };
        let address = address_of(page);
        (FlashCommand::ReadPage { address }, pending)
    }

    fn draw_mixed(&mut self, shape: &Shape, published: &mut Published) -> (FlashCommand, Pending) {
        let roll = self.rng.below(100);
        if roll < 45 {
            let block = self.random_own_block(shape);
            if !self.busy.contains(&block) {
                if let Some(drawn) = self.legal_on(block, shape, published) {
                    return drawn;
                }
            }
        } else if roll >= 80 {
            let block = self.random_own_block(shape);
            if !self.busy.contains(&block) {
                if let Some(drawn) = self.illegal_on(block, shape) {
                    return drawn;
                }
            }
            return self.not_owner(shape);
        }
        let page = if published.len() > 0 && self.rng.chance(0.7) {
            let index = self.rng.index_below(published.len());
            published.nth(index).expect("an index below the length")
        } else {
            let device = self.rng.below(u64::from(shape.nodes)) as u32;
            self.random_page(shape, device)
        };
        self.read(page, published)
    }

    fn legal_on(
        &mut self,
        block: BlockKey,
        shape: &Shape,
        published: &mut Published,
    ) -> Option<(FlashCommand, Pending)> {
        let address = address_of((block.0, block.1, block.2, block.3, 0));
        let erase = |published: &mut Published| {
            published.erase_issued(block);
            let pending = Pending {
                expect: Expect::Erase,
                kind: CommandKind::Erase,
                device: block.0,
                own_block: Some(block),
            };
            (FlashCommand::EraseBlock { address }, pending)
        };
        match self.view(block) {
            View::Bad => None,
            View::Unknown => Some(erase(published)),
            View::Erased { next } if next >= shape.pages => Some(erase(published)),
            View::Erased { next } => {
                let seed = self.rng.next_u64();
                let (data, spare) = page_contents(seed, shape.data_bytes, shape.spare_bytes);
                let expect = Expect::Program {
                    page: (block.0, block.1, block.2, block.3, next),
                    seed,
                };
                Some(write_in_own_block(block, next, data, spare, expect))
            }
        }
    }

    fn illegal_on(&mut self, block: BlockKey, shape: &Shape) -> Option<(FlashCommand, Pending)> {
        let View::Erased { next } = self.view(block) else {
            return None;
        };
        let (page, expect) = if self.rng.chance(0.5) && next + 1 < shape.pages {
            let page = next + 1 + self.rng.below(u64::from(shape.pages - next - 1)) as u32;
            let expect = Expect::OutOfOrder {
                expected_page: next,
                page,
            };
            (page, expect)
        } else if next > 0 {
            let page = self.rng.below(u64::from(next)) as u32;
            (
                page,
                Expect::NotErased {
                    block: block.3,
                    page,
                },
            )
        } else {
            return None;
        };
        let (data, spare) = page_contents(self.rng.next_u64(), shape.data_bytes, shape.spare_bytes);
        Some(write_in_own_block(block, page, data, spare, expect))
    }

    fn not_owner(&mut self, shape: &Shape) -> (FlashCommand, Pending) {
        let device = self.rng.below(u64::from(shape.nodes)) as u32;
        let others: Vec<u32> = (0..shape.hosts).filter(|&host| host != self.id).collect();
        let block = if !others.is_empty() && self.rng.chance(0.5) {
            let owner = others[self.rng.index_below(others.len())];
            owner * shape.blocks_per_host + self.rng.below(u64::from(shape.blocks_per_host)) as u32
        } else {
            shape.hosts * shape.blocks_per_host + self.rng.below(u64::from(UNOWNED_BLOCKS)) as u32
        };
        let address = FlashAddress {
            device,
            bus: self.rng.below(u64::from(shape.buses)) as u32,
            chip: self.rng.below(u64::from(shape.chips)) as u32,
            block,
            page: self.rng.below(u64::from(shape.pages)) as u32,
        };
        let expect = Expect::NotOwner { device, block };
        if self.rng.chance(0.5) {
            let pending = Pending {
                expect,
                kind: CommandKind::Erase,
                device,
                own_block: None,
            };
            return (FlashCommand::EraseBlock { address }, pending);
        }
        let (data, spare) = page_contents(self.rng.next_u64(), shape.data_bytes, shape.spare_bytes);
        let pending = Pending {
            expect,
            kind: CommandKind::Write,
            device,
            own_block: None,
        };
        (
            FlashCommand::WritePage {
                address,
                data,
                spare,
            },
            pending,
        )
    }

    /// The host's node went away: every request in flight fails here, naming its device
    /// and hop 0 (the host never got past its own node).
    pub(crate) fn fail_outstanding(&mut self) {
        for (_, pending) in std::mem::take(&mut self.outstanding) {
            self.counts.answered += 1;
            self.counts.failed_by_faults += 1;
            if let Some(block) = pending.own_block {
                self.busy.remove(&block);
                self.views.insert(block, View::Unknown);
            }
        }
    }

    /// The host process was killed and starts again: what was in flight is lost (failed
    /// here), tags start from 1 again, and it stays disconnected until it reconnects.
    pub(crate) fn restart(&mut self) {
        self.fail_outstanding();
        self.connected = false;
        self.next_tag = 1;
    }

    /// Judges an ack that arrived at `now_ns`.
    pub(crate) fn on_ack(
        &mut self,
        frame: Frame,
        now_ns: u64,
        shape: &Shape,
        published: &mut Published,
    ) -> Result<(), String> {
        let id = self.id;
        let Message::Ack(ack) = frame.message else {
            return Err(format!("host {id} got a frame that is not an ack"));
        };
        let Some(pending) = self.outstanding.remove(&ack.tag) else {
            return Err(format!(
                "host {id} got an ack for tag {}, which it has not in flight (a second ack, or another host's)",
                ack.tag
            ));
        };
        self.counts.answered += 1;
        let what = format!(
            "host {id}: {} of device {} (tag {})",
            kind_name(pending.kind),
            pending.device,
            ack.tag
        );
        if ack.host != id || ack.kind != pending.kind {
            return Err(format!(
                "{what}: its ack says host {} and {}",
                ack.host,
                kind_name(ack.kind)
            ));
        }
        if let Some(block) = pending.own_block {
            self.busy.remove(&block);
        }
        let distance = shape.hops(self.node, pending.device);
        match &ack.status {
            Status::Unreachable { device, hop } => {
                if *device != pending.device || *hop > distance {
                    return Err(format!(
                        "{what}: failed naming device {device} at hop {hop}, but it is {distance} hops away"
                    ));
                }
                self.failed_by_fault(&pending);
                return Ok(());
            }
            Status::Busy { .. } => {
                self.counts.busy += 1;
                self.failed_by_fault(&pending);
                return Ok(());
            }
            Status::UnknownHost { .. } => return Err(format!("{what}: answered UnknownHost")),
            Status::Flash(_) | Status::NotOwner { .. } => {}
        }
        if frame.hops != distance {
            return Err(format!(
                "{what}: its ack counts {} hops, the device is {distance} away",
                frame.hops
            ));
        }
        let status = &ack.status;
        let flash = match status {
            Status::Flash(flash) => Some(flash),
            _ => None,
        };
        match pending.expect {
            Expect::Erase | Expect::Program { .. } => {
                let block = pending.own_block.expect("legal requests are on own blocks");
                match (flash, &pending.expect) {
                    (Some(AckStatus::Ok { .. }), Expect::Erase) => {
                        self.views.insert(block, View::Erased { next: 0 });
                    }
                    (Some(AckStatus::Ok { .. }), Expect::Program { page, seed }) => {
                        let View::Erased { next } = self.view(block) else {
                            unreachable!("programs are drawn on erased blocks only");
                        };
                        self.views.insert(block, View::Erased { next: next + 1 });
                        published.publish(*page, *seed);
                    }
                    (Some(AckStatus::BadBlock), _) => {
                        self.views.insert(block, View::Bad);
                    }
                    _ => {
                        return Err(format!(
                            "{what}: a legal request (block {} page {}) answered {}",
                            block.3,
                            page_of(&pending.expect),
                            status_name(status)
                        ))
                    }
                }
                self.counts.carried_out += 1;
            }
            Expect::Read { page, check } => {
                let checked = check.filter(|&(_, erases)| {
                    published.erase_count((page.0, page.1, page.2, page.3)) == erases
                });
                match (flash, checked) {
                    (Some(AckStatus::Ok { .. }), Some((seed, _))) => {
                        let Some(payload) = &ack.payload else {
                            return Err(format!("{what}: a read answered Ok without its page"));
                        };
                        let (data, spare) = page_contents(seed, shape.data_bytes, shape.spare_bytes);
                        if payload.data != data || !payload.spare.starts_with(&spare) {
                            return Err(format!(
                                "{what}: {} read back different from what its program's ack promised",
                                page_text(page)
                            ));
                        }
                        self.counts.reads_checked += 1;
                    }
                    (Some(AckStatus::Ok { .. }), None) => {}
                    (Some(AckStatus::Uncorrectable), None) => {}
                    (Some(AckStatus::Uncorrectable), Some(_)) => {
                        return Err(format!(
                            "{what}: {}, acknowledged programmed and not erased since, reads uncorrectable",
                            page_text(page)
                        ))
                    }
                    _ => return Err(format!("{what}: a read answered {}", status_name(status))),
                }
                if let Mode::Fairness { window_ns, .. } = self.mode {
                    if (window_ns.0..window_ns.1).contains(&now_ns) {
                        self.counts.window_reads += 1;
                    }
                }
                self.counts.carried_out += 1;
            }
            Expect::NotOwner { device, block } => {
                if *status != (Status::NotOwner { device, block }) {
                    return Err(format!(
                        "{what}: a request on block {block}, which the host does not own, answered {}",
                        status_name(status)
                    ));
                }
                self.counts.refused_as_due += 1;
            }
            Expect::OutOfOrder {
                expected_page,
                page,
            } => {
                let due = RuleViolation::OutOfOrder {
                    expected_page,
                    page,
                };
                if flash != Some(&AckStatus::RuleViolation(due)) {
                    return Err(format!(
                        "{what}: a program out of order (page {page}, the block's next is {expected_page}) answered {}",
                        status_name(status)
                    ));
                }
                self.counts.refused_as_due += 1;
            }
            Expect::NotErased { block, page } => {
                let due = RuleViolation::NotErased { block, page };
                if flash != Some(&AckStatus::RuleViolation(due)) {
                    return Err(format!(
                        "{what}: a program of page {page} of block {block}, already programmed, answered {}",
                        status_name(status)
                    ));
                }
                self.counts.refused_as_due += 1;
            }
        }
        Ok(())
    }

    fn failed_by_fault(&mut self, pending: &Pending) {
        self.counts.failed_by_faults += 1;
        if let Some(block) = pending.own_block {
            self.views.insert(block, View::Unknown);
        }
    }
}

/// A program of page `page` of `block`, a block of the host's own, expecting `expect`.
fn write_in_own_block(
    block: BlockKey,
    page: u32,
    data: Vec<u8>,
    spare: Vec<u8>,
    expect: Expect,
) -> (FlashCommand, Pending) {
    let address = address_of((block.0, block.1, block.2, block.3, page));
    let pending = Pending {
        expect,
        kind: CommandKind::Write,
        device: block.0,
        own_block: Some(block),
    };
    let write = FlashCommand::WritePage {
        address,
        data,
        spare,
    };
    (write, pending)
}

fn page_of(expect: &Expect) -> String {
    match expect {
        Expect::Program { page, .. } => page.4.to_string(),
        _ => "-".to_string(),
    }
}

pub(crate) fn kind_name(kind: CommandKind) -> &'static str {
    match kind {
        CommandKind::Read => "a read",
        CommandKind::Write => "a program",
        CommandKind::Erase => "an erase",
    }
}

/// A status in words, for findings.
pub(crate) fn status_name(status: &Status) -> String {
    match status {
        Status::Flash(AckStatus::Ok { .. }) => "Ok".to_string(),
        Status::Flash(AckStatus::Uncorrectable) => "Uncorrectable".to_string(),
        Status::Flash(AckStatus::BadBlock) => "BadBlock".to_string(),
        Status::Flash(AckStatus::RuleViolation(violation)) => {
            format!("a rule violation ({violation})")
        }
        Status::NotOwner { device, block } => format!("NotOwner (device {device}, block {block})"),
        Status::Unreachable { device, hop } => format!("Unreachable (device {device}, hop {hop})"),
        Status::Busy { queue_limit } => format!("Busy (queue limit {queue_limit})"),
        Status::UnknownHost { host, host_count } => {
            format!("UnknownHost (host {host} of {host_count})")
        }
    }
}
