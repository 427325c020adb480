//! Emulated flash as a store device (issue #5, "same stack"): a flash-model preset under
//! the host FTL, its pages in a sparse file beside the store (or in memory), presented as
//! a [`BlockDevice`] so the file system, the engine and the CLI run on it unchanged, in
//! the model's virtual time.
//!
//! Durability: the flash array writes page contents to its backing file as it programs
//! them and appends each block-state change to a journal beside it, so a process killed
//! at any instant (kill -9) leaves the image, `.meta` and journal describing a prefix of
//! the array's operations, from which the FTL mounts; `FlashArray::sync` folds the
//! journal into a new `.meta` (write, fsync, rename). The [`FlashStoreDevice`] syncs
//! after every flush it completes, so what a flush acknowledged survives a machine crash
//! too (docs/flash-model.md, "Crash atomicity of the image"); dropping the device
//! unmounts the FTL cleanly (a final checkpoint, so the next mount replays little) and
//! syncs once more, best effort.
//!
//! Read-only opening (`DeviceCreation::ReadOnly`) writes nothing at all: the image is
//! opened read-only, the journal is replayed in memory, the FTL mounts without a
//! checkpoint or an erase and refuses writes, trims and copies, and neither a flush nor
//! closing the device syncs anything.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use flashpipe_device::{
    BlockDevice, Clock, Completion, DeviceError, DeviceErrorKind, DeviceInfo, Operation, Rejected,
    Request,
};
use flashpipe_flash::{
    config::PRESET_NAMES, FlashArray, FlashConfig, FlashError, FlashOptions, StorageMode,
};
use flashpipe_ftl::layout::check_spare_layout;
use flashpipe_ftl::{FlashBackend, Ftl, FtlError, FtlOptions, FtlStats};
use serde::{Deserialize, Serialize};

use crate::store::DeviceCreation;
use crate::store_config::StoreConfig;
use crate::units::HumanBytes;

/// How a flash device starts in a `--devices` list: `flash:PRESET[:PATH]`.
pub const FLASH_PREFIX: &str = "flash:";

/// Over-provisioning of a flash device when the store file names none (10 %).
pub const DEFAULT_OVER_PROVISIONING: f64 = 0.1;

/// Seed of a new flash array (its factory bad blocks, bit errors and program times).
pub const DEFAULT_FLASH_SEED: u64 = 1;

/// Raw capacity a flash device gets when the store file names no `blocks_per_plane`:
/// larger presets are shrunk to this many bytes of pages by using fewer blocks per plane
/// (minflash: 64 of its 4096 blocks per chip, 8 GiB instead of 512 GB), because the FTL
/// keeps its page map in memory.
pub const DEFAULT_RAW_CAPACITY_BYTES: u64 = 8 << 30;

/// Most physical pages one flash device may have (the FTL's map and block table live in
/// memory: about 16 bytes a page, so 2^24 pages need a few hundred MiB).
pub const MAX_FLASH_PAGES: u64 = 1 << 24;

/// Host pages between FTL checkpoints when the store file names no interval: none (0),
/// so the FTL checkpoints only when its log block fills, at mount and at a clean unmount.
/// A checkpoint holds the whole map (8 bytes a logical page: about 900 pages for the
/// default minflash device) and the FTL programs it into a few blocks, each block's pages
/// one after another on its die (256 x 418 us), so a periodic checkpoint keeps dies busy
/// for about a tenth of a second each while the host writes that land on them wait: with the FTL's own default (4096 pages) a sequential file write on
/// minflash runs at 13 % of the raw array instead of 91 % (`flashpipe ftl fs`). Mount
/// scans every written block anyway, so a longer interval costs little at recovery.
pub const DEFAULT_CHECKPOINT_INTERVAL_PAGES: u64 = 0;

/// Host requests in flight the flash model accepts from the FTL.
const FLASH_HOST_QUEUE_DEPTH: u32 = 256;

fn default_over_provisioning() -> f64 {
    DEFAULT_OVER_PROVISIONING
}

fn default_seed() -> u64 {
    DEFAULT_FLASH_SEED
}

