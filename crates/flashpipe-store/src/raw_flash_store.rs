//! A store's flash device in the flash-aware layout (`layout = "flash-aware"`,
//! docs/design/29-flash-aware.md): the preset's array, kept in its sparse image as every
//! flash device is, under `flashpipe_ftl::RawPageDevice` with no FTL. The file system on it
//! allocates pages, collects garbage and erases blocks itself (`flashpipe_fs`'s
//! flash-aware layout); this device only opens and closes the array and makes it durable
//! at every completed flush (the raw device syncs the array's storage then).
//!
//! Pacing: with `realtime = true` on the device (`mkfs --realtime`) the raw device runs
//! under [`PacedDevice`], so every completion comes back at its modeled instant on the
//! wall clock, as `flashpipe nbd serve --realtime` paces a flash export. It is decided
//! here, where the store's flash device is opened, so every process that opens the
//! store (mount, serve, the store commands) sees the same device and no option travels
//! through them. When the device is dropped it leaves its counters and the pacing's lags
//! in its [`FlashActivityHandle`] (`crate::flash_activity`).

use std::path::Path;
use std::sync::Arc;

use flashpipe_device::paced::{LagReport, DEFAULT_LAG_WARNING_NS};
use flashpipe_device::{
    BlockDevice, Clock, Completion, DeviceError, DeviceInfo, PacedDevice, Rejected, Request,
};
use flashpipe_flash::StorageMode;
use flashpipe_ftl::raw_pages::RawPageCounters;
use flashpipe_ftl::RawPageDevice;

use crate::flash_activity::{update, FlashActivityHandle};
use crate::flash_store::{
    companion_path, flash_error, new_array, reopen_array, FlashDeviceSpec, FlashStoreError,
};
use crate::store::DeviceCreation;
use crate::store_config::StoreConfig;

/// A flash device in the flash-aware layout.
pub struct RawFlashStoreDevice {
    raw: Pacing,
    info: DeviceInfo,
    read_only: bool,
    activity: FlashActivityHandle,
}

/// The raw device, in virtual time or paced against the wall clock.
enum Pacing {
    Virtual(RawPageDevice),
    RealTime(PacedDevice<RawPageDevice>),
}

impl Pacing {
    fn new(raw: RawPageDevice, realtime: bool) -> Pacing {
        match realtime {
            true => Pacing::RealTime(PacedDevice::new(raw, DEFAULT_LAG_WARNING_NS)),
            false => Pacing::Virtual(raw),
        }
    }

    fn raw(&self) -> &RawPageDevice {
        match self {
            Pacing::Virtual(raw) => raw,
            Pacing::RealTime(paced) => paced.inner(),
        }
    }

    fn raw_mut(&mut self) -> &mut RawPageDevice {
        match self {
            Pacing::Virtual(raw) => raw,
            Pacing::RealTime(paced) => paced.inner_mut(),
        }
    }

    fn device(&self) -> &dyn BlockDevice {
        match self {
            Pacing::Virtual(raw) => raw,
            Pacing::RealTime(paced) => paced,
        }
    }

    fn device_mut(&mut self) -> &mut dyn BlockDevice {
        match self {
            Pacing::Virtual(raw) => raw,
            Pacing::RealTime(paced) => paced,
        }
    }

    fn lag_report(&self) -> Option<LagReport> {
        match self {
            Pacing::Virtual(_) => None,
            Pacing::RealTime(paced) => Some(paced.lag_report()),
        }
    }
}

