//! Opening a store's devices: the files, block devices, RAM, emulated flash or remote NBD
//! exports a store file names, striped together when there are several, under a lock
//! that makes the opener the store's one owner (exclusive) or one of its readers (shared)
//! until the opened store is dropped (see [`crate::store_lock`]). A remote export is
//! locked by nothing here: no local file stands for it, and exclusion between clients
//! of one export belongs to its server.

use std::path::{Path, PathBuf};

use flashpipe_array::{CompletionOrder, StripedDevice};
use flashpipe_device::file::{FileDevice, FileDeviceConfig};
use flashpipe_device::{BlockDevice, DeviceError, RamDisk};
use flashpipe_nbd_client::{NbdDevice, NbdDeviceConfig, NbdUri};

use crate::cluster_store::open_cluster_device;
use crate::flash_activity::FlashActivityHandle;
use crate::flash_store::{open_flash_device, FlashLayout, FlashStoreError};
use crate::raw_flash_store::open_raw_flash_device;
use crate::store_config::{DeviceSpec, StoreConfig, StoreConfigError, DEVICE_BLOCK_SIZE_BYTES};
use crate::store_lock::{LockMode, LockWait, StoreLock, StoreLockError};

/// Whether the devices are being created (mkfs) or must already exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceCreation {
    /// mkfs: create missing files with their size; existing ones must have that size.
    CreateMissing,
    /// Every command that may change the store: the files must exist with their recorded
    /// size.
    MustExist,
    /// Read-only commands (ls, stat, cat, get, df, fsck without repair): the files must
    /// exist, and nothing is written to them.
    ReadOnly,
}

impl DeviceCreation {
    /// True when the devices must exist already (every mode but mkfs's).
    pub fn must_exist(self) -> bool {
        self != DeviceCreation::CreateMissing
    }

    /// The lock an opener in this mode takes: shared for read-only commands, exclusive
    /// for everything that may write.
    pub fn lock_mode(self) -> LockMode {
        match self {
            DeviceCreation::ReadOnly => LockMode::Shared,
            DeviceCreation::CreateMissing | DeviceCreation::MustExist => LockMode::Exclusive,
        }
    }
}

