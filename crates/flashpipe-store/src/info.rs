//! A store's summary (`flashpipe info`): its members (kind, path, size, space taken on
//! disk, label), its geometry and identity, the file system on it (format version, files,
//! space, metadata log fill) and, for emulated flash, the FTL's wear.
//!
//! Read-only throughout: the store is locked shared (as `ls` and `df` lock it), its
//! devices opened read-only and the file system mounted read-only; nothing is written,
//! not even to an image of an older format. The parts that need no lock (the store file,
//! the members' labels and sizes) come from [`describe_members`], which a caller also uses
//! when a server holds the store; [`gather_store_info`] adds what needs the store opened.
//!
//! A member that is missing or unreadable is reported as such in its row, and the store
//! is then not opened: [`StoreInfoError::Members`] names the member, after the rows.

use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use flashpipe_device::{run_one, BlockDevice, IoBuf, Operation};
use flashpipe_flash::{FlashAddress, FlashArray};
use flashpipe_fs::layout::{SuperBlock, SUPER_BLOCK_SIZE_BYTES};
use flashpipe_fs::{store_identity_text, Filesystem, FsStats};
use serde::Serialize;

use crate::flash_store::{open_flash_device, FlashDeviceSpec, FlashLayout, FlashStoreError};
use crate::identity::StoreIdentity;
use crate::member_label::{MemberLabel, LABEL_BYTES};
use crate::raw_flash_store::open_raw_flash_device;
use crate::store::{lock_store, open_store_device_locked, DeviceCreation, StoreOpenError};
use crate::store_config::{DeviceSpec, StoreConfig};
use crate::store_lock::{LockMode, LockWait};

/// Everything `flashpipe info` shows.
#[derive(Debug, Clone, Serialize)]
pub struct StoreInfo {
    /// The store file, as given.
    pub store_file: PathBuf,
    /// The store file's format version.
    pub store_file_version: u32,
    /// The identity the store file records (none: a version-1 store file).
    pub identity: Option<StoreIdentity>,
    /// FS block size.
    pub block_size_bytes: u32,
    /// Bytes placed on one member before the next.
    pub stripe_unit_bytes: u64,
    /// Requests in flight per member.
    pub queue_depth: u32,
    /// The members, in the store file's order.
    pub members: Vec<MemberInfo>,
    /// The file system on them; `None` when it was not read (a server holds the store).
    pub filesystem: Option<FilesystemInfo>,
}

/// One member of a store.
#[derive(Debug, Clone, Serialize)]
pub struct MemberInfo {
    /// Its place in the device list, from 0.
    pub index: usize,
    /// `file`, `block_device`, `flash`, `nbd` or `ram`.
    pub kind: &'static str,
    /// Its path (resolved against the store file's folder), URI, or `ram`.
    pub location: String,
    /// Bytes of it the store uses (`None`: a flash device using whatever its FTL exports,
    /// known once opened).
    pub size_bytes: Option<u64>,
    /// Bytes the local file takes on disk (`st_blocks`): small for a sparse image.
    pub allocated_bytes: Option<u64>,
    /// What its label says against the store file.
    pub label: LabelState,
    /// Why the member cannot be used, when it cannot (missing, unreadable).
    pub problem: Option<String>,
    /// The FTL's figures, for emulated flash read here.
    pub flash: Option<FlashInfo>,
}

/// A member's label (docs/store-file.md, "Member labels") against the store file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LabelState {
    /// Present, this store's, at this index, of this member count.
    Ok,
    /// Present and whole, but of another store, index or member count.
    Mismatch,
    /// Room for one past the store's bytes, but no valid label there.
    Damaged,
    /// None: a store made before labels (given one at its next read-write open).
    Absent,
    /// Not a kind that carries labels (block devices, flash, NBD, RAM).
    NotApplicable,
    /// The member could not be read.
    Unreadable,
}

impl LabelState {
    /// The word `info` prints.
    pub fn text(self) -> &'static str {
        match self {
            LabelState::Ok => "ok",
            LabelState::Mismatch => "MISMATCH",
            LabelState::Damaged => "DAMAGED",
            LabelState::Absent => "absent",
            LabelState::NotApplicable => "-",
            LabelState::Unreadable => "unreadable",
        }
    }
}

