//! The store file: a small TOML document naming a store's devices and geometry.
//!
//! `flashpipe mkfs` writes it and every other command reads it. Its fields are described
//! in `docs/store-file.md`. Relative device paths are relative to the folder holding the
//! store file, so a store folder can be moved as a whole. A device may be emulated flash
//! (a flash-model preset under the host FTL, issue #5), opened by [`crate::flash_store`],
//! or a remote export over NBD (issue #15: `nbd://host[:port]/export`,
//! `nbd+unix:///export?socket=PATH`), opened by `flashpipe_nbd_client`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use flashpipe_nbd_client::{looks_like_nbd_uri, NbdUri};

use crate::cluster_store::{ClusterDeviceSpec, CLUSTER_PREFIX};
use crate::flash_store::{FlashDeviceSpec, FlashLayout, FLASH_PREFIX};
use crate::identity::StoreIdentity;
use crate::units::{parse_size_bytes, HumanBytes};

/// The store-file version this build writes and the newest it reads.
pub const STORE_FILE_VERSION: u32 = 2;

/// Logical block size of the devices under a store (direct I/O granularity).
pub const DEVICE_BLOCK_SIZE_BYTES: u32 = 4096;

/// Most devices in one store.
pub const MAX_DEVICES: usize = 64;

/// Most requests in flight per device (`queue_depth`).
pub const MAX_QUEUE_DEPTH: u32 = 4096;

/// Largest file or block device a store uses (`size_bytes` of a file device): 1 PiB.
pub const MAX_FILE_DEVICE_SIZE_BYTES: u64 = 1 << 50;

/// Largest RAM device (`size_bytes` of a RAM device), allocated whole: 64 GiB.
pub const MAX_RAM_DEVICE_SIZE_BYTES: u64 = 1 << 36;

/// Largest store (the sum of its devices' `size_bytes`): 4 PiB.
pub const MAX_STORE_SIZE_BYTES: u64 = 1 << 52;

/// Most host pages between FTL checkpoints (`checkpoint_interval_pages` of a flash device).
pub const MAX_CHECKPOINT_INTERVAL_PAGES: u64 = 1 << 32;

/// A store's description.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// The store's identity (a random UUID made at mkfs; version 2). `None` in a
    /// version-1 file, which gets one at its next read-write open
    /// ([`crate::identity::ensure_identity`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<StoreIdentity>,
    /// Version of this file's layout; a newer one than [`STORE_FILE_VERSION`] is refused.
    pub store_file_version: u32,
    /// File-system block size (a power of two, at least 4 KiB).
    pub block_size_bytes: u32,
    /// Bytes placed on one device before moving to the next.
    pub stripe_unit_bytes: u64,
    /// Requests in flight per device.
    pub queue_depth: u32,
    /// The devices, in stripe order.
    pub devices: Vec<DeviceSpec>,
}

/// One device of a store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum DeviceSpec {
    /// A regular file (created at mkfs) or a block device.
    File {
        /// Path, relative to the store file's folder unless absolute.
        path: PathBuf,
        /// Bytes of the device the store uses.
        size_bytes: u64,
    },
    /// Memory; its contents live only as long as the process that opened it.
    Ram {
        /// Bytes of memory.
        size_bytes: u64,
    },
    /// Emulated flash: a flash-model preset under the host FTL, its pages in a sparse
    /// file (or in memory when no path is given).
    Flash(FlashDeviceSpec),
    /// A remote export over the Network Block Device protocol (a disk node on another
    /// machine, HWFS 3.3.2). No local lock is taken on it: exclusion belongs to the
    /// server, which alone sees every client.
    Nbd {
        /// The export's NBD URI (`nbd://host[:port]/export`,
        /// `nbd+unix:///export?socket=PATH`).
        uri: String,
        /// Bytes of the export the store uses (the export may be larger).
        size_bytes: u64,
    },
    /// The host FTL over a minFlash cluster, as one host of its description file.
    Cluster(ClusterDeviceSpec),
}