/// A flash device of a store file (`kind = "flash"`); see docs/store-file.md.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlashDeviceSpec {
    /// A preset name (`minflash`, `rad`, `tlc`) or the path of a preset TOML file
    /// (relative to the store file's folder unless absolute).
    pub preset: String,
    /// The array's sparse backing file (`<path>.meta` beside it); none: in memory, its
    /// contents living only as long as the process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Erase blocks per plane, at most the preset's; default: the preset's, shrunk to
    /// [`DEFAULT_RAW_CAPACITY_BYTES`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks_per_plane: Option<u32>,
    /// Share of the usable pages the FTL holds back from the host (0.1 = 10 %).
    #[serde(default = "default_over_provisioning")]
    pub over_provisioning: f64,
    /// Host pages between FTL checkpoints; default
    /// [`DEFAULT_CHECKPOINT_INTERVAL_PAGES`] (0: only when the log fills, at mount and at
    /// unmount).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_interval_pages: Option<u64>,
    /// Bytes the store uses; default: everything the FTL exports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// Seed of a new array (used at creation only; a reopened array keeps its own).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// How the file system lies on the flash: over the host FTL (the default, not
    /// written), or `flash-aware`, straight on its pages with no FTL
    /// (`crate::raw_flash_store`, docs/design/29-flash-aware.md).
    #[serde(default, skip_serializing_if = "FlashLayout::is_ftl")]
    pub layout: FlashLayout,
    /// The flash-aware layout's device paced against the wall clock (real-time emulation,
    /// `flashpipe_device::PacedDevice`): every process that opens the store sees the
    /// preset's latencies. Set by `mkfs --realtime`; left out of the store file when off.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub realtime: bool,
}

/// How a store's file system lies on a flash device (`layout` in the store file).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlashLayout {
    /// Over the host FTL's page map.
    #[default]
    Ftl,
    /// Straight on the flash pages: the file system allocates, collects and erases.
    FlashAware,
}

impl FlashLayout {
    /// True for the default layout (left out of the store file).
    pub fn is_ftl(&self) -> bool {
        *self == FlashLayout::Ftl
    }
}

impl FlashDeviceSpec {
    /// A flash device of `preset` with every other field at its default.
    pub fn new(preset: &str, path: Option<PathBuf>) -> FlashDeviceSpec {
        FlashDeviceSpec {
            preset: preset.to_string(),
            path,
            blocks_per_plane: None,
            over_provisioning: DEFAULT_OVER_PROVISIONING,
            checkpoint_interval_pages: None,
            size_bytes: None,
            seed: DEFAULT_FLASH_SEED,
            layout: FlashLayout::Ftl,
            realtime: false,
        }
    }

    /// Parses what follows `flash:` in a `--devices` entry: `PRESET` or `PRESET:PATH`.
    pub fn parse_entry(text: &str) -> Result<FlashDeviceSpec, String> {
        let (preset, path) = match text.split_once(':') {
            Some((preset, path)) => (preset, Some(path)),
            None => (text, None),
        };
        check_preset_name(preset)?;
        if path.is_some_and(str::is_empty) {
            return Err("empty path after the preset (flash:PRESET:PATH)".to_string());
        }
        Ok(FlashDeviceSpec::new(preset, path.map(PathBuf::from)))
    }

    /// `flash:PRESET[:PATH]`.
    pub fn describe(&self) -> String {
        match &self.path {
            Some(path) => format!("{FLASH_PREFIX}{}:{}", self.preset, path.display()),
            None => format!("{FLASH_PREFIX}{}", self.preset),
        }
    }

    /// The preset as it ships (resolved against the store file's folder when it is a
    /// path), its blocks per plane not cut.
    pub fn preset_config(&self, store_file: &Path) -> Result<FlashConfig, String> {
        check_preset_name(&self.preset)?;
        if PRESET_NAMES.contains(&self.preset.as_str()) {
            FlashConfig::preset(&self.preset)
        } else {
            let path = StoreConfig::resolve_device_path(store_file, Path::new(&self.preset));
            FlashConfig::preset_or_file(&path.display().to_string())
        }
        .map_err(|error| format!("flash preset {}: {error}", self.preset))
    }

