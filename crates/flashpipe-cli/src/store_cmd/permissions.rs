//! Who may read what `mkfs` creates: images, flash images and store files are made
//! 0600 (`mkfs --mode OCTAL` chooses another mode) under a private umask, so no moment
//! exists where a new image is open to others; `fsck` warns (a finding on standard
//! error, not a failure) about a store file or image that others may read or write.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use flashpipe_store::store::device_files;
use flashpipe_store::StoreConfig;

/// The mode of what `mkfs` creates unless `--mode` says otherwise.
pub const DEFAULT_CREATED_MODE: u32 = 0o600;

/// Parses `--mode`: octal digits, at most 0777 (no set-id or sticky bits).
pub fn parse_mode(text: &str) -> Result<u32, String> {
    let digits = text.strip_prefix("0o").unwrap_or(text);
    let mode = u32::from_str_radix(digits, 8)
        .map_err(|_| format!("--mode {text} is not an octal mode such as 600 or 640"))?;
    if digits.is_empty() || mode > 0o777 {
        return Err(format!(
            "--mode {text} is out of range: give permission bits alone, 000 to 777 (such as 600 or 640)"
        ));
    }
    if mode & 0o600 != 0o600 {
        return Err(format!(
            "--mode {text} leaves the owner without read and write; flashpipe must read and write its own images (give 600 or wider)"
        ));
    }
    Ok(mode)
}

/// Holds the process's umask at 077 while files are created; restored when dropped.
pub struct PrivateUmask {
    previous: libc::mode_t,
}

impl PrivateUmask {
    /// Sets the umask to 077.
    pub fn set() -> PrivateUmask {
        // SAFETY: umask(2) only swaps the process's file mode creation mask.
        let previous = unsafe { libc::umask(0o077) };
        PrivateUmask { previous }
    }
}

impl Drop for PrivateUmask {
    fn drop(&mut self) {
        // SAFETY: as in `set`.
        unsafe { libc::umask(self.previous) };
    }
}

/// The regular files of a store (its store file, its file devices and flash images) that
/// exist now.
pub fn existing_store_files(config: &StoreConfig, store: &Path) -> Vec<PathBuf> {
    let mut files = device_files(config, store);
    files.push(store.to_path_buf());
    files.retain(|path| {
        std::fs::symlink_metadata(path)
            .map(|metadata| metadata.file_type().is_file())
            .unwrap_or(false)
    });
    files
}

/// Gives `mode` to the files of the store that were not there before (`existing`).
pub fn apply_mode(
    config: &StoreConfig,
    store: &Path,
    existing: &[PathBuf],
    mode: u32,
) -> Result<(), String> {
    for path in existing_store_files(config, store) {
        if existing.contains(&path) && path != store {
            continue;
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).map_err(
            |error| {
                format!(
                    "the store is made, but {} cannot be given mode {mode:o}: {error}",
                    path.display()
                )
            },
        )?;
    }
    Ok(())
}

/// Warnings about the store's files that others than their owner may read or write.
pub fn open_to_others(config: &StoreConfig, store: &Path) -> Vec<String> {
    let mut warnings = Vec::new();
    for path in existing_store_files(config, store) {
        let Ok(metadata) = std::fs::metadata(&path) else {
            continue;
        };
        let mode = metadata.mode() & 0o777;
        if mode & 0o066 == 0 {
            continue;
        }
        let (who, what) = match (mode & 0o044 != 0, mode & 0o022 != 0) {
            (true, true) => ("readable and writable", "read and change"),
            (true, false) => ("readable", "read"),
            _ => ("writable", "change"),
        };
        warnings.push(format!(
            "{} is {who} by users other than its owner (mode {mode:03o}); they can {what} the store's data without flashpipe: chmod 600 {}",
            path.display(),
            path.display()
        ));
    }
    warnings
}
