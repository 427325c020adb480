//! Version 9's forward read past the ring record (docs/format.md, "Log commits without a
//! ring record"): a log commit programs its changed indirect-chain pages and its record
//! pages in one step, so a power cut can leave the record whole and a chain page it
//! wrote torn (reads uncorrectable, taken as zeroed) or never programmed (reads erased).
//! A record found past the records the ring named counts only when every chain page it
//! wrote reads back whole: an `INDR` block, checksum good, carrying the record's commit
//! sequence and the file's inode number, its `next_block` the one the chain needs.
//!
//! Which pages a record wrote: for each file it holds with a chain, the chain's blocks
//! (listed by its chain entry, or followed from the indirect head by `next_block`) that
//! lie in the record's allocated extents. A block there was free at the commit before,
//! so this commit programmed it (the allocator hands out only erased pages, and flash is
//! never programmed in place). A linked chain's rewritten blocks are a prefix of it
//! (`commit/flash_chains.rs`: a chain stays linked only when every rewritten block's
//! predecessor was rewritten too), so the walk from the head stops at the first block
//! outside the extents.
//!
//! A page a later record of the region frees is not checked (nor, for a linked chain,
//! anything after it): that record was programmed after this one was durable, and the
//! page may since have been erased and reused. For the same reason a record followed
//! by a whole record is taken even when a chain page of it does not read back whole:
//! that is damage after the fact, reported when the chain is loaded (as in version 8),
//! not a cut, and refusing it would drop acknowledged commits. A record refused here
//! (the last whole one of the region) ends the log exactly as a torn record page does;
//! its examined pages are kept unprogrammed by the mount until the next checkpoint is
//! durable (`flash_layout::prepare_mount`), so that a later mount reaches the same
//! verdict.

use std::collections::HashSet;

use flashpipe_device::{BlockDevice, DeviceError, IoBuf};

use super::replay::read_log_blocks;
use super::Loader;
use crate::layout::{indirect_block_count_in_version, open_metadata_block, MetadataKind};
use crate::metadata_log::LogRecord;
use crate::state::RefusedRecord;

/// The region as read: its pages' contents and addresses, in order.
pub(super) struct RegionRead<'a> {
    pub buffers: &'a [IoBuf],
    pub addresses: &'a [u64],
}

/// One chain page a record wrote, to be checked.
struct ChainPage {
    inode_number: u64,
    page: u64,
    position: u64,
    chain_length: u64,
    /// The `next_block` it must carry when the record lists the chain; `None` for a
    /// linked chain (the walk follows it).
    listed_next: Option<u64>,
}

impl Loader {
    /// True when every chain page `record` wrote reads back whole (pages freed by the
    /// records from region index `after_index`, record number `after_record_number`, on
    /// excepted); otherwise notes the refused record and returns false.
    pub(super) fn written_chains_whole(
        &mut self,
        device: &mut dyn BlockDevice,
        region: &RegionRead<'_>,
        (after_index, after_record_number): (usize, u64),
        record: &LogRecord,
    ) -> Result<bool, DeviceError> {
        let mut pending = self.first_chain_pages(record);
        let mut examined = HashSet::new();
        let mut freed_later: Option<Vec<(u64, u64)>> = None;
        while !pending.is_empty() {
            let pages: Vec<u64> = pending.iter().map(|chain_page| chain_page.page).collect();
            let buffers = read_log_blocks(device, &self.geometry, &pages)?;
            let mut next_round = Vec::new();
            for (chain_page, buffer) in pending.into_iter().zip(buffers) {
                let first_visit = examined.insert(chain_page.page);
                let checked = first_visit
                    .then(|| check_chain_page(&chain_page, &buffer, record.commit_sequence))
                    .flatten();
                match checked {
                    Some(next) => next_round.extend(self.walk_on(record, &chain_page, next)),
                    None => {
                        let freed = freed_later.get_or_insert_with(|| {
                            self.freed_after(region, after_index, after_record_number)
                        });
                        if in_extents(freed, chain_page.page) {
                            continue;
                        }
                        if self.whole_record_at(region, after_index, after_record_number) {
                            return Ok(true);
                        }
                        self.refuse(record, examined);
                        return Ok(false);
                    }
                }
            }
            pending = next_round;
        }
        Ok(true)
    }

