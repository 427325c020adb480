//! Reading an on-disk image into memory, checking everything on the way: the loader that
//! mount and fsck share.
//!
//! It never trusts a byte: every block number is range-checked before it is read, every
//! metadata block's kind, checksum, sequence and owner are checked, and every problem
//! becomes a [`Finding`] (mount refuses an image with findings; fsck lists them).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use flashpipe_device::{run_one, BlockDevice, Clock, DeviceError, IoBuf, Operation};

use crate::findings::{DamagedSlot, Finding, Structure};
use crate::io::{read_fs_blocks, Geometry};
use crate::layout::{
    fixed_entries_per_block, indirect_block_count_in_version, open_metadata_block,
    pointer_entry_bytes, pointers_per_indirect_block_in_version, read_pointer_entry, read_u32,
    read_u64, reserved_offset_of_version, MetadataHeader, MetadataKind, SuperBlock,
    SuperBlockProblem, DIRECT_POINTER_COUNT, FIRST_ALLOCATABLE_BLOCK, FREE_EXTENT_BYTES,
    INODE_RECORD_HEADER_BYTES, MAX_FS_BLOCK_SIZE_BYTES, METADATA_HEADER_BYTES,
    MIN_FS_BLOCK_SIZE_BYTES, NAME_ENTRY_HEADER_BYTES, SUPER_BLOCK_SIZE_BYTES,
};
use crate::name::name_problem;
use crate::shared::SharedCounts;
use crate::state::{CommittedCheckpoint, FileNode, State};

mod accounting;
mod replay;
mod shared_table;

pub use crate::findings::LogDamage;

/// Offset of the super block's checksum field (docs/format.md, "Super block").
const SUPER_BLOCK_CHECKSUM_OFFSET: usize = 12;

/// Most table blocks read in one batch (bounds memory on huge file systems).
const TABLE_READ_BATCH_BLOCKS: usize = 4096;
/// Most findings of one kind listed one by one for block accounting.
const MAX_ACCOUNTING_FINDINGS: usize = 1000;

/// Why no image could be loaded at all.
#[derive(Debug)]
pub enum LoadFailure {
    /// No magic in either slot.
    NotFormatted,
    /// A slot was written by a newer format.
    NewerVersion {
        /// The version found.
        found: u32,
    },
    /// The device is smaller than the file system or has an unusable block size.
    WrongDeviceSize {
        /// Bytes the file system spans.
        expected_size_bytes: u64,
        /// FS block size.
        fs_block_size_bytes: u32,
        /// Device bytes.
        device_size_bytes: u64,
        /// Device block size.
        device_block_size_bytes: u32,
    },
    /// Neither slot is valid (and at least one carries the magic).
    NoValidSuperBlock {
        /// Each slot's problem.
        findings: Vec<Finding>,
        /// Each damaged slot's super block decoded with its reserved bytes cleared and
        /// its checksum recomputed, by slot, when its fields are then sane (`fsck
        /// --repair` may rebuild from one whose commit loads without a finding).
        salvaged: Vec<(u64, SuperBlock)>,
    },
    /// The device failed.
    Device(DeviceError),
}

impl From<DeviceError> for LoadFailure {
    fn from(error: DeviceError) -> LoadFailure {
        LoadFailure::Device(error)
    }
}

/// One file as loaded.
#[derive(Debug, Clone, Default)]
pub struct LoadedFile {
    /// Its name, when the name table names it.
    pub name: Option<Box<str>>,
    /// File length.
    pub size_bytes: u64,
    /// Device clock at the last change.
    pub modified_clock_ns: u64,
    /// Block pointers (direct, then from the chain).
    pub pointers: Vec<u64>,
    /// The data checksum beside each pointer (`None`: a hole, a version-1 image, or a
    /// block flagged unchecked).
    pub checksums: Vec<Option<u32>>,
    /// First indirect block, 0 if none.
    pub indirect_head: u64,
    /// Blocks of the indirect chain.
    pub indirect_chain: Vec<u64>,
}

