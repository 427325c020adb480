//! A node's flash device in the cluster campaign: the node's [`FlashArray`] (virtual time,
//! pages in memory) with a power cut, as `flashpipe_ftl::PowerCutFlash` models one.
//!
//! The array applies a request to its pages when its controller admits it and has no
//! power-loss hook, so the cut is modelled above it: when the node crashes, every request
//! the node passed on and has not reaped gets a fate. Per block, in page order, a prefix
//! of the programs completed, at most one page is torn (reads uncorrectable) and the rest
//! were never programmed (read erased); an erase in flight either finished or left the
//! block unreadable until its next erase. A fate strikes only a request the array carries
//! out (its ack Ok): a program the array refuses (not erased, out of order, a bad block)
//! never touched the page, cut or not. The array finishes the cut requests in virtual
//! time and their acks are dropped: nobody is left to hear them.

use std::collections::{BTreeMap, BTreeSet};

use flashpipe_flash::{
    Ack, AckStatus, CommandKind, FlashAddress, FlashArray, FlashRequest, SubmitError,
};
use flashpipe_sim::SplitMix64;

/// A block of the node's device: (bus, chip, block).
type BlockKey = (u32, u32, u32);
/// A page of the node's device: (bus, chip, block, page).
type PageKey = (u32, u32, u32, u32);

/// What a cut left in a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Torn,
    Absent,
}

/// What a cut decided for one request, applied when the array acknowledges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CutFate {
    /// Whatever the array did stands.
    Done,
    /// A program carried out left its page in this state.
    Page(Fate),
    /// An erase carried out left its block unreadable until its next erase.
    Unreadable,
}

/// What the cuts did, for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CutCounts {
    /// Programs left torn.
    pub programs_torn: u64,
    /// Programs lost.
    pub programs_lost: u64,
    /// Erases left interrupted.
    pub erases_interrupted: u64,
    /// Acks dropped because their node had crashed.
    pub acks_dropped: u64,
}

/// The node's array and what power cuts left in it.
pub(crate) struct Device {
    array: FlashArray,
    /// Controller tag -> (kind, address) of every request passed on and not reaped.
    in_flight: BTreeMap<u64, (CommandKind, FlashAddress)>,
    /// Tags in flight when the power was cut, with their fates: their acks are dropped.
    cut_tags: BTreeMap<u64, CutFate>,
    fates: BTreeMap<PageKey, Fate>,
    unreadable: BTreeSet<BlockKey>,
    counts: CutCounts,
}

fn block_of(address: FlashAddress) -> BlockKey {
    (address.bus, address.chip, address.block)
}

fn page_of(address: FlashAddress) -> PageKey {
    (address.bus, address.chip, address.block, address.page)
}

impl Device {
    pub(crate) fn new(array: FlashArray) -> Device {
        Device {
            array,
            in_flight: BTreeMap::new(),
            cut_tags: BTreeMap::new(),
            fates: BTreeMap::new(),
            unreadable: BTreeSet::new(),
            counts: CutCounts::default(),
        }
    }

    pub(crate) fn counts(&self) -> CutCounts {
        self.counts
    }

    /// Requests passed on and not yet acknowledged (cut ones included).
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The time of the array's next event.
    pub(crate) fn next_event_ns(&self) -> Option<u64> {
        self.array.next_event_ns()
    }

    /// Runs the array's events due at or before `now_ns` (those scheduled at `now_ns`
    /// itself included), its clock moved to `now_ns`.
    pub(crate) fn run_until(&mut self, now_ns: u64) {
        flashpipe_sim::Component::run_due(&mut self.array, now_ns);
    }

    /// Passes a request to the array (its device id already the array's own, 0).
    pub(crate) fn submit(&mut self, request: FlashRequest) -> Result<(), SubmitError> {
        let tag = request.tag;
        let entry = (request.command.kind(), request.command.address());
        self.array.submit(request)?;
        let previous = self.in_flight.insert(tag, entry);
        assert!(previous.is_none(), "controller tag {tag} passed on twice");
        Ok(())
    }

    /// The acks ready now, with what the cuts left applied; the acks of requests cut
    /// by a crash are dropped.
    pub(crate) fn poll(&mut self) -> Vec<Ack> {
        let mut acks = Vec::new();
        self.array.poll_acks(&mut acks);
        let mut kept = Vec::with_capacity(acks.len());
        for mut ack in acks {
            let (_, address) = self
                .in_flight
                .remove(&ack.tag)
                .expect("the array acknowledges only what was passed on");
            self.apply_fates(&mut ack, address);
            if let Some(fate) = self.cut_tags.remove(&ack.tag) {
                if ack.status.is_ok() {
                    self.strike(fate, address);
                }
                self.counts.acks_dropped += 1;
                continue;
            }
            kept.push(ack);
        }
        kept
    }