/// The file system of a store: mounted read-only here, or as a server reports it
/// (then without the parts its protocol does not carry: `None`).
#[derive(Debug, Clone, Serialize)]
pub struct FilesystemInfo {
    /// Format version of the super block in use (docs/format.md).
    pub format_version: Option<u32>,
    /// The identity in that super block.
    pub identity: Option<String>,
    /// Sequence number of the last commit.
    pub commit_sequence: u64,
    /// FS blocks in all.
    pub block_count: u64,
    /// Bytes in all.
    pub total_bytes: u64,
    /// Bytes in use (data, indirect, checkpoint, super blocks).
    pub used_bytes: u64,
    /// Bytes free.
    pub free_bytes: u64,
    /// Of the free bytes, those kept back for the next commit's checkpoint.
    pub reserved_bytes: u64,
    /// Files.
    pub file_count: u64,
    /// The metadata log's fill (docs/format.md, "Metadata log").
    pub metadata_log: Option<LogInfo>,
    /// The flash-aware layout's counters over the store's life (docs/format.md,
    /// "Flash-aware layout"); absent in the ordinary layout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flash_aware: Option<FlashAwareInfo>,
}

/// The flash-aware layout's counters as its last commit recorded them.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct FlashAwareInfo {
    /// Pages the file system handed out (each programmed once).
    pub pages_allocated: u64,
    /// Commit-ring records programmed (commits, mounts, clean unmounts).
    pub ring_records: u64,
    /// Erase blocks the file system erased (mkfs's included).
    pub erases: u64,
    /// Live pages its garbage collection moved.
    pub pages_moved: u64,
}

impl FilesystemInfo {
    /// The space and counts of `stats`, the other facts unknown.
    pub fn from_stats(stats: &FsStats) -> FilesystemInfo {
        let block_bytes = u64::from(stats.fs_block_size_bytes);
        FilesystemInfo {
            format_version: None,
            identity: None,
            flash_aware: None,
            commit_sequence: stats.commit_sequence,
            block_count: stats.fs_block_count,
            total_bytes: stats.fs_block_count * block_bytes,
            used_bytes: stats.used_blocks * block_bytes,
            free_bytes: stats.free_blocks * block_bytes,
            reserved_bytes: stats.reserved_blocks * block_bytes,
            file_count: stats.file_count,
            metadata_log: None,
        }
    }
}

/// How full the metadata log of the last checkpoint is.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LogInfo {
    /// Blocks of the checkpoint's log region.
    pub region_blocks: u64,
    /// Of them, blocks holding log records (a checkpoint is written when they run out).
    pub used_blocks: u64,
    /// Log records (commits since the checkpoint).
    pub records: u64,
}

/// The FTL of an emulated flash member.
#[derive(Debug, Clone, Serialize)]
pub struct FlashInfo {
    /// The preset (or preset file).
    pub preset: String,
    /// Bytes of pages in the array.
    pub raw_bytes: u64,
    /// Bytes the FTL exports to the host.
    pub exported_bytes: u64,
    /// Share of the usable pages the FTL holds back (0.1 = 10 %).
    pub over_provisioning: f64,
    /// Erase blocks in the array.
    pub block_count: u64,
    /// Fewest erases of a good block.
    pub erase_count_min: u32,
    /// Mean erases of a good block.
    pub erase_count_mean: f64,
    /// Most erases of a good block.
    pub erase_count_max: u32,
    /// Bad blocks (factory and grown).
    pub bad_blocks: u32,
}

