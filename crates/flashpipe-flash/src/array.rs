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
//! 5. a read's page crosses the bus (which then stays held for the bus overhead: status
//!    polling and scheduling), the channel's ECC decoder, the hops (each link direction a
//!    serialization resource, cut-through) and the host link; every request then pays the
//!    host software latency and is acknowledged.
//!
//! The model is split by concern: this file holds the array's state, its construction
//! and its public face; [`events`] the packed event heap and the loop that runs it;
//! `controller` submission, host links, tags and admission; `blocks` what an admitted
//! request does to block state and page contents (rules, wear, ECC, injected errors);
//! `timing` the per-channel bus scheduler and the path back to the host.
//!
//! The array keeps its own event heap (one packed `u128` per event, no allocation or
//! virtual call per event) and joins a `flashpipe_sim::World` as a component
//! (`impl flashpipe_sim::Component for FlashArray`), so it can share one world with
//! simulated disks and networks.

mod blocks;
mod controller;
mod events;
mod timing;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::path::Path;
use std::sync::Arc;

use flashpipe_device::{Clock, SplitMix64, VirtualClock};

use crate::config::FlashConfig;
use crate::ecc::{DecodeOutcome, EccMode, PageCodec};
use crate::interface::{
    Ack, AckStatus, CommandKind, CopyBackRefusal, FlashAddress, FlashCommand, FlashRequest,
    RuleViolation, SubmitError,
};
use crate::pool::PagePool;
use crate::reliability::{self, BlockWear};
use crate::stats::{FlashStats, LatencyRecorder};
use crate::store::{self, BlockState, FlashError, Metadata, PageStore, StorageMode};
use events::EventKind;

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

impl FlashOptions {
    /// The default options with `seed` and no data kept (timing only): what the
    /// experiments that measure time, not contents, build their array with.
    pub fn timing_only(seed: u64) -> FlashOptions {
        FlashOptions {
            seed,
            storage: StorageMode::TimingOnly,
            ..FlashOptions::default()
        }
    }
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
    /// A copy-back's command bursts plus its spare bytes (the page stays in the die).
    CommandAndSpareIn,
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
    /// A copy-back's source page (None for every other command).
    copy_back_from: Option<FlashAddress>,
    /// A copy-back's spare bytes, which cross the bus (0 for every other command).
    copy_back_spare_bytes: u32,
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
    /// The bus is held for the bus overhead after a transfer (freed by a `BusFree` event).
    held: bool,
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
    last_ack_ns: u64,
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
    /// Free raw-page buffers: programs, reads and the FTL above take from it; erases,
    /// overwrites, image writes and consumed reads give back.
    pool: PagePool,
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
    /// When each inter-controller link direction is next free: the link between devices
    /// `i` and `i + 1` at `2 i` (towards `i + 1`) and `2 i + 1` (towards `i`).
    link_free_ns: Vec<u64>,
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
            pool: PagePool::new(config.raw_page_bytes()),
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
                    held: false,
                    decoder_free_ns: 0,
                    busy_ns: 0,
                })
                .collect(),
            devices,
            link_free_ns: vec![0; 2 * (geometry.devices.max(1) - 1) as usize],
            hosts: (0..options.host_count)
                .map(|_| Host {
                    in_flight: 0,
                    link_free_ns: 0,
                    link_busy_ns: 0,
                    last_ack_ns: 0,
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

    /// An empty buffer with room for one raw page, from the array's free list: a program's
    /// data built in it is stored without a copy.
    pub fn take_page_buffer(&mut self) -> Vec<u8> {
        self.pool.take()
    }

    /// Gives back a buffer the caller is done with (a read's data once copied out).
    pub fn recycle_page_buffer(&mut self, buffer: Vec<u8>) {
        self.pool.give(buffer);
    }

    /// Page buffers on the free list now (at most [`crate::pool::PAGE_POOL_LIMIT`]).
    pub fn free_page_buffers(&self) -> usize {
        self.pool.len()
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

    /// The virtual time of the last ack completed for `host` (0 before its first, or for an
    /// unknown host): with the bytes a host was given, its own bandwidth when several
    /// hosts share the array (minFlash Fig. 6b's fairness).
    pub fn last_ack_ns(&self, host: u32) -> u64 {
        self.hosts
            .get(host as usize)
            .map_or(0, |state| state.last_ack_ns)
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
