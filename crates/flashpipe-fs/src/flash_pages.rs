//! The allocator's bookkeeping in the flash-aware layout (docs/format.md, "Flash-aware
//! layout"): pages that may not be programmed again until their erase block is erased.
//!
//! A page leaves the allocator's free set when it is handed out and never returns to it
//! by a release: released, it is *dead* (no durable commit references it, but it is
//! programmed, or was skipped). An erase block whose every page is dead is *erasable*;
//! the commit erases it after its super block is durable and only then gives its pages
//! back as free (erased, programmable from page 0 in order). An erase block whose erase
//! failed is *retired*: its pages stay out of the free set for good. Dead and retired
//! pages are still listed free in a checkpoint's free list (nothing references them);
//! mount tells erased pages from programmed ones by reading (`flash_layout`).
//!
//! Data pages spread over chips: [`OpenEraseBlocks`] keeps several erase blocks open at
//! once, one per slot, and the allocator hands out pages round-robin over the slots (each
//! erase block's pages still in order). The raw device puts erase block `e` on unit
//! `e % U`, so slot `s` prefers erase blocks with `e % N == s` (`N` open blocks): when `N`
//! divides `U`, as for minflash's 64 chips and 16 slots, the open blocks are on `N`
//! different chips.
//!
//! [`FlashRing`] is where the next super block goes in the commit ring; [`FlashChains`]
//! what each file's indirect chain holds on flash, so that a log commit rewrites only the
//! chain blocks whose pointers changed (`commit/flash_chains.rs`).

use std::collections::{BTreeSet, HashMap};

use crate::layout::FlashTotals;

/// Dead pages, erasable and retired erase blocks.
#[derive(Debug, Clone, Default)]
pub struct FlashPages {
    pages_per_erase_block: u64,
    dead: BTreeSet<u64>,
    dead_in_block: HashMap<u64, u64>,
    erasable: BTreeSet<u64>,
    retired: BTreeSet<u64>,
    moved_pages: u64,
    erased_blocks: u64,
    totals: FlashTotals,
    open: OpenEraseBlocks,
}

impl FlashPages {
    /// Bookkeeping for erase blocks of `pages_per_erase_block` pages, with
    /// `open_erase_blocks` erase blocks open for allocation at once.
    pub fn new(pages_per_erase_block: u64, open_erase_blocks: u64) -> FlashPages {
        assert!(pages_per_erase_block >= 2);
        FlashPages {
            pages_per_erase_block,
            open: OpenEraseBlocks::new(open_erase_blocks),
            ..FlashPages::default()
        }
    }

    /// The erase blocks open for allocation.
    pub fn open(&self) -> &OpenEraseBlocks {
        &self.open
    }

    /// The erase blocks open for allocation, to update.
    pub fn open_mut(&mut self) -> &mut OpenEraseBlocks {
        &mut self.open
    }

    /// Pages per erase block.
    pub fn pages_per_erase_block(&self) -> u64 {
        self.pages_per_erase_block
    }

    /// `page` is referenced by no durable commit and may not be programmed again before
    /// its erase block is erased.
    pub fn mark_dead(&mut self, page: u64) {
        let newly_dead = self.dead.insert(page);
        assert!(newly_dead, "page {page} released twice");
        let erase_block = page / self.pages_per_erase_block;
        let count = self.dead_in_block.entry(erase_block).or_insert(0);
        *count += 1;
        if *count == self.pages_per_erase_block {
            self.erasable.insert(erase_block);
        }
    }

    /// Erase blocks whose every page is dead, taken out of the dead set: the caller
    /// erases each and then calls `Allocator::erased` or `Allocator::retire`.
    pub fn take_erasable(&mut self) -> Vec<u64> {
        let taken: Vec<u64> = std::mem::take(&mut self.erasable).into_iter().collect();
        for &erase_block in &taken {
            let first = erase_block * self.pages_per_erase_block;
            for page in first..first + self.pages_per_erase_block {
                self.dead.remove(&page);
            }
            self.dead_in_block.remove(&erase_block);
        }
        taken
    }

    /// Dead pages per erase block that has any (wholly dead ones included).
    pub fn dead_counts(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.dead_in_block
            .iter()
            .map(|(&erase_block, &dead)| (erase_block, dead))
    }

    /// True when `page` is dead.
    pub fn is_dead(&self, page: u64) -> bool {
        self.dead.contains(&page)
    }

    /// Counts pages moved by collection.
    pub fn count_moves(&mut self, pages: u64) {
        self.moved_pages += pages;
        self.totals.pages_moved += pages;
    }

    /// Counts `count` erase blocks erased.
    pub fn count_erases(&mut self, count: u64) {
        self.erased_blocks += count;
        self.totals.erases += count;
    }

