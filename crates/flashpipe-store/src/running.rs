//! A store opened for commands: its file loaded, its lock taken, its devices opened,
//! its file system mounted (read-write or read-only) and the engine started on it.
//!
//! [`RunningStore`] is what the CLI's store commands, `flashpipe run`, the demo and the
//! benchmarks hold while they talk to the engine, and what a server will hold per store.
//! Closing it is the end of one transaction: [`RunningStore::close`] commits with one
//! flush (a read-only store writes nothing), [`RunningStore::close_without_commit`] drops
//! every change since the last commit, so a command that failed half-way leaves the store
//! at its last commit. The lock is released only after the engine and its devices are
//! closed. Nothing here prints: notes worth telling the user come back in
//! [`RunningStore::notes`].

use std::path::Path;
use std::sync::Arc;

use flashpipe_device::Clock;
use flashpipe_engine::{Engine, EngineClient, EngineConfig, EngineError};
use flashpipe_fs::{Filesystem, FlushError};

use crate::flash_activity::{FilesystemMark, FlashActivityHandle};
use crate::identity::{ensure_identity, StoreIdentity};
use crate::member_label::{label_members, labelled_identity};
use crate::member_watch::{MemberChanged, MemberWatch};
use crate::store::{open_store_device_waiting, DeviceCreation, OpenedStoreDevice, StoreOpenError};
use crate::store_config::{DeviceSpec, StoreConfig};
use crate::store_lock::{LockWait, StoreLock};
use crate::super_block_identity::{check_super_block_identity, give_super_block_identity};

/// Whether a store is opened to change it or only to read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreAccess {
    /// Exclusive lock, read-write devices and mount; closing commits.
    ReadWrite,
    /// Shared lock, read-only devices and mount; nothing is ever written.
    ReadOnly,
}

impl StoreAccess {
    /// Read-only when `read_only` (a command's `--read-only`), else read-write.
    pub fn read_only_if(read_only: bool) -> StoreAccess {
        if read_only {
            StoreAccess::ReadOnly
        } else {
            StoreAccess::ReadWrite
        }
    }

    /// How the devices are opened for this access (they must exist either way).
    pub fn device_creation(self) -> DeviceCreation {
        match self {
            StoreAccess::ReadWrite => DeviceCreation::MustExist,
            StoreAccess::ReadOnly => DeviceCreation::ReadOnly,
        }
    }
}

/// Why closing a store failed; the store keeps its last completed commit.
#[derive(Debug, thiserror::Error)]
pub enum StoreCloseError {
    /// The engine failed while finishing its queued commands or its final flush.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The file system could not be committed and unmounted.
    #[error(transparent)]
    Unmount(#[from] FlushError),
}

/// A store with its engine running: the engine, how it was started, the clock of the
/// store's devices (real or virtual), and the lock that makes this process its owner
/// (or one of its readers) until it is closed.
pub struct RunningStore {
    /// The running engine.
    pub engine: Engine,
    /// How the engine was started.
    pub engine_config: EngineConfig,
    /// The store device's clock ([`Engine::clock`]).
    pub clock: Arc<dyn Clock>,
    /// Remarks from opening the devices ("io_uring refused: using the thread pool"), for
    /// the interface to show.
    pub notes: Vec<String>,
    access: StoreAccess,
    /// The regular-file device images, examined before writes by a long-running holder.
    members: MemberWatch,
    /// The store's identity (from its store file; given one at a read-write open when it
    /// had none); `None` for a store opened read-only before it had one, or not from a
    /// store file.
    pub identity: Option<StoreIdentity>,
    /// A flash-aware store's activity in this process and its file system's counters at
    /// the mount (`crate::flash_activity`); `None` for every other store.
    flash_activity: Option<(FlashActivityHandle, FilesystemMark)>,
    /// Declared last: released after the engine and its devices are closed.
    lock: Option<StoreLock>,
}

/// At a read-write open: the store's identity, given to whichever of the store file, the
/// members' labels and the super block lacks it (a store made before identities), each
/// change noted; refused when the labels and the super block name different stores.
fn settle_identity(
    store_file: &Path,
    config: &mut StoreConfig,
    filesystem: &mut Filesystem,
    notes: &mut Vec<String>,
) -> Result<StoreIdentity, StoreOpenError> {
    let super_block_identity = filesystem.store_identity();
    let labelled = match config.identity {
        Some(_) => None,
        None => labelled_identity(config, store_file)?,
    };
    check_super_block_identity(store_file, labelled, super_block_identity)?;
    let known = labelled.or(super_block_identity.map(StoreIdentity));
    let (identity, new) = ensure_identity(store_file, config, known)?;
    if new {
        notes.push(format!(
            "the store had no identity yet (made before identities); it is now {identity}"
        ));
    }
    let labelled_count = label_members(config, store_file, identity, false)?;
    if labelled_count > 0 {
        notes.push(format!(
            "labelled {labelled_count} member(s) with the store's identity and their place (made before member labels)"
        ));
    }
    notes.extend(give_super_block_identity(store_file, filesystem, identity)?);
    Ok(identity)
}

impl RunningStore {
    /// Loads the store file at `store_file`, locks the store for `access` (failing at once
    /// when another process uses it, or waiting with [`LockWait::Wait`]), opens its devices,
    /// mounts the file system and starts the engine with [`EngineConfig::default`].
    pub fn open(
        store_file: &Path,
        access: StoreAccess,
        wait: LockWait,
    ) -> Result<RunningStore, StoreOpenError> {
        RunningStore::open_with(store_file, access, wait, EngineConfig::default())
    }

