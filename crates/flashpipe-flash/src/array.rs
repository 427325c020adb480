//! The flash array: block state, page contents with ECC and injected errors, and the
//! controller's timing as a discrete-event simulation on a [`VirtualClock`].
//!
//! A request's life (see docs/flash-model.md):
//! 1. submitted by a host; a write's data crosses the host link (PCIe) first;
//! 2. crosses `hops` inter-controller links to its device and waits, in a per-host queue,
//!    for a controller tag (hosts served round-robin);
//! 3. admitted: the array applies it to the block state (rules, wear, data) and queues it
//!    on its die, in order;
//! 4. the bus scheduler (one per channel) grants the bus to the waiting candidate with the
//!    highest priority: command bursts before data transfers, then older before newer,
//!    then rotating among dies; the die is busy for tR / tPROG / tBERS;
//! 5. a read's page crosses the bus, the channel's ECC decoder, the hops and the host link;
//!    every request then pays the host software latency and is acknowledged.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::path::Path;
use std::sync::Arc;

use flashpipe_device::{Clock, SplitMix64, VirtualClock};

use crate::config::FlashConfig;
use crate::ecc::{DecodeOutcome, EccMode, PageCodec};
use crate::interface::{
    Ack, AckStatus, CommandKind, FlashAddress, FlashCommand, FlashRequest, RuleViolation,
    SubmitError,
};
use crate::reliability::{self, BlockWear};
use crate::stats::{FlashStats, LatencyRecorder};
use crate::store::{self, BlockState, FlashError, Metadata, PageStore, StorageMode};

/// Most hosts attached to one array ([`FlashOptions::host_count`]).
pub const MAX_HOST_COUNT: u32 = 1024;
/// Most tags of one host ([`FlashOptions::host_queue_depth`]); with [`MAX_HOST_COUNT`] it
/// keeps the requests in flight below the event format's 2^25 slots.
pub const MAX_HOST_QUEUE_DEPTH: u32 = 1 << 14;

/// Options of an array besides its configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlashOptions {
    /// Seed of every random choice (errors, program times, failures, factory bad blocks).
    pub seed: u64,
    /// Where page contents live.
    pub storage: StorageMode,
    /// Hosts; host `h` is attached to device `h % devices`.
    pub host_count: u32,
    /// Requests one host may have in flight (its tags).
    pub host_queue_depth: u32,
}

impl Default for FlashOptions {
    fn default() -> Self {
        FlashOptions {
            seed: 1,
            storage: StorageMode::Memory,
            host_count: 1,
            host_queue_depth: 256,
        }
    }
}

/// What a slot is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BusWork {
    /// A read or erase command burst (short).
    Command,
    /// A write's command burst plus its data (long).
    CommandAndDataIn,
    /// A read's page leaving the register (long).
    DataOut,
}

/// A request inside the simulator.
struct Slot {
    tag: u64,
    address: FlashAddress,
    host: u32,
    kind: CommandKind,
    device: u32,
    channel: u32,
    die: u32,
    submitted_ns: u64,
    admitted_ns: u64,
    array_busy_ns: u64,
    ecc_symbols: u32,
    status: AckStatus,
    data: Option<Vec<u8>>,
    spare: Option<Vec<u8>>,
}

/// Bits of a packed event for its sequence number, its kind and its slot.
const EVENT_SEQUENCE_BITS: u32 = 36;
const EVENT_KIND_BITS: u32 = 3;
const EVENT_SLOT_BITS: u32 = 64 - EVENT_SEQUENCE_BITS - EVENT_KIND_BITS;

/// Packs an event into one integer ordered by time, then scheduling order (FIFO).
fn pack_event(at_ns: u64, sequence: u64, kind: EventKind, slot_index: u32) -> u128 {
    assert!(
        sequence < 1 << EVENT_SEQUENCE_BITS,
        "event sequence overflow"
    );
    assert!(
        u64::from(slot_index) < 1 << EVENT_SLOT_BITS,
        "too many requests in flight"
    );
    let low = sequence << (EVENT_KIND_BITS + EVENT_SLOT_BITS)
        | (kind as u64) << EVENT_SLOT_BITS
        | u64::from(slot_index);
    u128::from(at_ns) << 64 | u128::from(low)
}