impl DeviceSpec {
    /// Bytes of the device the store uses, when the store file records them (a flash
    /// device without `size_bytes` uses whatever its FTL exports).
    pub fn size_bytes(&self) -> Option<u64> {
        match self {
            DeviceSpec::File { size_bytes, .. }
            | DeviceSpec::Ram { size_bytes }
            | DeviceSpec::Nbd { size_bytes, .. } => Some(*size_bytes),
            DeviceSpec::Flash(flash) => flash.size_bytes,
            DeviceSpec::Cluster(cluster) => cluster.size_bytes,
        }
    }

    /// How the device is named on the command line: its path, `ram:SIZE`,
    /// `flash:PRESET[:PATH]` or its NBD URI.
    pub fn describe(&self) -> String {
        match self {
            DeviceSpec::File { path, .. } => path.display().to_string(),
            DeviceSpec::Ram { size_bytes } => format!("ram:{}", HumanBytes(*size_bytes)),
            DeviceSpec::Flash(flash) => flash.describe(),
            DeviceSpec::Nbd { uri, .. } => uri.clone(),
            DeviceSpec::Cluster(cluster) => cluster.describe(),
        }
    }
}

/// Why a store file or a device list is unusable.
#[derive(Debug, thiserror::Error)]
pub enum StoreConfigError {
    /// The store file cannot be read or written.
    #[error("store file {path}: {source}")]
    Io {
        /// The store file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The store file is not valid TOML for a store (the message gives line and column).
    #[error("store file {path} is not a valid store description: {message}")]
    Syntax {
        /// The store file.
        path: PathBuf,
        /// The parser's message, with the line.
        message: String,
    },
    /// The file is not a store file at all (binary data, or text that is not TOML): most
    /// often an image or a data file given where the store file goes.
    #[error("{path} is not a store file: it holds {what}. A command takes the store file `mkfs` wrote (STORE.toml) first, then its other arguments, as in `flashpipe put STORE.toml FILE...`")]
    NotAStoreFile {
        /// The file given.
        path: PathBuf,
        /// What it holds instead.
        what: &'static str,
    },
    /// The store file was written by a newer flashpipe.
    #[error("store file {path} has version {found}, newer than this flashpipe reads ({STORE_FILE_VERSION}); upgrade flashpipe")]
    NewerVersion {
        /// The store file.
        path: PathBuf,
        /// The version it declares.
        found: u32,
    },
    /// A field breaks a rule.
    #[error("store {path}: {reason}")]
    Invalid {
        /// The store file.
        path: PathBuf,
        /// The rule broken.
        reason: String,
    },
    /// A `--devices` list entry cannot be understood.
    #[error("device {entry:?}: {reason}")]
    BadDevice {
        /// The entry as given.
        entry: String,
        /// Why.
        reason: String,
    },
}

/// True when `text` names a key every store file has, so a TOML error in it is a damaged
/// store file, not another kind of file given in its place.
fn looks_like_a_store_file(text: &str) -> bool {
    text.lines().any(|line| {
        let line = line.trim_start();
        [
            "store_file_version",
            "block_size_bytes",
            "devices",
            "[[devices]]",
        ]
        .iter()
        .any(|key| line.starts_with(key))
    })
}

/// A hint for a size given in powers of ten (`2GB`, `500MB`) where powers of two were meant.
fn binary_unit_hint(size_bytes: u64) -> String {
    let units = [
        (1_000_000_000_000, "TB", "TiB"),
        (1_000_000_000, "GB", "GiB"),
        (1_000_000, "MB", "MiB"),
        (1_000, "kB", "KiB"),
    ];
    match units.iter().find(|(unit, ..)| size_bytes % unit == 0) {
        Some((unit, decimal, binary)) => format!(
            " ({}{decimal} is {size_bytes} bytes, powers of ten; did you mean {}{binary}?)",
            size_bytes / unit,
            size_bytes / unit
        ),
        None => String::new(),
    }
}

impl StoreConfig {
    /// Parses and validates a store description; `path` is used in errors.
    pub fn parse(text: &str, path: &Path) -> Result<StoreConfig, StoreConfigError> {
        #[derive(Deserialize)]
        struct VersionOnly {
            store_file_version: Option<u32>,
        }
        let syntax = |error: toml::de::Error| StoreConfigError::Syntax {
            path: path.to_path_buf(),
            message: error.to_string().trim_end().to_string(),
        };
        let version: VersionOnly = toml::from_str(text).map_err(|error| {
            if looks_like_a_store_file(text) {
                syntax(error)
            } else {
                StoreConfigError::NotAStoreFile {
                    path: path.to_path_buf(),
                    what: "text that is not a store description",
                }
            }
        })?;
        if let Some(found) = version
            .store_file_version
            .filter(|&found| found > STORE_FILE_VERSION)
        {
            return Err(StoreConfigError::NewerVersion {
                path: path.to_path_buf(),
                found,
            });
        }
        let config: StoreConfig = toml::from_str(text).map_err(syntax)?;
        config.validate(path)?;
        Ok(config)
    }

