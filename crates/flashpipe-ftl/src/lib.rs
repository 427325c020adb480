//! flashpipe's host flash translation layer (minFlash, seed 004, sections I-II: flash
//! management moved out of the drive into host software).
//!
//! Over the NAND model of `flashpipe-flash` it provides:
//! - a page-level logical-to-physical map with configurable over-provisioning, writes
//!   rotating over dies so that consecutive pages land on different channels;
//! - a crash-safe map: each page's spare area carries its logical page, version and
//!   program sequence; trims and copies go to log pages; checkpoints bound the replay;
//!   mount rebuilds the state of every acknowledged operation ([`mount`]);
//! - garbage collection with greedy or cost-benefit victims, in the background and on
//!   demand, paced so that a host write waits for at most K migrations and one erase
//!   ([`pacing`]), and statistics ([`FtlStats`]);
//! - dynamic wear leveling (least-worn free block first) and static wear leveling;
//! - bad blocks: factory marks read at format, blocks failing a program or erase
//!   retired and their data rescued, uncorrectable reads reported per logical block;
//! - TRIM and copy by reference (identities with reference counts);
//! - [`flashpipe_device::BlockDevice`], so the file system and everything above run on
//!   emulated flash in the model's virtual time.
//!
//! Written by hand: no maintained crate implements an FTL over a raw NAND interface
//! (SPDK's FTL is C and has neither wear leveling nor bad-block handling).
//! Design, invariants and the on-flash formats: docs/ftl.md.

pub mod backend;
pub mod device;
pub mod ftl;
pub mod layout;
pub mod mount;
pub mod pacing;
pub mod precondition;
pub mod raw_pages;
pub mod replay;
pub mod sectors;
pub mod shared;
pub mod stats;

pub use backend::{FlashBackend, PowerCutFlash, PowerCutReport, SharedFlash};
pub use ftl::{Ftl, FtlOptions, VictimPolicy};
pub use mount::MountReport;
pub use precondition::{
    precondition, write_distinct_pages, PreconditionError, PreconditionMethod, PreconditionOptions,
    PreconditionReport,
};
pub use raw_pages::{RawPageCounters, RawPageDevice};
pub use shared::SharedFtl;
pub use stats::FtlStats;

use flashpipe_device::DeviceError;

/// Why an FTL operation failed.
#[derive(Debug, thiserror::Error)]
pub enum FtlError {
    /// No intact checkpoint was found: the array was never formatted.
    #[error("no FTL checkpoint found: format the array first")]
    NotFormatted,
    /// The array cannot carry this FTL.
    #[error("unsupported array: {detail}")]
    Unsupported {
        /// Why.
        detail: String,
    },
    /// An option is out of range.
    #[error("invalid FTL option: {detail}")]
    InvalidOption {
        /// What is wrong.
        detail: String,
    },
    /// Too few good blocks for the reserves.
    #[error("only {good_blocks} good blocks: too few for the FTL's reserves")]
    TooSmall {
        /// Good blocks found.
        good_blocks: u32,
    },
    /// Recovery found a logical page whose data is nowhere on flash (a bug or damage).
    #[error("logical block {logical}: version {version} is not on flash")]
    MapLost {
        /// The logical page.
        logical: u64,
        /// The version the map names.
        version: u64,
    },
    /// A log record points outside the device.
    #[error("log record {sequence} is out of range")]
    CorruptRecord {
        /// Its sequence.
        sequence: u64,
    },
    /// A request reaches past the device.
    #[error("out of range: {detail}")]
    OutOfRange {
        /// What.
        detail: String,
    },
    /// The host queue is full.
    #[error("queue full")]
    QueueFull,
    /// A blocking call needs no other request in flight.
    #[error("other requests are in flight")]
    Busy,
    /// The device failed the request.
    #[error(transparent)]
    Device(#[from] DeviceError),
}
