//! The engine's read path: many reads in flight at once, each read straight from the
//! device into one engine-owned pool buffer (no copy), completed out of order.
//!
//! A read is planned by the file system ([`Filesystem::plan_read`], from its block map):
//! each piece, a run of contiguous device blocks, becomes one device request whose buffer
//! is a view of the read's pool buffer at the piece's position, handed out by a
//! [`SplitBuffer`] (whose module holds the safety argument); holes are zero-filled in
//! place through views of their own. This module keeps what is the engine's: the pool
//! buffers, the request tags, the table of reads in flight and the sinks. The split stays
//! in the [`ReadsInFlight`] table until every piece is back and dropped, and only then
//! gives the pool buffer back whole. A read may instead go into a destination its caller
//! gave ([`ReadTarget::Destination`]: a client's region a server mapped), laid out as a
//! pool buffer would be from the first block on; it must start on a block and the span
//! must fit, and it takes no pool buffer (it still takes a slot of the table, so the
//! limit on reads in flight holds).
//!
//! A batch of whole small files ([`ReadsInFlight::start_batch`]) is planned together: each
//! file whose blocks are physically contiguous is an extent; extents are sorted by device
//! block and extents that touch are coalesced into one device request into one pool buffer
//! (files written one after another lie next to each other, so one request carries many
//! files). A file that is not contiguous (holes, fragments) is read run by run. Requests are
//! packed one after another into the batch's pool buffers (a buffer holds as many groups
//! and scattered files as fit, each request a view of it), so a batch takes as few buffers
//! as its bytes need, and never more than [`READ_FILES_MAX_BUFFERS`]: a file that would
//! need another buffer past that is answered [`EngineError::BatchBuffersFull`], to be read
//! in a later command (a caller holding one credit per buffer knows its worst case). When
//! every request of the batch is back, each buffer is shared (`Arc`) by the files in it and
//! each file's data is a window of it: still no copy, and the buffer returns to the pool
//! when the last file in it is dropped.
//!
//! Every FS block read is verified against the CRC32C its block pointer carries (the
//! plan's [`ReadCheck`], the file system's) once its request is back, in place in the
//! pool buffer (no copy); a damaged block fails its read, or its file of a batch, with
//! [`flashpipe_fs::FileIoError::DataChecksumMismatch`] naming the file and the offset.

use std::collections::VecDeque;
use std::sync::Arc;

use flashpipe_device::{
    BlockDevice, BufferPool, Completion, DeviceError, IoBuf, PoolExhausted, Request, SplitBuffer,
};
use flashpipe_fs::{read_span_bytes, touching_group, FileId, FsCore, ReadCheck, ReadPlan};

use crate::command::{
    read_files_max_bytes, EngineError, ReadBuffer, ReadData, READ_FILES_MAX_BUFFERS,
    READ_FILES_MAX_COUNT,
};

/// Where a finished read goes.
pub trait ReadSink {
    /// Delivers a finished read.
    fn deliver(self, result: Result<ReadData, EngineError>);

    /// Delivers a finished batch of whole files (each file's data or error, in order), or
    /// the batch's refusal.
    fn deliver_files(self, result: Result<Vec<Result<ReadData, EngineError>>, EngineError>);
}

/// A device request's tag: the table slot in the low half, the batch buffer in the high half.
fn request_tag(slot: usize, buffer_index: usize) -> u64 {
    assert!(
        slot < (1 << 32) && buffer_index < (1 << 31),
        "a read's tag leaves the top bit to writes"
    );
    ((buffer_index as u64) << 32) | slot as u64
}

fn split_tag(tag: u64) -> (usize, usize) {
    ((tag & 0xffff_ffff) as usize, (tag >> 32) as usize)
}

/// What one table slot holds: a single read, or a batch of whole files.
enum Slot<S> {
    Single(InFlightRead<S>),
    Batch(InFlightBatch<S>),
}

/// One pool buffer of a batch and the device requests filling it.
struct BatchBuffer {
    buffer: SplitBuffer,
    /// Bytes from the buffer's start already given to requests, holes and windows.
    filled_bytes: usize,
    pieces_outstanding: usize,
    first_error: Option<DeviceError>,
}

/// Where one file of a batch ends up.
enum BatchFile {
    /// Bytes `window_start..window_start + length_bytes` of buffer `buffer_index`, whose
    /// blocks `check` verifies.
    Window {
        buffer_index: usize,
        window_start: usize,
        length_bytes: usize,
        check: ReadCheck,
    },
    /// An empty file.
    Empty,
    /// The file failed before reaching the device (missing, too large, no buffer).
    Failed(EngineError),
}

