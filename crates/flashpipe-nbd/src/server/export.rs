//! Exports: a named [`BlockDevice`] served over NBD, and the `NAME=SPEC` grammar for
//! the device kinds this crate opens itself (`ram:SIZE`, a file or block device path).
//! Kinds that need crates above the device layer (emulated flash under the FTL) are
//! opened by the caller and handed in as a device.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;
use flashpipe_device::file::{FileDevice, FileDeviceConfig};
use flashpipe_device::{BlockDevice, RamDisk};
use thiserror::Error;

use super::extents::{ExtentMap, DEFAULT_EXTENT_RANGE_LIMIT};
use super::worker::Job;
use crate::wire::MAX_STRING_BYTES;

/// Block size of a `ram:` export: 512 bytes, so clients that assume 512-byte sectors
/// without asking (the Linux kernel, older qemu) are served.
pub const RAM_EXPORT_BLOCK_SIZE_BYTES: u32 = 512;
/// Queue depth of the devices this module opens.
pub const EXPORT_QUEUE_DEPTH: u32 = 128;

/// How the allocation map starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitialAllocation {
    /// Every block is a hole (a device known to be fresh: a new RAM disk).
    AllHoles,
    /// Every block holds data (contents unknown: an existing file or block device).
    AllData,
}

/// One export: a name, a device and how to describe it.
pub struct Export {
    /// The export's name (what clients ask for; at most 4096 bytes, no NUL).
    pub name: String,
    /// Text shown to humans (`NBD_INFO_DESCRIPTION`, `NBD_OPT_LIST`).
    pub description: String,
    /// The device served.
    pub device: Box<dyn BlockDevice>,
    /// Refuse writes, trims and write-zeroes (`NBD_FLAG_READ_ONLY`).
    pub read_only: bool,
    /// Whether a trimmed block of this device reads as zeroes: then holes report
    /// `NBD_STATE_ZERO` and `WRITE_ZEROES` without `NO_HOLE` trims (fast zero).
    pub trim_reads_zeroes: bool,
    /// How the allocation map starts.
    pub initial_allocation: InitialAllocation,
}

impl std::fmt::Debug for Export {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Export")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("device", self.device.info())
            .field("read_only", &self.read_only)
            .finish()
    }
}

/// Why an export spec was refused.
#[derive(Debug, Error)]
pub enum ExportSpecError {
    /// No `=` between name and device.
    #[error("export `{spec}`: expected NAME=DEVICE (ram:SIZE, or a file or block device path)")]
    MissingEquals {
        /// The spec.
        spec: String,
    },
    /// A bad name.
    #[error("export `{spec}`: name {detail}")]
    BadName {
        /// The spec.
        spec: String,
        /// What is wrong.
        detail: String,
    },
    /// A bad size.
    #[error("export `{spec}`: {detail}")]
    BadSize {
        /// The spec.
        spec: String,
        /// What is wrong.
        detail: String,
    },
    /// The device would not open.
    #[error("export `{spec}`: {source}")]
    Device {
        /// The spec.
        spec: String,
        /// The device's error.
        source: flashpipe_device::DeviceError,
    },
}

/// A parsed `NAME=DEVICE` spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportDeviceSpec {
    /// `ram:SIZE`: a zero-filled RAM disk.
    Ram {
        /// Size in bytes (a multiple of 512).
        size_bytes: u64,
    },
    /// `file:PATH` or a path: an existing file or block device, through io_uring.
    File {
        /// The path.
        path: PathBuf,
    },
    /// Any other `KIND:REST` (e.g. `flash:PRESET`), for the caller to open.
    Other {
        /// The kind before the colon.
        kind: String,
        /// The rest.
        rest: String,
    },
}

/// Splits `NAME=DEVICE` and parses the device part.
pub fn parse_export_spec(spec: &str) -> Result<(String, ExportDeviceSpec), ExportSpecError> {
    let Some((name, device)) = spec.split_once('=') else {
        return Err(ExportSpecError::MissingEquals {
            spec: spec.to_string(),
        });
    };
    check_export_name(name).map_err(|detail| ExportSpecError::BadName {
        spec: spec.escape_debug().to_string(),
        detail,
    })?;
    let device_spec = if let Some(size) = device.strip_prefix("ram:") {
        let size_bytes =
            flashpipe_units::parse_size_bytes(size).map_err(|error| ExportSpecError::BadSize {
                spec: spec.to_string(),
                detail: error.to_string(),
            })?;
        if size_bytes == 0 || size_bytes % u64::from(RAM_EXPORT_BLOCK_SIZE_BYTES) != 0 {
            return Err(ExportSpecError::BadSize {
                spec: spec.to_string(),
                detail: format!(
                    "RAM disk size {size_bytes} bytes is not a positive multiple of {RAM_EXPORT_BLOCK_SIZE_BYTES}"
                ),
            });
        }
        ExportDeviceSpec::Ram { size_bytes }
    } else if let Some(path) = device.strip_prefix("file:") {
        ExportDeviceSpec::File { path: path.into() }
    } else if device.starts_with('/') || device.starts_with('.') {
        ExportDeviceSpec::File {
            path: device.into(),
        }
    } else if let Some((kind, rest)) = device.split_once(':') {
        ExportDeviceSpec::Other {
            kind: kind.to_string(),
            rest: rest.to_string(),
        }
    } else {
        ExportDeviceSpec::File {
            path: device.into(),
        }
    };
    Ok((name.to_string(), device_spec))
}

