//! Submission: raw flash requests (ReadPage, WritePage, CopyBack, EraseBlock), each a tag with
//! the job that its ack finishes, queued in a bounded backlog until the array admits it.
//!
//! Invariants:
//! - every tag in the backlog or in flight has exactly one job in `jobs`; an ack removes
//!   it (an ack for an unknown tag is a bug);
//! - every program carries a fresh program sequence and the erase count of its block;
//! - the backlog and the jobs are bounded by [`RawQueue::backlog_bound_for`], asserted on
//!   every send: at most one program per physical page (a page is allocated once per
//!   erase, and a block is erased only with nothing in flight), at most one collection
//!   read per physical page (a victim's page is read once, again only after a failed
//!   read's ack), at most one erase per block, and the host reads of at most
//!   `queue_depth` operations of at most every logical page each.

use std::collections::{HashMap, VecDeque};

use flashpipe_flash::{Ack, FlashCommand, FlashRequest, SubmitError};

use super::collection::Relocation;
use super::log::PendingLogRecord;
use super::{BlockUse, Ftl};
use crate::layout::{Shape, SpareRecord};

/// What an ack finishes: the request's purpose and what its handler needs.
pub(crate) enum RawJob {
    HostRead {
        op: u64,
        offset: usize,
        logical: u64,
        physical_page: u32,
    },
    /// A host page program; a failed one is programmed again from the write's buffer
    /// (held by its open operation until it completes).
    HostProgram {
        op: u64,
        logical: u64,
        version: u64,
        physical_page: u32,
    },
    GcRead {
        physical_page: u32,
        identity: u32,
        attempt: u32,
    },
    GcProgram {
        relocation: Relocation,
        physical_page: u32,
    },
    /// A live page moved by copy-back: its relocation carries no data.
    GcCopyBack {
        relocation: Relocation,
        physical_page: u32,
    },
    LogProgram {
        physical_page: u32,
        records: Vec<PendingLogRecord>,
    },
    CheckpointProgram {
        physical_page: u32,
        part: u32,
    },
    Erase {
        block: u32,
    },
}

/// The state submission owns.
pub(crate) struct RawQueue {
    /// Tag -> the job its ack finishes: everything sent and not yet acknowledged.
    pub(crate) jobs: HashMap<u64, RawJob>,
    pub(crate) next_tag: u64,
    /// Requests sent and not yet admitted by the array (it answered queue full).
    pub(crate) backlog: VecDeque<FlashRequest>,
    /// Most jobs (and so backlog entries) there can be: [`RawQueue::backlog_bound_for`].
    pub(crate) backlog_bound: usize,
    /// Reused buffer for polled acks.
    pub(crate) acks: Vec<Ack>,
}

impl RawQueue {
    pub(crate) fn new(backlog_bound: usize) -> RawQueue {
        RawQueue {
            jobs: HashMap::new(),
            next_tag: 0,
            backlog: VecDeque::new(),
            backlog_bound,
            acks: Vec::new(),
        }
    }

    /// The most raw requests in flight or queued for a geometry: one program and one
    /// collection read per physical page, one erase per block, and the page reads of
    /// `queue_depth` host reads of at most `logical_pages` pages each.
    pub(crate) fn backlog_bound_for(shape: &Shape, logical_pages: u64, queue_depth: u32) -> usize {
        let per_page = 2 * u64::from(shape.page_count());
        let erases = u64::from(shape.block_count);
        let host_reads = u64::from(queue_depth).saturating_mul(logical_pages);
        usize::try_from(per_page.saturating_add(erases).saturating_add(host_reads))
            .unwrap_or(usize::MAX)
    }
}

impl Ftl {
    pub(crate) fn send(&mut self, command: FlashCommand, job: RawJob) {
        let tag = self.raw.next_tag;
        self.raw.next_tag += 1;
        self.raw.jobs.insert(tag, job);
        self.raw.backlog.push_back(FlashRequest {
            tag,
            host: 0,
            command,
        });
        assert!(
            self.raw.jobs.len() <= self.raw.backlog_bound
                && self.raw.backlog.len() <= self.raw.jobs.len(),
            "{} raw requests in flight, {} of them in the backlog: past the bound of {}",
            self.raw.jobs.len(),
            self.raw.backlog.len(),
            self.raw.backlog_bound
        );
    }

    pub(crate) fn push_backlog(&mut self) {
        while let Some(request) = self.raw.backlog.pop_front() {
            match self.backend.submit(request) {
                Ok(()) => {}
                Err(SubmitError::QueueFull { request, .. }) => {
                    self.raw.backlog.push_front(*request);
                    return;
                }
                Err(SubmitError::UnknownHost { .. }) => {
                    panic!("the FTL submits as host 0, which every array has")
                }
            }
        }
    }

    pub(crate) fn submit_program(
        &mut self,
        physical_page: u32,
        record: SpareRecord,
        data: Vec<u8>,
        job: RawJob,
    ) {
        let block = self.shape.block_of(physical_page);
        let record = SpareRecord {
            program_sequence: self.take_sequence(),
            erase_count: self.blocks[block as usize].erase_count,
            ..record
        };
        let spare = record.encode_for(&data, self.backend.host_spare_bytes());
        let address = self
            .shape
            .address(block, physical_page % self.shape.pages_per_block);
        self.blocks[block as usize].last_program_ns = self.backend.now_ns();
        self.send(
            FlashCommand::WritePage {
                address,
                data,
                spare,
            },
            job,
        );
    }

    /// A copy-back of `from_page` to `physical_page` (same die and plane) with `record` as
    /// the new spare: the source block counts it as a read in flight (it may not be erased
    /// before the ack), the destination block as a program.
    pub(crate) fn submit_copy_back(
        &mut self,
        from_page: u32,
        physical_page: u32,
        record: SpareRecord,
        job: RawJob,
    ) {
        assert!(
            !self.backend.keeps_data(),
            "copy-back is used only where the spare record needs no page data"
        );
        let from_block = self.shape.block_of(from_page);
        self.blocks[from_block as usize].reads_in_flight += 1;
        let block = self.shape.block_of(physical_page);
        let record = SpareRecord {
            program_sequence: self.take_sequence(),
            erase_count: self.blocks[block as usize].erase_count,
            ..record
        };
        let spare = record.encode_for(&[], self.backend.host_spare_bytes());
        let pages_per_block = self.shape.pages_per_block;
        let from = self.shape.address(from_block, from_page % pages_per_block);
        let to = self.shape.address(block, physical_page % pages_per_block);
        self.blocks[block as usize].last_program_ns = self.backend.now_ns();
        self.send(FlashCommand::CopyBack { from, to, spare }, job);
    }

    pub(crate) fn submit_read(&mut self, physical_page: u32, job: RawJob) {
        let block = self.shape.block_of(physical_page);
        self.blocks[block as usize].reads_in_flight += 1;
        let address = self
            .shape
            .address(block, physical_page % self.shape.pages_per_block);
        self.send(FlashCommand::ReadPage { address }, job);
    }

    pub(crate) fn submit_erase(&mut self, block: u32) {
        self.blocks[block as usize].usage = BlockUse::Erasing;
        let address = self.shape.address(block, 0);
        self.send(
            FlashCommand::EraseBlock { address },
            RawJob::Erase { block },
        );
    }

    pub(crate) fn take_sequence(&mut self) -> u64 {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        sequence
    }

    pub(crate) fn empty_page(&self) -> Vec<u8> {
        if self.backend.keeps_data() {
            vec![0u8; self.shape.page_bytes]
        } else {
            Vec::new()
        }
    }
}