struct InFlightBatch<S> {
    sink: S,
    buffers: Vec<BatchBuffer>,
    files: Vec<BatchFile>,
    pieces_outstanding: usize,
}

struct InFlightRead<S> {
    sink: S,
    buffer: SplitBuffer,
    check: ReadCheck,
    window_start: usize,
    length_bytes: usize,
    pieces_outstanding: usize,
    first_error: Option<DeviceError>,
}

/// Reads in flight, and device requests waiting for room in the device queue.
pub struct ReadsInFlight<S> {
    /// The file system's block size, fixed at format time.
    block_bytes: u64,
    slots: Vec<Option<Slot<S>>>,
    /// The files each slot's read reads (empty for a free slot), so that a write of one
    /// of them can wait for exactly those reads.
    slot_files: Vec<Vec<FileId>>,
    free_slots: Vec<usize>,
    waiting_requests: VecDeque<Request>,
}

impl<S: ReadSink> ReadsInFlight<S> {
    /// An empty table for at most `read_limit` reads at once, on a file system of
    /// `block_bytes` blocks.
    pub fn new(read_limit: usize, block_bytes: u64) -> ReadsInFlight<S> {
        ReadsInFlight {
            block_bytes,
            slots: (0..read_limit).map(|_| None).collect(),
            slot_files: (0..read_limit).map(|_| Vec::new()).collect(),
            free_slots: (0..read_limit).rev().collect(),
            waiting_requests: VecDeque::new(),
        }
    }

    /// True when no read is in flight.
    pub fn is_idle(&self) -> bool {
        self.free_slots.len() == self.slots.len()
    }

    /// True when another read can start.
    pub fn has_room(&self) -> bool {
        !self.free_slots.is_empty()
    }

    /// True when a read in flight reads `file`.
    pub fn reads_file(&self, file: FileId) -> bool {
        self.slot_files.iter().any(|files| files.contains(&file))
    }

