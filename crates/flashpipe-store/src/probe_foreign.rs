//! mkfs looks before it formats: does a device hold anything at all that formatting would
//! destroy?
//!
//! One refusal for everything found ([`refuse_devices_holding_data`] ->
//! [`DeviceHoldsStoreError`], overridden by `mkfs --force` alone): first flashpipe's own
//! content ([`crate::probe`]: a store, a member of a striped store, a flash image's
//! `.meta`), then the signatures of other data in a small table, then any non-zero byte in
//! the device's first MiB ("unrecognised data"). A new sparse file or a zero-filled image
//! passes; a device that does not exist yet (mkfs creates it) is not probed.
//!
//! What is read, per device kind:
//! - a file, a block device or a flash image (`flash:PRESET:IMAGE`: its image file, with
//!   the `.meta` beside it looked for by [`crate::probe`]): the first MiB, and the last
//!   4 KiB (where a GPT keeps its backup header);
//! - an `nbd://` member: the same two ranges read over NBD, read-only; an export that
//!   cannot be reached is not probed here (opening it reports why);
//! - RAM devices and page-less flash (`flash:PRESET`) hold nothing before mkfs.
//!
//! Signatures recognised (offsets in bytes): ext2/3/4 (`0xEF53` at 1024 + 56, the journal
//! and extent feature bits telling ext2, ext3 and ext4 apart), XFS (`XFSB` at 0), btrfs
//! (`_BHRfS_M` at 64 KiB + 64), Linux swap (`SWAPSPACE2` or `SWAP-SPACE` ending each
//! supported page size), LUKS (`LUKS\xBA\xBE` at 0), LVM2 (`LABELONE` at 512), a GPT
//! (`EFI PART` at 512 or 4096, or a backup header in the last 512 or 4096 bytes), an MBR
//! partition table or boot sector (`0x55AA` at 510; type `0xEE` marks a GPT's protective
//! MBR) and NTFS (`NTFS    ` at 3).
//!
//! Why a table and not libblkid: the probe needs a handful of fixed-offset signatures and
//! a check no probing library makes (any non-zero byte), and it must run wherever the
//! binary runs. libblkid would add a C library and its headers (Debian's libblkid-dev,
//! absent from this project's build machines) and a binding crate generated with bindgen
//! at build time, for a list of names we print once. The `blkid` command is not used at
//! run time. What the table does not know still stops mkfs as unrecognised data, so a
//! missing signature costs a less precise message, never a wiped device.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use flashpipe_device::{run_one, BlockDevice, IoBuf, Operation};
use flashpipe_nbd_client::NbdDevice;

use crate::probe::{flashpipe_content, nbd_content, DeviceHoldsStoreError};
use crate::store_config::{DeviceSpec, StoreConfig};

/// Bytes at the start of a device read by the probe: any non-zero byte there stops mkfs.
pub const PROBE_HEAD_BYTES: u64 = 1 << 20;
/// Bytes at the end of a device read by the probe (a GPT backup header lives there).
pub const PROBE_TAIL_BYTES: u64 = 4096;

/// Refuses the first device of `config` holding anything mkfs would destroy, naming it
/// and what it holds (see the module's documentation).
pub fn refuse_devices_holding_data(
    config: &StoreConfig,
    store: &Path,
) -> Result<(), DeviceHoldsStoreError> {
    for device in &config.devices {
        let (name, found) = match device {
            DeviceSpec::File { path, .. } => {
                let path = StoreConfig::resolve_device_path(store, path);
                let found = flashpipe_content(&path).or_else(|| file_content(&path));
                (path, found)
            }
            DeviceSpec::Flash(flash) => match &flash.path {
                Some(path) => {
                    let path = StoreConfig::resolve_device_path(store, path);
                    let found = flashpipe_content(&path).or_else(|| file_content(&path));
                    (path, found)
                }
                None => continue,
            },
            DeviceSpec::Nbd { uri, .. } => {
                let found = nbd_content(uri).or_else(|| nbd_foreign_content(uri));
                (PathBuf::from(uri), found)
            }
            DeviceSpec::Cluster(cluster) => (
                PathBuf::from(cluster.describe()),
                crate::cluster_store::cluster_content(cluster, store),
            ),
            DeviceSpec::Ram { .. } => continue,
        };
        if let Some(found) = found {
            return Err(DeviceHoldsStoreError {
                device: name,
                found,
            });
        }
    }
    Ok(())
}

/// The head and tail of a device, as far as they could be read.
struct Sample {
    /// The first bytes (at most [`PROBE_HEAD_BYTES`]).
    head: Vec<u8>,
    /// The last bytes (at most [`PROBE_TAIL_BYTES`]), empty when the head covers them.
    tail: Vec<u8>,
}