    /// Counts pages handed out.
    pub fn count_allocated(&mut self, pages: u64) {
        self.totals.pages_allocated += pages;
    }

    /// The counters over the store's life.
    pub fn totals(&self) -> FlashTotals {
        self.totals
    }

    /// Starts the counters over the store's life from the last commit's.
    pub fn set_totals(&mut self, totals: FlashTotals) {
        self.totals = totals;
    }

    /// Pages moved by collection since mount.
    pub fn moved_pages(&self) -> u64 {
        self.moved_pages
    }

    /// Erase blocks erased since mount.
    pub fn erased_blocks(&self) -> u64 {
        self.erased_blocks
    }

    /// Erase block `erase_block` failed its erase: never allocated again.
    pub fn retire(&mut self, erase_block: u64) {
        self.retired.insert(erase_block);
    }

    /// Dead pages, then every page of retired erase blocks: what a checkpoint lists free
    /// beside the allocatable pages.
    pub fn unreferenced_pages(&self) -> Vec<u64> {
        let mut pages: Vec<u64> = self.dead.iter().copied().collect();
        for &erase_block in &self.retired {
            let first = erase_block * self.pages_per_erase_block;
            pages.extend(first..first + self.pages_per_erase_block);
        }
        pages
    }

    /// Dead pages plus the pages of retired erase blocks.
    pub fn unreferenced_page_count(&self) -> u64 {
        self.dead.len() as u64 + self.retired.len() as u64 * self.pages_per_erase_block
    }

    /// Dead pages (programmed or skipped, waiting for their erase block's erase).
    pub fn dead_page_count(&self) -> u64 {
        self.dead.len() as u64
    }

    /// Erase blocks retired after a failed erase.
    pub fn retired_erase_block_count(&self) -> u64 {
        self.retired.len() as u64
    }

    /// Erase blocks waiting for their erase.
    pub fn erasable_count(&self) -> usize {
        self.erasable.len()
    }
}

/// Most erase blocks open for allocation at once. Sixteen: four YCSB threads' commits of
/// 16 KiB InnoDB pages (two flash pages each) plus the log and ring pages keep about a dozen
/// programs in flight, so sixteen chips let them all overlap; on minflash (64 chips) they
/// are sixteen different chips. More would buy nothing for that load and cost at each
/// mount, which takes the free pages of partly used erase blocks as dead (up to `N * (P -
/// 1)` pages, 32 MiB on minflash, until collection reclaims them).
pub const MAX_OPEN_ERASE_BLOCKS: u64 = 16;

/// Erase blocks of the device per open erase block at least: a small device keeps fewer
/// open, so that the pages a mount leaves dead stay a small share of it.
pub const ERASE_BLOCKS_PER_OPEN_BLOCK: u64 = 32;

/// The erase blocks open at once on a device of `erase_blocks` erase blocks: one per
/// [`ERASE_BLOCKS_PER_OPEN_BLOCK`], at least one, at most [`MAX_OPEN_ERASE_BLOCKS`].
pub fn open_erase_block_count(erase_blocks: u64) -> u64 {
    (erase_blocks / ERASE_BLOCKS_PER_OPEN_BLOCK).clamp(1, MAX_OPEN_ERASE_BLOCKS)
}

/// The erase blocks open for allocation, one per slot (none until a page is wanted), and
/// the slot the next page comes from.
#[derive(Debug, Clone, Default)]
pub struct OpenEraseBlocks {
    slots: Vec<Option<u64>>,
    next_slot: usize,
}

impl OpenEraseBlocks {
    /// `count` empty slots (at least one).
    pub fn new(count: u64) -> OpenEraseBlocks {
        OpenEraseBlocks {
            slots: vec![None; count.max(1) as usize],
            next_slot: 0,
        }
    }

    /// Slots (erase blocks open at once at most).
    pub fn count(&self) -> u64 {
        self.slots.len() as u64
    }

    /// The slot the next page comes from; the one after it is next.
    pub fn take_next_slot(&mut self) -> usize {
        let slot = self.next_slot;
        self.next_slot = (slot + 1) % self.slots.len();
        slot
    }

    /// The erase block open in `slot`.
    pub fn get(&self, slot: usize) -> Option<u64> {
        self.slots[slot]
    }

    /// Opens `erase_block` in `slot`.
    pub fn set(&mut self, slot: usize, erase_block: u64) {
        self.slots[slot] = Some(erase_block);
    }

    /// True when `erase_block` is open in a slot.
    pub fn is_open(&self, erase_block: u64) -> bool {
        self.slots.contains(&Some(erase_block))
    }
}