    /// Plans a read of `file` (named `file_name`, for a checksum error) and queues its
    /// device requests. Errors in planning (missing file, read past the end, no buffer)
    /// are returned without anything started.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &mut self,
        filesystem: &FsCore,
        target: ReadTarget<'_>,
        file: FileId,
        file_name: &str,
        offset_bytes: u64,
        length_bytes: u64,
        sink: S,
    ) -> Result<(), (S, EngineError)> {
        let plan = match plan_read(
            filesystem,
            target,
            self.block_bytes,
            file,
            file_name,
            offset_bytes,
            length_bytes,
        ) {
            Ok(plan) => plan,
            Err(error) => return Err((sink, error)),
        };
        let slot = self.free_slots.pop().expect("caller checked has_room");
        let (plan, buffer) = plan;
        self.slot_files[slot].push(file);
        let mut buffer = SplitBuffer::new(buffer);
        let mut pieces = 0;
        for piece in plan.pieces() {
            let mut view = run_view(&mut buffer, piece.position_bytes, piece.length_bytes);
            let Some(device_block) = piece.first_device_block else {
                view.fill(0);
                continue;
            };
            self.waiting_requests.push_back(Request::read(
                request_tag(slot, 0),
                device_block,
                view,
            ));
            pieces += 1;
        }
        let window_start = plan.window_start();
        let read = InFlightRead {
            sink,
            buffer,
            check: plan.into_check(),
            window_start,
            length_bytes: length_bytes as usize,
            pieces_outstanding: pieces,
            first_error: None,
        };
        self.slots[slot] = Some(Slot::Single(read));
        if pieces == 0 {
            self.finish(slot);
        }
        Ok(())
    }

    /// Plans a batch of whole files (see the module doc) and queues its device requests.
    /// A batch over the count or byte limits is refused whole; a file that is missing, too
    /// large or finds no buffer fails only its own entry.
    pub fn start_batch(
        &mut self,
        filesystem: &FsCore,
        pool: &BufferPool,
        names: &[String],
        max_read_bytes: u64,
        sink: S,
    ) -> Result<(), (S, EngineError)> {
        let resolved = match resolve_batch(filesystem, names, max_read_bytes) {
            Ok(resolved) => resolved,
            Err(error) => return Err((sink, error)),
        };
        let slot = self.free_slots.pop().expect("caller checked has_room");
        self.slot_files[slot].extend(
            resolved
                .iter()
                .filter_map(|file| file.as_ref().ok().map(|&(file, _)| file)),
        );
        let mut planner = BatchPlanner {
            block_bytes: self.block_bytes,
            pool,
            slot,
            buffers: Vec::new(),
            requests: Vec::new(),
            buffer_limit: READ_FILES_MAX_BUFFERS,
        };
        let mut files: Vec<BatchFile> = Vec::with_capacity(names.len());
        let mut extents = Vec::new();
        for (file_index, resolved_file) in resolved.into_iter().enumerate() {
            files.push(match resolved_file {
                Err(error) => BatchFile::Failed(error),
                Ok((_, 0)) => BatchFile::Empty,
                Ok((file, size_bytes)) => {
                    match filesystem.plan_file_read(file, &names[file_index], size_bytes) {
                        Err(error) => BatchFile::Failed(error.into()),
                        Ok(check) => match check.contiguous_extent() {
                            Some((first_fs_block, first_device_block, block_count)) => {
                                extents.push(FileExtent {
                                    file_index,
                                    first_fs_block,
                                    first_device_block,
                                    block_count,
                                    size_bytes,
                                    check,
                                });
                                BatchFile::Empty
                            }
                            None => planner.plan_scattered(check, size_bytes),
                        },
                    }
                }
            });
        }
        planner.plan_extents(extents, &mut files);
        let pieces = planner.requests.len();
        self.waiting_requests.extend(planner.requests);
        let batch = InFlightBatch {
            sink,
            buffers: planner.buffers,
            files,
            pieces_outstanding: pieces,
        };
        self.slots[slot] = Some(Slot::Batch(batch));
        if pieces == 0 {
            self.finish(slot);
        }
        Ok(())
    }

    /// Submits waiting requests while the device has room; a request the device refuses
    /// for another reason than a full queue fails its piece.
    pub fn submit_waiting(&mut self, device: &mut dyn BlockDevice) {
        while let Some(request) = self.waiting_requests.pop_front() {
            if let Err(rejected) = device.submit(request) {
                if matches!(
                    rejected.error.kind,
                    flashpipe_device::DeviceErrorKind::QueueFull { .. }
                ) {
                    self.waiting_requests.push_front(rejected.request);
                    break;
                }
                let tag = rejected.request.tag;
                drop(rejected.request);
                self.piece_done(tag, Err(rejected.error));
            }
        }
    }

    /// Takes one device completion of a read's request (its buffer, a view of the read's
    /// pool buffer, is dropped back into the split); a read whose pieces are all back is
    /// finished and delivered.
    pub fn complete(&mut self, completion: Completion) {
        let Completion {
            tag,
            status,
            buffer,
        } = completion;
        drop(buffer);
        self.piece_done(tag, status);
    }

    fn piece_done(&mut self, tag: u64, status: Result<(), DeviceError>) {
        let (slot, buffer_index) = split_tag(tag);
        let finished = match self.slots[slot]
            .as_mut()
            .expect("completion for a live read")
        {
            Slot::Single(read) => {
                assert!(
                    read.pieces_outstanding > 0,
                    "read slot {slot} got an extra completion"
                );
                read.pieces_outstanding -= 1;
                if let (Err(error), None) = (status, &read.first_error) {
                    read.first_error = Some(error);
                }
                read.pieces_outstanding == 0
            }
            Slot::Batch(batch) => {
                let buffer = &mut batch.buffers[buffer_index];
                assert!(
                    buffer.pieces_outstanding > 0 && batch.pieces_outstanding > 0,
                    "batch slot {slot} buffer {buffer_index} got an extra completion"
                );
                buffer.pieces_outstanding -= 1;
                batch.pieces_outstanding -= 1;
                if let (Err(error), None) = (status, &buffer.first_error) {
                    buffer.first_error = Some(error);
                }
                batch.pieces_outstanding == 0
            }
        };
        if finished {
            self.finish(slot);
        }
    }

    fn finish(&mut self, slot: usize) {
        let finished = self.slots[slot].take().expect("finishing a live read");
        self.slot_files[slot].clear();
        self.free_slots.push(slot);
        match finished {
            Slot::Single(read) => {
                let buffer = read.buffer.into_parent();
                let result = match read.first_error {
                    Some(error) => Err(EngineError::Device(error)),
                    None => read
                        .check
                        .verify(&buffer)
                        .map_err(EngineError::from)
                        .map(|()| ReadData {
                            buffer: ReadBuffer::Owned(buffer),
                            window_start: read.window_start,
                            length_bytes: read.length_bytes,
                        }),
                };
                read.sink.deliver(result);
            }
            Slot::Batch(batch) => {
                let InFlightBatch {
                    sink,
                    buffers,
                    files,
                    ..
                } = batch;
                sink.deliver_files(Ok(batch_results(buffers, files)));
            }
        }
    }
}

