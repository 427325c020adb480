//! Tagged requests, completions, and the [`BlockDevice`] trait every backend implements.
//!
//! A client submits [`Request`]s, each with its own tag and (for reads and writes) its
//! own [`IoBuf`]. The device owns the buffer until the request completes; the
//! [`Completion`] hands it back with the tag and a status. Completions may arrive in
//! any order. A device holds at most `queue_depth` requests in flight and refuses more
//! with [`DeviceErrorKind::QueueFull`].

use std::sync::Arc;

use crate::buffer::{BufferPool, IoBuf, IO_ALIGNMENT_BYTES};
use crate::clock::Clock;
use crate::error::{DeviceError, DeviceErrorKind, Rejected};

/// The client's name for a request, echoed in its completion.
pub type Tag = u64;

/// The largest queue depth any backend accepts.
pub const MAX_QUEUE_DEPTH: u32 = 4096;

/// What a request asks the device to do.
#[derive(Debug)]
pub enum Operation {
    /// Read `buffer.len() / block_size` blocks starting at `first_block` into `buffer`.
    Read {
        /// First block to read.
        first_block: u64,
        /// Destination; its length sets how many blocks are read.
        buffer: IoBuf,
    },
    /// Write `buffer` to the blocks starting at `first_block`.
    Write {
        /// First block to write.
        first_block: u64,
        /// Source; its length sets how many blocks are written.
        buffer: IoBuf,
    },
    /// Make every write completed before this request was submitted durable.
    Flush,
    /// Declare `block_count` blocks from `first_block` unused; later reads of them
    /// return unspecified data (zeros on every backend we have).
    Trim {
        /// First block to trim.
        first_block: u64,
        /// How many blocks.
        block_count: u64,
    },
    /// Make `block_count` blocks from `destination_first_block` read as the blocks from
    /// `source_first_block` read now, without moving their data (the memory-copy thesis's
    /// copy by reference). Overlapping ranges behave as memmove; a later write to either
    /// side leaves the other intact. Durable like a write: after a later flush. Only
    /// devices that remap (the FTL) accept it; the others refuse it at submit with
    /// [`DeviceErrorKind::Unsupported`], so a caller never gets a silent byte copy.
    CopyByReference {
        /// First block copied from.
        source_first_block: u64,
        /// First block copied to.
        destination_first_block: u64,
        /// How many blocks.
        block_count: u64,
    },
}

impl Operation {
    /// The operation's name, for errors and traces.
    pub fn name(&self) -> &'static str {
        match self {
            Operation::Read { .. } => "read",
            Operation::Write { .. } => "write",
            Operation::Flush => "flush",
            Operation::Trim { .. } => "trim",
            Operation::CopyByReference { .. } => "copy-by-reference",
        }
    }
}

/// A tagged request.
#[derive(Debug)]
pub struct Request {
    /// The client's tag, returned in the completion.
    pub tag: Tag,
    /// What to do.
    pub operation: Operation,
}

impl Request {
    /// A read request.
    pub fn read(tag: Tag, first_block: u64, buffer: IoBuf) -> Request {
        Request {
            tag,
            operation: Operation::Read {
                first_block,
                buffer,
            },
        }
    }

    /// A write request.
    pub fn write(tag: Tag, first_block: u64, buffer: IoBuf) -> Request {
        Request {
            tag,
            operation: Operation::Write {
                first_block,
                buffer,
            },
        }
    }

    /// A flush request.
    pub fn flush(tag: Tag) -> Request {
        Request {
            tag,
            operation: Operation::Flush,
        }
    }

    /// A trim request.
    pub fn trim(tag: Tag, first_block: u64, block_count: u64) -> Request {
        Request {
            tag,
            operation: Operation::Trim {
                first_block,
                block_count,
            },
        }
    }

    /// A copy-by-reference request (see [`Operation::CopyByReference`]).
    pub fn copy_by_reference(
        tag: Tag,
        source_first_block: u64,
        destination_first_block: u64,
        block_count: u64,
    ) -> Request {
        Request {
            tag,
            operation: Operation::CopyByReference {
                source_first_block,
                destination_first_block,
                block_count,
            },
        }
    }

    /// Takes the buffer out of a read or write request.
    pub fn into_buffer(self) -> Option<IoBuf> {
        match self.operation {
            Operation::Read { buffer, .. } | Operation::Write { buffer, .. } => Some(buffer),
            Operation::Flush | Operation::Trim { .. } | Operation::CopyByReference { .. } => None,
        }
    }
}

