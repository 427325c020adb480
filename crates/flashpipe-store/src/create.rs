//! Creating a store: checking its store file's contents, creating and formatting its
//! devices, then writing the store file (last, so a failure leaves no store file behind).
//!
//! Devices that hold anything (a flashpipe store or flash image, another file system,
//! swap, an encrypted volume, a partition table, or any non-zero byte in their first MiB)
//! are refused (see [`crate::probe_foreign`]) unless the caller forces the format. A failed creation removes every
//! device file and image it created (never one that was there before), so the same
//! creation can be retried. Nothing here prints: the notes of opening the devices go to
//! the caller's `note` function, which shows them as the interface does.

use std::path::{Path, PathBuf};

use flashpipe_fs::{Filesystem, FormatOptions, FsStats};

use crate::flash_store::{FlashLayout, FlashStoreError};
use crate::identity::StoreIdentity;
use crate::member_label::label_members;
use crate::probe_foreign::refuse_devices_holding_data;
use crate::store::{device_files, lock_store, open_store_device_locked, OpenedStoreDevice};
use crate::store_config::{
    check_distinct_devices, parse_device_list, DeviceSpec, STORE_FILE_VERSION,
};
use crate::store_lock::{LockWait, StoreLock};
use crate::{DeviceCreation, StoreConfig};

/// The result of creating a store: any error, described for a person (the store file's,
/// the lock's, the devices', the format's or the probe's own error inside).
pub type StoreCreateResult<T> = Result<T, Box<dyn std::error::Error>>;

/// FS block size of [`format_file_store`]'s stores.
pub const FILE_STORE_BLOCK_SIZE_BYTES: u32 = 16 << 10;
/// Stripe unit of [`format_file_store`]'s stores.
pub const FILE_STORE_STRIPE_UNIT_BYTES: u64 = 64 << 10;
/// Queue depth of [`format_file_store`]'s stores.
pub const FILE_STORE_QUEUE_DEPTH: u32 = 32;

/// Creates a store at `store` (its store file) from `config`, refusing devices that hold
/// a store and failing at once when another process holds one of them; `note` receives
/// what opening the devices has to say.
pub fn create_store(
    config: &StoreConfig,
    store: &Path,
    note: &mut dyn FnMut(&str),
) -> StoreCreateResult<FsStats> {
    create_store_with(config, store, false, LockWait::Fail, note)
}

/// How [`create_store_with_options`] creates a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreateOptions {
    /// Format devices that hold data already.
    pub force: bool,
    /// Wait for another user of a device instead of failing.
    pub wait: LockWait,
    /// Allocate every block of the image files it creates (`fallocate`) instead of
    /// leaving them sparse: a file system without room for them fails the creation now,
    /// where a sparse image would fail a later write with ENOSPC.
    pub preallocate: bool,
}

/// [`create_store`], formatting devices that hold a store with `force` and waiting for
/// their owner with [`LockWait::Wait`]; image files are sparse. Refuses a device named
/// twice; on failure removes every device file and image it created (never one that was
/// there before), so the same creation can be retried.
pub fn create_store_with(
    config: &StoreConfig,
    store: &Path,
    force: bool,
    wait: LockWait,
    note: &mut dyn FnMut(&str),
) -> StoreCreateResult<FsStats> {
    let options = CreateOptions {
        force,
        wait,
        preallocate: false,
    };
    create_store_with_options(config, store, options, note)
}

/// [`create_store_with`] with every option, preallocation included.
pub fn create_store_with_options(
    config: &StoreConfig,
    store: &Path,
    options: CreateOptions,
    note: &mut dyn FnMut(&str),
) -> StoreCreateResult<FsStats> {
    let CreateOptions { force, wait, .. } = options;
    if store.exists() {
        return Err(crate::StoreConfigError::Io {
            path: store.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "exists already; remove it first to make a new store",
            ),
        }
        .into());
    }
    config.validate(store)?;
    check_distinct_devices(config, store)?;
    let lock = lock_store(
        config,
        store,
        DeviceCreation::CreateMissing.lock_mode(),
        wait,
    )?;
    if !force {
        refuse_devices_holding_data(config, store)?;
    }
    let existing: Vec<PathBuf> = device_files(config, store)
        .into_iter()
        .filter(|path| path.exists())
        .collect();
    let result = format_store(config, store, lock, options.preallocate, &existing, note);
    if result.is_err() {
        remove_created_files(config, store, &existing);
    }
    result
}

