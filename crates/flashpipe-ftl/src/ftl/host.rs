//! Host operations: admission, serialization per logical page, issuing reads, page
//! programs and log records, and completing the operation once its last page is done.
//!
//! Invariants:
//! - at most `queue_depth` host operations are open or completed and not reaped (the
//!   device adapter refuses more at submit); `waiting` and `ready` are bounded by it,
//!   asserted when an operation is opened and when it completes;
//! - operations start in submission order; a mutation (write, trim, copy) starts only
//!   when no started mutation touches any of its logical pages, and none starts while a
//!   checkpoint waits for mutations to drain;
//! - a write's pages are issued no faster than pacing allows (`host_programs_at_cap`,
//!   `host_page_held`); a page that fails to program is programmed again elsewhere with
//!   the same version, so a write completes only when all its data is on flash;
//! - a host operation completes exactly once, with its buffer, and its logical pages are
//!   released then.

use std::collections::{HashMap, VecDeque};

use flashpipe_device::{Completion, DeviceError, DeviceErrorKind, IoBuf};

use super::log::PendingLogRecord;
use super::submission::RawJob;
use super::{Ftl, Stream, NONE};
use crate::layout::{LogRecord, PageKind, SpareRecord};

/// What a host operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostKind {
    /// Read logical pages into the buffer.
    Read,
    /// Write the buffer to logical pages.
    Write,
    /// Unmap logical pages (a log record).
    Trim,
    /// Copy by reference (a log record).
    Copy,
    /// Completes once every operation before it has.
    Flush,
}

/// An open host operation.
pub(crate) struct HostOp {
    pub(crate) tag: u64,
    pub(crate) kind: HostKind,
    pub(crate) first: u64,
    pub(crate) count: u64,
    pub(crate) source: u64,
    pub(crate) buffer: Option<IoBuf>,
    pub(crate) started: bool,
    pub(crate) pages_issued: u64,
    pub(crate) pages_left: u64,
    pub(crate) error: Option<DeviceError>,
    pub(crate) submitted_ns: u64,
    pub(crate) stalled_since_ns: Option<u64>,
}

/// The state host operations own.
#[derive(Default)]
pub(crate) struct HostQueue {
    /// Open operations by id.
    pub(crate) ops: HashMap<u64, HostOp>,
    pub(crate) next_op_id: u64,
    /// Operations not yet fully issued, in submission order.
    pub(crate) waiting: VecDeque<u64>,
    /// Logical page -> started mutations touching it.
    pub(crate) busy_logical: HashMap<u64, u32>,
    /// Started mutations not yet complete.
    pub(crate) mutations_active: u32,
    /// Completed operations not yet reaped.
    pub(crate) ready: Vec<Completion>,
}

impl HostKind {
    /// Writes, trims and copies change the map; reads and flushes do not.
    pub(crate) fn mutates(self) -> bool {
        matches!(self, HostKind::Write | HostKind::Trim | HostKind::Copy)
    }
}

impl HostOp {
    /// The logical pages the operation reads or changes (a copy: both ranges).
    fn touched_logical(&self) -> impl Iterator<Item = u64> {
        let sources = if self.kind == HostKind::Copy {
            self.source..self.source + self.count
        } else {
            0..0
        };
        (self.first..self.first + self.count).chain(sources)
    }
}

impl HostQueue {
    /// True when a mutation must wait: a started mutation touches one of its pages.
    fn conflicts(&self, op: &HostOp) -> bool {
        op.kind.mutates()
            && op
                .touched_logical()
                .any(|page| self.busy_logical.contains_key(&page))
    }

    /// Holds the pages of mutation `op_id` until it finishes.
    fn start_mutation(&mut self, op_id: u64) {
        let pages: Vec<u64> = self.ops[&op_id].touched_logical().collect();
        for page in pages {
            *self.busy_logical.entry(page).or_insert(0) += 1;
        }
        self.mutations_active += 1;
    }

    /// Releases the pages of a finished mutation.
    fn finish_mutation(&mut self, op: &HostOp) {
        assert!(self.mutations_active > 0, "a mutation finished twice");
        self.mutations_active -= 1;
        for page in op.touched_logical() {
            let count = self
                .busy_logical
                .get_mut(&page)
                .expect("a busy logical page");
            *count -= 1;
            if *count == 0 {
                self.busy_logical.remove(&page);
            }
        }
    }
}

