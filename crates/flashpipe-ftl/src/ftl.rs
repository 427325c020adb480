//! The FTL core, split by concern. This root holds [`Ftl`] (composed of one state struct
//! per concern), its constructor and its read-only accessors; the work lives in the
//! modules below, each an `impl Ftl` block plus the state it owns:
//!
//! | Module | Owns | What |
//! |---|---|---|
//! | `options` | - | `FtlOptions`, `VictimPolicy` |
//! | `allocation` | `Allocator` | free blocks per die, write points per stream and die, reserves, retiring |
//! | `mapping` | `Mapping` | logical page -> identity -> physical page, reference counts |
//! | `host` | `HostQueue` | host operations: admission, per-page serialization, issue, completion |
//! | `submission` | `RawQueue` | raw flash requests: tags, jobs, the bounded backlog |
//! | `completions` | - | acks: dispatch to the concern that sent the request; host reads and programs |
//! | `log` | `LogState` | trim and copy records, log pages, applying records |
//! | `checkpoint` | `CheckpointState` | snapshots of the map, checkpoint parts, recycling metadata blocks |
//! | `collection` | `Collector` | victims, rescues, relocations (bounded), erases |
//! | `wear` | `WearLeveler` | static wear leveling |
//! | `engine` | - | `pump`/`drive`: the order every concern is driven in |
//! | `invariants` | - | `check_invariants`, `describe_state` |
//!
//! Shared by all: the block table `blocks` (one `BlockInfo` per erase block), the one
//! sequence counter `next_sequence`, `stats`, `shape`, `options` and the backend.
//!
//! Map: logical page -> identity slot -> (version, physical page, references). A version
//! is the sequence number given to one logical page write; it never changes when garbage
//! collection moves the data, and copies by reference make several logical pages share
//! one identity. A physical page is live while an identity lives on it.
//!
//! Durability: a host write completes when its program is acknowledged; a trim or copy
//! completes when the log page holding its record is acknowledged. Memory changes only
//! then, so nothing that recovery could need is ever erased (see docs/ftl.md).

pub(crate) mod allocation;
pub(crate) mod checkpoint;
pub(crate) mod collection;
pub(crate) mod completions;
pub(crate) mod engine;
pub(crate) mod host;
pub(crate) mod invariants;
pub(crate) mod log;
pub(crate) mod mapping;
pub mod options;
pub(crate) mod submission;
pub(crate) mod wear;

use std::sync::Arc;

use flashpipe_device::DeviceInfo;

use crate::backend::FlashBackend;
use crate::layout::Shape;
use crate::pacing::CollectionPacing;
use crate::stats::FtlStats;

pub(crate) use allocation::{Allocator, BlockInfo, BlockUse, Stream};
pub(crate) use checkpoint::CheckpointState;
pub(crate) use collection::Collector;
pub(crate) use host::{HostKind, HostQueue};
pub(crate) use log::LogState;
pub(crate) use mapping::{Identity, Mapping};
pub use options::{FtlOptions, VictimPolicy};
pub(crate) use submission::RawQueue;
pub(crate) use wear::WearLeveler;

/// No identity / no page.
pub(crate) const NONE: u32 = u32::MAX;

/// The flash translation layer.
pub struct Ftl {
    pub(crate) backend: Box<dyn FlashBackend>,
    pub(crate) info: DeviceInfo,
    pub(crate) options: FtlOptions,
    pub(crate) shape: Shape,
    /// One entry per erase block: usage, wear, live pages, requests in flight, bad state.
    pub(crate) blocks: Vec<BlockInfo>,
    pub(crate) mapping: Mapping,
    pub(crate) allocator: Allocator,
    /// The one counter that numbers versions, log records, checkpoints and programs.
    pub(crate) next_sequence: u64,
    pub(crate) pacing: CollectionPacing,
    /// Host page programs sent and not yet acknowledged (capped by pacing).
    pub(crate) host_programs_in_flight: u32,
    pub(crate) host: HostQueue,
    pub(crate) raw: RawQueue,
    pub(crate) log: LogState,
    pub(crate) checkpoint: CheckpointState,
    pub(crate) collector: Collector,
    pub(crate) wear: WearLeveler,
    pub(crate) stats: FtlStats,
    /// Mounted with [`Ftl::mount_read_only`]: nothing is ever programmed or erased (no
    /// collection, log, checkpoint, rescue; host writes, trims and copies refused).
    pub(crate) read_only: bool,
}

impl Ftl {
    /// An FTL over `backend` with every block unknown: callers (format, mount) fill the
    /// block table, then size collection pacing (`size_collection_pacing`).
    pub(crate) fn empty(
        backend: Box<dyn FlashBackend>,
        options: FtlOptions,
        logical_pages: u64,
    ) -> Ftl {
        let shape = Shape::new(backend.config());
        let metadata_reserve_blocks = 2 * Self::checkpoint_blocks_for(&shape, logical_pages) + 4;
        let info = DeviceInfo {
            name: Arc::from(options.name.as_str()),
            block_size_bytes: shape.page_bytes as u32,
            block_count: logical_pages,
            queue_depth: options.queue_depth,
        };
        Ftl {
            mapping: Mapping::new(logical_pages, shape.page_count()),
            blocks: vec![BlockInfo::unknown(); shape.block_count as usize],
            allocator: Allocator::new(&shape, metadata_reserve_blocks),
            next_sequence: 1,
            pacing: CollectionPacing::default(),
            host_programs_in_flight: 0,
            read_only: false,
            host: HostQueue::default(),
            raw: RawQueue::new(RawQueue::backlog_bound_for(
                &shape,
                logical_pages,
                options.queue_depth,
            )),
            log: LogState::default(),
            checkpoint: CheckpointState::default(),
            collector: Collector::new(shape.page_count()),
            wear: WearLeveler::default(),
            stats: FtlStats::default(),
            info,
            options,
            shape,
            backend,
        }
    }

    /// Blocks the FTL keeps out of the host's reach for a geometry: the collection
    /// reserve (one write point per die, two checkpoints, log blocks), the host write
    /// points and the collection's slack.
    pub(crate) fn reserve_for(shape: &Shape, logical_pages: u64) -> u32 {
        3 * shape.die_count + 2 * Self::checkpoint_blocks_for(shape, logical_pages) + 4
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
        self.allocator.gc_target_free_blocks
    }

    /// Statistics so far.
    pub fn stats(&self) -> FtlStats {
        let mut stats = self.stats.clone();
        if let Some(since_ns) = self.collector.busy_since_ns {
            stats.gc_busy_ns += self.backend.now_ns() - since_ns;
        }
        stats.free_blocks = self.allocator.free_block_count;
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
}