/// Checks an export name: at most 4096 bytes (the specification's strings), no NUL and
/// no other control character (a newline would forge a line of the readiness output and
/// the logs that name exports).
pub fn check_export_name(name: &str) -> Result<(), String> {
    if name.len() > MAX_STRING_BYTES {
        return Err(format!("is {} bytes, limit {MAX_STRING_BYTES}", name.len()));
    }
    if name.contains('\0') {
        return Err("contains a NUL".to_string());
    }
    if let Some(control) = name.chars().find(|character| character.is_control()) {
        return Err(format!(
            "contains the control character U+{:04X}; export names are printed, so they hold printable characters only",
            u32::from(control)
        ));
    }
    Ok(())
}

impl Export {
    /// Opens a `ram:` or file spec as an export; `Other` kinds are the caller's.
    pub fn open(name: &str, device_spec: &ExportDeviceSpec) -> Result<Export, ExportSpecError> {
        let spec_text = || match device_spec {
            ExportDeviceSpec::Ram { size_bytes } => format!("{name}=ram:{size_bytes}"),
            ExportDeviceSpec::File { path } => format!("{name}={}", path.display()),
            ExportDeviceSpec::Other { kind, rest } => format!("{name}={kind}:{rest}"),
        };
        match device_spec {
            ExportDeviceSpec::Ram { size_bytes } => {
                let block_count = size_bytes / u64::from(RAM_EXPORT_BLOCK_SIZE_BYTES);
                let device = RamDisk::new(
                    &format!("ram export {name}"),
                    RAM_EXPORT_BLOCK_SIZE_BYTES,
                    block_count,
                    EXPORT_QUEUE_DEPTH,
                )
                .map_err(|source| ExportSpecError::Device {
                    spec: spec_text(),
                    source,
                })?;
                Ok(Export {
                    name: name.to_string(),
                    description: format!(
                        "flashpipe RAM disk, {}",
                        flashpipe_units::HumanBytes(*size_bytes)
                    ),
                    device: Box::new(device),
                    read_only: false,
                    trim_reads_zeroes: true,
                    initial_allocation: InitialAllocation::AllHoles,
                })
            }
            ExportDeviceSpec::File { path } => {
                let mut config = FileDeviceConfig::new(path.clone());
                config.queue_depth = EXPORT_QUEUE_DEPTH;
                let device =
                    FileDevice::open(config).map_err(|source| ExportSpecError::Device {
                        spec: spec_text(),
                        source,
                    })?;
                let is_block_device = device.is_block_device();
                Ok(Export {
                    name: name.to_string(),
                    description: format!("flashpipe file device {}", path.display()),
                    device: Box::new(device),
                    read_only: false,
                    trim_reads_zeroes: !is_block_device,
                    initial_allocation: InitialAllocation::AllData,
                })
            }
            ExportDeviceSpec::Other { kind, .. } => Err(ExportSpecError::BadSize {
                spec: spec_text(),
                detail: format!("device kind `{kind}` is not opened by the NBD crate"),
            }),
        }
    }
}

/// What connections know of an export while its worker owns the device.
#[derive(Debug)]
pub struct ExportHandle {
    /// The name.
    pub name: String,
    /// The description.
    pub description: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// The device's block size: the minimum block size advertised.
    pub block_size_bytes: u32,
    /// The device's preferred request size (its page, for flash merging sectors into
    /// pages): the preferred block size advertised, at least 4 KiB.
    pub preferred_block_size_bytes: u32,
    /// Read-only.
    pub read_only: bool,
    /// Trimmed blocks read as zeroes.
    pub trim_reads_zeroes: bool,
    /// The allocation map (updated by the worker, read by block status).
    pub extents: Arc<Mutex<ExtentMap>>,
    /// The worker's job queue; `None` once the server is shutting down.
    pub jobs: Mutex<Option<Sender<Job>>>,
}

impl ExportHandle {
    /// The allocation map an export starts with.
    pub fn initial_extents(export: &Export) -> ExtentMap {
        let block_count = export.device.info().block_count;
        match export.initial_allocation {
            InitialAllocation::AllHoles => {
                ExtentMap::all_holes(block_count, DEFAULT_EXTENT_RANGE_LIMIT)
            }
            InitialAllocation::AllData => {
                ExtentMap::all_data(block_count, DEFAULT_EXTENT_RANGE_LIMIT)
            }
        }
    }

    /// A sender to the worker, if the server still takes requests.
    pub fn job_sender(&self) -> Option<Sender<Job>> {
        self.jobs
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        assert_eq!(
            parse_export_spec("disk=ram:1MiB").unwrap(),
            (
                "disk".to_string(),
                ExportDeviceSpec::Ram {
                    size_bytes: 1 << 20
                }
            )
        );
        assert!(matches!(
            parse_export_spec("d=/tmp/x.img").unwrap().1,
            ExportDeviceSpec::File { .. }
        ));
        assert!(matches!(
            parse_export_spec("d=flash:minflash").unwrap().1,
            ExportDeviceSpec::Other { .. }
        ));
        assert!(parse_export_spec("ram:1MiB").is_err());
        assert!(parse_export_spec("a\nnbd: ready=ram:1MiB").is_err());
        assert!(parse_export_spec("a\tb=ram:1MiB").is_err());
        assert!(parse_export_spec("a\u{7f}=ram:1MiB").is_err());
        assert!(parse_export_spec("d=ram:1000").is_err());
        assert!(parse_export_spec("d=ram:lots").is_err());
    }
}
