//! Reading an on-disk image into memory, checking everything on the way: the loader that
//! mount and fsck share.
//!
//! It never trusts a byte: every block number is range-checked before it is read, every
//! metadata block's kind, checksum, sequence and owner are checked, and every problem
//! becomes a [`Finding`] (mount refuses an image with findings; fsck lists them).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use flashpipe_device::{BlockDevice, Clock, DeviceError};

use crate::attributes::FileAttributes;
use crate::findings::{DamagedSlot, Finding, Structure};
use crate::io::{read_fs_blocks, Geometry};
use crate::layout::{
    indirect_block_count_in_version, open_metadata_block, pointer_entry_bytes,
    pointers_per_indirect_block_in_version, read_pointer_entry, MetadataKind, SuperBlock,
    FIRST_ALLOCATABLE_BLOCK, METADATA_HEADER_BYTES,
};
use crate::shared::SharedCounts;
use crate::state::{CommittedCheckpoint, FileNode, State};

mod accounting;
mod replay;
mod scan_chains;
mod shared_table;
mod super_slots;
mod tables;

use super_slots::{check_device_fits, choose_super_block, damaged_slot_finding};

pub use crate::findings::LogDamage;
pub use crate::state::RefusedRecord;

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
    /// What the user set of its mode, owner and wall-clock time (version 6).
    pub attributes: FileAttributes,
    /// Version 8 (flash-aware layout): the chain's blocks as the log listed them, when
    /// their `next_block` fields are stale (blocks rewritten one by one).
    pub listed_chain: Option<Vec<u64>>,
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
    /// Version 9: the whole record past the log's end refused because a chain page it
    /// wrote did not read back whole (a power cut between its pages), if any.
    pub refused_record: Option<RefusedRecord>,
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
            unused_extents(
                &image.used_blocks,
                &geometry,
                image.super_block.reserved_block_count(),
            )
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
            if file.listed_chain.is_some() {
                state.flash_chains.note_loaded_unlinked(inode_number);
            }
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
                attributes: file.attributes,
            };
            state.insert_file(inode_number, node);
        }
        state.store_identity = image.super_block.store_identity;
        state.mount_refused_record = image.refused_record;
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
        refused_record: None,
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
        refused_record: loader.refused_record,
        files_complete: loader.files_complete,
        checkpoint_map_lost: loader.checkpoint_map_lost,
        dangling_names: loader.dangling_names,
        damaged_chains: loader.damaged_chains,
        lost_name_table_blocks: loader.lost_name_table_blocks,
        lost_inode_table_blocks: loader.lost_inode_table_blocks,
        used_blocks,
    })
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
    refused_record: Option<RefusedRecord>,
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
        let listed_next = file.listed_chain.as_ref().map(|listed| {
            let next = listed.get(position as usize + 1).copied().unwrap_or(0);
            (!is_last).then_some(next)
        });
        let next_ok = if listed_next.is_some() {
            true
        } else if is_last {
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
        Ok(listed_next.unwrap_or((!is_last).then_some(header.next_block)))
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

/// Extents of blocks (from the first allocatable one, `first_block`) whose bit is clear.
fn unused_extents(used: &BlockBits, geometry: &Geometry, first_block: u64) -> Vec<(u64, u64)> {
    let mut extents: Vec<(u64, u64)> = Vec::new();
    for block in first_block..geometry.fs_block_count {
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