/// The indirect chains as the flash holds them (flash-aware layout, version 8).
#[derive(Debug, Clone, Default)]
pub struct FlashChains {
    /// Per inode, the pointer entries beyond the direct ones as its chain on flash holds
    /// them (known for chains written since mount).
    written: HashMap<u64, Vec<(u64, Option<u32>)>>,
    /// Inodes whose chain on flash is not linked by its `next_block` fields (blocks
    /// rewritten one by one): the log lists their blocks, the next checkpoint rewrites them
    /// whole.
    unlinked: BTreeSet<u64>,
}

impl FlashChains {
    /// True when `inode_number`'s chain on flash is not linked.
    pub fn is_unlinked(&self, inode_number: u64) -> bool {
        self.unlinked.contains(&inode_number)
    }

    /// The pointer entries `inode_number`'s chain on flash holds, when known.
    pub fn written(&self, inode_number: u64) -> Option<&[(u64, Option<u32>)]> {
        self.written.get(&inode_number).map(Vec::as_slice)
    }

    /// `inode_number`'s chain on flash now holds `entries`, linked or not.
    pub fn note_written(
        &mut self,
        inode_number: u64,
        entries: Vec<(u64, Option<u32>)>,
        linked: bool,
    ) {
        self.written.insert(inode_number, entries);
        if linked {
            self.unlinked.remove(&inode_number);
        } else {
            self.unlinked.insert(inode_number);
        }
    }

    /// A chain loaded from a log that listed its blocks (its entries unknown).
    pub fn note_loaded_unlinked(&mut self, inode_number: u64) {
        self.unlinked.insert(inode_number);
    }

    /// Forgets the inodes `keep` says are gone.
    pub fn retain(&mut self, keep: impl Fn(u64) -> bool) {
        self.written.retain(|&inode_number, _| keep(inode_number));
        self.unlinked.retain(|&inode_number| keep(inode_number));
    }
}

/// First erase block of the commit ring.
pub const RING_FIRST_ERASE_BLOCK: u64 = 1;
/// Erase blocks of the commit ring.
pub const RING_ERASE_BLOCKS: u64 = 2;

/// Where the next super block goes in the commit ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlashRing {
    /// FS blocks (pages) per erase block.
    pub pages_per_erase_block: u64,
    /// The ring page the next commit's super block is programmed to.
    pub next_page: u64,
    /// The `ring_sequence` of the next record.
    pub next_sequence: u64,
}

impl FlashRing {
    /// The ring right after mkfs: its first page.
    pub fn at_start(pages_per_erase_block: u64) -> FlashRing {
        FlashRing {
            pages_per_erase_block,
            next_page: RING_FIRST_ERASE_BLOCK * pages_per_erase_block,
            next_sequence: 1,
        }
    }

    /// The erase block to erase before the next super block is programmed: the next
    /// page's, when that page is the first of its erase block.
    pub fn erase_before_next(&self) -> Option<u64> {
        (self.next_page % self.pages_per_erase_block == 0)
            .then_some(self.next_page / self.pages_per_erase_block)
    }

    /// The super block went to `next_page`: the page after it, wrapping to the ring's
    /// first page after its last.
    pub fn advance(&mut self) {
        self.next_sequence += 1;
        self.next_page += 1;
        let end = (RING_FIRST_ERASE_BLOCK + RING_ERASE_BLOCKS) * self.pages_per_erase_block;
        if self.next_page == end {
            self.next_page = RING_FIRST_ERASE_BLOCK * self.pages_per_erase_block;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_erase_block_is_erasable_only_when_every_page_is_dead() {
        let mut pages = FlashPages::new(4, 1);
        for page in [8, 9, 10] {
            pages.mark_dead(page);
        }
        assert_eq!(pages.erasable_count(), 0);
        pages.mark_dead(11);
        pages.mark_dead(13);
        assert_eq!(pages.take_erasable(), vec![2]);
        assert_eq!(pages.unreferenced_pages(), vec![13]);
        pages.retire(5);
        assert_eq!(pages.unreferenced_page_count(), 5);
    }

    #[test]
    fn the_ring_erases_before_each_first_page_and_wraps() {
        let mut ring = FlashRing::at_start(4);
        assert_eq!(ring.next_page, 4);
        assert_eq!(ring.erase_before_next(), Some(1));
        ring.advance();
        assert_eq!(ring.erase_before_next(), None);
        for _ in 0..3 {
            ring.advance();
        }
        assert_eq!((ring.next_page, ring.erase_before_next()), (8, Some(2)));
        for _ in 0..4 {
            ring.advance();
        }
        assert_eq!((ring.next_page, ring.erase_before_next()), (4, Some(1)));
    }
}
