//! Typed errors, one enum per operation area, each wrapping the device's error.
//!
//! Areas: [`FormatError`] (mkfs), [`MountError`] (mount), [`NamespaceError`] (create,
//! open, delete, rename, stat), [`FileIoError`] (read, write, truncate), [`FlushError`]
//! (flush, unmount) and [`FsckError`] (fsck). An operation that fails with anything but a
//! device error changes nothing.

use flashpipe_device::{DeviceError, DeviceErrorKind};

use crate::attributes::AttributeProblem;
use crate::findings::{DamagedSlot, Finding};

/// mkfs failed.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The block size is not a power of two in 4 KiB..=1 MiB or not a multiple of the
    /// device's block size.
    #[error("block size {fs_block_size_bytes} bytes is not a power of two from 4 KiB to 1 MiB that is a multiple of the device block size {device_block_size_bytes}")]
    BadBlockSize {
        /// Requested FS block size.
        fs_block_size_bytes: u32,
        /// The device's block size.
        device_block_size_bytes: u32,
    },
    /// The device holds fewer FS blocks than a file system needs.
    #[error("device of {device_size_bytes} bytes is too small: a file system needs at least {minimum_size_bytes} bytes")]
    DeviceTooSmall {
        /// Device capacity.
        device_size_bytes: u64,
        /// Smallest usable capacity at this block size.
        minimum_size_bytes: u64,
    },
    /// The store identity asked for is all zero, which means none.
    #[error("a store identity of all zero bytes means none: give a non-zero identity or none")]
    ZeroStoreIdentity,
    /// The flash-aware layout cannot be laid over this device's geometry.
    #[error("the flash-aware layout does not fit this device: {detail}")]
    FlashGeometry {
        /// What does not fit, and what to do.
        detail: String,
    },
    /// The device failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// The store identity could not be set; nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum StoreIdentityError {
    /// All zero bytes mean no identity.
    #[error("a store identity of all zero bytes means none: give a non-zero identity")]
    Zero,
    /// The file system is mounted read-only.
    #[error("the file system is mounted read-only, so its store identity cannot be set; open the store read-write")]
    ReadOnly,
    /// An earlier device failure left the mount unusable.
    #[error("the file system is unusable after an earlier device failure ({reason}); remount it")]
    Unusable {
        /// What failed.
        reason: String,
    },
    /// The image already belongs to another store.
    #[error("the file system belongs to store {current}, not {requested}: the devices hold another store's file system; check the devices the store file names")]
    Different {
        /// The identity the image holds.
        current: String,
        /// The identity asked for.
        requested: String,
    },
}