/// Creates (mkfs) or opens the flash device `spec` of the store at `store_file` in the
/// flash-aware layout, named `name`. An image that exists is reused by mkfs (its wear
/// kept); on a failed creation a new image is removed again.
pub fn open_raw_flash_device(
    spec: &FlashDeviceSpec,
    store_file: &Path,
    name: &str,
    creation: DeviceCreation,
) -> Result<RawFlashStoreDevice, FlashStoreError> {
    let device = spec.describe();
    let config = spec
        .flash_config(store_file)
        .map_err(|reason| FlashStoreError::Spec {
            device: device.clone(),
            reason,
        })?;
    let Some(path) = spec
        .path
        .as_ref()
        .map(|path| StoreConfig::resolve_device_path(store_file, path))
    else {
        return Err(FlashStoreError::InMemory { device });
    };
    let read_only = creation == DeviceCreation::ReadOnly;
    let array = match creation {
        DeviceCreation::CreateMissing if !path.exists() => {
            let created = new_array(&device, config, StorageMode::File(path.clone()), spec.seed);
            if created.is_err() {
                let _ = std::fs::remove_file(&path);
                for suffix in [".meta", ".meta.tmp", ".journal"] {
                    let _ = std::fs::remove_file(companion_path(&path, suffix));
                }
            }
            created?
        }
        _ if !path.exists() => return Err(FlashStoreError::MissingImage { path }),
        _ => reopen_array(&device, &path, &config, read_only)?,
    };
    let raw = RawPageDevice::new(Box::new(array), name).map_err(|error| FlashStoreError::Spec {
        device: device.clone(),
        reason: error.to_string(),
    })?;
    let mut info = raw.info().clone();
    if let Some(size_bytes) = spec.size_bytes {
        let erase_block_bytes =
            u64::from(raw.pages_per_erase_block()) * u64::from(info.block_size_bytes);
        let exported_bytes = info.size_bytes();
        if size_bytes > exported_bytes {
            return Err(FlashStoreError::TooSmall {
                device,
                exported_bytes,
                size_bytes,
            });
        }
        info.block_count = size_bytes / erase_block_bytes * u64::from(raw.pages_per_erase_block());
    }
    Ok(RawFlashStoreDevice {
        raw: Pacing::new(raw, spec.realtime),
        info,
        read_only,
        activity: FlashActivityHandle::default(),
    })
}

impl RawFlashStoreDevice {
    /// Pages per erase block (what mkfs gives the flash-aware layout).
    pub fn pages_per_erase_block(&self) -> u64 {
        u64::from(self.raw.raw().pages_per_erase_block())
    }

    /// Pages read and programmed, erases, refused programs since the device was opened.
    pub fn counters(&self) -> RawPageCounters {
        self.raw.raw().counters()
    }

    /// Where the device leaves its counters and lags when it is dropped.
    pub fn activity_handle(&self) -> FlashActivityHandle {
        Arc::clone(&self.activity)
    }

    /// Leaves the counters and lags so far in the activity handle.
    fn publish_activity(&self) {
        let counters = self.counters();
        let pacing = self.raw.lag_report();
        update(&self.activity, |activity| {
            activity.pages_read = counters.pages_read;
            activity.pages_programmed = counters.pages_programmed;
            activity.erases = counters.erases;
            activity.refused_programs = counters.refused_programs;
            activity.pacing = pacing;
        });
    }

    /// Makes the array's storage durable; a read-only device writes nothing.
    pub fn close(mut self) -> Result<(), FlashStoreError> {
        let device = self.info.name.to_string();
        self.sync().map_err(|source| flash_error(&device, source))
    }

    fn sync(&mut self) -> Result<(), flashpipe_flash::FlashError> {
        if self.read_only {
            return Ok(());
        }
        self.raw.raw_mut().backend_mut().sync_storage()
    }
}

impl Drop for RawFlashStoreDevice {
    fn drop(&mut self) {
        let _best_effort = self.sync();
        self.publish_activity();
    }
}

impl BlockDevice for RawFlashStoreDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The flash model's virtual clock, or the wall clock when paced.
    fn clock(&self) -> Arc<dyn Clock> {
        self.raw.device().clock()
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        if let Err(error) = self.info.validate(&request.operation) {
            return Err(Rejected { request, error });
        }
        self.raw.device_mut().submit(request)
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        self.raw.device_mut().poll_completions(completions)
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        self.raw.device_mut().wait_completions(completions)
    }

    fn in_flight(&self) -> usize {
        self.raw.device().in_flight()
    }
}
