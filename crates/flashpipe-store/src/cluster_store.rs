//! A store device on a minFlash cluster (`kind = "cluster"`, `--devices
//! cluster:DESCRIPTION.toml#HOST`): the host FTL runs in the opening process over
//! `flashpipe_cluster_host::backend::ClusterFlash`, host `HOST` of the cluster that
//! `DESCRIPTION.toml` describes, connected to the node that host is attached to. The FTL
//! sees the devices the host owns a share of side by side as one array (docs/cluster.md,
//! "A store on the cluster"); its pages live in the nodes' images, which the nodes
//! persist, and the FTL recovers its map from them at every open (mount), as it does
//! from a local flash image.
//!
//! Faults: when the cluster fails a request (a node or link down, no ack in time), the
//! backend stops; every request after that, and the wait that was under way, fails with
//! a device error naming the cluster device, the hop and the status. The FTL is then
//! dropped without a clean unmount (nothing more reaches the cluster); the next open
//! mounts it from what the nodes hold, which includes every operation acknowledged
//! before the fault.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flashpipe_cluster::description::ClusterDescription;
use flashpipe_cluster_host::backend::{ClusterFlash, ClusterOpenError, FaultHandle};
use flashpipe_cluster_host::session::SessionOptions;
use flashpipe_cluster_host::view::ClusterView;
use flashpipe_device::{
    BlockDevice, Clock, Completion, DeviceError, DeviceErrorKind, DeviceInfo, Rejected, Request,
};
use flashpipe_ftl::{FlashBackend, Ftl, FtlError, FtlOptions};
use serde::{Deserialize, Serialize};

use crate::flash_store::{DEFAULT_CHECKPOINT_INTERVAL_PAGES, DEFAULT_OVER_PROVISIONING};
use crate::store::DeviceCreation;
use crate::store_config::StoreConfig;

/// How a cluster device starts in a `--devices` list: `cluster:DESCRIPTION.toml#HOST`.
pub const CLUSTER_PREFIX: &str = "cluster:";

fn default_over_provisioning() -> f64 {
    DEFAULT_OVER_PROVISIONING
}

/// A cluster device of a store file (`kind = "cluster"`); see docs/store-file.md.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterDeviceSpec {
    /// The cluster description file (relative to the store file's folder unless absolute).
    pub description: PathBuf,
    /// The host this store runs as.
    pub host: u32,
    /// Blocks of every chip the FTL uses on each device (from the start of the host's
    /// share); mkfs records the value it used, so a reopened store sees the same array.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks_per_chip: Option<u32>,
    /// Share of the usable pages the FTL holds back from the host (0.1 = 10 %).
    #[serde(default = "default_over_provisioning")]
    pub over_provisioning: f64,
    /// Bytes the store uses; default: everything the FTL exports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
}

impl ClusterDeviceSpec {
    /// Parses what follows `cluster:` in a `--devices` entry: `DESCRIPTION.toml#HOST`.
    pub fn parse_entry(text: &str) -> Result<ClusterDeviceSpec, String> {
        let Some((description, host)) = text.rsplit_once('#') else {
            return Err("a cluster device is cluster:DESCRIPTION.toml#HOST (the description file, then # and the host id)".to_string());
        };
        if description.is_empty() {
            return Err("empty description path before #HOST".to_string());
        }
        let host = host.parse::<u32>().map_err(|_| {
            format!("host {host:?} after # is not a host id (a number: 0, 1, 2, ...)")
        })?;
        Ok(ClusterDeviceSpec {
            description: PathBuf::from(description),
            host,
            blocks_per_chip: None,
            over_provisioning: DEFAULT_OVER_PROVISIONING,
            size_bytes: None,
        })
    }

    /// `cluster:DESCRIPTION#HOST`.
    pub fn describe(&self) -> String {
        format!(
            "{CLUSTER_PREFIX}{}#{}",
            self.description.display(),
            self.host
        )
    }

    /// The description file, resolved against the store file's folder.
    pub fn description_path(&self, store_file: &Path) -> PathBuf {
        StoreConfig::resolve_device_path(store_file, &self.description)
    }

    /// The host's view of the cluster its description file describes (read, not
    /// connected to).
    pub fn view(&self, store_file: &Path) -> Result<ClusterView, String> {
        let path = self.description_path(store_file);
        let description = ClusterDescription::from_file(&path)
            .map_err(|error| format!("cluster description {}: {error}", path.display()))?;
        ClusterView::of_host(&description, self.host, self.blocks_per_chip)
            .map_err(|error| format!("cluster description {}: {error}", path.display()))
    }

    /// Records the blocks per chip the host's view has (mkfs: so a reopened store sees
    /// the same array even if the default changes).
    pub fn resolve(&mut self, store_file: &Path) -> Result<(), String> {
        self.blocks_per_chip = Some(self.view(store_file)?.blocks_per_chip());
        Ok(())
    }

