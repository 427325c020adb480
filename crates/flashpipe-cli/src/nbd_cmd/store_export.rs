//! `--export NAME=store:STORE.toml[,rw]`: a store's device stack as one NBD export.
//!
//! The devices are opened as every store command opens them (`flashpipe-store`: file
//! devices, flash members under their FTL, remote `nbd` members, striped into one
//! device), under the store's locks: shared for a read-only export (the default), so no
//! command mounts the file system for writing meanwhile; exclusive with `,rw`, so no one
//! mounts it at all. The locks live inside the exported device and are released when the
//! server hands the device back at shutdown. The NBD crate (the device layer) knows
//! nothing of stores: it gets a `BlockDevice`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flashpipe_device::{
    BlockDevice, Clock, Completion, DeviceError, DeviceInfo, Rejected, Request,
};
use flashpipe_ftl::sectors::{SectorDevice, SECTOR_BYTES};
use flashpipe_nbd::server::{Export, InitialAllocation};
use flashpipe_store::store::{open_store_device, DeviceCreation};
use flashpipe_store::store_config::DeviceSpec;
use flashpipe_store::store_lock::StoreLock;
use flashpipe_store::StoreConfig;

use crate::error_kind::{ErrorKind, Failure};

/// The device kind of a store export (`NAME=store:PATH`).
pub const STORE_EXPORT_KIND: &str = "store";

/// What `store:...` names: the store file, and whether clients may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreExportSpec {
    /// The store file (`flashpipe mkfs` wrote it).
    pub store_file: PathBuf,
    /// `,rw`: writable (exclusive lock); read-only otherwise (shared lock).
    pub writable: bool,
}

impl StoreExportSpec {
    /// Parses `PATH`, `PATH,ro` or `PATH,rw` (the text after `store:`).
    pub fn parse(text: &str) -> Result<StoreExportSpec, String> {
        let (path, writable) = match text.rsplit_once(',') {
            Some((path, "rw")) => (path, true),
            Some((path, "ro")) => (path, false),
            Some((_, other)) => {
                return Err(format!(
                    "unknown store export option \"{other}\" (store:STORE.toml, store:STORE.toml,ro or store:STORE.toml,rw)"
                ))
            }
            None => (text, false),
        };
        if path.is_empty() {
            return Err("store: names no store file (store:STORE.toml[,rw])".to_string());
        }
        Ok(StoreExportSpec {
            store_file: PathBuf::from(path),
            writable,
        })
    }
}

/// Opens the store's device stack under its locks as export `name`.
pub fn open_store_export(name: &str, text: &str) -> Result<Export, Box<dyn std::error::Error>> {
    let spec = StoreExportSpec::parse(text).map_err(|reason| {
        Failure::invalid_input(format!("export `{name}=store:{text}`: {reason}"))
    })?;
    let config = StoreConfig::load(&spec.store_file).map_err(|error| {
        Failure::context(&error, format!("export `{name}=store:{text}`: {error}"))
    })?;
    let creation = if spec.writable {
        DeviceCreation::MustExist
    } else {
        DeviceCreation::ReadOnly
    };
    let opened = open_store_device(&config, &spec.store_file, creation).map_err(|error| {
        Failure::context(&error, format!("export `{name}=store:{text}`: {error}"))
    })?;
    let access = if spec.writable {
        "read-write, store locked exclusively"
    } else {
        "read-only, store locked shared"
    };
    Ok(Export {
        name: name.to_string(),
        description: format!(
            "the device stack of store {} ({} device(s), {access})",
            spec.store_file.display(),
            config.devices.len()
        ),
        device: Box::new(LockedStoreDevice {
            device: sectors_when_flash(&config, opened.device)?,
            _lock: opened.lock,
        }),
        read_only: !spec.writable,
        trim_reads_zeroes: false,
        initial_allocation: InitialAllocation::AllData,
    })
}

/// A store with flash members (emulated, or on a cluster) is exported in 512-byte sectors (the FTL's
/// read-merge-write, `flashpipe_ftl::sectors`), as an SSD takes requests smaller than its
/// pages; other stores keep their devices' block.
fn sectors_when_flash(
    config: &StoreConfig,
    device: Box<dyn BlockDevice>,
) -> Result<Box<dyn BlockDevice>, Box<dyn std::error::Error>> {
    let flash = config
        .devices
        .iter()
        .any(|spec| matches!(spec, DeviceSpec::Flash(_) | DeviceSpec::Cluster(_)));
    if !flash || device.info().block_size_bytes <= SECTOR_BYTES {
        return Ok(device);
    }
    Ok(Box::new(SectorDevice::new(device)?))
}

/// Refuses an export of `served_store` itself: `flashpipe serve STORE` holds that store
/// exclusively, and its file system would be written under the clients' feet.
pub fn refuse_store_exports_of(
    specs: &[String],
    served_store: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let served = canonical(served_store);
    for spec in specs {
        let Some((name, device)) = spec.split_once('=') else {
            continue;
        };
        let Some(text) = device.strip_prefix(&format!("{STORE_EXPORT_KIND}:")) else {
            continue;
        };
        let Ok(export) = StoreExportSpec::parse(text) else {
            continue;
        };
        if canonical(&export.store_file) == served {
            return Err(Failure::new(
                ErrorKind::StoreInUse,
                format!(
                    "export `{name}` names store {}, which this `flashpipe serve` serves: a store's device stack is exported only while no file system runs on it (export another store, or stop serving this one)",
                    served_store.display()
                ),
            )
            .into());
        }
    }
    Ok(())
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// A device (a store's striped stack, or an exported device path) holding its locks for
/// as long as it lives.
pub(super) struct LockedStoreDevice {
    device: Box<dyn BlockDevice>,
    _lock: StoreLock,
}

impl LockedStoreDevice {
    /// `device`, keeping `lock` until it is dropped.
    pub(super) fn new(device: Box<dyn BlockDevice>, lock: StoreLock) -> LockedStoreDevice {
        LockedStoreDevice {
            device,
            _lock: lock,
        }
    }
}

impl BlockDevice for LockedStoreDevice {
    fn info(&self) -> &DeviceInfo {
        self.device.info()
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.device.clock()
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        self.device.submit(request)
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        self.device.poll_completions(completions)
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        self.device.wait_completions(completions)
    }

    fn in_flight(&self) -> usize {
        self.device.in_flight()
    }

    fn copies_by_reference(&self) -> bool {
        self.device.copies_by_reference()
    }

    fn copy_alignment_blocks(&self) -> u64 {
        self.device.copy_alignment_blocks()
    }

    fn preferred_block_size_bytes(&self) -> u32 {
        self.device.preferred_block_size_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_export_specs_parse_and_bad_options_are_refused() {
        let spec = StoreExportSpec::parse("/a/s.toml").unwrap();
        assert_eq!(spec.store_file, PathBuf::from("/a/s.toml"));
        assert!(!spec.writable);
        assert!(StoreExportSpec::parse("s.toml,rw").unwrap().writable);
        assert!(!StoreExportSpec::parse("s.toml,ro").unwrap().writable);
        let error = StoreExportSpec::parse("s.toml,wr").unwrap_err();
        assert!(error.contains("unknown store export option"), "{error}");
        assert!(StoreExportSpec::parse("").is_err());
        assert!(StoreExportSpec::parse(",rw").is_err());
    }
}
