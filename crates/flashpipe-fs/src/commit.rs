//! The commit (flush): writes what changed since the last commit, copy-on-write, then
//! switches the super block (docs/format.md, "Crash consistency", step 2, and "Metadata
//! log").
//!
//! A commit is either a *log commit* (the changed files, removed inodes and allocator
//! changes as one record appended to the checkpoint's log region: its cost follows the
//! change, not the file count) or a *checkpoint* (every table written anew, with a new
//! log region). The rule is [`log_commit_fits`]. Order either way: new indirect chains
//! and the record or checkpoint go to blocks no durable commit uses; device flush; super
//! block into the older slot; device flush; only then do blocks freed by this commit
//! become allocatable again.

use flashpipe_device::{BlockDevice, IoBuf};

use crate::attributes::{inode_record_header_bytes, FileAttributes};
use crate::error::FlushError;
use crate::io::{write_fs_blocks, Geometry};
use crate::layout::{
    fixed_entries_per_block, indirect_block_count, inode_record_bytes, pointers_per_indirect_block,
    seal_metadata_block, write_pointer_entry, write_u32, write_u64, MetadataHeader, MetadataKind,
    SuperBlock, DIRECT_POINTER_COUNT, FIRST_SHARED_FORMAT_VERSION, FORMAT_VERSION,
    FREE_EXTENT_BYTES, MAX_NAME_BYTES, METADATA_HEADER_BYTES, NAME_ENTRY_HEADER_BYTES,
    POINTER_ENTRY_BYTES, SHARED_EXTENT_BYTES, SUPER_BLOCK_SIZE_BYTES,
};
use crate::metadata_log::{
    encode_inode_record, LogFile, LogRecord, LOG_EXTENT_ENTRY_BYTES, LOG_FILE_ENTRY_HEADER_BYTES,
    LOG_REMOVED_ENTRY_BYTES, LOG_SHARED_RECORD_START_BYTES,
};
use crate::plan::run_plan;
use crate::state::{CommittedCheckpoint, FileNode, State};

mod collect;
mod flash_chains;
mod plan;

pub use plan::CommitPlan;
use plan::Durable;

/// Fewest blocks of a checkpoint's log region (when the free space allows).
pub const LOG_REGION_MIN_BLOCKS: u64 = 4;
/// Most blocks of a checkpoint's log region: bounds what a mount reads and replays.
pub const LOG_REGION_MAX_BLOCKS: u64 = 8192;
/// A log region takes at most this fraction (1/n) of the blocks free after the
/// checkpoint's tables, so that it never crowds out data on a nearly full store.
pub const LOG_REGION_FREE_SPACE_DIVISOR: u64 = 8;

/// Commits `state` to `device`. When nothing changed since the last commit it only
/// flushes the device. A failure half-way makes the state unusable. The steps are
/// [`CommitPlan`]'s, run by the sync driver.
pub fn commit(state: &mut State, device: &mut dyn BlockDevice) -> Result<(), FlushError> {
    run_plan(&mut CommitPlan::new(), state, device)
}

