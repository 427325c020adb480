//! Making the benchmark's stores: device files or RAM disks opened exactly as a store
//! file would describe them (through `flashpipe_store::store`), formatted fresh, and
//! the byte pattern every part writes and checks.

use std::path::{Path, PathBuf};

use flashpipe_device::{run_batch, BlockDevice, IoBuf, Operation};
use flashpipe_engine::{Engine, EngineConfig, Handoff, WritePath};
use flashpipe_fs::{Filesystem, FormatOptions};
use flashpipe_store::store::{open_store_device, DeviceCreation};
use flashpipe_store::store_config::{DeviceSpec, StoreConfig, STORE_FILE_VERSION};

use super::{BenchFsError, MIB};

/// Requests in flight per device (the store default).
pub const QUEUE_DEPTH_PER_DEVICE: u32 = 32;

/// A freshly formatted store and what opening it noted.
pub struct FreshStore {
    /// The mounted file system.
    pub filesystem: Filesystem,
    /// Remarks from opening the devices (engine fallbacks).
    pub notes: Vec<String>,
    /// The device files (empty for RAM disks).
    pub device_files: Vec<PathBuf>,
}

/// What to build.
pub struct StoreShape {
    /// One spec per device.
    pub devices: Vec<DeviceSpec>,
    /// Bytes per stripe unit.
    pub stripe_unit_bytes: u64,
    /// FS block size.
    pub fs_block_size_bytes: u32,
    /// Write zeros over the whole device before mkfs, so that no later measurement
    /// pays for the first touch of memory (RAM disks) or of file extents.
    pub pre_touch: bool,
}

impl StoreShape {
    /// `count` device files named `PREFIX-N.img` in `folder` of `size_bytes_each`.
    pub fn files(
        folder: &Path,
        prefix: &str,
        count: u32,
        size_bytes_each: u64,
        stripe_unit_bytes: u64,
        fs_block_size_bytes: u32,
    ) -> StoreShape {
        let devices = (0..count)
            .map(|index| DeviceSpec::File {
                path: folder.join(format!("{prefix}-{index}.img")),
                size_bytes: size_bytes_each,
            })
            .collect();
        StoreShape {
            devices,
            stripe_unit_bytes,
            fs_block_size_bytes,
            pre_touch: false,
        }
    }

    /// `count` RAM disks of `size_bytes_each`.
    pub fn ram(
        count: u32,
        size_bytes_each: u64,
        stripe_unit_bytes: u64,
        fs_block_size_bytes: u32,
    ) -> StoreShape {
        StoreShape {
            devices: vec![
                DeviceSpec::Ram {
                    size_bytes: size_bytes_each
                };
                count as usize
            ],
            stripe_unit_bytes,
            fs_block_size_bytes,
            pre_touch: true,
        }
    }

    /// Opens (creating device files) and formats the store.
    pub fn format(self, folder: &Path) -> Result<FreshStore, BenchFsError> {
        let device_files = self
            .devices
            .iter()
            .filter_map(|device| match device {
                DeviceSpec::File { path, .. } => Some(path.clone()),
                DeviceSpec::Ram { .. }
                | DeviceSpec::Flash(_)
                | DeviceSpec::Nbd { .. }
                | DeviceSpec::Cluster(_) => None,
            })
            .collect();
        let config = StoreConfig {
            store_file_version: STORE_FILE_VERSION,
            identity: None,
            block_size_bytes: self.fs_block_size_bytes,
            stripe_unit_bytes: self.stripe_unit_bytes,
            queue_depth: QUEUE_DEPTH_PER_DEVICE,
            devices: self.devices,
        };
        let store_file = folder.join("bench-store.toml");
        let mut opened = open_store_device(&config, &store_file, DeviceCreation::CreateMissing)?;
        if self.pre_touch {
            write_zeros_everywhere(&mut *opened.device)?;
        }
        let options = FormatOptions {
            fs_block_size_bytes: self.fs_block_size_bytes,
            store_identity: None,
        };
        let filesystem = Filesystem::format(opened.device, &options)?;
        Ok(FreshStore {
            filesystem,
            notes: opened.notes,
            device_files,
        })
    }
}

/// Writes zeros over every block of `device`, 1 MiB per request, queue kept full.
fn write_zeros_everywhere(device: &mut dyn BlockDevice) -> Result<(), BenchFsError> {
    let block_bytes = u64::from(device.info().block_size_bytes);
    let block_count = device.info().block_count;
    let blocks_per_request = (MIB / block_bytes).max(1);
    let mut first_block = 0;
    while first_block < block_count {
        let operations = (0..64)
            .map_while(|_| {
                let count = blocks_per_request.min(block_count - first_block);
                let operation = (count > 0).then(|| Operation::Write {
                    first_block,
                    buffer: IoBuf::zeroed((count * block_bytes) as usize),
                });
                first_block += count;
                operation
            })
            .collect();
        run_batch(device, operations)?;
    }
    Ok(())
}

