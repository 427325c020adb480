//! Reference counts of data blocks shared by several file positions (format version 5,
//! docs/format.md, "Shared blocks"): a copy by sharing points the destination at the
//! source's blocks and raises their counts, so the data is stored and counted once.
//!
//! Only blocks referenced more than once carry an entry; a block with no entry is
//! referenced by at most one pointer. The in-memory table is rebuilt from the pointers at
//! every mount (the pointers are the truth); the table the commit writes lets fsck check
//! that the two agree. Every change is remembered until the next commit, whose log record
//! lists the new counts of the blocks it touched.

use std::collections::{BTreeMap, BTreeSet};

/// Block -> reference count (>= 2), and the blocks whose count changed since the last
/// commit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SharedCounts {
    counts: BTreeMap<u64, u32>,
    touched: BTreeSet<u64>,
}

impl SharedCounts {
    /// Counts taken from the pointers: every block that `pointers` lists more than once
    /// (holes, block 0, excluded); every pointer is below `fs_block_count` (one bit per
    /// block marks the blocks seen). Nothing is touched.
    pub fn from_pointers<'a>(
        fs_block_count: u64,
        pointers: impl Iterator<Item = &'a u64>,
    ) -> SharedCounts {
        let mut seen = vec![0u64; fs_block_count.div_ceil(64) as usize];
        let mut counts: BTreeMap<u64, u32> = BTreeMap::new();
        for &block in pointers.filter(|&&block| block != 0) {
            assert!(block < fs_block_count, "pointer {block} out of range");
            let (word, bit) = ((block / 64) as usize, 1u64 << (block % 64));
            if seen[word] & bit != 0 {
                let count = counts.entry(block).or_insert(1);
                *count = count.saturating_add(1);
            }
            seen[word] |= bit;
        }
        SharedCounts {
            counts,
            touched: BTreeSet::new(),
        }
    }

    /// The pointers that reference `block` (1 when it has no entry: unshared).
    pub fn count(&self, block: u64) -> u32 {
        self.counts.get(&block).copied().unwrap_or(1)
    }

    /// True when more than one pointer references `block`.
    pub fn is_shared(&self, block: u64) -> bool {
        self.counts.contains_key(&block)
    }

    /// Blocks referenced more than once.
    pub fn shared_block_count(&self) -> u64 {
        self.counts.len() as u64
    }

    /// One more pointer references `block` (which must hold data).
    pub fn add_reference(&mut self, block: u64) {
        assert!(block != 0, "a hole is never shared");
        let count = self.counts.entry(block).or_insert(1);
        *count = count
            .checked_add(1)
            .expect("a block's reference count stays below 2^32");
        self.touched.insert(block);
    }

    /// Every pointer to `from` now names `to` (the flash-aware layout's collection moved
    /// the block): its count, if shared, moves with it.
    pub fn relocate(&mut self, from: u64, to: u64) {
        if let Some(count) = self.counts.remove(&from) {
            let previous = self.counts.insert(to, count);
            assert!(previous.is_none(), "block {to} was already shared");
            self.touched.insert(from);
            self.touched.insert(to);
        }
    }

    /// One pointer fewer references `block`; true when it was the last one (the block is
    /// then the caller's to free).
    pub fn drop_reference(&mut self, block: u64) -> bool {
        assert!(block != 0, "a hole is never shared");
        match self.counts.get_mut(&block) {
            None => true,
            Some(count) => {
                assert!(
                    *count >= 2,
                    "block {block}: a table entry counts at least 2"
                );
                *count -= 1;
                if *count == 1 {
                    self.counts.remove(&block);
                }
                self.touched.insert(block);
                false
            }
        }
    }

    /// The table as extents `(first_block, block_count, reference_count)` of consecutive
    /// blocks with one count, sorted; no extent longer than `u32::MAX` blocks.
    pub fn extents(&self) -> Vec<(u64, u64, u32)> {
        extents_of(self.counts.iter().map(|(&block, &count)| (block, count)))
    }

    /// The blocks whose count changed since the last commit, with their counts now (1:
    /// no longer shared, or freed), as extents like [`SharedCounts::extents`].
    pub fn touched_extents(&self) -> Vec<(u64, u64, u32)> {
        extents_of(self.touched.iter().map(|&block| (block, self.count(block))))
    }

    /// Blocks touched since the last commit.
    pub fn touched_block_count(&self) -> u64 {
        self.touched.len() as u64
    }

    /// A commit recorded every change.
    pub fn forget_touched(&mut self) {
        self.touched.clear();
    }

    /// `(block, count)` pairs, ascending.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.counts.iter().map(|(&block, &count)| (block, count))
    }
}

/// Sorted `(block, count)` pairs as extents of consecutive blocks with equal counts.
pub fn extents_of(pairs: impl Iterator<Item = (u64, u32)>) -> Vec<(u64, u64, u32)> {
    let mut extents: Vec<(u64, u64, u32)> = Vec::new();
    for (block, count) in pairs {
        match extents.last_mut() {
            Some(last)
                if last.0 + last.1 == block && last.2 == count && last.1 < u64::from(u32::MAX) =>
            {
                last.1 += 1
            }
            _ => extents.push((block, 1, count)),
        }
    }
    extents
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_rise_fall_and_free_at_the_last_reference() {
        let mut shared = SharedCounts::default();
        shared.add_reference(10);
        shared.add_reference(11);
        shared.add_reference(11);
        assert_eq!(shared.extents(), vec![(10, 1, 2), (11, 1, 3)]);
        assert!(!shared.drop_reference(11));
        assert_eq!(shared.extents(), vec![(10, 2, 2)]);
        assert!(!shared.drop_reference(10));
        assert!(shared.drop_reference(10), "the last reference frees");
        assert_eq!(shared.touched_extents(), vec![(10, 1, 1), (11, 1, 2)]);
        assert_eq!(shared.shared_block_count(), 1);
    }

    #[test]
    fn counts_from_pointers_skip_holes_and_single_uses() {
        let pointers = [0, 5, 6, 5, 0, 5, 7, 6];
        let shared = SharedCounts::from_pointers(16, pointers.iter());
        assert_eq!(shared.extents(), vec![(5, 1, 3), (6, 1, 2)]);
        assert_eq!(shared.touched_block_count(), 0);
    }
}