/// The log rule (docs/format.md, "When a checkpoint is taken"): a commit appends a log
/// record when the last commit is of version 5 (it has a log region and a shared
/// table, so that its records carry reference counts), no repair (or the
/// commit policy) asks for a checkpoint, the free blocks hold the new indirect chains of the changed files, and
/// the record (bounded from above before anything is written) fits in what is left of
/// the region. Otherwise it writes a checkpoint.
pub fn log_commit_fits(state: &State) -> bool {
    let committed = &state.committed;
    let Some(super_block) = &committed.super_block else {
        return false;
    };
    if state.force_checkpoint
        || state.checkpoint_every_commit
        || super_block.format_version < FIRST_SHARED_FORMAT_VERSION
        || crate::flash_log::region_from_older_version(state, super_block)
    {
        return false;
    }
    let region_left = committed.log_region.len() as u64 - super_block.log_block_count;
    if region_left == 0 {
        return false;
    }
    let block_size = state.geometry.fs_block_size_bytes;
    let mut chain_blocks = 0;
    let mut old_chain_blocks = 0;
    let mut attribute_bytes = 0;
    let mut record_bytes = (LOG_SHARED_RECORD_START_BYTES
        + LOG_EXTENT_ENTRY_BYTES * state.shared.touched_extents().len())
        as u64;
    for inode_number in state.files.touched() {
        match state.files.get(inode_number) {
            Some(node) => {
                let new_chain = indirect_block_count(block_size, node.pointers.len() as u64);
                if node.map_changed {
                    chain_blocks += new_chain;
                    old_chain_blocks += node.indirect_chain.len() as u64;
                }
                record_bytes += flash_chains::chain_entry_bound(state, new_chain);
                attribute_bytes = attribute_bytes.max(node.attribute_bytes());
                record_bytes += (LOG_FILE_ENTRY_HEADER_BYTES
                    + node.inode_record_bytes()
                    + node.name.len()) as u64;
            }
            None => record_bytes += LOG_REMOVED_ENTRY_BYTES as u64,
        }
    }
    if chain_blocks > state.allocator.free_block_count() {
        return false;
    }
    let extent_bound = state.allocator.fresh_extents().len() as u64
        + state.allocator.pending_extents().len() as u64
        + chain_blocks
        + old_chain_blocks;
    record_bytes += extent_bound * LOG_EXTENT_ENTRY_BYTES as u64;
    let largest_extra_entry = flash_chains::largest_chain_entry(state);
    record_block_bound(
        block_size,
        record_bytes,
        attribute_bytes,
        largest_extra_entry,
    ) <= region_left
}

/// Blocks a record of `record_bytes` bytes can fill at most: entries never straddle
/// blocks, so each block wastes less than the largest entry (a file entry whose inode
/// record carries `attribute_bytes` of attribute fields at most, or another entry of
/// `largest_extra_entry` bytes: the flash-aware layout's chain entries).
fn record_block_bound(
    block_size_bytes: u32,
    record_bytes: u64,
    attribute_bytes: usize,
    largest_extra_entry: usize,
) -> u64 {
    let largest_entry = (LOG_FILE_ENTRY_HEADER_BYTES
        + inode_record_bytes(u64::MAX)
        + attribute_bytes
        + MAX_NAME_BYTES)
        .max(largest_extra_entry);
    let usable = (block_size_bytes as usize - METADATA_HEADER_BYTES - largest_entry) as u64;
    record_bytes.div_ceil(usable)
}

/// Prepares one log record for the changes since the last commit: new indirect chains
/// of changed files into fresh blocks, the record into the next blocks of the log
/// region; the writes, and what becomes durable once they, a flush, the super block and
/// a flush are done ([`finish_log_commit`]).
fn prepare_log_commit(state: &mut State) -> (Vec<(u64, IoBuf)>, Durable) {
    let sequence = state.committed.sequence + 1;
    let touched: Vec<u64> = state.files.touched().iter().copied().collect();
    let changed_maps: Vec<u64> = touched
        .iter()
        .copied()
        .filter(|inode| state.files.get(inode).is_some_and(|node| node.map_changed))
        .collect();
    let mut writes = flash_chains::rewrite_changed_chains(state, sequence, &changed_maps);
    let record = build_log_record(state, sequence, &touched);
    let attributes: Vec<FileAttributes> = record
        .files
        .iter()
        .map(|file| state.files[&file.inode_number].attributes)
        .collect();
    let mut super_block = state
        .committed
        .super_block
        .clone()
        .expect("a log commit extends a committed checkpoint");
    let first_index = super_block.log_block_count;
    let region_tag = crate::flash_log::region_tag(state, &super_block);
    let blocks = record.encode_in_region(
        state.geometry.fs_block_size_bytes,
        first_index,
        region_tag,
        &attributes,
    );
    assert!(
        first_index + blocks.len() as u64 <= state.committed.log_region.len() as u64,
        "the log rule bounded the record to the region left"
    );
    let record_block_count = blocks.len() as u64;
    for (offset, block) in blocks.into_iter().enumerate() {
        let address = state.committed.log_region[first_index as usize + offset];
        writes.push((address, IoBuf::from_slice(&block)));
    }
    super_block.format_version = FORMAT_VERSION;
    super_block.store_identity = state.store_identity;
    super_block.commit_sequence = sequence;
    super_block.log_block_count = first_index + record_block_count;
    super_block.log_record_count += 1;
    crate::flash_log::count_record_pages(state, record_block_count);
    let super_block = crate::flash_layout::log_record_super_block(state, super_block);
    (
        writes,
        Durable::Log {
            touched,
            super_block,
        },
    )
}