/// The engine configuration every part uses: 1 MiB reads, 64 read buffers, 32 reads in
/// flight (the engine's defaults), and the write path named by the environment variable
/// [`WRITE_PATH_VARIABLE`] (the engine's default when it is not set), and the hand-off
/// named by [`SPIN_US_VARIABLE`].
pub fn engine_config() -> EngineConfig {
    EngineConfig {
        max_read_bytes: MIB as usize,
        write_path: write_path_from_environment(),
        handoff: handoff_from_environment(),
        ..EngineConfig::default()
    }
}

/// The environment variable that picks the engine's hand-off for a side-by-side run: `0`
/// parks at once ([`Handoff::Park`]), `N` spins N microseconds before parking (at most
/// [`flashpipe_engine::handoff::MAX_SPIN_US`]); the engine's default when it is not set.
/// The one name of the spin knob (`flashpipe_base::wait`), as every `--spin-us`.
pub const SPIN_US_VARIABLE: &str = flashpipe_base::wait::SPIN_US_VARIABLE;

/// The hand-off [`SPIN_US_VARIABLE`] names; a value that is not a number of microseconds
/// within the engine's bound is a usage error that ends the process with status 2.
pub(crate) fn handoff_from_environment() -> Handoff {
    let Ok(text) = std::env::var(SPIN_US_VARIABLE) else {
        return Handoff::DEFAULT;
    };
    let max_spin_us = flashpipe_engine::handoff::MAX_SPIN_US;
    match flashpipe_base::WaitPolicy::parse(&text) {
        Ok(spin) => Handoff::from_policy(spin),
        Err(_) => {
            eprintln!(
                "error: {SPIN_US_VARIABLE}=\"{text}\" is not a spin window in microseconds \
                 (0 to park at once, at most {max_spin_us})"
            );
            std::process::exit(2)
        }
    }
}

/// The environment variable that picks the engine's write path for a side-by-side run:
/// `overlapped` (the default), `overlapped-after-reads`, `overlapped-copying` or `batched`.
pub const WRITE_PATH_VARIABLE: &str = "FLASHPIPE_WRITE_PATH";

/// The write path [`WRITE_PATH_VARIABLE`] names; an unknown name is a usage error that
/// ends the process with a message and status 2 before anything is measured.
pub(crate) fn write_path_from_environment() -> WritePath {
    let Ok(name) = std::env::var(WRITE_PATH_VARIABLE) else {
        return WritePath::default();
    };
    WritePath::from_name(&name).unwrap_or_else(|| {
        eprintln!(
            "error: {WRITE_PATH_VARIABLE}=\"{name}\" names no write path \
             (overlapped, overlapped-after-reads, overlapped-copying or batched)"
        );
        std::process::exit(2)
    })
}

/// Starts the engine on `filesystem`.
pub fn start_engine(filesystem: Filesystem) -> Engine {
    Engine::start(filesystem, engine_config())
}

/// Device bytes each of `count` devices needs to hold `payload_bytes` of file data in
/// `fs_block_size_bytes` blocks with room for metadata and checkpoints, whole MiB.
pub fn device_bytes_each(payload_bytes: u64, count: u32, minimum_bytes_each: u64) -> u64 {
    let with_room = payload_bytes + (payload_bytes / 8).max(64 * MIB);
    let each = with_room.div_ceil(u64::from(count));
    each.div_ceil(MIB).max(minimum_bytes_each.div_ceil(MIB)) * MIB
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;
    use crate::pattern::{DataPattern, DataPatternReader};

    #[test]
    fn pattern_reads_check_anywhere_and_corruption_is_caught() {
        let pattern = DataPattern::new();
        let mut whole = vec![0u8; 3 * MIB as usize];
        DataPatternReader::new(&pattern, 3 * MIB)
            .read_exact(&mut whole)
            .unwrap();
        for (offset, length) in [
            (0usize, 4096usize),
            (MIB as usize - 4, 16),
            (4096, 2 * MIB as usize),
        ] {
            pattern
                .check(offset as u64, &whole[offset..offset + length])
                .unwrap();
        }
        whole[MIB as usize + 3] ^= 1;
        assert!(pattern.check(4096, &whole[4096..2 * MIB as usize]).is_err());
    }

    #[test]
    fn device_sizes_leave_room() {
        assert_eq!(device_bytes_each(16 * MIB, 2, 0), 40 * MIB);
        assert_eq!(device_bytes_each(0, 1, 100 * MIB), 100 * MIB);
        assert!(device_bytes_each(4 << 30, 2, 0) * 2 >= (4 << 30) + (4 << 30) / 8);
    }
}
