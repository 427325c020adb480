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
    /// The device could not carry out the request (an I/O error, an injected fault).
    #[error("I/O failed: {detail}")]
    IoFailed {
        /// The operating system's or the simulator's description.
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