fn format_store(
    config: &StoreConfig,
    store: &Path,
    lock: StoreLock,
    preallocate: bool,
    existing: &[PathBuf],
    note: &mut dyn FnMut(&str),
) -> StoreCreateResult<FsStats> {
    let OpenedStoreDevice {
        device,
        notes,
        lock,
        ..
    } = open_store_device_locked(config, store, DeviceCreation::CreateMissing, lock)?;
    for line in &notes {
        note(line);
    }
    if preallocate {
        preallocate_created_files(config, store, existing)?;
    }
    let identity = match config.identity {
        Some(identity) => identity,
        None => StoreIdentity::new_random()?,
    };
    let options = FormatOptions {
        fs_block_size_bytes: config.block_size_bytes,
        store_identity: Some(identity.0),
    };
    let filesystem = match flash_aware_pages(config, store)? {
        Some(pages_per_erase_block) => {
            Filesystem::format_flash_aware(device, &options, pages_per_erase_block)?
        }
        None => Filesystem::format(device, &options)?,
    };
    let stats = filesystem.stats();
    drop(filesystem.unmount()?);
    let mut config = config.clone();
    config.identity = Some(identity);
    label_members(&config, store, identity, true)?;
    config.save_new(store)?;
    drop(lock);
    Ok(stats)
}

/// The pages per erase block of the store's one flash device in the flash-aware layout
/// (`None` for every other store; the store file's checks refuse that layout beside
/// other devices).
fn flash_aware_pages(config: &StoreConfig, store: &Path) -> StoreCreateResult<Option<u64>> {
    let [DeviceSpec::Flash(spec)] = config.devices.as_slice() else {
        return Ok(None);
    };
    if spec.layout != FlashLayout::FlashAware {
        return Ok(None);
    }
    let flash = spec
        .flash_config(store)
        .map_err(|reason| FlashStoreError::Spec {
            device: spec.describe(),
            reason,
        })?;
    Ok(Some(u64::from(flash.geometry.pages_per_block)))
}

/// Allocates every block of the regular-file members this creation made (those not in
/// `existing`), before anything is formatted on them.
fn preallocate_created_files(
    config: &StoreConfig,
    store: &Path,
    existing: &[PathBuf],
) -> StoreCreateResult<()> {
    for spec in &config.devices {
        let DeviceSpec::File { path, size_bytes } = spec else {
            continue;
        };
        let path = StoreConfig::resolve_device_path(store, path);
        let regular = std::fs::metadata(&path).is_ok_and(|metadata| metadata.is_file());
        if existing.contains(&path) || !regular {
            continue;
        }
        flashpipe_device::file::allocate_existing(&path).map_err(|error| {
            std::io::Error::new(
                error.kind(),
                format!(
                "{}: cannot preallocate {}: {error}; free space there, or leave out --preallocate to make a sparse image that takes space as it is written",
                path.display(),
                    crate::units::HumanBytes(*size_bytes)
                ),
            )
        })?;
    }
    Ok(())
}

/// Removes the device files and flash images of `config` that a failed creation made:
/// those not in `existing` (best effort: the creation's own error is the one to report).
fn remove_created_files(config: &StoreConfig, store: &Path, existing: &[PathBuf]) {
    for path in device_files(config, store) {
        if !existing.contains(&path) && path.is_file() {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Creates a store of the devices named `device_files` (files relative to the store file,
/// or any other member of a device list, such as `nbd://` URIs), each `size_bytes`, with
/// the default geometry ([`FILE_STORE_BLOCK_SIZE_BYTES`] blocks,
/// [`FILE_STORE_STRIPE_UNIT_BYTES`] stripe unit).
pub fn format_file_store(
    store: &Path,
    device_files: &[&str],
    size_bytes: u64,
    note: &mut dyn FnMut(&str),
) -> StoreCreateResult<FsStats> {
    let config = StoreConfig {
        store_file_version: STORE_FILE_VERSION,
        identity: None,
        block_size_bytes: FILE_STORE_BLOCK_SIZE_BYTES,
        stripe_unit_bytes: FILE_STORE_STRIPE_UNIT_BYTES,
        queue_depth: FILE_STORE_QUEUE_DEPTH,
        devices: parse_device_list(&device_files.join(","), Some(size_bytes))?,
    };
    create_store(&config, store, note)
}