    /// As [`RunningStore::open`], with the engine started as `engine_config` says (a
    /// server asks for its read pool in shared memory, `PoolMemory::Shared`).
    pub fn open_with(
        store_file: &Path,
        access: StoreAccess,
        wait: LockWait,
        engine_config: EngineConfig,
    ) -> Result<RunningStore, StoreOpenError> {
        let mut config = StoreConfig::load(store_file)?;
        if has_ram_device(&config) {
            return Err(StoreOpenError::RamDevices {
                path: store_file.to_path_buf(),
            });
        }
        let OpenedStoreDevice {
            device,
            mut notes,
            lock,
            flash_activity,
        } = open_store_device_waiting(&config, store_file, access.device_creation(), wait)?;
        let mounted = match access {
            StoreAccess::ReadWrite => Filesystem::mount(device),
            StoreAccess::ReadOnly => Filesystem::mount_read_only(device),
        };
        let mut filesystem = mounted.map_err(|source| StoreOpenError::Mount {
            path: store_file.to_path_buf(),
            source,
        })?;
        check_super_block_identity(store_file, config.identity, filesystem.store_identity())?;
        let flash_activity = flash_activity.zip(FilesystemMark::take(&filesystem));
        let identity = match access {
            StoreAccess::ReadWrite => {
                let identity =
                    settle_identity(store_file, &mut config, &mut filesystem, &mut notes)?;
                notes.extend(crate::leftovers::remove_leftover_temporaries(
                    &mut filesystem,
                ));
                Some(identity)
            }
            StoreAccess::ReadOnly => config.identity,
        };
        let mut running = RunningStore::start(filesystem, engine_config);
        running.identity = identity;
        running.access = access;
        running.notes = notes;
        running.flash_activity = flash_activity;
        if access == StoreAccess::ReadWrite {
            running.members = MemberWatch::open(&config, store_file);
        }
        running.lock = Some(lock);
        Ok(running)
    }

    /// Starts the engine on a file system the caller mounted and owns (a RAM store of a
    /// benchmark, a test's simulated disks): no store file, no lock; closing commits.
    pub fn start(filesystem: Filesystem, engine_config: EngineConfig) -> RunningStore {
        let engine = Engine::start(filesystem, engine_config);
        RunningStore {
            clock: engine.clock(),
            engine,
            engine_config,
            notes: Vec::new(),
            access: StoreAccess::ReadWrite,
            members: MemberWatch::default(),
            identity: None,
            flash_activity: None,
            lock: None,
        }
    }

    /// Whether the store was opened to change it or only to read it.
    pub fn access(&self) -> StoreAccess {
        self.access
    }

    /// Examines the store's device images (one `fstat` each): `Err` names one that was
    /// deleted or shrank since the open, after which no write should go to the store.
    /// A store opened read-only, or without image files, always passes.
    pub fn check_devices(&self) -> Result<(), MemberChanged> {
        self.members.check()
    }

    /// Where a flash-aware store leaves what this process did to its flash: complete
    /// once the store is closed (`crate::flash_activity`); `None` for every other store.
    pub fn flash_activity(&self) -> Option<FlashActivityHandle> {
        self.flash_activity
            .as_ref()
            .map(|(handle, _)| Arc::clone(handle))
    }

    /// A client with room for `outstanding_limit` commands.
    pub fn client(&self, outstanding_limit: usize) -> EngineClient {
        self.engine.client(outstanding_limit)
    }

    /// Closes the store: commits (one flush) and unmounts when opened for changes; a
    /// read-only store is closed without writing anything.
    pub fn close(self) -> Result<(), StoreCloseError> {
        let filesystem = match self.access {
            StoreAccess::ReadWrite => self.engine.shutdown()?,
            StoreAccess::ReadOnly => self.engine.shutdown_without_commit()?,
        };
        record_flash_activity(self.flash_activity.as_ref(), &filesystem);
        match self.access {
            StoreAccess::ReadWrite => drop(filesystem.unmount()?),
            StoreAccess::ReadOnly => drop(filesystem),
        }
        drop(self.lock);
        Ok(())
    }

    /// Closes the store without committing: every change since the last commit is
    /// dropped, so a command that failed half-way leaves the store at its last commit.
    pub fn close_without_commit(self) -> Result<(), StoreCloseError> {
        let filesystem = self.engine.shutdown_without_commit()?;
        record_flash_activity(self.flash_activity.as_ref(), &filesystem);
        drop(filesystem);
        drop(self.lock);
        Ok(())
    }
}

/// At a close: the commits and moves of a flash-aware store's file system since it was
/// mounted, before it is unmounted (its device then adds its own counters).
fn record_flash_activity(
    activity: Option<&(FlashActivityHandle, FilesystemMark)>,
    filesystem: &Filesystem,
) {
    if let Some((handle, mark)) = activity {
        mark.record_since(filesystem, handle);
    }
}

/// True when `config` names a RAM device.
pub fn has_ram_device(config: &StoreConfig) -> bool {
    config
        .devices
        .iter()
        .any(|device| matches!(device, DeviceSpec::Ram { .. }))
}
