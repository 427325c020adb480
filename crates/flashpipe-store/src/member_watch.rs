//! A watch on a running store's device images: one that shrank or was unlinked under
//! the process holding the store is found before the next write goes to it.
//!
//! At a read-write open each regular-file member of the store is opened a second time
//! (read-only; the store's `flock` locks live on other descriptors and are not touched)
//! and its size noted. [`MemberWatch::check`] takes one `fstat` per member: a link count
//! of 0 means the image was removed (the data written from now on would vanish with the
//! last descriptor), a size below the one the store file records means it was truncated
//! (blocks past the end read as zeros or fail). A server checks before each request that
//! changes the store, and from the first finding on takes no more writes.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use crate::store_config::{DeviceSpec, StoreConfig};

/// What happened to a device image under the running store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemberChanged {
    /// The image's last name was removed.
    #[error("the device image {path} was deleted while the store was open; no more writes are taken (they would be lost). Reads of what the engine still holds go on; stop the server, restore the image (or its backup) under that name, then start it again")]
    Removed {
        /// The image.
        path: PathBuf,
    },
    /// The image is shorter than the store needs.
    #[error("the device image {path} shrank to {found_bytes} bytes while the store was open (the store needs {expected_bytes}); no more writes are taken. Stop the server, then run `flashpipe fsck` on the store (restore the image from a backup if it reports damage)")]
    Shrunk {
        /// The image.
        path: PathBuf,
        /// The size the store file records.
        expected_bytes: u64,
        /// The size found.
        found_bytes: u64,
    },
    /// The image could not be examined.
    #[error("cannot examine the device image {path}: {reason}; no more writes are taken. Stop the server and check the image")]
    Unreadable {
        /// The image.
        path: PathBuf,
        /// The operating system's error.
        reason: String,
    },
}

/// One regular-file member being watched.
struct WatchedMember {
    path: PathBuf,
    file: File,
    expected_bytes: u64,
}

/// The regular-file members of a store, each held open to be examined.
#[derive(Default)]
pub struct MemberWatch {
    members: Vec<WatchedMember>,
}

impl MemberWatch {
    /// Opens every regular-file member of `config` (read from `store_file`); a member
    /// that cannot be opened, or is a block device, is not watched.
    pub fn open(config: &StoreConfig, store_file: &std::path::Path) -> MemberWatch {
        let mut members = Vec::new();
        for spec in &config.devices {
            let DeviceSpec::File { path, size_bytes } = spec else {
                continue;
            };
            let path = StoreConfig::resolve_device_path(store_file, path);
            let Ok(file) = File::open(&path) else {
                continue;
            };
            if file.metadata().is_ok_and(|metadata| metadata.is_file()) {
                members.push(WatchedMember {
                    path,
                    file,
                    expected_bytes: *size_bytes,
                });
            }
        }
        MemberWatch { members }
    }

    /// How many members are watched.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// True when no member is watched.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Examines every member: `Err` names the first that was removed or shrank.
    pub fn check(&self) -> Result<(), MemberChanged> {
        for member in &self.members {
            let metadata = member
                .file
                .metadata()
                .map_err(|error| MemberChanged::Unreadable {
                    path: member.path.clone(),
                    reason: error.to_string(),
                })?;
            if metadata.nlink() == 0 {
                return Err(MemberChanged::Removed {
                    path: member.path.clone(),
                });
            }
            if metadata.size() < member.expected_bytes {
                return Err(MemberChanged::Shrunk {
                    path: member.path.clone(),
                    expected_bytes: member.expected_bytes,
                    found_bytes: metadata.size(),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removed_or_truncated_image_is_found() {
        let folder =
            std::env::temp_dir().join(format!("flashpipe-member-watch-{}", std::process::id()));
        std::fs::create_dir_all(&folder).expect("a scratch folder");
        let image = folder.join("a.img");
        let file = File::create(&image).expect("an image");
        file.set_len(1 << 20).expect("sized");
        let watch = MemberWatch {
            members: vec![WatchedMember {
                path: image.clone(),
                file: File::open(&image).expect("opened"),
                expected_bytes: 1 << 20,
            }],
        };
        assert_eq!(watch.check(), Ok(()));
        file.set_len(4096).expect("truncated");
        assert!(matches!(
            watch.check(),
            Err(MemberChanged::Shrunk {
                found_bytes: 4096,
                ..
            })
        ));
        file.set_len(1 << 20).expect("grown back");
        std::fs::remove_file(&image).expect("removed");
        assert!(matches!(watch.check(), Err(MemberChanged::Removed { .. })));
        let _ = std::fs::remove_dir_all(&folder);
    }
}
