//! The block allocator: the in-memory free list plus the bookkeeping that makes
//! copy-on-write crash-safe.
//!
//! Three sets matter (docs/format.md, "Crash consistency"):
//! - `free`: extents that may be handed out now;
//! - `pending`: blocks the last durable commit still uses but the current state freed;
//!   they are free in the next checkpoint but are not handed out until it is durable;
//! - `fresh`: blocks handed out since the last commit; no durable commit references them,
//!   so they may be overwritten in place and, if freed, go straight back to `free`.
//!
//! In the flash-aware layout ([`FlashPages`]) a released page goes to the dead set
//! instead of `free`, and comes back only with its whole erase block, once erased. Its
//! pages are handed out one at a time, round-robin over the open erase blocks
//! ([`crate::flash_pages::OpenEraseBlocks`]), each erase block's lowest free page first:
//! an erase block's free pages are always a suffix of it, so its pages go out in order.

use std::collections::{BTreeMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use crate::flash_pages::FlashPages;

/// Free extents, pending frees and fresh allocations.
#[derive(Debug, Clone, Default)]
pub struct Allocator {
    free: BTreeMap<u64, u64>,
    free_block_count: u64,
    pending: Vec<u64>,
    fresh: HashSet<u64, BuildHasherDefault<BlockNumberHasher>>,
    cursor: u64,
    flash: Option<FlashPages>,
}

impl Allocator {
    /// An allocator whose free blocks are `extents` (first block, block count), nothing
    /// pending or fresh.
    pub fn from_free_extents(extents: &[(u64, u64)]) -> Allocator {
        let mut allocator = Allocator::default();
        for &(first_block, block_count) in extents {
            allocator.insert_free(first_block, block_count);
        }
        allocator
    }

    /// Blocks that may be allocated now.
    pub fn free_block_count(&self) -> u64 {
        self.free_block_count
    }

    /// Blocks freed since the last commit that wait for it to become durable.
    pub fn pending_block_count(&self) -> usize {
        self.pending.len()
    }

    /// True when `block` was allocated since the last commit.
    pub fn is_fresh(&self, block: u64) -> bool {
        self.fresh.contains(&block)
    }

    /// Takes up to `max_block_count` contiguous blocks (at least one), next-fit from the
    /// last allocation, or `None` when nothing is free. In the flash-aware layout one
    /// page, from the next open erase block ([`Allocator::allocate_flash_page`]).
    pub fn allocate_run(&mut self, max_block_count: u64) -> Option<(u64, u64)> {
        assert!(max_block_count > 0);
        if self.flash.is_some() {
            return self.allocate_flash_page().map(|page| (page, 1));
        }
        let (&start, &length) = self
            .free
            .range(self.cursor..)
            .next()
            .or_else(|| self.free.iter().next())?;
        let taken = length.min(max_block_count);
        self.free.remove(&start);
        if taken < length {
            self.free.insert(start + taken, length - taken);
        }
        self.free_block_count -= taken;
        self.cursor = start + taken;
        self.mark_fresh(start, taken);
        Some((start, taken))
    }

    /// Takes up to `max_block_count` contiguous blocks starting at a block `b` with
    /// `b % modulus == residue % modulus` (at least one block), next-fit from the last
    /// allocation, or `None` when no free extent holds such a block. For copies by
    /// reference over a stripe, whose blocks must keep their member.
    pub fn allocate_run_congruent(
        &mut self,
        max_block_count: u64,
        residue: u64,
        modulus: u64,
    ) -> Option<(u64, u64)> {
        assert!(max_block_count > 0 && modulus > 0);
        let residue = residue % modulus;
        let first_fit = |(&start, &length): (&u64, &u64)| {
            let block = start + (residue + modulus - start % modulus) % modulus;
            (block < start + length).then_some((start, length, block))
        };
        let (start, length, block) = self
            .free
            .range(self.cursor..)
            .find_map(first_fit)
            .or_else(|| self.free.range(..self.cursor).find_map(first_fit))?;
        let taken = (start + length - block).min(max_block_count);
        self.free.remove(&start);
        if block > start {
            self.free.insert(start, block - start);
        }
        if block + taken < start + length {
            self.free
                .insert(block + taken, start + length - block - taken);
        }
        self.free_block_count -= taken;
        self.cursor = block + taken;
        self.mark_fresh(block, taken);
        Some((block, taken))
    }

    /// Takes exactly `block_count` blocks as runs, or nothing when fewer are free.
    pub fn allocate(&mut self, block_count: u64) -> Option<Vec<(u64, u64)>> {
        if block_count > self.free_block_count {
            return None;
        }
        let mut runs = Vec::new();
        let mut remaining = block_count;
        while remaining > 0 {
            let run = self
                .allocate_run(remaining)
                .expect("free count was checked");
            remaining -= run.1;
            runs.push(run);
        }
        Some(runs)
    }

    /// The flash-aware layout's allocator: `free_erased` are erased pages (each erase
    /// block's free pages a suffix of it), `dead` the unreferenced pages that are not;
    /// `open_erase_blocks` erase blocks are open for allocation at once.
    pub fn for_flash(
        pages_per_erase_block: u64,
        open_erase_blocks: u64,
        free_erased: &[(u64, u64)],
        dead: &[u64],
        retired: &[u64],
    ) -> Allocator {
        let mut allocator = Allocator::from_free_extents(free_erased);
        let mut flash = FlashPages::new(pages_per_erase_block, open_erase_blocks);
        for &page in dead {
            flash.mark_dead(page);
        }
        for &erase_block in retired {
            flash.retire(erase_block);
        }
        allocator.flash = Some(flash);
        allocator
    }

    /// Flash-aware layout: the erase blocks whose every page is free (erased), lowest
    /// first; none outside that layout.
    pub fn whole_free_erase_blocks(&self) -> impl Iterator<Item = u64> + '_ {
        let pages = self
            .flash
            .as_ref()
            .map_or(0, FlashPages::pages_per_erase_block);
        self.free
            .iter()
            .filter(move |_| pages > 0)
            .flat_map(move |(&start, &length)| start.div_ceil(pages)..(start + length) / pages)
    }

    /// Flash-aware layout: takes the first `count` erase blocks whose every page is free
    /// ([`Allocator::whole_free_erase_blocks`]), as their pages in order; `None`
    /// (nothing taken) when fewer are free or this is not the flash-aware layout. The
    /// pages are fresh but not counted as handed out: the log region's pages are counted
    /// as records fill them.
    pub fn take_whole_erase_blocks(&mut self, count: u64) -> Option<Vec<u64>> {
        let pages = self.flash.as_ref()?.pages_per_erase_block();
        let erase_blocks: Vec<u64> = self
            .whole_free_erase_blocks()
            .take(count as usize)
            .collect();
        if (erase_blocks.len() as u64) < count {
            return None;
        }
        let mut taken = Vec::new();
        for erase_block in erase_blocks {
            let first = erase_block * pages;
            self.remove_free_range(first, pages);
            for page in first..first + pages {
                let newly_fresh = self.fresh.insert(page);
                assert!(newly_fresh, "page {page} handed out twice");
            }
            taken.extend(first..first + pages);
        }
        Some(taken)
    }

    /// Flash-aware layout: the next slot's open erase block's lowest free page, taken. A
    /// slot whose erase block is full (or was taken whole for a log region) opens another
    /// ([`Allocator::erase_block_to_open`]); a slot with nothing to open is passed over.
    /// `None` when no page is free.
    fn allocate_flash_page(&mut self) -> Option<u64> {
        let slot_count = self.flash.as_ref()?.open().count();
        for _ in 0..slot_count {
            let flash = self.flash.as_mut().expect("flash-aware layout");
            let slot = flash.open_mut().take_next_slot();
            if let Some(page) = self.page_from_slot(slot) {
                self.remove_free_range(page, 1);
                self.mark_fresh(page, 1);
                return Some(page);
            }
        }
        None
    }

    /// The page `slot` hands out next, opening an erase block in it when its own has no
    /// free page.
    fn page_from_slot(&mut self, slot: usize) -> Option<u64> {
        let flash = self.flash.as_ref().expect("flash-aware layout");
        if let Some(page) = flash
            .open()
            .get(slot)
            .and_then(|erase_block| self.lowest_free_page(erase_block))
        {
            return Some(page);
        }
        let erase_block = self.erase_block_to_open(slot as u64)?;
        let pages = flash.pages_per_erase_block();
        self.flash
            .as_mut()
            .expect("flash-aware layout")
            .open_mut()
            .set(slot, erase_block);
        self.cursor = (erase_block + 1) * pages;
        self.lowest_free_page(erase_block)
    }

    /// The lowest free page of `erase_block`, if any (its free pages are a suffix of it).
    fn lowest_free_page(&self, erase_block: u64) -> Option<u64> {
        let pages = self.flash.as_ref()?.pages_per_erase_block();
        let first = erase_block * pages;
        let covering = self
            .free
            .range(..=first)
            .next_back()
            .is_some_and(|(&start, &length)| start + length > first);
        if covering {
            return Some(first);
        }
        self.free
            .range(first..first + pages)
            .next()
            .map(|(&start, _)| start)
    }

    /// An erase block with a free page that no slot holds, next-fit from the last one
    /// opened: one with `e % N == residue` (`N` slots) when there is one, so that the
    /// open erase blocks sit on different units of the raw device, else any.
    fn erase_block_to_open(&self, residue: u64) -> Option<u64> {
        let flash = self.flash.as_ref()?;
        let open = flash.open();
        let pages = flash.pages_per_erase_block();
        let modulus = open.count();
        let from = self.cursor / pages;
        let blocks =
            |(&start, &length): (&u64, &u64)| (start / pages, (start + length - 1) / pages);
        let after_cursor = || {
            self.free
                .range(..self.cursor)
                .next_back()
                .into_iter()
                .chain(self.free.range(self.cursor..))
                .map(blocks)
                .filter(move |&(_, last)| last >= from)
                .map(move |(first, last)| (first.max(from), last))
        };
        let all = || self.free.iter().map(blocks);
        let congruent = |(first, last): (u64, u64)| {
            let mut erase_block = first + (residue + modulus - first % modulus) % modulus;
            while erase_block <= last {
                if !open.is_open(erase_block) {
                    return Some(erase_block);
                }
                erase_block += modulus;
            }
            None
        };
        let any = |(first, last): (u64, u64)| (first..=last).find(|&e| !open.is_open(e));
        after_cursor()
            .find_map(congruent)
            .or_else(|| all().find_map(congruent))
            .or_else(|| all().find_map(any))
    }

    /// Takes `first..first + count`, which lies inside one free extent, out of the free
    /// set.
    fn remove_free_range(&mut self, first: u64, count: u64) {
        let (&start, &length) = self
            .free
            .range(..=first)
            .next_back()
            .expect("the range is free");
        assert!(first + count <= start + length, "the range is free");
        self.free.remove(&start);
        if first > start {
            self.free.insert(start, first - start);
        }
        if first + count < start + length {
            self.free
                .insert(first + count, start + length - first - count);
        }
        self.free_block_count -= count;
    }

    /// The flash-aware layout's bookkeeping, when this is its allocator.
    pub fn flash_pages(&self) -> Option<&FlashPages> {
        self.flash.as_ref()
    }

    /// Erase blocks whose every page is dead (flash-aware layout; none otherwise).
    pub fn take_erasable(&mut self) -> Vec<u64> {
        self.flash
            .as_mut()
            .map(FlashPages::take_erasable)
            .unwrap_or_default()
    }

    /// Erase block `erase_block` (taken by [`Allocator::take_erasable`]) is erased: its
    /// pages are free.
    pub fn erased(&mut self, erase_block: u64) {
        let flash = self.flash.as_mut().expect("flash-aware layout");
        flash.count_erases(1);
        let pages = flash.pages_per_erase_block();
        self.insert_free(erase_block * pages, pages);
    }

    /// True when a page of `first..first + count` is free.
    pub fn has_free_in(&self, first: u64, count: u64) -> bool {
        let before = self
            .free
            .range(..first)
            .next_back()
            .is_some_and(|(&start, &length)| start + length > first);
        before || self.free.range(first..first + count).next().is_some()
    }

    fn mark_fresh(&mut self, start: u64, taken: u64) {
        for block in start..start + taken {
            let newly_fresh = self.fresh.insert(block);
            assert!(newly_fresh, "block {block} handed out twice");
        }
        if let Some(flash) = &mut self.flash {
            flash.count_allocated(taken);
        }
    }

    /// The flash-aware layout's bookkeeping, to update (none in the ordinary layout).
    pub fn flash_pages_mut(&mut self) -> Option<&mut FlashPages> {
        self.flash.as_mut()
    }

    /// Counts pages moved by collection (flash-aware layout).
    pub fn count_moves(&mut self, pages: u64) {
        if let Some(flash) = &mut self.flash {
            flash.count_moves(pages);
        }
    }

    /// Erase block `erase_block` failed its erase: retired.
    pub fn retire(&mut self, erase_block: u64) {
        self.flash
            .as_mut()
            .expect("flash-aware layout")
            .retire(erase_block);
    }

    fn unreferenced(&mut self, block: u64) {
        match &mut self.flash {
            Some(flash) => flash.mark_dead(block),
            None => self.insert_free(block, 1),
        }
    }

    /// Gives `block` back: straight to the free set if it is fresh (the dead set in the
    /// flash-aware layout), else to `pending`.
    pub fn release(&mut self, block: u64) {
        if self.fresh.remove(&block) {
            self.unreferenced(block);
        } else {
            self.pending.push(block);
        }
    }

    /// The free list the next checkpoint records: free and pending blocks, merged into
    /// sorted, non-adjacent extents.
    pub fn extents_after_commit(&self) -> Vec<(u64, u64)> {
        let mut pending = self.pending.clone();
        if let Some(flash) = &self.flash {
            pending.extend(flash.unreferenced_pages());
        }
        pending.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(self.free.len() + 1);
        let mut free_iter = self
            .free
            .iter()
            .map(|(&start, &length)| (start, length))
            .peekable();
        let mut pending_iter = pending.into_iter().map(|block| (block, 1)).peekable();
        loop {
            let next = match (free_iter.peek(), pending_iter.peek()) {
                (Some(free), Some(pending)) if free.0 <= pending.0 => free_iter.next(),
                (Some(_), Some(_)) => pending_iter.next(),
                (Some(_), None) => free_iter.next(),
                (None, Some(_)) => pending_iter.next(),
                (None, None) => break,
            };
            let (start, length) = next.expect("peeked");
            match merged.last_mut() {
                Some(last) if last.0 + last.1 == start => last.1 += length,
                Some(last) => {
                    assert!(
                        last.0 + last.1 < start,
                        "free and pending overlap at {start}"
                    );
                    merged.push((start, length));
                }
                None => merged.push((start, length)),
            }
        }
        merged
    }

    /// Blocks handed out since the last commit and still held, as sorted extents: what a
    /// log record lists as taken from the free list.
    pub fn fresh_extents(&self) -> Vec<(u64, u64)> {
        let mut blocks: Vec<u64> = self.fresh.iter().copied().collect();
        blocks.sort_unstable();
        extents_of_sorted_blocks(&blocks)
    }

    /// Blocks freed since the last commit that it still uses, as sorted extents: what a
    /// log record lists as given back to the free list.
    pub fn pending_extents(&self) -> Vec<(u64, u64)> {
        let mut blocks = self.pending.clone();
        blocks.sort_unstable();
        extents_of_sorted_blocks(&blocks)
    }

    /// Blocks free in the next commit's image: free now plus pending.
    pub fn free_block_count_after_commit(&self) -> u64 {
        let unreferenced = self
            .flash
            .as_ref()
            .map_or(0, FlashPages::unreferenced_page_count);
        self.free_block_count + self.pending.len() as u64 + unreferenced
    }

    /// The last commit is durable: pending blocks become allocatable, nothing is fresh.
    pub fn commit_is_durable(&mut self) {
        for block in std::mem::take(&mut self.pending) {
            self.unreferenced(block);
        }
        self.fresh.clear();
    }

    fn insert_free(&mut self, first_block: u64, block_count: u64) {
        assert!(block_count > 0);
        let mut start = first_block;
        let mut length = block_count;
        if let Some((&previous_start, &previous_length)) = self.free.range(..start).next_back() {
            assert!(
                previous_start + previous_length <= start,
                "block {start} freed twice"
            );
            if previous_start + previous_length == start {
                self.free.remove(&previous_start);
                start = previous_start;
                length += previous_length;
            }
        }
        let end = first_block + block_count;
        if let Some((&next_start, &next_length)) = self.free.range(first_block..).next() {
            assert!(next_start >= end, "block {next_start} freed twice");
            if next_start == end {
                self.free.remove(&next_start);
                length += next_length;
            }
        }
        self.free.insert(start, length);
        self.free_block_count += block_count;
    }
}

