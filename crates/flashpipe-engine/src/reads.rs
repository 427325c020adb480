//! The engine's read path: many reads in flight at once, each read straight from the
//! device into one engine-owned pool buffer (no copy), completed out of order.
//!
//! A read is planned with the file system's block map: each run of contiguous device
//! blocks becomes one device request whose buffer is a borrowed view into the read's
//! pool buffer at the run's position; holes are zero-filled in place. The pool buffer
//! stays in the [`ReadsInFlight`] table until every piece is back, which is what makes
//! the borrowed views sound (the same argument as striping's, see flashpipe-array).

use std::collections::VecDeque;

use flashpipe_device::{BlockDevice, BufferPool, Completion, DeviceError, IoBuf, Request};
use flashpipe_fs::{FileId, Filesystem};

use crate::command::{EngineError, ReadData};

/// Where a finished read goes.
pub trait ReadSink {
    /// Delivers a finished read.
    fn deliver(self, result: Result<ReadData, EngineError>);
}

struct InFlightRead<S> {
    sink: S,
    buffer: IoBuf,
    window_start: usize,
    length_bytes: usize,
    pieces_outstanding: usize,
    first_error: Option<DeviceError>,
}

/// Reads in flight, and device requests waiting for room in the device queue.
pub struct ReadsInFlight<S> {
    /// The file system's block size, fixed at format time.
    block_bytes: u64,
    slots: Vec<Option<InFlightRead<S>>>,
    free_slots: Vec<usize>,
    waiting_requests: VecDeque<Request>,
    completions: Vec<Completion>,
}

impl<S: ReadSink> ReadsInFlight<S> {
    /// An empty table for at most `read_limit` reads at once, on a file system of
    /// `block_bytes` blocks.
    pub fn new(read_limit: usize, block_bytes: u64) -> ReadsInFlight<S> {
        ReadsInFlight {
            block_bytes,
            slots: (0..read_limit).map(|_| None).collect(),
            free_slots: (0..read_limit).rev().collect(),
            waiting_requests: VecDeque::new(),
            completions: Vec::new(),
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

    /// Plans a read and queues its device requests. Errors in planning (missing file,
    /// read past the end, no buffer) are returned without anything started.
    pub fn start(
        &mut self,
        filesystem: &mut Filesystem,
        pool: &BufferPool,
        file: FileId,
        offset_bytes: u64,
        length_bytes: u64,
        sink: S,
    ) -> Result<(), (S, EngineError)> {
        let plan = match plan_read(
            filesystem,
            pool,
            self.block_bytes,
            file,
            offset_bytes,
            length_bytes,
        ) {
            Ok(plan) => plan,
            Err(error) => return Err((sink, error)),
        };
        let slot = self.free_slots.pop().expect("caller checked has_room");
        let ReadPlan {
            mut buffer,
            window_start,
            runs,
        } = plan;
        let mut pieces = 0;
        for (position_bytes, run_bytes, device_block) in runs {
            let Some(device_block) = device_block else {
                buffer[position_bytes..position_bytes + run_bytes].fill(0);
                continue;
            };
            // SAFETY: the view covers bytes of `buffer` disjoint from every other piece;
            // `buffer` stays in `self.slots[slot]` until every piece has come back.
            let view =
                unsafe { IoBuf::borrowed(buffer.as_mut_ptr().add(position_bytes), run_bytes) };
            self.waiting_requests
                .push_back(Request::read(slot as u64, device_block, view));
            pieces += 1;
        }
        let read = InFlightRead {
            sink,
            buffer,
            window_start,
            length_bytes: length_bytes as usize,
            pieces_outstanding: pieces,
            first_error: None,
        };
        self.slots[slot] = Some(read);
        if pieces == 0 {
            self.finish(slot);
        }
        Ok(())
    }

    /// Submits waiting requests while the device has room, then reaps completions,
    /// blocking for at least one when `block` is true and something is in flight.
    pub fn pump(&mut self, device: &mut dyn BlockDevice, block: bool) -> Result<(), DeviceError> {
        while let Some(request) = self.waiting_requests.pop_front() {
            if let Err(rejected) = device.submit(request) {
                if matches!(
                    rejected.error.kind,
                    flashpipe_device::DeviceErrorKind::QueueFull { .. }
                ) {
                    self.waiting_requests.push_front(rejected.request);
                    break;
                }
                self.piece_done(rejected.request.tag as usize, Err(rejected.error));
            }
        }
        let mut completions = std::mem::take(&mut self.completions);
        if block && device.in_flight() > 0 {
            device.wait_completions(&mut completions)?;
        } else {
            device.poll_completions(&mut completions);
        }
        for completion in completions.drain(..) {
            self.piece_done(completion.tag as usize, completion.status);
        }
        self.completions = completions;
        Ok(())
    }

    /// Runs every read in flight to its end.
    pub fn drain(&mut self, device: &mut dyn BlockDevice) -> Result<(), DeviceError> {
        while !self.is_idle() {
            self.pump(device, true)?;
        }
        Ok(())
    }

    fn piece_done(&mut self, slot: usize, status: Result<(), DeviceError>) {
        let read = self.slots[slot]
            .as_mut()
            .expect("completion for a live read");
        assert!(
            read.pieces_outstanding > 0,
            "read slot {slot} got an extra completion"
        );
        read.pieces_outstanding -= 1;
        if let (Err(error), None) = (status, &read.first_error) {
            read.first_error = Some(error);
        }
        if read.pieces_outstanding == 0 {
            self.finish(slot);
        }
    }

    fn finish(&mut self, slot: usize) {
        let read = self.slots[slot].take().expect("finishing a live read");
        self.free_slots.push(slot);
        let result = match read.first_error {
            Some(error) => Err(EngineError::Device(error)),
            None => Ok(ReadData {
                buffer: read.buffer,
                window_start: read.window_start,
                length_bytes: read.length_bytes,
            }),
        };
        read.sink.deliver(result);
    }
}

struct ReadPlan {
    buffer: IoBuf,
    window_start: usize,
    /// (position in buffer, bytes, first device block or None for a hole)
    runs: Vec<(usize, usize, Option<u64>)>,
}

fn plan_read(
    filesystem: &mut Filesystem,
    pool: &BufferPool,
    block_bytes: u64,
    file: FileId,
    offset_bytes: u64,
    length_bytes: u64,
) -> Result<ReadPlan, EngineError> {
    let aligned_start = offset_bytes / block_bytes * block_bytes;
    let aligned_end = (offset_bytes + length_bytes).div_ceil(block_bytes) * block_bytes;
    let span_bytes = aligned_end - aligned_start;
    if span_bytes > pool.buffer_size_bytes() as u64 {
        return Err(EngineError::ReadTooLarge {
            length_bytes,
            max_read_bytes: pool.buffer_size_bytes() as u64 - block_bytes,
        });
    }
    let runs = filesystem.block_map(file, offset_bytes, length_bytes)?;
    let mut buffer = pool.try_take()?;
    buffer.set_len(span_bytes as usize);
    let first_file_block = aligned_start / block_bytes;
    let runs = runs
        .into_iter()
        .map(|run| {
            let position = (run.first_file_block - first_file_block) * block_bytes;
            (
                position as usize,
                (run.block_count * block_bytes) as usize,
                run.first_device_block,
            )
        })
        .collect();
    Ok(ReadPlan {
        buffer,
        window_start: (offset_bytes - aligned_start) as usize,
        runs,
    })
}
