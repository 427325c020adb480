//! flashpipe-fs: the HWFS thesis's flat file system (000_8c31f0087b4e34a9.txt, ch. 2-3)
//! as software, crash-safe and large. The byte-level format is docs/format.md.
//!
//! Layout: two super block slots, then blocks allocated on demand for data, for each
//! file's single-indirect chain, and for the checkpoint (name table, inode table with 12
//! direct pointers per file, free list, and a map listing them). Names are looked up in
//! an in-memory hash index rebuilt from the name table at mount. Every metadata block
//! carries a CRC32C, and every block pointer carries the CRC32C of its data block, which
//! every read verifies ([`FileIoError::DataChecksumMismatch`]).
//!
//! Crash safety: everything is copy-on-write; a [`Filesystem::flush`] writes what changed
//! as one record of the metadata log (or, every so often, a new checkpoint of every
//! table) to blocks no durable commit uses, flushes, switches the super block slot and
//! flushes again; mount loads the checkpoint and replays the log ([`metadata_log`]).
//! After a crash at any instant a mount finds exactly the state of the last completed
//! flush (or of the flush in progress).
//!
//! The file system runs over any [`flashpipe_device::BlockDevice`] (striped set, file,
//! RAM disk, simulated disk); large transfers keep the device queue full. It reads time
//! only from the device's clock.
//!
//! Written by hand, not with a crate: no maintained crate implements this on-disk format
//! over a completion-based block device; `crc32c` supplies the checksums.
//!
//! ```
//! use flashpipe_device::RamDisk;
//! use flashpipe_fs::{Filesystem, FormatOptions};
//!
//! let disk = RamDisk::new("ram0", 4096, 1024, 32).unwrap();
//! let mut fs = Filesystem::format(Box::new(disk), &FormatOptions::default()).unwrap();
//! let file = fs.create("hello.txt").unwrap();
//! fs.write(file, 0, b"hello, flash").unwrap();
//! fs.flush().unwrap();
//! assert_eq!(&fs.read(file, 7, 5).unwrap()[..], b"flash");
//! ```

mod allocator;
pub mod attributes;
mod commit;
mod copy;
mod data;
pub mod error;
mod filesystem;
mod findings;
mod flash_layout;
mod flash_log;
mod flash_pages;
mod fs_core;
pub mod fsck;
mod image;
mod io;
pub mod layout;
pub mod metadata_log;
mod name;
mod plan;
mod read_plan;
pub mod shared;
mod staged_write;
mod state;

pub use attributes::{AttributeProblem, FileAttributes, FileOwner};
pub use copy::{CopyMethod, CopyReport};
pub use data::MappedRun;
pub use error::{
    is_crash, CopyError, FileIoError, FlushError, FormatError, FsckError, MountError,
    NamespaceError, SetAttributesError, StoreIdentityError,
};
pub use filesystem::Filesystem;
pub use findings::{DamagedSlot, LogDamage};
pub use fs_core::store_identity_text;
pub use fs_core::{
    CommitPolicy, FileId, FileStat, FlashSpace, FormatOptions, FsCore, FsStats, MetadataLogFill,
};
pub use fsck::{
    fsck, fsck_with_options, Finding, FsckOptions, FsckReport, LostFile, LostFileOutcome,
    SlotFallback, Structure,
};
pub use io::MAX_REQUEST_BYTES;
pub use name::{name_problem, new_name_problem};
pub use read_plan::{read_span_bytes, touching_group, ReadCheck, ReadPiece, ReadPlan};
pub use staged_write::{BlockChecksums, PlannedWrite, WriteCopy};
