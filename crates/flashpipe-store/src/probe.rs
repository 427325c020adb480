//! A store's creation looks before it formats: does a device already hold a flashpipe
//! store?
//!
//! A device holds one when a super block's `FLASHPFS` magic starts either slot (slot 0 at
//! byte 0, slot 1 one FS block in: every block size from 4 KiB to 1 MiB is tried), when a
//! flash image's `.meta` lies beside it, or (a regular file only) when any 4 KiB-aligned
//! block of its data starts with a metadata block's kind (`CMAP`, `NTBL`, `INOD`, `FREE`,
//! `INDR`): the devices after the first of a striped store carry no super block but do
//! carry checkpoint blocks. Only the file's data regions are read (`SEEK_DATA`), so a sparse
//! device costs what it holds; a block device is checked for the magic only (reading a
//! whole disk is not a probe). A remote NBD export is read over its first MiB and 4 KiB
//! only: both super block slots at every block size, and the metadata kinds of the
//! blocks there.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::io::AsRawFd;
use std::path::Path;

use flashpipe_fs::layout::{MetadataKind, MAGIC, MAX_FS_BLOCK_SIZE_BYTES, MIN_FS_BLOCK_SIZE_BYTES};
use std::path::PathBuf;

use flashpipe_device::{run_one, BlockDevice, IoBuf, Operation};
use flashpipe_nbd_client::{NbdDevice, NbdDeviceConfig, NbdUri};

use crate::store::flash_metadata_path;
use crate::store_config::{DeviceSpec, StoreConfig};

/// A device of a store to create holds flashpipe content: formatting it would destroy it.
#[derive(Debug, thiserror::Error)]
#[error("device {} holds {found}: mkfs would destroy it; give --force to format it anyway", device.display())]
pub struct DeviceHoldsStoreError {
    /// The device (its path as the store file resolves it).
    pub device: PathBuf,
    /// What it holds, for a person ([`flashpipe_content`]'s description).
    pub found: String,
}

/// Bytes read at a time while scanning a file's data.
const SCAN_CHUNK_BYTES: usize = 1 << 20;
/// Alignment of the blocks whose first bytes are checked (every FS block size is a
/// multiple of it).
const SCAN_BLOCK_BYTES: usize = MIN_FS_BLOCK_SIZE_BYTES as usize;

/// Refuses the first device of `config` that holds flashpipe content, naming it.
pub fn refuse_devices_holding_stores(
    config: &StoreConfig,
    store: &Path,
) -> Result<(), DeviceHoldsStoreError> {
    for device in &config.devices {
        let path = match device {
            DeviceSpec::File { path, .. } => path,
            DeviceSpec::Flash(flash) => match &flash.path {
                Some(path) => path,
                None => continue,
            },
            DeviceSpec::Nbd { uri, .. } => {
                if let Some(found) = nbd_content(uri) {
                    return Err(DeviceHoldsStoreError {
                        device: PathBuf::from(uri),
                        found,
                    });
                }
                continue;
            }
            // A cluster host's share is formatted by its FTL, which reads every block.
            DeviceSpec::Ram { .. } | DeviceSpec::Cluster(_) => continue,
        };
        let path = StoreConfig::resolve_device_path(store, path);
        if let Some(found) = flashpipe_content(&path) {
            return Err(DeviceHoldsStoreError {
                device: path,
                found,
            });
        }
    }
    Ok(())
}

/// What flashpipe content `path` holds, if any (see the module's documentation).
pub fn flashpipe_content(path: &Path) -> Option<String> {
    let metadata_path = flash_metadata_path(path);
    if metadata_path.exists() {
        return Some(format!(
            "an emulated flash image ({} is beside it)",
            metadata_path.display()
        ));
    }
    let mut file = File::open(path).ok()?;
    if let Some(offset) = super_block_offset(&mut file) {
        return Some(format!(
            "a flashpipe store (its super block at byte {offset})"
        ));
    }
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let (offset, kind) = metadata_block_in_data(&mut file)?;
    Some(format!(
        "a flashpipe store (its {} block at byte {offset}: a device of a striped store)",
        kind.name()
    ))
}

/// Bytes of an NBD export the probe reads: the super block's second slot lies at most
/// one largest FS block in, and holds one smallest block.
const NBD_PROBE_BYTES: u64 = MAX_FS_BLOCK_SIZE_BYTES as u64 + MIN_FS_BLOCK_SIZE_BYTES as u64;

/// A remote export opened read-only, one request at a time and without reconnecting, for
/// a probe to read; `None` when it cannot be opened (opening the store reports that).
pub(crate) fn open_nbd_for_probe(uri: &str) -> Option<NbdDevice> {
    let mut config = NbdDeviceConfig::new(NbdUri::parse(uri).ok()?);
    config.read_only = true;
    config.queue_depth = 1;
    config.reconnect_attempts = 0;
    NbdDevice::open(config).ok()
}

