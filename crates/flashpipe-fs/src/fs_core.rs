//! The file system's core: mkfs, mount, the file operations, flush, as a state that owns
//! no device. Every operation that does I/O takes the device as an argument, so whoever
//! drives the core (the synchronous [`crate::Filesystem`], the threaded and the stepped
//! engine) holds the device itself, and what is in flight on it is the driver's to see.

use std::sync::Arc;

use flashpipe_device::{BlockDevice, Clock, DeviceInfo, IoBuf};

use crate::attributes::FileAttributes;
use crate::commit::{commit, write_super_block};
use crate::copy::{self, CopyMethod, CopyReport};
use crate::data::{self, MappedRun};
use crate::error::{CopyError, FileIoError, FlushError, FormatError, MountError, NamespaceError};
use crate::findings::{Finding, Structure};
use crate::flash_layout;
use crate::image::{load_image, LoadFailure};
use crate::io::{flush_device, Geometry};
use crate::layout::{
    is_valid_fs_block_size, FIRST_ALLOCATABLE_BLOCK, MIN_FS_BLOCK_COUNT,
    NEWEST_READABLE_FORMAT_VERSION,
};
use crate::name::{check_name, check_new_name};
use crate::staged_write::{self, BlockChecksums, PendingWrites, PlannedWrite, WriteCopy};
use crate::state::{FileNode, MetadataTotals, State};

mod attributes;
mod flash_aware;
mod inspect;
mod planned_reads;
mod store_identity;

pub use flash_aware::FlashSpace;
pub use flashpipe_api::{store_identity_text, FileId, FileStat, FsStats};

/// mkfs options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FormatOptions {
    /// FS block size: a power of two from 4 KiB to 1 MiB, a multiple of the device's.
    pub fs_block_size_bytes: u32,
    /// The identity of the store the file system belongs to, written into the super
    /// block (format version 4); `None` leaves it unset (all zero on disk).
    pub store_identity: Option<[u8; 16]>,
}

impl Default for FormatOptions {
    fn default() -> FormatOptions {
        FormatOptions {
            fs_block_size_bytes: 4096,
            store_identity: None,
        }
    }
}

/// How commits write the metadata (docs/format.md, "When a checkpoint is taken").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CommitPolicy {
    /// A log record of what changed when it fits the log region, else a full checkpoint
    /// (the default).
    #[default]
    LogWhenItFits,
    /// A full checkpoint at every commit, as format version 2 did (the images are
    /// version 3 either way): for side-by-side measurements.
    CheckpointEveryCommit,
}

/// Whether a mount may write to its device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MountMode {
    /// Changes are allowed; flush commits them.
    ReadWrite,
    /// Never writes: every change is refused with a `ReadOnly` error, flush and
    /// unmount touch nothing.
    ReadOnly,
}

/// How much of the last checkpoint's log region the durable log fills (docs/format.md,
/// "Metadata log"): what a mount replays beyond the checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MetadataLogFill {
    /// Blocks of the checkpoint's log region.
    pub region_block_count: u64,
    /// Region blocks holding log records of the last commit.
    pub log_block_count: u64,
    /// Log records since the checkpoint (0 right after one).
    pub log_record_count: u64,
}

/// A mounted file system's state, without its device: what [`crate::Filesystem`] wraps
/// with the device for synchronous callers, and what the engine drives beside the device
/// it owns.
pub struct FsCore {
    /// What the device said about itself at mount (the core never asks it again).
    device_info: DeviceInfo,
    state: State,
    mode: MountMode,
    /// Writes planned by [`FsCore::plan_write`] and not yet finished.
    pending_writes: PendingWrites,
}

impl FsCore {
    /// Formats `device` (mkfs) and returns it mounted. Everything on it is lost.
    pub fn format(
        device: &mut dyn BlockDevice,
        options: &FormatOptions,
    ) -> Result<FsCore, FormatError> {
        FsCore::format_with(device, options, |_| {})
    }

