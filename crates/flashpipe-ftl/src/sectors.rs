//! 512-byte sectors over the FTL's pages: [`SectorDevice`] is a [`BlockDevice`] whose
//! logical block is [`SECTOR_BYTES`] and whose preferred block is the page below it, as a
//! real SSD with 16 KiB pages takes 512-byte and 4 KiB requests.
//!
//! The map stays at page granularity (the FTL's memory does not grow): a request that
//! covers whole pages goes through unchanged (the caller's buffer, no copy); a read of
//! part of a page reads the enclosing pages into a bounce buffer and copies the window
//! out; a write of part of a page is a read-merge-write: the partial head and tail pages
//! are read (an unmapped page reads as zeros), the caller's sectors merged over them, and
//! the merged pages written as one page write, which the FTL programs on a fresh page and
//! remaps when the program is acknowledged. A crash therefore leaves each page either
//! wholly old or wholly new, like any page write. A trim of part of a page writes zeros
//! into the trimmed sectors of the edge pages (trimmed sectors read as zeros) and trims
//! the whole pages between them. A copy by reference must be page-aligned (the FTL remaps
//! pages); anything else is refused at submit as misaligned.
//!
//! Invariants:
//! - a mutation (write, trim, copy) starts only when no started mutation holds one of its
//!   pages, and mutations start in submission order, so a merge never reads a page another
//!   write is changing and never writes back stale sectors of a concurrent write;
//! - every accepted request completes exactly once, with its buffer; at most
//!   `queue_depth` requests are accepted and not reaped;
//! - inner requests beyond the inner device's queue depth wait in a backlog bounded by
//!   three per accepted request (two edge pages and the trim between them), asserted.

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;

use flashpipe_device::{
    wait_in_steps, BlockDevice, Clock, Completion, DeviceError, DeviceErrorKind, DeviceInfo, IoBuf,
    Operation, Rejected, Request,
};

/// The logical block a [`SectorDevice`] exposes.
pub const SECTOR_BYTES: u32 = 512;

/// Inner requests one accepted request may have in flight or waiting at once.
const PARTS_PER_REQUEST_MAX: usize = 3;

/// A page-granular device seen as 512-byte sectors (see the module documentation).
pub struct SectorDevice<D: BlockDevice> {
    inner: D,
    info: DeviceInfo,
    sectors_per_page: u64,
    page_bytes: usize,
    ops: HashMap<u64, SectorOp>,
    next_op_id: u64,
    /// Mutations not yet started, in submission order.
    waiting: VecDeque<u64>,
    /// Page -> started mutations holding it.
    busy_pages: HashMap<u64, u32>,
    /// Inner tag -> (operation, what the inner request is for).
    parts: HashMap<u64, (u64, Part)>,
    next_inner_tag: u64,
    /// Inner requests the inner device has not accepted yet.
    backlog: VecDeque<Request>,
    ready: Vec<Completion>,
}

/// Why the sector device could not be made over a device.
#[derive(Debug, thiserror::Error)]
pub enum SectorDeviceError {
    /// The inner block is not a whole number of sectors.
    #[error(
        "{device}: its {block_size_bytes}-byte block is not a multiple of {SECTOR_BYTES} bytes, \
         so it cannot be seen as 512-byte sectors"
    )]
    BlockNotSectors {
        /// The device's name.
        device: String,
        /// Its block size.
        block_size_bytes: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SectorKind {
    Read,
    Write,
    Trim,
    Copy,
    Flush,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Waiting for its pages (mutations only).
    Waiting,
    /// Reading the partial edge pages of a write or trim.
    ReadingEdges,
    /// Its last inner requests are out.
    Final,
}

/// What an inner request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// Carries the caller's buffer (or none) straight through.
    Whole,
    /// A read into a bounce buffer; the caller's sectors start `offset` bytes in.
    Bounce { offset: usize },
    /// The read of edge page `index` of the operation.
    Edge { index: usize },
    /// A write or trim whose buffer is the device's own.
    Own,
}

