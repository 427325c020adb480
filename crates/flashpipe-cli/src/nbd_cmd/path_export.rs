//! Exports of a device path (`NAME=PATH`, `NAME=file:PATH`, `NAME=flash:PRESET:IMAGE`)
//! under the locks a store takes on its devices (`flashpipe_store::store_lock`).
//!
//! A writable export locks its path exclusively; a read-only one (`--read-only`, or
//! `--shared`, which makes path exports read-only) takes a shared lock. The locks are
//! `flock`s on an open file of its own, so they exclude other processes and this one
//! alike: a store opened by any command (or by the `flashpipe serve` that runs the
//! export) cannot take a device exported meanwhile, and an export cannot take a device a
//! store holds; the refusal names the holder and what to do instead (`store:STORE.toml`,
//! which exports the whole stack under the store's locks, or `--shared` beside the
//! store's readers). A flash image is locked with its `.meta`, exclusively (the FTL
//! writes both even for reads). The locks live inside the exported device and are
//! released when the server hands the device back at shutdown.

use std::path::{Path, PathBuf};

use flashpipe_nbd::server::{Export, ExportDeviceSpec};
use flashpipe_store::store::{device_files, flash_metadata_path};
use flashpipe_store::store_lock::{LockMode, LockWait, StoreLock, StoreLockError};
use flashpipe_store::StoreConfig;

use super::store_export::LockedStoreDevice;

/// Why an export of a device path was refused.
#[derive(Debug, thiserror::Error)]
pub enum PathExportError {
    /// Another holder (a store, an export, any process) has a conflicting lock.
    #[error(
        "export `{name}`: {} is in use by {holder}; exporting it {access} would {harm}. Export the store whose device it is as `{name}=store:STORE.toml` (under the store's locks), or the device read-only with --shared while only readers hold it",
        path.display()
    )]
    Held {
        /// The export's name.
        name: String,
        /// The device path.
        path: PathBuf,
        /// Who holds it.
        holder: String,
        /// "read-write" or "read-only".
        access: &'static str,
        /// What would go wrong.
        harm: &'static str,
    },
    /// The path cannot be locked.
    #[error("export `{name}`: {source}")]
    Lock {
        /// The export's name.
        name: String,
        /// The lock's error.
        source: StoreLockError,
    },
    /// The path is a device of the store this process serves.
    #[error(
        "export `{name}` names {}, a device of store {}, which this `flashpipe serve` serves: its file system would be written under the clients' feet; export another device, or stop serving this store and export it as `{name}=store:STORE.toml`",
        path.display(),
        store.display()
    )]
    DeviceOfServedStore {
        /// The export's name.
        name: String,
        /// The device path.
        path: PathBuf,
        /// The served store file.
        store: PathBuf,
    },
}

/// Locks `paths` (a device, or a flash image and its `.meta`) for export `name`:
/// exclusively when `writable`, shared otherwise; refuses at once when held.
pub fn lock_export_paths(
    name: &str,
    paths: &[PathBuf],
    writable: bool,
) -> Result<StoreLock, PathExportError> {
    let mode = if writable {
        LockMode::Exclusive
    } else {
        LockMode::Shared
    };
    let mut lock = StoreLock::new(mode);
    let mut sorted = paths.to_vec();
    sorted.sort();
    match lock.lock_all(&sorted, LockWait::Fail) {
        Ok(()) => Ok(lock),
        Err(StoreLockError::Held { path, holder }) => Err(PathExportError::Held {
            name: name.to_string(),
            path,
            holder,
            access: if writable { "read-write" } else { "read-only" },
            harm: if writable {
                "let its clients write under that holder"
            } else {
                "let its clients read while that holder writes"
            },
        }),
        Err(source) => Err(PathExportError::Lock {
            name: name.to_string(),
            source,
        }),
    }
}

/// Opens a file or block device path as export `name` under its lock (see the module's
/// documentation); read-only exports take a shared lock.
pub fn open_path_export(
    name: &str,
    device_spec: &ExportDeviceSpec,
    path: &Path,
    read_only: bool,
) -> Result<Export, Box<dyn std::error::Error>> {
    let lock = lock_export_paths(name, &[path.to_path_buf()], !read_only)?;
    let mut export = Export::open(name, device_spec)?;
    let access = if read_only {
        "read-only, locked shared"
    } else {
        "locked exclusively"
    };
    export.description = format!("{} ({access})", export.description);
    export.read_only = read_only;
    export.device = Box::new(LockedStoreDevice::new(export.device, lock));
    Ok(export)
}

/// The files locking a flash image takes: the image and its `.meta`.
pub fn flash_image_paths(image: &Path) -> Vec<PathBuf> {
    vec![image.to_path_buf(), flash_metadata_path(image)]
}

/// Refuses a path export naming a device of `served_store` (the store this `flashpipe
/// serve` serves): its own lock would refuse it too, but with a message about opening a
/// store twice.
pub fn refuse_device_exports_of(
    specs: &[String],
    served_store: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let config = StoreConfig::load(served_store)?;
    let devices: Vec<PathBuf> = device_files(&config, served_store)
        .iter()
        .map(|path| canonical(path))
        .collect();
    for spec in specs {
        let Ok((name, device_spec)) = flashpipe_nbd::server::parse_export_spec(spec) else {
            continue;
        };
        let path = match &device_spec {
            ExportDeviceSpec::File { path } => path.clone(),
            ExportDeviceSpec::Other { kind, rest } if kind == "flash" => {
                match rest.split_once(':') {
                    Some((_, image)) => PathBuf::from(image),
                    None => continue,
                }
            }
            _ => continue,
        };
        if devices.contains(&canonical(&path)) {
            return Err(PathExportError::DeviceOfServedStore {
                name,
                path,
                store: served_store.to_path_buf(),
            }
            .into());
        }
    }
    Ok(())
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}
