//! flashpipe's device layer: tagged, completion-based block devices.
//!
//! Everything in flashpipe stands on [`BlockDevice`]: a client submits tagged
//! [`Request`]s with their own aligned [`IoBuf`]s, up to a queue depth, and reaps
//! [`Completion`]s (tag, status, buffer) in any order. Backends:
//! - [`RamDisk`]: memory (the HWFS thesis's RAM Disk);
//! - `file`: files and block devices through io_uring with `O_DIRECT`, falling back to a
//!   thread pool with `pread`/`pwrite` where the kernel refuses;
//! - `sim`: a simulated disk in virtual time with seeded faults and crashes.
//!
//! A [`BufferPool`] can live in a memfd region of `flashpipe-shm`
//! ([`BufferPool::in_shared_memory`]), through which a server hands buffers to client
//! processes by reference; the regions, descriptor passing and rings live in that crate.
//!
//! Time comes from the device's [`Clock`]: real for real devices, virtual for simulated
//! ones. Layers above never read the wall clock themselves.

pub mod batch;
pub mod buffer;
pub mod conformance;
pub mod error;
pub mod file;
pub mod paced;
pub mod ram;
pub mod request;
pub mod sim;
pub mod split;

/// Clocks live in flashpipe-base (the leaf every layer shares); re-exported at their old path.
pub use flashpipe_base::clock;
/// The seeded generator lives in flashpipe-base; re-exported at its old path.
pub use flashpipe_base::random;

pub use batch::{hand_over, run_batch, run_one, wait_in_steps};
pub use buffer::{BufferPool, IoBuf, PoolExhausted, IO_ALIGNMENT_BYTES};
pub use clock::{Clock, RealClock, VirtualClock};
pub use error::{DeviceError, DeviceErrorKind, Rejected, TransferDirection};
pub use paced::{LagReport, PacedDevice};
pub use ram::RamDisk;
pub use random::SplitMix64;
pub use request::{BlockDevice, Completion, DeviceInfo, Operation, Request, Tag, MAX_QUEUE_DEPTH};
pub use split::{NotAView, SplitBuffer, ViewRefused};