/// The state once a log commit is durable: freed blocks allocatable, nothing touched.
fn finish_log_commit(state: &mut State, touched: Vec<u64>, super_block: SuperBlock) {
    let sequence = super_block.commit_sequence;
    state.allocator.commit_is_durable();
    for inode_number in &touched {
        if let Some(node) = state.files.get_mut(inode_number) {
            node.map_changed = false;
        }
    }
    state.committed.sequence = sequence;
    state.committed.next_inode_number = state.next_inode_number;
    state.committed.super_block = Some(super_block);
    state.files.forget_touched();
    state.shared.forget_touched();
    state.changed_since_commit = false;
}

/// The record of the changes since the last commit (indirect chains already
/// rewritten): every touched file that exists, whole; every touched file that the last
/// commit held and that is gone; the allocator's fresh and pending extents.
fn build_log_record(state: &State, sequence: u64, touched: &[u64]) -> LogRecord {
    let mut record = LogRecord {
        commit_sequence: sequence,
        next_inode_number: state.next_inode_number,
        file_count: state.files.len() as u64,
        free_block_count: state.allocator.free_block_count_after_commit(),
        allocated: state.allocator.fresh_extents(),
        freed: state.allocator.pending_extents(),
        shared: Some(state.shared.touched_extents()),
        chains: flash_chains::unlinked_chains(state, touched),
        ..LogRecord::default()
    };
    for &inode_number in touched {
        match state.files.get(&inode_number) {
            Some(node) => record.files.push(log_file(inode_number, node)),
            None if inode_number < state.committed.next_inode_number => {
                record.removed.push(inode_number)
            }
            None => {}
        }
    }
    record
}

fn log_file(inode_number: u64, node: &FileNode) -> LogFile {
    let direct_count = node.pointers.len().min(DIRECT_POINTER_COUNT);
    LogFile {
        inode_number,
        name: node.name.clone(),
        size_bytes: node.size_bytes,
        indirect_head: node.indirect_chain.first().copied().unwrap_or(0),
        modified_clock_ns: node.modified_clock_ns,
        direct_pointers: node.pointers[..direct_count].to_vec(),
        direct_checksums: node.checksums[..direct_count].to_vec(),
    }
}

/// Blocks of the log region a checkpoint with `table_blocks` name and inode table
/// blocks gets when `free_blocks` are free: half the tables, at least
/// [`LOG_REGION_MIN_BLOCKS`], at most [`LOG_REGION_MAX_BLOCKS`] and at most
/// 1/[`LOG_REGION_FREE_SPACE_DIVISOR`] of the blocks the tables leave free.
pub fn log_region_blocks(table_blocks: u64, free_blocks: u64) -> u64 {
    let wanted = (table_blocks / 2).clamp(LOG_REGION_MIN_BLOCKS, LOG_REGION_MAX_BLOCKS);
    let spare = free_blocks.saturating_sub(table_blocks) / LOG_REGION_FREE_SPACE_DIVISOR;
    wanted.min(spare)
}