struct SectorOp {
    tag: u64,
    kind: SectorKind,
    first_sector: u64,
    sector_count: u64,
    source_sector: u64,
    buffer: Option<IoBuf>,
    stage: Stage,
    parts_left: u32,
    /// Partial edge pages of a write or trim and, once read, their contents.
    edges: Vec<(u64, Option<IoBuf>)>,
    error: Option<DeviceError>,
}

impl<D: BlockDevice> SectorDevice<D> {
    /// `inner` seen as 512-byte sectors; its block size must be a multiple of 512.
    pub fn new(inner: D) -> Result<SectorDevice<D>, SectorDeviceError> {
        let inner_info = inner.info().clone();
        let block_size_bytes = inner_info.block_size_bytes;
        if block_size_bytes == 0 || block_size_bytes % SECTOR_BYTES != 0 {
            return Err(SectorDeviceError::BlockNotSectors {
                device: inner_info.name.to_string(),
                block_size_bytes,
            });
        }
        let sectors_per_page = u64::from(block_size_bytes / SECTOR_BYTES);
        let info = DeviceInfo {
            name: Arc::clone(&inner_info.name),
            block_size_bytes: SECTOR_BYTES,
            block_count: inner_info.block_count * sectors_per_page,
            queue_depth: inner_info.queue_depth,
        };
        Ok(SectorDevice {
            inner,
            info,
            sectors_per_page,
            page_bytes: block_size_bytes as usize,
            ops: HashMap::new(),
            next_op_id: 0,
            waiting: VecDeque::new(),
            busy_pages: HashMap::new(),
            parts: HashMap::new(),
            next_inner_tag: 0,
            backlog: VecDeque::new(),
            ready: Vec::new(),
        })
    }

    /// The device underneath.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// Hands the device underneath back; requests in flight are lost with this adapter.
    pub fn into_inner(self) -> D {
        self.inner
    }

    /// The pages `count` sectors from `first` touch.
    fn pages_of(&self, first: u64, count: u64) -> Range<u64> {
        let spp = self.sectors_per_page;
        first / spp..(first + count).div_ceil(spp)
    }

    fn is_page_aligned(&self, first: u64, count: u64) -> bool {
        first % self.sectors_per_page == 0 && count % self.sectors_per_page == 0
    }

    /// The pages a mutation holds while it runs (a copy: both ranges).
    fn held_pages(&self, op: &SectorOp) -> Vec<u64> {
        let mut pages: Vec<u64> = self.pages_of(op.first_sector, op.sector_count).collect();
        if op.kind == SectorKind::Copy {
            pages.extend(self.pages_of(op.source_sector, op.sector_count));
        }
        pages
    }

    fn misaligned(&self, detail: String) -> DeviceError {
        DeviceError::new(&self.info.name, DeviceErrorKind::Misaligned { detail })
    }

    /// Queues an inner request for operation `op_id`.
    fn send(&mut self, op_id: u64, part: Part, operation: Operation) {
        let tag = self.next_inner_tag;
        self.next_inner_tag = self.next_inner_tag.wrapping_add(1);
        self.parts.insert(tag, (op_id, part));
        self.ops
            .get_mut(&op_id)
            .expect("an open operation")
            .parts_left += 1;
        self.backlog.push_back(Request { tag, operation });
        let bound = PARTS_PER_REQUEST_MAX * self.info.queue_depth as usize;
        assert!(
            self.backlog.len() <= bound,
            "{} inner requests wait: past {bound} (three per accepted request)",
            self.backlog.len()
        );
    }

