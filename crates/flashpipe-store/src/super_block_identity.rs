//! The store identity in the file system's super block (format version 4,
//! docs/format.md) compared with the store file's (docs/store-file.md): a store file
//! that names another store's devices is refused at every open, whatever the device kind
//! (file images, flash images, block devices, `nbd://` exports; the member labels cover
//! only regular-file members), and `fsck` reports it as a finding. A read-write open of
//! an image formatted before identities gives the file system the store file's identity
//! (written by the next commit); a read-only open changes nothing.

use std::path::Path;

use flashpipe_device::BlockDevice;
use flashpipe_fs::{Filesystem, Finding, FsckError, FsckOptions, FsckReport, Structure};

use crate::identity::StoreIdentity;
use crate::store::StoreOpenError;

/// Refuses when the store file's identity (`expected`) and the super block's (`found`)
/// are both known and differ.
pub fn check_super_block_identity(
    store_file: &Path,
    expected: Option<StoreIdentity>,
    found: Option<[u8; 16]>,
) -> Result<(), StoreOpenError> {
    match (expected, found) {
        (Some(expected), Some(found)) if expected.0 != found => {
            Err(StoreOpenError::OtherStoresDevices {
                path: store_file.to_path_buf(),
                expected,
                found: StoreIdentity(found),
            })
        }
        _ => Ok(()),
    }
}

/// Gives a read-write mounted file system without an identity the store's `identity`
/// (taken by its next commit); returns the note to show, or `None` when it had it.
/// The caller has checked with [`check_super_block_identity`] that they do not differ.
pub fn give_super_block_identity(
    store_file: &Path,
    filesystem: &mut Filesystem,
    identity: StoreIdentity,
) -> Result<Option<String>, StoreOpenError> {
    if filesystem.store_identity().is_some() {
        assert_eq!(
            filesystem.store_identity(),
            Some(identity.0),
            "the identities were compared before"
        );
        return Ok(None);
    }
    filesystem
        .set_store_identity(identity.0)
        .map_err(|source| StoreOpenError::SuperBlockIdentity {
            path: store_file.to_path_buf(),
            source,
        })?;
    Ok(Some(format!(
        "the file system had no store identity yet (formatted before identities); its super block takes {identity} at the next commit"
    )))
}

/// The finding `fsck` adds when the store file (identity `expected`) points at the
/// devices of another store (the super block identity in `report`): not repairable, as
/// repair never changes which store a file system belongs to.
pub fn identity_finding(
    store_file: &Path,
    expected: Option<StoreIdentity>,
    report: &FsckReport,
) -> Option<Finding> {
    let error = check_super_block_identity(store_file, expected, report.store_identity).err()?;
    Some(Finding::new(
        Structure::SuperBlock,
        None,
        error.to_string(),
        false,
    ))
}

/// fsck of a store's opened (unmounted) device, with [`identity_finding`] first when the
/// store file (identity `expected`) points at another store's devices. Repair is then
/// refused before it writes anything, as the file system belongs to the other store
/// (this costs one read-only pass before a repair).
pub fn fsck_store_device(
    device: &mut dyn BlockDevice,
    options: FsckOptions,
    store_file: &Path,
    expected: Option<StoreIdentity>,
) -> Result<FsckReport, FsckError> {
    if options.repair {
        let mut preview = flashpipe_fs::fsck(device, false)?;
        if let Some(finding) = identity_finding(store_file, expected, &preview) {
            preview.findings.insert(0, finding);
            preview.repair_refused = Some(
                "the devices hold another store's file system; repair it through that store's own store file".to_string(),
            );
            return Ok(preview);
        }
    }
    let mut report = flashpipe_fs::fsck_with_options(device, options)?;
    if let Some(finding) = identity_finding(store_file, expected, &report) {
        report.findings.insert(0, finding);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_two_known_different_identities_are_refused() {
        let path = Path::new("s.toml");
        let one = StoreIdentity([1; 16]);
        let two = StoreIdentity([2; 16]);
        assert!(check_super_block_identity(path, Some(one), Some(one.0)).is_ok());
        assert!(check_super_block_identity(path, None, Some(one.0)).is_ok());
        assert!(check_super_block_identity(path, Some(one), None).is_ok());
        let message = check_super_block_identity(path, Some(one), Some(two.0))
            .unwrap_err()
            .to_string();
        assert!(
            message.contains(&one.to_string()) && message.contains(&two.to_string()),
            "{message}"
        );
        assert!(message.contains("another store"), "{message}");
    }
}