impl Ftl {
    pub(crate) fn open_host_op(
        &mut self,
        tag: u64,
        kind: HostKind,
        first: u64,
        count: u64,
        source: u64,
        buffer: Option<IoBuf>,
    ) {
        let id = self.host.next_op_id;
        self.host.next_op_id += 1;
        let pages = match kind {
            HostKind::Read | HostKind::Write => count,
            HostKind::Trim | HostKind::Copy | HostKind::Flush => 1,
        };
        self.host.ops.insert(
            id,
            HostOp {
                tag,
                kind,
                first,
                count,
                source,
                buffer,
                started: false,
                pages_issued: 0,
                pages_left: pages,
                error: None,
                submitted_ns: self.backend.now_ns(),
                stalled_since_ns: None,
            },
        );
        self.host.waiting.push_back(id);
        let queue_depth = self.info.queue_depth as usize;
        assert!(
            self.host_in_flight() <= queue_depth && self.host.waiting.len() <= queue_depth,
            "{} host operations open ({} waiting): past the queue depth {queue_depth}",
            self.host_in_flight(),
            self.host.waiting.len()
        );
    }

    /// Host operations accepted and not yet reaped.
    pub(crate) fn host_in_flight(&self) -> usize {
        self.host.ops.len() + self.host.ready.len()
    }

    pub(crate) fn start_waiting_ops(&mut self) {
        while let Some(&op_id) = self.host.waiting.front() {
            let op = &self.host.ops[&op_id];
            let kind = op.kind;
            let fresh = !op.started;
            let mutation = kind.mutates();
            let quiescing = self.checkpoint.wanted && self.checkpoint.write.is_none();
            if mutation && fresh && quiescing {
                return;
            }
            if fresh && self.host.conflicts(op) {
                return;
            }
            if fresh && mutation {
                self.host.start_mutation(op_id);
            }
            self.host.ops.get_mut(&op_id).expect("open op").started = true;
            let finished_issuing = match kind {
                HostKind::Read => {
                    self.issue_read(op_id);
                    true
                }
                HostKind::Write => self.issue_write_pages(op_id),
                HostKind::Trim | HostKind::Copy => {
                    self.issue_log_record(op_id);
                    true
                }
                HostKind::Flush => {
                    self.finish_host_pages(op_id, 1);
                    true
                }
            };
            if !finished_issuing {
                return;
            }
            self.host.waiting.pop_front();
        }
    }

    pub(crate) fn issue_read(&mut self, op_id: u64) {
        let (first, count) = {
            let op = &self.host.ops[&op_id];
            (op.first, op.count)
        };
        let page_bytes = self.shape.page_bytes;
        let mut done_now = 0;
        for index in 0..count {
            let logical = first + index;
            let offset = index as usize * page_bytes;
            let slot = self.mapping.map[logical as usize];
            if slot == NONE {
                if let Some(buffer) = self
                    .host
                    .ops
                    .get_mut(&op_id)
                    .and_then(|op| op.buffer.as_mut())
                {
                    buffer[offset..offset + page_bytes].fill(0);
                }
                done_now += 1;
                continue;
            }
            let identity = self.mapping.identities[slot as usize];
            if identity.poisoned {
                let error = self.uncorrectable_error(logical);
                self.host
                    .ops
                    .get_mut(&op_id)
                    .expect("open op")
                    .error
                    .get_or_insert(error);
                done_now += 1;
                continue;
            }
            self.submit_read(
                identity.physical_page,
                RawJob::HostRead {
                    op: op_id,
                    offset,
                    logical,
                    physical_page: identity.physical_page,
                },
            );
        }
        self.host.ops.get_mut(&op_id).expect("open op").pages_issued = count;
        if done_now > 0 {
            self.finish_host_pages(op_id, done_now);
        }
    }

    pub(crate) fn uncorrectable_error(&self, logical: u64) -> DeviceError {
        DeviceError::new(
            &self.info.name,
            DeviceErrorKind::Uncorrectable { block: logical },
        )
    }

    /// Issues as many pages of a write as there is room for; true when all are issued.
    pub(crate) fn issue_write_pages(&mut self, op_id: u64) -> bool {
        loop {
            let (logical, index) = {
                let op = &self.host.ops[&op_id];
                if op.pages_issued == op.count {
                    return true;
                }
                (op.first + op.pages_issued, op.pages_issued)
            };
            if self.host_programs_at_cap() {
                self.end_host_page_wait(op_id);
                return false;
            }
            let held = self.host_page_held();
            let allocated = if held {
                None
            } else {
                self.allocate_page(Stream::Host)
            };
            let Some(physical_page) = allocated else {
                let now_ns = self.backend.now_ns();
                let op = self.host.ops.get_mut(&op_id).expect("open op");
                if op.stalled_since_ns.is_none() {
                    op.stalled_since_ns = Some(now_ns);
                    self.stats.host_write_stalls += 1;
                    self.stats.gc_pacing_holds += u64::from(held);
                }
                return false;
            };
            self.end_host_page_wait(op_id);
            self.start_policy_victims();
            self.charge_host_page();
            let data = self.host_page_data(op_id, index as usize);
            let version = self.take_sequence();
            self.host.ops.get_mut(&op_id).expect("open op").pages_issued += 1;
            self.program_host_page(op_id, logical, version, physical_page, data);
        }
    }