/// Blocks the checkpoint will allocate, computed exactly before anything changes: new
/// indirect chains, the packed name and inode tables, the log region, and the free list
/// and map sized for the most extents the releases and allocations can produce.
fn commit_space_needed(state: &State) -> u64 {
    if state.flash.is_none() {
        return checkpoint_space(state, None);
    }
    let without_region = checkpoint_space(state, Some(0));
    match crate::flash_log::region_pages(state, without_region) {
        0 => without_region,
        region => checkpoint_space(state, Some(region)),
    }
}

/// [`commit_space_needed`] with the flash-aware layout's region size given
/// (`flash_region`), or the ordinary layout's rule (`None`).
fn checkpoint_space(state: &State, flash_region: Option<u64>) -> u64 {
    let block_size = state.geometry.fs_block_size_bytes;
    let mut chain_blocks = 0;
    let mut released_blocks = state.committed.blocks.len() as u64;
    let rewritten = state.files.iter().filter(|(&inode_number, node)| {
        node.map_changed || state.flash_chains.is_unlinked(inode_number)
    });
    for (_, node) in rewritten {
        chain_blocks += indirect_block_count(block_size, node.pointers.len() as u64);
        released_blocks += node.indirect_chain.len() as u64;
    }
    let name_blocks = packed_block_count(
        block_size,
        state
            .files
            .values()
            .map(|node| NAME_ENTRY_HEADER_BYTES + node.name.len()),
    );
    let inode_blocks = packed_block_count(
        block_size,
        state.files.values().map(|node| node.inode_record_bytes()),
    );
    let region_blocks = flash_region.unwrap_or_else(|| {
        log_region_blocks(
            name_blocks + inode_blocks,
            state.allocator.free_block_count(),
        )
    });
    let shared_blocks = shared_table_block_count(state);
    let extent_bound =
        state.allocator.extents_after_commit().len() as u64 + released_blocks + chain_blocks;
    let (free_list_blocks, map_blocks) = size_free_list_and_map(
        state,
        extent_bound,
        name_blocks + inode_blocks + shared_blocks,
        region_blocks,
    );
    chain_blocks
        + name_blocks
        + inode_blocks
        + shared_blocks
        + free_list_blocks
        + map_blocks
        + region_blocks
}

/// Blocks of the shared table the next checkpoint writes (0 when no block is shared).
fn shared_table_block_count(state: &State) -> u64 {
    let per_block =
        fixed_entries_per_block(state.geometry.fs_block_size_bytes, SHARED_EXTENT_BYTES) as u64;
    (state.shared.extents().len() as u64).div_ceil(per_block)
}

/// Blocks that entries of `entry_sizes` bytes fill when packed in order (at least one).
fn packed_block_count(block_size_bytes: u32, entry_sizes: impl Iterator<Item = usize>) -> u64 {
    let capacity = block_size_bytes as usize - METADATA_HEADER_BYTES;
    let mut blocks = 1;
    let mut used = 0;
    for size in entry_sizes {
        if used + size > capacity {
            blocks += 1;
            used = 0;
        }
        used += size;
    }
    blocks
}

/// A metadata block being filled, before its header is sealed.
struct PackedBlock {
    buffer: IoBuf,
    entry_count: u32,
    payload_bytes: u32,
}

/// Packs variable-length entries into metadata blocks; entries never straddle blocks.
struct TablePacker {
    block_size_bytes: usize,
    blocks: Vec<PackedBlock>,
}

impl TablePacker {
    fn new(block_size_bytes: usize) -> TablePacker {
        TablePacker {
            block_size_bytes,
            blocks: Vec::new(),
        }
    }

    fn push(&mut self, entry: &[u8]) {
        let capacity = self.block_size_bytes - METADATA_HEADER_BYTES;
        assert!(entry.len() <= capacity, "entry larger than a block");
        let needs_block = match self.blocks.last() {
            Some(last) => last.payload_bytes as usize + entry.len() > capacity,
            None => true,
        };
        if needs_block {
            self.blocks.push(self.empty_block());
        }
        let last = self.blocks.last_mut().expect("a block exists");
        let start = METADATA_HEADER_BYTES + last.payload_bytes as usize;
        last.buffer[start..start + entry.len()].copy_from_slice(entry);
        last.payload_bytes += entry.len() as u32;
        last.entry_count += 1;
    }

