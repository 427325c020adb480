//! Replaying the metadata log onto the loaded checkpoint (docs/format.md, "Replaying the
//! log"; version 9 of the flash-aware layout: "Mounting", the region read forward to the
//! log's end): the log blocks are read in one pass, grouped into records by commit sequence,
//! and each record is checked whole before it is applied, so a damaged record leaves the
//! image at the commit before it. The damaged record is a finding that names what it
//! and the records after it would lose; `fsck --repair` keeps that earlier commit.

use std::collections::{HashMap, HashSet};

use flashpipe_device::{BlockDevice, DeviceError, DeviceErrorKind, IoBuf};

use super::scan_chains::RegionRead;
use super::{BlockBits, LoadedFile, Loader, TABLE_READ_BATCH_BLOCKS};
use crate::attributes::{FileAttributes, FIRST_ATTRIBUTED_FORMAT_VERSION};
use crate::findings::{LogDamage, Structure};
use crate::io::{read_fs_blocks, Geometry};
use crate::layout::{
    indirect_block_count_in_version, read_u32, DIRECT_POINTER_COUNT, FLASH_LOG_FORMAT_VERSION,
    FLASH_SCAN_FORMAT_VERSION, METADATA_HEADER_BYTES,
};
use crate::metadata_log::{
    decode_record_with_attributes, open_region_log_block, salvage_changes, LogFile, LogRecord,
    LOG_ENTRY_RECORD_START, LOG_ENTRY_SHARED_RECORD_START, LOG_RECORD_START_BYTES,
};
use crate::name::name_problem;

/// The free blocks while the log is replayed (absent when the checkpoint's free list
/// could not be read: then the records' extents are not checked).
struct FreeBlocks {
    bits: BlockBits,
    count: u64,
}

