//! Allocation: free blocks per die (least-worn first: dynamic wear leveling), one write
//! point per stream and die, the reserves that keep collection and metadata able to make
//! progress, and retiring blocks that failed.
//!
//! Invariants:
//! - a block is in its die's free set exactly when its usage is [`BlockUse::Free`], and
//!   `free_block_count` is the size of all free sets together;
//! - a free block holds no live page;
//! - host writes take a free block only above `reserve_blocks`, collection only above
//!   half the metadata reserve, log and checkpoint writes down to the last free block, so
//!   the reserve always holds two checkpoints and a log block;
//! - a write point hands out each page of its block once, in page order (the NAND rule);
//!   the block is sealed (data streams) when its last page is handed out;
//! - a retired block is never erased or allocated again.

use std::collections::{BTreeSet, HashMap};

use super::Ftl;
use crate::layout::Shape;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

/// What the FTL knows of one erase block.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockInfo {
    pub(crate) usage: BlockUse,
    pub(crate) erase_count: u32,
    /// Live identities on the block.
    pub(crate) valid_pages: u32,
    pub(crate) programs_in_flight: u32,
    pub(crate) reads_in_flight: u32,
    pub(crate) last_program_ns: u64,
    /// 0 good, 1 factory bad, 2 grown bad (the checkpoint's encoding).
    pub(crate) bad: u8,
}

impl BlockInfo {
    /// A block format or mount has not looked at yet.
    pub(crate) fn unknown() -> BlockInfo {
        BlockInfo {
            usage: BlockUse::Retired,
            erase_count: 0,
            valid_pages: 0,
            programs_in_flight: 0,
            reads_in_flight: 0,
            last_program_ns: 0,
            bad: 0,
        }
    }
}

/// A write point: the block a stream appends to on one die and its next page.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpenBlock {
    block: u32,
    next_page: u32,
}

/// Which write point: one per stream and die (log and checkpoint use die 0's slot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct WritePointKey {
    stream: Stream,
    die: u32,
}

/// A free block in its die's set, ordered least-worn first (then by block number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct FreeBlock {
    erase_count: u32,
    block: u32,
}

/// The state allocation owns.
pub(crate) struct Allocator {
    /// Free blocks of each die, least-worn first.
    pub(crate) free_by_die: Vec<BTreeSet<FreeBlock>>,
    pub(crate) free_block_count: u32,
    pub(crate) open_blocks: HashMap<WritePointKey, OpenBlock>,
    /// Next die of the rotating streams (host, collection).
    pub(crate) rotation_cursor: [u32; 2],
    /// Host writes take no free block at or below this.
    pub(crate) reserve_blocks: u32,
    /// Collection starts victims below this many free blocks.
    pub(crate) gc_target_free_blocks: u32,
    /// Two checkpoints and the log blocks.
    pub(crate) metadata_reserve_blocks: u32,
}

impl Allocator {
    pub(crate) fn new(shape: &Shape, metadata_reserve_blocks: u32) -> Allocator {
        let reserve_blocks = shape.die_count + metadata_reserve_blocks;
        Allocator {
            free_by_die: vec![BTreeSet::new(); shape.die_count as usize],
            free_block_count: 0,
            open_blocks: HashMap::new(),
            rotation_cursor: [0, 0],
            reserve_blocks,
            gc_target_free_blocks: reserve_blocks + shape.die_count.max(2),
            metadata_reserve_blocks,
        }
    }

    /// The block `stream` is filling in `die`, if one is open.
    pub(crate) fn open_block(&self, stream: Stream, die: u32) -> Option<u32> {
        self.open_blocks
            .get(&WritePointKey { stream, die })
            .map(|open| open.block)
    }

    /// The die whose free set is largest (where log and checkpoint blocks come from).
    pub(crate) fn die_with_most_free_blocks(&self) -> u32 {
        (0..self.free_by_die.len() as u32)
            .max_by_key(|&die| self.free_by_die[die as usize].len())
            .unwrap_or(0)
    }
}

fn rotation_index(stream: Stream) -> usize {
    match stream {
        Stream::Host => 0,
        Stream::Collection => 1,
        Stream::Log | Stream::Checkpoint => unreachable!("only data streams rotate"),
    }
}