    /// The FTL's block: one flash page of the cluster's preset.
    pub fn page_bytes(&self, store_file: &Path) -> Result<u32, String> {
        Ok(self.view(store_file)?.config().geometry.page_data_bytes)
    }

    /// Checks every rule of docs/store-file.md that needs no connection: the description
    /// and the host's view, the over-provisioning, sizes that are whole flash pages.
    pub fn validate(
        &self,
        store_file: &Path,
        fs_block_size_bytes: u32,
        stripe_unit_bytes: u64,
    ) -> Result<(), String> {
        if !(0.0..0.95).contains(&self.over_provisioning) {
            return Err(format!(
                "over_provisioning {} is not within 0 (included) to 0.95 (a share of the usable pages)",
                self.over_provisioning
            ));
        }
        let page_bytes = u64::from(self.page_bytes(store_file)?);
        if u64::from(fs_block_size_bytes) % page_bytes != 0 || stripe_unit_bytes % page_bytes != 0 {
            return Err(format!(
                "the file-system block ({fs_block_size_bytes} bytes) and the stripe unit ({stripe_unit_bytes} bytes) must be multiples of the cluster's flash page ({page_bytes} bytes): the FTL's block is one page"
            ));
        }
        if let Some(size_bytes) = self.size_bytes {
            if size_bytes % page_bytes != 0 {
                return Err(format!(
                    "size_bytes {size_bytes} is not a whole number of {page_bytes}-byte flash pages"
                ));
            }
        }
        Ok(())
    }
}

/// Why a cluster device cannot be created or opened.
#[derive(Debug, thiserror::Error)]
pub enum ClusterStoreError {
    /// The description, the host's view or the connection to its node.
    #[error("{device}: {source}")]
    Open {
        /// The device, as on the command line.
        device: String,
        /// Why.
        source: ClusterOpenError,
    },
    /// The FTL failed to format or mount; `fault` names the cluster's failure when the
    /// cluster caused it.
    #[error("{device}: {}", fault.as_ref().map_or_else(|| source.to_string(), |fault| fault.to_string()))]
    Ftl {
        /// The device.
        device: String,
        /// The FTL's error.
        source: FtlError,
        /// The cluster's fault, if any.
        fault: Option<String>,
    },
    /// The FTL exports less than the store file's `size_bytes`.
    #[error("{device}: its FTL exports {exported_bytes} bytes, less than the store's size of {size_bytes} bytes: make the store with a smaller --size")]
    TooSmall {
        /// The device.
        device: String,
        /// What the FTL exports.
        exported_bytes: u64,
        /// What the store file asks for.
        size_bytes: u64,
    },
}

/// Opens (or, for mkfs, formats) the cluster device `spec` of the store at `store_file`,
/// named `name`. Nothing is written to the cluster before the node accepted the host.
pub fn open_cluster_device(
    spec: &ClusterDeviceSpec,
    store_file: &Path,
    name: &str,
    queue_depth: u32,
    creation: DeviceCreation,
) -> Result<ClusterStoreDevice, ClusterStoreError> {
    let device = spec.describe();
    let backend = ClusterFlash::open(
        &spec.description_path(store_file),
        spec.host,
        spec.blocks_per_chip,
        SessionOptions::default(),
    )
    .map_err(|source| ClusterStoreError::Open {
        device: device.clone(),
        source,
    })?;
    let fault = backend.fault_handle();
    let options = FtlOptions {
        name: name.to_string(),
        over_provisioning: spec.over_provisioning,
        queue_depth,
        checkpoint_interval_pages: DEFAULT_CHECKPOINT_INTERVAL_PAGES,
        ..FtlOptions::default()
    };
    let backend = Box::new(backend) as Box<dyn FlashBackend>;
    let ftl_error = |source: FtlError| ClusterStoreError::Ftl {
        device: device.clone(),
        source,
        fault: fault.get().map(|fault| fault.to_string()),
    };
    let ftl = match creation {
        DeviceCreation::CreateMissing => Ftl::format(backend, options).map_err(ftl_error)?,
        DeviceCreation::MustExist => Ftl::mount(backend, options).map_err(ftl_error)?.0,
        DeviceCreation::ReadOnly => Ftl::mount_read_only(backend, options).map_err(ftl_error)?.0,
    };
    if let Some(fault) = fault.get() {
        return Err(ClusterStoreError::Ftl {
            device,
            source: FtlError::Unsupported {
                detail: "the cluster failed while the FTL started".to_string(),
            },
            fault: Some(fault.to_string()),
        });
    }
    let mut info = ftl.info().clone();
    let exported_bytes = info.size_bytes();
    if let Some(size_bytes) = spec.size_bytes {
        if size_bytes > exported_bytes {
            return Err(ClusterStoreError::TooSmall {
                device,
                exported_bytes,
                size_bytes,
            });
        }
        info.block_count = size_bytes / u64::from(info.block_size_bytes);
    }
    Ok(ClusterStoreDevice {
        ftl: Some(ftl),
        info,
        fault,
    })
}