    fn empty_block(&self) -> PackedBlock {
        PackedBlock {
            buffer: IoBuf::zeroed(self.block_size_bytes),
            entry_count: 0,
            payload_bytes: 0,
        }
    }

    /// The blocks, padded with empty ones up to `minimum_blocks`.
    fn finish(mut self, minimum_blocks: usize) -> Vec<PackedBlock> {
        while self.blocks.len() < minimum_blocks {
            self.blocks.push(self.empty_block());
        }
        self.blocks
    }
}

/// Prepares a checkpoint: every table anew with a new log region; the writes, and what
/// becomes durable once they, a flush, the super block and a flush are done
/// ([`finish_checkpoint`]).
fn prepare_checkpoint(state: &mut State) -> Result<(Vec<(u64, IoBuf)>, Durable), FlushError> {
    let sequence = state.committed.sequence + 1;
    let free_blocks_before = state.allocator.free_block_count();
    let flash_region = match state.flash {
        Some(_) => crate::flash_log::take_region(state, checkpoint_space(state, Some(0))),
        None => Vec::new(),
    };
    let changed_maps = flash_chains::chains_to_rewrite(state);
    let mut writes = rewrite_indirect_chains(state, sequence, &changed_maps);
    for block in std::mem::take(&mut state.committed.blocks) {
        state.allocator.release(block);
    }
    let name_blocks = pack_name_table(state);
    let inode_blocks = pack_inode_table(state);
    let named_blocks = name_blocks.len() as u64 + inode_blocks.len() as u64;
    let region_block_count = match state.flash {
        Some(_) => flash_region.len() as u64,
        None => log_region_blocks(named_blocks, free_blocks_before),
    };
    let shared_extents = state.shared.extents();
    let shared_blocks = pack_shared_table(state, &shared_extents);
    let shared_table_block_count = shared_blocks.len() as u64;
    let base_extents = state.allocator.extents_after_commit().len() as u64;
    let (free_list_block_count, map_block_count) = size_free_list_and_map(
        state,
        base_extents,
        named_blocks + shared_table_block_count,
        region_block_count,
    );
    let table_block_count = named_blocks + free_list_block_count + shared_table_block_count;
    let allocated_region = region_block_count - flash_region.len() as u64;
    let mut checkpoint_blocks = allocate_addresses(
        state,
        table_block_count + map_block_count + allocated_region,
    )?;
    checkpoint_blocks.extend(flash_region);
    let (table_addresses, rest) = checkpoint_blocks.split_at(table_block_count as usize);
    let (map_addresses, region_addresses) = rest.split_at(map_block_count as usize);
    let free_extents = state.allocator.extents_after_commit();
    let free_list_blocks = pack_free_list(state, &free_extents, free_list_block_count as usize);
    let super_block = SuperBlock {
        format_version: FORMAT_VERSION,
        fs_block_size_bytes: state.geometry.fs_block_size_bytes,
        fs_block_count: state.geometry.fs_block_count,
        commit_sequence: sequence,
        next_inode_number: state.next_inode_number,
        file_count: state.files.len() as u64,
        free_block_count: free_extents.iter().map(|extent| extent.1).sum(),
        map_head: map_addresses[0],
        map_block_count,
        name_table_block_count: name_blocks.len() as u64,
        inode_table_block_count: inode_blocks.len() as u64,
        free_list_block_count,
        free_extent_count: free_extents.len() as u64,
        log_region_block_count: region_block_count,
        log_block_count: 0,
        log_record_count: 0,
        store_identity: state.store_identity,
        shared_table_block_count,
        shared_extent_count: shared_extents.len() as u64,
        shared_block_count: state.shared.shared_block_count(),
        pages_per_erase_block: 0,
        ring_sequence: 0,
        record_kind: crate::layout::RingRecordKind::Commit,
        flash_totals: crate::layout::FlashTotals::default(),
    };
    let super_block = crate::flash_layout::flash_super_block(state, super_block);
    let tables = [
        (MetadataKind::NameTable, name_blocks),
        (MetadataKind::InodeTable, inode_blocks),
        (MetadataKind::FreeList, free_list_blocks),
        (MetadataKind::SharedTable, shared_blocks),
    ];
    let mut next_address = table_addresses.iter().copied();
    for (kind, blocks) in tables {
        for (index, block) in blocks.into_iter().enumerate() {
            let address = next_address.next().expect("one address per table block");
            writes.push((
                address,
                seal_table_block(block, kind, sequence, index as u64),
            ));
        }
    }
    let listed: Vec<u64> = table_addresses
        .iter()
        .chain(region_addresses)
        .copied()
        .collect();
    writes.extend(build_map_chain(state, sequence, &listed, map_addresses));
    let log_region = region_addresses.to_vec();
    Ok((
        writes,
        Durable::Checkpoint {
            checkpoint_blocks,
            log_region,
            super_block,
        },
    ))
}