/// The device's answer to one request.
#[derive(Debug)]
pub struct Completion {
    /// The request's tag.
    pub tag: Tag,
    /// Success, or what failed.
    pub status: Result<(), DeviceError>,
    /// The request's buffer, handed back (reads: filled with the data).
    pub buffer: Option<IoBuf>,
}

/// Static facts about a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Name used in errors and reports.
    pub name: Arc<str>,
    /// Size of one block; requests address and move whole blocks.
    pub block_size_bytes: u32,
    /// Number of blocks.
    pub block_count: u64,
    /// Most requests in flight at once.
    pub queue_depth: u32,
}

impl DeviceInfo {
    /// Capacity in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.block_count * u64::from(self.block_size_bytes)
    }

    /// Checks a request against the device's geometry: block range inside the device,
    /// buffer length a positive multiple of the block size, buffer address aligned.
    pub fn validate(&self, operation: &Operation) -> Result<(), DeviceError> {
        let (first_block, block_count) = match operation {
            Operation::Read {
                first_block,
                buffer,
            }
            | Operation::Write {
                first_block,
                buffer,
            } => (*first_block, self.buffer_block_count(buffer)?),
            Operation::Trim {
                first_block,
                block_count,
            } => (*first_block, *block_count),
            Operation::CopyByReference {
                source_first_block,
                destination_first_block,
                block_count,
            } => {
                self.check_range(*source_first_block, *block_count)?;
                (*destination_first_block, *block_count)
            }
            Operation::Flush => return Ok(()),
        };
        self.check_range(first_block, block_count)
    }

    /// Refuses a copy-by-reference request with [`DeviceErrorKind::Unsupported`] and
    /// passes every other request through: what a device that cannot remap blocks calls
    /// first in `submit`.
    pub fn refuse_copy_by_reference(&self, request: Request) -> Result<Request, Rejected> {
        if !matches!(request.operation, Operation::CopyByReference { .. }) {
            return Ok(request);
        }
        Err(Rejected {
            request,
            error: DeviceError::new(
                &self.name,
                DeviceErrorKind::Unsupported {
                    operation: "copy-by-reference",
                },
            ),
        })
    }

    fn check_range(&self, first_block: u64, block_count: u64) -> Result<(), DeviceError> {
        let end_block = first_block.saturating_add(block_count);
        if end_block > self.block_count {
            return Err(DeviceError::new(
                &self.name,
                DeviceErrorKind::OutOfRange {
                    first_block,
                    end_block,
                    block_count: self.block_count,
                },
            ));
        }
        Ok(())
    }

    fn buffer_block_count(&self, buffer: &IoBuf) -> Result<u64, DeviceError> {
        let block_size_bytes = self.block_size_bytes as usize;
        if buffer.is_empty() || buffer.len() % block_size_bytes != 0 {
            return Err(self.misaligned(format!(
                "buffer of {} bytes is not a positive multiple of the {block_size_bytes}-byte block",
                buffer.len()
            )));
        }
        if buffer.as_ptr() as usize % IO_ALIGNMENT_BYTES.min(block_size_bytes.max(512)) != 0 {
            return Err(self.misaligned("buffer address is not aligned".to_string()));
        }
        Ok((buffer.len() / block_size_bytes) as u64)
    }

    fn misaligned(&self, detail: String) -> DeviceError {
        DeviceError::new(&self.name, DeviceErrorKind::Misaligned { detail })
    }

    /// Admits `request` into a device holding `in_flight` requests: hands it back with
    /// [`DeviceErrorKind::QueueFull`] when the queue is full, or with the error of
    /// [`DeviceInfo::validate`] when it does not fit the geometry.
    #[inline]
    pub fn admit(&self, in_flight: usize, request: Request) -> Result<Request, Rejected> {
        if in_flight >= self.queue_depth as usize {
            return Err(self.queue_full(request));
        }
        match self.validate(&request.operation) {
            Ok(()) => Ok(request),
            Err(error) => Err(Rejected { request, error }),
        }
    }

    /// The error of a wait with no request in flight.
    pub fn nothing_in_flight(&self) -> DeviceError {
        DeviceError::new(&self.name, DeviceErrorKind::NothingInFlight)
    }

    /// The queue-full rejection for `request`.
    pub fn queue_full(&self, request: Request) -> Rejected {
        Rejected {
            request,
            error: DeviceError::new(
                &self.name,
                DeviceErrorKind::QueueFull {
                    queue_depth: self.queue_depth,
                },
            ),
        }
    }
}