/// What a file or block device at `path` holds beyond flashpipe content; `None` when it
/// does not exist, cannot be read or holds only zeroes where the probe looks.
pub fn file_content(path: &Path) -> Option<String> {
    let file = File::open(path).ok()?;
    let size_bytes = device_size_bytes(&file)?;
    let head_length = PROBE_HEAD_BYTES.min(size_bytes);
    let head = read_exactly_at(&file, 0, head_length)?;
    let tail = if size_bytes > head_length {
        let tail_length = PROBE_TAIL_BYTES.min(size_bytes - head_length);
        read_exactly_at(&file, size_bytes - tail_length, tail_length)?
    } else {
        Vec::new()
    };
    describe(&Sample { head, tail })
}

/// What a remote export holds beyond flashpipe content; `None` when it cannot be read.
pub fn nbd_foreign_content(uri: &str) -> Option<String> {
    let mut device = crate::probe::open_nbd_for_probe(uri)?;
    let block_bytes = u64::from(device.info().block_size_bytes);
    let size_bytes = device.info().size_bytes();
    let head_length = PROBE_HEAD_BYTES.min(size_bytes) / block_bytes * block_bytes;
    let head = read_blocks(&mut device, 0, head_length)?;
    let tail_start =
        size_bytes.saturating_sub(PROBE_TAIL_BYTES.max(block_bytes)) / block_bytes * block_bytes;
    let tail = if tail_start >= head_length {
        read_blocks(&mut device, tail_start, size_bytes - tail_start)?
    } else {
        Vec::new()
    };
    describe(&Sample { head, tail })
}

fn read_blocks(device: &mut NbdDevice, offset_bytes: u64, length_bytes: u64) -> Option<Vec<u8>> {
    if length_bytes == 0 {
        return Some(Vec::new());
    }
    let block_bytes = u64::from(device.info().block_size_bytes);
    let completion = run_one(
        device,
        Operation::Read {
            first_block: offset_bytes / block_bytes,
            buffer: IoBuf::zeroed(usize::try_from(length_bytes).ok()?),
        },
    )
    .ok()?;
    completion.status.ok()?;
    Some(completion.buffer?.to_vec())
}

/// The size of a regular file or block device (its length; a block device's from the end
/// it seeks to).
fn device_size_bytes(file: &File) -> Option<u64> {
    let metadata = file.metadata().ok()?;
    if metadata.is_file() {
        return Some(metadata.len());
    }
    let mut handle = file.try_clone().ok()?;
    handle.seek(SeekFrom::End(0)).ok()
}

fn read_exactly_at(file: &File, offset_bytes: u64, length_bytes: u64) -> Option<Vec<u8>> {
    let mut bytes = vec![0u8; usize::try_from(length_bytes).ok()?];
    file.read_exact_at(&mut bytes, offset_bytes).ok()?;
    Some(bytes)
}

/// What `sample` shows: the first signature of the table that matches, else the first
/// non-zero byte of the head as unrecognised data.
fn describe(sample: &Sample) -> Option<String> {
    if let Some(found) = signature(sample) {
        return Some(found);
    }
    let offset = sample.head.iter().position(|&byte| byte != 0)?;
    Some(format!(
        "unrecognised data (a non-zero byte at offset {offset}, in the first MiB)"
    ))
}

/// `bytes[offset..offset + expected.len()] == expected`.
fn has_at(bytes: &[u8], offset: usize, expected: &[u8]) -> bool {
    bytes.get(offset..offset + expected.len()) == Some(expected)
}

fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    bytes
        .get(offset..offset + 4)
        .map(|field| u32::from_le_bytes(field.try_into().expect("4 bytes")))
        .unwrap_or(0)
}

/// Offset of the ext super block, and of its magic within the device.
const EXT_SUPER_BLOCK_OFFSET: usize = 1024;
const EXT_MAGIC_OFFSET: usize = EXT_SUPER_BLOCK_OFFSET + 56;
const EXT_COMPAT_HAS_JOURNAL: u32 = 0x4;
/// ext4's incompatible features: extents, 64-bit, flex_bg.
const EXT4_INCOMPAT_FEATURES: u32 = 0x40 | 0x80 | 0x200;
const BTRFS_MAGIC_OFFSET: usize = (64 << 10) + 64;
/// Page sizes whose last ten bytes hold a swap signature.
const SWAP_PAGE_SIZES_BYTES: [usize; 4] = [4096, 8192, 16384, 65536];
/// Sector sizes at which a GPT header may lie (LBA 1).
const GPT_SECTOR_SIZES_BYTES: [usize; 2] = [512, 4096];

