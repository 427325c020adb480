//! A store's identity: a random 16-byte UUID (version 4) made at mkfs and written into
//! the store file (`identity`, store file version 2, docs/store-file.md). A server tells
//! it in its welcome, and a client compares it with the store file it was asked to use,
//! so a server holding another store (a renamed one, a squatter's) is refused.
//!
//! A store file of version 1 has none: [`ensure_identity`] gives it one at its next
//! read-write open, editing the text in place (the lock is on the file's inode, so it is
//! never replaced by a rename): the new text is first written beside it as
//! `STORE.identity-upgrade` (the old text, kept until the edit is durable), then written
//! over the file and flushed, then the copy is removed. Read-only opens change nothing.

use std::fmt;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::store_config::StoreConfig;

/// A store's identity (16 random bytes, a version-4 UUID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StoreIdentity(pub [u8; 16]);

/// What a store file says of the server that may hold its store: the file's owner (who,
/// besides root, may run it) and the store's identity (the store the server must hold;
/// `None` for a store file without one yet). The CLI and the Python package check a
/// server against it before they trust it (docs/security.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerFacts {
    /// The store file's owner.
    pub owner_uid: u32,
    /// The store's identity, where the store file has one.
    pub store_identity: Option<[u8; 16]>,
}

/// [`ServerFacts`] read from the store file at `store_file` (through the same path the
/// server's socket is found by).
pub fn server_facts(store_file: &Path) -> std::io::Result<ServerFacts> {
    use std::os::unix::fs::MetadataExt;
    let metadata = std::fs::metadata(store_file)?;
    let store_identity = StoreConfig::load(store_file)
        .ok()
        .and_then(|config| config.identity)
        .map(|identity| identity.0);
    Ok(ServerFacts {
        owner_uid: metadata.uid(),
        store_identity,
    })
}

/// Why an identity could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The operating system gave no random bytes.
    #[error("cannot read random bytes for the store's identity: {0}")]
    Random(std::io::Error),
    /// The store file could not be rewritten.
    #[error("cannot write the identity into the store file {path}: {source}; the store file's old text is in {backup} if the store file is damaged")]
    Write {
        /// The store file.
        path: PathBuf,
        /// The copy of its old text.
        backup: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The edited text did not parse back (a store file of an unexpected shape).
    #[error("cannot add an identity to the store file {path}: {reason}; add a line `identity = \"{identity}\"` at its top and set store_file_version = 2 by hand")]
    Edit {
        /// The store file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
        /// The identity meant for it.
        identity: StoreIdentity,
    },
}

impl StoreIdentity {
    /// A new random identity (version-4 UUID bits set).
    pub fn new_random() -> Result<StoreIdentity, IdentityError> {
        let mut bytes = [0u8; 16];
        let mut filled = 0;
        while filled < bytes.len() {
            // SAFETY: getrandom writes at most the given length into the live buffer.
            let result = unsafe {
                libc::getrandom(bytes[filled..].as_mut_ptr().cast(), bytes.len() - filled, 0)
            };
            if result < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(IdentityError::Random(error));
            }
            filled += result as usize;
        }
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        if bytes.iter().all(|&byte| byte == 0) {
            bytes[0] = 1;
        }
        Ok(StoreIdentity(bytes))
    }
}

impl fmt::Display for StoreIdentity {
    /// The usual hyphenated form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&flashpipe_fs::store_identity_text(&self.0))
    }
}

impl FromStr for StoreIdentity {
    type Err = String;

    fn from_str(text: &str) -> Result<StoreIdentity, String> {
        let bad = || {
            format!("identity {text} is not a UUID (32 hex digits as xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)")
        };
        let bytes = text.as_bytes();
        if bytes.len() != 36 {
            return Err(bad());
        }
        let mut identity = [0u8; 16];
        let mut digits = Vec::with_capacity(32);
        for (index, &byte) in bytes.iter().enumerate() {
            if matches!(index, 8 | 13 | 18 | 23) {
                if byte != b'-' {
                    return Err(bad());
                }
                continue;
            }
            digits.push((byte as char).to_digit(16).ok_or_else(bad)? as u8);
        }
        for (index, pair) in digits.chunks(2).enumerate() {
            identity[index] = pair[0] << 4 | pair[1];
        }
        if identity.iter().all(|&byte| byte == 0) {
            return Err(format!("identity {text} is all zero, which means none"));
        }
        Ok(StoreIdentity(identity))
    }
}

