//! Checkpoints: a snapshot of the map (versions), erase counts and bad states, written
//! in parts to fresh blocks; when all parts are acknowledged the previous checkpoint's
//! blocks and the log blocks it supersedes are recycled.
//!
//! Invariants:
//! - a checkpoint is snapshot only when no mutation is open, no log page is in flight
//!   and no record is pending, so the image holds every operation up to its sequence
//!   and none after;
//! - while one is wanted and not yet started, no new mutation starts (reads go on);
//! - at most one checkpoint is being written; the blocks of the newest complete
//!   checkpoint and the log blocks written since are recycled only after the next one is
//!   complete (docs/ftl.md, invariant 7);
//! - the metadata reserve always holds two checkpoints, so a part always finds a page.

use super::submission::RawJob;
use super::{BlockUse, Ftl, Stream};
use crate::layout::{CheckpointImage, PageKind, Shape, SpareRecord};

/// A checkpoint being written.
pub(crate) struct CheckpointWrite {
    sequence: u64,
    /// The encoded image, one page each.
    parts: Vec<Vec<u8>>,
    parts_left: u32,
    /// Blocks its parts went to.
    pub(crate) blocks: Vec<u32>,
    /// Log blocks closed when it was snapshot, recycled when it completes.
    superseded_log_blocks: Vec<u32>,
}

/// The state checkpoints own.
#[derive(Default)]
pub(crate) struct CheckpointState {
    /// A checkpoint is asked for (interval, full log block, wear leveling, unmount).
    pub(crate) wanted: bool,
    pub(crate) write: Option<CheckpointWrite>,
    /// The newest complete checkpoint's blocks.
    pub(crate) blocks: Vec<u32>,
    /// The newest complete checkpoint's sequence.
    pub(crate) sequence: u64,
    /// Host pages written since the last checkpoint started.
    pub(crate) host_pages_since: u64,
}

impl Ftl {
    /// Blocks one checkpoint image takes for a geometry (one spare).
    pub(crate) fn checkpoint_blocks_for(shape: &Shape, logical_pages: u64) -> u32 {
        let block_bytes = shape.page_bytes as u64 * u64::from(shape.pages_per_block);
        let checkpoint_bytes = logical_pages * 8 + u64::from(shape.block_count) * 5 + 64;
        checkpoint_bytes.div_ceil(block_bytes) as u32 + 1
    }

    pub(crate) fn drive_checkpoint(&mut self) {
        if self.options.checkpoint_interval_pages > 0
            && self.checkpoint.host_pages_since >= self.options.checkpoint_interval_pages
            && self.checkpoint.write.is_none()
        {
            self.checkpoint.wanted = true;
        }
        if !self.checkpoint.wanted || self.checkpoint.write.is_some() {
            return;
        }
        if self.host.mutations_active > 0 || self.log.programs_in_flight > 0 {
            return;
        }
        if !self.log.pending.is_empty() {
            return;
        }
        self.start_checkpoint();
    }

    pub(crate) fn snapshot(&self, sequence: u64) -> CheckpointImage {
        CheckpointImage {
            sequence,
            versions: (0..self.mapping.map.len())
                .map(|logical| self.mapping.version_of(logical))
                .collect(),
            erase_counts: self.blocks.iter().map(|block| block.erase_count).collect(),
            bad_states: self.blocks.iter().map(|block| block.bad).collect(),
            pages_per_block: self.shape.pages_per_block,
        }
    }

    /// Snapshots the map (nothing mutating is in flight) and starts writing it.
    pub(crate) fn start_checkpoint(&mut self) {
        let sequence = self.take_sequence();
        let image = self.snapshot(sequence).encode();
        let parts: Vec<Vec<u8>> = image
            .chunks(self.shape.page_bytes)
            .map(|chunk| {
                let mut part = chunk.to_vec();
                part.resize(self.shape.page_bytes, 0);
                part
            })
            .collect();
        self.close_stream(Stream::Log);
        let superseded_log_blocks = std::mem::take(&mut self.log.blocks);
        self.close_stream(Stream::Checkpoint);
        self.checkpoint.wanted = false;
        self.checkpoint.host_pages_since = 0;
        self.checkpoint.write = Some(CheckpointWrite {
            sequence,
            parts_left: parts.len() as u32,
            parts,
            blocks: Vec::new(),
            superseded_log_blocks,
        });
        let part_count = self
            .checkpoint
            .write
            .as_ref()
            .map_or(0, |write| write.parts.len() as u32);
        for part in 0..part_count {
            self.issue_checkpoint_part(part);
        }
    }

    pub(crate) fn issue_checkpoint_part(&mut self, part: u32) {
        let physical_page = self
            .allocate_page(Stream::Checkpoint)
            .expect("the reserve always holds two checkpoints");
        let write = self
            .checkpoint
            .write
            .as_ref()
            .expect("checkpoint in progress");
        let data = if self.backend.keeps_data() {
            write.parts[part as usize].clone()
        } else {
            Vec::new()
        };
        let record = SpareRecord {
            kind: PageKind::Checkpoint,
            poisoned: false,
            field_a: u64::from(part) | (write.parts.len() as u64) << 32,
            field_b: write.sequence,
            program_sequence: 0,
            erase_count: 0,
        };
        self.stats.checkpoint_pages_written += 1;
        self.submit_program(
            physical_page,
            record,
            data,
            RawJob::CheckpointProgram {
                physical_page,
                part,
            },
        );
    }

    pub(crate) fn checkpoint_part_done(&mut self) {
        let write = self
            .checkpoint
            .write
            .as_mut()
            .expect("checkpoint in progress");
        write.parts_left -= 1;
        if write.parts_left > 0 {
            return;
        }
        let write = self
            .checkpoint
            .write
            .take()
            .expect("checkpoint in progress");
        self.close_stream(Stream::Checkpoint);
        let old_blocks = std::mem::replace(&mut self.checkpoint.blocks, write.blocks);
        self.checkpoint.sequence = write.sequence;
        self.stats.checkpoints_written += 1;
        for block in old_blocks.into_iter().chain(write.superseded_log_blocks) {
            self.recycle_metadata_block(block);
        }
    }

    pub(crate) fn recycle_metadata_block(&mut self, block: u32) {
        let info = &mut self.blocks[block as usize];
        assert_eq!(info.valid_pages, 0, "metadata blocks hold no data pages");
        if info.bad != 0 {
            info.usage = BlockUse::Retired;
            return;
        }
        info.usage = BlockUse::Victim;
        self.collector.victims.push(block);
    }

    /// Writes a checkpoint now and waits for it (used at unmount and after mount).
    pub fn checkpoint_now(&mut self) {
        self.checkpoint.wanted = true;
        self.pump();
        while self.checkpoint.wanted || self.checkpoint.write.is_some() {
            assert!(
                self.wait_and_pump() || !self.raw.backlog.is_empty(),
                "a checkpoint waits on work that never comes"
            );
        }
    }
}