/// Turns a finished batch's buffers into shared buffers and each file into its window
/// (or its error: a failed device request fails only the files in its buffer, a damaged
/// block only its own file).
fn batch_results(
    buffers: Vec<BatchBuffer>,
    files: Vec<BatchFile>,
) -> Vec<Result<ReadData, EngineError>> {
    let shared: Vec<Result<Arc<IoBuf>, DeviceError>> = buffers
        .into_iter()
        .map(|buffer| {
            assert_eq!(buffer.pieces_outstanding, 0, "a batch finished early");
            match buffer.first_error {
                Some(error) => Err(error),
                None => Ok(Arc::new(buffer.buffer.into_parent())),
            }
        })
        .collect();
    files
        .into_iter()
        .map(|file| match file {
            BatchFile::Window {
                buffer_index,
                window_start,
                length_bytes,
                check,
            } => match &shared[buffer_index] {
                Ok(buffer) => {
                    assert!(window_start + length_bytes <= buffer.len());
                    check.verify(&buffer[window_start..])?;
                    Ok(ReadData {
                        buffer: ReadBuffer::Shared(Arc::clone(buffer)),
                        window_start,
                        length_bytes,
                    })
                }
                Err(error) => Err(EngineError::Device(error.clone())),
            },
            BatchFile::Empty => Ok(ReadData {
                buffer: ReadBuffer::Owned(IoBuf::zeroed(0)),
                window_start: 0,
                length_bytes: 0,
            }),
            BatchFile::Failed(error) => Err(error),
        })
        .collect()
}

/// Where a read's blocks go: a buffer of the engine's pool, or a destination the caller
/// gave (a client's region, mapped by a server), which the read's span fills from its
/// start.
pub enum ReadTarget<'a> {
    /// Take a buffer of this pool.
    Pool(&'a BufferPool),
    /// Read into this buffer; the read must start on a block and its span fit.
    Destination(IoBuf),
}

/// Plans a read with the file system and takes its buffer: a span larger than a pool
/// buffer is refused before the file system is asked (as a read too large), a read into
/// a destination that does not start on a block or whose span does not fit it likewise,
/// then the file system's refusals (stale handle, past the end, a range past the largest
/// offset), then an exhausted pool.
fn plan_read(
    filesystem: &FsCore,
    target: ReadTarget<'_>,
    block_bytes: u64,
    file: FileId,
    file_name: &str,
    offset_bytes: u64,
    length_bytes: u64,
) -> Result<(ReadPlan, IoBuf), EngineError> {
    let span_bytes = read_span_bytes(block_bytes, offset_bytes, length_bytes);
    check_target(&target, block_bytes, offset_bytes, length_bytes, span_bytes)?;
    // A range past the largest offset (`None`) is no file's: the file system refuses it.
    let plan = filesystem.plan_read(file, file_name, offset_bytes, length_bytes)?;
    assert_eq!(Some(plan.span_bytes() as u64), span_bytes, "one span rule");
    let mut buffer = match target {
        ReadTarget::Pool(pool) => pool.try_take()?,
        ReadTarget::Destination(destination) => destination,
    };
    buffer.set_len(plan.span_bytes());
    Ok((plan, buffer))
}

/// Refuses a span its target cannot hold: more than a pool buffer, or a destination read
/// that does not start on a block or needs more room than the destination has.
fn check_target(
    target: &ReadTarget<'_>,
    block_bytes: u64,
    offset_bytes: u64,
    length_bytes: u64,
    span_bytes: Option<u64>,
) -> Result<(), EngineError> {
    match target {
        ReadTarget::Pool(pool) => {
            if span_bytes.is_some_and(|span_bytes| span_bytes > pool.buffer_size_bytes() as u64) {
                return Err(EngineError::ReadTooLarge {
                    length_bytes,
                    max_read_bytes: pool.buffer_size_bytes() as u64 - block_bytes,
                });
            }
        }
        ReadTarget::Destination(destination) => {
            if offset_bytes % block_bytes != 0 {
                return Err(EngineError::ReadIntoUnaligned {
                    offset_bytes,
                    block_bytes,
                });
            }
            let destination_bytes = destination.len() as u64;
            if span_bytes.is_some_and(|span_bytes| span_bytes > destination_bytes) {
                return Err(EngineError::DestinationTooSmall {
                    span_bytes: span_bytes.unwrap_or(0),
                    destination_bytes,
                });
            }
        }
    }
    Ok(())
}