/// Why a store's devices cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum StoreOpenError {
    /// The store file is unusable.
    #[error(transparent)]
    Config(#[from] StoreConfigError),
    /// The members do not fit the store file (out of order, another store's).
    #[error(transparent)]
    Members(#[from] crate::member_label::MemberLabelError),
    /// The store's identity could not be written into its store file.
    #[error(transparent)]
    Identity(#[from] crate::identity::IdentityError),
    /// A device could not be opened or set up.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// An emulated flash device could not be created or opened.
    #[error(transparent)]
    Flash(#[from] FlashStoreError),
    /// A cluster device could not be created or opened.
    #[error(transparent)]
    Cluster(#[from] crate::cluster_store::ClusterStoreError),
    /// A device file is missing.
    #[error(
        "device {path} of the store does not exist (was the store moved without its devices?)"
    )]
    MissingDevice {
        /// The device's path.
        path: PathBuf,
    },
    /// Another process owns the store, or its files cannot be locked.
    #[error(transparent)]
    Lock(#[from] StoreLockError),
    /// The store has RAM devices, whose contents live only inside the process that made
    /// them, so a store file naming them cannot be opened again.
    #[error("store {path} has RAM devices, whose contents live only inside one process; use a store of files or block devices (RAM stores serve `flashpipe demo` and `flashpipe bench`)")]
    RamDevices {
        /// The store file.
        path: PathBuf,
    },
    /// The devices opened, but the file system on them does not mount.
    #[error("store {path}: {source}")]
    Mount {
        /// The store file.
        path: PathBuf,
        /// The file system's error.
        source: flashpipe_fs::MountError,
    },
    /// The devices hold the file system of another store than the store file names.
    #[error("store {path} is store {expected}, but its devices hold the file system of store {found}: the store file points at devices of another store; make it name this store's own devices, or use the other store's own store file")]
    OtherStoresDevices {
        /// The store file.
        path: PathBuf,
        /// The identity the store file (or its members' labels) names.
        expected: crate::identity::StoreIdentity,
        /// The identity in the super block of the file system on the devices.
        found: crate::identity::StoreIdentity,
    },
    /// The store's identity could not be given to its file system.
    #[error("store {path}: {source}")]
    SuperBlockIdentity {
        /// The store file.
        path: PathBuf,
        /// The file system's refusal.
        source: flashpipe_fs::StoreIdentityError,
    },
    /// A device is smaller than the store file says.
    #[error("device {path} holds {found_bytes} bytes but the store file records {expected_bytes}: wrong device?")]
    WrongDeviceSize {
        /// The device's path.
        path: PathBuf,
        /// Size recorded in the store file.
        expected_bytes: u64,
        /// Size found.
        found_bytes: u64,
    },
}

/// The opened devices of a store, striped into one device when there are several,
/// with notes worth telling the user (engine fallbacks), and the lock that makes this
/// opener their owner: keep it until the device is closed.
pub struct OpenedStoreDevice {
    /// The device the file system runs on.
    pub device: Box<dyn BlockDevice>,
    /// Remarks such as "io_uring refused: using the thread pool".
    pub notes: Vec<String>,
    /// Locks on the store file and its devices, released when dropped.
    pub lock: StoreLock,
    /// Where a flash device in the flash-aware layout leaves its counters when it is
    /// dropped (`crate::flash_activity`); `None` for every other store.
    pub flash_activity: Option<FlashActivityHandle>,
}

/// Opens every device of `config` (read from `store_file`) and stripes them, failing at
/// once when another process holds a conflicting lock on the store.
pub fn open_store_device(
    config: &StoreConfig,
    store_file: &Path,
    creation: DeviceCreation,
) -> Result<OpenedStoreDevice, StoreOpenError> {
    open_store_device_waiting(config, store_file, creation, LockWait::Fail)
}

/// [`open_store_device`], waiting for a conflicting holder with [`LockWait::Wait`].
pub fn open_store_device_waiting(
    config: &StoreConfig,
    store_file: &Path,
    creation: DeviceCreation,
    wait: LockWait,
) -> Result<OpenedStoreDevice, StoreOpenError> {
    let lock = lock_store(config, store_file, creation.lock_mode(), wait)?;
    open_store_device_locked(config, store_file, creation, lock)
}

/// Opens the devices of a store already locked by `lock` (from [`lock_store`], of the mode
/// `creation` needs; mkfs probes the devices between locking and opening them).
pub fn open_store_device_locked(
    config: &StoreConfig,
    store_file: &Path,
    creation: DeviceCreation,
    lock: StoreLock,
) -> Result<OpenedStoreDevice, StoreOpenError> {
    assert_eq!(
        lock.mode(),
        creation.lock_mode(),
        "a store is opened under the lock its mode needs"
    );
    if creation != DeviceCreation::CreateMissing {
        crate::member_label::check_member_labels(config, store_file)?;
    }
    let (device, notes, flash_activity) = open_devices(config, store_file, creation)?;
    Ok(OpenedStoreDevice {
        device,
        notes,
        lock,
        flash_activity,
    })
}

/// Locks the store file (when it exists: mkfs writes it last) and then every device file,
/// flash image and `.meta` of `config` that exists, sorted by path.
pub fn lock_store(
    config: &StoreConfig,
    store_file: &Path,
    mode: LockMode,
    wait: LockWait,
) -> Result<StoreLock, StoreLockError> {
    let mut lock = StoreLock::new(mode);
    lock.lock_all(&[store_file.to_path_buf()], wait)?;
    let mut device_files = device_files(config, store_file);
    device_files.sort();
    device_files.dedup();
    lock.lock_all(&device_files, wait)?;
    Ok(lock)
}

/// Every local file holding the store's devices: file devices, flash images and their
/// `.meta` files, resolved against the store file's folder.
pub fn device_files(config: &StoreConfig, store_file: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for spec in &config.devices {
        match spec {
            DeviceSpec::File { path, .. } => {
                files.push(StoreConfig::resolve_device_path(store_file, path));
            }
            DeviceSpec::Flash(flash) => {
                if let Some(path) = &flash.path {
                    let image = StoreConfig::resolve_device_path(store_file, path);
                    files.push(flash_metadata_path(&image));
                    files.push(image);
                }
            }
            // A remote export has no local file to lock (see the module's documentation);
            // a cluster's images belong to its nodes.
            DeviceSpec::Ram { .. } | DeviceSpec::Nbd { .. } | DeviceSpec::Cluster(_) => {}
        }
    }
    files
}

/// The `.meta` file beside a flash image.
pub fn flash_metadata_path(image: &Path) -> PathBuf {
    let mut name = image.as_os_str().to_owned();
    name.push(".meta");
    PathBuf::from(name)
}

type OpenedDevices = (
    Box<dyn BlockDevice>,
    Vec<String>,
    Option<FlashActivityHandle>,
);

fn open_devices(
    config: &StoreConfig,
    store_file: &Path,
    creation: DeviceCreation,
) -> Result<OpenedDevices, StoreOpenError> {
    let mut members: Vec<Box<dyn BlockDevice>> = Vec::with_capacity(config.devices.len());
    let mut notes = Vec::new();
    let mut flash_activity = None;
    for (index, spec) in config.devices.iter().enumerate() {
        let opening = Opening {
            index,
            creation,
            notes: &mut notes,
            flash_activity: &mut flash_activity,
        };
        members.push(open_member(config, store_file, spec, opening)?);
    }
    if members.len() == 1 {
        let device = members.pop().expect("one member");
        return Ok((device, notes, flash_activity));
    }
    let member_count = members.len() as u32;
    let striped = StripedDevice::new(
        "store",
        members,
        config.stripe_unit_bytes,
        CompletionOrder::AsCompleted,
        (config.queue_depth * member_count).min(flashpipe_device::MAX_QUEUE_DEPTH),
    )?;
    Ok((Box::new(striped), notes, flash_activity))
}

/// One member's place and mode, and what its opening leaves for the opener.
struct Opening<'a> {
    index: usize,
    creation: DeviceCreation,
    /// Remarks worth telling the user.
    notes: &'a mut Vec<String>,
    /// A flash-aware device's activity handle.
    flash_activity: &'a mut Option<FlashActivityHandle>,
}

fn open_member(
    config: &StoreConfig,
    store_file: &Path,
    spec: &DeviceSpec,
    opening: Opening<'_>,
) -> Result<Box<dyn BlockDevice>, StoreOpenError> {
    let Opening {
        index,
        creation,
        notes,
        flash_activity,
    } = opening;
    match spec {
        DeviceSpec::Ram { size_bytes } => Ok(Box::new(RamDisk::new(
            &format!("ram{index}"),
            DEVICE_BLOCK_SIZE_BYTES,
            size_bytes / u64::from(DEVICE_BLOCK_SIZE_BYTES),
            config.queue_depth,
        )?)),
        DeviceSpec::Flash(flash) if flash.layout == FlashLayout::FlashAware => {
            let device =
                open_raw_flash_device(flash, store_file, &format!("flash{index}"), creation)?;
            *flash_activity = Some(device.activity_handle());
            Ok(Box::new(device))
        }
        DeviceSpec::Flash(flash) => {
            let device = open_flash_device(
                flash,
                store_file,
                &format!("flash{index}"),
                config.queue_depth,
                creation,
            )?;
            if creation == DeviceCreation::CreateMissing {
                notes.push(device.capacity_note(flash, store_file));
            }
            Ok(Box::new(device))
        }
        DeviceSpec::Cluster(cluster) => Ok(Box::new(open_cluster_device(
            cluster,
            store_file,
            &format!("cluster{index}"),
            config.queue_depth,
            creation,
        )?)),
        DeviceSpec::Nbd { uri, size_bytes } => Ok(Box::new(open_nbd_member(
            config,
            uri,
            *size_bytes,
            creation,
        )?)),
        DeviceSpec::File { path, size_bytes } => {
            let path = StoreConfig::resolve_device_path(store_file, path);
            let exists = path.exists();
            if !exists && creation.must_exist() {
                return Err(StoreOpenError::MissingDevice { path });
            }
            let mut file_config = FileDeviceConfig::new(&path);
            file_config.queue_depth = config.queue_depth;
            // A new image file is sparse (as `qemu-img create` makes them); mkfs
            // `--preallocate` allocates it whole afterwards (`crate::create`).
            file_config.preallocate = false;
            file_config.read_only = creation == DeviceCreation::ReadOnly;
            let is_regular_file =
                !exists || path.metadata().map(|meta| meta.is_file()).unwrap_or(false);
            if is_regular_file {
                let labelled = check_regular_file_size(&path, *size_bytes, creation)?;
                file_config.create_size_bytes =
                    (!file_config.read_only && !labelled).then_some(*size_bytes);
            }
            let device = FileDevice::open(file_config)?;
            if let Some(reason) = device.fallback_reason() {
                notes.push(format!("{}: {reason}", path.display()));
            }
            let found_bytes = device.info().size_bytes();
            if found_bytes < *size_bytes {
                return Err(StoreOpenError::WrongDeviceSize {
                    path,
                    expected_bytes: *size_bytes,
                    found_bytes,
                });
            }
            Ok(Box::new(device))
        }
    }
}

/// Opens a remote export: the store's queue depth, read-only for read-only commands,
/// at most the `size_bytes` the store file records (an export smaller than that is
/// refused).
fn open_nbd_member(
    config: &StoreConfig,
    uri: &str,
    size_bytes: u64,
    creation: DeviceCreation,
) -> Result<NbdDevice, StoreOpenError> {
    let parsed = NbdUri::parse(uri).map_err(|error| StoreConfigError::BadDevice {
        entry: uri.to_string(),
        reason: error.reason,
    })?;
    let mut device_config = NbdDeviceConfig::new(parsed);
    device_config.queue_depth = config.queue_depth;
    device_config.read_only = creation == DeviceCreation::ReadOnly;
    device_config.size_limit_bytes = Some(size_bytes);
    let device = NbdDevice::open(device_config)?;
    let found_bytes = device.info().size_bytes();
    if found_bytes < size_bytes {
        return Err(StoreOpenError::WrongDeviceSize {
            path: PathBuf::from(uri),
            expected_bytes: size_bytes,
            found_bytes: device.export().size_bytes,
        });
    }
    Ok(device)
}

fn check_regular_file_size(
    path: &Path,
    expected_bytes: u64,
    creation: DeviceCreation,
) -> Result<bool, StoreOpenError> {
    let Ok(metadata) = path.metadata() else {
        return Ok(false);
    };
    let found_bytes = metadata.len();
    if found_bytes == expected_bytes + crate::member_label::LABEL_BYTES {
        return Ok(true);
    }
    let acceptable = match creation {
        DeviceCreation::CreateMissing => found_bytes == expected_bytes || found_bytes == 0,
        DeviceCreation::MustExist | DeviceCreation::ReadOnly => found_bytes == expected_bytes,
    };
    if acceptable {
        return Ok(false);
    }
    Err(StoreOpenError::WrongDeviceSize {
        path: path.to_path_buf(),
        expected_bytes,
        found_bytes,
    })
}
