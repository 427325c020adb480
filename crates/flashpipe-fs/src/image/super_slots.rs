//! The loader's super block slots: both read, the newer valid one chosen, a damaged slot
//! beside a valid one described ([`DamagedSlot`], salvaged when its fields are sane), and
//! the device checked against the geometry the chosen slot names.

use flashpipe_device::{run_one, BlockDevice, DeviceError, IoBuf, Operation};

use super::{LoadFailure, SUPER_BLOCK_CHECKSUM_OFFSET};
use crate::findings::{DamagedSlot, Finding, Structure};
use crate::flash_layout::choose_flash_super_block;
use crate::io::Geometry;
use crate::layout::{
    read_u32, read_u64, reserved_offset_of_version, SuperBlock, SuperBlockProblem,
    FLASH_AWARE_FORMAT_VERSION, MAX_FS_BLOCK_SIZE_BYTES, MIN_FS_BLOCK_SIZE_BYTES,
    SUPER_BLOCK_SIZE_BYTES,
};

/// The finding that reports a damaged slot (repairable: `fsck --repair` falls back).
pub(super) fn damaged_slot_finding(damage: &DamagedSlot) -> Finding {
    let remedy = if damage.may_hold_newer_commit() {
        format!(
            "`flashpipe fsck --repair` falls back to commit {} and rewrites the slot",
            damage.fallback_sequence
        )
    } else {
        "`flashpipe fsck --repair` rewrites the slot".to_string()
    };
    Finding::new(
        Structure::SuperBlock,
        Some(damage.slot),
        format!("{}: {remedy}", damage.describe()),
        true,
    )
}

/// Reads the first 512 bytes at `byte_offset` (whole device blocks).
fn read_super_bytes(device: &mut dyn BlockDevice, byte_offset: u64) -> Result<IoBuf, DeviceError> {
    let device_block_size = u64::from(device.info().block_size_bytes);
    let length = (SUPER_BLOCK_SIZE_BYTES as u64).div_ceil(device_block_size) * device_block_size;
    let completion = run_one(
        device,
        Operation::Read {
            first_block: byte_offset / device_block_size,
            buffer: IoBuf::zeroed(length as usize),
        },
    )?;
    Ok(completion.buffer.expect("a read hands its buffer back"))
}

type SlotResult = Result<SuperBlock, SuperBlockProblem>;

/// One slot as read: its decoding and its first 512 bytes (for a damaged slot's report).
struct SlotRead {
    decoded: SlotResult,
    bytes: Vec<u8>,
    byte_offset: u64,
}

impl SlotRead {
    fn absent() -> SlotRead {
        SlotRead {
            decoded: Err(SuperBlockProblem::NoMagic),
            bytes: Vec::new(),
            byte_offset: 0,
        }
    }

    /// The salvaged super block of a damaged slot, when it is sane and its block size
    /// puts slot 1 where it was read.
    fn salvaged(&self, slot: u64) -> Option<(u64, SuperBlock)> {
        if matches!(self.decoded, Err(SuperBlockProblem::NoMagic)) {
            return None;
        }
        let super_block = salvage_super_block(&self.bytes)?;
        let where_expected = slot * u64::from(super_block.fs_block_size_bytes);
        (where_expected == self.byte_offset).then_some((slot, super_block))
    }
}