fn finish_checkpoint(
    state: &mut State,
    checkpoint_blocks: Vec<u64>,
    log_region: Vec<u64>,
    super_block: SuperBlock,
) {
    state.allocator.commit_is_durable();
    state.committed = CommittedCheckpoint {
        sequence: super_block.commit_sequence,
        next_inode_number: super_block.next_inode_number,
        blocks: checkpoint_blocks,
        super_block: Some(super_block),
        log_region,
    };
    for node in state.files.values_mut_untracked() {
        node.map_changed = false;
    }
    state.files.forget_touched();
    state.shared.forget_touched();
    state.force_checkpoint = false;
    state.changed_since_commit = false;
}

fn allocate_addresses(state: &mut State, block_count: u64) -> Result<Vec<u64>, FlushError> {
    let free_blocks = state.allocator.free_block_count();
    let runs = state
        .allocator
        .allocate(block_count)
        .ok_or(FlushError::NoSpace {
            needed_blocks: block_count,
            free_blocks,
        })?;
    Ok(runs
        .into_iter()
        .flat_map(|(first, count)| first..first + count)
        .collect())
}

/// Writes new indirect chains for the files `inode_numbers` (whose block maps changed);
/// releases their old ones.
fn rewrite_indirect_chains(
    state: &mut State,
    sequence: u64,
    inode_numbers: &[u64],
) -> Vec<(u64, IoBuf)> {
    let geometry = state.geometry;
    let per_block = pointers_per_indirect_block(geometry.fs_block_size_bytes);
    let mut writes = Vec::new();
    for &inode_number in inode_numbers {
        let unlinked = state.flash_chains.is_unlinked(inode_number);
        let node = state.files.get_mut(&inode_number).expect("a live file");
        assert!(
            node.map_changed || unlinked,
            "inode {inode_number}: only changed maps"
        );
        for block in node.indirect_chain.drain(..) {
            state.allocator.release(block);
        }
        let chain_length =
            indirect_block_count(geometry.fs_block_size_bytes, node.pointers.len() as u64);
        let runs = state
            .allocator
            .allocate(chain_length)
            .expect("the checkpoint reserve covers every indirect chain");
        let chain: Vec<u64> = runs
            .into_iter()
            .flat_map(|(first, count)| first..first + count)
            .collect();
        writes.extend(indirect_chain_blocks(
            &geometry,
            per_block,
            sequence,
            inode_number,
            node,
            &chain,
        ));
        node.indirect_chain = chain;
        flash_chains::note_whole_chain(state, inode_number);
    }
    writes
}