/// An image as loaded, with everything wrong with it.
#[derive(Debug)]
pub struct LoadedImage {
    /// FS geometry over this device.
    pub geometry: Geometry,
    /// The super block in use.
    pub super_block: SuperBlock,
    /// The other slot, when it is damaged (the mount refuses; `fsck --repair` falls back
    /// to the slot in use and rewrites it).
    pub damaged_slot: Option<DamagedSlot>,
    /// Every other problem.
    pub findings: Vec<Finding>,
    /// Files by inode number.
    pub files: BTreeMap<u64, LoadedFile>,
    /// The free list's extents.
    pub free_extents: Vec<(u64, u64)>,
    /// The checkpoint's table blocks (in map order), then its map blocks, then its log
    /// region.
    pub checkpoint_blocks: Vec<u64>,
    /// The checkpoint's log region, in order (empty before version 3).
    pub log_region: Vec<u64>,
    /// The inode number the next created file gets, after the log's replay.
    pub next_inode_number: u64,
    /// The first log record that could not be replayed, when one could not: the image
    /// is the commit before it, and what the record and the later ones changed is lost.
    pub log_damage: Option<LogDamage>,
    /// True when every file's name, record and chain loaded.
    pub files_complete: bool,
    /// True when the checkpoint map could not be read: no table was loaded at all.
    pub checkpoint_map_lost: bool,
    /// Names whose inode has no record (its inode table block was damaged, or the name
    /// is wrong): `fsck --repair` drops them.
    pub dangling_names: Vec<DanglingName>,
    /// Files whose indirect chain is damaged, by inode number: each is loaded truncated
    /// to the pointers read before the damaged block.
    pub damaged_chains: BTreeMap<u64, ChainDamage>,
    /// Name table blocks that could not be read (their files load without names).
    pub lost_name_table_blocks: Vec<u64>,
    /// Inode table blocks that could not be read (their files are gone).
    pub lost_inode_table_blocks: Vec<u64>,
    /// Blocks in use by metadata and the files that loaded (unless the map was lost).
    pub used_blocks: BlockBits,
}

/// A name table entry that names an inode without a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DanglingName {
    /// The name.
    pub name: Box<str>,
    /// The inode number it points at.
    pub inode_number: u64,
    /// The name table block holding it.
    pub block: u64,
}

/// Where a file's indirect chain broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainDamage {
    /// The damaged indirect block.
    pub block: u64,
    /// Its position in the chain (0 = the first indirect block).
    pub position: u64,
    /// The file's size as recorded, before the truncation to what could be read.
    pub recorded_size_bytes: u64,
    /// What is wrong with the block.
    pub problem: String,
}

impl LoadedImage {
    /// The findings including the damaged slot's.
    pub fn all_findings(&self) -> Vec<Finding> {
        self.damaged_slot
            .iter()
            .map(damaged_slot_finding)
            .chain(self.findings.iter().cloned())
            .collect()
    }
}

impl LoadedImage {
    /// The state an image describes. With `rebuild_free_list` the free list is the
    /// complement of the blocks in use and orphans get `lost+found.<inode>` names (fsck
    /// repair); otherwise the image's free list is taken as it is (mount, which has
    /// checked that it is right). A version-1 image's files are all marked as changed
    /// maps, so that the first commit writes every indirect chain in the version-2 layout
    /// (docs/format.md, "Versioning"); their blocks carry no checksum until rewritten.
    pub fn into_state(self, clock: Arc<dyn Clock>, rebuild_free_list: bool) -> State {
        let image = self;
        let geometry = image.geometry;
        let free_extents = if rebuild_free_list {
            unused_extents(&image.used_blocks, &geometry)
        } else {
            image.free_extents.clone()
        };
        let mut state = State::empty(geometry, clock, &free_extents);
        let highest_inode = image.files.keys().next_back().copied().unwrap_or(0);
        let upgrading = image.super_block.format_version < 2;
        state.next_inode_number = image.next_inode_number.max(highest_inode + 1);
        let (named, orphans): (Vec<_>, Vec<_>) = image
            .files
            .into_iter()
            .partition(|(_, file)| file.name.is_some());
        for (inode_number, file) in named.into_iter().chain(orphans) {
            let name = match file.name {
                Some(name) => name,
                None => state.orphan_name(inode_number),
            };
            let node = FileNode {
                name,
                size_bytes: file.size_bytes,
                pointers: file.pointers,
                checksums: file.checksums,
                indirect_chain: file.indirect_chain,
                map_changed: upgrading,
                modified_clock_ns: file.modified_clock_ns,
            };
            state.insert_file(inode_number, node);
        }
        state.store_identity = image.super_block.store_identity;
        state.shared = SharedCounts::from_pointers(
            geometry.fs_block_count,
            state.files.values().flat_map(|node| node.pointers.iter()),
        );
        state.committed = CommittedCheckpoint {
            sequence: image.super_block.commit_sequence,
            next_inode_number: state.next_inode_number,
            blocks: image.checkpoint_blocks,
            super_block: Some(image.super_block),
            log_region: image.log_region,
        };
        state.files.forget_touched();
        state.changed_since_commit = false;
        state
    }
}

/// One bit per FS block.
#[derive(Debug, Clone)]
pub struct BlockBits {
    words: Vec<u64>,
}