/// Slot 0, and slot 1 at the block size slot 0 names or, when slot 0 is unusable, at each
/// possible block size.
fn read_slots(device: &mut dyn BlockDevice) -> Result<(SlotRead, Option<SlotRead>), LoadFailure> {
    let device_size = device.info().size_bytes();
    let device_block_size = device.info().block_size_bytes;
    if device_size < 2 * u64::from(MIN_FS_BLOCK_SIZE_BYTES.max(device_block_size)) {
        return Err(LoadFailure::NotFormatted);
    }
    let slot_zero = read_slot(device, 0)?;
    let candidate_sizes: Vec<u32> = match &slot_zero.decoded {
        Ok(super_block) => vec![super_block.fs_block_size_bytes],
        Err(_) => (MIN_FS_BLOCK_SIZE_BYTES.trailing_zeros()
            ..=MAX_FS_BLOCK_SIZE_BYTES.trailing_zeros())
            .map(|shift| 1u32 << shift)
            .collect(),
    };
    let mut slot_one: Option<SlotRead> = None;
    for block_size in candidate_sizes {
        let offset = u64::from(block_size);
        if block_size % device_block_size != 0 || 2 * offset > device_size {
            continue;
        }
        let read = read_slot(device, offset)?;
        let usable = matches!(&read.decoded, Ok(found) if found.fs_block_size_bytes == block_size);
        let has_magic = !matches!(read.decoded, Err(SuperBlockProblem::NoMagic));
        if usable || (slot_one.is_none() && has_magic) || slot_zero.decoded.is_ok() {
            slot_one = Some(read);
        }
        if usable {
            break;
        }
    }
    Ok((slot_zero, slot_one))
}

/// Reads and decodes the slot at `byte_offset`; a newer version stops everything.
fn read_slot(device: &mut dyn BlockDevice, byte_offset: u64) -> Result<SlotRead, LoadFailure> {
    let bytes = read_super_bytes(device, byte_offset)?[..SUPER_BLOCK_SIZE_BYTES].to_vec();
    let decoded = SuperBlock::decode(&bytes);
    if let Err(SuperBlockProblem::NewerVersion(found)) = decoded {
        return Err(LoadFailure::NewerVersion { found });
    }
    Ok(SlotRead {
        decoded,
        bytes,
        byte_offset,
    })
}

fn slot_finding(slot: u64, problem: String) -> Finding {
    Finding::new(
        Structure::SuperBlock,
        Some(slot),
        format!("slot {slot}: {problem}"),
        true,
    )
}

/// The damage of slot `slot`, read as `read`, beside the valid `fallback`.
fn damaged_slot(slot: u64, problem: String, read: &SlotRead, fallback: &SuperBlock) -> DamagedSlot {
    let has_magic = !matches!(read.decoded, Err(SuperBlockProblem::NoMagic));
    DamagedSlot {
        slot,
        problem,
        claimed_sequence: has_magic.then(|| read_u64(&read.bytes, 32)),
        fallback_slot: 1 - slot,
        fallback_sequence: fallback.commit_sequence,
        salvaged: has_magic
            .then(|| salvage_super_block(&read.bytes))
            .flatten(),
    }
}

/// Decodes damaged super block bytes after clearing the reserved bytes and recomputing
/// the checksum: the commit the slot probably held, when its fields are sane.
fn salvage_super_block(bytes: &[u8]) -> Option<SuperBlock> {
    let mut copy = bytes.get(..SUPER_BLOCK_SIZE_BYTES)?.to_vec();
    let version = read_u32(&copy, 8);
    copy[reserved_offset_of_version(version)..].fill(0);
    copy[SUPER_BLOCK_CHECKSUM_OFFSET..SUPER_BLOCK_CHECKSUM_OFFSET + 4].fill(0);
    let checksum = crc32c::crc32c(&copy);
    copy[SUPER_BLOCK_CHECKSUM_OFFSET..SUPER_BLOCK_CHECKSUM_OFFSET + 4]
        .copy_from_slice(&checksum.to_le_bytes());
    SuperBlock::decode(&copy).ok()
}

/// The chosen super block, and the other slot's damage when it is not a valid older
/// or equal twin.
type ChosenSuperBlock = (SuperBlock, Option<DamagedSlot>);

