//! The contents of one simulated disk: a durable image and the volatile versions written
//! since, with flush and crash rules.
//!
//! Blocks are kept sparsely (a missing block reads as zeros). Every completed write or
//! trim of a block adds a volatile *version* stamped with a generation number; reads see
//! the newest version. A flush records the generation at its submission and, when it
//! completes, makes the newest version at or below that mark durable. A crash decides,
//! block by block with a seeded coin, whether each block touched since the last flush
//! keeps its newest contents or reverts to its durable contents.

use std::collections::BTreeMap;

use crate::random::SplitMix64;

/// One volatile version of a block; `None` contents mean zeros (a trim).
#[derive(Debug)]
struct Version {
    generation: u64,
    contents: Option<Box<[u8]>>,
}

/// What an unfinished write or trim would have put on the disk, for a crash.
#[derive(Debug)]
pub(crate) enum UnfinishedChange<'a> {
    /// A write of `data` from `first_block`.
    Write { first_block: u64, data: &'a [u8] },
    /// A trim of `block_count` blocks from `first_block`.
    Trim { first_block: u64, block_count: u64 },
}

/// The durable and volatile contents of one disk.
#[derive(Debug)]
pub(crate) struct BlockStore {
    block_size_bytes: usize,
    durable: BTreeMap<u64, Box<[u8]>>,
    unflushed: BTreeMap<u64, Vec<Version>>,
    generation: u64,
}

impl BlockStore {
    /// An all-zero disk.
    pub(crate) fn new(block_size_bytes: u32) -> BlockStore {
        BlockStore {
            block_size_bytes: block_size_bytes as usize,
            durable: BTreeMap::new(),
            unflushed: BTreeMap::new(),
            generation: 0,
        }
    }

    /// Copies the newest contents of the blocks from `first_block` into `buffer`.
    pub(crate) fn read_into(&self, first_block: u64, buffer: &mut [u8]) {
        assert_eq!(buffer.len() % self.block_size_bytes, 0, "whole blocks only");
        for (index, destination) in buffer.chunks_mut(self.block_size_bytes).enumerate() {
            match self.newest_contents(first_block + index as u64) {
                Some(contents) => destination.copy_from_slice(contents),
                None => destination.fill(0),
            }
        }
    }

    fn newest_contents(&self, block: u64) -> Option<&[u8]> {
        match self
            .unflushed
            .get(&block)
            .and_then(|versions| versions.last())
        {
            Some(version) => version.contents.as_deref(),
            None => self.durable.get(&block).map(|contents| &contents[..]),
        }
    }

    /// The durable contents of `block` (`None`: zeros).
    pub(crate) fn durable_contents(&self, block: u64) -> Option<&[u8]> {
        self.durable.get(&block).map(|contents| &contents[..])
    }

    /// Records a completed write: visible at once, volatile until a flush covers it.
    pub(crate) fn write(&mut self, first_block: u64, data: &[u8]) {
        assert_eq!(data.len() % self.block_size_bytes, 0, "whole blocks only");
        self.generation += 1;
        for (index, source) in data.chunks(self.block_size_bytes).enumerate() {
            self.add_version(first_block + index as u64, Some(source.into()));
        }
    }

    /// Records a completed trim: the blocks read as zeros, volatile until flushed.
    pub(crate) fn trim(&mut self, first_block: u64, block_count: u64) {
        self.generation += 1;
        for block in first_block..first_block + block_count {
            self.add_version(block, None);
        }
    }

    fn add_version(&mut self, block: u64, contents: Option<Box<[u8]>>) {
        let versions = self.unflushed.entry(block).or_default();
        assert!(versions
            .last()
            .is_none_or(|newest| newest.generation < self.generation));
        versions.push(Version {
            generation: self.generation,
            contents,
        });
    }

    /// The mark a flush submitted now covers: every change completed so far.
    pub(crate) fn flush_mark(&self) -> u64 {
        self.generation
    }

    /// Completes a flush submitted at `mark`: the newest version at or below the mark of
    /// every block becomes durable; newer versions stay volatile.
    pub(crate) fn make_durable(&mut self, mark: u64) {
        assert!(mark <= self.generation, "a flush mark comes from the past");
        let mut emptied = Vec::new();
        for (&block, versions) in self.unflushed.iter_mut() {
            let covered = versions.partition_point(|version| version.generation <= mark);
            if covered == 0 {
                continue;
            }
            let newest_covered = versions.drain(..covered).next_back();
            if let Some(version) = newest_covered {
                set_durable(&mut self.durable, block, version.contents);
            }
            if versions.is_empty() {
                emptied.push(block);
            }
        }
        for block in emptied {
            self.unflushed.remove(&block);
        }
    }