impl Ftl {
    pub(crate) fn add_free_block(&mut self, block: u32) {
        let info = &mut self.blocks[block as usize];
        assert_eq!(info.valid_pages, 0, "a free block holds no live page");
        info.usage = BlockUse::Free;
        let die = self.shape.die_of(block);
        let inserted = self.allocator.free_by_die[die as usize].insert(FreeBlock {
            erase_count: info.erase_count,
            block,
        });
        assert!(inserted, "block {block} freed twice");
        self.allocator.free_block_count += 1;
    }

    pub(crate) fn take_free_block(&mut self, die: u32, stream: Stream) -> Option<u32> {
        let allowed = match stream {
            Stream::Host => self.allocator.free_block_count > self.allocator.reserve_blocks,
            Stream::Collection => {
                self.allocator.free_block_count > self.allocator.metadata_reserve_blocks / 2
            }
            Stream::Log | Stream::Checkpoint => self.allocator.free_block_count > 0,
        };
        if !allowed {
            return None;
        }
        let FreeBlock { block, .. } = self.allocator.free_by_die[die as usize].pop_first()?;
        self.allocator.free_block_count -= 1;
        self.blocks[block as usize].usage = BlockUse::Open(stream);
        Some(block)
    }

    /// The next page of `stream`; host and collection writes rotate over the dies.
    pub(crate) fn allocate_page(&mut self, stream: Stream) -> Option<u32> {
        let dies = self.shape.die_count;
        let rotating = matches!(stream, Stream::Host | Stream::Collection);
        let attempts = if rotating { dies } else { 1 };
        for _ in 0..attempts {
            let die = if rotating {
                let cursor = &mut self.allocator.rotation_cursor[rotation_index(stream)];
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

    pub(crate) fn allocate_in(&mut self, stream: Stream, die: u32) -> Option<u32> {
        let key = WritePointKey { stream, die };
        let open = match self.allocator.open_blocks.get(&key).copied() {
            Some(open) => open,
            None => {
                let source_die = if matches!(stream, Stream::Log | Stream::Checkpoint) {
                    self.allocator.die_with_most_free_blocks()
                } else {
                    die
                };
                let block = self.take_free_block(source_die, stream)?;
                if stream == Stream::Log {
                    self.blocks[block as usize].usage = BlockUse::Log;
                    self.log.blocks.push(block);
                }
                if stream == Stream::Checkpoint {
                    self.blocks[block as usize].usage = BlockUse::Checkpoint;
                    if let Some(write) = self.checkpoint.write.as_mut() {
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
            self.allocator.open_blocks.remove(&key);
            self.seal(open.block, stream);
        } else {
            self.allocator.open_blocks.insert(
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

    pub(crate) fn seal(&mut self, block: u32, stream: Stream) {
        let info = &mut self.blocks[block as usize];
        match stream {
            Stream::Host | Stream::Collection => {
                if info.usage == BlockUse::Open(stream) {
                    info.usage = BlockUse::Sealed;
                }
            }
            Stream::Log => {
                if self.checkpoint.write.is_none() {
                    self.checkpoint.wanted = true;
                }
            }
            Stream::Checkpoint => {}
        }
    }

    /// Stops appending to the open blocks of `stream` (all dies).
    pub(crate) fn close_stream(&mut self, stream: Stream) {
        let keys: Vec<WritePointKey> = self
            .allocator
            .open_blocks
            .keys()
            .copied()
            .filter(|key| key.stream == stream)
            .collect();
        for key in keys {
            if let Some(open) = self.allocator.open_blocks.remove(&key) {
                self.seal(open.block, stream);
            }
        }
    }

    pub(crate) fn retire_block(&mut self, block: u32) {
        let info = self.blocks[block as usize];
        if info.bad != 0 {
            return;
        }
        self.stats.grown_bad_blocks += 1;
        self.allocator
            .open_blocks
            .retain(|_, open| open.block != block);
        let info = &mut self.blocks[block as usize];
        info.bad = 2;
        match info.usage {
            BlockUse::Open(_) | BlockUse::Sealed => {
                info.usage = BlockUse::Victim;
                self.collector.rescue_pending.push(block);
            }
            BlockUse::Victim => {}
            BlockUse::Free => unreachable!("free blocks are not programmed"),
            _ => {}
        }
    }
}