/// What the host's share of the cluster holds, for mkfs's look before it formats: an FTL
/// that mounts (a store made there before) is named; `None` when nothing mounts or the
/// cluster cannot be reached (creating the store then says why).
pub fn cluster_content(spec: &ClusterDeviceSpec, store_file: &Path) -> Option<String> {
    let backend = ClusterFlash::open(
        &spec.description_path(store_file),
        spec.host,
        spec.blocks_per_chip,
        SessionOptions::default(),
    )
    .ok()?;
    let fault = backend.fault_handle();
    let options = FtlOptions {
        name: "probe".to_string(),
        over_provisioning: spec.over_provisioning,
        ..FtlOptions::default()
    };
    let (ftl, _) = Ftl::mount_read_only(Box::new(backend), options).ok()?;
    if fault.get().is_some() {
        return None;
    }
    Some(format!(
        "a flash translation layer of {} logical pages on host {}'s share (a store made there before)",
        ftl.info().block_count,
        spec.host
    ))
}

/// The host FTL over the cluster, as a store device (see the module doc).
pub struct ClusterStoreDevice {
    ftl: Option<Ftl>,
    info: DeviceInfo,
    fault: FaultHandle,
}

impl ClusterStoreDevice {
    fn ftl(&self) -> &Ftl {
        self.ftl
            .as_ref()
            .expect("the FTL is present until the device is dropped")
    }

    fn ftl_mut(&mut self) -> &mut Ftl {
        self.ftl
            .as_mut()
            .expect("the FTL is present until the device is dropped")
    }

    /// The device error of the cluster's fault, once there is one.
    fn fault_error(&self) -> Option<DeviceError> {
        self.fault.get().map(|fault| {
            DeviceError::new(
                &self.info.name,
                DeviceErrorKind::IoFailed {
                    detail: format!(
                        "{fault}; the store stopped using the cluster (reopen it when the node is back: everything acknowledged before is kept)"
                    ),
                },
            )
        })
    }
}

impl Drop for ClusterStoreDevice {
    fn drop(&mut self) {
        let Some(ftl) = self.ftl.take() else {
            return;
        };
        if self.fault.get().is_some() || ftl.is_read_only() {
            return;
        }
        drop(ftl.unmount());
    }
}

impl BlockDevice for ClusterStoreDevice {
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
        if let Some(error) = self.fault_error() {
            return Err(Rejected { request, error });
        }
        self.ftl_mut().submit(request)
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        if self.fault.get().is_some() {
            return 0;
        }
        self.ftl_mut().poll_completions(completions)
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        if let Some(error) = self.fault_error() {
            return Err(error);
        }
        let waited = self.ftl_mut().wait_completions(completions);
        match (waited, self.fault_error()) {
            (Ok(count), _) if count > 0 => Ok(count),
            (_, Some(error)) => Err(error),
            (waited, None) => waited,
        }
    }

    fn in_flight(&self) -> usize {
        self.ftl().in_flight()
    }

    fn copies_by_reference(&self) -> bool {
        self.ftl().copies_by_reference()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store_config::{parse_device_list, DeviceSpec};

    #[test]
    fn entries_parse_and_describe_themselves() {
        let devices = parse_device_list("cluster:racks/c.toml#3", None).unwrap();
        let DeviceSpec::Cluster(spec) = &devices[0] else {
            panic!("a cluster device");
        };
        assert_eq!(spec.description, PathBuf::from("racks/c.toml"));
        assert_eq!(spec.host, 3);
        assert_eq!(devices[0].describe(), "cluster:racks/c.toml#3");
        let with_hash = ClusterDeviceSpec::parse_entry("a#b.toml#0").unwrap();
        assert_eq!(with_hash.description, PathBuf::from("a#b.toml"));
    }

    #[test]
    fn bad_entries_are_refused_with_the_form() {
        for (entry, fragment) in [
            ("c.toml", "cluster:DESCRIPTION.toml#HOST"),
            ("#0", "empty description path"),
            ("c.toml#", "is not a host id"),
            ("c.toml#-1", "is not a host id"),
            ("c.toml#4294967296", "is not a host id"),
            ("c.toml#one", "is not a host id"),
        ] {
            let error = ClusterDeviceSpec::parse_entry(entry).unwrap_err();
            assert!(error.contains(fragment), "{entry}: {error}");
        }
        let mut spec = ClusterDeviceSpec::parse_entry("c.toml#0").unwrap();
        spec.over_provisioning = 0.95;
        assert!(spec.validate(Path::new("s.toml"), 8192, 65536).is_err());
    }
}