    /// The array's configuration: the preset (resolved against the store file's folder
    /// when it is a path) with this device's number of blocks per plane.
    pub fn flash_config(&self, store_file: &Path) -> Result<FlashConfig, String> {
        let mut config = self.preset_config(store_file)?;
        let preset_blocks = config.geometry.blocks_per_plane;
        let blocks_per_plane = match self.blocks_per_plane {
            Some(blocks) if blocks == 0 || blocks > preset_blocks => {
                return Err(format!(
                    "blocks_per_plane {blocks} is not within 1..={preset_blocks} (the preset's)"
                ))
            }
            Some(blocks) => blocks,
            None => default_blocks_per_plane(&config),
        };
        config.geometry.blocks_per_plane = blocks_per_plane;
        if config.total_pages() > MAX_FLASH_PAGES {
            return Err(format!(
                "{} pages: a flash device has at most {MAX_FLASH_PAGES} (the FTL's map lives in memory); set a smaller blocks_per_plane",
                config.total_pages()
            ));
        }
        Ok(config)
    }

    /// Checks every rule of docs/store-file.md that needs no device: the preset, the
    /// over-provisioning, and sizes that are whole flash pages.
    pub fn validate(
        &self,
        store_file: &Path,
        fs_block_size_bytes: u32,
        stripe_unit_bytes: u64,
    ) -> Result<(), String> {
        let config = self.flash_config(store_file)?;
        if !(0.0..0.95).contains(&self.over_provisioning) {
            return Err(format!(
                "over_provisioning {} is not within 0 (included) to 0.95 (a share of the usable pages)",
                self.over_provisioning
            ));
        }
        if self
            .path
            .as_ref()
            .is_some_and(|path| path.as_os_str().is_empty())
        {
            return Err(format!("{}: empty path", self.describe()));
        }
        if self.realtime && self.layout != FlashLayout::FlashAware {
            return Err(format!(
                "{}: realtime pacing applies to a flash device in the flash-aware layout; a device over the FTL is paced by exporting it (`flashpipe nbd serve --realtime --export NAME={}`), so remove `realtime` from the store file",
                self.describe(),
                self.describe()
            ));
        }
        check_spare_layout(&config)?;
        let page_bytes = u64::from(config.geometry.page_data_bytes);
        let what = format!("flash page of {} ({page_bytes} bytes)", config.name);
        if u64::from(fs_block_size_bytes) % page_bytes != 0 {
            return Err(format!(
                "file-system block size {} is not a multiple of the {what}: the FTL's block is one page; use a block size of {} or a multiple",
                HumanBytes(u64::from(fs_block_size_bytes)),
                HumanBytes(page_bytes)
            ));
        }
        if stripe_unit_bytes % page_bytes != 0 {
            return Err(format!(
                "stripe unit {} is not a multiple of the {what}",
                HumanBytes(stripe_unit_bytes)
            ));
        }
        let raw_bytes = config.total_pages() * page_bytes;
        if let Some(size_bytes) = self.size_bytes {
            if size_bytes % page_bytes != 0 || size_bytes > raw_bytes {
                return Err(format!(
                    "size_bytes {size_bytes} is not a whole number of {what}s up to the array's {raw_bytes} raw bytes"
                ));
            }
        }
        Ok(())
    }
}

fn check_preset_name(preset: &str) -> Result<(), String> {
    if PRESET_NAMES.contains(&preset) || preset.ends_with(".toml") {
        return Ok(());
    }
    Err(format!(
        "unknown flash preset {preset:?}: use {} or the path of a preset file ending in .toml",
        PRESET_NAMES.join(", ")
    ))
}

/// The preset's blocks per plane, shrunk so the raw pages hold at most
/// [`DEFAULT_RAW_CAPACITY_BYTES`].
pub fn default_blocks_per_plane(config: &FlashConfig) -> u32 {
    let geometry = &config.geometry;
    let block_row_bytes = config.total_pages() / u64::from(geometry.blocks_per_plane)
        * u64::from(geometry.page_data_bytes);
    let fitting = (DEFAULT_RAW_CAPACITY_BYTES / block_row_bytes).max(1);
    geometry.blocks_per_plane.min(fitting as u32)
}