impl Serialize for StoreIdentity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for StoreIdentity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<StoreIdentity, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The store file's text with `identity` added at its top and its version set to 2.
fn text_with_identity(text: &str, identity: StoreIdentity) -> String {
    let mut out = format!("identity = \"{identity}\"\n");
    let mut version_set = false;
    for line in text.lines() {
        if !version_set && line.trim_start().starts_with("store_file_version") {
            out.push_str("store_file_version = 2\n");
            version_set = true;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !version_set {
        out = format!("store_file_version = 2\n{out}");
    }
    out
}

/// Gives a store file without an identity one (see the module's documentation): the
/// identity its members' labels carry when they have one (`known`), a new random one
/// otherwise; returns the identity and whether the store file changed. The caller holds
/// the store's exclusive lock.
pub fn ensure_identity(
    store_file: &Path,
    config: &mut StoreConfig,
    known: Option<StoreIdentity>,
) -> Result<(StoreIdentity, bool), IdentityError> {
    if let Some(identity) = config.identity {
        return Ok((identity, false));
    }
    let identity = match known {
        Some(identity) => identity,
        None => StoreIdentity::new_random()?,
    };
    let mut backup_name = store_file.as_os_str().to_owned();
    backup_name.push(".identity-upgrade");
    let backup = PathBuf::from(backup_name);
    let write_error = |source| IdentityError::Write {
        path: store_file.to_path_buf(),
        backup: backup.clone(),
        source,
    };
    let old_text = std::fs::read_to_string(store_file).map_err(write_error)?;
    let new_text = text_with_identity(&old_text, identity);
    let edit_error = |reason: String| IdentityError::Edit {
        path: store_file.to_path_buf(),
        reason,
        identity,
    };
    let parsed =
        StoreConfig::parse(&new_text, store_file).map_err(|e| edit_error(e.to_string()))?;
    if parsed.identity != Some(identity) || parsed.devices != config.devices {
        return Err(edit_error(
            "the edited text does not read back as the same store".to_string(),
        ));
    }
    write_durably(&backup, old_text.as_bytes(), true).map_err(write_error)?;
    write_durably(store_file, new_text.as_bytes(), false).map_err(write_error)?;
    std::fs::remove_file(&backup).map_err(write_error)?;
    *config = parsed;
    Ok((identity, true))
}

/// Writes `bytes` as the whole of `path` and flushes it: a new file (mode 0600) when
/// `create`, else the existing file overwritten in place (same inode, owner and mode).
fn write_durably(path: &Path, bytes: &[u8], create: bool) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(create)
        .truncate(create)
        .mode(0o600)
        .open(path)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(bytes)?;
    file.set_len(bytes.len() as u64)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_prints_and_parses_as_a_version_4_uuid() {
        let identity = StoreIdentity::new_random().expect("random bytes");
        assert_eq!(identity.0[6] >> 4, 4, "version 4");
        assert_eq!(identity.0[8] >> 6, 0b10, "RFC 4122 variant");
        let text = identity.to_string();
        assert_eq!(text.len(), 36);
        assert_eq!(text.parse::<StoreIdentity>(), Ok(identity));
        assert_ne!(StoreIdentity::new_random().expect("random bytes"), identity);
        for bad in [
            "",
            "00000000-0000-0000-0000-000000000000",
            "0005a966b1cc4d228c0fe12811a234c9",
            "0005a966-b1cc-4d22-8c0f-e12811a234cg",
            "0005a966-b1cc-4d22-8c0f+e12811a234c9",
        ] {
            assert!(bad.parse::<StoreIdentity>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_upgrade_puts_the_identity_first_and_sets_version_2() {
        let identity: StoreIdentity = "0005a966-b1cc-4d22-8c0f-e12811a234c9".parse().unwrap();
        let old = "# comment\nstore_file_version = 1\nqueue_depth = 32\n\n[[devices]]\nkind = \"ram\"\nsize_bytes = 1048576\n";
        let new = text_with_identity(old, identity);
        assert!(new.starts_with("identity = \"0005a966-b1cc-4d22-8c0f-e12811a234c9\"\n# comment\nstore_file_version = 2\n"));
        assert!(new.ends_with("[[devices]]\nkind = \"ram\"\nsize_bytes = 1048576\n"));
    }
}