    /// The bytes of page `index` of write `op_id`, in a buffer from the backend's free list
    /// with room for the whole raw page (spare and parity after the data), so the flash
    /// model stores it as it is instead of copying it; empty where the backend keeps no
    /// data.
    pub(crate) fn host_page_data(&mut self, op_id: u64, index: usize) -> Vec<u8> {
        if !self.backend.keeps_data() {
            return Vec::new();
        }
        let page_bytes = self.shape.page_bytes;
        let mut data = self.backend.take_page_buffer();
        let buffer = self.host.ops[&op_id]
            .buffer
            .as_ref()
            .expect("a write carries a buffer");
        let offset = index * page_bytes;
        data.extend_from_slice(&buffer[offset..offset + page_bytes]);
        data
    }

    /// Ends the wait of the page `op_id` is about to issue, if it waited.
    pub(crate) fn end_host_page_wait(&mut self, op_id: u64) {
        let stalled_since = self
            .host
            .ops
            .get_mut(&op_id)
            .expect("open op")
            .stalled_since_ns
            .take();
        if let Some(since_ns) = stalled_since {
            self.record_host_page_wait(self.backend.now_ns() - since_ns);
        }
    }

    pub(crate) fn program_host_page(
        &mut self,
        op: u64,
        logical: u64,
        version: u64,
        physical_page: u32,
        data: Vec<u8>,
    ) {
        self.stats.host_pages_written += 1;
        self.checkpoint.host_pages_since += 1;
        self.reissue_host_page(op, logical, version, physical_page, data);
    }

    pub(crate) fn issue_log_record(&mut self, op_id: u64) {
        let sequence = self.take_sequence();
        let op = &self.host.ops[&op_id];
        let record = match op.kind {
            HostKind::Trim => LogRecord::Trim {
                sequence,
                first: op.first,
                count: op.count,
            },
            _ => LogRecord::Copy {
                sequence,
                source: op.source,
                destination: op.first,
                count: op.count,
            },
        };
        self.host.ops.get_mut(&op_id).expect("open op").pages_issued = 1;
        self.log
            .pending
            .push(PendingLogRecord { record, op: op_id });
        assert!(
            self.log.pending.len() <= self.info.queue_depth as usize,
            "{} log records pending: past the queue depth {} (one per open trim or copy)",
            self.log.pending.len(),
            self.info.queue_depth
        );
    }

    pub(crate) fn finish_host_pages(&mut self, op_id: u64, pages: u64) {
        let op = self.host.ops.get_mut(&op_id).expect("open op");
        assert!(op.pages_left >= pages, "more pages finished than issued");
        op.pages_left -= pages;
        if op.pages_left > 0 {
            return;
        }
        let op = self.host.ops.remove(&op_id).expect("open op");
        if op.kind.mutates() {
            self.host.finish_mutation(&op);
        }
        let latency = self.backend.now_ns() - op.submitted_ns;
        self.stats
            .record_host_latency(op.kind == HostKind::Read, latency);
        self.host.ready.push(Completion {
            tag: op.tag,
            status: op.error.map_or(Ok(()), Err),
            buffer: op.buffer,
        });
        assert!(
            self.host_in_flight() <= self.info.queue_depth as usize,
            "{} host completions unreaped: past the queue depth {}",
            self.host.ready.len(),
            self.info.queue_depth
        );
    }

    pub(crate) fn reissue_host_page(
        &mut self,
        op: u64,
        logical: u64,
        version: u64,
        physical_page: u32,
        data: Vec<u8>,
    ) {
        let record = SpareRecord {
            kind: PageKind::Data,
            poisoned: false,
            field_a: logical,
            field_b: version,
            program_sequence: 0,
            erase_count: 0,
        };
        let job = RawJob::HostProgram {
            op,
            logical,
            version,
            physical_page,
        };
        self.host_programs_in_flight += 1;
        self.submit_program(physical_page, record, data, job);
    }
}
