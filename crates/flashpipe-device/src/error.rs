//! Typed device errors. Every error names the device it came from.

use std::sync::Arc;

use crate::request::Request;

/// What went wrong, without the device's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceErrorKind {
    /// The request touches blocks past the end of the device.
    #[error("blocks {first_block}..{end_block} out of range: the device has {block_count} blocks")]
    OutOfRange {
        /// First block the request touches.
        first_block: u64,
        /// One past the last block the request touches.
        end_block: u64,
        /// Blocks on the device.
        block_count: u64,
    },
    /// The buffer's length is not a positive multiple of the block size, or its address
    /// is not aligned for direct I/O.
    #[error("misaligned request: {detail}")]
    Misaligned {
        /// Which rule the request broke.
        detail: String,
    },
    /// The device already holds `queue_depth` requests in flight.
    #[error("queue full: {queue_depth} requests already in flight")]
    QueueFull {
        /// The device's queue depth.
        queue_depth: u32,
    },
    /// The device could not carry out the request (an operating-system I/O error, or a
    /// failure no kind below names).
    #[error("I/O failed: {detail}")]
    IoFailed {
        /// The operating system's or the device's description.
        detail: String,
    },
    /// A read of `block` found more bit errors than the ECC corrects: its data is lost
    /// (never returned as good data).
    #[error("block {block}: uncorrectable read (data lost)")]
    Uncorrectable {
        /// The device block whose data is lost.
        block: u64,
    },
    /// A program or erase for `block` failed: the flash block holding it went bad.
    #[error("block {block}: a program or erase failed on a bad flash block")]
    BadBlock {
        /// The device block the failed program or erase was for.
        block: u64,
    },
    /// The operating system moved fewer bytes than the request holds (a file shorter
    /// than the device it was opened as).
    #[error("short {direction}: {moved_bytes} of {expected_bytes} bytes moved")]
    ShortTransfer {
        /// Read or write.
        direction: TransferDirection,
        /// Bytes moved.
        moved_bytes: u64,
        /// Bytes the request holds.
        expected_bytes: u64,
    },
    /// A simulated disk failed the request on purpose (its configured failure rate); the
    /// blocks are unchanged and a read's buffer is left as it was.
    #[error("injected {direction} failure at blocks {first_block}..{end_block}")]
    InjectedFault {
        /// Read or write.
        direction: TransferDirection,
        /// First block of the request.
        first_block: u64,
        /// One past its last block.
        end_block: u64,
    },
    /// The device has no free space to carry out writes (a flash translation layer whose
    /// garbage collection cannot make any).
    #[error("out of space: {detail}")]
    OutOfSpace {
        /// What the device holds and why no space can be made.
        detail: String,
    },
    /// The device cannot be opened or configured.
    #[error("cannot open: {detail}")]
    Open {
        /// Why.
        detail: String,
    },
    /// The device does not support this operation.
    #[error("unsupported operation: {operation}")]
    Unsupported {
        /// The operation's name.
        operation: &'static str,
    },
    /// A wait was asked for with no request in flight and nothing to reap.
    #[error("nothing in flight to wait for")]
    NothingInFlight,
    /// The simulated device crashed; requests in flight were lost.
    #[error("device crashed")]
    Crashed,
    /// The device was opened read-only and the request would change it.
    #[error("{operation} refused: the device is open read-only")]
    ReadOnly {
        /// The refused operation (write, trim, copy-by-reference).
        operation: &'static str,
    },
}

/// Which way a failed transfer moved data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferDirection {
    /// From the device into the buffer.
    Read,
    /// From the buffer onto the device.
    Write,
}

impl std::fmt::Display for TransferDirection {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            TransferDirection::Read => "read",
            TransferDirection::Write => "write",
        })
    }
}

/// An error from a device, naming it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("device {device}: {kind}")]
pub struct DeviceError {
    /// The device's name (a path, `ram0`, `sim3`, `stripe member 2 (b.img)`...).
    pub device: Arc<str>,
    /// What went wrong.
    pub kind: DeviceErrorKind,
}

impl DeviceError {
    /// An error of `kind` on `device`.
    pub fn new(device: &Arc<str>, kind: DeviceErrorKind) -> DeviceError {
        DeviceError {
            device: Arc::clone(device),
            kind,
        }
    }
}

/// A request the device refused at submission, handed back with its buffer.
#[derive(Debug)]
pub struct Rejected {
    /// The refused request, unchanged.
    pub request: Request,
    /// Why it was refused.
    pub error: DeviceError,
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "request tag {} rejected: {}",
            self.request.tag, self.error
        )
    }
}

impl std::error::Error for Rejected {}
