//! The flash-aware layout's log region (docs/format.md, "Flash-aware layout", versions 8
//! and 9; docs/design/29-flash-aware.md): a commit is its data pages and a log record in
//! the checkpoint's region (version 9: no commit-ring record; every log block carries its
//! checkpoint's sequence, [`region_tag`], and a mount reads the region forward to the
//! log's end), with a checkpoint only when the region is full or correctness asks for
//! one.
//!
//! The region is [`FLASH_LOG_REGION_ERASE_BLOCKS`] whole erase blocks, erased, taken at
//! the checkpoint ([`take_region`]): the raw device programs an erase block's pages only
//! in order, so the region shares its erase blocks with nothing allocated later, and the
//! records fill it from its first page one after another. Its pages are counted as
//! handed out when a record is programmed into them ([`count_record_pages`]). The next
//! checkpoint releases the region like its other blocks: dead, then erased once that
//! checkpoint is durable.
//!
//! Checkpoints the log cannot replace: the first commit of a version-7 image (no region)
//! or of a version-8 image ([`region_from_older_version`]: its records carry no tag),
//! a commit that ran collection (`commit/plan.rs`: it moves pages and rewrites chains),
//! and the first commit after a mount that followed an unclean end
//! ([`abandon_region_after_unclean_end`]): a record cut by the power loss may have left
//! the region's next pages programmed, or reading erased but unprogrammable.

use crate::layout::{SuperBlock, FLASH_SCAN_FORMAT_VERSION};
use crate::state::{State, COLLECT_HEADROOM_ERASE_BLOCKS, FLASH_COLLECTION_RESERVE_ERASE_BLOCKS};

/// Erase blocks of a flash-aware checkpoint's log region. One: a record of a small
/// commit is one page, so one erase block holds a few hundred commits on minflash (256
/// pages) and the checkpoint that follows costs far less than the commits it saves;
/// a larger region would only lengthen the mount's replay and keep more pages out of
/// reach of data on a small device.
pub const FLASH_LOG_REGION_ERASE_BLOCKS: u64 = 1;

/// Pages of the log region the next checkpoint takes, when it needs `checkpoint_pages`
/// for everything else: the whole region, when an erased erase block is free for it and
/// the free pages cover it, the checkpoint and the collection's trigger level after it
/// (so that taking a region never starts a collection); otherwise 0 (every commit is
/// then a checkpoint, as in version 7). Always 0 outside the flash-aware layout and under
/// `CommitPolicy::CheckpointEveryCommit` (no commit would use it).
pub fn region_pages(state: &State, checkpoint_pages: u64) -> u64 {
    let Some(flash_pages) = state.allocator.flash_pages() else {
        return 0;
    };
    if state.checkpoint_every_commit {
        return 0;
    }
    let pages = flash_pages.pages_per_erase_block();
    let region = FLASH_LOG_REGION_ERASE_BLOCKS * pages;
    let collection_level = (FLASH_COLLECTION_RESERVE_ERASE_BLOCKS + COLLECT_HEADROOM_ERASE_BLOCKS)
        * pages
        + 3 * checkpoint_pages;
    let needed = collection_level + checkpoint_pages + region;
    let has_erase_blocks = state
        .allocator
        .whole_free_erase_blocks()
        .nth(FLASH_LOG_REGION_ERASE_BLOCKS as usize - 1)
        .is_some();
    if state.allocator.free_block_count() >= needed && has_erase_blocks {
        region
    } else {
        0
    }
}

/// Takes the log region of the checkpoint being prepared ([`region_pages`] decides its
/// size from `checkpoint_pages`): its pages in order, none when it gets no region.
pub fn take_region(state: &mut State, checkpoint_pages: u64) -> Vec<u64> {
    if region_pages(state, checkpoint_pages) == 0 {
        return Vec::new();
    }
    state
        .allocator
        .take_whole_erase_blocks(FLASH_LOG_REGION_ERASE_BLOCKS)
        .expect("region_pages found the erase blocks")
}

/// A log commit programs `record_pages` region pages: counted as handed out (nothing
/// outside the flash-aware layout).
pub fn count_record_pages(state: &mut State, record_pages: u64) {
    if let Some(flash_pages) = state.allocator.flash_pages_mut() {
        flash_pages.count_allocated(record_pages);
    }
}

/// A read-write mount after an unclean end (the newest ring record is not `clean`): when
/// the commit in use leaves region pages unused, a record in flight at the power cut may
/// have programmed them (or lost its program, leaving them unprogrammable), so the next
/// commit is a checkpoint into a fresh region, and the mount counts as changed so that a
/// clean unmount writes that checkpoint before its `clean` record (a later mount trusts
/// the region after a `clean` record). Also after a clean end when the forward read
/// refused a whole record for its chain pages (`image/scan_chains.rs`): its pages hold
/// the region's next index.
pub fn abandon_region_after_unclean_end(state: &mut State, super_block: &SuperBlock) {
    if super_block.log_block_count < super_block.log_region_block_count {
        state.force_checkpoint = true;
        state.changed_since_commit = true;
    }
}

/// True when the checkpoint in use is the flash-aware layout's of a version before 9:
/// its region's records carry no region tag and a mount of it reads only the records its
/// ring record names, so the next commit is a checkpoint (which writes version 9).
pub fn region_from_older_version(state: &State, super_block: &SuperBlock) -> bool {
    state.flash.is_some() && super_block.format_version < FLASH_SCAN_FORMAT_VERSION
}

/// What every header of a log record in the region of `super_block`'s checkpoint
/// carries in its `next_block` field: in the flash-aware layout (version 9) the
/// checkpoint's sequence, so that a mount reading the region forward tells the records
/// of this region from pages of any earlier use of its erase blocks; 0 otherwise.
pub fn region_tag(state: &State, super_block: &SuperBlock) -> u64 {
    match state.flash {
        Some(_) => super_block.checkpoint_sequence(),
        None => 0,
    }
}

/// True when a commit of `state` that is a log record needs no commit-ring record: the
/// flash-aware layout, whose mount finds the log's end by reading the region forward.
pub fn log_commit_skips_ring(state: &State) -> bool {
    state.flash.is_some()
}
