//! Making the benchmark's stores: device files or RAM disks opened exactly as a store
//! file would describe them (through `flashpipe_store::store`), formatted fresh, and
//! the byte pattern every part writes and checks.

use std::path::{Path, PathBuf};

use flashpipe_device::{run_batch, BlockDevice, IoBuf, Operation};
use flashpipe_engine::{Engine, EngineConfig};
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
                DeviceSpec::Ram { .. } | DeviceSpec::Flash(_) => None,
            })
            .collect();
        let config = StoreConfig {
            store_file_version: STORE_FILE_VERSION,
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
/// flight (the engine's defaults).
pub fn engine_config() -> EngineConfig {
    EngineConfig {
        max_read_bytes: MIB as usize,
        ..EngineConfig::default()
    }
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

/// The data every part writes: a fixed pseudo-random block of 1 MiB whose first eight
/// bytes in each MiB of a file are replaced by a stamp of that MiB's offset, so reads
/// anywhere can be checked cheaply.
pub struct Pattern {
    block: Vec<u8>,
}

impl Default for Pattern {
    fn default() -> Pattern {
        Pattern::new()
    }
}

impl Pattern {
    /// The pattern (the same bytes every run).
    pub fn new() -> Pattern {
        let mut generator = flashpipe_device::SplitMix64::new(0x00f1_a5b0_b1be_ef00);
        let block = (0..MIB / 8)
            .flat_map(|_| generator.next_u64().to_le_bytes())
            .collect();
        Pattern { block }
    }

    /// The stamp of the MiB at `offset_bytes` (a multiple of 1 MiB).
    pub fn stamp(offset_bytes: u64) -> [u8; 8] {
        (offset_bytes ^ 0x5a5a_0000_0000_0000).to_le_bytes()
    }

    /// Fills `buffer` with the file's bytes from `offset_bytes`.
    pub fn fill(&self, offset_bytes: u64, buffer: &mut [u8]) {
        let mut position = 0;
        while position < buffer.len() {
            let offset = offset_bytes + position as u64;
            let within = (offset % MIB) as usize;
            let length = (MIB as usize - within).min(buffer.len() - position);
            buffer[position..position + length]
                .copy_from_slice(&self.block[within..within + length]);
            let mib_start = offset - within as u64;
            for stamp_index in within..8.min(within + length) {
                buffer[position + stamp_index - within] = Self::stamp(mib_start)[stamp_index];
            }
            position += length;
        }
    }

    /// Checks `bytes` read at `offset_bytes` against the pattern (a sample of at most 64
    /// bytes at the start of the read and the stamp of each MiB it covers).
    pub fn check(&self, offset_bytes: u64, bytes: &[u8]) -> Result<(), BenchFsError> {
        let sample_length = bytes.len().min(64);
        let mut expected = vec![0u8; sample_length];
        self.fill(offset_bytes, &mut expected);
        let mut matches = bytes[..sample_length] == expected[..];
        let first_whole_mib = offset_bytes.div_ceil(MIB) * MIB;
        let end = offset_bytes + bytes.len() as u64;
        let mut mib_start = first_whole_mib;
        while matches && mib_start + 8 <= end {
            let at = (mib_start - offset_bytes) as usize;
            matches = bytes[at..at + 8] == Self::stamp(mib_start);
            mib_start += MIB;
        }
        match matches {
            true => Ok(()),
            false => Err(BenchFsError::DataMismatch(format!(
                "{} bytes read at offset {offset_bytes} differ from what was written",
                bytes.len()
            ))),
        }
    }
}

/// A `Read` over the first `size_bytes` bytes of the pattern.
pub struct PatternSource<'a> {
    pattern: &'a Pattern,
    position_bytes: u64,
    size_bytes: u64,
}

impl<'a> PatternSource<'a> {
    /// Yields `size_bytes` bytes of `pattern`.
    pub fn new(pattern: &'a Pattern, size_bytes: u64) -> PatternSource<'a> {
        PatternSource {
            pattern,
            position_bytes: 0,
            size_bytes,
        }
    }
}

impl std::io::Read for PatternSource<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let left = self.size_bytes - self.position_bytes;
        let length = (buffer.len() as u64).min(left) as usize;
        self.pattern
            .fill(self.position_bytes, &mut buffer[..length]);
        self.position_bytes += length as u64;
        Ok(length)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn pattern_reads_check_anywhere_and_corruption_is_caught() {
        let pattern = Pattern::new();
        let mut whole = vec![0u8; 3 * MIB as usize];
        PatternSource::new(&pattern, 3 * MIB)
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
