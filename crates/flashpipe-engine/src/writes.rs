//! The engine's write path: many writes in flight at once, each planned by the file
//! system ([`Filesystem::plan_write`]: space, targets, requests; whole blocks straight
//! from the client's buffer, no copy), its device requests issued together with the
//! other writes', and answered as soon as its own requests have completed
//! ([`Filesystem::finish_write`] installs its block pointers then). Batches overlap: the
//! engine plans and issues the next writes while the earlier ones are still in the
//! device queue, so the device never drains between batches.
//!
//! Ordering: a write that touches an FS block of a write in flight waits until those
//! writes have finished, and a write that must first read a partial edge block waits
//! until nothing at all is in flight (the file system reads it then); a read of a file
//! with a write in flight waits for that file's writes, and every other command (flushes,
//! changes of the name space) waits until no write is in flight, so each sees every
//! earlier write installed. Reads of other files run beside the writes: the engine routes
//! each device completion by its tag ([`is_write_tag`]). A device failure fails only the
//! write whose request failed: nothing of it is installed and its newly allocated blocks
//! are released.
//!
//! Checksums: the submitting thread computes the CRC32C of a zero-copy write's whole blocks
//! ([`checksums_for`], carried in `Submission::write_checksums`), so the engine thread only
//! plans and copies; the file system checks that they describe the buffer before using them.

use std::collections::VecDeque;

use flashpipe_device::{BlockDevice, Completion, DeviceError, DeviceErrorKind, IoBuf, Request};
use flashpipe_fs::{BlockChecksums, FileId, FsCore, PlannedWrite};

use crate::command::{Command, EngineError};
use crate::engine::WritePath;

/// The checksums of `command`'s whole FS blocks of `block_bytes`, computed on the calling
/// (submitting) thread, when `command` is a write the engine sends to the device straight
/// from its buffer (`write_path` zero-copy, offset on a block boundary, at least one
/// whole block); `None` otherwise (the engine checksums what it copies itself). A client
/// that checksums its write while the engine copies the previous one takes that pass off
/// the engine thread: the file system's floor is then one copy and one checksum on two
/// cores instead of both on one.
pub(crate) fn checksums_for(
    command: &Command,
    write_path: WritePath,
    block_bytes: u64,
) -> Option<BlockChecksums> {
    let Command::Write {
        offset_bytes, data, ..
    } = command
    else {
        return None;
    };
    let zero_copy = matches!(
        write_path,
        WritePath::Overlapped | WritePath::OverlappedAfterReads
    );
    let aligned = offset_bytes % block_bytes == 0;
    (zero_copy && aligned && data.len() as u64 >= block_bytes)
        .then(|| BlockChecksums::compute(data, block_bytes))
}

/// Where a finished write goes: the client's buffer back, or why it failed.
pub trait WriteSink {
    /// Delivers a finished write.
    fn deliver(self, result: Result<IoBuf, EngineError>);
}

/// The tag bit that marks a device request as a write's (reads use the low 63 bits).
const WRITE_TAG_BIT: u64 = 1 << 63;

/// True when a device request's tag is a write's (false: a read's).
pub fn is_write_tag(tag: u64) -> bool {
    tag & WRITE_TAG_BIT != 0
}

fn request_tag(slot: usize) -> u64 {
    WRITE_TAG_BIT | slot as u64
}

fn slot_of(tag: u64) -> usize {
    assert!(
        tag & WRITE_TAG_BIT != 0,
        "completion {tag:#x} is not a write's"
    );
    (tag & !WRITE_TAG_BIT) as usize
}

struct InFlightWrite<S> {
    sink: S,
    /// The file written.
    file: FileId,
    planned: PlannedWrite,
    /// (inode number, first FS block, end FS block) of the file blocks it writes.
    block_range: Option<(u64, u64, u64)>,
    requests_outstanding: usize,
    first_error: Option<DeviceError>,
}

