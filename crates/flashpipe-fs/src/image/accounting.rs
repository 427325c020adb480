//! The loader's block accounting: every block's owner marked once (super blocks,
//! checkpoint blocks, indirect chains, data blocks; from format version 5 a data block
//! may have several pointers, counted for the shared table check), then the blocks in use
//! compared with the free list: doubly used, used-and-free and leaked blocks are findings.

use std::collections::BTreeMap;

use crate::findings::{Finding, Structure};
use crate::layout::{FIRST_ALLOCATABLE_BLOCK, FIRST_SHARED_FORMAT_VERSION};

use super::{BlockBits, Loader, MAX_ACCOUNTING_FINDINGS};

impl Loader {
    /// Marks every block's owner; reports doubly used, used-and-free and leaked blocks.
    pub(super) fn account_blocks(&mut self, used: &mut BlockBits, checkpoint_blocks: &[u64]) {
        let mut doubly_used = Vec::new();
        let mut mark = |block: u64, what: &dyn Fn() -> String| {
            if used.set(block) && doubly_used.len() < MAX_ACCOUNTING_FINDINGS {
                doubly_used.push(Finding::new(
                    Structure::BlockAccounting,
                    Some(block),
                    format!("block used twice; one use: {}", what()),
                    false,
                ));
            }
        };
        for block in 0..self.super_block.reserved_block_count() {
            mark(block, &|| {
                "super block slot (the flash-aware layout: anchor or commit ring)".to_string()
            });
        }
        for &block in checkpoint_blocks {
            mark(block, &|| {
                "checkpoint block (map, table or log region)".to_string()
            });
        }
        for (&inode_number, file) in &self.files {
            for &block in &file.indirect_chain {
                mark(block, &|| format!("indirect block of inode {inode_number}"));
            }
        }
        let sharing = self.super_block.format_version >= FIRST_SHARED_FORMAT_VERSION;
        let mut data_blocks = BlockBits::new(self.geometry.fs_block_count);
        let mut pointer_counts: BTreeMap<u64, u32> = BTreeMap::new();
        for (&inode_number, file) in &self.files {
            for (index, &block) in file.pointers.iter().enumerate() {
                if block == 0 {
                    continue;
                }
                if sharing && data_blocks.get(block) {
                    let count = pointer_counts.entry(block).or_insert(1);
                    *count = count.saturating_add(1);
                    continue;
                }
                data_blocks.set(block);
                mark(block, &|| {
                    format!("data block {index} of inode {inode_number}")
                });
            }
        }
        self.findings.extend(doubly_used);
        if sharing {
            self.compare_with_shared_table(&pointer_counts);
        }
        if self.free_list_complete && self.files_complete {
            self.compare_with_free_list(used);
        }
    }

    fn compare_with_free_list(&mut self, used: &BlockBits) {
        let mut free = BlockBits::new(self.geometry.fs_block_count);
        for &(first, count) in &self.free_extents {
            for block in first..first + count {
                free.set(block);
            }
        }
        let mut run: Option<(bool, u64, u64)> = None;
        let mut reported = 0;
        for block in FIRST_ALLOCATABLE_BLOCK..=self.geometry.fs_block_count {
            let problem = (block < self.geometry.fs_block_count)
                .then(|| (used.get(block), free.get(block)))
                .and_then(|state| match state {
                    (true, true) => Some(true),
                    (false, false) => Some(false),
                    _ => None,
                });
            match (run, problem) {
                (Some((kind, first, count)), Some(now))
                    if kind == now && first + count == block =>
                {
                    run = Some((kind, first, count + 1));
                }
                (previous, now) => {
                    if let Some((kind, first, count)) = previous {
                        if reported < MAX_ACCOUNTING_FINDINGS {
                            self.report_accounting_run(kind, first, count);
                        }
                        reported += 1;
                    }
                    run = now.map(|kind| (kind, block, 1));
                }
            }
        }
    }

    fn report_accounting_run(&mut self, used_and_free: bool, first: u64, count: u64) {
        let what = if used_and_free {
            "in use but listed free"
        } else {
            "leaked (neither used nor free)"
        };
        let problem = format!("blocks {first}..{} ({count} blocks) {what}", first + count);
        self.find(Structure::BlockAccounting, Some(first), problem, true);
    }
}
