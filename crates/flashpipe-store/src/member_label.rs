//! Member labels: each regular-file member of a store carries, in one 4 KiB block just past
//! the bytes the store uses (`size_bytes`), the store's identity, its index and the member
//! count (docs/store-file.md, "Member labels", byte by byte). Opening a store reads them
//! before it stripes anything, so members listed out of order, or a member of another
//! store, are named as such (with the order that works) instead of failing later as a
//! damaged super block.
//!
//! A label lies outside the striped space: the file system never reads or writes it. mkfs
//! writes the labels after formatting; a store made before labels gets them at its next
//! read-write open (the file grows by one block); read-only opens write nothing. Only
//! regular files are labelled: block devices, emulated flash images, NBD exports and RAM
//! have no room outside the store's bytes that is theirs alone, and are checked by the
//! other means of opening (size, the super block).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::identity::StoreIdentity;
use crate::store_config::{DeviceSpec, StoreConfig};

/// Bytes of a label block.
pub const LABEL_BYTES: u64 = 4096;
/// The label's magic.
const LABEL_MAGIC: [u8; 8] = *b"FPMEMBER";
/// The label format's version.
const LABEL_VERSION: u32 = 1;
/// Bytes of the label covered by its checksum (the checksum follows them).
const LABEL_CHECKED_BYTES: usize = 40;

/// What a member's label says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberLabel {
    /// The store it belongs to.
    pub identity: StoreIdentity,
    /// Its place in the store's device list, from 0.
    pub index: u32,
    /// Members of the store.
    pub member_count: u32,
}

