//! The FTL core: the page map with reference-counted data identities, write points
//! rotating over dies, host operations serialized per logical page, the trim/copy log,
//! checkpoints, garbage collection, wear leveling and bad-block handling.
//!
//! Map: logical page -> identity slot -> (version, physical page, references). A version
//! is the sequence number given to one logical page write; it never changes when garbage
//! collection moves the data, and copies by reference make several logical pages share
//! one identity. A physical page is live while an identity lives on it.
//!
//! Durability: a host write completes when its program is acknowledged; a trim or copy
//! completes when the log page holding its record is acknowledged. Memory changes only
//! then, so nothing that recovery could need is ever erased (see docs/ftl.md).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use flashpipe_device::{Completion, DeviceError, DeviceErrorKind, DeviceInfo, IoBuf};
use flashpipe_flash::{Ack, AckStatus, FlashCommand, FlashRequest, SubmitError};

use crate::backend::FlashBackend;
use crate::layout::{CheckpointImage, LogRecord, PageKind, Shape, SpareRecord, LOG_RECORD_BYTES};
use crate::pacing::CollectionPacing;
use crate::stats::FtlStats;

/// No identity / no page.
pub(crate) const NONE: u32 = u32::MAX;
/// Reads of a page that fail the ECC are retried this often by garbage collection.
const GC_READ_ATTEMPTS: u32 = 3;

/// How garbage collection picks its victim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VictimPolicy {
    /// The sealed block with the fewest valid pages.
    Greedy,
    /// The block maximizing age x (1 - u) / 2u (Rosenblum and Ousterhout's LFS cleaner).
    CostBenefit,
}

/// Whether a copy may fall back to moving bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyMode {
    /// Remap only; fail if the backend cannot (this FTL always can).
    ReferenceOrFail,
    /// Remap when possible, otherwise copy the bytes.
    ReferenceOrBytes,
}

/// Tunables of an FTL.
#[derive(Debug, Clone, PartialEq)]
pub struct FtlOptions {
    /// Name in errors and reports.
    pub name: String,
    /// Share of the usable pages held back from the host (0.07 = 7 %).
    pub over_provisioning: f64,
    /// Victim selection.
    pub victim_policy: VictimPolicy,
    /// Host pages written between checkpoints (0: only when the log block fills).
    pub checkpoint_interval_pages: u64,
    /// Static wear leveling moves cold data when max - min erase count exceeds this.
    pub static_wear_leveling_spread: Option<u32>,
    /// Host requests in flight.
    pub queue_depth: u32,
    /// Victims collected at once.
    pub gc_parallel_victims: u32,
    /// Check the map against the block table after every collected block and panic on
    /// a difference (tests).
    pub check_after_collection: bool,
    /// K: the most garbage-collection migrations one host page write may be held for
    /// (collection pacing, [`crate::pacing`]); None sizes K from the geometry and the
    /// over-provisioning at format and mount; Some(0) turns pacing off (no bound: host
    /// writes then wait only when the free blocks outside the reserve run out).
    pub gc_migrations_per_host_page_max: Option<u32>,
    /// Pacing charges host pages while free blocks are below the host floor (the
    /// reserve) plus this many; 1 costs the least write amplification (docs/ftl.md).
    pub gc_pacing_headroom_blocks: u32,
    /// Panic when a host page waits past the bound (tests); the count of such waits is
    /// in [`FtlStats::host_write_wait_bound_exceeded`] either way.
    pub check_host_write_wait_bound: bool,
}

impl Default for FtlOptions {
    fn default() -> Self {
        FtlOptions {
            name: "ftl".to_string(),
            over_provisioning: 0.1,
            victim_policy: VictimPolicy::Greedy,
            checkpoint_interval_pages: 4096,
            static_wear_leveling_spread: Some(64),
            queue_depth: 64,
            gc_parallel_victims: 2,
            check_after_collection: false,
            gc_migrations_per_host_page_max: None,
            gc_pacing_headroom_blocks: 1,
            check_host_write_wait_bound: false,
        }
    }
}

/// How a block is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockUse {
    /// Erased and in its die's free set.
    Free,
    /// A write point of a stream.
    Open(Stream),
    /// Full (or closed at mount) data block.
    Sealed,
    /// Being collected.
    Victim,
    /// Holds log pages.
    Log,
    /// Holds checkpoint pages.
    Checkpoint,
    /// Erase in flight.
    Erasing,
    /// Retired: factory or grown bad, never used again.
    Retired,
}