/// Writes in flight, and their device requests waiting for room in the device queue.
pub struct WritesInFlight<S> {
    block_bytes: u64,
    slots: Vec<Option<InFlightWrite<S>>>,
    free_slots: Vec<usize>,
    bytes_in_flight: usize,
    bytes_limit: usize,
    waiting_requests: VecDeque<Request>,
}

impl<S: WriteSink> WritesInFlight<S> {
    /// An empty table for at most `write_limit` writes and `bytes_limit` bytes in flight
    /// at once (one write of any size may always start), on a file system of
    /// `block_bytes` blocks.
    pub fn new(write_limit: usize, bytes_limit: usize, block_bytes: u64) -> WritesInFlight<S> {
        assert!(write_limit > 0 && bytes_limit > 0 && block_bytes > 0);
        WritesInFlight {
            block_bytes,
            slots: (0..write_limit).map(|_| None).collect(),
            free_slots: (0..write_limit).rev().collect(),
            bytes_in_flight: 0,
            bytes_limit,
            waiting_requests: VecDeque::new(),
        }
    }

    /// True when no write is in flight.
    pub fn is_idle(&self) -> bool {
        self.free_slots.len() == self.slots.len()
    }

    /// True when another write can start.
    pub fn has_room(&self) -> bool {
        !self.free_slots.is_empty() && self.bytes_in_flight < self.bytes_limit
    }

    /// True when a write in flight writes `file`.
    pub fn writes_file(&self, file: FileId) -> bool {
        self.slots.iter().flatten().any(|write| write.file == file)
    }

    /// True when a write of `length_bytes` at `offset_bytes` into `file` touches an FS
    /// block of a write in flight.
    pub fn overlaps(&self, file: FileId, offset_bytes: u64, length_bytes: u64) -> bool {
        if length_bytes == 0 {
            return false;
        }
        let first = offset_bytes / self.block_bytes;
        let end = offset_bytes
            .saturating_add(length_bytes)
            .div_ceil(self.block_bytes);
        self.slots
            .iter()
            .flatten()
            .filter_map(|write| write.block_range)
            .any(|(inode, other_first, other_end)| {
                inode == file.0 && first < other_end && other_first < end
            })
    }

    /// Takes a planned write of `file` in flight: its requests wait for the next
    /// [`Self::submit_waiting`]. An empty write is finished and
    /// delivered at once.
    pub fn start(
        &mut self,
        filesystem: &mut FsCore,
        file: FileId,
        mut planned: PlannedWrite,
        sink: S,
    ) {
        let slot = self.free_slots.pop().expect("caller checked has_room");
        let operations = planned.take_operations();
        for operation in &operations {
            assert!(
                matches!(operation, flashpipe_device::Operation::Write { .. }),
                "a planned write issues writes only"
            );
        }
        let requests_outstanding = operations.len();
        self.waiting_requests
            .extend(operations.into_iter().map(|operation| Request {
                tag: request_tag(slot),
                operation,
            }));
        self.bytes_in_flight += planned.len();
        let block_range = planned.block_range();
        self.slots[slot] = Some(InFlightWrite {
            sink,
            file,
            planned,
            block_range,
            requests_outstanding,
            first_error: None,
        });
        if requests_outstanding == 0 {
            self.finish(filesystem, slot);
        }
    }

    /// Submits waiting requests while the device has room; a write whose last request the
    /// device refused is finished (failed) and delivered.
    pub fn submit_waiting(&mut self, filesystem: &mut FsCore, device: &mut dyn BlockDevice) {
        let mut finished = Vec::new();
        self.submit_waiting_requests(device, &mut finished);
        for slot in finished {
            self.finish(filesystem, slot);
        }
    }

    /// Takes one device completion of a write's request; a write whose requests are all
    /// back is finished (its block pointers installed) and delivered.
    pub fn complete(&mut self, filesystem: &mut FsCore, completion: Completion) {
        let Completion {
            tag,
            status,
            buffer,
        } = completion;
        let slot = slot_of(tag);
        if let Some(buffer) = buffer {
            self.write_mut(slot).planned.take_back(buffer);
        }
        if self.request_done(slot, status) {
            self.finish(filesystem, slot);
        }
    }