/// Why a store's members do not fit its store file.
#[derive(Debug, thiserror::Error)]
pub enum MemberLabelError {
    /// The members are the store's own, listed in another order.
    #[error("store {store}: members out of order: {placement}; list them as {order}")]
    OutOfOrder {
        /// The store file.
        store: PathBuf,
        /// Where each member is ("a.img is member 1, b.img is member 0").
        placement: String,
        /// The device list that works ("b.img,a.img").
        order: String,
    },
    /// A member belongs to another store.
    #[error("store {store}: device {path} is member {index} of another store (identity {member_identity}), not of this one (identity {store_identity}); list this store's own devices in its store file")]
    ForeignMember {
        /// The store file.
        store: PathBuf,
        /// The member's path.
        path: PathBuf,
        /// Its index in the other store.
        index: u32,
        /// The other store's identity.
        member_identity: StoreIdentity,
        /// This store's identity.
        store_identity: StoreIdentity,
    },
    /// A member's label says the store has another number of members.
    #[error("store {store}: device {path} belongs to a store of {label_count} members with this identity, but the store file lists {listed_count}; list all {label_count} members in their order")]
    WrongCount {
        /// The store file.
        store: PathBuf,
        /// The member's path.
        path: PathBuf,
        /// The count its label gives.
        label_count: u32,
        /// The count the store file lists.
        listed_count: usize,
    },
    /// A label could not be read or written.
    #[error("member label of {path}: {source}")]
    Io {
        /// The member's path.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}

impl MemberLabel {
    /// The label block's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = vec![0u8; LABEL_BYTES as usize];
        bytes[0..8].copy_from_slice(&LABEL_MAGIC);
        bytes[8..12].copy_from_slice(&LABEL_VERSION.to_le_bytes());
        bytes[12..16].copy_from_slice(&self.index.to_le_bytes());
        bytes[16..20].copy_from_slice(&self.member_count.to_le_bytes());
        bytes[24..40].copy_from_slice(&self.identity.0);
        let checksum = crc32c::crc32c(&bytes[..LABEL_CHECKED_BYTES]);
        bytes[40..44].copy_from_slice(&checksum.to_le_bytes());
        bytes
    }

    /// The label in `bytes`, or `None` when they hold none (no magic, another version,
    /// a bad checksum or impossible values: an unlabelled or damaged block, not trusted).
    pub fn decode(bytes: &[u8]) -> Option<MemberLabel> {
        if bytes.len() < 44 || bytes[0..8] != LABEL_MAGIC {
            return None;
        }
        let u32_at = |offset: usize| {
            u32::from_le_bytes(bytes[offset..offset + 4].try_into().expect("4 bytes"))
        };
        if u32_at(8) != LABEL_VERSION || u32_at(40) != crc32c::crc32c(&bytes[..LABEL_CHECKED_BYTES])
        {
            return None;
        }
        let mut identity = [0u8; 16];
        identity.copy_from_slice(&bytes[24..40]);
        let label = MemberLabel {
            identity: StoreIdentity(identity),
            index: u32_at(12),
            member_count: u32_at(16),
        };
        (label.index < label.member_count).then_some(label)
    }
}

/// The regular-file members of a store: (index, path, size_bytes).
fn file_members(config: &StoreConfig, store_file: &Path) -> Vec<(usize, PathBuf, u64)> {
    config
        .devices
        .iter()
        .enumerate()
        .filter_map(|(index, spec)| match spec {
            DeviceSpec::File { path, size_bytes } => {
                let path = StoreConfig::resolve_device_path(store_file, path);
                let regular = std::fs::metadata(&path)
                    .map(|metadata| metadata.is_file())
                    .unwrap_or(false);
                regular.then_some((index, path, *size_bytes))
            }
            _ => None,
        })
        .collect()
}

/// The label of the member at `path` whose store uses `size_bytes` of it, if it has one.
pub fn read_label(path: &Path, size_bytes: u64) -> Result<Option<MemberLabel>, MemberLabelError> {
    let io = |source| MemberLabelError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let length = file.metadata().map_err(io)?.len();
    if length < size_bytes + LABEL_BYTES {
        return Ok(None);
    }
    let mut bytes = vec![0u8; LABEL_BYTES as usize];
    file.read_exact_at(&mut bytes, size_bytes).map_err(io)?;
    Ok(MemberLabel::decode(&bytes))
}

/// Checks the labels of the store's file members against its store file: refuses
/// members out of order (naming the order that works), a member of another store, or a
/// member of a store of another size. Unlabelled members pass.
pub fn check_member_labels(
    config: &StoreConfig,
    store_file: &Path,
) -> Result<(), MemberLabelError> {
    let members = file_members(config, store_file);
    let mut labels = Vec::with_capacity(members.len());
    for (index, path, size_bytes) in &members {
        labels.push((*index, path.clone(), read_label(path, *size_bytes)?));
    }
    let mut misplaced = false;
    for (index, path, label) in &labels {
        let Some(label) = label else { continue };
        if let Some(identity) = config.identity {
            if label.identity != identity {
                return Err(MemberLabelError::ForeignMember {
                    store: store_file.to_path_buf(),
                    path: path.clone(),
                    index: label.index,
                    member_identity: label.identity,
                    store_identity: identity,
                });
            }
        }
        if label.member_count as usize != config.devices.len() {
            return Err(MemberLabelError::WrongCount {
                store: store_file.to_path_buf(),
                path: path.clone(),
                label_count: label.member_count,
                listed_count: config.devices.len(),
            });
        }
        misplaced |= label.index as usize != *index;
    }
    if !misplaced {
        return Ok(());
    }
    let name = |index: usize| -> String {
        match &config.devices[index] {
            DeviceSpec::File { path, .. } => path.display().to_string(),
            other => other.describe(),
        }
    };
    let placement = labels
        .iter()
        .filter_map(|(index, _, label)| {
            label.map(|label| format!("{} is member {}", name(*index), label.index))
        })
        .collect::<Vec<_>>()
        .join(", ");
    let mut order: Vec<Option<String>> = vec![None; config.devices.len()];
    for (index, _, label) in &labels {
        if let Some(label) = label {
            order[label.index as usize] = Some(name(*index));
        }
    }
    let listed: Vec<usize> = (0..config.devices.len()).collect();
    let unlabelled: Vec<usize> = listed
        .into_iter()
        .filter(|index| {
            !labels
                .iter()
                .any(|(at, _, label)| at == index && label.is_some())
        })
        .collect();
    let mut rest = unlabelled.into_iter();
    let order = order
        .into_iter()
        .map(|slot| slot.or_else(|| rest.next().map(name)).unwrap_or_default())
        .collect::<Vec<_>>()
        .join(",");
    Err(MemberLabelError::OutOfOrder {
        store: store_file.to_path_buf(),
        placement,
        order,
    })
}

/// The identity the first labelled member carries (a store file that lost its identity,
/// or a version-1 store file beside labelled members, takes it back from there).
pub fn labelled_identity(
    config: &StoreConfig,
    store_file: &Path,
) -> Result<Option<StoreIdentity>, MemberLabelError> {
    for (_, path, size_bytes) in file_members(config, store_file) {
        if let Some(label) = read_label(&path, size_bytes)? {
            return Ok(Some(label.identity));
        }
    }
    Ok(None)
}

/// Writes a label on every file member that lacks one, or on every one with
/// `replace` (mkfs, over labels of a store it formatted over); the caller holds the
/// store's exclusive lock. Returns how many it wrote.
pub fn label_members(
    config: &StoreConfig,
    store_file: &Path,
    identity: StoreIdentity,
    replace: bool,
) -> Result<usize, MemberLabelError> {
    let member_count = config.devices.len() as u32;
    let mut written = 0;
    for (index, path, size_bytes) in file_members(config, store_file) {
        if !replace && read_label(&path, size_bytes)?.is_some() {
            continue;
        }
        let io = |source| MemberLabelError::Io {
            path: path.clone(),
            source,
        };
        let label = MemberLabel {
            identity,
            index: index as u32,
            member_count,
        };
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(io)?;
        file.write_all_at(&label.encode(), size_bytes).map_err(io)?;
        file.sync_all().map_err(io)?;
        written += 1;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_round_trips_and_a_damaged_one_is_no_label() {
        let label = MemberLabel {
            identity: StoreIdentity([7; 16]),
            index: 1,
            member_count: 2,
        };
        let bytes = label.encode();
        assert_eq!(bytes.len() as u64, LABEL_BYTES);
        assert_eq!(&bytes[0..8], b"FPMEMBER");
        assert_eq!(MemberLabel::decode(&bytes), Some(label));
        for offset in [0, 8, 12, 16, 24, 39, 40] {
            let mut damaged = bytes.clone();
            damaged[offset] ^= 1;
            assert_eq!(MemberLabel::decode(&damaged), None, "byte {offset} flipped");
        }
        assert_eq!(MemberLabel::decode(&vec![0u8; 4096]), None);
        let impossible = MemberLabel { index: 2, ..label }.encode();
        assert_eq!(
            MemberLabel::decode(&impossible),
            None,
            "index past the count"
        );
    }
}