/// Why a store's summary is incomplete.
#[derive(Debug, thiserror::Error)]
pub enum StoreInfoError {
    /// The store file cannot be read or is not one.
    #[error(transparent)]
    Config(#[from] crate::store_config::StoreConfigError),
    /// Members are missing or unreadable (named in their rows).
    #[error("store {store}: {problems}")]
    Members {
        /// The store file.
        store: PathBuf,
        /// Each member's problem, joined.
        problems: String,
    },
    /// The store has RAM devices, whose contents no other process can see.
    #[error("store {path} has RAM devices, whose contents live only inside the process that made them; there is nothing to summarize from here")]
    RamDevices {
        /// The store file.
        path: PathBuf,
    },
    /// The store could not be opened (locked by a writer, a member refused, ...).
    #[error(transparent)]
    Open(#[from] StoreOpenError),
    /// The file system on the devices does not mount.
    #[error("store {path}: {source}")]
    Mount {
        /// The store file.
        path: PathBuf,
        /// The file system's error.
        source: flashpipe_fs::MountError,
    },
}

/// The summary of the store file alone, with each member's size on disk and label
/// (no lock taken: nothing here changes, and a label is written only by mkfs and by a
/// read-write open of a store made before labels).
pub fn describe_members(store_file: &Path) -> Result<StoreInfo, StoreInfoError> {
    let config = StoreConfig::load(store_file)?;
    let members = config
        .devices
        .iter()
        .enumerate()
        .map(|(index, spec)| describe_member(&config, store_file, index, spec))
        .collect();
    Ok(StoreInfo {
        store_file: store_file.to_path_buf(),
        store_file_version: config.store_file_version,
        identity: config.identity,
        block_size_bytes: config.block_size_bytes,
        stripe_unit_bytes: config.stripe_unit_bytes,
        queue_depth: config.queue_depth,
        members,
        filesystem: None,
    })
}

/// What [`gather_store_info`] found: the summary, whole or as far as it got, and what
/// stopped it.
#[derive(Debug)]
pub struct GatheredInfo {
    /// The summary (without `filesystem` when the store could not be opened).
    pub info: StoreInfo,
    /// Why the store could not be opened or mounted, if it could not.
    pub problem: Option<StoreInfoError>,
}

/// The whole summary: [`describe_members`], then the store locked shared, each flash
/// member's FTL mounted read-only for its size and its array read for its wear, the
/// striped devices opened read-only and the file system mounted read-only. A store with
/// a missing or unreadable member is not opened: the rows made so far come back with the
/// problem. Fails outright only when the store file cannot be read.
pub fn gather_store_info(
    store_file: &Path,
    wait: LockWait,
) -> Result<GatheredInfo, StoreInfoError> {
    let mut info = describe_members(store_file)?;
    let problem = read_opened(store_file, wait, &mut info).err();
    Ok(GatheredInfo { info, problem })
}

fn read_opened(
    store_file: &Path,
    wait: LockWait,
    info: &mut StoreInfo,
) -> Result<(), StoreInfoError> {
    let problems: Vec<String> =
        info.members
            .iter()
            .filter_map(|member| {
                member.problem.as_ref().map(|problem| {
                    format!("member {} ({}) {problem}", member.index, member.location)
                })
            })
            .collect();
    if !problems.is_empty() {
        return Err(StoreInfoError::Members {
            store: store_file.to_path_buf(),
            problems: problems.join("; "),
        });
    }
    let config = StoreConfig::load(store_file)?;
    if crate::running::has_ram_device(&config) {
        return Err(StoreInfoError::RamDevices {
            path: store_file.to_path_buf(),
        });
    }
    let lock = lock_store(&config, store_file, LockMode::Shared, wait)
        .map_err(|error| StoreInfoError::Open(error.into()))?;
    for (spec, member) in config.devices.iter().zip(info.members.iter_mut()) {
        if let DeviceSpec::Flash(flash) = spec {
            member.flash = Some(flash_info(flash, store_file, &config, member.index)?);
            if member.size_bytes.is_none() {
                member.size_bytes = member.flash.as_ref().map(|flash| flash.exported_bytes);
            }
        }
    }
    let opened = open_store_device_locked(&config, store_file, DeviceCreation::ReadOnly, lock)?;
    let mut device = opened.device;
    let format_version = super_block_in_use(&mut *device, config.block_size_bytes)
        .map(|super_block| super_block.format_version);
    let filesystem =
        Filesystem::mount_read_only(device).map_err(|source| StoreInfoError::Mount {
            path: store_file.to_path_buf(),
            source,
        })?;
    let log = filesystem.metadata_log_fill();
    info.filesystem = Some(FilesystemInfo {
        format_version,
        identity: filesystem
            .store_identity()
            .map(|identity| store_identity_text(&identity)),
        metadata_log: Some(LogInfo {
            region_blocks: log.region_block_count,
            used_blocks: log.log_block_count,
            records: log.log_record_count,
        }),
        flash_aware: filesystem
            .flash_totals()
            .map(|(totals, ring_records)| FlashAwareInfo {
                pages_allocated: totals.pages_allocated,
                ring_records,
                erases: totals.erases,
                pages_moved: totals.pages_moved,
            }),
        ..FilesystemInfo::from_stats(&filesystem.stats())
    });
    drop(filesystem);
    drop(opened.lock);
    Ok(())
}

/// The valid super block of the newer commit among the two slots (bytes 0 and
/// `fs_block_size_bytes` of the device), as a mount chooses it.
fn super_block_in_use(
    device: &mut dyn BlockDevice,
    fs_block_size_bytes: u32,
) -> Option<SuperBlock> {
    let device_block_bytes = device.info().block_size_bytes;
    let read_bytes = (device_block_bytes as usize).max(SUPER_BLOCK_SIZE_BYTES);
    let slot_blocks = [0, u64::from(fs_block_size_bytes / device_block_bytes)];
    slot_blocks
        .iter()
        .filter_map(|&first_block| {
            let completion = run_one(
                device,
                Operation::Read {
                    first_block,
                    buffer: IoBuf::zeroed(read_bytes),
                },
            )
            .ok()?;
            completion.status.ok()?;
            SuperBlock::decode(&completion.buffer?).ok()
        })
        .max_by_key(|super_block| super_block.commit_sequence)
}

/// The figures of one flash member: its FTL mounted read-only for the bytes it exports,
/// and the array's own block states (opened read-only) for the wear. A read-only FTL
/// mount leaves the blocks it would erase unclassified, so the array is what knows every
/// block's erase count and whether it is bad (factory or grown).
fn flash_info(
    spec: &FlashDeviceSpec,
    store_file: &Path,
    config: &StoreConfig,
    index: usize,
) -> Result<FlashInfo, StoreInfoError> {
    let (exported_bytes, over_provisioning) = if spec.layout == FlashLayout::FlashAware {
        let device = open_raw_flash_device(
            spec,
            store_file,
            &format!("flash{index}"),
            DeviceCreation::ReadOnly,
        )
        .map_err(|error| StoreInfoError::Open(error.into()))?;
        (device.info().size_bytes(), 0.0)
    } else {
        let device = open_flash_device(
            spec,
            store_file,
            &format!("flash{index}"),
            config.queue_depth,
            DeviceCreation::ReadOnly,
        )
        .map_err(|error| StoreInfoError::Open(error.into()))?;
        (
            device.ftl().info().size_bytes(),
            device.ftl().options().over_provisioning,
        )
    };
    let path = spec
        .path
        .as_ref()
        .map(|path| StoreConfig::resolve_device_path(store_file, path))
        .expect("a flash member opened from the shell has an image (in-memory ones are refused)");
    let array = FlashArray::open_read_only(&path, 1, 1).map_err(|source| {
        StoreInfoError::Open(StoreOpenError::Flash(FlashStoreError::Flash {
            device: spec.describe(),
            source,
        }))
    })?;
    let wear = array_wear(&array);
    let flash_config = array.config();
    Ok(FlashInfo {
        preset: spec.preset.clone(),
        raw_bytes: flash_config.total_pages() * u64::from(flash_config.geometry.page_data_bytes),
        exported_bytes,
        over_provisioning,
        block_count: flash_config.total_blocks(),
        erase_count_min: wear.min,
        erase_count_mean: wear.mean,
        erase_count_max: wear.max,
        bad_blocks: wear.bad,
    })
}

/// Erase counts of the good blocks of an array, and its bad blocks.
struct Wear {
    min: u32,
    mean: f64,
    max: u32,
    bad: u32,
}

fn array_wear(array: &FlashArray) -> Wear {
    let config = array.config();
    let geometry = &config.geometry;
    let mut good: Vec<u32> = Vec::new();
    let mut bad = 0;
    for device in 0..geometry.devices {
        for bus in 0..geometry.channels {
            for chip in 0..geometry.ways {
                for block in 0..config.blocks_per_way() {
                    let address = FlashAddress {
                        device,
                        bus,
                        chip,
                        block,
                        page: 0,
                    };
                    let Some(state) = array.block_state(address) else {
                        continue;
                    };
                    if state.grown_bad || array.is_factory_bad(address) {
                        bad += 1;
                    } else {
                        good.push(state.pe_cycles);
                    }
                }
            }
        }
    }
    Wear {
        min: good.iter().copied().min().unwrap_or(0),
        mean: if good.is_empty() {
            0.0
        } else {
            good.iter().map(|&count| f64::from(count)).sum::<f64>() / good.len() as f64
        },
        max: good.iter().copied().max().unwrap_or(0),
        bad,
    }
}

fn describe_member(
    config: &StoreConfig,
    store_file: &Path,
    index: usize,
    spec: &DeviceSpec,
) -> MemberInfo {
    let mut member = MemberInfo {
        index,
        kind: "ram",
        location: "ram".to_string(),
        size_bytes: spec.size_bytes(),
        allocated_bytes: None,
        label: LabelState::NotApplicable,
        problem: None,
        flash: None,
    };
    match spec {
        DeviceSpec::Ram { .. } => {}
        DeviceSpec::Nbd { uri, .. } => {
            member.kind = "nbd";
            member.location = uri.clone();
        }
        DeviceSpec::Cluster(cluster) => {
            member.kind = "cluster";
            member.location = cluster.describe();
        }
        DeviceSpec::Flash(flash) => {
            member.kind = "flash";
            match &flash.path {
                Some(path) => {
                    let path = StoreConfig::resolve_device_path(store_file, path);
                    member.location = path.display().to_string();
                    match std::fs::metadata(&path) {
                        Ok(metadata) => member.allocated_bytes = Some(metadata.blocks() * 512),
                        Err(error) => member.problem = Some(missing_text(&error)),
                    }
                }
                None => member.location = flash.describe(),
            }
        }
        DeviceSpec::File { path, size_bytes } => {
            let path = StoreConfig::resolve_device_path(store_file, path);
            member.kind = "file";
            member.location = path.display().to_string();
            match std::fs::metadata(&path) {
                Ok(metadata) if metadata.file_type().is_block_device() => {
                    member.kind = "block_device";
                }
                Ok(metadata) if metadata.is_file() => {
                    member.allocated_bytes = Some(metadata.blocks() * 512);
                    member.label = label_state(config, &path, index, *size_bytes);
                    if metadata.len() < *size_bytes {
                        member.problem = Some(format!(
                            "holds {} bytes, fewer than the {size_bytes} the store file records",
                            metadata.len()
                        ));
                    }
                }
                Ok(_) => {
                    member.label = LabelState::Unreadable;
                    member.problem =
                        Some("is neither a regular file nor a block device".to_string());
                }
                Err(error) => {
                    member.label = LabelState::Unreadable;
                    member.problem = Some(missing_text(&error));
                }
            }
        }
    }
    member
}

fn missing_text(error: &std::io::Error) -> String {
    if error.kind() == std::io::ErrorKind::NotFound {
        "does not exist (was the store moved without its devices?)".to_string()
    } else {
        format!("cannot be read: {error}")
    }
}

/// The label past the store's `size_bytes` of the regular file at `path`, against the
/// store file.
fn label_state(config: &StoreConfig, path: &Path, index: usize, size_bytes: u64) -> LabelState {
    let Ok(file) = std::fs::File::open(path) else {
        return LabelState::Unreadable;
    };
    let Ok(metadata) = file.metadata() else {
        return LabelState::Unreadable;
    };
    if metadata.len() < size_bytes + LABEL_BYTES {
        return LabelState::Absent;
    }
    let mut bytes = vec![0u8; LABEL_BYTES as usize];
    if file.read_exact_at(&mut bytes, size_bytes).is_err() {
        return LabelState::Unreadable;
    }
    match MemberLabel::decode(&bytes) {
        None => LabelState::Damaged,
        Some(label)
            if label.index as usize == index
                && label.member_count as usize == config.devices.len()
                && config
                    .identity
                    .is_none_or(|identity| identity == label.identity) =>
        {
            LabelState::Ok
        }
        Some(_) => LabelState::Mismatch,
    }
}