    /// Hands the backlog to the inner device while it has room.
    fn pump_backlog(&mut self) {
        let depth = self.inner.info().queue_depth as usize;
        while self.inner.in_flight() < depth {
            let Some(request) = self.backlog.pop_front() else {
                return;
            };
            if let Err(rejected) = self.inner.submit(request) {
                if matches!(rejected.error.kind, DeviceErrorKind::QueueFull { .. }) {
                    self.backlog.push_front(rejected.request);
                    return;
                }
                let tag = rejected.request.tag;
                let buffer = rejected.request.into_buffer();
                self.on_inner_completion(Completion {
                    tag,
                    status: Err(rejected.error),
                    buffer,
                });
            }
        }
    }

    /// Starts the waiting mutations whose pages are free, in order.
    fn start_waiting(&mut self) {
        while let Some(&op_id) = self.waiting.front() {
            let pages = self.held_pages(&self.ops[&op_id]);
            if pages.iter().any(|page| self.busy_pages.contains_key(page)) {
                return;
            }
            self.waiting.pop_front();
            for page in pages {
                *self.busy_pages.entry(page).or_insert(0) += 1;
            }
            self.start_mutation(op_id);
        }
    }

    fn set_stage(&mut self, op_id: u64, stage: Stage) {
        self.ops.get_mut(&op_id).expect("an open operation").stage = stage;
    }

    fn start_mutation(&mut self, op_id: u64) {
        let op = &self.ops[&op_id];
        let (kind, first, count, source) =
            (op.kind, op.first_sector, op.sector_count, op.source_sector);
        let spp = self.sectors_per_page;
        if kind == SectorKind::Copy {
            self.set_stage(op_id, Stage::Final);
            let operation = Operation::CopyByReference {
                source_first_block: source / spp,
                destination_first_block: first / spp,
                block_count: count / spp,
            };
            self.send(op_id, Part::Whole, operation);
            return;
        }
        if kind == SectorKind::Write && self.is_page_aligned(first, count) {
            let op = self.ops.get_mut(&op_id).expect("an open operation");
            op.stage = Stage::Final;
            let buffer = op.buffer.take().expect("a write carries a buffer");
            let operation = Operation::Write {
                first_block: first / spp,
                buffer,
            };
            self.send(op_id, Part::Whole, operation);
            return;
        }
        let pages = self.pages_of(first, count);
        let end = first + count;
        let mut edges = Vec::new();
        if first % spp != 0 {
            edges.push(pages.start);
        }
        if end % spp != 0 && edges.last() != Some(&(pages.end - 1)) {
            edges.push(pages.end - 1);
        }
        if kind == SectorKind::Trim && edges.is_empty() {
            self.set_stage(op_id, Stage::Final);
            let operation = Operation::Trim {
                first_block: pages.start,
                block_count: pages.end - pages.start,
            };
            self.send(op_id, Part::Whole, operation);
            return;
        }
        let op = self.ops.get_mut(&op_id).expect("an open operation");
        op.stage = Stage::ReadingEdges;
        op.edges = edges.iter().map(|&page| (page, None)).collect();
        for (index, page) in edges.into_iter().enumerate() {
            let operation = Operation::Read {
                first_block: page,
                buffer: IoBuf::zeroed(self.page_bytes),
            };
            self.send(op_id, Part::Edge { index }, operation);
        }
    }

