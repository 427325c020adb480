//! Completions: every ack from the array goes back to the concern whose job it finishes
//! (host reads and programs here; collection, log, checkpoint and erase acks to their
//! modules), with the block's in-flight counters brought down first.
//!
//! Invariants:
//! - each ack finishes exactly one job, the one sent under its tag;
//! - a rule violation (the FTL broke a NAND rule) is a bug and panics;
//! - a failed program retires its block and the page is programmed again elsewhere (host
//!   data with the same version), so no acknowledged write is ever lost;
//! - a host page is mapped only when its program is acknowledged.

use flashpipe_flash::{Ack, AckStatus};

use super::submission::RawJob;
use super::{Ftl, Identity, Stream};

impl Ftl {
    pub(crate) fn handle_ack(&mut self, ack: Ack) {
        let job = self
            .raw
            .jobs
            .remove(&ack.tag)
            .expect("an ack for a tag we sent");
        if let AckStatus::RuleViolation(violation) = &ack.status {
            panic!("the FTL broke a flash rule: {violation}");
        }
        match job {
            RawJob::HostRead {
                op,
                offset,
                logical,
                physical_page,
            } => self.host_read_done(ack, op, offset, logical, physical_page),
            RawJob::HostProgram {
                op,
                logical,
                version,
                physical_page,
            } => self.host_program_done(ack, op, logical, version, physical_page),
            RawJob::GcRead {
                physical_page,
                identity,
                attempt,
            } => self.gc_read_done(ack, physical_page, identity, attempt),
            RawJob::GcProgram {
                relocation,
                physical_page,
            } => self.gc_program_done(ack, relocation, physical_page),
            RawJob::GcCopyBack {
                relocation,
                physical_page,
            } => self.gc_copy_back_done(ack, relocation, physical_page),
            RawJob::LogProgram {
                physical_page,
                records,
            } => self.log_program_done(ack, physical_page, records),
            RawJob::CheckpointProgram {
                physical_page,
                part,
            } => {
                self.program_finished(physical_page);
                if ack.status.is_ok() {
                    self.checkpoint_part_done();
                } else {
                    self.retire_block(self.shape.block_of(physical_page));
                    self.issue_checkpoint_part(part);
                }
            }
            RawJob::Erase { block } => self.erase_done(ack, block),
        }
    }

    pub(crate) fn program_finished(&mut self, physical_page: u32) {
        let block = self.shape.block_of(physical_page);
        let info = &mut self.blocks[block as usize];
        assert!(info.programs_in_flight > 0);
        info.programs_in_flight -= 1;
    }

    pub(crate) fn read_finished(&mut self, physical_page: u32) {
        let block = self.shape.block_of(physical_page);
        let info = &mut self.blocks[block as usize];
        assert!(info.reads_in_flight > 0);
        info.reads_in_flight -= 1;
    }

    pub(crate) fn host_read_done(
        &mut self,
        ack: Ack,
        op: u64,
        offset: usize,
        logical: u64,
        physical_page: u32,
    ) {
        self.read_finished(physical_page);
        let error = match ack.status {
            AckStatus::Ok { .. } => None,
            _ => {
                self.stats.uncorrectable_reads += 1;
                Some(self.uncorrectable_error(logical))
            }
        };
        let page_bytes = self.shape.page_bytes;
        let host_op = self.host.ops.get_mut(&op).expect("open op");
        if let Some(error) = error {
            host_op.error.get_or_insert(error);
        } else if let (Some(buffer), Some(data)) = (host_op.buffer.as_mut(), ack.data.as_ref()) {
            assert_eq!(data.len(), page_bytes, "a read returns one page");
            buffer[offset..offset + page_bytes].copy_from_slice(data);
        }
        if let Some(data) = ack.data {
            self.backend.recycle_page_buffer(data);
        }
        self.finish_host_pages(op, 1);
    }

    pub(crate) fn host_program_done(
        &mut self,
        ack: Ack,
        op: u64,
        logical: u64,
        version: u64,
        physical_page: u32,
    ) {
        self.program_finished(physical_page);
        assert!(
            self.host_programs_in_flight > 0,
            "a host program was counted"
        );
        self.host_programs_in_flight -= 1;
        if !ack.status.is_ok() {
            self.retire_block(self.shape.block_of(physical_page));
            self.stats.programs_reissued += 1;
            match self
                .allocate_page(Stream::Host)
                .or_else(|| self.allocate_page(Stream::Collection))
            {
                Some(page) => {
                    let first = self.host.ops[&op].first;
                    let data = self.host_page_data(op, (logical - first) as usize);
                    self.reissue_host_page(op, logical, version, page, data);
                }
                None => panic!("no page left to rescue a failed program"),
            }
            return;
        }
        let slot = self.mapping.new_identity(Identity {
            version,
            physical_page,
            references: 0,
            logical_origin: logical,
            poisoned: false,
        });
        self.claim_page(physical_page, slot);
        self.set_mapping(logical, slot);
        self.finish_host_pages(op, 1);
    }
}