/// Write streams with their own open blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    /// Host writes (hot).
    Host,
    /// Garbage-collection migrations (cold).
    Collection,
    /// Trim and copy records.
    Log,
    /// Checkpoint images.
    Checkpoint,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockInfo {
    pub(crate) usage: BlockUse,
    pub(crate) erase_count: u32,
    pub(crate) valid_pages: u32,
    pub(crate) programs_in_flight: u32,
    pub(crate) reads_in_flight: u32,
    pub(crate) last_program_ns: u64,
    pub(crate) bad: u8,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Identity {
    pub(crate) version: u64,
    pub(crate) physical_page: u32,
    pub(crate) references: u32,
    pub(crate) logical_origin: u64,
    pub(crate) poisoned: bool,
}

#[derive(Debug, Clone, Copy)]
struct OpenBlock {
    block: u32,
    next_page: u32,
}

enum RawJob {
    HostRead {
        op: u64,
        offset: usize,
        logical: u64,
        physical_page: u32,
    },
    HostProgram {
        op: u64,
        logical: u64,
        version: u64,
        physical_page: u32,
        data: Vec<u8>,
    },
    GcRead {
        physical_page: u32,
        identity: u32,
        attempt: u32,
    },
    GcProgram {
        identity: u32,
        from_page: u32,
        physical_page: u32,
        data: Vec<u8>,
        poisoned: bool,
    },
    LogProgram {
        physical_page: u32,
        records: Vec<(LogRecord, u64)>,
    },
    CheckpointProgram {
        physical_page: u32,
        part: u32,
    },
    Erase {
        block: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HostKind {
    Read,
    Write,
    Trim,
    Copy,
    Flush,
}

struct HostOp {
    tag: u64,
    kind: HostKind,
    first: u64,
    count: u64,
    source: u64,
    buffer: Option<IoBuf>,
    started: bool,
    pages_issued: u64,
    pages_left: u64,
    error: Option<DeviceError>,
    submitted_ns: u64,
    stalled_since_ns: Option<u64>,
}

struct CheckpointWrite {
    sequence: u64,
    parts: Vec<Vec<u8>>,
    parts_left: u32,
    blocks: Vec<u32>,
    superseded_log_blocks: Vec<u32>,
}

/// The flash translation layer.
pub struct Ftl {
    pub(crate) backend: Box<dyn FlashBackend>,
    pub(crate) info: DeviceInfo,
    pub(crate) options: FtlOptions,
    pub(crate) shape: Shape,
    pub(crate) map: Vec<u32>,
    pub(crate) identities: Vec<Identity>,
    free_identities: Vec<u32>,
    pub(crate) page_identity: Vec<u32>,
    pub(crate) blocks: Vec<BlockInfo>,
    free_by_die: Vec<BTreeSet<(u32, u32)>>,
    pub(crate) free_block_count: u32,
    open_blocks: HashMap<(u8, u32), OpenBlock>,
    rotation_cursor: [u32; 2],
    pub(crate) next_sequence: u64,
    pub(crate) reserve_blocks: u32,
    pub(crate) gc_target_free_blocks: u32,
    pub(crate) metadata_reserve_blocks: u32,
    pub(crate) pacing: CollectionPacing,
    pub(crate) host_programs_in_flight: u32,
    rescue_pending: Vec<u32>,
    host_ops: HashMap<u64, HostOp>,
    next_op_id: u64,
    waiting: VecDeque<u64>,
    busy_logical: HashMap<u64, u32>,
    mutations_active: u32,
    pub(crate) ready: Vec<Completion>,
    jobs: HashMap<u64, RawJob>,
    next_tag: u64,
    backlog: VecDeque<FlashRequest>,
    acks: Vec<Ack>,
    log_pending: Vec<(LogRecord, u64)>,
    log_programs_in_flight: u32,
    pub(crate) log_blocks: Vec<u32>,
    checkpoint_wanted: bool,
    checkpoint_write: Option<CheckpointWrite>,
    pub(crate) checkpoint_blocks: Vec<u32>,
    pub(crate) checkpoint_sequence: u64,
    host_pages_since_checkpoint: u64,
    victims: Vec<u32>,
    gc_pending_relocations: VecDeque<(u32, u32, Vec<u8>, bool)>,
    gc_busy_since_ns: Option<u64>,
    erases_since_wear_check: u32,
    pub(crate) stats: FtlStats,
    /// Mounted with [`Ftl::mount_read_only`]: nothing is ever programmed or erased (no
    /// collection, log, checkpoint, rescue; host writes, trims and copies refused).
    pub(crate) read_only: bool,
}

fn stream_index(stream: Stream) -> u8 {
    match stream {
        Stream::Host => 0,
        Stream::Collection => 1,
        Stream::Log => 2,
        Stream::Checkpoint => 3,
    }
}

impl Ftl {
    /// An FTL over `backend` with every block unknown: callers (format, mount) fill the
    /// block table, then call [`Ftl::finish_setup`].
    pub(crate) fn empty(
        backend: Box<dyn FlashBackend>,
        options: FtlOptions,
        logical_pages: u64,
    ) -> Ftl {
        let shape = Shape::new(backend.config());
        let metadata_reserve_blocks = 2 * Self::checkpoint_blocks(&shape, logical_pages) + 4;
        let reserve_blocks = shape.die_count + metadata_reserve_blocks;
        let info = DeviceInfo {
            name: Arc::from(options.name.as_str()),
            block_size_bytes: shape.page_bytes as u32,
            block_count: logical_pages,
            queue_depth: options.queue_depth,
        };
        Ftl {
            map: vec![NONE; logical_pages as usize],
            identities: Vec::new(),
            free_identities: Vec::new(),
            page_identity: vec![NONE; shape.page_count() as usize],
            blocks: vec![
                BlockInfo {
                    usage: BlockUse::Retired,
                    erase_count: 0,
                    valid_pages: 0,
                    programs_in_flight: 0,
                    reads_in_flight: 0,
                    last_program_ns: 0,
                    bad: 0,
                };
                shape.block_count as usize
            ],
            free_by_die: vec![BTreeSet::new(); shape.die_count as usize],
            free_block_count: 0,
            open_blocks: HashMap::new(),
            rotation_cursor: [0, 0],
            next_sequence: 1,
            reserve_blocks,
            gc_target_free_blocks: reserve_blocks + shape.die_count.max(2),
            metadata_reserve_blocks,
            pacing: CollectionPacing::default(),
            host_programs_in_flight: 0,
            rescue_pending: Vec::new(),
            read_only: false,
            host_ops: HashMap::new(),
            next_op_id: 0,
            waiting: VecDeque::new(),
            busy_logical: HashMap::new(),
            mutations_active: 0,
            ready: Vec::new(),
            jobs: HashMap::new(),
            next_tag: 0,
            backlog: VecDeque::new(),
            acks: Vec::new(),
            log_pending: Vec::new(),
            log_programs_in_flight: 0,
            log_blocks: Vec::new(),
            checkpoint_wanted: false,
            checkpoint_write: None,
            checkpoint_blocks: Vec::new(),
            checkpoint_sequence: 0,
            host_pages_since_checkpoint: 0,
            victims: Vec::new(),
            gc_pending_relocations: VecDeque::new(),
            gc_busy_since_ns: None,
            erases_since_wear_check: 0,
            stats: FtlStats::default(),
            info,
            options,
            shape,
            backend,
        }
    }

    fn checkpoint_blocks(shape: &Shape, logical_pages: u64) -> u32 {
        let block_bytes = shape.page_bytes as u64 * u64::from(shape.pages_per_block);
        let checkpoint_bytes = logical_pages * 8 + u64::from(shape.block_count) * 5 + 64;
        checkpoint_bytes.div_ceil(block_bytes) as u32 + 1
    }

    /// Blocks the FTL keeps out of the host's reach for a geometry: the collection
    /// reserve (one write point per die, two checkpoints, log blocks), the host write
    /// points and the collection's slack.
    pub(crate) fn reserve_for(shape: &Shape, logical_pages: u64) -> u32 {
        3 * shape.die_count + 2 * Self::checkpoint_blocks(shape, logical_pages) + 4
    }

    /// The device description (block = one flash page).
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The options.
    pub fn options(&self) -> &FtlOptions {
        &self.options
    }

    /// The backend.
    pub fn backend(&self) -> &dyn FlashBackend {
        &*self.backend
    }

    /// Makes the backend's storage durable (a file-backed array's pages and block table);
    /// call it after a completed flush so that a reopened array holds what was flushed.
    pub fn sync_backend_storage(&mut self) -> Result<(), crate::FtlError> {
        self.backend
            .sync_storage()
            .map_err(|error| crate::FtlError::Unsupported {
                detail: format!("cannot make the flash array's file durable: {error}"),
            })
    }

    /// Hands the backend back, dropping all in-memory state (what a crash does).
    pub fn into_backend(self) -> Box<dyn FlashBackend> {
        self.backend
    }

    /// Free blocks garbage collection keeps in steady state (its start threshold): space
    /// that holds no data, for effective over-provisioning figures.
    pub fn free_block_target(&self) -> u32 {
        self.gc_target_free_blocks
    }

    /// Statistics so far.
    pub fn stats(&self) -> FtlStats {
        let mut stats = self.stats.clone();
        if let Some(since_ns) = self.gc_busy_since_ns {
            stats.gc_busy_ns += self.backend.now_ns() - since_ns;
        }
        stats.free_blocks = self.free_block_count;
        let good: Vec<u32> = self
            .blocks
            .iter()
            .filter(|block| block.usage != BlockUse::Retired)
            .map(|block| block.erase_count)
            .collect();
        stats.retired_blocks = (self.blocks.len() - good.len()) as u32;
        stats.erase_count_min = good.iter().copied().min().unwrap_or(0);
        stats.erase_count_max = good.iter().copied().max().unwrap_or(0);
        stats.erase_count_mean = if good.is_empty() {
            0.0
        } else {
            good.iter().map(|&count| f64::from(count)).sum::<f64>() / good.len() as f64
        };
        stats
    }

    // ----- blocks and allocation -----

    pub(crate) fn add_free_block(&mut self, block: u32) {
        let info = &mut self.blocks[block as usize];
        assert_eq!(info.valid_pages, 0, "a free block holds no live page");
        info.usage = BlockUse::Free;
        let die = self.shape.die_of(block);
        let inserted = self.free_by_die[die as usize].insert((info.erase_count, block));
        assert!(inserted, "block {block} freed twice");
        self.free_block_count += 1;
    }

    fn take_free_block(&mut self, die: u32, stream: Stream) -> Option<u32> {
        let allowed = match stream {
            Stream::Host => self.free_block_count > self.reserve_blocks,
            Stream::Collection => self.free_block_count > self.metadata_reserve_blocks / 2,
            Stream::Log | Stream::Checkpoint => self.free_block_count > 0,
        };
        if !allowed {
            return None;
        }
        let (_, block) = self.free_by_die[die as usize].pop_first()?;
        self.free_block_count -= 1;
        self.blocks[block as usize].usage = BlockUse::Open(stream);
        Some(block)
    }

    fn die_with_most_free_blocks(&self) -> u32 {
        (0..self.shape.die_count)
            .max_by_key(|&die| self.free_by_die[die as usize].len())
            .unwrap_or(0)
    }

    /// The next page of `stream`; host and collection writes rotate over the dies.
    fn allocate_page(&mut self, stream: Stream) -> Option<u32> {
        let dies = self.shape.die_count;
        let rotating = matches!(stream, Stream::Host | Stream::Collection);
        let attempts = if rotating { dies } else { 1 };
        for _ in 0..attempts {
            let die = if rotating {
                let cursor = &mut self.rotation_cursor[stream_index(stream) as usize];
                let die = *cursor;
                *cursor = (*cursor + 1) % dies;
                die
            } else {
                0
            };
            if let Some(page) = self.allocate_in(stream, die) {
                return Some(page);
            }
        }
        None
    }

    fn allocate_in(&mut self, stream: Stream, die: u32) -> Option<u32> {
        let key = (stream_index(stream), die);
        let open = match self.open_blocks.get(&key).copied() {
            Some(open) => open,
            None => {
                let source_die = if matches!(stream, Stream::Log | Stream::Checkpoint) {
                    self.die_with_most_free_blocks()
                } else {
                    die
                };
                let block = self.take_free_block(source_die, stream)?;
                if stream == Stream::Log {
                    self.blocks[block as usize].usage = BlockUse::Log;
                    self.log_blocks.push(block);
                }
                if stream == Stream::Checkpoint {
                    self.blocks[block as usize].usage = BlockUse::Checkpoint;
                    if let Some(write) = self.checkpoint_write.as_mut() {
                        write.blocks.push(block);
                    }
                }
                OpenBlock {
                    block,
                    next_page: 0,
                }
            }
        };
        let page = self.shape.physical_page(open.block, open.next_page);
        if open.next_page + 1 == self.shape.pages_per_block {
            self.open_blocks.remove(&key);
            self.seal(open.block, stream);
        } else {
            self.open_blocks.insert(
                key,
                OpenBlock {
                    block: open.block,
                    next_page: open.next_page + 1,
                },
            );
        }
        let info = &mut self.blocks[open.block as usize];
        info.programs_in_flight += 1;
        Some(page)
    }

    fn seal(&mut self, block: u32, stream: Stream) {
        let info = &mut self.blocks[block as usize];
        match stream {
            Stream::Host | Stream::Collection => {
                if info.usage == BlockUse::Open(stream) {
                    info.usage = BlockUse::Sealed;
                }
            }
            Stream::Log => {
                if self.checkpoint_write.is_none() {
                    self.checkpoint_wanted = true;
                }
            }
            Stream::Checkpoint => {}
        }
    }

    /// Stops appending to the open blocks of `stream` (all dies).
    fn close_stream(&mut self, stream: Stream) {
        let keys: Vec<(u8, u32)> = self
            .open_blocks
            .keys()
            .copied()
            .filter(|&(index, _)| index == stream_index(stream))
            .collect();
        for key in keys {
            if let Some(open) = self.open_blocks.remove(&key) {
                self.seal(open.block, stream);
            }
        }
    }

    fn retire_block(&mut self, block: u32) {
        let info = self.blocks[block as usize];
        if info.bad != 0 {
            return;
        }
        self.stats.grown_bad_blocks += 1;
        self.open_blocks.retain(|_, open| open.block != block);
        let info = &mut self.blocks[block as usize];
        info.bad = 2;
        match info.usage {
            BlockUse::Open(_) | BlockUse::Sealed => {
                info.usage = BlockUse::Victim;
                self.rescue_pending.push(block);
            }
            BlockUse::Victim => {}
            BlockUse::Free => unreachable!("free blocks are not programmed"),
            _ => {}
        }
    }

    // ----- identities -----

    pub(crate) fn new_identity(&mut self, identity: Identity) -> u32 {
        match self.free_identities.pop() {
            Some(slot) => {
                self.identities[slot as usize] = identity;
                slot
            }
            None => {
                self.identities.push(identity);
                (self.identities.len() - 1) as u32
            }
        }
    }

    /// Points `logical` at `slot` (NONE unmaps), releasing the previous identity.
    pub(crate) fn set_mapping(&mut self, logical: u64, slot: u32) {
        let previous = std::mem::replace(&mut self.map[logical as usize], slot);
        if slot != NONE {
            self.identities[slot as usize].references += 1;
        }
        if previous != NONE {
            self.release_identity(previous);
        }
    }

    fn release_identity(&mut self, slot: u32) {
        let identity = &mut self.identities[slot as usize];
        assert!(identity.references > 0, "identity {slot} released twice");
        identity.references -= 1;
        if identity.references > 0 {
            return;
        }
        let page = identity.physical_page;
        assert_eq!(self.page_identity[page as usize], slot);
        self.page_identity[page as usize] = NONE;
        let block = self.shape.block_of(page);
        self.blocks[block as usize].valid_pages -= 1;
        self.free_identities.push(slot);
    }

    // ----- raw submission -----

    fn send(&mut self, command: FlashCommand, job: RawJob) {
        let tag = self.next_tag;
        self.next_tag += 1;
        self.jobs.insert(tag, job);
        self.backlog.push_back(FlashRequest {
            tag,
            host: 0,
            command,
        });
    }

    fn push_backlog(&mut self) {
        while let Some(request) = self.backlog.pop_front() {
            match self.backend.submit(request) {
                Ok(()) => {}
                Err(SubmitError::QueueFull { request, .. }) => {
                    self.backlog.push_front(*request);
                    return;
                }
                Err(SubmitError::UnknownHost { .. }) => {
                    panic!("the FTL submits as host 0, which every array has")
                }
            }
        }
    }

    fn submit_program(
        &mut self,
        physical_page: u32,
        record: SpareRecord,
        data: Vec<u8>,
        job: RawJob,
    ) {
        let block = self.shape.block_of(physical_page);
        let record = SpareRecord {
            program_sequence: self.take_sequence(),
            erase_count: self.blocks[block as usize].erase_count,
            ..record
        };
        let spare = record.encode(&data);
        let address = self
            .shape
            .address(block, physical_page % self.shape.pages_per_block);
        self.blocks[block as usize].last_program_ns = self.backend.now_ns();
        self.send(
            FlashCommand::WritePage {
                address,
                data,
                spare,
            },
            job,
        );
    }

    fn submit_read(&mut self, physical_page: u32, job: RawJob) {
        let block = self.shape.block_of(physical_page);
        self.blocks[block as usize].reads_in_flight += 1;
        let address = self
            .shape
            .address(block, physical_page % self.shape.pages_per_block);
        self.send(FlashCommand::ReadPage { address }, job);
    }

    fn submit_erase(&mut self, block: u32) {
        self.blocks[block as usize].usage = BlockUse::Erasing;
        let address = self.shape.address(block, 0);
        self.send(
            FlashCommand::EraseBlock { address },
            RawJob::Erase { block },
        );
    }

    pub(crate) fn take_sequence(&mut self) -> u64 {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        sequence
    }

    fn empty_page(&self) -> Vec<u8> {
        if self.backend.keeps_data() {
            vec![0u8; self.shape.page_bytes]
        } else {
            Vec::new()
        }
    }

    // ----- host operations -----

    pub(crate) fn open_host_op(
        &mut self,
        tag: u64,
        kind: HostKindPublic,
        first: u64,
        count: u64,
        source: u64,
        buffer: Option<IoBuf>,
    ) {
        let kind = match kind {
            HostKindPublic::Read => HostKind::Read,
            HostKindPublic::Write => HostKind::Write,
            HostKindPublic::Trim => HostKind::Trim,
            HostKindPublic::Copy => HostKind::Copy,
            HostKindPublic::Flush => HostKind::Flush,
        };
        let id = self.next_op_id;
        self.next_op_id += 1;
        let pages = match kind {
            HostKind::Read | HostKind::Write => count,
            HostKind::Trim | HostKind::Copy | HostKind::Flush => 1,
        };
        self.host_ops.insert(
            id,
            HostOp {
                tag,
                kind,
                first,
                count,
                source,
                buffer,
                started: false,
                pages_issued: 0,
                pages_left: pages,
                error: None,
                submitted_ns: self.backend.now_ns(),
                stalled_since_ns: None,
            },
        );
        self.waiting.push_back(id);
    }

    /// Host operations accepted and not yet reaped.
    pub(crate) fn host_in_flight(&self) -> usize {
        self.host_ops.len() + self.ready.len()
    }

    fn touched_logical(op: &HostOp) -> Vec<u64> {
        let mut pages: Vec<u64> = (op.first..op.first + op.count).collect();
        if op.kind == HostKind::Copy {
            pages.extend(op.source..op.source + op.count);
        }
        pages
    }

    fn conflicts(&self, op: &HostOp) -> bool {
        match op.kind {
            HostKind::Read | HostKind::Flush => false,
            _ => Self::touched_logical(op)
                .iter()
                .any(|page| self.busy_logical.contains_key(page)),
        }
    }

    fn mark_busy(&mut self, op_id: u64, busy: bool) {
        let pages = Self::touched_logical(&self.host_ops[&op_id]);
        for page in pages {
            if busy {
                *self.busy_logical.entry(page).or_insert(0) += 1;
            } else {
                let count = self
                    .busy_logical
                    .get_mut(&page)
                    .expect("a busy logical page");
                *count -= 1;
                if *count == 0 {
                    self.busy_logical.remove(&page);
                }
            }
        }
    }

    fn start_waiting_ops(&mut self) {
        while let Some(&op_id) = self.waiting.front() {
            let op = &self.host_ops[&op_id];
            let kind = op.kind;
            let fresh = !op.started;
            let mutation = matches!(kind, HostKind::Write | HostKind::Trim | HostKind::Copy);
            let quiescing = self.checkpoint_wanted && self.checkpoint_write.is_none();
            if mutation && fresh && quiescing {
                return;
            }
            if fresh && self.conflicts(op) {
                return;
            }
            if fresh && mutation {
                self.mark_busy(op_id, true);
                self.mutations_active += 1;
            }
            self.host_ops.get_mut(&op_id).expect("open op").started = true;
            let finished_issuing = match kind {
                HostKind::Read => {
                    self.issue_read(op_id);
                    true
                }
                HostKind::Write => self.issue_write_pages(op_id),
                HostKind::Trim | HostKind::Copy => {
                    self.issue_log_record(op_id);
                    true
                }
                HostKind::Flush => {
                    self.finish_host_pages(op_id, 1);
                    true
                }
            };
            if !finished_issuing {
                return;
            }
            self.waiting.pop_front();
        }
    }

    fn issue_read(&mut self, op_id: u64) {
        let (first, count) = {
            let op = &self.host_ops[&op_id];
            (op.first, op.count)
        };
        let page_bytes = self.shape.page_bytes;
        let mut done_now = 0;
        for index in 0..count {
            let logical = first + index;
            let offset = index as usize * page_bytes;
            let slot = self.map[logical as usize];
            if slot == NONE {
                if let Some(buffer) = self
                    .host_ops
                    .get_mut(&op_id)
                    .and_then(|op| op.buffer.as_mut())
                {
                    buffer[offset..offset + page_bytes].fill(0);
                }
                done_now += 1;
                continue;
            }
            let identity = self.identities[slot as usize];
            if identity.poisoned {
                let error = self.uncorrectable_error(logical);
                self.host_ops
                    .get_mut(&op_id)
                    .expect("open op")
                    .error
                    .get_or_insert(error);
                done_now += 1;
                continue;
            }
            self.submit_read(
                identity.physical_page,
                RawJob::HostRead {
                    op: op_id,
                    offset,
                    logical,
                    physical_page: identity.physical_page,
                },
            );
        }
        self.host_ops.get_mut(&op_id).expect("open op").pages_issued = count;
        if done_now > 0 {
            self.finish_host_pages(op_id, done_now);
        }
    }

    fn uncorrectable_error(&self, logical: u64) -> DeviceError {
        DeviceError::new(
            &self.info.name,
            DeviceErrorKind::Uncorrectable { block: logical },
        )
    }

    /// Issues as many pages of a write as there is room for; true when all are issued.
    fn issue_write_pages(&mut self, op_id: u64) -> bool {
        let page_bytes = self.shape.page_bytes;
        loop {
            let (logical, index) = {
                let op = &self.host_ops[&op_id];
                if op.pages_issued == op.count {
                    return true;
                }
                (op.first + op.pages_issued, op.pages_issued)
            };
            if self.host_programs_at_cap() {
                self.end_host_page_wait(op_id);
                return false;
            }
            let held = self.host_page_held();
            let allocated = if held {
                None
            } else {
                self.allocate_page(Stream::Host)
            };
            let Some(physical_page) = allocated else {
                let now_ns = self.backend.now_ns();
                let op = self.host_ops.get_mut(&op_id).expect("open op");
                if op.stalled_since_ns.is_none() {
                    op.stalled_since_ns = Some(now_ns);
                    self.stats.host_write_stalls += 1;
                    self.stats.gc_pacing_holds += u64::from(held);
                }
                return false;
            };
            self.end_host_page_wait(op_id);
            self.start_policy_victims();
            self.charge_host_page();
            let data = if self.backend.keeps_data() {
                let op = &self.host_ops[&op_id];
                let buffer = op.buffer.as_ref().expect("a write carries a buffer");
                let offset = index as usize * page_bytes;
                buffer[offset..offset + page_bytes].to_vec()
            } else {
                Vec::new()
            };
            let version = self.take_sequence();
            self.host_ops.get_mut(&op_id).expect("open op").pages_issued += 1;
            self.program_host_page(op_id, logical, version, physical_page, data);
        }
    }

    /// Ends the wait of the page `op_id` is about to issue, if it waited.
    fn end_host_page_wait(&mut self, op_id: u64) {
        let stalled_since = self
            .host_ops
            .get_mut(&op_id)
            .expect("open op")
            .stalled_since_ns
            .take();
        if let Some(since_ns) = stalled_since {
            self.record_host_page_wait(self.backend.now_ns() - since_ns);
        }
    }

    fn program_host_page(
        &mut self,
        op: u64,
        logical: u64,
        version: u64,
        physical_page: u32,
        data: Vec<u8>,
    ) {
        self.stats.host_pages_written += 1;
        self.host_pages_since_checkpoint += 1;
        self.reissue_host_page(op, logical, version, physical_page, data);
    }

    fn issue_log_record(&mut self, op_id: u64) {
        let sequence = self.take_sequence();
        let op = &self.host_ops[&op_id];
        let record = match op.kind {
            HostKind::Trim => LogRecord::Trim {
                sequence,
                first: op.first,
                count: op.count,
            },
            _ => LogRecord::Copy {
                sequence,
                source: op.source,
                destination: op.first,
                count: op.count,
            },
        };
        self.host_ops.get_mut(&op_id).expect("open op").pages_issued = 1;
        self.log_pending.push((record, op_id));
    }

    fn finish_host_pages(&mut self, op_id: u64, pages: u64) {
        let op = self.host_ops.get_mut(&op_id).expect("open op");
        assert!(op.pages_left >= pages, "more pages finished than issued");
        op.pages_left -= pages;
        if op.pages_left > 0 {
            return;
        }
        let op = self.host_ops.remove(&op_id).expect("open op");
        if matches!(op.kind, HostKind::Write | HostKind::Trim | HostKind::Copy) {
            self.mutations_active -= 1;
            let pages = Self::touched_logical(&op);
            for page in pages {
                let count = self
                    .busy_logical
                    .get_mut(&page)
                    .expect("a busy logical page");
                *count -= 1;
                if *count == 0 {
                    self.busy_logical.remove(&page);
                }
            }
        }
        let latency = self.backend.now_ns() - op.submitted_ns;
        self.stats
            .record_host_latency(op.kind == HostKind::Read, latency);
        self.ready.push(Completion {
            tag: op.tag,
            status: op.error.map_or(Ok(()), Err),
            buffer: op.buffer,
        });
    }

    // ----- log writer -----

    fn write_log_pages(&mut self) {
        let capacity = (self.shape.page_bytes / LOG_RECORD_BYTES).max(1);
        while !self.log_pending.is_empty() && self.log_programs_in_flight < 2 {
            let Some(physical_page) = self.allocate_page(Stream::Log) else {
                return;
            };
            let take = self.log_pending.len().min(capacity);
            let records: Vec<(LogRecord, u64)> = self.log_pending.drain(..take).collect();
            self.program_log_page(physical_page, records);
        }
    }

    fn program_log_page(&mut self, physical_page: u32, records: Vec<(LogRecord, u64)>) {
        let mut data = Vec::with_capacity(self.shape.page_bytes);
        for (record, _) in &records {
            record.encode_into(&mut data);
        }
        if self.backend.keeps_data() {
            data.resize(self.shape.page_bytes, 0);
        } else {
            data.clear();
        }
        let record = SpareRecord {
            kind: PageKind::Log,
            poisoned: false,
            field_a: records.len() as u64,
            field_b: 0,
            program_sequence: 0,
            erase_count: 0,
        };
        self.log_programs_in_flight += 1;
        self.stats.log_pages_written += 1;
        self.submit_program(
            physical_page,
            record,
            data,
            RawJob::LogProgram {
                physical_page,
                records,
            },
        );
    }

    fn apply_log_record(&mut self, record: LogRecord) {
        match record {
            LogRecord::Trim { first, count, .. } => {
                for logical in first..first + count {
                    self.set_mapping(logical, NONE);
                }
            }
            LogRecord::Copy {
                source,
                destination,
                count,
                ..
            } => {
                let captured: Vec<u32> = (source..source + count)
                    .map(|logical| self.map[logical as usize])
                    .collect();
                // Hold every source identity while overlapping destinations are remapped
                // (memmove): a remap must not free an identity a later page still needs.
                for &slot in captured.iter().filter(|&&slot| slot != NONE) {
                    self.identities[slot as usize].references += 1;
                }
                for (index, &slot) in captured.iter().enumerate() {
                    self.set_mapping(destination + index as u64, slot);
                }
                for &slot in captured.iter().filter(|&&slot| slot != NONE) {
                    self.release_identity(slot);
                }
                self.stats.pages_copied_by_reference += count;
            }
        }
    }

    // ----- checkpoints -----

    fn drive_checkpoint(&mut self) {
        if self.options.checkpoint_interval_pages > 0
            && self.host_pages_since_checkpoint >= self.options.checkpoint_interval_pages
            && self.checkpoint_write.is_none()
        {
            self.checkpoint_wanted = true;
        }
        if !self.checkpoint_wanted || self.checkpoint_write.is_some() {
            return;
        }
        if self.mutations_active > 0 || self.log_programs_in_flight > 0 {
            return;
        }
        if !self.log_pending.is_empty() {
            return;
        }
        self.start_checkpoint();
    }

    pub(crate) fn snapshot(&self, sequence: u64) -> CheckpointImage {
        CheckpointImage {
            sequence,
            versions: self
                .map
                .iter()
                .map(|&slot| {
                    if slot == NONE {
                        0
                    } else {
                        self.identities[slot as usize].version
                    }
                })
                .collect(),
            erase_counts: self.blocks.iter().map(|block| block.erase_count).collect(),
            bad_states: self.blocks.iter().map(|block| block.bad).collect(),
            pages_per_block: self.shape.pages_per_block,
        }
    }

    /// Snapshots the map (nothing mutating is in flight) and starts writing it.
    pub(crate) fn start_checkpoint(&mut self) {
        let sequence = self.take_sequence();
        let image = self.snapshot(sequence).encode();
        let parts: Vec<Vec<u8>> = image
            .chunks(self.shape.page_bytes)
            .map(|chunk| {
                let mut part = chunk.to_vec();
                part.resize(self.shape.page_bytes, 0);
                part
            })
            .collect();
        self.close_stream(Stream::Log);
        let superseded_log_blocks = std::mem::take(&mut self.log_blocks);
        self.close_stream(Stream::Checkpoint);
        self.checkpoint_wanted = false;
        self.host_pages_since_checkpoint = 0;
        self.checkpoint_write = Some(CheckpointWrite {
            sequence,
            parts_left: parts.len() as u32,
            parts,
            blocks: Vec::new(),
            superseded_log_blocks,
        });
        let part_count = self
            .checkpoint_write
            .as_ref()
            .map_or(0, |write| write.parts.len() as u32);
        for part in 0..part_count {
            self.issue_checkpoint_part(part);
        }
    }

    fn issue_checkpoint_part(&mut self, part: u32) {
        let physical_page = self
            .allocate_page(Stream::Checkpoint)
            .expect("the reserve always holds two checkpoints");
        let write = self
            .checkpoint_write
            .as_ref()
            .expect("checkpoint in progress");
        let data = if self.backend.keeps_data() {
            write.parts[part as usize].clone()
        } else {
            Vec::new()
        };
        let record = SpareRecord {
            kind: PageKind::Checkpoint,
            poisoned: false,
            field_a: u64::from(part) | (write.parts.len() as u64) << 32,
            field_b: write.sequence,
            program_sequence: 0,
            erase_count: 0,
        };
        self.stats.checkpoint_pages_written += 1;
        self.submit_program(
            physical_page,
            record,
            data,
            RawJob::CheckpointProgram {
                physical_page,
                part,
            },
        );
    }

    fn checkpoint_part_done(&mut self) {
        let write = self
            .checkpoint_write
            .as_mut()
            .expect("checkpoint in progress");
        write.parts_left -= 1;
        if write.parts_left > 0 {
            return;
        }
        let write = self
            .checkpoint_write
            .take()
            .expect("checkpoint in progress");
        self.close_stream(Stream::Checkpoint);
        let old_blocks = std::mem::replace(&mut self.checkpoint_blocks, write.blocks);
        self.checkpoint_sequence = write.sequence;
        self.stats.checkpoints_written += 1;
        for block in old_blocks.into_iter().chain(write.superseded_log_blocks) {
            self.recycle_metadata_block(block);
        }
    }

    fn recycle_metadata_block(&mut self, block: u32) {
        let info = &mut self.blocks[block as usize];
        assert_eq!(info.valid_pages, 0, "metadata blocks hold no data pages");
        if info.bad != 0 {
            info.usage = BlockUse::Retired;
            return;
        }
        info.usage = BlockUse::Victim;
        self.victims.push(block);
    }

    // ----- garbage collection -----

    fn drive_collection(&mut self) {
        self.start_rescues();
        self.check_static_wear_leveling();
        self.start_policy_victims();
        self.retry_pending_relocations();
        self.finish_victims();
        let copies_pending = !self.gc_pending_relocations.is_empty()
            || self
                .victims
                .iter()
                .any(|&block| self.blocks[block as usize].valid_pages > 0);
        self.settle_collection_debt(copies_pending);
        let now_ns = self.backend.now_ns();
        match (self.victims.is_empty(), self.gc_busy_since_ns) {
            (false, None) => self.gc_busy_since_ns = Some(now_ns),
            (true, Some(since)) => {
                self.stats.gc_busy_ns += now_ns - since;
                self.gc_busy_since_ns = None;
            }
            _ => {}
        }
    }

    /// The policy's victim among blocks whose copies fit the pacing quota, or among all
    /// candidates when none does.
    /// Starts victims chosen by the policy while free blocks are below the start
    /// threshold; also called between the pages of a host write, so that pacing knows
    /// the rate it must charge as soon as free space runs low.
    pub(crate) fn start_policy_victims(&mut self) {
        while self.free_block_count < self.gc_target_free_blocks
            && (self.victims.len() as u32) < self.options.gc_parallel_victims
        {
            let Some(victim) = self.select_victim() else {
                break;
            };
            self.blocks[victim as usize].usage = BlockUse::Victim;
            self.victims.push(victim);
            self.stats.gc_victims += 1;
            self.pace_victim(victim);
            self.start_victim(victim);
        }
    }

    fn select_victim(&self) -> Option<u32> {
        self.select_victim_among(true)
            .or_else(|| self.select_victim_among(false))
    }

    fn select_victim_among(&self, within_quota_only: bool) -> Option<u32> {
        let pages = self.shape.pages_per_block;
        let now_ns = self.backend.now_ns();
        let candidates = self.blocks.iter().enumerate().filter(|(_, block)| {
            block.usage == BlockUse::Sealed
                && block.programs_in_flight == 0
                && block.valid_pages < pages
                && (!within_quota_only || self.victim_within_quota(block.valid_pages))
        });
        match self.options.victim_policy {
            VictimPolicy::Greedy => candidates
                .min_by_key(|(index, block)| (block.valid_pages, *index))
                .map(|(index, _)| index as u32),
            VictimPolicy::CostBenefit => candidates
                .map(|(index, block)| {
                    let utilization = f64::from(block.valid_pages) / f64::from(pages);
                    let age = (now_ns - block.last_program_ns) as f64 + 1.0;
                    let score = if block.valid_pages == 0 {
                        f64::INFINITY
                    } else {
                        age * (1.0 - utilization) / (2.0 * utilization)
                    };
                    (index, score)
                })
                .max_by(|left, right| left.1.total_cmp(&right.1))
                .map(|(index, _)| index as u32),
        }
    }

    fn check_static_wear_leveling(&mut self) {
        let Some(spread) = self.options.static_wear_leveling_spread else {
            return;
        };
        if self.erases_since_wear_check < 8
            || self.victims.len() as u32 >= self.options.gc_parallel_victims
        {
            return;
        }
        self.erases_since_wear_check = 0;
        let good = self
            .blocks
            .iter()
            .filter(|block| block.usage != BlockUse::Retired);
        let max_erases = good.map(|block| block.erase_count).max().unwrap_or(0);
        let coldest = self
            .blocks
            .iter()
            .enumerate()
            .filter(|(_, block)| {
                block.programs_in_flight == 0
                    && matches!(
                        block.usage,
                        BlockUse::Sealed | BlockUse::Checkpoint | BlockUse::Log
                    )
            })
            .min_by_key(|(_, block)| block.erase_count);
        let Some((coldest, block)) = coldest else {
            return;
        };
        if max_erases - block.erase_count <= spread || self.free_block_count <= self.reserve_blocks
        {
            return;
        }
        if block.usage != BlockUse::Sealed {
            // Metadata blocks move when the next checkpoint supersedes them.
            if self.checkpoint_write.is_none() {
                self.checkpoint_wanted = true;
            }
            return;
        }
        let coldest = coldest as u32;
        self.blocks[coldest as usize].usage = BlockUse::Victim;
        self.victims.push(coldest);
        self.stats.static_wear_leveling_moves += 1;
        self.start_victim(coldest);
    }

    /// Starts moving the live pages off retired blocks once their programs have drained.
    fn start_rescues(&mut self) {
        let mut index = 0;
        while index < self.rescue_pending.len() {
            let block = self.rescue_pending[index];
            if self.blocks[block as usize].programs_in_flight == 0 {
                self.rescue_pending.swap_remove(index);
                self.victims.push(block);
                self.start_victim(block);
            } else {
                index += 1;
            }
        }
    }

    fn start_victim(&mut self, block: u32) {
        for page in 0..self.shape.pages_per_block {
            let physical_page = self.shape.physical_page(block, page);
            let identity = self.page_identity[physical_page as usize];
            if identity != NONE {
                self.submit_read(
                    physical_page,
                    RawJob::GcRead {
                        physical_page,
                        identity,
                        attempt: 1,
                    },
                );
            }
        }
    }

    fn relocate(&mut self, identity: u32, from_page: u32, data: Vec<u8>, poisoned: bool) {
        let live = self.page_identity[from_page as usize] == identity;
        if !live {
            self.pay_migration();
            return;
        }
        let Some(physical_page) = self.allocate_page(Stream::Collection) else {
            self.gc_pending_relocations
                .push_back((identity, from_page, data, poisoned));
            return;
        };
        let entry = self.identities[identity as usize];
        let record = SpareRecord {
            kind: PageKind::Data,
            poisoned,
            field_a: entry.logical_origin,
            field_b: entry.version,
            program_sequence: 0,
            erase_count: 0,
        };
        self.stats.gc_pages_copied += 1;
        let job = RawJob::GcProgram {
            identity,
            from_page,
            physical_page,
            data: data.clone(),
            poisoned,
        };
        self.submit_program(physical_page, record, data, job);
    }

    fn retry_pending_relocations(&mut self) {
        let pending = self.gc_pending_relocations.len();
        for _ in 0..pending {
            let Some((identity, from_page, data, poisoned)) =
                self.gc_pending_relocations.pop_front()
            else {
                return;
            };
            self.relocate(identity, from_page, data, poisoned);
        }
    }

    fn finish_victims(&mut self) {
        let mut index = 0;
        while index < self.victims.len() {
            let block = self.victims[index];
            let info = self.blocks[block as usize];
            if info.valid_pages == 0 && info.reads_in_flight == 0 && info.programs_in_flight == 0 {
                self.victims.swap_remove(index);
                self.victim_left(block);
                if info.bad != 0 {
                    self.blocks[block as usize].usage = BlockUse::Retired;
                } else {
                    self.submit_erase(block);
                }
            } else {
                index += 1;
            }
        }
    }

    // ----- acks -----

    fn handle_ack(&mut self, ack: Ack) {
        let job = self
            .jobs
            .remove(&ack.tag)
            .expect("an ack for a tag we sent");
        if let AckStatus::RuleViolation(violation) = &ack.status {
            panic!("the FTL broke a flash rule: {violation}");
        }
        match job {
            RawJob::HostRead {
                op,
                offset,
                logical,
                physical_page,
            } => self.host_read_done(ack, op, offset, logical, physical_page),
            RawJob::HostProgram {
                op,
                logical,
                version,
                physical_page,
                data,
            } => self.host_program_done(ack, op, logical, version, physical_page, data),
            RawJob::GcRead {
                physical_page,
                identity,
                attempt,
            } => self.gc_read_done(ack, physical_page, identity, attempt),
            RawJob::GcProgram {
                identity,
                from_page,
                physical_page,
                data,
                poisoned,
            } => self.gc_program_done(ack, identity, from_page, physical_page, data, poisoned),
            RawJob::LogProgram {
                physical_page,
                records,
            } => self.log_program_done(ack, physical_page, records),
            RawJob::CheckpointProgram {
                physical_page,
                part,
            } => {
                self.program_finished(physical_page);
                if ack.status.is_ok() {
                    self.checkpoint_part_done();
                } else {
                    self.retire_block(self.shape.block_of(physical_page));
                    self.issue_checkpoint_part(part);
                }
            }
            RawJob::Erase { block } => self.erase_done(ack, block),
        }
    }

    fn program_finished(&mut self, physical_page: u32) {
        let block = self.shape.block_of(physical_page);
        let info = &mut self.blocks[block as usize];
        assert!(info.programs_in_flight > 0);
        info.programs_in_flight -= 1;
    }

    fn read_finished(&mut self, physical_page: u32) {
        let block = self.shape.block_of(physical_page);
        let info = &mut self.blocks[block as usize];
        assert!(info.reads_in_flight > 0);
        info.reads_in_flight -= 1;
    }

    fn host_read_done(
        &mut self,
        ack: Ack,
        op: u64,
        offset: usize,
        logical: u64,
        physical_page: u32,
    ) {
        self.read_finished(physical_page);
        let error = match ack.status {
            AckStatus::Ok { .. } => None,
            _ => {
                self.stats.uncorrectable_reads += 1;
                Some(self.uncorrectable_error(logical))
            }
        };
        let page_bytes = self.shape.page_bytes;
        let host_op = self.host_ops.get_mut(&op).expect("open op");
        if let Some(error) = error {
            host_op.error.get_or_insert(error);
        } else if let (Some(buffer), Some(data)) = (host_op.buffer.as_mut(), ack.data.as_ref()) {
            assert_eq!(data.len(), page_bytes, "a read returns one page");
            buffer[offset..offset + page_bytes].copy_from_slice(data);
        }
        self.finish_host_pages(op, 1);
    }

    fn host_program_done(
        &mut self,
        ack: Ack,
        op: u64,
        logical: u64,
        version: u64,
        physical_page: u32,
        data: Vec<u8>,
    ) {
        self.program_finished(physical_page);
        assert!(
            self.host_programs_in_flight > 0,
            "a host program was counted"
        );
        self.host_programs_in_flight -= 1;
        if !ack.status.is_ok() {
            self.retire_block(self.shape.block_of(physical_page));
            self.stats.programs_reissued += 1;
            match self
                .allocate_page(Stream::Host)
                .or_else(|| self.allocate_page(Stream::Collection))
            {
                Some(page) => self.reissue_host_page(op, logical, version, page, data),
                None => panic!("no page left to rescue a failed program"),
            }
            return;
        }
        let slot = self.new_identity(Identity {
            version,
            physical_page,
            references: 0,
            logical_origin: logical,
            poisoned: false,
        });
        self.claim_page(physical_page, slot);
        self.set_mapping(logical, slot);
        self.finish_host_pages(op, 1);
    }

    fn reissue_host_page(
        &mut self,
        op: u64,
        logical: u64,
        version: u64,
        physical_page: u32,
        data: Vec<u8>,
    ) {
        let record = SpareRecord {
            kind: PageKind::Data,
            poisoned: false,
            field_a: logical,
            field_b: version,
            program_sequence: 0,
            erase_count: 0,
        };
        let job = RawJob::HostProgram {
            op,
            logical,
            version,
            physical_page,
            data: data.clone(),
        };
        self.host_programs_in_flight += 1;
        self.submit_program(physical_page, record, data, job);
    }

    pub(crate) fn claim_page(&mut self, physical_page: u32, slot: u32) {
        assert_eq!(
            self.page_identity[physical_page as usize], NONE,
            "physical page {physical_page} holds two live identities"
        );
        self.page_identity[physical_page as usize] = slot;
        let block = self.shape.block_of(physical_page);
        self.blocks[block as usize].valid_pages += 1;
        assert!(self.blocks[block as usize].valid_pages <= self.shape.pages_per_block);
    }

    fn gc_read_done(&mut self, ack: Ack, physical_page: u32, identity: u32, attempt: u32) {
        self.read_finished(physical_page);
        if self.page_identity[physical_page as usize] != identity {
            self.pay_migration();
            return;
        }
        let poisoned = self.identities[identity as usize].poisoned;
        let (data, poisoned) = match ack.status {
            AckStatus::Ok { .. } => (ack.data.unwrap_or_default(), poisoned),
            _ if attempt < GC_READ_ATTEMPTS => {
                self.submit_read(
                    physical_page,
                    RawJob::GcRead {
                        physical_page,
                        identity,
                        attempt: attempt + 1,
                    },
                );
                return;
            }
            _ => {
                self.stats.uncorrectable_reads += 1;
                (ack.data.unwrap_or_else(|| self.empty_page()), true)
            }
        };
        let data = if self.backend.keeps_data() && data.is_empty() {
            self.empty_page()
        } else {
            data
        };
        self.relocate(identity, physical_page, data, poisoned);
    }

    fn gc_program_done(
        &mut self,
        ack: Ack,
        identity: u32,
        from_page: u32,
        physical_page: u32,
        data: Vec<u8>,
        poisoned: bool,
    ) {
        self.program_finished(physical_page);
        if !ack.status.is_ok() {
            self.retire_block(self.shape.block_of(physical_page));
            self.stats.programs_reissued += 1;
            self.stats.gc_pages_copied -= 1;
            self.relocate(identity, from_page, data, poisoned);
            return;
        }
        self.pay_migration();
        if self.page_identity[from_page as usize] != identity {
            return;
        }
        self.page_identity[from_page as usize] = NONE;
        let from_block = self.shape.block_of(from_page);
        self.blocks[from_block as usize].valid_pages -= 1;
        let entry = &mut self.identities[identity as usize];
        entry.physical_page = physical_page;
        entry.poisoned = poisoned;
        self.claim_page(physical_page, identity);
    }

    fn log_program_done(&mut self, ack: Ack, physical_page: u32, records: Vec<(LogRecord, u64)>) {
        self.program_finished(physical_page);
        self.log_programs_in_flight -= 1;
        if !ack.status.is_ok() {
            self.retire_block(self.shape.block_of(physical_page));
            self.stats.programs_reissued += 1;
            let page = self
                .allocate_page(Stream::Log)
                .expect("the reserve holds a log block");
            self.program_log_page(page, records);
            return;
        }
        for (record, op) in records {
            self.apply_log_record(record);
            self.finish_host_pages(op, 1);
        }
    }

    fn erase_done(&mut self, ack: Ack, block: u32) {
        self.forgive_collection_debt();
        self.stats.erases += 1;
        self.erases_since_wear_check += 1;
        self.blocks[block as usize].erase_count += 1;
        if ack.status.is_ok() {
            self.add_free_block(block);
            if self.options.check_after_collection {
                if let Err(problem) = self.check_invariants() {
                    panic!("after collecting block {block}: {problem}");
                }
            }
        } else {
            let info = &mut self.blocks[block as usize];
            info.bad = 2;
            info.usage = BlockUse::Retired;
            self.stats.grown_bad_blocks += 1;
        }
    }

    // ----- the engine -----

    /// Reaps ready acks and pushes every kind of work forward, without advancing time.
    pub(crate) fn pump(&mut self) {
        let mut acks = std::mem::take(&mut self.acks);
        loop {
            acks.clear();
            self.backend.poll_acks(&mut acks);
            if acks.is_empty() {
                break;
            }
            for ack in acks.drain(..) {
                self.handle_ack(ack);
            }
            self.drive();
        }
        self.acks = acks;
        self.drive();
    }

    fn drive(&mut self) {
        if self.read_only {
            self.start_waiting_ops();
            self.push_backlog();
            return;
        }
        self.drive_collection();
        self.start_waiting_ops();
        self.write_log_pages();
        self.drive_checkpoint();
        self.push_backlog();
    }

    /// Waits (in virtual time) for at least one ack and handles it; false when nothing
    /// is in flight in the array.
    pub(crate) fn wait_and_pump(&mut self) -> bool {
        self.drive();
        let mut acks = std::mem::take(&mut self.acks);
        acks.clear();
        let moved = self.backend.wait_acks(&mut acks);
        for ack in acks.drain(..) {
            self.handle_ack(ack);
        }
        self.acks = acks;
        self.pump();
        moved > 0
    }

    /// Runs until no internal work (collection, log, checkpoint) is in flight.
    pub fn run_until_quiet(&mut self) {
        self.pump();
        while !self.jobs.is_empty() || !self.backlog.is_empty() {
            if !self.wait_and_pump() && self.backlog.is_empty() {
                break;
            }
        }
    }

    /// Writes a checkpoint now and waits for it (used at unmount and after mount).
    pub fn checkpoint_now(&mut self) {
        self.checkpoint_wanted = true;
        self.pump();
        while self.checkpoint_wanted || self.checkpoint_write.is_some() {
            assert!(
                self.wait_and_pump() || !self.backlog.is_empty(),
                "a checkpoint waits on work that never comes"
            );
        }
    }

    /// A one-line account of the allocator and collector, for errors and debugging.
    pub fn describe_state(&self) -> String {
        let mut usage: HashMap<String, u32> = HashMap::new();
        for block in &self.blocks {
            *usage.entry(format!("{:?}", block.usage)).or_insert(0) += 1;
        }
        let sealed_valid: Vec<u32> = self
            .blocks
            .iter()
            .filter(|block| block.usage == BlockUse::Sealed)
            .map(|block| block.valid_pages)
            .collect();
        format!(
            "free {} (reserve {}, target {}), usage {:?}, victims {:?}, pending relocations {}, \
             rescues {:?}, checkpoint wanted {} writing {}, mutations {}, log pending {}, \
             waiting ops {} (head {:?}), busy pages {}, jobs {}, backlog {}, sealed valid {:?}, \
             free by die {:?}, open {:?}",
            self.free_block_count,
            self.reserve_blocks,
            self.gc_target_free_blocks,
            usage,
            self.victims
                .iter()
                .map(|&block| (block, self.blocks[block as usize].valid_pages))
                .collect::<Vec<_>>(),
            self.gc_pending_relocations.len(),
            self.rescue_pending,
            self.checkpoint_wanted,
            self.checkpoint_write.is_some(),
            self.mutations_active,
            self.log_pending.len(),
            self.waiting.len(),
            self.waiting
                .front()
                .and_then(|id| self.host_ops.get(id))
                .map(|op| (
                    op.kind,
                    op.first,
                    op.count,
                    op.source,
                    op.pages_issued,
                    op.pages_left
                )),
            self.busy_logical.len(),
            self.jobs.len(),
            self.backlog.len(),
            sealed_valid,
            self.free_by_die
                .iter()
                .map(BTreeSet::len)
                .collect::<Vec<_>>(),
            self.open_blocks
        )
    }

    /// Host ops that are open (for the device adapter's wait).
    pub(crate) fn has_open_host_ops(&self) -> bool {
        !self.host_ops.is_empty()
    }

    /// Checks the map against the block table (tests call it after collections).
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut references = vec![0u32; self.identities.len()];
        for &slot in &self.map {
            if slot != NONE {
                references[slot as usize] += 1;
            }
        }
        let mut valid = vec![0u32; self.blocks.len()];
        let mut free = vec![false; self.identities.len()];
        for &slot in &self.free_identities {
            free[slot as usize] = true;
        }
        for (slot, identity) in self.identities.iter().enumerate() {
            if free[slot] {
                continue;
            }
            if identity.references != references[slot] {
                return Err(format!(
                    "identity {slot}: {} references recorded, {} in the map",
                    identity.references, references[slot]
                ));
            }
            if identity.references > 0 {
                if self.page_identity[identity.physical_page as usize] != slot as u32 {
                    return Err(format!(
                        "identity {slot} (version {}) is not on its page {}",
                        identity.version, identity.physical_page
                    ));
                }
                valid[self.shape.block_of(identity.physical_page) as usize] += 1;
            }
        }
        for (block, info) in self.blocks.iter().enumerate() {
            if info.valid_pages != valid[block] {
                return Err(format!(
                    "block {block}: {} valid pages recorded, {} live",
                    info.valid_pages, valid[block]
                ));
            }
            if info.usage == BlockUse::Free && info.valid_pages != 0 {
                return Err(format!("free block {block} holds live pages"));
            }
        }
        let live_pages = self
            .page_identity
            .iter()
            .filter(|&&slot| slot != NONE)
            .count();
        let live_identities = references.iter().filter(|&&count| count > 0).count();
        if live_pages != live_identities {
            return Err(format!(
                "{live_pages} live pages but {live_identities} live identities (lost or duplicated)"
            ));
        }
        Ok(())
    }
}

/// Host operation kinds as the device adapter names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostKindPublic {
    Read,
    Write,
    Trim,
    Copy,
    Flush,
}