/// Why a flash device cannot be created or opened.
#[derive(Debug, thiserror::Error)]
pub enum FlashStoreError {
    /// The store file's description of the device breaks a rule.
    #[error("flash device {device}: {reason}")]
    Spec {
        /// The device, as on the command line.
        device: String,
        /// The rule broken.
        reason: String,
    },
    /// The array's backing file is missing.
    #[error("flash image {path} does not exist (was the store moved without its devices?)")]
    MissingImage {
        /// The backing file.
        path: PathBuf,
    },
    /// The backing file was made for another preset or geometry.
    #[error(
        "flash image {path} holds a {found} array, but the store names {expected}: wrong image?"
    )]
    OtherPreset {
        /// The backing file.
        path: PathBuf,
        /// What the store file names.
        expected: String,
        /// What the image holds.
        found: String,
    },
    /// A device in memory has nothing to mount.
    #[error("flash device {device} lives in memory: its contents last only inside the process that formats it; name a backing file (flash:PRESET:PATH)")]
    InMemory {
        /// The device.
        device: String,
    },
    /// The FTL exports less than the store file's `size_bytes`.
    #[error("flash device {device}: its FTL exports {} ({exported_bytes} bytes), less than the store's size {} ({size_bytes} bytes): make the store with a smaller --size", HumanBytes(*exported_bytes), HumanBytes(*size_bytes))]
    TooSmall {
        /// The device.
        device: String,
        /// What the FTL exports.
        exported_bytes: u64,
        /// What the store file asks for.
        size_bytes: u64,
    },
    /// The flash model failed (a file operation, damaged metadata).
    #[error("flash device {device}: {source}")]
    Flash {
        /// The device.
        device: String,
        /// The model's error.
        source: FlashError,
    },
    /// The FTL failed to format or mount.
    #[error("flash device {device}: {source}")]
    Ftl {
        /// The device.
        device: String,
        /// The FTL's error.
        source: FtlError,
    },
}

/// The host FTL over a flash array, as a store device.
pub struct FlashStoreDevice {
    ftl: Option<Ftl>,
    info: DeviceInfo,
    file_backed: bool,
    flushes_in_flight: Vec<u64>,
    stats: Arc<Mutex<FtlStats>>,
}

/// Creates (mkfs: `CreateMissing`) or opens (`MustExist`) the flash device `spec` of the
/// store at `store_file`, named `name`, with `queue_depth` host requests in flight.
///
/// Creation makes a new array when the backing file is missing (reusing an existing
/// image of the same preset, with its wear) and formats the FTL; opening reopens the
/// array and mounts the FTL, recovering from a crash if need be. On failure nothing is
/// left behind that was not there before.
pub fn open_flash_device(
    spec: &FlashDeviceSpec,
    store_file: &Path,
    name: &str,
    queue_depth: u32,
    creation: DeviceCreation,
) -> Result<FlashStoreDevice, FlashStoreError> {
    let device = spec.describe();
    if spec.layout == FlashLayout::FlashAware {
        return Err(FlashStoreError::Spec {
            device,
            reason: "it holds the flash-aware layout, which has no FTL to open; open it \
                     through its store file (flashpipe put, get, ls, fsck)"
                .to_string(),
        });
    }
    let config = spec
        .flash_config(store_file)
        .map_err(|reason| FlashStoreError::Spec {
            device: device.clone(),
            reason,
        })?;
    let options = FtlOptions {
        name: name.to_string(),
        over_provisioning: spec.over_provisioning,
        queue_depth,
        checkpoint_interval_pages: spec
            .checkpoint_interval_pages
            .unwrap_or(DEFAULT_CHECKPOINT_INTERVAL_PAGES),
        ..FtlOptions::default()
    };
    let path = spec
        .path
        .as_ref()
        .map(|path| StoreConfig::resolve_device_path(store_file, path));
    let ftl = match (path, creation) {
        (None, DeviceCreation::CreateMissing) => {
            let array = new_array(&device, config, StorageMode::Memory, spec.seed)?;
            format_ftl(&device, array, options)?
        }
        (None, DeviceCreation::MustExist | DeviceCreation::ReadOnly) => {
            return Err(FlashStoreError::InMemory { device })
        }
        (Some(path), DeviceCreation::CreateMissing) => {
            create_on_file(&device, &path, config, options, spec.seed)?
        }
        (Some(path), DeviceCreation::MustExist) => {
            mount_from_file(&device, &path, &config, options, false)?
        }
        (Some(path), DeviceCreation::ReadOnly) => {
            mount_from_file(&device, &path, &config, options, true)?
        }
    };
    FlashStoreDevice::new(&device, ftl, spec.size_bytes, spec.path.is_some())
}

pub(crate) fn new_array(
    device: &str,
    config: FlashConfig,
    storage: StorageMode,
    seed: u64,
) -> Result<FlashArray, FlashStoreError> {
    FlashArray::new(
        config,
        FlashOptions {
            seed,
            storage,
            host_count: 1,
            host_queue_depth: FLASH_HOST_QUEUE_DEPTH,
        },
    )
    .map_err(|source| flash_error(device, source))
}