    /// The edge pages are read: merge and write (a write), or zero, write and trim the
    /// pages between (a trim).
    fn finish_merge(&mut self, op_id: u64) {
        let spp = self.sectors_per_page;
        let sector = SECTOR_BYTES as usize;
        let page_bytes = self.page_bytes;
        let op = self.ops.get_mut(&op_id).expect("an open operation");
        op.stage = Stage::Final;
        let (first, count) = (op.first_sector, op.sector_count);
        let pages = first / spp..(first + count).div_ceil(spp);
        let edges = std::mem::take(&mut op.edges);
        if op.kind == SectorKind::Write {
            let mut staged = IoBuf::zeroed((pages.end - pages.start) as usize * page_bytes);
            for (page, contents) in &edges {
                let offset = (page - pages.start) as usize * page_bytes;
                let contents = contents.as_ref().expect("an edge page read");
                staged[offset..offset + page_bytes].copy_from_slice(contents);
            }
            let buffer = op.buffer.as_ref().expect("a write carries a buffer");
            let offset = (first - pages.start * spp) as usize * sector;
            staged[offset..offset + buffer.len()].copy_from_slice(buffer);
            let operation = Operation::Write {
                first_block: pages.start,
                buffer: staged,
            };
            self.send(op_id, Part::Own, operation);
            return;
        }
        let mut whole = pages.clone();
        for (page, contents) in edges {
            let mut contents = contents.expect("an edge page read");
            let page_first = page * spp;
            let zero_from = first.max(page_first) - page_first;
            let zero_to = (first + count).min(page_first + spp) - page_first;
            contents[zero_from as usize * sector..zero_to as usize * sector].fill(0);
            if page == whole.start {
                whole.start += 1;
            } else if page + 1 == whole.end {
                whole.end -= 1;
            }
            let operation = Operation::Write {
                first_block: page,
                buffer: contents,
            };
            self.send(op_id, Part::Own, operation);
        }
        if whole.start < whole.end {
            let operation = Operation::Trim {
                first_block: whole.start,
                block_count: whole.end - whole.start,
            };
            self.send(op_id, Part::Own, operation);
        }
    }

    fn on_inner_completion(&mut self, completion: Completion) {
        let (op_id, part) = self
            .parts
            .remove(&completion.tag)
            .expect("a completion for a request this adapter sent");
        let op = self.ops.get_mut(&op_id).expect("an open operation");
        assert!(op.parts_left > 0, "more inner completions than requests");
        op.parts_left -= 1;
        if let Err(error) = completion.status {
            op.error.get_or_insert(error);
        }
        match part {
            Part::Whole => {
                if let Some(buffer) = completion.buffer {
                    op.buffer = Some(buffer);
                }
            }
            Part::Bounce { offset } => {
                if let (Some(bounce), Some(buffer)) = (completion.buffer, op.buffer.as_mut()) {
                    let length = buffer.len();
                    buffer.copy_from_slice(&bounce[offset..offset + length]);
                }
            }
            Part::Edge { index } => op.edges[index].1 = completion.buffer,
            Part::Own => {}
        }
        if op.parts_left > 0 {
            return;
        }
        if op.stage == Stage::ReadingEdges && op.error.is_none() {
            self.finish_merge(op_id);
            return;
        }
        self.complete(op_id);
    }

    fn complete(&mut self, op_id: u64) {
        let op = self.ops.remove(&op_id).expect("an open operation");
        if matches!(
            op.kind,
            SectorKind::Write | SectorKind::Trim | SectorKind::Copy
        ) {
            for page in self.held_pages(&op) {
                let holders = self.busy_pages.get_mut(&page).expect("a held page");
                *holders -= 1;
                if *holders == 0 {
                    self.busy_pages.remove(&page);
                }
            }
        }
        self.ready.push(Completion {
            tag: op.tag,
            status: op.error.map_or(Ok(()), Err),
            buffer: op.buffer,
        });
        assert!(
            self.in_flight() <= self.info.queue_depth as usize,
            "{} requests accepted and not reaped: past the queue depth {}",
            self.in_flight(),
            self.info.queue_depth
        );
        self.start_waiting();
    }

    fn reap_inner(&mut self, completions: Vec<Completion>) {
        for completion in completions {
            self.on_inner_completion(completion);
        }
        self.pump_backlog();
    }
}