/// The sealed blocks of `node`'s indirect chain at the addresses `chain`.
fn indirect_chain_blocks(
    geometry: &Geometry,
    per_block: usize,
    sequence: u64,
    inode_number: u64,
    node: &FileNode,
    chain: &[u64],
) -> Vec<(u64, IoBuf)> {
    let beyond_direct = node.pointers.get(DIRECT_POINTER_COUNT..).unwrap_or(&[]);
    let checksums_beyond_direct = node.checksums.get(DIRECT_POINTER_COUNT..).unwrap_or(&[]);
    let chunks = beyond_direct
        .chunks(per_block)
        .zip(checksums_beyond_direct.chunks(per_block));
    let mut writes = Vec::with_capacity(chain.len());
    for (index, (pointers, checksums)) in chunks.enumerate() {
        let mut buffer = IoBuf::zeroed(geometry.fs_block_size_bytes as usize);
        for (slot, (&pointer, &checksum)) in pointers.iter().zip(checksums).enumerate() {
            let offset = METADATA_HEADER_BYTES + POINTER_ENTRY_BYTES * slot;
            write_pointer_entry(&mut buffer, offset, pointer, checksum);
        }
        let header = MetadataHeader {
            kind: MetadataKind::Indirect,
            commit_sequence: sequence,
            next_block: chain.get(index + 1).copied().unwrap_or(0),
            entry_count: pointers.len() as u32,
            payload_bytes: (POINTER_ENTRY_BYTES * pointers.len()) as u32,
            owner: inode_number,
        };
        seal_metadata_block(&mut buffer, &header);
        writes.push((chain[index], buffer));
    }
    writes
}

fn pack_name_table(state: &State) -> Vec<PackedBlock> {
    let mut packer = TablePacker::new(state.geometry.fs_block_size_bytes as usize);
    let mut entry = Vec::with_capacity(300);
    for (&inode_number, node) in &state.files {
        entry.clear();
        entry.extend_from_slice(&inode_number.to_le_bytes());
        entry.extend_from_slice(&(node.name.len() as u16).to_le_bytes());
        entry.extend_from_slice(node.name.as_bytes());
        packer.push(&entry);
    }
    packer.finish(1)
}

fn pack_inode_table(state: &State) -> Vec<PackedBlock> {
    let mut packer = TablePacker::new(state.geometry.fs_block_size_bytes as usize);
    let mut entry = Vec::with_capacity(
        inode_record_bytes(DIRECT_POINTER_COUNT as u64) + inode_record_header_bytes(u32::MAX),
    );
    for (&inode_number, node) in &state.files {
        let direct_count = node.pointers.len().min(DIRECT_POINTER_COUNT);
        entry.clear();
        encode_inode_record(
            &mut entry,
            inode_number,
            node.size_bytes,
            node.indirect_chain.first().copied().unwrap_or(0),
            node.modified_clock_ns,
            &node.attributes,
            (
                &node.pointers[..direct_count],
                &node.checksums[..direct_count],
            ),
        );
        packer.push(&entry);
    }
    packer.finish(1)
}

/// Free list and map sizes, to a fixed point: allocating the checkpoint's own blocks
/// (tables, map, log region) can split at most one extent per allocated block; the map
/// lists the tables and the region.
fn size_free_list_and_map(
    state: &State,
    base_extents: u64,
    name_and_inode_blocks: u64,
    region_blocks: u64,
) -> (u64, u64) {
    let block_size = state.geometry.fs_block_size_bytes;
    let extents_per_block = fixed_entries_per_block(block_size, FREE_EXTENT_BYTES) as u64;
    let addresses_per_block = fixed_entries_per_block(block_size, 8) as u64;
    let mut free_list_blocks = base_extents.div_ceil(extents_per_block).max(1);
    loop {
        let tables = name_and_inode_blocks + free_list_blocks;
        let map_blocks = (tables + region_blocks)
            .div_ceil(addresses_per_block)
            .max(1);
        let bound = (base_extents + tables + map_blocks + region_blocks)
            .div_ceil(extents_per_block)
            .max(1);
        if bound <= free_list_blocks {
            return (free_list_blocks, map_blocks);
        }
        free_list_blocks = bound;
    }
}