    /// Reads and validates the store file at `path`.
    pub fn load(path: &Path) -> Result<StoreConfig, StoreConfigError> {
        let bytes = std::fs::read(path).map_err(|source| StoreConfigError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let Ok(text) = String::from_utf8(bytes) else {
            return Err(StoreConfigError::NotAStoreFile {
                path: path.to_path_buf(),
                what: "binary data, perhaps a device image",
            });
        };
        StoreConfig::parse(&text, path)
    }

    /// The store file's text.
    pub fn to_toml(&self) -> String {
        let body = toml::to_string_pretty(self).expect("a store config always serializes");
        format!("# flashpipe store: written by `flashpipe mkfs`; see docs/store-file.md\n{body}")
    }

    /// Writes the store file, refusing to replace an existing one.
    pub fn save_new(&self, path: &Path) -> Result<(), StoreConfigError> {
        use std::io::Write;
        let io_error = |source| StoreConfigError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(io_error)?;
        file.write_all(self.to_toml().as_bytes())
            .map_err(io_error)?;
        file.sync_all().map_err(io_error)
    }

    /// Checks every rule of docs/store-file.md.
    pub fn validate(&self, path: &Path) -> Result<(), StoreConfigError> {
        let invalid = |reason: String| StoreConfigError::Invalid {
            path: path.to_path_buf(),
            reason,
        };
        if self.store_file_version == 0 || self.store_file_version > STORE_FILE_VERSION {
            return Err(invalid(format!(
                "unknown store_file_version {}",
                self.store_file_version
            )));
        }
        check_block_size(self.block_size_bytes).map_err(invalid)?;
        check_stripe_unit(self.stripe_unit_bytes).map_err(invalid)?;
        if !(1..=MAX_QUEUE_DEPTH).contains(&self.queue_depth) {
            return Err(invalid(format!(
                "queue_depth {} outside 1..={MAX_QUEUE_DEPTH}",
                self.queue_depth
            )));
        }
        if self.devices.is_empty() || self.devices.len() > MAX_DEVICES {
            return Err(invalid(format!(
                "{} devices: a store has 1 to {MAX_DEVICES}",
                self.devices.len()
            )));
        }
        let flash_aware = self.devices.iter().any(|device| {
            matches!(device, DeviceSpec::Flash(spec) if spec.layout == FlashLayout::FlashAware)
        });
        if flash_aware && self.devices.len() > 1 {
            return Err(invalid(format!(
                "{} devices with a flash device in the flash-aware layout: that layout takes exactly one flash device (it is not striped); make one store per flash device",
                self.devices.len()
            )));
        }
        for device in &self.devices {
            check_device_limits(device).map_err(invalid)?;
            self.validate_device(device, path).map_err(invalid)?;
        }
        self.check_total_size().map_err(invalid)?;
        self.check_block_sizes_agree(path).map_err(invalid)
    }

    /// The devices' sizes add up to at most [`MAX_STORE_SIZE_BYTES`].
    fn check_total_size(&self) -> Result<(), String> {
        let total_bytes = self
            .devices
            .iter()
            .filter_map(DeviceSpec::size_bytes)
            .try_fold(0u64, |total, size| total.checked_add(size));
        match total_bytes {
            Some(total) if total <= MAX_STORE_SIZE_BYTES => Ok(()),
            _ => Err(format!(
                "the devices' size_bytes add up to more than the limit of {MAX_STORE_SIZE_BYTES} bytes (4 PiB) per store"
            )),
        }
    }

    /// Striped devices must share a block size: 4 KiB for files and RAM, the flash page
    /// for emulated flash.
    fn check_block_sizes_agree(&self, path: &Path) -> Result<(), String> {
        let mut sizes = Vec::with_capacity(self.devices.len());
        for device in &self.devices {
            let block_size_bytes = match device {
                DeviceSpec::Flash(flash) => flash.flash_config(path)?.geometry.page_data_bytes,
                DeviceSpec::Cluster(cluster) => cluster.page_bytes(path)?,
                DeviceSpec::File { .. } | DeviceSpec::Ram { .. } => DEVICE_BLOCK_SIZE_BYTES,
                DeviceSpec::Nbd { uri, .. } => NbdUri::parse(uri)
                    .map_err(|error| error.to_string())?
                    .block_size_bytes
                    .unwrap_or(DEVICE_BLOCK_SIZE_BYTES),
            };
            sizes.push((device.describe(), block_size_bytes));
        }
        let (first_name, first_size) = &sizes[0];
        match sizes.iter().find(|(_, size)| size != first_size) {
            None => Ok(()),
            Some((name, size)) => Err(format!(
                "the devices of a store share one block size, but {first_name} has {first_size}-byte blocks and {name} {size}-byte blocks (emulated flash: one block per flash page)"
            )),
        }
    }

    fn validate_device(&self, device: &DeviceSpec, path: &Path) -> Result<(), String> {
        if let DeviceSpec::Flash(flash) = device {
            flash.validate(path, self.block_size_bytes, self.stripe_unit_bytes)?;
        }
        if let DeviceSpec::Nbd { uri, .. } = device {
            NbdUri::parse(uri).map_err(|error| error.to_string())?;
        }
        if let DeviceSpec::Cluster(cluster) = device {
            cluster.validate(path, self.block_size_bytes, self.stripe_unit_bytes)?;
        }
        let Some(size_bytes) = device.size_bytes() else {
            return Ok(());
        };
        if size_bytes < self.stripe_unit_bytes
            || size_bytes % u64::from(DEVICE_BLOCK_SIZE_BYTES) != 0
        {
            return Err(format!(
                "device {} of {size_bytes} bytes: a device holds at least one stripe unit and a whole number of 4 KiB blocks{}",
                device.describe(),
                binary_unit_hint(size_bytes),
            ));
        }
        Ok(())
    }

    /// The path of file device `path`, resolved against the store file's folder.
    pub fn resolve_device_path(store_file: &Path, path: &Path) -> PathBuf {
        if path.is_absolute() {
            return path.to_path_buf();
        }
        store_file.parent().unwrap_or(Path::new(".")).join(path)
    }
}

/// Checks the limits of one device's fields (docs/store-file.md, "Limits").
fn check_device_limits(device: &DeviceSpec) -> Result<(), String> {
    let (field, size_bytes, maximum) = match device {
        DeviceSpec::File { size_bytes, .. } => (
            "size_bytes of a file device",
            *size_bytes,
            MAX_FILE_DEVICE_SIZE_BYTES,
        ),
        DeviceSpec::Ram { size_bytes } => (
            "size_bytes of a RAM device",
            *size_bytes,
            MAX_RAM_DEVICE_SIZE_BYTES,
        ),
        DeviceSpec::Nbd { size_bytes, .. } => (
            "size_bytes of an NBD device",
            *size_bytes,
            MAX_FILE_DEVICE_SIZE_BYTES,
        ),
        DeviceSpec::Flash(flash) => {
            if let Some(interval) = flash
                .checkpoint_interval_pages
                .filter(|&interval| interval > MAX_CHECKPOINT_INTERVAL_PAGES)
            {
                return Err(format!(
                    "device {}: checkpoint_interval_pages {interval} is above the limit of {MAX_CHECKPOINT_INTERVAL_PAGES}",
                    device.describe()
                ));
            }
            return Ok(());
        }
        DeviceSpec::Cluster(_) => return Ok(()),
    };
    if size_bytes > maximum {
        return Err(format!(
            "device {}: {field} {size_bytes} is above the limit of {maximum} bytes",
            device.describe()
        ));
    }
    Ok(())
}

/// Checks a file-system block size: a power of two from 4 KiB to 1 MiB.
pub fn check_block_size(block_size_bytes: u32) -> Result<(), String> {
    if !block_size_bytes.is_power_of_two() || !(4096..=1 << 20).contains(&block_size_bytes) {
        return Err(format!(
            "block size {block_size_bytes} is not a power of two from 4 KiB to 1 MiB"
        ));
    }
    Ok(())
}

/// Checks a stripe unit: a positive multiple of the 4 KiB device block, at most 1 GiB.
pub fn check_stripe_unit(stripe_unit_bytes: u64) -> Result<(), String> {
    if stripe_unit_bytes == 0
        || stripe_unit_bytes % u64::from(DEVICE_BLOCK_SIZE_BYTES) != 0
        || stripe_unit_bytes > 1 << 30
    {
        return Err(format!(
            "stripe unit {stripe_unit_bytes} is not a positive multiple of 4 KiB up to 1 GiB"
        ));
    }
    Ok(())
}

/// How a device file is told apart from another: the file itself when it exists (so a
/// symlink or a hard link to a device names the same file), else its folder made canonical
/// plus its name (so `a.img` and `./a.img` agree).
#[derive(Debug, Clone, PartialEq, Eq)]
enum FileIdentity {
    Existing {
        device: u64,
        inode: u64,
    },
    Planned(PathBuf),
    /// A remote export: its address and export name.
    Remote(String),
}

fn file_identity(path: &Path) -> FileIdentity {
    use std::os::unix::fs::MetadataExt;
    if let Ok(metadata) = std::fs::metadata(path) {
        return FileIdentity::Existing {
            device: metadata.dev(),
            inode: metadata.ino(),
        };
    }
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let canonical_folder = folder
        .canonicalize()
        .unwrap_or_else(|_| folder.to_path_buf());
    FileIdentity::Planned(match path.file_name() {
        Some(name) => canonical_folder.join(name),
        None => canonical_folder,
    })
}

/// Refuses a store whose devices name one file twice (file devices and flash images,
/// after resolving each against the store file's folder): striping a file with itself
/// corrupts it at the first write.
pub fn check_distinct_devices(
    config: &StoreConfig,
    store_file: &Path,
) -> Result<(), StoreConfigError> {
    let mut seen: Vec<(FileIdentity, String)> = Vec::new();
    for device in &config.devices {
        let path = match device {
            DeviceSpec::Nbd { uri, .. } => {
                let identity = match NbdUri::parse(uri) {
                    Ok(parsed) => FileIdentity::Remote(format!(
                        "{:?} {:?}",
                        parsed.address, parsed.export_name
                    )),
                    Err(_) => FileIdentity::Remote(uri.clone()),
                };
                if let Some((_, first)) = seen.iter().find(|(known, _)| *known == identity) {
                    return Err(StoreConfigError::BadDevice {
                        entry: device.describe(),
                        reason: format!(
                            "names the same NBD export as device {first}: each device of a store is a different export"
                        ),
                    });
                }
                seen.push((identity, device.describe()));
                continue;
            }
            DeviceSpec::File { path, .. } => path,
            DeviceSpec::Flash(FlashDeviceSpec {
                path: Some(path), ..
            }) => path,
            DeviceSpec::Flash(_) | DeviceSpec::Ram { .. } | DeviceSpec::Cluster(_) => continue,
        };
        let identity = file_identity(&StoreConfig::resolve_device_path(store_file, path));
        if let Some((_, first)) = seen.iter().find(|(known, _)| *known == identity) {
            return Err(StoreConfigError::BadDevice {
                entry: device.describe(),
                reason: format!(
                    "names the same file as device {first}: each device of a store is a different file"
                ),
            });
        }
        seen.push((identity, device.describe()));
    }
    Ok(())
}

/// Parses a `--devices` list: comma-separated paths, `ram:SIZE`, `flash:PRESET[:PATH]`,
/// `cluster:DESCRIPTION.toml#HOST` and NBD URI entries. File and NBD devices get `default_size_bytes` (`--size`: of an
/// NBD export, the bytes the store uses); a RAM entry carries its own size; a flash entry
/// exports what its FTL gives (`--size` does not apply to it). A comma inside an NBD URI
/// is written `%2C`.
pub fn parse_device_list(
    list: &str,
    default_size_bytes: Option<u64>,
) -> Result<Vec<DeviceSpec>, StoreConfigError> {
    list.split(',')
        .map(|entry| parse_device_entry(entry.trim(), default_size_bytes))
        .collect()
}

fn parse_device_entry(
    entry: &str,
    default_size_bytes: Option<u64>,
) -> Result<DeviceSpec, StoreConfigError> {
    let bad = |reason: String| StoreConfigError::BadDevice {
        entry: entry.to_string(),
        reason,
    };
    if entry.is_empty() {
        return Err(bad("empty entry in the device list".to_string()));
    }
    if let Some(size_text) = entry.strip_prefix("ram:") {
        let size_bytes = parse_size_bytes(size_text).map_err(|error| bad(error.to_string()))?;
        return Ok(DeviceSpec::Ram { size_bytes });
    }
    if let Some(rest) = entry.strip_prefix(FLASH_PREFIX) {
        return FlashDeviceSpec::parse_entry(rest)
            .map(DeviceSpec::Flash)
            .map_err(bad);
    }
    if let Some(rest) = entry.strip_prefix(CLUSTER_PREFIX) {
        return ClusterDeviceSpec::parse_entry(rest)
            .map(|spec| {
                DeviceSpec::Cluster(ClusterDeviceSpec {
                    size_bytes: default_size_bytes,
                    ..spec
                })
            })
            .map_err(bad);
    }
    if looks_like_nbd_uri(entry) {
        NbdUri::parse(entry).map_err(|error| bad(error.reason))?;
        let size_bytes = default_size_bytes.ok_or_else(|| {
            bad("an NBD device needs --size (the bytes of each export the store uses)".to_string())
        })?;
        return Ok(DeviceSpec::Nbd {
            uri: entry.to_string(),
            size_bytes,
        });
    }
    let size_bytes = default_size_bytes
        .ok_or_else(|| bad("a file device needs --size (the size of each device)".to_string()))?;
    Ok(DeviceSpec::File {
        path: PathBuf::from(entry),
        size_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> StoreConfig {
        StoreConfig {
            identity: None,
            store_file_version: STORE_FILE_VERSION,
            block_size_bytes: 16384,
            stripe_unit_bytes: 65536,
            queue_depth: 32,
            devices: parse_device_list("a.img, b.img,ram:1MiB", Some(1 << 20)).unwrap(),
        }
    }

    #[test]
    fn store_file_round_trips() {
        let config = sample();
        let text = config.to_toml();
        assert_eq!(
            StoreConfig::parse(&text, Path::new("s.toml")).unwrap(),
            config
        );
    }

    fn check_rejected(edit: &dyn Fn(&str) -> String, expected_fragment: &str) {
        let text = edit(&sample().to_toml());
        let error = StoreConfig::parse(&text, Path::new("s.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(expected_fragment),
            "error {error:?} lacks {expected_fragment:?}"
        );
    }

    #[test]
    fn bad_store_files_are_rejected_clearly() {
        check_rejected(
            &|text| text.replace("store_file_version = 2", "store_file_version = 9"),
            "newer than this flashpipe",
        );
        check_rejected(&|text| text.replace("16384", "5000"), "block size 5000");
        check_rejected(&|text| text.replace("65536", "1000"), "stripe unit 1000");
        check_rejected(
            &|text| text.replace("queue_depth = 32", "queue_depth = 0"),
            "queue_depth 0",
        );
        check_rejected(
            &|text| text.replace("kind = \"ram\"", "kind = \"tape\""),
            "line",
        );
        check_rejected(&|text| format!("{text}\nextra = 1\n"), "unknown field");
        check_rejected(
            &|text| format!("{text}\n[["),
            "not a valid store description",
        );
        check_rejected(&|_| "not toml at all [".to_string(), "is not a store file");
        check_rejected(
            &|text| text.replace("1048576", "4096"),
            "at least one stripe unit",
        );
    }

    #[test]
    fn device_lists_parse() {
        assert!(parse_device_list("a.img", None).is_err());
        assert!(parse_device_list("a.img,,b.img", Some(4096)).is_err());
        assert!(parse_device_list("ram:lots", None).is_err());
        assert_eq!(
            parse_device_list("ram:2MiB", None).unwrap(),
            vec![DeviceSpec::Ram {
                size_bytes: 2 << 20
            }]
        );
    }

    #[test]
    fn nbd_uris_are_devices() {
        let devices = parse_device_list(
            "nbd://127.0.0.1:10809/disk0,nbd+unix:///d1?socket=/run/d1.sock",
            Some(1 << 20),
        )
        .unwrap();
        assert_eq!(
            devices[0],
            DeviceSpec::Nbd {
                uri: "nbd://127.0.0.1:10809/disk0".to_string(),
                size_bytes: 1 << 20
            }
        );
        assert_eq!(devices[1].describe(), "nbd+unix:///d1?socket=/run/d1.sock");
        let config = StoreConfig {
            devices,
            ..sample()
        };
        let text = config.to_toml();
        assert!(text.contains("kind = \"nbd\""), "{text}");
        assert_eq!(
            StoreConfig::parse(&text, Path::new("s.toml")).unwrap(),
            config
        );
        assert!(parse_device_list("nbd://h/e", None)
            .unwrap_err()
            .to_string()
            .contains("needs --size"));
        let twice = StoreConfig {
            devices: parse_device_list("nbd://h/e,NBD://h:10809/e", Some(1 << 20)).unwrap(),
            ..sample()
        };
        assert!(check_distinct_devices(&twice, Path::new("s.toml"))
            .unwrap_err()
            .to_string()
            .contains("same NBD export"));
        assert!(parse_device_list("nbd://h:0/e", Some(1 << 20))
            .unwrap_err()
            .to_string()
            .contains("port"));
        let broken = text.replace("nbd://127.0.0.1:10809/disk0", "nbd://h/e?colour=red");
        assert!(StoreConfig::parse(&broken, Path::new("s.toml"))
            .unwrap_err()
            .to_string()
            .contains("unknown query parameter"));
    }

    #[test]
    fn a_file_named_twice_is_refused_however_it_is_spelled() {
        let folder =
            std::env::temp_dir().join(format!("flashpipe-distinct-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        let store = folder.join("s.toml");
        let config_of = |list: &str| StoreConfig {
            devices: parse_device_list(list, Some(1 << 20)).unwrap(),
            ..sample()
        };
        for list in ["a.img,a.img", "a.img,./a.img", "a.img,flash:minflash:a.img"] {
            let error = check_distinct_devices(&config_of(list), &store).unwrap_err();
            assert!(error.to_string().contains("same file"), "{list}: {error}");
        }
        assert!(check_distinct_devices(&config_of("a.img,b.img,ram:1MiB"), &store).is_ok());
        std::fs::write(folder.join("real.img"), b"").unwrap();
        let _ = std::fs::remove_file(folder.join("link.img"));
        std::os::unix::fs::symlink(folder.join("real.img"), folder.join("link.img")).unwrap();
        assert!(check_distinct_devices(&config_of("real.img,link.img"), &store).is_err());
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn relative_paths_resolve_against_the_store_folder() {
        let store = Path::new("/stores/x/store.toml");
        assert_eq!(
            StoreConfig::resolve_device_path(store, Path::new("a.img")),
            PathBuf::from("/stores/x/a.img")
        );
        assert_eq!(
            StoreConfig::resolve_device_path(store, Path::new("/dev/sdb")),
            PathBuf::from("/dev/sdb")
        );
    }
}
