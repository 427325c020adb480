//! The log: trim and copy-by-reference records, gathered into log pages (at most two
//! in flight), applied to the map when their page is acknowledged.
//!
//! Invariants:
//! - a trim or copy changes the map only after the log page holding its record is
//!   acknowledged, and its host operation completes only then;
//! - records are applied in the order they were issued (pages complete in any order,
//!   but a mutation never starts while another touching the same logical pages is open);
//! - `pending` holds at most one record per open trim or copy, so at most `queue_depth`
//!   (asserted when a record is queued);
//! - a full log block asks for a checkpoint, after which the log blocks closed at that
//!   checkpoint are recycled (they are in `blocks` until then).

use flashpipe_flash::Ack;

use super::submission::RawJob;
use super::{Ftl, Stream, NONE};
use crate::layout::{LogRecord, PageKind, SpareRecord, LOG_RECORD_BYTES};

/// Log pages programmed at once.
const LOG_PROGRAMS_IN_FLIGHT_MAX: u32 = 2;

/// A trim or copy record waiting for its log page, with the host operation it completes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PendingLogRecord {
    pub(crate) record: LogRecord,
    /// The host operation's id.
    pub(crate) op: u64,
}

/// The state the log owns.
#[derive(Default)]
pub(crate) struct LogState {
    /// Records issued and not yet in a log page program (at most `queue_depth`).
    pub(crate) pending: Vec<PendingLogRecord>,
    pub(crate) programs_in_flight: u32,
    /// Blocks holding log pages written since the newest checkpoint.
    pub(crate) blocks: Vec<u32>,
}

impl Ftl {
    pub(crate) fn write_log_pages(&mut self) {
        let capacity = (self.shape.page_bytes / LOG_RECORD_BYTES).max(1);
        while !self.log.pending.is_empty()
            && self.log.programs_in_flight < LOG_PROGRAMS_IN_FLIGHT_MAX
        {
            let Some(physical_page) = self.allocate_page(Stream::Log) else {
                return;
            };
            let take = self.log.pending.len().min(capacity);
            let records: Vec<PendingLogRecord> = self.log.pending.drain(..take).collect();
            self.program_log_page(physical_page, records);
        }
    }

    pub(crate) fn program_log_page(&mut self, physical_page: u32, records: Vec<PendingLogRecord>) {
        let mut data = Vec::with_capacity(self.shape.page_bytes);
        for pending in &records {
            pending.record.encode_into(&mut data);
        }
        if self.backend.keeps_data() {
            data.resize(self.shape.page_bytes, 0);
        } else {
            data.clear();
        }
        let record = SpareRecord {
            kind: PageKind::Log,
            poisoned: false,
            field_a: records.len() as u64,
            field_b: 0,
            program_sequence: 0,
            erase_count: 0,
        };
        self.log.programs_in_flight += 1;
        self.stats.log_pages_written += 1;
        self.submit_program(
            physical_page,
            record,
            data,
            RawJob::LogProgram {
                physical_page,
                records,
            },
        );
    }

    pub(crate) fn apply_log_record(&mut self, record: LogRecord) {
        match record {
            LogRecord::Trim { first, count, .. } => {
                for logical in first..first + count {
                    self.set_mapping(logical, NONE);
                }
            }
            LogRecord::Copy {
                source,
                destination,
                count,
                ..
            } => {
                let captured: Vec<u32> = (source..source + count)
                    .map(|logical| self.mapping.map[logical as usize])
                    .collect();
                // Hold every source identity while overlapping destinations are remapped
                // (memmove): a remap must not free an identity a later page still needs.
                for &slot in captured.iter().filter(|&&slot| slot != NONE) {
                    self.mapping.identities[slot as usize].references += 1;
                }
                for (index, &slot) in captured.iter().enumerate() {
                    self.set_mapping(destination + index as u64, slot);
                }
                for &slot in captured.iter().filter(|&&slot| slot != NONE) {
                    self.release_identity(slot);
                }
                self.stats.pages_copied_by_reference += count;
            }
        }
    }

    pub(crate) fn log_program_done(
        &mut self,
        ack: Ack,
        physical_page: u32,
        records: Vec<PendingLogRecord>,
    ) {
        self.program_finished(physical_page);
        self.log.programs_in_flight -= 1;
        if !ack.status.is_ok() {
            self.retire_block(self.shape.block_of(physical_page));
            self.stats.programs_reissued += 1;
            let page = self
                .allocate_page(Stream::Log)
                .expect("the reserve holds a log block");
            self.program_log_page(page, records);
            return;
        }
        for pending in records {
            self.apply_log_record(pending.record);
            self.finish_host_pages(pending.op, 1);
        }
    }
}