fn pack_free_list(state: &State, extents: &[(u64, u64)], block_count: usize) -> Vec<PackedBlock> {
    let mut packer = TablePacker::new(state.geometry.fs_block_size_bytes as usize);
    let mut entry = [0u8; FREE_EXTENT_BYTES];
    for &(first_block, count) in extents {
        write_u64(&mut entry, 0, first_block);
        write_u64(&mut entry, 8, count);
        packer.push(&entry);
    }
    let blocks = packer.finish(block_count);
    assert_eq!(
        blocks.len(),
        block_count,
        "free list outgrew its reserved blocks"
    );
    blocks
}

/// The shared table (docs/format.md, "Shared table"): one 16-byte entry per extent of
/// consecutive blocks with one reference count; no block at all when nothing is shared.
fn pack_shared_table(state: &State, extents: &[(u64, u64, u32)]) -> Vec<PackedBlock> {
    let mut packer = TablePacker::new(state.geometry.fs_block_size_bytes as usize);
    let mut entry = [0u8; SHARED_EXTENT_BYTES];
    for &(first_block, block_count, reference_count) in extents {
        assert!(reference_count >= 2, "only shared blocks have entries");
        write_u64(&mut entry, 0, first_block);
        write_u32(&mut entry, 8, block_count as u32);
        write_u32(&mut entry, 12, reference_count);
        packer.push(&entry);
    }
    packer.finish(0)
}

fn seal_table_block(
    mut block: PackedBlock,
    kind: MetadataKind,
    sequence: u64,
    index: u64,
) -> IoBuf {
    let header = MetadataHeader {
        kind,
        commit_sequence: sequence,
        next_block: 0,
        entry_count: block.entry_count,
        payload_bytes: block.payload_bytes,
        owner: index,
    };
    seal_metadata_block(&mut block.buffer, &header);
    block.buffer
}

fn build_map_chain(
    state: &State,
    sequence: u64,
    table_addresses: &[u64],
    map_addresses: &[u64],
) -> Vec<(u64, IoBuf)> {
    let block_size = state.geometry.fs_block_size_bytes;
    let addresses_per_block = fixed_entries_per_block(block_size, 8);
    let mut chunks: Vec<&[u64]> = table_addresses.chunks(addresses_per_block).collect();
    chunks.resize(map_addresses.len(), &[]);
    assert_eq!(
        chunks.len(),
        map_addresses.len(),
        "map chain sized for its entries"
    );
    chunks
        .into_iter()
        .enumerate()
        .map(|(index, entries)| {
            let mut buffer = IoBuf::zeroed(block_size as usize);
            for (slot, &address) in entries.iter().enumerate() {
                write_u64(&mut buffer, METADATA_HEADER_BYTES + 8 * slot, address);
            }
            let header = MetadataHeader {
                kind: MetadataKind::Map,
                commit_sequence: sequence,
                next_block: map_addresses.get(index + 1).copied().unwrap_or(0),
                entry_count: entries.len() as u32,
                payload_bytes: 8 * entries.len() as u32,
                owner: index as u64,
            };
            seal_metadata_block(&mut buffer, &header);
            (map_addresses[index], buffer)
        })
        .collect()
}

/// Writes `super_block` into slot `slot` (FS block 0 or 1), the rest of the block zero.
pub fn write_super_block(
    device: &mut dyn BlockDevice,
    geometry: &Geometry,
    slot: u64,
    super_block: &SuperBlock,
) -> Result<(), flashpipe_device::DeviceError> {
    write_fs_blocks(
        device,
        geometry,
        vec![super_block_write(slot, super_block, geometry)],
    )
}

/// The block that puts `super_block` into FS block `slot` (slot 0 or 1, or a page of the
/// flash-aware layout's commit ring), the rest of the block zero.
fn super_block_write(slot: u64, super_block: &SuperBlock, geometry: &Geometry) -> (u64, IoBuf) {
    assert!(slot < geometry.fs_block_count);
    let mut buffer = IoBuf::zeroed(geometry.fs_block_size_bytes as usize);
    buffer[..SUPER_BLOCK_SIZE_BYTES].copy_from_slice(&super_block.encode());
    (slot, buffer)
}
