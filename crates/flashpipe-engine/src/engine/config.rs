//! How an engine is configured ([`EngineConfig`]: bounds, hand-off, flush grouping,
//! write path, read-pool memory) and the read-buffer pool a configuration gives.

use flashpipe_device::BufferPool;
use flashpipe_fs::Filesystem;
use flashpipe_shm::SharedMemoryError;

use crate::group_commit::FlushGrouping;
use crate::handoff::Handoff;

/// Bounds of an engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineConfig {
    /// Commands waiting in the engine's queue, from all clients together.
    pub command_queue_capacity: usize,
    /// Engine-owned read buffers; a read holds one until the client drops its data.
    pub read_buffer_count: u32,
    /// Largest read one command may ask for.
    pub max_read_bytes: usize,
    /// Reads in flight at once.
    pub reads_in_flight_limit: usize,
    /// How the engine thread waits on an empty inbox and its clients on their replies.
    pub handoff: Handoff,
    /// Which flushes share one file-system commit.
    pub flush_grouping: FlushGrouping,
    /// How writes go to the devices.
    pub write_path: WritePath,
    /// Where the read buffers live: the heap, or shared memory another process can map
    /// (a server handing read data to its clients by reference).
    pub read_pool_memory: PoolMemory,
}

/// Where the engine's read-buffer pool lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PoolMemory {
    /// An ordinary heap allocation (only this process sees it).
    #[default]
    Heap,
    /// A sealed memfd ([`BufferPool::in_shared_memory`], named [`READ_POOL_MEMORY_NAME`]):
    /// [`crate::Engine::read_pool`]'s `shared_memory()` gives the descriptor another process
    /// maps, and a [`crate::ReadData`]'s bytes sit at `slot * buffer_size_bytes + window_start`
    /// of it ([`crate::ReadData::pool_slot`], [`crate::ReadData::window_start`]).
    Shared,
}

/// Name of the memfd holding an engine's shared read pool (seen in `/proc/<pid>/fd`).
pub const READ_POOL_MEMORY_NAME: &str = "flashpipe-engine-read-pool";

/// How the engine carries out writes (selectable, to compare them side by side).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WritePath {
    /// Writes stay in flight while the next ones are planned and issued (batches
    /// overlap), each answered when its own requests complete; whole FS blocks go to the
    /// device straight from the client's buffer.
    #[default]
    Overlapped,
    /// As [`WritePath::Overlapped`], but reads and writes never share the device: a
    /// write first waits for every read in flight and a read for every write in flight
    /// (the wave-1 engine's alternation, kept to measure what the overlap gains).
    OverlappedAfterReads,
    /// As [`WritePath::Overlapped`], but every byte is first copied into the file
    /// system's buffers.
    OverlappedCopying,
    /// Queued writes are gathered into one batch, copied into the file system's buffers,
    /// run to completion and answered before anything else happens (the device drains
    /// between batches).
    Batched,
}

impl WritePath {
    /// The path named `name` (`overlapped`, `overlapped-after-reads`,
    /// `overlapped-copying`, `batched`).
    pub fn from_name(name: &str) -> Option<WritePath> {
        match name {
            "overlapped" => Some(WritePath::Overlapped),
            "overlapped-after-reads" => Some(WritePath::OverlappedAfterReads),
            "overlapped-copying" => Some(WritePath::OverlappedCopying),
            "batched" => Some(WritePath::Batched),
            _ => None,
        }
    }
}

impl Default for EngineConfig {
    fn default() -> EngineConfig {
        EngineConfig {
            command_queue_capacity: 256,
            read_buffer_count: 64,
            max_read_bytes: 1 << 20,
            reads_in_flight_limit: 32,
            handoff: Handoff::DEFAULT,
            flush_grouping: FlushGrouping::UntilNextChange,
            write_path: WritePath::default(),
            read_pool_memory: PoolMemory::Heap,
        }
    }
}

/// An engine's read-buffer pool, and why it is on the heap when shared memory was asked
/// and could not be had.
pub(crate) struct ReadPool {
    pub(crate) pool: BufferPool,
    pub(crate) shared_memory_refusal: Option<SharedMemoryError>,
}

/// The engine's read-buffer pool for `filesystem` under `config`: in shared memory when
/// `config.read_pool_memory` asks for it, falling back to the heap (with the reason) when
/// the region cannot be made, so an engine always starts and a server can offer the
/// copying path instead.
pub(crate) fn read_buffer_pool(filesystem: &Filesystem, config: &EngineConfig) -> ReadPool {
    let block_bytes = filesystem.stats().fs_block_size_bytes as usize;
    let buffer_size_bytes = config.max_read_bytes + 2 * block_bytes;
    let shared = match config.read_pool_memory {
        PoolMemory::Heap => None,
        PoolMemory::Shared => Some(BufferPool::in_shared_memory(
            READ_POOL_MEMORY_NAME,
            config.read_buffer_count,
            buffer_size_bytes,
        )),
    };
    match shared {
        Some(Ok(pool)) => ReadPool {
            pool,
            shared_memory_refusal: None,
        },
        shared => ReadPool {
            pool: BufferPool::new(config.read_buffer_count, buffer_size_bytes),
            shared_memory_refusal: shared.and_then(Result::err),
        },
    }
}