/// The first known signature in `sample`, described.
fn signature(sample: &Sample) -> Option<String> {
    let head = &sample.head;
    if has_at(head, EXT_MAGIC_OFFSET, &[0x53, 0xEF]) {
        let compat = u32_at(head, EXT_SUPER_BLOCK_OFFSET + 0x5C);
        let incompat = u32_at(head, EXT_SUPER_BLOCK_OFFSET + 0x60);
        let kind = if incompat & EXT4_INCOMPAT_FEATURES != 0 {
            "ext4"
        } else if compat & EXT_COMPAT_HAS_JOURNAL != 0 {
            "ext3"
        } else {
            "ext2"
        };
        return Some(format!(
            "an {kind} file system (its super block magic at byte {EXT_MAGIC_OFFSET})"
        ));
    }
    if has_at(head, 0, b"XFSB") {
        return Some("an XFS file system (its super block magic at byte 0)".to_string());
    }
    if has_at(head, BTRFS_MAGIC_OFFSET, b"_BHRfS_M") {
        return Some(format!(
            "a btrfs file system (its super block magic at byte {BTRFS_MAGIC_OFFSET})"
        ));
    }
    if has_at(head, 0, b"LUKS\xBA\xBE") {
        return Some("a LUKS encrypted volume (its header at byte 0)".to_string());
    }
    for page_bytes in SWAP_PAGE_SIZES_BYTES {
        let offset = page_bytes - 10;
        if has_at(head, offset, b"SWAPSPACE2") || has_at(head, offset, b"SWAP-SPACE") {
            return Some(format!(
                "a Linux swap area (its signature at byte {offset})"
            ));
        }
    }
    if has_at(head, 512, b"LABELONE") {
        return Some("an LVM2 physical volume (its label at byte 512)".to_string());
    }
    for sector_bytes in GPT_SECTOR_SIZES_BYTES {
        if has_at(head, sector_bytes, b"EFI PART") {
            return Some(format!(
                "a GPT partition table (its header at byte {sector_bytes})"
            ));
        }
    }
    if has_at(head, 3, b"NTFS    ") {
        return Some("an NTFS file system (its boot sector at byte 0)".to_string());
    }
    if has_at(head, 510, &[0x55, 0xAA]) {
        let protective = (0..4).any(|entry| head.get(446 + entry * 16 + 4) == Some(&0xEE));
        return Some(if protective {
            "a GPT partition table (its protective MBR at byte 0)".to_string()
        } else {
            "an MBR partition table or boot sector (its signature at byte 510)".to_string()
        });
    }
    gpt_backup(&sample.tail)
}

/// A GPT backup header in the last sector of the device (`tail` ends where it does).
fn gpt_backup(tail: &[u8]) -> Option<String> {
    GPT_SECTOR_SIZES_BYTES.iter().find_map(|&sector_bytes| {
        let offset = tail.len().checked_sub(sector_bytes)?;
        has_at(tail, offset, b"EFI PART").then(|| {
            format!("a GPT partition table (its backup header in the last {sector_bytes} bytes)")
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_with(offset: usize, bytes: &[u8]) -> Sample {
        let mut head = vec![0u8; PROBE_HEAD_BYTES as usize];
        head[offset..offset + bytes.len()].copy_from_slice(bytes);
        Sample {
            head,
            tail: Vec::new(),
        }
    }

    #[test]
    fn zeroes_pass_and_every_signature_is_named() {
        let zeroes = Sample {
            head: vec![0; 4096],
            tail: vec![0; 4096],
        };
        assert_eq!(describe(&zeroes), None);
        let cases: [(usize, &[u8], &str); 9] = [
            (EXT_MAGIC_OFFSET, &[0x53, 0xEF], "ext2"),
            (0, b"XFSB", "XFS"),
            (BTRFS_MAGIC_OFFSET, b"_BHRfS_M", "btrfs"),
            (0, b"LUKS\xBA\xBE", "LUKS"),
            (4086, b"SWAPSPACE2", "swap"),
            (512, b"LABELONE", "LVM2"),
            (512, b"EFI PART", "GPT"),
            (3, b"NTFS    ", "NTFS"),
            (510, &[0x55, 0xAA], "MBR"),
        ];
        for (offset, bytes, name) in cases {
            let found = describe(&sample_with(offset, bytes)).unwrap();
            assert!(found.contains(name), "{name}: {found}");
        }
        let found = describe(&sample_with(4000, &[7])).unwrap();
        assert!(found.contains("unrecognised data"), "{found}");
        assert!(found.contains("4000"), "{found}");
    }

    #[test]
    fn a_gpt_backup_header_at_the_end_is_found() {
        let mut tail = vec![0u8; 4096];
        tail[4096 - 512..4096 - 504].copy_from_slice(b"EFI PART");
        let found = describe(&Sample {
            head: vec![0; 4096],
            tail,
        })
        .unwrap();
        assert!(found.contains("backup header"), "{found}");
    }

    #[test]
    fn ext_versions_are_told_apart() {
        let mut sample = sample_with(EXT_MAGIC_OFFSET, &[0x53, 0xEF]);
        sample.head[EXT_SUPER_BLOCK_OFFSET + 0x5C] = EXT_COMPAT_HAS_JOURNAL as u8;
        assert!(describe(&sample).unwrap().contains("ext3"));
        sample.head[EXT_SUPER_BLOCK_OFFSET + 0x60] = 0x40;
        assert!(describe(&sample).unwrap().contains("ext4"));
    }
}