impl<D: BlockDevice> BlockDevice for SectorDevice<D> {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.inner.clock()
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        let request = self.info.admit(self.in_flight(), request)?;
        let (kind, first_sector, sector_count, source_sector, buffer) = match request.operation {
            Operation::Read {
                first_block,
                buffer,
            } => {
                let count = (buffer.len() / SECTOR_BYTES as usize) as u64;
                (SectorKind::Read, first_block, count, 0, Some(buffer))
            }
            Operation::Write {
                first_block,
                buffer,
            } => {
                let count = (buffer.len() / SECTOR_BYTES as usize) as u64;
                (SectorKind::Write, first_block, count, 0, Some(buffer))
            }
            Operation::Trim {
                first_block,
                block_count,
            } => (SectorKind::Trim, first_block, block_count, 0, None),
            Operation::CopyByReference {
                source_first_block,
                destination_first_block,
                block_count,
            } => {
                if !self.is_page_aligned(source_first_block, block_count)
                    || destination_first_block % self.sectors_per_page != 0
                {
                    let error = self.misaligned(format!(
                        "a copy by reference remaps whole {}-byte pages: its source, \
                         destination and length must be multiples of {} sectors",
                        self.page_bytes, self.sectors_per_page
                    ));
                    let request = Request {
                        tag: request.tag,
                        operation: Operation::CopyByReference {
                            source_first_block,
                            destination_first_block,
                            block_count,
                        },
                    };
                    return Err(Rejected { request, error });
                }
                (
                    SectorKind::Copy,
                    destination_first_block,
                    block_count,
                    source_first_block,
                    None,
                )
            }
            Operation::Flush => (SectorKind::Flush, 0, 0, 0, None),
        };
        let op_id = self.next_op_id;
        self.next_op_id += 1;
        self.ops.insert(
            op_id,
            SectorOp {
                tag: request.tag,
                kind,
                first_sector,
                sector_count,
                source_sector,
                buffer,
                stage: Stage::Waiting,
                parts_left: 0,
                edges: Vec::new(),
                error: None,
            },
        );
        let spp = self.sectors_per_page;
        match kind {
            SectorKind::Flush => {
                self.ops.get_mut(&op_id).expect("just opened").stage = Stage::Final;
                self.send(op_id, Part::Whole, Operation::Flush);
            }
            SectorKind::Read => {
                let op = self.ops.get_mut(&op_id).expect("just opened");
                op.stage = Stage::Final;
                let pages = first_sector / spp..(first_sector + sector_count).div_ceil(spp);
                if first_sector % spp == 0 && sector_count % spp == 0 {
                    let buffer = op.buffer.take().expect("a read carries a buffer");
                    let operation = Operation::Read {
                        first_block: pages.start,
                        buffer,
                    };
                    self.send(op_id, Part::Whole, operation);
                } else {
                    let bounce =
                        IoBuf::zeroed((pages.end - pages.start) as usize * self.page_bytes);
                    let offset =
                        (first_sector - pages.start * spp) as usize * SECTOR_BYTES as usize;
                    let operation = Operation::Read {
                        first_block: pages.start,
                        buffer: bounce,
                    };
                    self.send(op_id, Part::Bounce { offset }, operation);
                }
            }
            SectorKind::Write | SectorKind::Trim | SectorKind::Copy => {
                self.waiting.push_back(op_id);
                self.start_waiting();
            }
        }
        self.pump_backlog();
        Ok(())
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        self.pump_backlog();
        let mut inner_completions = Vec::new();
        self.inner.poll_completions(&mut inner_completions);
        self.reap_inner(inner_completions);
        let count = self.ready.len();
        completions.append(&mut self.ready);
        count
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        wait_in_steps(self, completions, |sectors| {
            let mut inner_completions = Vec::new();
            sectors.inner.wait_completions(&mut inner_completions)?;
            sectors.reap_inner(inner_completions);
            Ok(())
        })
    }

    fn in_flight(&self) -> usize {
        self.ops.len() + self.ready.len()
    }

    fn copies_by_reference(&self) -> bool {
        self.inner.copies_by_reference()
    }

    fn copy_alignment_blocks(&self) -> u64 {
        self.inner.copy_alignment_blocks() * self.sectors_per_page
    }

    fn preferred_block_size_bytes(&self) -> u32 {
        self.page_bytes as u32
    }
}