/// Sorted, distinct blocks as extents of adjacent blocks.
fn extents_of_sorted_blocks(blocks: &[u64]) -> Vec<(u64, u64)> {
    let mut extents: Vec<(u64, u64)> = Vec::new();
    for &block in blocks {
        match extents.last_mut() {
            Some(last) if last.0 + last.1 == block => last.1 += 1,
            Some(last) => {
                assert!(last.0 + last.1 < block, "block {block} listed twice");
                extents.push((block, 1));
            }
            None => extents.push((block, 1)),
        }
    }
    extents
}

/// A hasher for block numbers in the `fresh` set: one multiplication (the Fx hash), as a
/// large write inserts one block number per FS block and SipHash showed in the write
/// path's profile. Block numbers are not chosen by an adversary (the allocator hands them
/// out), so a keyed hash buys nothing here.
#[derive(Debug, Clone, Copy, Default)]
pub struct BlockNumberHasher {
    hash: u64,
}

impl Hasher for BlockNumberHasher {
    fn finish(&self) -> u64 {
        self.hash
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_u64(&mut self, value: u64) {
        const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        self.hash = (self.hash.rotate_left(5) ^ value).wrapping_mul(SEED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_blocks_return_at_once_and_durable_ones_wait() {
        let mut allocator = Allocator::from_free_extents(&[(2, 10)]);
        let (first, count) = allocator.allocate_run(3).unwrap();
        assert_eq!((first, count), (2, 3));
        allocator.commit_is_durable();
        let (fresh_first, _) = allocator.allocate_run(1).unwrap();
        allocator.release(fresh_first);
        allocator.release(first);
        assert_eq!(allocator.free_block_count(), 7);
        assert_eq!(allocator.pending_block_count(), 1);
        assert_eq!(allocator.extents_after_commit(), vec![(2, 1), (5, 7)]);
        assert_eq!(allocator.pending_extents(), vec![(2, 1)]);
        assert!(allocator.fresh_extents().is_empty());
        assert_eq!(allocator.free_block_count_after_commit(), 8);
        allocator.commit_is_durable();
        assert_eq!(allocator.free_block_count(), 8);
    }

    #[test]
    fn congruent_runs_start_at_the_residue_and_keep_the_free_count() {
        let mut allocator = Allocator::from_free_extents(&[(3, 5), (20, 40)]);
        let (first, count) = allocator.allocate_run_congruent(10, 2, 8).unwrap();
        assert_eq!((first, count), (26, 10));
        assert_eq!(allocator.free_block_count(), 35);
        let (first, count) = allocator.allocate_run_congruent(3, 5, 8).unwrap();
        assert_eq!((first % 8, count), (5, 3));
        assert!(allocator.allocate_run_congruent(1, 1, 64).is_none());
        allocator.release(26);
        assert_eq!(allocator.free_block_count(), 33);
    }

    #[test]
    fn whole_erase_blocks_are_taken_only_where_every_page_is_free() {
        let mut allocator = Allocator::for_flash(4, 1, &[(13, 3), (18, 10)], &[], &[]);
        assert!(allocator.take_whole_erase_blocks(3).is_none());
        assert_eq!(allocator.free_block_count(), 13);
        assert_eq!(
            allocator.take_whole_erase_blocks(2),
            Some((20..28).collect::<Vec<u64>>())
        );
        assert_eq!(allocator.free_block_count(), 5);
        assert_eq!(allocator.extents_after_commit(), vec![(13, 3), (18, 2)]);
        assert!(allocator.is_fresh(20) && allocator.take_whole_erase_blocks(1).is_none());
    }

    #[test]
    fn allocate_is_all_or_nothing() {
        let mut allocator = Allocator::from_free_extents(&[(2, 2), (10, 2)]);
        assert!(allocator.allocate(5).is_none());
        assert_eq!(allocator.free_block_count(), 4);
        let runs = allocator.allocate(4).unwrap();
        assert_eq!(runs.iter().map(|run| run.1).sum::<u64>(), 4);
        assert!(allocator.allocate_run(1).is_none());
    }

    /// Pages of 4-page erase blocks 3.. handed out by a flash allocator of `open` slots.
    fn flash_pages_handed_out(open: u64, count: usize) -> (Allocator, Vec<u64>) {
        let mut allocator = Allocator::for_flash(4, open, &[(12, 116)], &[], &[]);
        let pages = (0..count)
            .map(|_| {
                let (page, length) = allocator.allocate_run(8).unwrap();
                assert_eq!(length, 1);
                page
            })
            .collect();
        (allocator, pages)
    }

    #[test]
    fn flash_pages_rotate_over_open_erase_blocks_on_different_units() {
        let (_, pages) = flash_pages_handed_out(4, 8);
        let erase_blocks: Vec<u64> = pages.iter().map(|page| page / 4).collect();
        assert_eq!(erase_blocks[..4], [4, 5, 6, 7]);
        assert_eq!(erase_blocks[4..], erase_blocks[..4]);
        let units: HashSet<u64> = erase_blocks[..4].iter().map(|e| e % 4).collect();
        assert_eq!(
            units.len(),
            4,
            "four open erase blocks on four units of four"
        );
    }

    #[test]
    fn each_erase_blocks_pages_go_out_in_order_and_full_blocks_are_replaced() {
        let (allocator, pages) = flash_pages_handed_out(3, 116);
        let mut last_in_block = BTreeMap::<u64, u64>::new();
        for &page in &pages {
            let erase_block = page / 4;
            match last_in_block.insert(erase_block, page) {
                Some(previous) => assert_eq!(page, previous + 1, "page {page} out of order"),
                None => assert_eq!(page % 4, 0, "erase block {erase_block} opened mid-block"),
            }
        }
        assert_eq!(last_in_block.len(), 29, "every erase block used, each once");
        assert_eq!(allocator.free_block_count(), 0);
        assert_eq!(allocator.fresh_extents(), vec![(12, 116)]);
    }

    #[test]
    fn flash_pages_survive_release_commit_erase_and_a_new_allocator() {
        let (mut allocator, pages) = flash_pages_handed_out(2, 10);
        allocator.commit_is_durable();
        for page in [16, 17, 18, 19] {
            allocator.release(page);
        }
        allocator.commit_is_durable();
        assert_eq!(allocator.take_erasable(), vec![4]);
        allocator.erased(4);
        assert!(pages.contains(&16) && allocator.lowest_free_page(4) == Some(16));
        assert_eq!(pages, vec![16, 20, 17, 21, 18, 22, 19, 23, 24, 28]);
        let mut free_in = BTreeMap::<u64, Vec<u64>>::new();
        for (start, length) in allocator.extents_after_commit() {
            for page in start..start + length {
                free_in.entry(page / 4).or_default().push(page);
            }
        }
        let (whole, partial): (Vec<_>, Vec<_>) =
            free_in.into_values().partition(|free| free.len() == 4);
        let whole: Vec<(u64, u64)> = whole.iter().map(|free| (free[0], 4)).collect();
        let dead: Vec<u64> = partial.into_iter().flatten().collect();
        assert_eq!(dead, vec![25, 26, 27, 29, 30, 31], "as a mount takes them");
        let mut mounted = Allocator::for_flash(4, 2, &whole, &dead, &[]);
        assert_eq!(mounted.free_block_count(), allocator.free_block_count() - 6);
        let next: Vec<u64> = (0..4).map(|_| mounted.allocate_run(1).unwrap().0).collect();
        assert_eq!(next, vec![16, 36, 17, 37]);
        assert_eq!(mounted.flash_pages().unwrap().dead_page_count(), 6);
    }

    #[test]
    fn a_slot_with_nothing_of_its_residue_opens_any_erase_block() {
        let mut allocator = Allocator::for_flash(4, 4, &[(20, 8)], &[], &[]);
        let pages: Vec<u64> = (0..8)
            .map(|_| allocator.allocate_run(1).unwrap().0)
            .collect();
        assert_eq!(pages, vec![20, 24, 21, 25, 22, 26, 23, 27]);
        assert!(allocator.allocate_run(1).is_none());
    }
}