    /// Applies a crash: every block changed since its last flush, or touched by an
    /// `unfinished` change (in submission order), keeps its newest contents with
    /// probability `survival_probability` and otherwise reverts to its durable contents.
    /// Survivors become durable; nothing is volatile afterwards. Returns the blocks that
    /// were decided, with whether each survived, in block order.
    pub(crate) fn crash(
        &mut self,
        unfinished: &[UnfinishedChange<'_>],
        generator: &mut SplitMix64,
        survival_probability: f64,
    ) -> Vec<(u64, bool)> {
        let mut candidates: BTreeMap<u64, Option<Box<[u8]>>> = BTreeMap::new();
        for (block, mut versions) in std::mem::take(&mut self.unflushed) {
            let newest = versions.pop().expect("unflushed blocks have a version");
            candidates.insert(block, newest.contents);
        }
        for change in unfinished {
            self.add_unfinished_candidates(change, &mut candidates);
        }
        let mut decisions = Vec::with_capacity(candidates.len());
        for (block, contents) in candidates {
            let survives = generator.chance(survival_probability);
            if survives {
                set_durable(&mut self.durable, block, contents);
            }
            decisions.push((block, survives));
        }
        decisions
    }

    fn add_unfinished_candidates(
        &self,
        change: &UnfinishedChange<'_>,
        candidates: &mut BTreeMap<u64, Option<Box<[u8]>>>,
    ) {
        match *change {
            UnfinishedChange::Write { first_block, data } => {
                for (index, source) in data.chunks(self.block_size_bytes).enumerate() {
                    candidates.insert(first_block + index as u64, Some(source.into()));
                }
            }
            UnfinishedChange::Trim {
                first_block,
                block_count,
            } => {
                for block in first_block..first_block + block_count {
                    candidates.insert(block, None);
                }
            }
        }
    }
}

fn set_durable(durable: &mut BTreeMap<u64, Box<[u8]>>, block: u64, contents: Option<Box<[u8]>>) {
    match contents {
        Some(contents) if contents.iter().any(|&byte| byte != 0) => {
            durable.insert(block, contents);
        }
        _ => {
            durable.remove(&block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(byte: u8) -> Vec<u8> {
        vec![byte; 512]
    }

    fn durable_byte(store: &BlockStore, block: u64) -> u8 {
        store
            .durable_contents(block)
            .map_or(0, |contents| contents[0])
    }

    #[test]
    fn flush_covers_only_changes_completed_before_its_submission() {
        let mut store = BlockStore::new(512);
        store.write(0, &block(1));
        let mark = store.flush_mark();
        store.write(0, &block(2));
        store.write(1, &block(3));
        store.make_durable(mark);
        assert_eq!(durable_byte(&store, 0), 1);
        assert_eq!(durable_byte(&store, 1), 0);
        let mut buffer = vec![0; 1024];
        store.read_into(0, &mut buffer);
        assert_eq!((buffer[0], buffer[512]), (2, 3));
        store.make_durable(store.flush_mark());
        assert_eq!((durable_byte(&store, 0), durable_byte(&store, 1)), (2, 3));
    }

    #[test]
    fn crash_with_certain_survival_keeps_everything_and_certain_loss_nothing() {
        for (survival_probability, expected) in [(1.0, [5u8, 7, 0]), (0.0, [1, 0, 9])] {
            let mut store = BlockStore::new(512);
            store.write(0, &block(1));
            store.write(2, &block(9));
            store.make_durable(store.flush_mark());
            store.write(0, &block(5));
            store.trim(2, 1);
            let unfinished_data = block(7);
            let unfinished = [UnfinishedChange::Write {
                first_block: 1,
                data: &unfinished_data,
            }];
            let mut generator = SplitMix64::new(3);
            let decisions = store.crash(&unfinished, &mut generator, survival_probability);
            assert_eq!(decisions.len(), 3);
            let image: Vec<u8> = (0..3).map(|index| durable_byte(&store, index)).collect();
            assert_eq!(image, expected);
        }
    }
}