/// Opens every file of a batch and checks the limits: the whole batch is refused when it
/// names too many files or its files hold too many bytes together; a missing or too large
/// file is an error of its own entry.
#[allow(clippy::type_complexity)]
fn resolve_batch(
    filesystem: &FsCore,
    names: &[String],
    max_read_bytes: u64,
) -> Result<Vec<Result<(FileId, u64), EngineError>>, EngineError> {
    if names.len() > READ_FILES_MAX_COUNT {
        return Err(EngineError::TooManyFiles {
            count: names.len(),
            limit: READ_FILES_MAX_COUNT,
        });
    }
    let resolved: Vec<Result<(FileId, u64), EngineError>> = names
        .iter()
        .map(|name| {
            let file = filesystem.open(name)?;
            let size_bytes = filesystem.stat(file)?.size_bytes;
            if size_bytes > max_read_bytes {
                return Err(EngineError::ReadTooLarge {
                    length_bytes: size_bytes,
                    max_read_bytes,
                });
            }
            Ok((file, size_bytes))
        })
        .collect();
    let total_bytes: u64 = resolved
        .iter()
        .filter_map(|file| file.as_ref().ok().map(|&(_, size_bytes)| size_bytes))
        .sum();
    let limit_bytes = read_files_max_bytes(max_read_bytes);
    if total_bytes > limit_bytes {
        return Err(EngineError::ReadFilesTooLarge {
            total_bytes,
            limit_bytes,
        });
    }
    Ok(resolved)
}

/// The view of a run's bytes in a read's buffer: the runs of one buffer are disjoint
/// and inside it, so a refusal is a planning bug.
fn run_view(buffer: &mut SplitBuffer, position_bytes: usize, run_bytes: usize) -> IoBuf {
    buffer
        .view(position_bytes, run_bytes)
        .unwrap_or_else(|refused| {
            panic!("a read's runs are fresh windows of its buffer: {refused}")
        })
}

/// A contiguous file of a batch.
struct FileExtent {
    file_index: usize,
    first_fs_block: u64,
    first_device_block: u64,
    block_count: u64,
    size_bytes: u64,
    check: ReadCheck,
}

/// Why a span found no place in a batch's buffers.
enum PlaceRefused {
    /// The batch holds its most buffers already.
    BufferLimit(usize),
    /// The engine's pool has no free buffer.
    Exhausted(PoolExhausted),
}

impl PlaceRefused {
    /// The error of a file that found no place.
    fn error(&self) -> EngineError {
        match self {
            PlaceRefused::BufferLimit(limit) => EngineError::BatchBuffersFull { limit: *limit },
            PlaceRefused::Exhausted(exhausted) => {
                EngineError::ReadBuffersExhausted(exhausted.clone())
            }
        }
    }
}

/// Builds a batch's buffers and device requests.
struct BatchPlanner<'a> {
    block_bytes: u64,
    pool: &'a BufferPool,
    slot: usize,
    buffers: Vec<BatchBuffer>,
    requests: Vec<Request>,
    /// Most pool buffers the batch may take.
    buffer_limit: usize,
}