/// Picks the valid slot with the larger sequence; describes the other slot's damage.
pub(super) fn choose_super_block(
    device: &mut dyn BlockDevice,
) -> Result<ChosenSuperBlock, LoadFailure> {
    let (slot_zero, slot_one) = read_slots(device)?;
    if let Ok(anchor) = &slot_zero.decoded {
        if anchor.format_version >= FLASH_AWARE_FORMAT_VERSION {
            let chosen = choose_flash_super_block(device, anchor.clone())?;
            return Ok((chosen, None));
        }
    }
    let slot_one = slot_one.unwrap_or_else(SlotRead::absent);
    if let (Err(problem), Ok(one)) = (&slot_zero.decoded, &slot_one.decoded) {
        if one.format_version >= FLASH_AWARE_FORMAT_VERSION {
            return Err(missing_flash_anchor(problem));
        }
    }
    match (&slot_zero.decoded, &slot_one.decoded) {
        (Ok(zero), Ok(one)) => {
            let (chosen, other, other_slot, other_read) =
                if one.commit_sequence > zero.commit_sequence {
                    (one, zero, 0, &slot_zero)
                } else {
                    (zero, one, 1, &slot_one)
                };
            let damage = (other.fs_block_size_bytes != chosen.fs_block_size_bytes
                || other.fs_block_count != chosen.fs_block_count)
                .then(|| {
                    let problem = "its geometry differs from the other slot's".to_string();
                    damaged_slot(other_slot, problem, other_read, chosen)
                });
            Ok((chosen.clone(), damage))
        }
        (Ok(zero), Err(problem)) => {
            let damage = damaged_slot(1, problem.to_string(), &slot_one, zero);
            Ok((zero.clone(), Some(damage)))
        }
        (Err(problem), Ok(one)) => {
            let damage = damaged_slot(0, problem.to_string(), &slot_zero, one);
            Ok((one.clone(), Some(damage)))
        }
        (Err(SuperBlockProblem::NoMagic), Err(SuperBlockProblem::NoMagic)) => {
            Err(LoadFailure::NotFormatted)
        }
        (Err(zero), Err(one)) => {
            let mut findings = vec![
                slot_finding(0, zero.to_string()),
                slot_finding(1, one.to_string()),
            ];
            for finding in &mut findings {
                finding.repairable = false;
            }
            let salvaged = [(0, &slot_zero), (1, &slot_one)]
                .into_iter()
                .filter_map(|(slot, read)| read.salvaged(slot))
                .collect();
            Err(LoadFailure::NoValidSuperBlock { findings, salvaged })
        }
    }
}

/// The flash-aware layout's anchor (page 0 of erase block 0) is gone while a commit-ring
/// record is found: without the anchor's geometry the ring cannot be read, and nothing is
/// written.
fn missing_flash_anchor(problem: &SuperBlockProblem) -> LoadFailure {
    let finding = Finding::new(
        Structure::SuperBlock,
        Some(0),
        format!(
            "the flash-aware layout's anchor (page 0 of erase block 0) is damaged ({problem}) while its commit ring still holds records: the geometry it names is lost, so the ring cannot be read; nothing was written"
        ),
        false,
    );
    LoadFailure::NoValidSuperBlock {
        findings: vec![finding],
        salvaged: Vec::new(),
    }
}

pub(super) fn check_device_fits(
    device: &dyn BlockDevice,
    super_block: &SuperBlock,
) -> Result<Geometry, LoadFailure> {
    let info = device.info();
    let expected_size_bytes = super_block
        .fs_block_count
        .saturating_mul(u64::from(super_block.fs_block_size_bytes));
    if super_block.fs_block_size_bytes % info.block_size_bytes != 0
        || expected_size_bytes > info.size_bytes()
    {
        return Err(LoadFailure::WrongDeviceSize {
            expected_size_bytes,
            fs_block_size_bytes: super_block.fs_block_size_bytes,
            device_size_bytes: info.size_bytes(),
            device_block_size_bytes: info.block_size_bytes,
        });
    }
    Ok(Geometry::new(
        super_block.fs_block_size_bytes,
        super_block.fs_block_count,
        info.block_size_bytes,
    ))
}