    /// The chain pages of `record` known before any is read: every block a chain entry
    /// lists that the record allocated, and the head of each linked chain it allocated.
    fn first_chain_pages(&self, record: &LogRecord) -> Vec<ChainPage> {
        let block_size = self.geometry.fs_block_size_bytes;
        let version = self.super_block.format_version;
        let written = |page: u64| self.in_range(page) && in_extents(&record.allocated, page);
        let mut pages = Vec::new();
        for file in record.files.iter().filter(|file| file.indirect_head != 0) {
            let pointers = file.size_bytes.div_ceil(u64::from(block_size));
            let chain_length = indirect_block_count_in_version(block_size, pointers, version);
            let listed = record
                .chains
                .iter()
                .find(|(inode, _)| *inode == file.inode_number);
            let Some((_, blocks)) = listed else {
                if written(file.indirect_head) {
                    pages.push(ChainPage {
                        inode_number: file.inode_number,
                        page: file.indirect_head,
                        position: 0,
                        chain_length,
                        listed_next: None,
                    });
                }
                continue;
            };
            for (position, &page) in blocks.iter().enumerate() {
                if written(page) {
                    pages.push(ChainPage {
                        inode_number: file.inode_number,
                        page,
                        position: position as u64,
                        chain_length,
                        listed_next: Some(blocks.get(position + 1).copied().unwrap_or(0)),
                    });
                }
            }
        }
        pages
    }

    /// The next page of a linked chain's walk after `chain_page` (whose `next_block` is
    /// `next`): none for a listed chain, past the chain's end, or outside the record's
    /// allocated extents (an older block: the rewritten ones are a prefix).
    fn walk_on(&self, record: &LogRecord, chain_page: &ChainPage, next: u64) -> Option<ChainPage> {
        let position = chain_page.position + 1;
        let walks_on = chain_page.listed_next.is_none()
            && position < chain_page.chain_length
            && self.in_range(next)
            && in_extents(&record.allocated, next);
        walks_on.then_some(ChainPage {
            inode_number: chain_page.inode_number,
            page: next,
            position,
            chain_length: chain_page.chain_length,
            listed_next: None,
        })
    }

    /// The extents freed by the whole records of the region from index `index` (record
    /// number `record_number`) on.
    fn freed_after(
        &self,
        region: &RegionRead<'_>,
        mut index: usize,
        mut record_number: u64,
    ) -> Vec<(u64, u64)> {
        let mut freed = Vec::new();
        while index < region.addresses.len() {
            let sequence = self.super_block.checkpoint_sequence() + record_number;
            let read = self.read_record(region.buffers, region.addresses, index, sequence);
            let Ok((record, _, block_count)) = read else {
                break;
            };
            freed.extend(record.freed);
            index += block_count;
            record_number += 1;
        }
        freed
    }

    /// True when a whole record of the region starts at index `index` with record number
    /// `record_number`: the commit after the one being checked was programmed, which it
    /// is only once that one's flush completed, so that one is durable and a chain page
    /// of it that does not read back whole is damage (a finding when the chain is
    /// loaded), not a cut.
    fn whole_record_at(&self, region: &RegionRead<'_>, index: usize, record_number: u64) -> bool {
        let sequence = self.super_block.checkpoint_sequence() + record_number;
        index < region.addresses.len()
            && self
                .read_record(region.buffers, region.addresses, index, sequence)
                .is_ok()
    }

    fn refuse(&mut self, record: &LogRecord, examined: HashSet<u64>) {
        let mut pages: Vec<u64> = examined.into_iter().collect();
        pages.sort_unstable();
        self.refused_record = Some(RefusedRecord {
            commit_sequence: record.commit_sequence,
            pages,
        });
    }
}

/// The page's `next_block` when it is the chain page `chain_page` of the commit
/// `sequence`; `None` when it is not (torn, erased, another commit's or another file's,
/// or linked to the wrong page).
fn check_chain_page(chain_page: &ChainPage, buffer: &[u8], sequence: u64) -> Option<u64> {
    let header = open_metadata_block(buffer, MetadataKind::Indirect, sequence).ok()?;
    let is_last = chain_page.position + 1 == chain_page.chain_length;
    let next_ok = match chain_page.listed_next {
        Some(listed) => header.next_block == listed,
        None => !is_last || header.next_block == 0,
    };
    let ours = header.commit_sequence == sequence
        && header.owner == chain_page.inode_number
        && chain_page.position < chain_page.chain_length
        && next_ok;
    ours.then_some(header.next_block)
}

/// True when `page` lies in one of `extents` (`(first, count)` pairs).
fn in_extents(extents: &[(u64, u64)], page: u64) -> bool {
    extents
        .iter()
        .any(|&(first, count)| page >= first && page - first < count)
}