impl BatchPlanner<'_> {
    /// Finds room for `span_bytes` in the batch's last buffer, or takes another buffer
    /// (while the batch is under its buffer limit); (buffer index, position in it).
    fn place(&mut self, span_bytes: usize) -> Result<(usize, usize), PlaceRefused> {
        assert!(
            span_bytes <= self.pool.buffer_size_bytes(),
            "a batch span fits one buffer"
        );
        if let Some(last) = self.buffers.last_mut() {
            if last.filled_bytes + span_bytes <= last.buffer.len() {
                let position_bytes = last.filled_bytes;
                last.filled_bytes += span_bytes;
                return Ok((self.buffers.len() - 1, position_bytes));
            }
        }
        if self.buffers.len() >= self.buffer_limit {
            return Err(PlaceRefused::BufferLimit(self.buffer_limit));
        }
        let mut buffer = self.pool.try_take().map_err(PlaceRefused::Exhausted)?;
        let capacity_bytes = self.pool.buffer_size_bytes();
        assert!(capacity_bytes <= buffer.capacity());
        buffer.set_len(capacity_bytes);
        self.buffers.push(BatchBuffer {
            buffer: SplitBuffer::new(buffer),
            filled_bytes: span_bytes,
            pieces_outstanding: 0,
            first_error: None,
        });
        Ok((self.buffers.len() - 1, 0))
    }

    /// Queues a read of `byte_count` bytes at `position_bytes` of buffer `buffer_index`.
    fn add_request(
        &mut self,
        buffer_index: usize,
        position_bytes: usize,
        byte_count: usize,
        device_block: u64,
    ) {
        let batch_buffer = &mut self.buffers[buffer_index];
        let view = run_view(&mut batch_buffer.buffer, position_bytes, byte_count);
        batch_buffer.pieces_outstanding += 1;
        self.requests.push(Request::read(
            request_tag(self.slot, buffer_index),
            device_block,
            view,
        ));
    }

    /// A file with holes or fragments: its blocks laid out in order at a place of its own,
    /// one request per run, holes zero-filled.
    fn plan_scattered(&mut self, check: ReadCheck, size_bytes: u64) -> BatchFile {
        let span_bytes = (size_bytes.div_ceil(self.block_bytes) * self.block_bytes) as usize;
        let (buffer_index, start_bytes) = match self.place(span_bytes) {
            Ok(placed) => placed,
            Err(refused) => return BatchFile::Failed(refused.error()),
        };
        for piece in check.pieces() {
            let position_bytes = start_bytes + piece.position_bytes;
            let byte_count = piece.length_bytes;
            match piece.first_device_block {
                Some(device_block) => {
                    self.add_request(buffer_index, position_bytes, byte_count, device_block)
                }
                None => run_view(
                    &mut self.buffers[buffer_index].buffer,
                    position_bytes,
                    byte_count,
                )
                .fill(0),
            }
        }
        BatchFile::Window {
            buffer_index,
            window_start: start_bytes,
            length_bytes: size_bytes as usize,
            check,
        }
    }

    /// Sorts the contiguous files by FS block and coalesces the ones that touch into one
    /// request each, as long as the span fits a pool buffer.
    fn plan_extents(&mut self, mut extents: Vec<FileExtent>, files: &mut [BatchFile]) {
        extents.sort_by_key(|extent| extent.first_fs_block);
        let buffer_blocks = self.pool.buffer_size_bytes() as u64 / self.block_bytes;
        let mut group_start = 0;
        let mut remaining = extents.into_iter();
        let extents: Vec<(u64, u64)> = remaining
            .as_slice()
            .iter()
            .map(|extent| (extent.first_fs_block, extent.block_count))
            .collect();
        while group_start < extents.len() {
            let first_block = extents[group_start].0;
            let (group_end, end_block) = touching_group(&extents, group_start, buffer_blocks);
            let group: Vec<FileExtent> = remaining.by_ref().take(group_end - group_start).collect();
            self.plan_group(group, first_block, end_block, files);
            group_start = group_end;
        }
    }

    /// One request for a group of touching files, FS blocks `first_block..end_block`.
    fn plan_group(
        &mut self,
        group: Vec<FileExtent>,
        first_block: u64,
        end_block: u64,
        files: &mut [BatchFile],
    ) {
        let first_device_block = group[0].first_device_block;
        assert_eq!(group[0].first_fs_block, first_block);
        let span_bytes = ((end_block - first_block) * self.block_bytes) as usize;
        let (buffer_index, start_bytes) = match self.place(span_bytes) {
            Ok(placed) => placed,
            Err(refused) => {
                for extent in group {
                    files[extent.file_index] = BatchFile::Failed(refused.error());
                }
                return;
            }
        };
        self.add_request(buffer_index, start_bytes, span_bytes, first_device_block);
        for extent in group {
            assert_eq!(
                extent.block_count,
                extent.size_bytes.div_ceil(self.block_bytes),
                "a whole file's extent covers its size"
            );
            let window_start =
                start_bytes + ((extent.first_fs_block - first_block) * self.block_bytes) as usize;
            files[extent.file_index] = BatchFile::Window {
                buffer_index,
                window_start,
                length_bytes: extent.size_bytes as usize,
                check: extent.check,
            };
        }
    }
}