/// Mount failed; nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// Neither super block slot carries the magic.
    #[error("not a flashpipe file system: no FLASHPFS super block in block 0 or 1")]
    NotFormatted,
    /// Formatted by a newer version of flashpipe.
    #[error("the store was formatted with format version {found}; this flashpipe reads version {supported} and older: upgrade flashpipe")]
    NewerVersion {
        /// Version found on disk.
        found: u32,
        /// Newest version this code reads.
        supported: u32,
    },
    /// The device is smaller than the file system recorded at mkfs, or its block size
    /// does not divide the FS block size.
    #[error("wrong device: the file system needs {expected_size_bytes} bytes in blocks dividing {fs_block_size_bytes} bytes; the device has {device_size_bytes} bytes in {device_block_size_bytes}-byte blocks")]
    WrongDeviceSize {
        /// Size the file system spans.
        expected_size_bytes: u64,
        /// FS block size recorded at mkfs.
        fs_block_size_bytes: u32,
        /// The device's capacity.
        device_size_bytes: u64,
        /// The device's block size.
        device_block_size_bytes: u32,
    },
    /// A super block slot is damaged while the other is valid. The damaged slot may
    /// hold the newest commit, so the mount does not fall back to the other slot on its
    /// own: `flashpipe fsck` tells what a fallback loses, `flashpipe fsck --repair` does
    /// it. Nothing was written.
    #[error("{}; nothing was written. The mount does not fall back on its own: `flashpipe fsck` tells what falling back to commit {} loses, `flashpipe fsck --repair` does it", .damage.describe(), .damage.fallback_sequence)]
    DamagedSuperBlock {
        /// The damaged slot and the commit a fallback would use.
        damage: Box<DamagedSlot>,
    },
    /// Metadata is damaged or inconsistent; `findings` lists every problem seen. Nothing
    /// was written; `fsck --repair` salvages every file it can still read.
    #[error("corrupted metadata: {} (and {} more finding(s)); nothing was written: run `flashpipe fsck` to list the damage and `flashpipe fsck --repair` to salvage every file that can still be read", findings[0], findings.len() - 1)]
    Corrupt {
        /// Every problem found (at least one).
        findings: Vec<Finding>,
    },
    /// The device failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// A name-level operation failed; nothing changed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NamespaceError {
    /// The name breaks the rules: UTF-8, 1..=255 bytes, no '/' or NUL.
    #[error("bad file name {name:?}: {reason}")]
    BadName {
        /// The name as given.
        name: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// No file has this name.
    #[error("no such file: {name:?}")]
    NotFound {
        /// The name looked up.
        name: String,
    },
    /// A file with this name exists already.
    #[error("file exists: {name:?}")]
    Exists {
        /// The name.
        name: String,
    },
    /// The file handle does not name a live file (deleted, or never created).
    #[error("stale file handle {file_id}")]
    StaleHandle {
        /// The handle.
        file_id: u64,
    },
    /// Not enough free blocks to record another file at the next flush.
    #[error("no space left: the next checkpoint needs {needed_blocks} free blocks, {free_blocks} are free")]
    NoSpace {
        /// Blocks the change would need.
        needed_blocks: u64,
        /// Blocks free.
        free_blocks: u64,
    },
    /// An earlier device failure (a flush, or a write over blocks written since the last flush) left this mount unusable; remount.
    #[error("file system unusable after an earlier failure ({reason}); unmount and mount again")]
    Unusable {
        /// The earlier failure.
        reason: String,
    },
    /// The file system is mounted read-only; nothing changed.
    #[error("{operation} refused: the file system is mounted read-only; nothing changed")]
    ReadOnly {
        /// The refused operation (create, delete, rename, copy).
        operation: &'static str,
    },
}