impl Loader {
    /// Reads the log blocks the super block names and replays them in order. In version
    /// 9 (the flash-aware layout) the super block (a ring record) names the records known
    /// when it was written; the rest of the region is read too, and records after those
    /// are taken while they are whole, continue the sequence and every chain page they
    /// wrote reads back whole ([`Loader::scanned`], `scan_chains.rs`).
    pub(super) fn replay_log(&mut self, device: &mut dyn BlockDevice) -> Result<(), DeviceError> {
        let scanning = self.super_block.format_version >= FLASH_SCAN_FORMAT_VERSION;
        let known_blocks = self.super_block.log_block_count as usize;
        let log_block_count = if scanning {
            self.log_region.len()
        } else {
            known_blocks
        };
        if log_block_count == 0 {
            return Ok(());
        }
        let addresses: Vec<u64> = self.log_region[..log_block_count].to_vec();
        let buffers = read_log_blocks(device, &self.geometry, &addresses)?;
        let mut free = self.free_list_complete.then(|| self.free_bits());
        let mut last_free_block_count = None;
        let mut names = self.name_index();
        let mut index = 0;
        let mut record_number = 1;
        while index < log_block_count {
            let sequence = self.super_block.checkpoint_sequence() + record_number;
            let record = self.read_record(&buffers, &addresses, index, sequence);
            if scanning && index >= known_blocks {
                let Ok((log_record, _, block_count)) = &record else {
                    break;
                };
                let region = RegionRead {
                    buffers: &buffers,
                    addresses: &addresses,
                };
                let after = (index + block_count, record_number + 1);
                if !self.written_chains_whole(device, &region, after, log_record)? {
                    break;
                }
            }
            let outcome = record.and_then(|(record, attributes, block_count)| {
                self.apply_record(&record, &attributes, &mut names)
                    .map_err(|problem| (index, problem))?;
                Ok((record, block_count))
            });
            match outcome {
                Ok((record, block_count)) => {
                    if let Some(tracked) = free.as_mut() {
                        if let Err(problem) = apply_extents(&record, tracked, &self.geometry) {
                            self.free_list_wrong(addresses[index], sequence, problem);
                            free = None;
                        }
                    }
                    last_free_block_count = Some(record.free_block_count);
                    index += block_count;
                }
                Err((damaged_index, problem)) => {
                    self.log_damaged(
                        &buffers,
                        &addresses,
                        (index, damaged_index),
                        sequence,
                        problem,
                    );
                    break;
                }
            }
            record_number += 1;
        }
        let records = record_number - 1;
        if scanning && self.log_damage.is_none() && index >= known_blocks {
            self.scanned(index as u64, records);
        }
        if self.log_damage.is_none() && records != self.super_block.log_record_count {
            let problem = format!(
                "the super block says {} log records, the log holds {records}",
                self.super_block.log_record_count,
            );
            self.find(Structure::Log, addresses.first().copied(), problem, false);
        }
        if let Some(free) = free {
            self.free_extents = extents_of(&free.bits, self.geometry.fs_block_count);
            match last_free_block_count {
                Some(said) if said != free.count => {
                    let problem = format!(
                        "the last log record says {said} free blocks, the free list and the \
                         log's changes to it hold {}",
                        free.count
                    );
                    self.find(Structure::FreeList, None, problem, true);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Version 9: the region read forward held `records` whole records in `blocks`
    /// blocks (at least those the ring record named): the super block in use becomes the
    /// newest of them, as the ring record of a commit would have said.
    fn scanned(&mut self, blocks: u64, records: u64) {
        let checkpoint_sequence = self.super_block.checkpoint_sequence();
        self.super_block.log_block_count = blocks;
        self.super_block.log_record_count = records;
        self.super_block.commit_sequence = checkpoint_sequence + records;
    }

    /// The record of commit `sequence` starting at log block `index`, and its block
    /// count; or the index of the damaged block and what is wrong.
    pub(super) fn read_record(
        &self,
        buffers: &[IoBuf],
        addresses: &[u64],
        index: usize,
        sequence: u64,
    ) -> Result<(LogRecord, Vec<FileAttributes>, usize), (usize, String)> {
        let (newest, region_tag) = self.log_block_rule();
        let first = &buffers[index];
        let header = open_region_log_block(first, index as u64, newest, region_tag)
            .map_err(|problem| (index, problem))?;
        if header.commit_sequence != sequence {
            return Err((
                index,
                format!(
                    "carries commit {} where the record of commit {sequence} starts",
                    header.commit_sequence
                ),
            ));
        }
        let start = &first[METADATA_HEADER_BYTES..];
        if header.payload_bytes < LOG_RECORD_START_BYTES as u32
            || (start[0] != LOG_ENTRY_RECORD_START && start[0] != LOG_ENTRY_SHARED_RECORD_START)
        {
            return Err((
                index,
                "the record does not begin with its start entry".to_string(),
            ));
        }
        let block_count = read_u32(start, 4) as usize;
        if block_count == 0 || index + block_count > addresses.len() {
            return Err((
                index,
                format!(
                    "the record claims {block_count} blocks, {} are left in the log",
                    addresses.len() - index
                ),
            ));
        }
        let mut blocks: Vec<&[u8]> = Vec::with_capacity(block_count);
        for (position, buffer) in buffers.iter().enumerate().skip(index).take(block_count) {
            let header = open_region_log_block(buffer, position as u64, newest, region_tag)
                .map_err(|problem| (position, problem))?;
            if header.commit_sequence != sequence {
                return Err((
                    position,
                    format!(
                        "carries commit {} inside the record of commit {sequence}",
                        header.commit_sequence
                    ),
                ));
            }
            blocks.push(buffer);
        }
        decode_record_with_attributes(&blocks)
            .map(|(record, attributes)| (record, attributes, block_count))
            .map_err(|problem| (index, problem))
    }

    /// The newest commit sequence a log block may carry and the region tag its header
    /// must carry: the super block's commit and 0 before version 9; in version 9 any
    /// later commit (the region is read past what the ring record named) and the
    /// checkpoint's sequence.
    fn log_block_rule(&self) -> (u64, u64) {
        if self.super_block.format_version >= FLASH_SCAN_FORMAT_VERSION {
            (u64::MAX, self.super_block.checkpoint_sequence())
        } else {
            (self.super_block.commit_sequence, 0)
        }
    }

    /// Checks `record` whole against the state so far and applies it; on an error the
    /// state is unchanged.
    fn apply_record(
        &mut self,
        record: &LogRecord,
        attributes: &[FileAttributes],
        names: &mut HashMap<Box<str>, u64>,
    ) -> Result<(), String> {
        assert_eq!(attributes.len(), record.files.len());
        let version = self.super_block.format_version;
        if version < FIRST_ATTRIBUTED_FORMAT_VERSION {
            if let Some((file, _)) = record
                .files
                .iter()
                .zip(attributes)
                .find(|(_, attributes)| !attributes.is_none())
            {
                return Err(format!(
                    "inode {} carries attributes, which a version-{version} log cannot hold",
                    file.inode_number
                ));
            }
        }
        if record.next_inode_number < self.next_inode_number {
            return Err(format!(
                "next inode number {} is below the previous {}",
                record.next_inode_number, self.next_inode_number
            ));
        }
        let removed: HashSet<u64> = record.removed.iter().copied().collect();
        for &inode_number in &record.removed {
            if !self.files.contains_key(&inode_number) && self.files_complete {
                return Err(format!(
                    "removes inode {inode_number}, which does not exist"
                ));
            }
        }
        let upserted: HashSet<u64> = record.files.iter().map(|file| file.inode_number).collect();
        if upserted.len() != record.files.len()
            || upserted.iter().any(|inode| removed.contains(inode))
        {
            return Err("an inode appears twice in the record".to_string());
        }
        if let Some(shared) = &record.shared {
            self.check_shared_entries(shared)?;
        }
        self.check_chain_entries(record, version)?;
        let mut new_names = HashSet::with_capacity(record.files.len());
        for file in &record.files {
            self.check_log_file(file, record.next_inode_number)?;
            let holder = names.get(&file.name).copied();
            let taken =
                holder.is_some_and(|inode| !removed.contains(&inode) && !upserted.contains(&inode));
            if taken || !new_names.insert(file.name.clone()) {
                return Err(format!("name {:?} would be used twice", file.name));
            }
        }
        let file_count_after = self.files.len() as u64 - removed.len() as u64
            + record
                .files
                .iter()
                .filter(|file| !self.files.contains_key(&file.inode_number))
                .count() as u64;
        if self.files_complete && file_count_after != record.file_count {
            return Err(format!(
                "{file_count_after} files after the record, which says {}",
                record.file_count
            ));
        }
        for inode_number in removed.iter().chain(&upserted) {
            if let Some(old) = self.files.remove(inode_number) {
                if let Some(name) = old.name {
                    names.remove(&name);
                }
            }
        }
        for (file, &attributes) in record.files.iter().zip(attributes) {
            names.insert(file.name.clone(), file.inode_number);
            self.files
                .insert(file.inode_number, loaded_file(file, attributes));
        }
        if let Some(shared) = &record.shared {
            self.apply_shared_entries(shared);
        }
        for (inode_number, blocks) in &record.chains {
            let file = self.files.get_mut(inode_number).expect("checked");
            file.listed_chain = Some(blocks.clone());
        }
        self.next_inode_number = record.next_inode_number;
        Ok(())
    }

    /// A record's allocator changes do not fit the free list: the free list (or the
    /// record's extents) is wrong; the files are replayed all the same, and repair
    /// rebuilds the free list from the blocks in use.
    fn free_list_wrong(&mut self, block: u64, sequence: u64, problem: String) {
        self.free_list_complete = false;
        let finding = format!(
            "log record of commit {sequence} and the free list disagree: {problem}: the free \
             list is rebuilt from the blocks in use by `flashpipe fsck --repair`"
        );
        self.find(Structure::FreeList, Some(block), finding, true);
    }

    /// Chain entries (version 8 only): each names a file of the record with an indirect
    /// chain, once, and lists as many distinct in-range blocks as its size needs, the
    /// first its indirect head.
    fn check_chain_entries(&self, record: &LogRecord, version: u32) -> Result<(), String> {
        if !record.chains.is_empty() && version < FLASH_LOG_FORMAT_VERSION {
            return Err(format!(
                "chain entries, which a version-{version} log cannot hold"
            ));
        }
        let block_size = self.geometry.fs_block_size_bytes;
        let mut named = HashSet::new();
        for (inode_number, blocks) in &record.chains {
            let context = format!("chain entry of inode {inode_number}");
            let Some(file) = record
                .files
                .iter()
                .find(|file| file.inode_number == *inode_number)
            else {
                return Err(format!("{context}: the record has no file entry for it"));
            };
            let pointers = file.size_bytes.div_ceil(u64::from(block_size));
            let expected = indirect_block_count_in_version(block_size, pointers, version);
            let distinct: HashSet<u64> = blocks.iter().copied().collect();
            if !named.insert(*inode_number)
                || blocks.len() as u64 != expected
                || blocks.first() != Some(&file.indirect_head)
                || distinct.len() != blocks.len()
                || blocks.iter().any(|&block| !self.in_range(block))
            {
                return Err(format!(
                    "{context}: {} blocks listed for a chain of {expected} from block {}, \
                     each once and in range",
                    blocks.len(),
                    file.indirect_head
                ));
            }
        }
        Ok(())
    }

    /// The checks the inode table's records get, for a file entry of the log.
    fn check_log_file(&self, file: &LogFile, next_inode_number: u64) -> Result<(), String> {
        let context = format!("file {:?} (inode {})", file.name, file.inode_number);
        if let Some(reason) = name_problem(&file.name) {
            return Err(format!("{context}: bad name: {reason}"));
        }
        if file.inode_number == 0 || file.inode_number >= next_inode_number {
            return Err(format!(
                "{context}: inode number outside 1..{next_inode_number}"
            ));
        }
        if file.size_bytes > self.geometry.capacity_bytes() {
            return Err(format!(
                "{context}: size {} exceeds the file system",
                file.size_bytes
            ));
        }
        let pointer_count = file.size_bytes.div_ceil(self.geometry.block_bytes());
        if file.direct_pointers.len() as u64 != pointer_count.min(DIRECT_POINTER_COUNT as u64) {
            return Err(format!(
                "{context}: {} direct pointers for a size of {} bytes",
                file.direct_pointers.len(),
                file.size_bytes
            ));
        }
        let needs_chain = pointer_count > DIRECT_POINTER_COUNT as u64;
        if needs_chain != (file.indirect_head != 0)
            || (needs_chain && !self.in_range(file.indirect_head))
        {
            return Err(format!(
                "{context}: indirect head {} for {pointer_count} pointers",
                file.indirect_head
            ));
        }
        if let Some(&bad) = file
            .direct_pointers
            .iter()
            .find(|&&pointer| pointer != 0 && !self.in_range(pointer))
        {
            return Err(format!("{context}: direct pointer {bad} out of range"));
        }
        Ok(())
    }

    /// Records the damage at log block `damaged_index` (in the record starting at
    /// `record_index`): the replay stops, the image is the commit before.
    fn log_damaged(
        &mut self,
        buffers: &[IoBuf],
        addresses: &[u64],
        (record_index, damaged_index): (usize, usize),
        sequence: u64,
        problem: String,
    ) {
        let mut lost_files = Vec::new();
        let mut restored_inodes = Vec::new();
        for buffer in &buffers[record_index..] {
            let (files, removed) = salvage_changes(buffer);
            lost_files.extend(files);
            restored_inodes.extend(removed);
        }
        lost_files.sort();
        lost_files.dedup();
        restored_inodes.sort_unstable();
        restored_inodes.dedup();
        let damage = LogDamage {
            commit_sequence: sequence,
            newest_sequence: self.super_block.commit_sequence,
            block: addresses[damaged_index],
            problem,
            lost_files,
            restored_inodes,
        };
        let finding = format!(
            "log record of commit {sequence} (log block {damaged_index}): {}: {}",
            damage.problem,
            damage.describe()
        );
        self.find(Structure::Log, Some(damage.block), finding, true);
        self.log_damage = Some(damage);
    }

    /// The checkpoint's free list as bits.
    fn free_bits(&self) -> FreeBlocks {
        let mut bits = BlockBits::new(self.geometry.fs_block_count);
        let mut count = 0;
        for &(first, block_count) in &self.free_extents {
            for block in first..first + block_count {
                if !bits.set(block) {
                    count += 1;
                }
            }
        }
        FreeBlocks { bits, count }
    }

    /// Name -> inode number of the files loaded so far.
    fn name_index(&self) -> HashMap<Box<str>, u64> {
        self.files
            .iter()
            .filter_map(|(&inode, file)| file.name.clone().map(|name| (name, inode)))
            .collect()
    }
}

/// Applies a record's extents to `free`.
fn apply_extents(
    record: &LogRecord,
    free: &mut FreeBlocks,
    geometry: &Geometry,
) -> Result<(), String> {
    check_extents(record, free, geometry.fs_block_count)
}

/// Takes the record's allocated extents out of `free` and puts its freed extents in;
/// an allocated block that is not free or a freed block that is is an error, and
/// `free` is then left as it was.
fn check_extents(
    record: &LogRecord,
    free: &mut FreeBlocks,
    fs_block_count: u64,
) -> Result<(), String> {
    let in_range = |&(first, count): &(u64, u64)| {
        count > 0
            && first >= 2
            && first
                .checked_add(count)
                .is_some_and(|end| end <= fs_block_count)
    };
    if let Some(bad) = record
        .allocated
        .iter()
        .chain(&record.freed)
        .find(|extent| !in_range(extent))
    {
        return Err(format!("extent {}+{} out of range", bad.0, bad.1));
    }
    let mut done_allocated = Vec::new();
    for &(first, count) in &record.allocated {
        for block in first..first + count {
            if !free.bits.clear(block) {
                restore(free, &done_allocated, &[]);
                return Err(format!("allocates block {block}, which is not free"));
            }
            free.count -= 1;
            done_allocated.push(block);
        }
    }
    let mut done_freed = Vec::new();
    for &(first, count) in &record.freed {
        for block in first..first + count {
            if free.bits.set(block) {
                restore(free, &done_allocated, &done_freed);
                return Err(format!("frees block {block}, which is already free"));
            }
            free.count += 1;
            done_freed.push(block);
        }
    }
    Ok(())
}

/// Undoes the blocks `check_extents` took and gave.
fn restore(free: &mut FreeBlocks, allocated: &[u64], freed: &[u64]) {
    for &block in allocated {
        free.bits.set(block);
        free.count += 1;
    }
    for &block in freed {
        free.bits.clear(block);
        free.count -= 1;
    }
}

fn loaded_file(file: &LogFile, attributes: FileAttributes) -> LoadedFile {
    LoadedFile {
        name: Some(file.name.clone()),
        size_bytes: file.size_bytes,
        modified_clock_ns: file.modified_clock_ns,
        pointers: file.direct_pointers.clone(),
        checksums: file.direct_checksums.clone(),
        indirect_head: file.indirect_head,
        indirect_chain: Vec::new(),
        attributes,
        listed_chain: None,
    }
}

/// Extents of set bits, from the first allocatable block.
fn extents_of(bits: &BlockBits, fs_block_count: u64) -> Vec<(u64, u64)> {
    let mut extents: Vec<(u64, u64)> = Vec::new();
    for block in 2..fs_block_count {
        if !bits.get(block) {
            continue;
        }
        match extents.last_mut() {
            Some(last) if last.0 + last.1 == block => last.1 += 1,
            _ => extents.push((block, 1)),
        }
    }
    extents
}

/// The log blocks at `addresses`, read in batches; a block that reads uncorrectable (a
/// program torn by a power cut) comes back zeroed, which no log block check accepts.
pub(super) fn read_log_blocks(
    device: &mut dyn BlockDevice,
    geometry: &Geometry,
    addresses: &[u64],
) -> Result<Vec<IoBuf>, DeviceError> {
    let mut buffers = Vec::with_capacity(addresses.len());
    for chunk in addresses.chunks(TABLE_READ_BATCH_BLOCKS) {
        match read_fs_blocks(device, geometry, chunk) {
            Ok(read) => buffers.extend(read),
            Err(_) => {
                for &address in chunk {
                    buffers.push(read_log_block(device, geometry, address)?);
                }
            }
        }
    }
    Ok(buffers)
}

fn read_log_block(
    device: &mut dyn BlockDevice,
    geometry: &Geometry,
    address: u64,
) -> Result<IoBuf, DeviceError> {
    match read_fs_blocks(device, geometry, &[address]) {
        Ok(mut read) => Ok(read.remove(0)),
        Err(error) if matches!(error.kind, DeviceErrorKind::Uncorrectable { .. }) => {
            Ok(IoBuf::zeroed(geometry.fs_block_size_bytes as usize))
        }
        Err(error) => Err(error),
    }
}