    /// mkfs, with `layout` choosing the layout of the empty state before its first
    /// commit.
    fn format_with(
        device: &mut dyn BlockDevice,
        options: &FormatOptions,
        layout: impl FnOnce(&mut State),
    ) -> Result<FsCore, FormatError> {
        let info = device.info().clone();
        if options
            .store_identity
            .is_some_and(|identity| identity.iter().all(|&byte| byte == 0))
        {
            return Err(FormatError::ZeroStoreIdentity);
        }
        let block_size = options.fs_block_size_bytes;
        if !is_valid_fs_block_size(block_size) || block_size % info.block_size_bytes != 0 {
            return Err(FormatError::BadBlockSize {
                fs_block_size_bytes: block_size,
                device_block_size_bytes: info.block_size_bytes,
            });
        }
        let fs_block_count = info.size_bytes() / u64::from(block_size);
        if fs_block_count < MIN_FS_BLOCK_COUNT {
            return Err(FormatError::DeviceTooSmall {
                device_size_bytes: info.size_bytes(),
                minimum_size_bytes: MIN_FS_BLOCK_COUNT * u64::from(block_size),
            });
        }
        let geometry = Geometry::new(block_size, fs_block_count, info.block_size_bytes);
        let free = [(
            FIRST_ALLOCATABLE_BLOCK,
            fs_block_count - FIRST_ALLOCATABLE_BLOCK,
        )];
        let mut state = State::empty(geometry, device.clock(), &free);
        state.store_identity = options.store_identity;
        layout(&mut state);
        commit(&mut state, device).map_err(|error| match error {
            FlushError::Device(error) => FormatError::Device(error),
            _ => FormatError::DeviceTooSmall {
                device_size_bytes: info.size_bytes(),
                minimum_size_bytes: MIN_FS_BLOCK_COUNT * u64::from(block_size),
            },
        })?;
        let super_block = state.committed.super_block.clone().expect("mkfs committed");
        write_super_block(device, &geometry, 0, &super_block)?;
        flush_device(device)?;
        Ok(FsCore {
            device_info: info,
            state,
            mode: MountMode::ReadWrite,
            pending_writes: PendingWrites::default(),
        })
    }

    /// Mounts the file system on `device`. Refuses a newer format, a device that is too
    /// small, a damaged super block slot (it may hold the newest commit: only
    /// `fsck --repair` falls back to the other slot) and any inconsistency (listing them
    /// all). Writes nothing until a change is flushed.
    pub fn mount(device: &mut dyn BlockDevice) -> Result<FsCore, MountError> {
        FsCore::mount_with(device, MountMode::ReadWrite)
    }

    /// Mounts the file system on `device` for reading only: the same checks as
    /// [`FsCore::mount`], then nothing is ever written to the device. Every change
    /// (create, write, truncate, delete, rename, copy) is refused with a `ReadOnly`
    /// error; flush and unmount do nothing.
    pub fn mount_read_only(device: &mut dyn BlockDevice) -> Result<FsCore, MountError> {
        FsCore::mount_with(device, MountMode::ReadOnly)
    }