    /// Cuts the power: every request in flight gets its fate.
    pub(crate) fn cut_power(&mut self, generator: &mut SplitMix64) {
        let mut programs: BTreeMap<BlockKey, Vec<(u32, u64)>> = BTreeMap::new();
        for (&tag, &(kind, address)) in &self.in_flight {
            if self.cut_tags.contains_key(&tag) {
                continue;
            }
            let fate = match kind {
                CommandKind::Read => CutFate::Done,
                CommandKind::Write => {
                    programs
                        .entry(block_of(address))
                        .or_default()
                        .push((address.page, tag));
                    CutFate::Done
                }
                CommandKind::Erase if generator.chance(0.5) => CutFate::Unreadable,
                CommandKind::Erase => CutFate::Done,
            };
            self.cut_tags.insert(tag, fate);
        }
        for (_, mut pages) in programs {
            pages.sort_unstable();
            let completed = generator.below(pages.len() as u64 + 1) as usize;
            for (index, (_, tag)) in pages.into_iter().enumerate().skip(completed) {
                let fate = if index == completed && generator.chance(0.5) {
                    Fate::Torn
                } else {
                    Fate::Absent
                };
                self.cut_tags.insert(tag, CutFate::Page(fate));
            }
        }
    }

    /// A cut request the array carried out: its fate strikes.
    fn strike(&mut self, fate: CutFate, address: FlashAddress) {
        match fate {
            CutFate::Done => {}
            CutFate::Page(fate) => {
                match fate {
                    Fate::Torn => self.counts.programs_torn += 1,
                    Fate::Absent => self.counts.programs_lost += 1,
                }
                self.fates.insert(page_of(address), fate);
            }
            CutFate::Unreadable => {
                self.counts.erases_interrupted += 1;
                self.unreadable.insert(block_of(address));
            }
        }
    }

    fn apply_fates(&mut self, ack: &mut Ack, address: FlashAddress) {
        match ack.kind {
            CommandKind::Erase if ack.status.is_ok() => {
                let block = block_of(address);
                self.unreadable.remove(&block);
                self.fates
                    .retain(|&(bus, chip, index, _), _| (bus, chip, index) != block);
            }
            CommandKind::Read => {
                let fate = if self.unreadable.contains(&block_of(address)) {
                    Some(Fate::Torn)
                } else {
                    self.fates.get(&page_of(address)).copied()
                };
                match fate {
                    Some(Fate::Torn) => {
                        ack.status = AckStatus::Uncorrectable;
                        for byte in ack.data.iter_mut().flatten() {
                            *byte ^= 0x5A;
                        }
                    }
                    Some(Fate::Absent) => {
                        ack.status = AckStatus::CLEAN;
                        for byte in ack.data.iter_mut().chain(ack.spare.iter_mut()).flatten() {
                            *byte = 0xFF;
                        }
                    }
                    None => {}
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flashpipe_flash::{FlashCommand, FlashConfig, FlashOptions, StorageMode};

    fn device() -> Device {
        let mut config = FlashConfig::preset("minflash-rack").expect("a shipped preset");
        config.geometry.channels = 1;
        config.geometry.ways = 1;
        config.geometry.pages_per_block = 8;
        let options = FlashOptions {
            seed: 3,
            storage: StorageMode::Memory,
            ..FlashOptions::default()
        };
        Device::new(FlashArray::new(config, options).expect("a small array"))
    }

    fn address(block: u32, page: u32) -> FlashAddress {
        FlashAddress {
            device: 0,
            bus: 0,
            chip: 0,
            block,
            page,
        }
    }

    fn program(tag: u64, block: u32, page: u32, fill: u8) -> FlashRequest {
        FlashRequest {
            tag,
            host: 0,
            command: FlashCommand::WritePage {
                address: address(block, page),
                data: vec![fill; 8192],
                spare: vec![],
            },
        }
    }

    fn settle(device: &mut Device) -> Vec<Ack> {
        let mut acks = Vec::new();
        while let Some(next_ns) = device.next_event_ns() {
            device.run_until(next_ns);
            acks.extend(device.poll());
        }
        acks.extend(device.poll());
        acks
    }

    #[test]
    fn a_cut_strikes_programs_carried_out_never_a_refused_one() {
        let mut struck = 0;
        for seed in 0..40 {
            let mut device = device();
            device.submit(program(1, 2, 0, 0xA5)).unwrap();
            let acks = settle(&mut device);
            assert!(acks.len() == 1 && acks[0].status.is_ok());
            device.submit(program(2, 2, 0, 0x11)).unwrap();
            device.submit(program(3, 3, 0, 0x22)).unwrap();
            device.cut_power(&mut SplitMix64::new(seed));
            assert!(settle(&mut device).is_empty(), "a cut's acks are dropped");
            assert_eq!(device.in_flight(), 0);
            let read = FlashRequest {
                tag: 4,
                host: 0,
                command: FlashCommand::ReadPage {
                    address: address(2, 0),
                },
            };
            device.submit(read).unwrap();
            let acks = settle(&mut device);
            assert!(
                acks[0].status.is_ok(),
                "seed {seed}: the refused program tore the page"
            );
            assert_eq!(acks[0].data.as_deref(), Some(&[0xA5u8; 8192][..]));
            let counts = device.counts();
            struck += counts.programs_torn + counts.programs_lost;
        }
        assert!(struck > 0, "no cut ever struck the legal program in flight");
    }
}