impl BlockBits {
    /// All clear, for `block_count` blocks.
    pub fn new(block_count: u64) -> BlockBits {
        BlockBits {
            words: vec![0; block_count.div_ceil(64) as usize],
        }
    }

    /// Sets `block`'s bit; returns whether it was set before.
    pub fn set(&mut self, block: u64) -> bool {
        let word = &mut self.words[(block / 64) as usize];
        let mask = 1u64 << (block % 64);
        let was_set = *word & mask != 0;
        *word |= mask;
        was_set
    }

    /// Is `block`'s bit set?
    pub fn get(&self, block: u64) -> bool {
        self.words[(block / 64) as usize] & (1u64 << (block % 64)) != 0
    }

    /// Clears `block`'s bit; returns whether it was set before.
    pub fn clear(&mut self, block: u64) -> bool {
        let word = &mut self.words[(block / 64) as usize];
        let mask = 1u64 << (block % 64);
        let was_set = *word & mask != 0;
        *word &= !mask;
        was_set
    }
}

/// The finding that reports a damaged slot (repairable: `fsck --repair` falls back).
fn damaged_slot_finding(damage: &DamagedSlot) -> Finding {
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

/// Loads and checks the image on `device`.
pub fn load_image(device: &mut dyn BlockDevice) -> Result<LoadedImage, LoadFailure> {
    let (super_block, damaged_slot) = choose_super_block(device)?;
    let mut image = load_image_of(device, super_block)?;
    image.damaged_slot = damaged_slot;
    Ok(image)
}

/// Loads and checks the commit `super_block` describes (which need not be a slot's:
/// fsck loads a damaged slot's salvaged super block to tell what a fallback loses).
pub fn load_image_of(
    device: &mut dyn BlockDevice,
    super_block: SuperBlock,
) -> Result<LoadedImage, LoadFailure> {
    let geometry = check_device_fits(device, &super_block)?;
    let next_inode_number = super_block.next_inode_number;
    let mut loader = Loader {
        geometry,
        super_block,
        findings: Vec::new(),
        files: BTreeMap::new(),
        name_entries: Vec::new(),
        free_extents: Vec::new(),
        checkpoint_blocks: Vec::new(),
        log_region: Vec::new(),
        next_inode_number,
        log_damage: None,
        files_complete: true,
        free_list_complete: true,
        checkpoint_map_lost: false,
        dangling_names: Vec::new(),
        damaged_chains: BTreeMap::new(),
        lost_name_table_blocks: Vec::new(),
        lost_inode_table_blocks: Vec::new(),
        shared_table: shared_table::SharedTable::default(),
    };
    let used_blocks = loader.load(device)?;
    Ok(LoadedImage {
        geometry,
        super_block: loader.super_block,
        damaged_slot: None,
        findings: loader.findings,
        files: loader.files,
        free_extents: loader.free_extents,
        checkpoint_blocks: loader.checkpoint_blocks,
        log_region: loader.log_region,
        next_inode_number: loader.next_inode_number,
        log_damage: loader.log_damage,
        files_complete: loader.files_complete,
        checkpoint_map_lost: loader.checkpoint_map_lost,
        dangling_names: loader.dangling_names,
        damaged_chains: loader.damaged_chains,
        lost_name_table_blocks: loader.lost_name_table_blocks,
        lost_inode_table_blocks: loader.lost_inode_table_blocks,
        used_blocks,
    })
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
fn choose_super_block(device: &mut dyn BlockDevice) -> Result<ChosenSuperBlock, LoadFailure> {
    let (slot_zero, slot_one) = read_slots(device)?;
    let slot_one = slot_one.unwrap_or_else(SlotRead::absent);
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

fn check_device_fits(
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

/// A name table entry as read, resolved against the inode table afterwards.
struct NameEntry {
    inode_number: u64,
    name: Box<str>,
    block: u64,
}

/// The map chain's blocks and the table addresses it lists.
type MapAndTables = (Vec<u64>, Vec<u64>);

struct Loader {
    geometry: Geometry,
    super_block: SuperBlock,
    findings: Vec<Finding>,
    files: BTreeMap<u64, LoadedFile>,
    name_entries: Vec<NameEntry>,
    free_extents: Vec<(u64, u64)>,
    checkpoint_blocks: Vec<u64>,
    log_region: Vec<u64>,
    next_inode_number: u64,
    log_damage: Option<LogDamage>,
    files_complete: bool,
    free_list_complete: bool,
    checkpoint_map_lost: bool,
    dangling_names: Vec<DanglingName>,
    damaged_chains: BTreeMap<u64, ChainDamage>,
    lost_name_table_blocks: Vec<u64>,
    lost_inode_table_blocks: Vec<u64>,
    shared_table: shared_table::SharedTable,
}

impl Loader {
    fn find(
        &mut self,
        structure: Structure,
        block: Option<u64>,
        problem: String,
        repairable: bool,
    ) {
        self.findings
            .push(Finding::new(structure, block, problem, repairable));
    }

    fn in_range(&self, block: u64) -> bool {
        (FIRST_ALLOCATABLE_BLOCK..self.geometry.fs_block_count).contains(&block)
    }

    fn load(&mut self, device: &mut dyn BlockDevice) -> Result<BlockBits, DeviceError> {
        let mut used = BlockBits::new(self.geometry.fs_block_count);
        let Some((map_blocks, table_addresses)) = self.load_map(device)? else {
            self.files_complete = false;
            self.checkpoint_map_lost = true;
            return Ok(used);
        };
        let table_count = table_addresses.len() - self.super_block.log_region_block_count as usize;
        let (tables, region) = table_addresses.split_at(table_count);
        self.log_region = region.to_vec();
        self.load_tables(device, tables)?;
        self.resolve_names();
        self.check_counts();
        self.replay_log(device)?;
        self.load_chains(device)?;
        let checkpoint_blocks: Vec<u64> = tables
            .iter()
            .chain(&map_blocks)
            .chain(region)
            .copied()
            .collect();
        self.account_blocks(&mut used, &checkpoint_blocks);
        self.checkpoint_blocks = checkpoint_blocks;
        Ok(used)
    }

    /// Walks the map chain; returns its blocks and the table addresses it lists.
    fn load_map(
        &mut self,
        device: &mut dyn BlockDevice,
    ) -> Result<Option<MapAndTables>, DeviceError> {
        let super_block = self.super_block.clone();
        let mut map_blocks = Vec::new();
        let mut addresses = Vec::new();
        let mut block = super_block.map_head;
        let capacity = fixed_entries_per_block(self.geometry.fs_block_size_bytes, 8);
        for index in 0..super_block.map_block_count {
            if !self.in_range(block) || map_blocks.contains(&block) {
                let problem =
                    format!("map block {index} points at block {block}, out of range or a loop");
                self.find(Structure::CheckpointMap, Some(block), problem, false);
                return Ok(None);
            }
            let buffer = read_fs_blocks(device, &self.geometry, &[block])?.remove(0);
            let is_last = index + 1 == super_block.map_block_count;
            match open_metadata_block(&buffer, MetadataKind::Map, super_block.commit_sequence)
                .and_then(|header| check_map_header(&header, index, capacity, is_last))
            {
                Ok(header) => {
                    let entries = (0..header.entry_count as usize)
                        .map(|slot| read_u64(&buffer, METADATA_HEADER_BYTES + 8 * slot));
                    addresses.extend(entries);
                    map_blocks.push(block);
                    block = header.next_block;
                }
                Err(problem) => {
                    self.find(Structure::CheckpointMap, Some(block), problem, false);
                    return Ok(None);
                }
            }
        }
        let expected = super_block.name_table_block_count
            + super_block.inode_table_block_count
            + super_block.free_list_block_count
            + super_block.shared_table_block_count
            + super_block.log_region_block_count;
        if addresses.len() as u64 != expected {
            let problem = format!(
                "map lists {} table blocks, the super block says {expected}",
                addresses.len()
            );
            self.find(
                Structure::CheckpointMap,
                Some(super_block.map_head),
                problem,
                false,
            );
            return Ok(None);
        }
        if let Some(&bad) = addresses.iter().find(|&&address| !self.in_range(address)) {
            let problem = format!("map lists block {bad}, outside the file system");
            self.find(
                Structure::CheckpointMap,
                Some(super_block.map_head),
                problem,
                false,
            );
            return Ok(None);
        }
        Ok(Some((map_blocks, addresses)))
    }

    fn load_tables(
        &mut self,
        device: &mut dyn BlockDevice,
        addresses: &[u64],
    ) -> Result<(), DeviceError> {
        let name_count = self.super_block.name_table_block_count as usize;
        let inode_count = self.super_block.inode_table_block_count as usize;
        let free_count = self.super_block.free_list_block_count as usize;
        let kinds: Vec<(MetadataKind, u64)> = (0..addresses.len())
            .map(|position| {
                if position < name_count {
                    (MetadataKind::NameTable, position as u64)
                } else if position < name_count + inode_count {
                    (MetadataKind::InodeTable, (position - name_count) as u64)
                } else if position < name_count + inode_count + free_count {
                    (
                        MetadataKind::FreeList,
                        (position - name_count - inode_count) as u64,
                    )
                } else {
                    (
                        MetadataKind::SharedTable,
                        (position - name_count - inode_count - free_count) as u64,
                    )
                }
            })
            .collect();
        for (chunk_index, chunk) in addresses.chunks(TABLE_READ_BATCH_BLOCKS).enumerate() {
            let buffers = read_fs_blocks(device, &self.geometry, chunk)?;
            for (offset, (buffer, &block)) in buffers.iter().zip(chunk).enumerate() {
                let (kind, index) = kinds[chunk_index * TABLE_READ_BATCH_BLOCKS + offset];
                self.load_table_block(buffer, block, kind, index);
            }
        }
        Ok(())
    }

    fn load_table_block(&mut self, buffer: &[u8], block: u64, kind: MetadataKind, index: u64) {
        let structure = structure_of(kind);
        let header = match open_metadata_block(buffer, kind, self.super_block.commit_sequence) {
            Ok(header) if header.owner == index && header.next_block == 0 => header,
            Ok(header) => {
                let problem = format!(
                    "header names index {} / next {}, expected index {index} / next 0",
                    header.owner, header.next_block
                );
                self.table_block_lost(structure, block, problem);
                return;
            }
            Err(problem) => {
                self.table_block_lost(structure, block, problem);
                return;
            }
        };
        let payload =
            &buffer[METADATA_HEADER_BYTES..METADATA_HEADER_BYTES + header.payload_bytes as usize];
        let outcome = match kind {
            MetadataKind::NameTable => self.parse_names(payload, header.entry_count, block),
            MetadataKind::InodeTable => self.parse_inodes(payload, header.entry_count, block),
            MetadataKind::SharedTable => self.parse_shared_extents(payload, header.entry_count),
            _ => self.parse_free_extents(payload, header.entry_count),
        };
        if let Err(problem) = outcome {
            self.table_block_lost(structure, block, problem);
        }
    }

    /// A table block that cannot be used: a free list block costs the free list (rebuilt
    /// by repair from the blocks in use); a name table block costs its files' names
    /// (they become orphans); an inode table block costs its files (their names dangle).
    fn table_block_lost(&mut self, structure: Structure, block: u64, problem: String) {
        if structure == Structure::SharedTable {
            self.shared_table_lost(block, problem);
            return;
        }
        let consequence = match structure {
            Structure::FreeList => {
                self.free_list_complete = false;
                "the free list is rebuilt from the blocks in use by `flashpipe fsck --repair`"
            }
            Structure::NameTable => {
                self.files_complete = false;
                self.lost_name_table_blocks.push(block);
                "the names it holds are lost; `flashpipe fsck --repair` keeps their files as lost+found.<inode>"
            }
            _ => {
                self.files_complete = false;
                self.lost_inode_table_blocks.push(block);
                "the files it describes are lost; `flashpipe fsck --repair` drops their names"
            }
        };
        self.find(
            structure,
            Some(block),
            format!("{problem}: {consequence}"),
            true,
        );
    }

    fn parse_names(&mut self, payload: &[u8], entry_count: u32, block: u64) -> Result<(), String> {
        let mut offset = 0;
        for entry in 0..entry_count {
            if offset + NAME_ENTRY_HEADER_BYTES > payload.len() {
                return Err(format!("entry {entry} runs past the payload"));
            }
            let inode_number = read_u64(payload, offset);
            let length = u16::from_le_bytes([payload[offset + 8], payload[offset + 9]]) as usize;
            let start = offset + NAME_ENTRY_HEADER_BYTES;
            let Some(bytes) = payload.get(start..start + length) else {
                return Err(format!(
                    "entry {entry}: name of {length} bytes runs past the payload"
                ));
            };
            let name = std::str::from_utf8(bytes)
                .map_err(|_| format!("entry {entry}: name is not UTF-8"))?;
            if let Some(reason) = name_problem(name) {
                return Err(format!("entry {entry}: bad name {name:?}: {reason}"));
            }
            self.name_entries.push(NameEntry {
                inode_number,
                name: name.into(),
                block,
            });
            offset = start + length;
        }
        (offset == payload.len())
            .then_some(())
            .ok_or_else(|| "entries do not fill the payload exactly".to_string())
    }

    fn parse_inodes(&mut self, payload: &[u8], entry_count: u32, block: u64) -> Result<(), String> {
        let mut offset = 0;
        for entry in 0..entry_count {
            let Some(header) = payload.get(offset..offset + INODE_RECORD_HEADER_BYTES) else {
                return Err(format!("record {entry} runs past the payload"));
            };
            let direct_count = read_u32(header, 32) as usize;
            let entry_bytes = pointer_entry_bytes(self.super_block.format_version);
            let end = offset
                + INODE_RECORD_HEADER_BYTES
                + entry_bytes * direct_count.min(DIRECT_POINTER_COUNT + 1);
            let Some(record) = payload.get(offset..end) else {
                return Err(format!("record {entry} runs past the payload"));
            };
            self.parse_inode_record(record, entry, block)?;
            offset = end;
        }
        (offset == payload.len())
            .then_some(())
            .ok_or_else(|| "records do not fill the payload exactly".to_string())
    }

    fn parse_inode_record(&mut self, record: &[u8], entry: u32, block: u64) -> Result<(), String> {
        let inode_number = read_u64(record, 0);
        let size_bytes = read_u64(record, 8);
        let indirect_head = read_u64(record, 16);
        let direct_count = read_u32(record, 32) as usize;
        let pointer_count = size_bytes.div_ceil(self.geometry.block_bytes());
        let context = format!("record {entry} (inode {inode_number})");
        if inode_number == 0 || inode_number >= self.super_block.next_inode_number {
            return Err(format!(
                "{context}: inode number outside 1..{}",
                self.super_block.next_inode_number
            ));
        }
        if size_bytes > self.geometry.capacity_bytes() {
            return Err(format!(
                "{context}: size {size_bytes} exceeds the file system"
            ));
        }
        if direct_count as u64 != pointer_count.min(DIRECT_POINTER_COUNT as u64)
            || read_u32(record, 36) != 0
        {
            return Err(format!(
                "{context}: {direct_count} direct pointers for a size of {size_bytes} bytes"
            ));
        }
        let needs_chain = pointer_count > DIRECT_POINTER_COUNT as u64;
        if needs_chain != (indirect_head != 0) || (needs_chain && !self.in_range(indirect_head)) {
            return Err(format!(
                "{context}: indirect head {indirect_head} for {pointer_count} pointers"
            ));
        }
        let version = self.super_block.format_version;
        let entry_bytes = pointer_entry_bytes(version);
        let mut pointers = Vec::with_capacity(direct_count);
        let mut checksums = Vec::with_capacity(direct_count);
        for slot in 0..direct_count {
            let offset = INODE_RECORD_HEADER_BYTES + entry_bytes * slot;
            let (pointer, checksum) = read_pointer_entry(record, offset, version)
                .map_err(|problem| format!("{context}: direct pointer {slot}: {problem}"))?;
            if pointer != 0 && !self.in_range(pointer) {
                return Err(format!(
                    "{context}: direct pointer {slot} = {pointer} out of range"
                ));
            }
            pointers.push(pointer);
            checksums.push(checksum);
        }
        let file = LoadedFile {
            name: None,
            size_bytes,
            modified_clock_ns: read_u64(record, 24),
            pointers,
            checksums,
            indirect_head,
            indirect_chain: Vec::new(),
        };
        if self.files.insert(inode_number, file).is_some() {
            let problem = format!("inode {inode_number} has two records");
            self.find(Structure::InodeTable, Some(block), problem, false);
        }
        Ok(())
    }

    fn parse_free_extents(&mut self, payload: &[u8], entry_count: u32) -> Result<(), String> {
        if payload.len() != entry_count as usize * FREE_EXTENT_BYTES {
            return Err(format!(
                "{entry_count} extents in {} payload bytes",
                payload.len()
            ));
        }
        for entry in payload.chunks_exact(FREE_EXTENT_BYTES) {
            self.free_extents
                .push((read_u64(entry, 0), read_u64(entry, 8)));
        }
        Ok(())
    }

    /// Attaches names to inodes; reports duplicates, dangling names and orphans.
    fn resolve_names(&mut self) {
        let mut seen: HashMap<Box<str>, u64> = HashMap::with_capacity(self.name_entries.len());
        for entry in std::mem::take(&mut self.name_entries) {
            if seen
                .insert(entry.name.clone(), entry.inode_number)
                .is_some()
            {
                let problem = format!("name {:?} appears twice", entry.name);
                self.find(Structure::NameTable, Some(entry.block), problem, false);
                continue;
            }
            match self.files.get_mut(&entry.inode_number) {
                None => {
                    let cause = if self.lost_inode_table_blocks.is_empty() {
                        ""
                    } else {
                        " (lost with a damaged inode table block)"
                    };
                    let problem = format!(
                        "name {:?} points at inode {}, which has no record{cause}",
                        entry.name, entry.inode_number
                    );
                    self.find(Structure::NameTable, Some(entry.block), problem, true);
                    self.dangling_names.push(DanglingName {
                        name: entry.name,
                        inode_number: entry.inode_number,
                        block: entry.block,
                    });
                }
                Some(file) if file.name.is_some() => {
                    let problem = format!(
                        "inode {} has a second name {:?}",
                        entry.inode_number, entry.name
                    );
                    self.find(Structure::NameTable, Some(entry.block), problem, false);
                }
                Some(file) => file.name = Some(entry.name),
            }
        }
        let orphans: Vec<u64> = self
            .files
            .iter()
            .filter(|(_, file)| file.name.is_none())
            .map(|(&inode, _)| inode)
            .collect();
        let cause = if self.lost_name_table_blocks.is_empty() {
            ""
        } else {
            " (its name may have been in a damaged name table block)"
        };
        for inode_number in orphans {
            let problem = format!("inode {inode_number} has no name (orphan){cause}");
            self.find(Structure::InodeTable, None, problem, true);
        }
    }

    /// Walks every file's indirect chain, one step of all chains per batch.
    fn load_chains(&mut self, device: &mut dyn BlockDevice) -> Result<(), DeviceError> {
        let block_size = self.geometry.fs_block_size_bytes;
        let per_block =
            pointers_per_indirect_block_in_version(block_size, self.super_block.format_version)
                as u64;
        let mut walking: Vec<(u64, u64)> = self
            .files
            .iter()
            .filter(|(_, file)| file.indirect_head != 0)
            .map(|(&inode, file)| (inode, file.indirect_head))
            .collect();
        let mut visited = HashSet::new();
        while !walking.is_empty() {
            let blocks: Vec<u64> = walking.iter().map(|&(_, block)| block).collect();
            let buffers = read_fs_blocks(device, &self.geometry, &blocks)?;
            let mut next_round = Vec::new();
            for ((inode_number, block), buffer) in walking.into_iter().zip(buffers) {
                let step = self.chain_step(inode_number, block, &buffer, per_block, &mut visited);
                match step {
                    Ok(Some(next)) => next_round.push((inode_number, next)),
                    Ok(None) => {}
                    Err(problem) => self.chain_damaged(inode_number, block, problem),
                }
            }
            walking = next_round;
        }
        Ok(())
    }

    /// Checks one chain block and appends its pointers; returns the next block to read.
    fn chain_step(
        &mut self,
        inode_number: u64,
        block: u64,
        buffer: &[u8],
        per_block: u64,
        visited: &mut HashSet<u64>,
    ) -> Result<Option<u64>, String> {
        let sequence = self.super_block.commit_sequence;
        let version = self.super_block.format_version;
        let entry_bytes = pointer_entry_bytes(version);
        let fs_block_count = self.geometry.fs_block_count;
        let file = self
            .files
            .get_mut(&inode_number)
            .expect("walking a loaded file");
        let pointer_count = file
            .size_bytes
            .div_ceil(u64::from(self.geometry.fs_block_size_bytes));
        let position = file.indirect_chain.len() as u64;
        let chain_length = indirect_block_count_in_version(
            self.geometry.fs_block_size_bytes,
            pointer_count,
            version,
        );
        if !visited.insert(block) {
            return Err(format!(
                "block {block} reached twice (a loop or a shared chain)"
            ));
        }
        let header = open_metadata_block(buffer, MetadataKind::Indirect, sequence)?;
        let expected_entries = (pointer_count - file.pointers.len() as u64).min(per_block);
        let is_last = position + 1 == chain_length;
        if header.owner != inode_number
            || u64::from(header.entry_count) != expected_entries
            || u64::from(header.payload_bytes) != entry_bytes as u64 * u64::from(header.entry_count)
        {
            return Err(format!("header: owner {}, {} entries; expected owner {inode_number}, {expected_entries} entries", header.owner, header.entry_count));
        }
        let next_ok = if is_last {
            header.next_block == 0
        } else {
            (FIRST_ALLOCATABLE_BLOCK..fs_block_count).contains(&header.next_block)
        };
        if !next_ok {
            return Err(format!(
                "next block {} at position {position} of {chain_length}",
                header.next_block
            ));
        }
        let mut entries = Vec::with_capacity(header.entry_count as usize);
        for slot in 0..header.entry_count as usize {
            let offset = METADATA_HEADER_BYTES + entry_bytes * slot;
            let (pointer, checksum) = read_pointer_entry(buffer, offset, version)
                .map_err(|problem| format!("pointer {slot}: {problem}"))?;
            if pointer != 0 && !(FIRST_ALLOCATABLE_BLOCK..fs_block_count).contains(&pointer) {
                return Err(format!("pointer {slot} = {pointer} out of range"));
            }
            entries.push((pointer, checksum));
        }
        for (pointer, checksum) in entries {
            file.pointers.push(pointer);
            file.checksums.push(checksum);
        }
        file.indirect_chain.push(block);
        Ok((!is_last).then_some(header.next_block))
    }

    /// A chain block that cannot be used: the file keeps the whole blocks mapped before
    /// it (its direct pointers and the chain blocks read so far) and is truncated there.
    fn chain_damaged(&mut self, inode_number: u64, block: u64, problem: String) {
        self.files_complete = false;
        let block_bytes = self.geometry.block_bytes();
        let file = self
            .files
            .get_mut(&inode_number)
            .expect("a damaged chain belongs to a loaded file");
        let position = file.indirect_chain.len() as u64;
        let recorded_size_bytes = file.size_bytes;
        let kept_size_bytes = file.pointers.len() as u64 * block_bytes;
        assert!(kept_size_bytes < recorded_size_bytes);
        file.size_bytes = kept_size_bytes;
        let name = file
            .name
            .as_deref()
            .map_or(String::new(), |name| format!(" ({name:?})"));
        let finding = format!(
            "inode {inode_number}{name}: indirect block at chain position {position}: {problem}: \
             the file keeps its first {kept_size_bytes} of {recorded_size_bytes} bytes \
             (`flashpipe fsck --repair` truncates it there)"
        );
        self.find(Structure::IndirectBlock, Some(block), finding, true);
        self.damaged_chains.insert(
            inode_number,
            ChainDamage {
                block,
                position,
                recorded_size_bytes,
                problem,
            },
        );
    }

    fn check_counts(&mut self) {
        self.check_shared_counts();
        let super_block = self.super_block.clone();
        if self.files_complete && self.files.len() as u64 != super_block.file_count {
            let problem = format!(
                "file count {} but {} files found",
                super_block.file_count,
                self.files.len()
            );
            self.find(Structure::SuperBlock, None, problem, true);
        }
        if !self.free_list_complete {
            return;
        }
        let free_blocks: u64 = self.free_extents.iter().map(|extent| extent.1).sum();
        if free_blocks != super_block.free_block_count
            || self.free_extents.len() as u64 != super_block.free_extent_count
        {
            let problem = format!(
                "super block says {} free blocks in {} extents, the free list holds {free_blocks} in {}",
                super_block.free_block_count,
                super_block.free_extent_count,
                self.free_extents.len()
            );
            self.find(Structure::FreeList, None, problem, true);
        }
        let mut previous_end = 0;
        for &(first, count) in &self.free_extents.clone() {
            if count == 0
                || first < FIRST_ALLOCATABLE_BLOCK
                || first.saturating_add(count) > self.geometry.fs_block_count
                || first <= previous_end && previous_end != 0
            {
                let problem = format!("extent {first}+{count} is empty, out of range, unsorted, overlapping or adjacent");
                self.find(Structure::FreeList, Some(first), problem, true);
                self.free_list_complete = false;
                return;
            }
            previous_end = first + count;
        }
    }
}

fn check_map_header(
    header: &MetadataHeader,
    index: u64,
    capacity: usize,
    is_last: bool,
) -> Result<MetadataHeader, String> {
    if header.owner != index {
        return Err(format!(
            "map block says index {}, expected {index}",
            header.owner
        ));
    }
    if header.entry_count as usize > capacity
        || u64::from(header.payload_bytes) != 8 * u64::from(header.entry_count)
    {
        return Err(format!(
            "{} entries in {} payload bytes",
            header.entry_count, header.payload_bytes
        ));
    }
    if is_last != (header.next_block == 0) {
        return Err(format!(
            "next block {} at chain index {index}",
            header.next_block
        ));
    }
    Ok(header.clone())
}

fn structure_of(kind: MetadataKind) -> Structure {
    match kind {
        MetadataKind::Map => Structure::CheckpointMap,
        MetadataKind::NameTable => Structure::NameTable,
        MetadataKind::InodeTable => Structure::InodeTable,
        MetadataKind::FreeList => Structure::FreeList,
        MetadataKind::Indirect => Structure::IndirectBlock,
        MetadataKind::Log => Structure::Log,
        MetadataKind::SharedTable => Structure::SharedTable,
    }
}

/// Extents of blocks (from the first allocatable one) whose bit is clear.
fn unused_extents(used: &BlockBits, geometry: &Geometry) -> Vec<(u64, u64)> {
    let mut extents: Vec<(u64, u64)> = Vec::new();
    for block in FIRST_ALLOCATABLE_BLOCK..geometry.fs_block_count {
        if used.get(block) {
            continue;
        }
        match extents.last_mut() {
            Some(last) if last.0 + last.1 == block => last.1 += 1,
            _ => extents.push((block, 1)),
        }
    }
    extents
}
