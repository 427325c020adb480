//! The loader's part for shared blocks (format version 5, docs/format.md, "Shared
//! table"): the checkpoint's shared table is parsed and checked entry by entry, the log's
//! shared-count entries update it, and after every file's pointers are known the table
//! must say, for every data block, how many pointers reference it. A mismatch is a
//! repairable finding: `fsck --repair` rewrites the table from the pointers (each pointer
//! keeps its block and its data checksum, so no file loses a byte; a block that two files
//! reference stays shared, and the next write to either side goes copy-on-write).

use std::collections::BTreeMap;

use crate::findings::Structure;
use crate::layout::{read_u32, read_u64, FIRST_ALLOCATABLE_BLOCK, SHARED_EXTENT_BYTES};

use super::{Loader, MAX_ACCOUNTING_FINDINGS};

/// The shared table as loaded: block -> reference count (>= 2), and whether every block
/// of it loaded.
#[derive(Debug, Clone)]
pub(super) struct SharedTable {
    pub(super) counts: BTreeMap<u64, u32>,
    pub(super) complete: bool,
}

impl Default for SharedTable {
    fn default() -> SharedTable {
        SharedTable {
            counts: BTreeMap::new(),
            complete: true,
        }
    }
}

impl Loader {
    /// Parses one shared table block's entries: extents in range, sorted, not
    /// overlapping, each with a count of at least 2.
    pub(super) fn parse_shared_extents(
        &mut self,
        payload: &[u8],
        entry_count: u32,
    ) -> Result<(), String> {
        if payload.len() != entry_count as usize * SHARED_EXTENT_BYTES {
            return Err(format!(
                "{entry_count} shared extents in {} payload bytes",
                payload.len()
            ));
        }
        let fs_block_count = self.geometry.fs_block_count;
        for entry in payload.chunks_exact(SHARED_EXTENT_BYTES) {
            let first = read_u64(entry, 0);
            let block_count = u64::from(read_u32(entry, 8));
            let reference_count = read_u32(entry, 12);
            let end = first.saturating_add(block_count);
            let after_previous = self
                .shared_table
                .counts
                .last_key_value()
                .is_none_or(|(&last, _)| last < first);
            let claimed = self.shared_table.counts.len() as u64 + block_count;
            if block_count == 0
                || reference_count < 2
                || first < FIRST_ALLOCATABLE_BLOCK
                || end > fs_block_count
                || !after_previous
                || claimed > self.super_block.shared_block_count
            {
                return Err(format!(
                    "extent {first}+{block_count} with count {reference_count} is empty, out of \
                     range, unsorted, overlapping, beyond the super block's shared block count or \
                     counts fewer than 2 references"
                ));
            }
            for block in first..end {
                self.shared_table.counts.insert(block, reference_count);
            }
        }
        Ok(())
    }

    /// A shared table block that cannot be used: the table is rebuilt from the pointers
    /// by repair; the files are not affected.
    pub(super) fn shared_table_lost(&mut self, block: u64, problem: String) {
        self.shared_table.complete = false;
        self.find(
            Structure::SharedTable,
            Some(block),
            format!(
                "{problem}: the reference counts it holds are unknown; `flashpipe fsck --repair` \
                 rewrites the table from the block pointers"
            ),
            true,
        );
    }

    /// The super block's shared table counts against the table loaded.
    pub(super) fn check_shared_counts(&mut self) {
        if !self.shared_table.complete {
            return;
        }
        let extents = crate::shared::extents_of(
            self.shared_table
                .counts
                .iter()
                .map(|(&block, &count)| (block, count)),
        );
        let blocks = self.shared_table.counts.len() as u64;
        let said = (
            self.super_block.shared_extent_count,
            self.super_block.shared_block_count,
        );
        if said != (extents.len() as u64, blocks) {
            let problem = format!(
                "super block says {} shared extents covering {} blocks, the shared table holds \
                 {} covering {blocks}",
                said.0,
                said.1,
                extents.len()
            );
            self.find(Structure::SharedTable, None, problem, true);
        }
    }

    /// Applies a log record's shared-count entries (checked by
    /// [`Loader::check_shared_entries`]): count 1 drops a block's entry.
    pub(super) fn apply_shared_entries(&mut self, entries: &[(u64, u64, u32)]) {
        for &(first, block_count, reference_count) in entries {
            for block in first..first + block_count {
                if reference_count == 1 {
                    self.shared_table.counts.remove(&block);
                } else {
                    self.shared_table.counts.insert(block, reference_count);
                }
            }
        }
    }

    /// Checks a log record's shared-count entries: each extent inside the file system.
    pub(super) fn check_shared_entries(&self, entries: &[(u64, u64, u32)]) -> Result<(), String> {
        for &(first, block_count, reference_count) in entries {
            let in_range = first >= FIRST_ALLOCATABLE_BLOCK
                && first
                    .checked_add(block_count)
                    .is_some_and(|end| end <= self.geometry.fs_block_count);
            if !in_range {
                return Err(format!(
                    "shared-count entry {first}+{block_count} (count {reference_count}) lies \
                     outside the file system"
                ));
            }
        }
        Ok(())
    }

    /// Compares the pointers' counts (`pointer_counts`: blocks referenced by more than one
    /// pointer, with how many) with the shared table after the log's replay.
    pub(super) fn compare_with_shared_table(&mut self, pointer_counts: &BTreeMap<u64, u32>) {
        if !self.shared_table.complete || !self.files_complete {
            return;
        }
        let mut mismatches = Vec::new();
        for (&block, &pointers) in pointer_counts {
            let table = self.shared_table.counts.get(&block).copied().unwrap_or(1);
            if table != pointers {
                mismatches.push((block, pointers, table));
            }
        }
        for (&block, &table) in &self.shared_table.counts {
            if !pointer_counts.contains_key(&block) {
                mismatches.push((block, 1, table));
            }
        }
        mismatches.sort_unstable();
        let total = mismatches.len();
        for (block, pointers, table) in mismatches.into_iter().take(MAX_ACCOUNTING_FINDINGS) {
            let pointers_text = if pointers == 1 {
                "at most one pointer references it".to_string()
            } else {
                format!("{pointers} pointers reference it")
            };
            let problem = format!(
                "block {block}: {pointers_text}, the shared table says {table}; `flashpipe fsck \
                 --repair` rewrites the table from the block pointers"
            );
            self.find(Structure::SharedTable, Some(block), problem, true);
        }
        if total > MAX_ACCOUNTING_FINDINGS {
            let problem = format!(
                "{} more blocks whose reference counts disagree with the pointers",
                total - MAX_ACCOUNTING_FINDINGS
            );
            self.find(Structure::SharedTable, None, problem, true);
        }
    }
}