pub(crate) fn flash_error(device: &str, source: FlashError) -> FlashStoreError {
    FlashStoreError::Flash {
        device: device.to_string(),
        source,
    }
}

fn ftl_error(device: &str, source: FtlError) -> FlashStoreError {
    FlashStoreError::Ftl {
        device: device.to_string(),
        source,
    }
}

fn format_ftl(
    device: &str,
    array: FlashArray,
    options: FtlOptions,
) -> Result<Ftl, FlashStoreError> {
    let mut ftl = Ftl::format(Box::new(array) as Box<dyn FlashBackend>, options)
        .map_err(|source| ftl_error(device, source))?;
    ftl.sync_backend_storage()
        .map_err(|source| ftl_error(device, source))?;
    Ok(ftl)
}

/// `path` with `suffix` appended (`.meta`, `.journal`, `.meta.tmp`).
pub(crate) fn companion_path(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn metadata_path(path: &Path) -> PathBuf {
    companion_path(path, ".meta")
}

/// mkfs on a backing file: reuses an image of the same preset, else makes a new one
/// (removed again if the format fails).
fn create_on_file(
    device: &str,
    path: &Path,
    config: FlashConfig,
    options: FtlOptions,
    seed: u64,
) -> Result<Ftl, FlashStoreError> {
    if path.exists() {
        let array = reopen_array(device, path, &config, false)?;
        return format_ftl(device, array, options);
    }
    let created = new_array(device, config, StorageMode::File(path.to_path_buf()), seed)
        .and_then(|array| format_ftl(device, array, options));
    if created.is_err() {
        let _ = std::fs::remove_file(path);
        for suffix in [".meta", ".meta.tmp", ".journal"] {
            let _ = std::fs::remove_file(companion_path(path, suffix));
        }
    }
    created
}

pub(crate) fn reopen_array(
    device: &str,
    path: &Path,
    expected: &FlashConfig,
    read_only: bool,
) -> Result<FlashArray, FlashStoreError> {
    if !metadata_path(path).exists() {
        return Err(FlashStoreError::Spec {
            device: device.to_string(),
            reason: format!(
                "{} exists but {} does not: it is not a flash image (remove it or name another path)",
                path.display(),
                metadata_path(path).display()
            ),
        });
    }
    let array = if read_only {
        FlashArray::open_read_only(path, 1, FLASH_HOST_QUEUE_DEPTH)
    } else {
        FlashArray::open(path, 1, FLASH_HOST_QUEUE_DEPTH)
    }
    .map_err(|source| flash_error(device, source))?;
    if array.config() != expected {
        return Err(FlashStoreError::OtherPreset {
            path: path.to_path_buf(),
            expected: describe_config(expected),
            found: describe_config(array.config()),
        });
    }
    Ok(array)
}

fn describe_config(config: &FlashConfig) -> String {
    let geometry = &config.geometry;
    format!(
        "{} ({} blocks per plane, {} pages of {} bytes)",
        config.name,
        geometry.blocks_per_plane,
        config.total_pages(),
        geometry.page_data_bytes
    )
}

/// Opens the array in `path` and mounts its FTL; `read_only`: nothing is written (the
/// image opened read-only, the FTL mounted in memory only).
fn mount_from_file(
    device: &str,
    path: &Path,
    config: &FlashConfig,
    options: FtlOptions,
    read_only: bool,
) -> Result<Ftl, FlashStoreError> {
    if !path.exists() {
        return Err(FlashStoreError::MissingImage {
            path: path.to_path_buf(),
        });
    }
    let array = reopen_array(device, path, config, read_only)?;
    let backend = Box::new(array) as Box<dyn FlashBackend>;
    let mounted = if read_only {
        Ftl::mount_read_only(backend, options)
    } else {
        Ftl::mount(backend, options)
    };
    let (ftl, _report) = mounted.map_err(|source| ftl_error(device, source))?;
    Ok(ftl)
}

impl FlashStoreDevice {
    fn new(
        device: &str,
        ftl: Ftl,
        size_bytes: Option<u64>,
        file_backed: bool,
    ) -> Result<FlashStoreDevice, FlashStoreError> {
        let mut info = ftl.info().clone();
        let exported_bytes = info.size_bytes();
        if let Some(size_bytes) = size_bytes {
            if size_bytes > exported_bytes {
                return Err(FlashStoreError::TooSmall {
                    device: device.to_string(),
                    exported_bytes,
                    size_bytes,
                });
            }
            info.block_count = size_bytes / u64::from(info.block_size_bytes);
        }
        let stats = Arc::new(Mutex::new(ftl.stats()));
        Ok(FlashStoreDevice {
            file_backed,
            ftl: Some(ftl),
            info,
            flushes_in_flight: Vec::new(),
            stats,
        })
    }

    /// The FTL (its statistics, its array).
    pub fn ftl(&self) -> &Ftl {
        self.ftl
            .as_ref()
            .expect("the FTL is present until the device is closed")
    }

    fn ftl_mut(&mut self) -> &mut Ftl {
        self.ftl
            .as_mut()
            .expect("the FTL is present until the device is closed")
    }

    /// A handle on the FTL's statistics, refreshed after every completed flush and at
    /// close: it outlives the device once the file system owns it.
    pub fn stats_handle(&self) -> Arc<Mutex<FtlStats>> {
        Arc::clone(&self.stats)
    }

    /// True when opened with `DeviceCreation::ReadOnly` (nothing is ever written).
    pub fn is_read_only(&self) -> bool {
        self.ftl().is_read_only()
    }

    /// Unmounts the FTL cleanly (a checkpoint) and makes the backing file durable; a
    /// read-only device writes nothing.
    pub fn close(mut self) -> Result<(), FlashStoreError> {
        let ftl = self
            .ftl
            .take()
            .expect("the FTL is present until the device is closed");
        let device = self.info.name.to_string();
        self.publish_stats_of(&ftl);
        if ftl.is_read_only() {
            return Ok(());
        }
        let mut backend = ftl.unmount();
        backend
            .sync_storage()
            .map_err(|source| flash_error(&device, source))
    }

    fn publish_stats_of(&self, ftl: &Ftl) {
        if let Ok(mut stats) = self.stats.lock() {
            *stats = ftl.stats();
        }
    }

    /// After completions arrive: a completed flush makes the backing storage durable
    /// (the block table is written only then); a failed sync fails the flush.
    fn finish_flushes(&mut self, arrived: &mut [Completion]) {
        for completion in arrived {
            let Some(position) = self
                .flushes_in_flight
                .iter()
                .position(|&tag| tag == completion.tag)
            else {
                continue;
            };
            self.flushes_in_flight.swap_remove(position);
            if completion.status.is_err() || self.is_read_only() {
                continue;
            }
            let ftl = self.ftl.as_mut().expect("the FTL is present");
            if let Err(error) = ftl.sync_backend_storage() {
                completion.status = Err(DeviceError::new(
                    &self.info.name,
                    DeviceErrorKind::IoFailed {
                        detail: error.to_string(),
                    },
                ));
            }
            let ftl = self.ftl.as_ref().expect("the FTL is present");
            self.publish_stats_of(ftl);
        }
    }
}

impl Drop for FlashStoreDevice {
    fn drop(&mut self) {
        let Some(ftl) = self.ftl.take() else {
            return;
        };
        self.publish_stats_of(&ftl);
        if !self.file_backed || ftl.is_read_only() {
            return;
        }
        let mut backend = ftl.unmount();
        let _best_effort = backend.sync_storage();
    }
}

impl BlockDevice for FlashStoreDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.ftl().clock()
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        if let Err(error) = self.info.validate(&request.operation) {
            return Err(Rejected { request, error });
        }
        let flush_tag = matches!(request.operation, Operation::Flush).then_some(request.tag);
        self.ftl_mut().submit(request)?;
        if let Some(tag) = flush_tag {
            self.flushes_in_flight.push(tag);
        }
        Ok(())
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        let first = completions.len();
        let count = self.ftl_mut().poll_completions(completions);
        self.finish_flushes(&mut completions[first..]);
        count
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        let first = completions.len();
        let count = self.ftl_mut().wait_completions(completions)?;
        self.finish_flushes(&mut completions[first..]);
        Ok(count)
    }

    fn in_flight(&self) -> usize {
        self.ftl().in_flight()
    }

    fn copies_by_reference(&self) -> bool {
        self.ftl().copies_by_reference()
    }
}