    /// True for a mount made with [`FsCore::mount_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.mode == MountMode::ReadOnly
    }

    fn mount_with(device: &mut dyn BlockDevice, mode: MountMode) -> Result<FsCore, MountError> {
        let image = load_image(device).map_err(mount_error)?;
        if let Some(damage) = image.damaged_slot.clone() {
            return Err(MountError::DamagedSuperBlock {
                damage: Box::new(damage),
            });
        }
        let mut findings = image.findings.clone();
        if !image.files_complete && findings.is_empty() {
            findings.push(Finding::new(
                Structure::InodeTable,
                None,
                "file metadata incomplete".to_string(),
                false,
            ));
        }
        if !findings.is_empty() {
            return Err(MountError::Corrupt { findings });
        }
        let mut state = image.into_state(device.clock(), false);
        match mode {
            MountMode::ReadWrite => flash_layout::prepare_mount(&mut state, device)?,
            MountMode::ReadOnly => flash_layout::note_read_only_layout(&mut state),
        }
        Ok(FsCore {
            device_info: device.info().clone(),
            state,
            mode,
            pending_writes: PendingWrites::default(),
        })
    }

    /// Creates an empty file named `name`.
    pub fn create(&mut self, name: &str) -> Result<FileId, NamespaceError> {
        self.check_writable("create")?;
        self.check_usable()?;
        check_new_name(name)?;
        if self.state.names.contains_key(name) {
            return Err(NamespaceError::Exists {
                name: name.to_string(),
            });
        }
        let mut totals_after = self.state.totals;
        totals_after.account(&self.state.geometry, name.len(), 0, true);
        check_namespace_space(&self.state, &totals_after)?;
        let inode_number = self.state.next_inode_number;
        self.state.next_inode_number += 1;
        let node = FileNode {
            name: name.into(),
            size_bytes: 0,
            pointers: Vec::new(),
            checksums: Vec::new(),
            indirect_chain: Vec::new(),
            map_changed: false,
            modified_clock_ns: self.state.now_ns(),
            attributes: FileAttributes::NONE,
        };
        self.state.insert_file(inode_number, node);
        self.state.changed_since_commit = true;
        Ok(FileId(inode_number))
    }

    /// The handle of the file named `name` (a hash lookup).
    pub fn open(&self, name: &str) -> Result<FileId, NamespaceError> {
        check_name(name)?;
        self.state
            .names
            .get(name)
            .map(|&inode_number| FileId(inode_number))
            .ok_or_else(|| NamespaceError::NotFound {
                name: name.to_string(),
            })
    }

    /// Reads `length_bytes` at `offset_bytes` into a new aligned buffer. The range must
    /// lie inside the file ([`FileIoError::ReadPastEnd`] otherwise).
    pub fn read(
        &mut self,
        device: &mut dyn BlockDevice,
        file: FileId,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<IoBuf, FileIoError> {
        data::check_read_range(&self.state, file.0, offset_bytes, length_bytes)?;
        let length = usize::try_from(length_bytes).map_err(|_| FileIoError::BadBuffer {
            detail: format!("{length_bytes} bytes do not fit in memory"),
        })?;
        let mut buffer = IoBuf::zeroed(length);
        data::read_into(&self.state, device, file.0, offset_bytes, &mut buffer)?;
        Ok(buffer)
    }

    /// Reads `buffer.len()` bytes at `offset_bytes` into `buffer` (for example a pool
    /// buffer). With `offset_bytes` a multiple of the FS block size, whole blocks are
    /// read by the device straight into `buffer`, without a copy.
    pub fn read_into(
        &mut self,
        device: &mut dyn BlockDevice,
        file: FileId,
        offset_bytes: u64,
        buffer: &mut IoBuf,
    ) -> Result<(), FileIoError> {
        data::read_into(&self.state, device, file.0, offset_bytes, buffer)
    }

    /// The device runs (or holes) behind bytes `offset..offset + length` of `file`, in
    /// file order, for a caller that issues its own device reads. Valid until the next
    /// write, truncate, delete or flush.
    pub fn block_map(
        &self,
        file: FileId,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<Vec<MappedRun>, FileIoError> {
        data::block_map(&self.state, file.0, offset_bytes, length_bytes)
    }

    /// Writes `bytes` at `offset_bytes` (overwrite, append, or past the end leaving a
    /// hole that reads as zeros).
    pub fn write(
        &mut self,
        device: &mut dyn BlockDevice,
        file: FileId,
        offset_bytes: u64,
        bytes: &[u8],
    ) -> Result<(), FileIoError> {
        self.check_io_writable("write")?;
        self.assert_no_writes_pending("write");
        data::write(&mut self.state, device, file.0, offset_bytes, bytes)
    }

    /// Carries out several writes `(file, offset, bytes)` with all their device requests
    /// in flight together (the engine batches queued writes this way), returning one
    /// result per write in order. Writes to the same FS block of one file are done in
    /// the order given; a device failure fails every write of its batch run.
    pub fn write_batch(
        &mut self,
        device: &mut dyn BlockDevice,
        writes: &[(FileId, u64, &[u8])],
    ) -> Vec<Result<(), FileIoError>> {
        if self.is_read_only() {
            return writes
                .iter()
                .map(|_| Err(FileIoError::ReadOnly { operation: "write" }))
                .collect();
        }
        self.assert_no_writes_pending("write_batch");
        let writes: Vec<data::BatchWrite<'_>> = writes
            .iter()
            .map(|&(file, offset_bytes, bytes)| (file.0, offset_bytes, bytes))
            .collect();
        data::write_batch(&mut self.state, device, &writes)
    }

    /// Plans a write of `data` at `offset_bytes` for a caller that keeps writes in flight
    /// (the engine): space checked, target blocks allocated, device requests built, the
    /// block map left unchanged until [`FsCore::finish_write`]. With
    /// [`WriteCopy::ZeroCopy`] and `offset_bytes` on an FS block boundary, whole blocks go
    /// to the device straight from `data` (views of it). Contract: the caller issues
    /// every request of [`PlannedWrite::take_operations`] on `device`, hands each
    /// completion's buffer to [`PlannedWrite::take_back`], and finishes every planned
    /// write before calling any other method but `plan_write`, `finish_write`,
    /// `write_needs_old_blocks`, `open` and `stats` (and `stat` and `block_map` of files
    /// with no planned write unfinished, whose reads may run beside them: a planned write
    /// changes no block map until it is finished); writes planned together must not touch
    /// the same FS block of a file; and when [`FsCore::write_needs_old_blocks`] says so,
    /// nothing may be in flight on `device` (the old blocks are read here). On an error
    /// nothing was allocated and `data` is dropped.
    pub fn plan_write(
        &mut self,
        device: &mut dyn BlockDevice,
        file: FileId,
        offset_bytes: u64,
        data: IoBuf,
        copy: WriteCopy,
    ) -> Result<PlannedWrite, FileIoError> {
        self.plan_checksummed_write(device, file, offset_bytes, data, None, copy)
    }

    /// As [`FsCore::plan_write`], with the checksums of `data`'s whole blocks computed by
    /// the caller ([`BlockChecksums::compute`] on this file system's block size), so the
    /// planning thread does not pass over the bytes again; they are used on the zero-copy
    /// path when they describe `data` (its length, this block size) and ignored otherwise
    /// (the blocks are then checksummed here, as [`FsCore::plan_write`] does).
    pub fn plan_checksummed_write(
        &mut self,
        device: &mut dyn BlockDevice,
        file: FileId,
        offset_bytes: u64,
        data: IoBuf,
        checksums: Option<BlockChecksums>,
        copy: WriteCopy,
    ) -> Result<PlannedWrite, FileIoError> {
        self.check_io_writable("write")?;
        let request = staged_write::WriteRequest {
            inode_number: file.0,
            offset_bytes,
            data,
            checksums,
        };
        staged_write::plan(
            &mut self.state,
            device,
            &mut self.pending_writes,
            request,
            copy,
        )
    }

    /// Finishes a write planned by [`FsCore::plan_write`] once all its requests have
    /// completed (`outcome`: the first failure among them, if any): installs its block
    /// pointers, or on a failure installs nothing and releases the blocks it allocated.
    /// Returns the caller's buffer, whole, and the write's result.
    pub fn finish_write(
        &mut self,
        planned: PlannedWrite,
        outcome: Result<(), flashpipe_device::DeviceError>,
    ) -> (IoBuf, Result<(), FileIoError>) {
        staged_write::finish(&mut self.state, &mut self.pending_writes, planned, outcome)
    }

    /// True when planning a write of `length_bytes` at `offset_bytes` into `file` reads
    /// old blocks (a partial first or last block that holds data), so that nothing may be
    /// in flight on the device when it is planned.
    pub fn write_needs_old_blocks(
        &self,
        file: FileId,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> bool {
        data::needs_old_blocks(&self.state, file.0, offset_bytes, length_bytes)
    }

    /// Writes planned by [`FsCore::plan_write`] and not yet finished.
    pub fn writes_pending(&self) -> usize {
        self.pending_writes.count()
    }

    fn assert_no_writes_pending(&self, operation: &str) {
        assert_eq!(
            self.pending_writes.count(),
            0,
            "{operation} called with planned writes not finished (finish every planned write first)"
        );
    }

    /// Copies `length_bytes` from `source` at `source_offset_bytes` to `destination` at
    /// `destination_offset_bytes` (they may be the same file; overlapping ranges behave
    /// as memmove). With a reference method, whole blocks are remapped by the device
    /// (metadata only, no data moves) and partial blocks at unaligned ends are copied
    /// by bytes; see [`CopyMethod`] for what happens when that is impossible.
    #[allow(clippy::too_many_arguments)]
    pub fn copy_range(
        &mut self,
        device: &mut dyn BlockDevice,
        source: FileId,
        source_offset_bytes: u64,
        destination: FileId,
        destination_offset_bytes: u64,
        length_bytes: u64,
        method: CopyMethod,
    ) -> Result<CopyReport, CopyError> {
        self.check_io_writable("copy")?;
        self.assert_no_writes_pending("copy");
        let range = copy::CopyRange {
            source_inode: source.0,
            source_offset_bytes,
            destination_inode: destination.0,
            destination_offset_bytes,
            length_bytes,
        };
        copy::copy_range(&mut self.state, device, range, method)
    }

    /// Creates `destination_name` as a copy of the whole file `source_name`. With a
    /// reference method on a device that remaps (an FTL), this costs metadata only,
    /// whatever the size. On failure the destination is not left behind.
    pub fn copy_file(
        &mut self,
        device: &mut dyn BlockDevice,
        source_name: &str,
        destination_name: &str,
        method: CopyMethod,
    ) -> Result<CopyReport, CopyError> {
        self.check_writable("copy")?;
        let source = self.open(source_name)?;
        let size_bytes = self.stat(source)?.size_bytes;
        if method == CopyMethod::ReferenceOrFail && size_bytes > 0 {
            let probe = copy::CopyRange {
                source_inode: source.0,
                source_offset_bytes: 0,
                destination_inode: source.0,
                destination_offset_bytes: 0,
                length_bytes: size_bytes,
            };
            if let Some(reason) = copy::reference_obstacle(&self.state, &*device, probe) {
                return Err(CopyError::NotByReference { reason });
            }
        }
        let destination = self.create(destination_name)?;
        let result = self.copy_range(device, source, 0, destination, 0, size_bytes, method);
        if result.is_err() {
            // The copy's own error is the one to report; removing the half-made
            // destination is best effort.
            let _removed = self.delete(destination_name);
        }
        result
    }

    /// Sets the file's size (shrinking frees blocks; growing adds a hole).
    pub fn truncate(
        &mut self,
        device: &mut dyn BlockDevice,
        file: FileId,
        size_bytes: u64,
    ) -> Result<(), FileIoError> {
        self.check_io_writable("truncate")?;
        self.assert_no_writes_pending("truncate");
        data::truncate(&mut self.state, device, file.0, size_bytes)
    }

    /// Deletes the file named `name`; its blocks are free after the next flush.
    pub fn delete(&mut self, name: &str) -> Result<(), NamespaceError> {
        self.check_writable("delete")?;
        self.assert_no_writes_pending("delete");
        self.check_usable()?;
        let file = self.open(name)?;
        let node = self.state.remove_file(file.0);
        for block in node.pointers.into_iter().filter(|&block| block != 0) {
            self.state.release_data_block(block);
        }
        for block in node.indirect_chain {
            self.state.allocator.release(block);
        }
        self.state.changed_since_commit = true;
        Ok(())
    }

    /// Renames `from` to `to`; `to` must not exist (renaming a file to its own name does
    /// nothing).
    pub fn rename(&mut self, from: &str, to: &str) -> Result<(), NamespaceError> {
        self.check_writable("rename")?;
        self.check_usable()?;
        let file = self.open(from)?;
        check_new_name(to)?;
        if from == to {
            return Ok(());
        }
        if self.state.names.contains_key(to) {
            return Err(NamespaceError::Exists {
                name: to.to_string(),
            });
        }
        let mut totals_after = self.state.totals;
        totals_after.name_table_bytes =
            totals_after.name_table_bytes - from.len() as u64 + to.len() as u64;
        check_namespace_space(&self.state, &totals_after)?;
        let mut node = self.state.remove_file(file.0);
        node.name = to.into();
        node.modified_clock_ns = self.state.now_ns();
        self.state.insert_file(file.0, node);
        self.state.changed_since_commit = true;
        Ok(())
    }

    /// Renames `from` to `to`, replacing the file named `to` if there is one: in memory
    /// both happen at once, so the next flush commits either neither or both, and the
    /// replaced file's blocks stay untouched until that commit is durable (a crash before
    /// it finds the old `to` whole). Renaming a file to its own name does nothing.
    pub fn rename_replacing(&mut self, from: &str, to: &str) -> Result<(), NamespaceError> {
        self.check_usable()?;
        self.open(from)?;
        check_new_name(to)?;
        if from == to {
            return Ok(());
        }
        if self.state.names.contains_key(to) {
            // Deleting `to` shrinks the tables, so the rename that follows needs no more
            // room than the state already had.
            self.delete(to)?;
        }
        self.rename(from, to)
    }

    /// Every file, sorted by name.
    pub fn list(&self) -> Vec<FileStat> {
        let mut files: Vec<FileStat> = self
            .state
            .files
            .keys()
            .map(|&inode| self.stat_of(inode))
            .collect();
        files.sort_by(|left, right| left.name.cmp(&right.name));
        files
    }

    /// The names that start with `prefix`, sorted: a pass over the name index alone, with
    /// no file's facts gathered (cheaper than [`FsCore::list`] when few names match).
    pub fn names_with_prefix(&self, prefix: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .state
            .names
            .keys()
            .filter(|name| name.starts_with(prefix))
            .map(|name| name.to_string())
            .collect();
        names.sort();
        names
    }

    /// Facts about a file by handle.
    pub fn stat(&self, file: FileId) -> Result<FileStat, NamespaceError> {
        if !self.state.files.contains_key(&file.0) {
            return Err(NamespaceError::StaleHandle { file_id: file.0 });
        }
        Ok(self.stat_of(file.0))
    }

    /// Facts about a file by name.
    pub fn stat_name(&self, name: &str) -> Result<FileStat, NamespaceError> {
        let file = self.open(name)?;
        self.stat(file)
    }

    fn stat_of(&self, inode_number: u64) -> FileStat {
        let node = &self.state.files[&inode_number];
        FileStat {
            file_id: FileId(inode_number),
            name: node.name.to_string(),
            size_bytes: node.size_bytes,
            allocated_blocks: node.pointers.iter().filter(|&&block| block != 0).count() as u64,
            shared_bytes: node
                .pointers
                .iter()
                .enumerate()
                .filter(|&(_, &block)| block != 0 && self.state.shared.is_shared(block))
                .map(|(index, _)| {
                    let block_bytes = self.state.geometry.block_bytes();
                    let start = index as u64 * block_bytes;
                    block_bytes.min(node.size_bytes.saturating_sub(start))
                })
                .sum(),
            modified_clock_ns: node.modified_clock_ns,
            mode: node.attributes.mode,
            owner: node.attributes.owner,
            modified_wall_ns: node.attributes.modified_wall_ns,
        }
    }

    /// Space and file counts (df).
    pub fn stats(&self) -> FsStats {
        let geometry = self.state.geometry;
        let free_blocks = self.state.allocator.free_block_count();
        let pending_free_blocks = self.state.allocator.pending_block_count() as u64;
        FsStats {
            fs_block_size_bytes: geometry.fs_block_size_bytes,
            fs_block_count: geometry.fs_block_count,
            used_blocks: geometry.fs_block_count - free_blocks - pending_free_blocks,
            shared_blocks: self.state.shared.shared_block_count(),
            saved_blocks: self
                .state
                .shared
                .iter()
                .map(|(_, count)| u64::from(count) - 1)
                .sum(),
            free_blocks,
            pending_free_blocks,
            reserved_blocks: self.state.checkpoint_reserve_blocks(&self.state.totals),
            file_count: self.state.files.len() as u64,
            commit_sequence: self.state.committed.sequence,
            unflushed_changes: self.state.changed_since_commit,
        }
    }

    /// The durable log's fill: how many records and blocks the last commit's log holds
    /// beyond its checkpoint (all zero before the first version-3 commit).
    pub fn metadata_log_fill(&self) -> MetadataLogFill {
        let Some(super_block) = &self.state.committed.super_block else {
            return MetadataLogFill::default();
        };
        MetadataLogFill {
            region_block_count: super_block.log_region_block_count,
            log_block_count: super_block.log_block_count,
            log_record_count: super_block.log_record_count,
        }
    }

    /// Makes every change so far durable (a commit; docs/format.md, "Crash consistency").
    /// On a read-only mount there is never a change, and flush does nothing at all (not
    /// even a device flush).
    pub fn flush(&mut self, device: &mut dyn BlockDevice) -> Result<(), FlushError> {
        if self.is_read_only() {
            assert!(
                !self.state.changed_since_commit,
                "a read-only mount refuses every change"
            );
            return Ok(());
        }
        self.assert_no_writes_pending("flush");
        commit(&mut self.state, device)
    }

    /// Chooses how the next commits write the metadata ([`CommitPolicy`]); a mount starts
    /// with [`CommitPolicy::LogWhenItFits`]. Either policy reads every image.
    pub fn set_commit_policy(&mut self, policy: CommitPolicy) {
        self.state.checkpoint_every_commit = policy == CommitPolicy::CheckpointEveryCommit;
    }

    /// [`FsCore::flush`] that writes a full checkpoint (every table anew, the log
    /// emptied) even when a log record would do: for tools and tests, and before an
    /// unmount that wants the next mount to replay nothing. Nothing to commit: the
    /// device is only flushed.
    pub fn flush_checkpoint(&mut self, device: &mut dyn BlockDevice) -> Result<(), FlushError> {
        if self.is_read_only() {
            return Ok(());
        }
        self.state.force_checkpoint = self.state.changed_since_commit;
        commit(&mut self.state, device)
    }

    /// The clock of the device under the file system (virtual in simulation, never the
    /// wall clock): what a caller times the file system's work with.
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.state.clock)
    }

    /// The device's description.
    pub fn device_info(&self) -> &DeviceInfo {
        &self.device_info
    }

    fn check_writable(&self, operation: &'static str) -> Result<(), NamespaceError> {
        match self.mode {
            MountMode::ReadOnly => Err(NamespaceError::ReadOnly { operation }),
            MountMode::ReadWrite => Ok(()),
        }
    }

    fn check_io_writable(&self, operation: &'static str) -> Result<(), FileIoError> {
        match self.mode {
            MountMode::ReadOnly => Err(FileIoError::ReadOnly { operation }),
            MountMode::ReadWrite => Ok(()),
        }
    }

    /// Why this mount refuses changes after an earlier device failure (a flush, or a
    /// write over blocks written since the last flush), if it does: remount to go on.
    pub fn unusable_reason(&self) -> Option<&str> {
        self.state.unusable_reason.as_deref()
    }

    fn check_usable(&self) -> Result<(), NamespaceError> {
        match &self.state.unusable_reason {
            Some(reason) => Err(NamespaceError::Unusable {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }
}

/// Refuses a namespace change whose metadata (at `totals_after`) would not fit while
/// the commit reserve stays free.
pub(crate) fn check_namespace_space(
    state: &State,
    totals_after: &MetadataTotals,
) -> Result<(), NamespaceError> {
    state
        .check_space(0, totals_after)
        .map_err(|(needed_blocks, free_blocks)| NamespaceError::NoSpace {
            needed_blocks,
            free_blocks,
        })
}

fn mount_error(failure: LoadFailure) -> MountError {
    match failure {
        LoadFailure::NotFormatted => MountError::NotFormatted,
        LoadFailure::NewerVersion { found } => MountError::NewerVersion {
            found,
            supported: NEWEST_READABLE_FORMAT_VERSION,
        },
        LoadFailure::WrongDeviceSize {
            expected_size_bytes,
            fs_block_size_bytes,
            device_size_bytes,
            device_block_size_bytes,
        } => MountError::WrongDeviceSize {
            expected_size_bytes,
            fs_block_size_bytes,
            device_size_bytes,
            device_block_size_bytes,
        },
        LoadFailure::NoValidSuperBlock { findings, .. } => MountError::Corrupt { findings },
        LoadFailure::Device(error) => MountError::Device(error),
    }
}