/// What flashpipe content the start of a remote export holds, if any; `None` also when
/// it cannot be read (opening the store reports that).
pub fn nbd_content(uri: &str) -> Option<String> {
    let mut device = open_nbd_for_probe(uri)?;
    let block_bytes = u64::from(device.info().block_size_bytes);
    let length_bytes = NBD_PROBE_BYTES.min(device.info().size_bytes()) / block_bytes * block_bytes;
    let completion = run_one(
        &mut device,
        Operation::Read {
            first_block: 0,
            buffer: IoBuf::zeroed(length_bytes as usize),
        },
    )
    .ok()?;
    completion.status.ok()?;
    let bytes = completion.buffer?;
    let slot_offsets = std::iter::once(0).chain(
        (MIN_FS_BLOCK_SIZE_BYTES.trailing_zeros()..=MAX_FS_BLOCK_SIZE_BYTES.trailing_zeros())
            .map(|shift| 1usize << shift),
    );
    for offset in slot_offsets {
        if bytes.get(offset..offset + MAGIC.len()) == Some(&MAGIC[..]) {
            return Some(format!(
                "a flashpipe store (its super block at byte {offset})"
            ));
        }
    }
    let (offset, kind) = metadata_kind_in(&bytes)?;
    Some(format!(
        "a flashpipe store (its {} block at byte {offset}: a device of a striped store)",
        kind.name()
    ))
}

/// The first 4 KiB-aligned block of `bytes` that starts with a metadata block's kind.
fn metadata_kind_in(bytes: &[u8]) -> Option<(usize, MetadataKind)> {
    let kinds = [
        MetadataKind::Map,
        MetadataKind::NameTable,
        MetadataKind::InodeTable,
        MetadataKind::FreeList,
        MetadataKind::Indirect,
    ];
    bytes
        .chunks(SCAN_BLOCK_BYTES)
        .enumerate()
        .find_map(|(index, block)| {
            let code = u32::from_le_bytes(block.get(..4)?.try_into().ok()?);
            let kind = kinds.iter().find(|kind| kind.code() == code)?;
            Some((index * SCAN_BLOCK_BYTES, *kind))
        })
}

fn super_block_offset(file: &mut File) -> Option<u64> {
    let slot_offsets = std::iter::once(0).chain(
        (MIN_FS_BLOCK_SIZE_BYTES.trailing_zeros()..=MAX_FS_BLOCK_SIZE_BYTES.trailing_zeros())
            .map(|shift| 1u64 << shift),
    );
    for offset in slot_offsets {
        let mut magic = [0u8; 8];
        let read = file
            .seek(SeekFrom::Start(offset))
            .and_then(|_| file.read_exact(&mut magic));
        if read.is_ok() && magic == MAGIC {
            return Some(offset);
        }
    }
    None
}

/// The first 4 KiB-aligned block of the file's data regions that starts with a metadata
/// block's kind.
fn metadata_block_in_data(file: &mut File) -> Option<(u64, MetadataKind)> {
    let length_bytes = file.metadata().ok()?.len();
    let mut buffer = vec![0u8; SCAN_CHUNK_BYTES];
    let mut offset = 0u64;
    while offset < length_bytes {
        offset = next_data_offset(file, offset)?;
        offset -= offset % SCAN_BLOCK_BYTES as u64;
        file.seek(SeekFrom::Start(offset)).ok()?;
        let filled = read_up_to(file, &mut buffer)?;
        if filled == 0 {
            return None;
        }
        if let Some((within_bytes, kind)) = metadata_kind_in(&buffer[..filled]) {
            return Some((offset + within_bytes as u64, kind));
        }
        offset += filled as u64;
    }
    None
}

/// The first offset at or after `offset` holding data (`None`: no more data).
fn next_data_offset(file: &File, offset: u64) -> Option<u64> {
    let start = libc::off_t::try_from(offset).ok()?;
    // SAFETY: lseek on a descriptor `file` owns; no memory is shared.
    let found = unsafe { libc::lseek(file.as_raw_fd(), start, libc::SEEK_DATA) };
    if found < 0 {
        let error = std::io::Error::last_os_error();
        // ENXIO: no data at or after `offset`; other errors: SEEK_DATA unsupported, so
        // every byte counts as data.
        return (error.raw_os_error() != Some(libc::ENXIO)).then_some(offset);
    }
    u64::try_from(found).ok()
}

fn read_up_to(file: &mut File, buffer: &mut [u8]) -> Option<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match file.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metadata_block_in_a_data_region_is_named_with_its_offset() {
        let folder = flashpipe_testkit::scratch::ScratchFolder::new("probe-metadata-block");
        let path = folder.path().join("member.img");
        let mut bytes = vec![0u8; 8 * SCAN_BLOCK_BYTES];
        let offset = 3 * SCAN_BLOCK_BYTES;
        bytes[offset..offset + 4].copy_from_slice(&MetadataKind::NameTable.code().to_le_bytes());
        std::fs::write(&path, &bytes).expect("writes the image");
        let found = flashpipe_content(&path).expect("the metadata block is found");
        assert!(found.contains(&format!("at byte {offset}")), "{found}");
        std::fs::write(&path, vec![0u8; 8 * SCAN_BLOCK_BYTES]).expect("rewrites the image");
        assert_eq!(flashpipe_content(&path), None, "zeroes hold no store");
    }
}