    /// Submits waiting requests until the device queue is full; a request the device
    /// refuses for another reason fails its write (the slot goes to `finished` when that
    /// was its last outstanding request).
    fn submit_waiting_requests(&mut self, device: &mut dyn BlockDevice, finished: &mut Vec<usize>) {
        while let Some(request) = self.waiting_requests.pop_front() {
            let Err(rejected) = device.submit(request) else {
                continue;
            };
            if matches!(rejected.error.kind, DeviceErrorKind::QueueFull { .. }) {
                self.waiting_requests.push_front(rejected.request);
                break;
            }
            let slot = slot_of(rejected.request.tag);
            if let Some(buffer) = rejected.request.into_buffer() {
                self.write_mut(slot).planned.take_back(buffer);
            }
            if self.request_done(slot, Err(rejected.error)) {
                finished.push(slot);
            }
        }
    }

    fn write_mut(&mut self, slot: usize) -> &mut InFlightWrite<S> {
        self.slots[slot]
            .as_mut()
            .expect("a request belongs to a live write")
    }

    /// Counts one of a write's requests done; true when it was the last one.
    fn request_done(&mut self, slot: usize, status: Result<(), DeviceError>) -> bool {
        let write = self.write_mut(slot);
        assert!(
            write.requests_outstanding > 0,
            "write slot {slot} got an extra completion"
        );
        write.requests_outstanding -= 1;
        if let (Err(error), None) = (status, &write.first_error) {
            write.first_error = Some(error);
        }
        write.requests_outstanding == 0
    }

    fn finish(&mut self, filesystem: &mut FsCore, slot: usize) {
        let write = self.slots[slot].take().expect("finishing a live write");
        assert_eq!(write.requests_outstanding, 0, "a write finished early");
        self.free_slots.push(slot);
        self.bytes_in_flight -= write.planned.len();
        let outcome = match write.first_error {
            Some(error) => Err(error),
            None => Ok(()),
        };
        let (buffer, result) = filesystem.finish_write(write.planned, outcome);
        write
            .sink
            .deliver(result.map(|()| buffer).map_err(EngineError::from));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(offset_bytes: u64, length_bytes: usize) -> Command {
        let mut data = IoBuf::zeroed(length_bytes);
        data.iter_mut()
            .enumerate()
            .for_each(|(index, byte)| *byte = index as u8);
        Command::Write {
            name: "f".to_string(),
            offset_bytes,
            data,
        }
    }

    #[test]
    fn an_aligned_zero_copy_write_is_checksummed_by_the_caller() {
        let command = write(8192, 3 * 4096 + 10);
        let checksums = checksums_for(&command, WritePath::Overlapped, 4096).expect("checksums");
        let Command::Write { data, .. } = &command else {
            unreachable!("built as a write")
        };
        assert_eq!(checksums, BlockChecksums::compute(data, 4096));
        assert_eq!(checksums.checksums().len(), 3, "whole blocks only");
        assert!(checksums_for(&command, WritePath::OverlappedAfterReads, 4096).is_some());
    }

    #[test]
    fn other_writes_and_commands_are_left_to_the_engine() {
        let unaligned = write(100, 3 * 4096);
        let short = write(0, 4095);
        let aligned = write(0, 4096);
        assert!(checksums_for(&unaligned, WritePath::Overlapped, 4096).is_none());
        assert!(checksums_for(&short, WritePath::Overlapped, 4096).is_none());
        assert!(checksums_for(&aligned, WritePath::OverlappedCopying, 4096).is_none());
        assert!(checksums_for(&aligned, WritePath::Batched, 4096).is_none());
        assert!(checksums_for(&Command::Flush, WritePath::Overlapped, 4096).is_none());
    }
}