/// A read, write or truncate failed. A device error may leave a write's target bytes
/// partly written (never other files, never flushed state); every other error changes
/// nothing.
#[derive(Debug, thiserror::Error)]
pub enum FileIoError {
    /// The file handle does not name a live file.
    #[error("stale file handle {file_id}")]
    StaleHandle {
        /// The handle.
        file_id: u64,
    },
    /// The read extends past the end of the file.
    #[error("read of {length_bytes} bytes at offset {offset_bytes} goes past the end of the {size_bytes}-byte file")]
    ReadPastEnd {
        /// Requested offset.
        offset_bytes: u64,
        /// Requested length.
        length_bytes: u64,
        /// File size.
        size_bytes: u64,
    },
    /// The file would exceed the file system's capacity.
    #[error("file would grow to {requested_size_bytes} bytes; the file system holds at most {limit_size_bytes}")]
    FileTooLarge {
        /// Size the operation asked for.
        requested_size_bytes: u64,
        /// Largest possible file.
        limit_size_bytes: u64,
    },
    /// Not enough free blocks (ENOSPC).
    #[error("no space left: the operation needs {needed_blocks} free blocks (checkpoint reserve included), {free_blocks} are free")]
    NoSpace {
        /// Blocks the operation would need.
        needed_blocks: u64,
        /// Blocks free.
        free_blocks: u64,
    },
    /// The destination buffer does not suit a direct read.
    #[error("bad buffer: {detail}")]
    BadBuffer {
        /// What is wrong.
        detail: String,
    },
    /// An earlier device failure (a flush, or a write over blocks written since the last flush) left this mount unusable; remount.
    #[error("file system unusable after an earlier failure ({reason}); unmount and mount again")]
    Unusable {
        /// The earlier failure.
        reason: String,
    },
    /// A data block read back does not match the CRC32C its block pointer carries: the
    /// block was damaged on the device. No bytes of it are handed out.
    #[error("data checksum mismatch in file {file_name:?} at byte offset {offset_bytes} (FS block {fs_block}): stored {stored_checksum:#010x}, computed {computed_checksum:#010x}; the block is damaged")]
    DataChecksumMismatch {
        /// The file's name.
        file_name: String,
        /// Offset in the file of the damaged block's first byte.
        offset_bytes: u64,
        /// The FS block that holds it.
        fs_block: u64,
        /// The checksum its block pointer carries.
        stored_checksum: u32,
        /// The checksum of what was read.
        computed_checksum: u32,
    },
    /// The file system is mounted read-only; nothing changed.
    #[error("{operation} refused: the file system is mounted read-only; nothing changed")]
    ReadOnly {
        /// The refused operation (write, truncate, copy).
        operation: &'static str,
    },
    /// The device failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// A copy of a file range failed. [`CopyError::NotByReference`] and errors found before
/// any data moved change nothing; a device failure or a failed edge write after the whole
/// blocks were remapped may leave the destination range partly copied (never the source,
/// never flushed state).
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// Asked for a copy by reference that cannot be one; nothing changed.
    #[error("cannot copy by reference: {reason}")]
    NotByReference {
        /// Why (device without remapping, offsets of different phase).
        reason: String,
    },
    /// A name-level problem (source missing, destination exists).
    #[error(transparent)]
    Namespace(#[from] NamespaceError),
    /// Reading the source or writing the destination failed.
    #[error(transparent)]
    Io(#[from] FileIoError),
}

/// A flush (commit) failed. After a device error the mount is unusable and the on-disk
/// state is the previous commit (or this one if it reached the device).
#[derive(Debug, thiserror::Error)]
pub enum FlushError {
    /// Not enough free blocks to write the checkpoint; nothing changed and the mount stays
    /// usable (the operations keep two checkpoints' worth free, so this takes a disk
    /// that was filled to the last block by other means).
    #[error("no space left for the checkpoint: {needed_blocks} blocks needed, {free_blocks} free; nothing changed")]
    NoSpace {
        /// Blocks the checkpoint needs.
        needed_blocks: u64,
        /// Blocks free.
        free_blocks: u64,
    },
    /// An earlier device failure (a flush, or a write over blocks written since the last flush) left this mount unusable; remount.
    #[error("file system unusable after an earlier failure ({reason}); unmount and mount again")]
    Unusable {
        /// The earlier failure.
        reason: String,
    },
    /// The device failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// fsck could not run at all (its findings are reported in [`crate::FsckReport`], not
/// here).
#[derive(Debug, thiserror::Error)]
pub enum FsckError {
    /// Formatted by a newer version; fsck does not judge a format it does not know.
    #[error("the store was formatted with format version {found}; this flashpipe checks version {supported} and older")]
    NewerVersion {
        /// Version found on disk.
        found: u32,
        /// Newest version this code reads.
        supported: u32,
    },
    /// The device is smaller than the file system.
    #[error("wrong device: the file system needs {expected_size_bytes} bytes; the device has {device_size_bytes}")]
    WrongDeviceSize {
        /// Size the file system spans.
        expected_size_bytes: u64,
        /// The device's capacity.
        device_size_bytes: u64,
    },
    /// Writing the repair failed.
    #[error("repair failed: {0}")]
    RepairFailed(#[from] FlushError),
    /// The device failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// True when `error` says a simulated device crashed.
pub fn is_crash(error: &DeviceError) -> bool {
    error.kind == DeviceErrorKind::Crashed
}

/// Setting a file's attributes failed; nothing changed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SetAttributesError {
    /// The file cannot be changed: no such file, a read-only mount, an unusable mount.
    #[error(transparent)]
    Namespace(#[from] NamespaceError),
    /// The attributes asked for cannot be stored (a mode with bits outside 0o7777).
    #[error("attributes refused: {0}; nothing changed")]
    Bad(#[from] AttributeProblem),
}