/// A tagged, completion-based block device.
///
/// Contract, shared by every backend:
/// - `submit` either accepts the request (it will complete exactly once, through
///   `poll_completions` or `wait_completions`) or hands it back in [`Rejected`];
/// - at most `info().queue_depth` requests are in flight (accepted, not yet reaped);
/// - a read after a completed write of the same blocks returns the written data;
/// - a completed flush makes every write completed before the flush was submitted
///   durable (it survives a crash of a simulated device);
/// - `wait_completions` blocks (in real or virtual time) until at least one completion
///   is ready and fails with [`DeviceErrorKind::NothingInFlight`] when none can come.
pub trait BlockDevice: Send {
    /// The device's geometry and name.
    fn info(&self) -> &DeviceInfo;

    /// The clock in which this device's requests take time.
    fn clock(&self) -> Arc<dyn Clock>;

    /// Queues a request. It may not reach the hardware until the next poll or wait.
    fn submit(&mut self, request: Request) -> Result<(), Rejected>;

    /// Moves every ready completion into `completions` without blocking; returns how
    /// many it moved. Also pushes queued submissions to the hardware.
    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize;

    /// Like `poll_completions`, but blocks until at least one completion is ready.
    fn wait_completions(&mut self, completions: &mut Vec<Completion>)
        -> Result<usize, DeviceError>;

    /// Requests accepted and not yet reaped.
    fn in_flight(&self) -> usize;

    /// Whether the device carries out [`Operation::CopyByReference`] (by remapping, never
    /// by moving bytes); a device that answers false refuses it at submit with
    /// [`DeviceErrorKind::Unsupported`].
    fn copies_by_reference(&self) -> bool {
        false
    }

    /// Copies by reference work only between blocks whose distance is a multiple of
    /// this many blocks (a stripe: stripe unit x members, so that every block keeps its
    /// member); 1 for devices without such a rule.
    fn copy_alignment_blocks(&self) -> u64 {
        1
    }

    /// The request size the device serves best (its page, for a device that merges
    /// smaller requests into pages); never below the block size, a multiple of it.
    fn preferred_block_size_bytes(&self) -> u32 {
        self.info().block_size_bytes
    }

    /// Lets requests whose buffers lie in `pool`'s slots (pool buffers and views of them)
    /// use the kernel's registered buffers where the device has them (the file device on
    /// io_uring: no page pinning per request); any other device accepts and ignores it.
    /// Needs an idle device. An error leaves every request on plain buffers, which still
    /// work.
    fn register_buffer_pool(&mut self, pool: &BufferPool) -> Result<(), DeviceError> {
        let _ = pool;
        Ok(())
    }
}

impl<D: BlockDevice + ?Sized> BlockDevice for Box<D> {
    fn info(&self) -> &DeviceInfo {
        (**self).info()
    }
    fn clock(&self) -> Arc<dyn Clock> {
        (**self).clock()
    }
    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        (**self).submit(request)
    }
    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        (**self).poll_completions(completions)
    }
    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        (**self).wait_completions(completions)
    }
    fn in_flight(&self) -> usize {
        (**self).in_flight()
    }
    fn copies_by_reference(&self) -> bool {
        (**self).copies_by_reference()
    }
    fn copy_alignment_blocks(&self) -> u64 {
        (**self).copy_alignment_blocks()
    }
    fn preferred_block_size_bytes(&self) -> u32 {
        (**self).preferred_block_size_bytes()
    }
    fn register_buffer_pool(&mut self, pool: &BufferPool) -> Result<(), DeviceError> {
        (**self).register_buffer_pool(pool)
    }
}

/// Checks a queue depth asked for by a user: 1..=[`MAX_QUEUE_DEPTH`].
pub fn check_queue_depth(name: &Arc<str>, queue_depth: u32) -> Result<(), DeviceError> {
    if queue_depth == 0 || queue_depth > MAX_QUEUE_DEPTH {
        return Err(DeviceError::new(
            name,
            DeviceErrorKind::Open {
                detail: format!("queue depth {queue_depth} outside 1..={MAX_QUEUE_DEPTH}"),
            },
        ));
    }
    Ok(())
}
