//! The synchronous file system: a [`FsCore`] and the device it runs on, held together
//! and driven from one thread, each operation run to its end before it returns (mkfs,
//! fsck, the CLI's offline commands, tests). The core's state-only methods (create,
//! open, stat, list, rename, delete, ...) are reached through `Deref`; the operations
//! that do I/O are here, each the core's on this file system's device (fsck of the
//! mounted image is in [`crate::fsck`], which nothing imports).
//!
//! The engine does not use this wrapper to run: it takes the two apart
//! ([`Filesystem::into_parts`]), owns the device, keeps requests in flight on it, and
//! puts them back together when it stops ([`Filesystem::from_parts`]).

use std::ops::{Deref, DerefMut};

use flashpipe_device::{BlockDevice, IoBuf};

use crate::copy::{CopyMethod, CopyReport};
use crate::error::{CopyError, FileIoError, FlushError, FormatError, MountError};
use crate::fs_core::{FileId, FormatOptions, FsCore};

/// A mounted file system with its device.
pub struct Filesystem {
    pub(crate) core: FsCore,
    pub(crate) device: Box<dyn BlockDevice>,
}

impl Filesystem {
    /// Formats `device` (mkfs) and returns it mounted. Everything on it is lost.
    pub fn format(
        mut device: Box<dyn BlockDevice>,
        options: &FormatOptions,
    ) -> Result<Filesystem, FormatError> {
        let core = FsCore::format(&mut *device, options)?;
        Ok(Filesystem { core, device })
    }

    /// Formats `device` in the flash-aware layout ([`FsCore::format_flash_aware`]).
    pub fn format_flash_aware(
        mut device: Box<dyn BlockDevice>,
        options: &FormatOptions,
        pages_per_erase_block: u64,
    ) -> Result<Filesystem, FormatError> {
        let core = FsCore::format_flash_aware(&mut *device, options, pages_per_erase_block)?;
        Ok(Filesystem { core, device })
    }

    /// Mounts the file system on `device` ([`FsCore::mount`]).
    pub fn mount(mut device: Box<dyn BlockDevice>) -> Result<Filesystem, MountError> {
        let core = FsCore::mount(&mut *device)?;
        Ok(Filesystem { core, device })
    }

    /// Mounts the file system on `device` for reading only
    /// ([`FsCore::mount_read_only`]).
    pub fn mount_read_only(mut device: Box<dyn BlockDevice>) -> Result<Filesystem, MountError> {
        let core = FsCore::mount_read_only(&mut *device)?;
        Ok(Filesystem { core, device })
    }

    /// The core and the device, apart: for a driver that keeps requests in flight on
    /// the device itself (the engine).
    pub fn into_parts(self) -> (FsCore, Box<dyn BlockDevice>) {
        (self.core, self.device)
    }

    /// Puts back together what [`Filesystem::into_parts`] took apart. Nothing may be in
    /// flight on `device`, and `core` must have been mounted on it.
    pub fn from_parts(core: FsCore, device: Box<dyn BlockDevice>) -> Filesystem {
        assert_eq!(
            device.in_flight(),
            0,
            "a file system is put back together with nothing in flight on its device"
        );
        assert_eq!(
            device.info(),
            core.device_info(),
            "a file system core goes back with the device it was mounted on"
        );
        Filesystem { core, device }
    }

    /// [`FsCore::read`].
    pub fn read(
        &mut self,
        file: FileId,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<IoBuf, FileIoError> {
        self.core
            .read(&mut *self.device, file, offset_bytes, length_bytes)
    }

    /// [`FsCore::read_into`].
    pub fn read_into(
        &mut self,
        file: FileId,
        offset_bytes: u64,
        buffer: &mut IoBuf,
    ) -> Result<(), FileIoError> {
        self.core
            .read_into(&mut *self.device, file, offset_bytes, buffer)
    }

    /// [`FsCore::write`].
    pub fn write(
        &mut self,
        file: FileId,
        offset_bytes: u64,
        bytes: &[u8],
    ) -> Result<(), FileIoError> {
        self.core
            .write(&mut *self.device, file, offset_bytes, bytes)
    }

    /// [`FsCore::write_batch`].
    pub fn write_batch(&mut self, writes: &[(FileId, u64, &[u8])]) -> Vec<Result<(), FileIoError>> {
        self.core.write_batch(&mut *self.device, writes)
    }

    /// [`FsCore::copy_range`].
    pub fn copy_range(
        &mut self,
        source: FileId,
        source_offset_bytes: u64,
        destination: FileId,
        destination_offset_bytes: u64,
        length_bytes: u64,
        method: CopyMethod,
    ) -> Result<CopyReport, CopyError> {
        self.core.copy_range(
            &mut *self.device,
            source,
            source_offset_bytes,
            destination,
            destination_offset_bytes,
            length_bytes,
            method,
        )
    }

    /// [`FsCore::copy_file`].
    pub fn copy_file(
        &mut self,
        source_name: &str,
        destination_name: &str,
        method: CopyMethod,
    ) -> Result<CopyReport, CopyError> {
        self.core
            .copy_file(&mut *self.device, source_name, destination_name, method)
    }

    /// [`FsCore::truncate`].
    pub fn truncate(&mut self, file: FileId, size_bytes: u64) -> Result<(), FileIoError> {
        self.core.truncate(&mut *self.device, file, size_bytes)
    }

    /// [`FsCore::flush`].
    pub fn flush(&mut self) -> Result<(), FlushError> {
        self.core.flush(&mut *self.device)
    }

    /// [`FsCore::flush_checkpoint`].
    pub fn flush_checkpoint(&mut self) -> Result<(), FlushError> {
        self.core.flush_checkpoint(&mut *self.device)
    }

    /// Flushes and hands the device back (in the flash-aware layout, after a record of
    /// the clean unmount, [`FsCore::close_clean`]).
    pub fn unmount(mut self) -> Result<Box<dyn BlockDevice>, FlushError> {
        self.flush()?;
        self.core.close_clean(&mut *self.device)?;
        Ok(self.device)
    }
}

impl Deref for Filesystem {
    type Target = FsCore;

    fn deref(&self) -> &FsCore {
        &self.core
    }
}

impl DerefMut for Filesystem {
    fn deref_mut(&mut self) -> &mut FsCore {
        &mut self.core
    }
}