fn unpack_event(packed: u128) -> (u64, EventKind, u32) {
    let low = packed as u64;
    let kind = match (low >> EVENT_SLOT_BITS) & ((1 << EVENT_KIND_BITS) - 1) {
        0 => EventKind::Arrive,
        1 => EventKind::BusDone,
        2 => EventKind::ArrayDone,
        3 => EventKind::DecodeDone,
        _ => EventKind::Complete,
    };
    (
        (packed >> 64) as u64,
        kind,
        (low & ((1 << EVENT_SLOT_BITS) - 1)) as u32,
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum EventKind {
    /// The slot reached its device.
    Arrive = 0,
    /// The slot's bus work ended on its channel.
    BusDone = 1,
    /// The slot's array operation ended on its die.
    ArrayDone = 2,
    /// The slot's read left the ECC decoder (the controller tag is released).
    DecodeDone = 3,
    /// The slot is acknowledged to its host.
    Complete = 4,
}

/// A request queued on a die, with what the scheduler compares kept beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct QueuedWork {
    slot_index: u32,
    admitted_ns: u64,
    kind: CommandKind,
}

#[derive(Default)]
struct Die {
    waiting: VecDeque<QueuedWork>,
    array_slot: Option<u32>,
    registers_out: VecDeque<QueuedWork>,
    busy_ns: u64,
}

struct Channel {
    bus_work: Option<(u32, BusWork)>,
    queued_count: u32,
    rotation: u32,
    decoder_free_ns: u64,
    busy_ns: u64,
}

struct Device {
    free_tags: u32,
    waiting_by_host: Vec<VecDeque<u32>>,
    host_rotation: u32,
}

struct Host {
    in_flight: u32,
    link_free_ns: u64,
    link_busy_ns: u64,
}

/// The simulated flash array.
pub struct FlashArray {
    config: FlashConfig,
    host_spare_bytes: usize,
    dies_per_channel: u32,
    cache_read: bool,
    options: FlashOptions,
    clock: VirtualClock,
    codec: PageCodec,
    ecc_mode: EccMode,
    store: PageStore,
    blocks: Vec<BlockState>,
    operation_counter: u64,
    slots: Vec<Option<Slot>>,
    free_slots: Vec<u32>,
    events: BinaryHeap<Reverse<u128>>,
    event_sequence: u64,
    dies: Vec<Die>,
    offers: Vec<Option<(u8, u64, u32, BusWork)>>,
    /// Each die's offer as the integer the scheduler minimizes: priority class, then age,
    /// in the high bits (the low 32 bits left for the rotation offset); `u128::MAX` for none.
    offer_keys: Vec<u128>,
    channels: Vec<Channel>,
    devices: Vec<Device>,
    hosts: Vec<Host>,
    ready: Vec<Ack>,
    latencies: LatencyRecorder,
    started_ns: u64,
}

impl FlashArray {
    /// A fresh array: every good block erased, factory bad blocks marked.
    pub fn new(config: FlashConfig, options: FlashOptions) -> Result<FlashArray, FlashError> {
        let store = PageStore::create(&options.storage)?;
        let blocks = vec![BlockState::default(); config.total_blocks() as usize];
        FlashArray::assemble(config, options, store, blocks, 0, 0)
    }

    /// Reopens an array kept in `path` (its `.meta` and journal replayed, then folded
    /// into a new `.meta` so the journal starts empty).
    pub fn open(
        path: &Path,
        host_count: u32,
        host_queue_depth: u32,
    ) -> Result<FlashArray, FlashError> {
        let mut metadata = store::read_metadata(path)?;
        let store = PageStore::reopen(path, &mut metadata)?;
        FlashArray::from_metadata(path, metadata, store, host_count, host_queue_depth)
    }

    /// Reopens an array kept in `path` for reading only: the journal is replayed in
    /// memory, and nothing is ever written to the image, its `.meta` or its journal
    /// (programs fail, [`FlashArray::sync`] is refused).
    pub fn open_read_only(
        path: &Path,
        host_count: u32,
        host_queue_depth: u32,
    ) -> Result<FlashArray, FlashError> {
        let metadata = store::read_metadata(path)?;
        let store = PageStore::reopen_read_only(path)?;
        FlashArray::from_metadata(path, metadata, store, host_count, host_queue_depth)
    }

    /// True when the array was opened with [`FlashArray::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.store.is_read_only()
    }

    fn from_metadata(
        path: &Path,
        metadata: Metadata,
        store: PageStore,
        host_count: u32,
        host_queue_depth: u32,
    ) -> Result<FlashArray, FlashError> {
        let options = FlashOptions {
            seed: metadata.seed,
            storage: StorageMode::File(path.to_path_buf()),
            host_count,
            host_queue_depth,
        };
        FlashArray::assemble(
            metadata.config,
            options,
            store,
            metadata.blocks,
            metadata.now_ns,
            metadata.operation_counter,
        )
    }

    fn assemble(
        config: FlashConfig,
        options: FlashOptions,
        store: PageStore,
        blocks: Vec<BlockState>,
        now_ns: u64,
        operation_counter: u64,
    ) -> Result<FlashArray, FlashError> {
        if !(1..=MAX_HOST_COUNT).contains(&options.host_count)
            || !(1..=MAX_HOST_QUEUE_DEPTH).contains(&options.host_queue_depth)
        {
            return Err(FlashError::InvalidOption {
                detail: format!(
                    "{} hosts of {} tags: hosts must be within 1..={MAX_HOST_COUNT} and host queue depth within 1..={MAX_HOST_QUEUE_DEPTH}",
                    options.host_count, options.host_queue_depth
                ),
            });
        }
        let geometry = &config.geometry;
        let channel_count = geometry.devices * geometry.channels;
        let die_count = channel_count * config.dies_per_channel();
        let message_bytes = (geometry.page_data_bytes + config.host_spare_bytes()) as usize;
        let clock = VirtualClock::new();
        clock.advance_to(now_ns);
        let devices = (0..geometry.devices)
            .map(|_| Device {
                free_tags: config.timing.controller_queue_depth,
                waiting_by_host: (0..options.host_count).map(|_| VecDeque::new()).collect(),
                host_rotation: 0,
            })
            .collect();
        Ok(FlashArray {
            host_spare_bytes: config.host_spare_bytes() as usize,
            dies_per_channel: config.dies_per_channel(),
            cache_read: config.timing.cache_read,
            codec: PageCodec::new(message_bytes, config.raw_page_bytes()),
            ecc_mode: EccMode::default(),
            store,
            blocks,
            operation_counter,
            slots: Vec::new(),
            free_slots: Vec::new(),
            events: BinaryHeap::new(),
            event_sequence: 0,
            dies: (0..die_count).map(|_| Die::default()).collect(),
            offers: vec![None; die_count as usize],
            offer_keys: vec![u128::MAX; die_count as usize],
            channels: (0..channel_count)
                .map(|_| Channel {
                    bus_work: None,
                    queued_count: 0,
                    rotation: 0,
                    decoder_free_ns: 0,
                    busy_ns: 0,
                })
                .collect(),
            devices,
            hosts: (0..options.host_count)
                .map(|_| Host {
                    in_flight: 0,
                    link_free_ns: 0,
                    link_busy_ns: 0,
                })
                .collect(),
            ready: Vec::new(),
            latencies: LatencyRecorder::default(),
            started_ns: now_ns,
            clock,
            config,
            options,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &FlashConfig {
        &self.config
    }

    /// The options.
    pub fn options(&self) -> &FlashOptions {
        &self.options
    }

    /// How reads are judged: the exact outcome model (the default) or the real decoder.
    pub fn ecc_mode(&self) -> EccMode {
        self.ecc_mode
    }

    /// Chooses how reads are judged from now on. Both modes write the same parity, so an
    /// image reads the same in either; they differ only in cost and in the decoder's rare
    /// miscorrections (see [`crate::ecc`]).
    pub fn set_ecc_mode(&mut self, mode: EccMode) {
        self.ecc_mode = mode;
    }

    /// Operations (reads, programs, erases) admitted since the array was made.
    pub fn operation_count(&self) -> u64 {
        self.operation_counter
    }

    /// The virtual clock the array runs on.
    pub fn clock(&self) -> &VirtualClock {
        &self.clock
    }

    /// The current virtual time.
    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// True when page contents are kept (not timing only).
    pub fn keeps_data(&self) -> bool {
        self.store.keeps_data()
    }

    /// Host spare bytes per page (after the ECC parity).
    pub fn host_spare_bytes(&self) -> usize {
        self.host_spare_bytes
    }

    /// Requests of `host` accepted and not yet reaped.
    pub fn in_flight(&self, host: u32) -> u32 {
        self.hosts
            .get(host as usize)
            .map_or(0, |state| state.in_flight)
    }

    /// Requests of all hosts accepted and not yet reaped.
    pub fn total_in_flight(&self) -> u32 {
        self.hosts.iter().map(|host| host.in_flight).sum()
    }

    /// The state of a block, or None if the address is out of range.
    pub fn block_state(&self, address: FlashAddress) -> Option<BlockState> {
        self.block_index(address)
            .ok()
            .map(|index| self.blocks[index as usize])
    }

    /// A hint from a driver that knows its next request: brings the state of the block at
    /// `address` into the processor's cache ahead of the request (a random read of a large
    /// array otherwise waits for that memory at admission). Changes nothing; an address out
    /// of range is ignored.
    pub fn prefetch_block_state(&self, address: FlashAddress) {
        let Ok(index) = self.block_index(address) else {
            return;
        };
        let state: *const BlockState = &self.blocks[index as usize];
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is a hint that never dereferences its address and cannot fault
        // (the address is in bounds anyway: it comes from a reference into `blocks`); SSE,
        // which the instruction needs, is part of every x86_64 processor.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(state.cast());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = state;
    }

    /// Whether the block shipped bad (its first page's spare byte 0 reads 0x00).
    pub fn is_factory_bad(&self, address: FlashAddress) -> bool {
        self.block_index(address).is_ok_and(|index| {
            reliability::is_factory_bad(
                &self.config.reliability,
                self.options.seed,
                index,
                address.block,
            )
        })
    }

    /// Marks every good block fully programmed now, as after a sequential fill, so that
    /// reads exercise the error model. Only for timing-only arrays (there is no data to
    /// read back otherwise).
    pub fn precondition_full(&mut self) -> Result<(), FlashError> {
        if self.keeps_data() {
            return Err(FlashError::InvalidOption {
                detail: "only a timing-only array can be preconditioned without writing"
                    .to_string(),
            });
        }
        let now_ns = self.now_ns();
        let pages = self.config.geometry.pages_per_block;
        let blocks_per_way = u64::from(self.config.blocks_per_way());
        for (index, block) in self.blocks.iter_mut().enumerate() {
            let block_in_way = (index as u64 % blocks_per_way) as u32;
            let bad = reliability::is_factory_bad(
                &self.config.reliability,
                self.options.seed,
                index as u64,
                block_in_way,
            );
            if !bad && !block.grown_bad {
                block.next_page = pages;
                block.programmed_at_ns = now_ns;
            }
        }
        Ok(())
    }

    /// Records, without simulating them, `programmed_pages` programs of the block at
    /// `address` (from its first page, now) and `added_erases` erases before them, as a
    /// preconditioning that built the FTL's state directly leaves the block (issue #16).
    /// Only for timing-only arrays, only on an erased good block.
    pub fn mark_block_programmed(
        &mut self,
        address: FlashAddress,
        programmed_pages: u32,
        added_erases: u32,
    ) -> Result<(), FlashError> {
        let refuse = |detail: String| Err(FlashError::InvalidOption { detail });
        if self.keeps_data() {
            return refuse("only a timing-only array can be marked programmed".to_string());
        }
        if programmed_pages > self.config.geometry.pages_per_block {
            return refuse(format!(
                "{programmed_pages} programmed pages exceed the {} pages of a block",
                self.config.geometry.pages_per_block
            ));
        }
        let Ok(index) = self.block_index(address) else {
            return refuse(format!("block address {address:?} is outside the array"));
        };
        let now_ns = self.now_ns();
        let block = &mut self.blocks[index as usize];
        if block.next_page != 0 || block.grown_bad {
            return refuse(format!("block {address:?} is not an erased good block"));
        }
        block.pe_cycles += added_erases;
        block.next_page = programmed_pages;
        block.programmed_at_ns = if programmed_pages > 0 { now_ns } else { 0 };
        Ok(())
    }

    /// Sets a block's wear (for experiments and tests of the error model).
    pub fn set_block_pe_cycles(&mut self, address: FlashAddress, pe_cycles: u32) {
        if let Ok(index) = self.block_index(address) {
            self.blocks[index as usize].pe_cycles = pe_cycles;
        }
    }

    /// Accepts a request, or hands it back when the host is unknown or its queue is full.
    pub fn submit(&mut self, request: FlashRequest) -> Result<(), SubmitError> {
        let host_count = self.options.host_count;
        let queue_depth = self.options.host_queue_depth;
        let Some(host) = self.hosts.get_mut(request.host as usize) else {
            return Err(SubmitError::UnknownHost {
                host: request.host,
                host_count,
                request: Box::new(request),
            });
        };
        if host.in_flight >= queue_depth {
            return Err(SubmitError::QueueFull {
                host: request.host,
                queue_depth,
                request: Box::new(request),
            });
        }
        host.in_flight += 1;
        self.accept(request);
        Ok(())
    }

    fn accept(&mut self, request: FlashRequest) {
        let now_ns = self.now_ns();
        let address = request.command.address();
        let kind = request.command.kind();
        let mut slot = Slot {
            tag: request.tag,
            address,
            host: request.host,
            kind,
            device: address.device,
            channel: 0,
            die: 0,
            submitted_ns: now_ns,
            admitted_ns: 0,
            array_busy_ns: 0,
            ecc_symbols: 0,
            status: AckStatus::CLEAN,
            data: None,
            spare: None,
        };
        let violation = self
            .check_address(address)
            .err()
            .or_else(|| match &request.command {
                FlashCommand::WritePage { data, spare, .. } => {
                    self.check_lengths(data, spare).err()
                }
                _ => None,
            });
        if let Some(violation) = violation {
            slot.status = AckStatus::RuleViolation(violation);
            let slot_index = self.store_slot(slot);
            self.schedule(
                now_ns + self.host_software_ns(kind),
                EventKind::Complete,
                slot_index,
            );
            return;
        }
        slot.channel = address.device * self.config.geometry.channels + address.bus;
        slot.die = slot.channel * self.config.dies_per_channel()
            + address.chip * self.config.geometry.dies
            + address.block / (self.config.geometry.planes * self.config.geometry.blocks_per_plane);
        if let FlashCommand::WritePage { data, spare, .. } = request.command {
            slot.data = Some(data);
            slot.spare = Some(spare);
        }
        let page_bytes = u64::from(self.config.geometry.page_data_bytes);
        let link_done_ns = match kind {
            CommandKind::Write => {
                self.book_host_link(request.host, now_ns, page_bytes)
                    + self.config.timing.ecc_encode_ns
            }
            _ => now_ns,
        };
        let hops = self.hops(request.host, address.device);
        let slot_index = self.store_slot(slot);
        let arrival_ns = link_done_ns + hops * self.config.timing.hop_ns;
        if arrival_ns == now_ns {
            self.arrive(slot_index);
        } else {
            self.schedule(arrival_ns, EventKind::Arrive, slot_index);
        }
    }

    fn host_software_ns(&self, kind: CommandKind) -> u64 {
        match kind {
            CommandKind::Read => self.config.timing.host_software_read_ns,
            _ => self.config.timing.host_software_write_ns,
        }
    }

    fn hops(&self, host: u32, device: u32) -> u64 {
        let attached = host % self.config.geometry.devices;
        u64::from(attached.abs_diff(device))
    }

    fn book_host_link(&mut self, host: u32, ready_ns: u64, bytes: u64) -> u64 {
        let rate = self.config.timing.host_link_bytes_per_second;
        let transfer_ns = (bytes * 1_000_000_000).div_ceil(rate);
        let link = &mut self.hosts[host as usize];
        let start_ns = ready_ns.max(link.link_free_ns);
        link.link_free_ns = start_ns + transfer_ns;
        link.link_busy_ns += transfer_ns;
        link.link_free_ns
    }

    fn check_address(&self, address: FlashAddress) -> Result<(), RuleViolation> {
        let geometry = &self.config.geometry;
        for (field, value, limit) in [
            ("device", address.device, geometry.devices),
            ("bus", address.bus, geometry.channels),
            ("chip", address.chip, geometry.ways),
            ("block", address.block, self.config.blocks_per_way()),
            ("page", address.page, geometry.pages_per_block),
        ] {
            if value >= limit {
                return Err(RuleViolation::AddressOutOfRange {
                    field,
                    value: u64::from(value),
                    limit: u64::from(limit),
                });
            }
        }
        Ok(())
    }

    fn check_lengths(&self, data: &[u8], spare: &[u8]) -> Result<(), RuleViolation> {
        let page_bytes = self.config.geometry.page_data_bytes as usize;
        let data_ok = data.len() == page_bytes || (!self.keeps_data() && data.is_empty());
        if !data_ok {
            return Err(RuleViolation::WrongLength {
                field: "data",
                length: data.len(),
                expected: page_bytes,
            });
        }
        if spare.len() > self.host_spare_bytes() {
            return Err(RuleViolation::WrongLength {
                field: "spare",
                length: spare.len(),
                expected: self.host_spare_bytes(),
            });
        }
        Ok(())
    }

    fn block_index(&self, address: FlashAddress) -> Result<u64, RuleViolation> {
        self.check_address(address)?;
        let geometry = &self.config.geometry;
        let way_index = (u64::from(address.device) * u64::from(geometry.channels)
            + u64::from(address.bus))
            * u64::from(geometry.ways)
            + u64::from(address.chip);
        Ok(way_index * u64::from(self.config.blocks_per_way()) + u64::from(address.block))
    }

    fn store_slot(&mut self, slot: Slot) -> u32 {
        match self.free_slots.pop() {
            Some(index) => {
                self.slots[index as usize] = Some(slot);
                index
            }
            None => {
                self.slots.push(Some(slot));
                (self.slots.len() - 1) as u32
            }
        }
    }

    fn slot(&self, index: u32) -> &Slot {
        self.slots[index as usize].as_ref().expect("live slot")
    }

    fn slot_mut(&mut self, index: u32) -> &mut Slot {
        self.slots[index as usize].as_mut().expect("live slot")
    }

    fn schedule(&mut self, at_ns: u64, kind: EventKind, slot_index: u32) {
        assert!(
            at_ns >= self.now_ns(),
            "events are never scheduled in the past"
        );
        self.event_sequence += 1;
        self.events.push(Reverse(pack_event(
            at_ns,
            self.event_sequence,
            kind,
            slot_index,
        )));
    }

    /// Moves every ack ready now into `acks` without advancing time.
    pub fn poll_acks(&mut self, acks: &mut Vec<Ack>) -> usize {
        let now_ns = self.now_ns();
        self.run_events_until(now_ns);
        self.take_ready(acks)
    }

    /// Advances virtual time until at least one ack is ready; returns how many it moved,
    /// 0 only when nothing is in flight.
    pub fn wait_acks(&mut self, acks: &mut Vec<Ack>) -> usize {
        loop {
            let moved = self.poll_acks(acks);
            if moved > 0 {
                return moved;
            }
            let Some(next_ns) = self.next_event_ns() else {
                return 0;
            };
            self.clock.advance_to(next_ns);
        }
    }

    /// Advances virtual time to `instant_ns`, running every event up to it (acks that
    /// become ready wait for the next poll).
    pub fn run_until(&mut self, instant_ns: u64) {
        if instant_ns <= self.now_ns() {
            return;
        }
        while let Some(next_ns) = self.next_event_ns() {
            if next_ns > instant_ns {
                break;
            }
            self.clock.advance_to(next_ns);
            self.run_events_until(next_ns);
        }
        self.clock.advance_to(instant_ns);
    }

    /// The virtual time of the next pending event, if any.
    pub fn next_event_ns(&self) -> Option<u64> {
        self.events
            .peek()
            .map(|&Reverse(packed)| (packed >> 64) as u64)
    }

    /// Runs until every accepted request is acknowledged, collecting the acks.
    pub fn run_until_idle(&mut self, acks: &mut Vec<Ack>) {
        while self.total_in_flight() > 0 && self.wait_acks(acks) > 0 {}
    }

    fn take_ready(&mut self, acks: &mut Vec<Ack>) -> usize {
        let count = self.ready.len();
        if count > 0 {
            // Every operation acknowledged now is in the journal before its ack is seen.
            self.store.write_journal();
        }
        for ack in &self.ready {
            let host = &mut self.hosts[ack.host as usize];
            assert!(
                host.in_flight > 0,
                "an ack for a host with nothing in flight"
            );
            host.in_flight -= 1;
        }
        acks.append(&mut self.ready);
        count
    }

    fn run_events_until(&mut self, limit_ns: u64) {
        while let Some(&Reverse(packed)) = self.events.peek() {
            let (at_ns, kind, slot_index) = unpack_event(packed);
            if at_ns > limit_ns {
                break;
            }
            self.events.pop();
            match kind {
                EventKind::Arrive => self.arrive(slot_index),
                EventKind::BusDone => self.bus_done(slot_index),
                EventKind::ArrayDone => self.array_done(slot_index),
                EventKind::DecodeDone => self.decode_done(slot_index),
                EventKind::Complete => self.complete(slot_index),
            }
        }
    }

    fn arrive(&mut self, slot_index: u32) {
        let (device_index, host) = {
            let slot = self.slot(slot_index);
            (slot.device as usize, slot.host as usize)
        };
        let device = &mut self.devices[device_index];
        if device.free_tags > 0 {
            device.free_tags -= 1;
            self.admit(slot_index);
        } else {
            device.waiting_by_host[host].push_back(slot_index);
        }
    }

    fn release_tag(&mut self, device_index: u32) {
        let host_count = self.options.host_count;
        let device = &mut self.devices[device_index as usize];
        for offset in 0..host_count {
            let host = (device.host_rotation + offset) % host_count;
            if let Some(slot_index) = device.waiting_by_host[host as usize].pop_front() {
                device.host_rotation = (host + 1) % host_count;
                self.admit(slot_index);
                return;
            }
        }
        device.free_tags += 1;
        assert!(device.free_tags <= self.config.timing.controller_queue_depth);
    }

    fn admit(&mut self, slot_index: u32) {
        let address = self.slot(slot_index).address;
        let now_ns = self.now_ns();
        self.operation_counter += 1;
        let mut generator = SplitMix64::new(
            self.options.seed ^ self.operation_counter.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        let kind = self.slot(slot_index).kind;
        let outcome = match kind {
            CommandKind::Read => self.apply_read(slot_index, address, &mut generator),
            CommandKind::Write => self.apply_write(slot_index, address, &mut generator),
            CommandKind::Erase => self.apply_erase(slot_index, address, &mut generator),
        };
        if outcome.is_ok() && kind != CommandKind::Read {
            // A clean program's record may wait (it is written before its ack leaves);
            // an erase's goes out at once, ahead of any program into the erased block.
            let clean_program =
                kind == CommandKind::Write && self.slot(slot_index).status == AckStatus::CLEAN;
            self.journal_block_of(address, !clean_program);
        }
        let slot = self.slot_mut(slot_index);
        slot.admitted_ns = now_ns;
        match outcome {
            Ok(array_busy_ns) => {
                slot.array_busy_ns = array_busy_ns;
                let die = slot.die;
                let channel = slot.channel;
                let work = QueuedWork {
                    slot_index,
                    admitted_ns: now_ns,
                    kind: slot.kind,
                };
                self.dies[die as usize].waiting.push_back(work);
                self.refresh_offer(die);
                self.channels[channel as usize].queued_count += 1;
                self.schedule_bus(channel);
            }
            Err(violation) => {
                slot.status = AckStatus::RuleViolation(violation);
                let device = slot.device;
                let kind = slot.kind;
                self.release_tag(device);
                self.schedule_return(slot_index, now_ns, kind);
            }
        }
    }

    fn wear(&self, block_index: u64) -> BlockWear {
        let block = &self.blocks[block_index as usize];
        BlockWear {
            pe_cycles: block.pe_cycles,
            reads_since_erase: block.reads_since_erase,
            programmed_at_ns: block.programmed_at_ns,
        }
    }

    /// Appends the new state of the block at `address` to the image's journal (after a
    /// program wrote its page, or an erase), so a process death keeps it.
    fn journal_block_of(&mut self, address: FlashAddress, write_now: bool) {
        let block_index = self
            .block_index(address)
            .expect("an admitted command has a valid address");
        let now_ns = self.now_ns();
        self.store.journal_block(
            block_index,
            &self.blocks[block_index as usize],
            now_ns,
            write_now,
        );
    }

    fn page_index(&self, block_index: u64, page: u32) -> u64 {
        block_index * u64::from(self.config.geometry.pages_per_block) + u64::from(page)
    }

    fn apply_read(
        &mut self,
        slot_index: u32,
        address: FlashAddress,
        generator: &mut SplitMix64,
    ) -> Result<u64, RuleViolation> {
        let block_index = self.block_index(address)?;
        let array_read_ns = self.config.timing.array_read_ns;
        let keeps_data = self.keeps_data();
        let data_bytes = self.config.geometry.page_data_bytes as usize;
        let spare_bytes = self.host_spare_bytes();
        let factory_bad = reliability::is_factory_bad(
            &self.config.reliability,
            self.options.seed,
            block_index,
            address.block,
        );
        let programmed = address.page < self.blocks[block_index as usize].next_page;
        if factory_bad || !programmed {
            if keeps_data {
                let mut spare = vec![0xFF; spare_bytes];
                if factory_bad && address.page == 0 && !spare.is_empty() {
                    spare[0] = 0x00;
                }
                let slot = self.slot_mut(slot_index);
                slot.data = Some(vec![0xFF; data_bytes]);
                slot.spare = Some(spare);
            }
            return Ok(array_read_ns);
        }
        let rber = reliability::raw_bit_error_rate(
            &self.config.reliability,
            self.wear(block_index),
            self.now_ns(),
        );
        self.blocks[block_index as usize].reads_since_erase += 1;
        let raw_bytes = self.config.raw_page_bytes();
        let flips = reliability::poisson(generator, rber * (raw_bytes * 8) as f64);
        let (status, symbols, data, spare) = if keeps_data {
            self.read_and_decode(block_index, address.page, flips, generator)
        } else {
            let (status, symbols) = self.judge_flips(flips, generator);
            (status, symbols, None, None)
        };
        let slot = self.slot_mut(slot_index);
        slot.status = status;
        slot.ecc_symbols = symbols;
        slot.data = data;
        slot.spare = spare;
        Ok(array_read_ns)
    }

    fn flip_positions(&self, flips: u32, generator: &mut SplitMix64) -> Vec<(usize, u8)> {
        let raw_bits = (self.config.raw_page_bytes() * 8) as u64;
        (0..flips)
            .map(|_| {
                let bit = generator.below(raw_bits);
                ((bit / 8) as usize, 1u8 << (bit % 8))
            })
            .collect()
    }

    /// Status and corrected symbols of a read with `flips` bit errors, without data.
    fn judge_flips(&self, flips: u32, generator: &mut SplitMix64) -> (AckStatus, u32) {
        if flips == 0 {
            return (AckStatus::CLEAN, 0);
        }
        let positions = self.flip_positions(flips, generator);
        Self::status_of(self.codec.judge_flips(&positions))
    }

    fn status_of(judgement: crate::ecc::FlipJudgement) -> (AckStatus, u32) {
        match judgement.outcome {
            DecodeOutcome::Corrected { symbols } => (
                AckStatus::Ok {
                    corrected_bits: judgement.wrong_bits,
                    corrected_symbols: symbols,
                },
                symbols,
            ),
            DecodeOutcome::Uncorrectable => (AckStatus::Uncorrectable, 0),
        }
    }

    #[allow(clippy::type_complexity)]
    fn read_and_decode(
        &mut self,
        block_index: u64,
        page: u32,
        flips: u32,
        generator: &mut SplitMix64,
    ) -> (AckStatus, u32, Option<Vec<u8>>, Option<Vec<u8>>) {
        let mut raw = vec![0u8; self.config.raw_page_bytes()];
        let page_index = self.page_index(block_index, page);
        if self.store.read_page(page_index, &mut raw).is_err() {
            return (AckStatus::Uncorrectable, 0, None, None);
        }
        let positions = self.flip_positions(flips, generator);
        let (status, symbols) = match self.ecc_mode {
            EccMode::OutcomeModel => self.judge_read(&mut raw, &positions),
            EccMode::Decoder => self.decode_read(&mut raw, &positions),
        };
        let data_bytes = self.config.geometry.page_data_bytes as usize;
        let message_bytes = data_bytes + self.host_spare_bytes();
        let spare = raw[data_bytes..message_bytes].to_vec();
        raw.truncate(data_bytes);
        (status, symbols, Some(raw), Some(spare))
    }

    /// The outcome model on a read page: a correctable read returns the programmed bytes
    /// (what the decoder would give back), an uncorrectable one the bytes with every flip.
    fn judge_read(&self, raw: &mut [u8], positions: &[(usize, u8)]) -> (AckStatus, u32) {
        if positions.is_empty() {
            return (AckStatus::CLEAN, 0);
        }
        let judgement = self.codec.judge_flips(positions);
        if judgement.outcome == DecodeOutcome::Uncorrectable {
            for &(byte, bit) in positions {
                raw[byte] ^= bit;
            }
        }
        Self::status_of(judgement)
    }

    /// The real decoder on a read page: flips applied, then every touched codeword decoded.
    fn decode_read(&self, raw: &mut [u8], positions: &[(usize, u8)]) -> (AckStatus, u32) {
        let message_bytes = self.codec.layout().message_bytes;
        if !positions.is_empty() && !self.store.stores_parity() {
            // What the page would hold with its parity: the programmed message encoded.
            self.codec.encode_in_place(raw);
        }
        let original = (!positions.is_empty()).then(|| raw.to_vec());
        let mut touched: Vec<usize> = Vec::new();
        for &(byte, bit) in positions {
            raw[byte] ^= bit;
            if let Some(codeword) = self.codec.codeword_of_byte(byte) {
                if !touched.contains(&codeword) {
                    touched.push(codeword);
                }
            }
        }
        let corrupted = raw.to_vec();
        match self.codec.decode(raw, &touched) {
            DecodeOutcome::Corrected { symbols } => {
                if let Some(original) = &original {
                    assert!(
                        raw[..message_bytes] == original[..message_bytes] || symbols > 0,
                        "a decode that corrected nothing returned altered data"
                    );
                }
                let corrected_bits = corrupted
                    .iter()
                    .zip(raw.iter())
                    .map(|(before, after)| (before ^ after).count_ones())
                    .sum();
                (
                    AckStatus::Ok {
                        corrected_bits,
                        corrected_symbols: symbols,
                    },
                    symbols,
                )
            }
            DecodeOutcome::Uncorrectable => (AckStatus::Uncorrectable, 0),
        }
    }

    fn program_time_ns(&self, page: u32, generator: &mut SplitMix64) -> u64 {
        let timing = &self.config.timing;
        let types = &timing.program_ns_by_page_type;
        let typical_ns = types[page as usize % types.len()];
        if generator.chance(timing.program_slow_fraction) {
            typical_ns + generator.below(timing.program_ns_max - typical_ns + 1)
        } else {
            typical_ns
        }
    }

    /// The raw page a program stores: data, host spare (0xFF after the host's bytes), parity
    /// (only where the store keeps it: an image; in memory the bytes after the message stay
    /// 0xFF). Built in `data`'s own vector (no copy when it has room for the raw page).
    fn encoded_page(&self, data: Vec<u8>, spare: &[u8]) -> Vec<u8> {
        let message_bytes = self.codec.layout().message_bytes;
        let mut raw = data;
        raw.extend_from_slice(spare);
        assert!(raw.len() <= message_bytes, "data and spare fit the message");
        raw.resize(self.config.raw_page_bytes(), 0xFF);
        if self.store.stores_parity() {
            self.codec.encode_in_place(&mut raw);
        }
        raw
    }

    fn apply_write(
        &mut self,
        slot_index: u32,
        address: FlashAddress,
        generator: &mut SplitMix64,
    ) -> Result<u64, RuleViolation> {
        let block_index = self.block_index(address)?;
        let program_ns = self.program_time_ns(address.page, generator);
        let block = self.blocks[block_index as usize];
        let slot = self.slot_mut(slot_index);
        let data = slot.data.take().unwrap_or_default();
        let spare = slot.spare.take().unwrap_or_default();
        if block.grown_bad || self.is_factory_bad(address) {
            self.slot_mut(slot_index).status = AckStatus::BadBlock;
            return Ok(program_ns);
        }
        if address.page < block.next_page {
            return Err(RuleViolation::NotErased {
                block: address.block,
                page: address.page,
            });
        }
        if address.page > block.next_page {
            return Err(RuleViolation::OutOfOrder {
                expected_page: block.next_page,
                page: address.page,
            });
        }
        let failure =
            reliability::operation_failure_probability(&self.config.reliability, block.pe_cycles);
        if generator.chance(failure) {
            self.blocks[block_index as usize].grown_bad = true;
            self.slot_mut(slot_index).status = AckStatus::BadBlock;
            return Ok(program_ns);
        }
        if self.keeps_data() {
            let raw = self.encoded_page(data, &spare);
            let page_index = self.page_index(block_index, address.page);
            if self.store.write_page(page_index, raw).is_err() {
                self.blocks[block_index as usize].grown_bad = true;
                self.slot_mut(slot_index).status = AckStatus::BadBlock;
                return Ok(program_ns);
            }
        }
        let now_ns = self.now_ns();
        let block = &mut self.blocks[block_index as usize];
        if block.next_page == 0 {
            block.programmed_at_ns = now_ns;
        }
        block.next_page += 1;
        Ok(program_ns)
    }

    fn apply_erase(
        &mut self,
        slot_index: u32,
        address: FlashAddress,
        generator: &mut SplitMix64,
    ) -> Result<u64, RuleViolation> {
        let block_index = self.block_index(address)?;
        let erase_ns = self.config.timing.erase_ns;
        let pages = u64::from(self.config.geometry.pages_per_block);
        let factory_bad = self.is_factory_bad(address);
        let reliability = &self.config.reliability;
        let block = &mut self.blocks[block_index as usize];
        if block.grown_bad || factory_bad {
            self.slot_mut(slot_index).status = AckStatus::BadBlock;
            return Ok(erase_ns);
        }
        let failure = reliability::operation_failure_probability(reliability, block.pe_cycles);
        block.pe_cycles += 1;
        if generator.chance(failure) {
            block.grown_bad = true;
            self.slot_mut(slot_index).status = AckStatus::BadBlock;
            return Ok(erase_ns);
        }
        block.next_page = 0;
        block.reads_since_erase = 0;
        block.programmed_at_ns = 0;
        self.store.erase_block(block_index * pages, pages);
        Ok(erase_ns)
    }

    /// Recomputes what die `die_index` offers its channel's scheduler, after any change
    /// to its queue, register or array.
    fn refresh_offer(&mut self, die_index: u32) {
        let offer = self.bus_candidate(die_index);
        self.offers[die_index as usize] = offer;
        self.offer_keys[die_index as usize] = offer.map_or(u128::MAX, |(class, age_ns, ..)| {
            u128::from(class) << 96 | u128::from(age_ns) << 32
        });
    }

    /// The bus work a die offers its channel's scheduler: (priority class, age, slot, work).
    fn bus_candidate(&self, die_index: u32) -> Option<(u8, u64, u32, BusWork)> {
        let die = &self.dies[die_index as usize];
        let command = match die.waiting.front() {
            Some(queued) if die.array_slot.is_none() => {
                let register_limit = if queued.kind == CommandKind::Read && self.cache_read {
                    2
                } else {
                    1
                };
                (die.registers_out.len() < register_limit).then_some(match queued.kind {
                    CommandKind::Write => (
                        1,
                        queued.admitted_ns,
                        queued.slot_index,
                        BusWork::CommandAndDataIn,
                    ),
                    _ => (0, queued.admitted_ns, queued.slot_index, BusWork::Command),
                })
            }
            _ => None,
        };
        let data_out = die
            .registers_out
            .front()
            .map(|queued| (1, queued.admitted_ns, queued.slot_index, BusWork::DataOut));
        match (command, data_out) {
            (Some(command), Some(data_out)) => {
                if (command.0, command.1) <= (data_out.0, data_out.1) {
                    Some(command)
                } else {
                    Some(data_out)
                }
            }
            (command, data_out) => command.or(data_out),
        }
    }

    /// The position (within its channel) of the die whose offer wins: lowest priority
    /// class, then oldest, then first from `rotation` on. Each offer becomes one integer
    /// ordered the same way, so the choice is a minimum without unpredictable branches.
    fn best_offer_position(&self, first_die: u32, rotation: u32) -> Option<u32> {
        let dies_per_channel = self.dies_per_channel;
        let keys = &self.offer_keys[first_die as usize..(first_die + dies_per_channel) as usize];
        let mut best = u128::MAX;
        for (position, &key) in keys.iter().enumerate() {
            let position = position as u32;
            let offset = if position >= rotation {
                position - rotation
            } else {
                position + dies_per_channel - rotation
            };
            best = best.min(key | u128::from(offset));
        }
        (best != u128::MAX).then(|| {
            let offset = best as u32;
            let position = rotation + offset;
            if position >= dies_per_channel {
                position - dies_per_channel
            } else {
                position
            }
        })
    }

    /// The scoreboard: grants an idle bus to the best candidate among its dies.
    fn schedule_bus(&mut self, channel_index: u32) {
        let channel = &self.channels[channel_index as usize];
        if channel.bus_work.is_some() || channel.queued_count == 0 {
            return;
        }
        let dies_per_channel = self.dies_per_channel;
        let first_die = channel_index * dies_per_channel;
        let rotation = self.channels[channel_index as usize].rotation;
        let Some(position) = self.best_offer_position(first_die, rotation) else {
            return;
        };
        let (_, _, slot_index, work) =
            self.offers[(first_die + position) as usize].expect("the best offer exists");
        let timing = &self.config.timing;
        let busy_ns = match work {
            BusWork::Command => timing.command_address_ns,
            BusWork::CommandAndDataIn => timing.command_address_ns + timing.page_transfer_ns,
            BusWork::DataOut => timing.page_transfer_ns,
        };
        if work != BusWork::DataOut {
            let die = &mut self.dies[(first_die + position) as usize];
            let popped = die.waiting.pop_front().map(|queued| queued.slot_index);
            assert_eq!(
                popped,
                Some(slot_index),
                "the scheduler takes a die's oldest request"
            );
            die.array_slot = Some(slot_index);
            self.channels[channel_index as usize].queued_count -= 1;
            self.refresh_offer(first_die + position);
        }
        let channel = &mut self.channels[channel_index as usize];
        channel.bus_work = Some((slot_index, work));
        channel.rotation = (position + 1) % dies_per_channel;
        channel.busy_ns += busy_ns;
        let now_ns = self.now_ns();
        self.schedule(now_ns + busy_ns, EventKind::BusDone, slot_index);
    }

    fn bus_done(&mut self, slot_index: u32) {
        let now_ns = self.now_ns();
        let (channel_index, die_index, array_busy_ns, symbols) = {
            let slot = self.slot(slot_index);
            (slot.channel, slot.die, slot.array_busy_ns, slot.ecc_symbols)
        };
        let channel = &mut self.channels[channel_index as usize];
        let (busy_slot, work) = channel
            .bus_work
            .take()
            .expect("a bus that finished was busy");
        assert_eq!(busy_slot, slot_index);
        match work {
            BusWork::Command | BusWork::CommandAndDataIn => {
                self.dies[die_index as usize].busy_ns += array_busy_ns;
                self.schedule(now_ns + array_busy_ns, EventKind::ArrayDone, slot_index);
            }
            BusWork::DataOut => {
                let popped = self.dies[die_index as usize]
                    .registers_out
                    .pop_front()
                    .map(|queued| queued.slot_index);
                self.channels[channel_index as usize].queued_count -= 1;
                assert_eq!(popped, Some(slot_index));
                self.refresh_offer(die_index);
                let timing = &self.config.timing;
                let decode_ns = timing.ecc_decode_ns
                    + timing.ecc_decode_ns_per_symbol_error * u64::from(symbols);
                let channel = &mut self.channels[channel_index as usize];
                let start_ns = now_ns.max(channel.decoder_free_ns);
                channel.decoder_free_ns = start_ns + decode_ns;
                let done_ns = channel.decoder_free_ns;
                self.schedule(done_ns, EventKind::DecodeDone, slot_index);
            }
        }
        self.schedule_bus(channel_index);
    }

    fn array_done(&mut self, slot_index: u32) {
        let (channel_index, die_index, kind, device) = {
            let slot = self.slot(slot_index);
            (slot.channel, slot.die, slot.kind, slot.device)
        };
        let die = &mut self.dies[die_index as usize];
        assert_eq!(
            die.array_slot.take(),
            Some(slot_index),
            "the die was busy with this slot"
        );
        if kind == CommandKind::Read {
            let admitted_ns = self.slot(slot_index).admitted_ns;
            let die = &mut self.dies[die_index as usize];
            die.registers_out.push_back(QueuedWork {
                slot_index,
                admitted_ns,
                kind,
            });
            self.channels[channel_index as usize].queued_count += 1;
            self.refresh_offer(die_index);
        } else {
            self.refresh_offer(die_index);
            self.release_tag(device);
            self.schedule_return(slot_index, self.now_ns(), kind);
        }
        self.schedule_bus(channel_index);
    }

    fn decode_done(&mut self, slot_index: u32) {
        let device = self.slot(slot_index).device;
        self.release_tag(device);
        self.schedule_return(slot_index, self.now_ns(), CommandKind::Read);
    }

    fn schedule_return(&mut self, slot_index: u32, ready_ns: u64, kind: CommandKind) {
        let (host, device, carries_data) = {
            let slot = self.slot(slot_index);
            let carries_data =
                kind == CommandKind::Read && !matches!(slot.status, AckStatus::RuleViolation(_));
            (slot.host, slot.device, carries_data)
        };
        let at_host_ns = ready_ns + self.hops(host, device) * self.config.timing.hop_ns;
        let delivered_ns = if carries_data {
            let page_bytes = u64::from(self.config.geometry.page_data_bytes);
            self.book_host_link(host, at_host_ns, page_bytes)
        } else {
            at_host_ns
        };
        self.schedule(
            delivered_ns + self.host_software_ns(kind),
            EventKind::Complete,
            slot_index,
        );
    }

    fn complete(&mut self, slot_index: u32) {
        let slot = self.slots[slot_index as usize].take().expect("live slot");
        self.free_slots.push(slot_index);
        let now_ns = self.now_ns();
        let page_bytes = u64::from(self.config.geometry.page_data_bytes);
        self.latencies.record(
            slot.kind,
            now_ns - slot.submitted_ns,
            page_bytes,
            slot.status.is_ok(),
        );
        self.ready.push(Ack {
            tag: slot.tag,
            host: slot.host,
            kind: slot.kind,
            status: slot.status,
            data: slot.data,
            spare: slot.spare,
            submitted_ns: slot.submitted_ns,
            completed_ns: now_ns,
        });
    }

    /// Statistics since creation (or the last [`FlashArray::reset_stats`]).
    pub fn stats(&self) -> FlashStats {
        let elapsed_ns = self.now_ns().saturating_sub(self.started_ns).max(1);
        let utilization = |busy_ns: u64| busy_ns as f64 / elapsed_ns as f64;
        FlashStats::new(
            &self.latencies,
            elapsed_ns,
            self.channels
                .iter()
                .map(|channel| utilization(channel.busy_ns))
                .collect(),
            self.dies
                .iter()
                .map(|die| utilization(die.busy_ns))
                .collect(),
            self.hosts
                .iter()
                .map(|host| utilization(host.link_busy_ns))
                .collect(),
        )
    }

    /// Forgets the statistics so far; the next window starts now.
    pub fn reset_stats(&mut self) {
        self.latencies = LatencyRecorder::default();
        self.started_ns = self.now_ns();
        self.channels
            .iter_mut()
            .for_each(|channel| channel.busy_ns = 0);
        self.dies.iter_mut().for_each(|die| die.busy_ns = 0);
        self.hosts.iter_mut().for_each(|host| host.link_busy_ns = 0);
    }

    /// Makes page contents and the block table durable (file storage; a no-op otherwise;
    /// refused when opened read-only): the image is synced, a new `.meta` replaces the old
    /// one (write, fsync, rename), then the journal, which it supersedes, is emptied.
    pub fn sync(&mut self) -> Result<(), FlashError> {
        let Some(path) = self.store.path().map(Path::to_path_buf) else {
            return Ok(());
        };
        self.store.sync_data()?;
        let journal_generation = self.store.next_journal_generation();
        store::write_metadata(
            &path,
            &Metadata {
                config: self.config.clone(),
                seed: self.options.seed,
                now_ns: self.now_ns(),
                operation_counter: self.operation_counter,
                blocks: self.blocks.clone(),
                journal_generation,
            },
        )?;
        self.store.restart_journal(journal_generation)
    }

    /// The array's clock as a shared [`Clock`].
    pub fn shared_clock(&self) -> Arc<dyn Clock> {
        self.clock.as_clock()
    }
}
