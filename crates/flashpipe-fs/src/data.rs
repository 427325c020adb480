//! File data: reads at any byte offset (straight into the caller's buffer when aligned),
//! copy-on-write writes (overwrite, append, sparse holes), truncate, and the block map
//! the engine uses to issue its own device reads.
//!
//! Large transfers become many requests in flight at once (`run_operations`), each at
//! most [`crate::io::MAX_REQUEST_BYTES`], grouped by physically contiguous blocks.

use std::collections::HashMap;

use flashpipe_device::{BlockDevice, Completion, DeviceError, IoBuf, Operation, SplitBuffer};

use crate::error::FileIoError;
use crate::io::{read_fs_blocks, run_operations};
use crate::layout::data_block_checksum;
use crate::state::{MetadataTotals, State};

/// A stretch of a file's blocks that is contiguous on the device, or a hole, with the
/// checksums a reader must verify once the blocks are in memory ([`MappedRun::verify`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedRun {
    /// Index of the run's first FS block within the file.
    pub first_file_block: u64,
    /// FS blocks in the run.
    pub block_count: u64,
    /// First device block of the run, or `None` for a hole (reads as zeros).
    pub first_device_block: Option<u64>,
    /// First FS block of the run, or `None` for a hole.
    pub first_fs_block: Option<u64>,
    /// The CRC32C of each FS block of the run (`block_count` of them): `None` for holes and
    /// for blocks inherited from a version-1 image (not verified).
    pub checksums: Vec<Option<u32>>,
}

impl MappedRun {
    /// Checks `run_bytes`, the run's `block_count` whole FS blocks of `block_bytes` bytes
    /// as read from the device, against the run's checksums; the first damaged block is an
    /// error naming `file_name`, its offset in the file and its FS block.
    pub fn verify(
        &self,
        file_name: &str,
        block_bytes: u64,
        run_bytes: &[u8],
    ) -> Result<(), FileIoError> {
        assert_eq!(
            run_bytes.len() as u64,
            self.block_count * block_bytes,
            "a run is verified whole"
        );
        let Some(first_fs_block) = self.first_fs_block else {
            return Ok(());
        };
        for (position, block) in run_bytes.chunks_exact(block_bytes as usize).enumerate() {
            let position = position as u64;
            verify_data_block(
                file_name,
                (self.first_file_block + position) * block_bytes,
                first_fs_block + position,
                self.checksums[position as usize],
                block,
            )?;
        }
        Ok(())
    }
}

/// Checks one data block read from the device against the checksum its pointer carries
/// (`None`: nothing to check).
pub fn verify_data_block(
    file_name: &str,
    offset_bytes: u64,
    fs_block: u64,
    stored_checksum: Option<u32>,
    block: &[u8],
) -> Result<(), FileIoError> {
    let Some(stored_checksum) = stored_checksum else {
        return Ok(());
    };
    let computed_checksum = data_block_checksum(block);
    if computed_checksum != stored_checksum {
        return Err(FileIoError::DataChecksumMismatch {
            file_name: file_name.to_string(),
            offset_bytes,
            fs_block,
            stored_checksum,
            computed_checksum,
        });
    }
    Ok(())
}

/// Verifies the whole FS blocks in `bytes`, a file's blocks from file block `first_index`
/// on as read from the device, against the checksums beside their pointers.
fn verify_file_blocks(
    state: &State,
    inode_number: u64,
    first_index: u64,
    bytes: &[u8],
) -> Result<(), FileIoError> {
    let block_bytes = state.geometry.block_bytes();
    let node = &state.files[&inode_number];
    for (position, block) in bytes.chunks_exact(block_bytes as usize).enumerate() {
        let index = first_index + position as u64;
        verify_data_block(
            &node.name,
            index * block_bytes,
            node.pointers[index as usize],
            node.checksums[index as usize],
            block,
        )?;
    }
    Ok(())
}

/// Splits the pointers of file blocks `first..end` into runs of consecutive physical
/// blocks (or holes), each at most `max_blocks` long and never crossing `split_at`.
pub(crate) fn group_runs(
    pointers: &[u64],
    first: u64,
    end: u64,
    max_blocks: u64,
    split_at: u64,
) -> Vec<(u64, u64, u64)> {
    let mut runs: Vec<(u64, u64, u64)> = Vec::new();
    for index in first..end {
        let pointer = pointers.get(index as usize).copied().unwrap_or(0);
        if let Some(last) = runs.last_mut() {
            let continues = if last.2 == 0 {
                pointer == 0
            } else {
                pointer == last.2 + last.1
            };
            if continues && last.1 < max_blocks && index != split_at {
                last.1 += 1;
                continue;
            }
        }
        runs.push((index, 1, pointer));
    }
    runs
}

pub(crate) fn check_usable(state: &State) -> Result<(), FileIoError> {
    match &state.unusable_reason {
        Some(reason) => Err(FileIoError::Unusable {
            reason: reason.clone(),
        }),
        None => Ok(()),
    }
}

/// Checks that bytes `offset..offset + length` lie inside the file.
pub fn check_read_range(
    state: &State,
    inode_number: u64,
    offset_bytes: u64,
    length_bytes: u64,
) -> Result<(), FileIoError> {
    let node = state
        .files
        .get(&inode_number)
        .ok_or(FileIoError::StaleHandle {
            file_id: inode_number,
        })?;
    match offset_bytes.checked_add(length_bytes) {
        Some(end) if end <= node.size_bytes => Ok(()),
        _ => Err(FileIoError::ReadPastEnd {
            offset_bytes,
            length_bytes,
            size_bytes: node.size_bytes,
        }),
    }
}

/// The device runs behind bytes `offset..offset + length` of a file.
pub fn block_map(
    state: &State,
    inode_number: u64,
    offset_bytes: u64,
    length_bytes: u64,
) -> Result<Vec<MappedRun>, FileIoError> {
    check_read_range(state, inode_number, offset_bytes, length_bytes)?;
    if length_bytes == 0 {
        return Ok(Vec::new());
    }
    let geometry = state.geometry;
    let block_bytes = geometry.block_bytes();
    let node = &state.files[&inode_number];
    let first = offset_bytes / block_bytes;
    let end = (offset_bytes + length_bytes).div_ceil(block_bytes);
    let runs = group_runs(&node.pointers, first, end, u64::MAX, u64::MAX);
    Ok(runs
        .into_iter()
        .map(|(index, count, pointer)| MappedRun {
            first_file_block: index,
            block_count: count,
            first_device_block: (pointer != 0).then(|| geometry.device_block(pointer)),
            first_fs_block: (pointer != 0).then_some(pointer),
            checksums: node.checksums[index as usize..(index + count) as usize].to_vec(),
        })
        .collect())
}

/// Reads `buffer.len()` bytes at `offset_bytes` into `buffer`. When `offset_bytes` is a
/// multiple of the FS block size, whole blocks go straight from the device into
/// `buffer`; the rest goes through bounce buffers. Every block read is verified against
/// its checksum; a damaged block fails the read with
/// [`FileIoError::DataChecksumMismatch`] (the buffer's content is then unspecified).
pub fn read_into(
    state: &State,
    device: &mut dyn BlockDevice,
    inode_number: u64,
    offset_bytes: u64,
    buffer: &mut IoBuf,
) -> Result<(), FileIoError> {
    check_usable(state)?;
    let length_bytes = buffer.len() as u64;
    check_read_range(state, inode_number, offset_bytes, length_bytes)?;
    if length_bytes == 0 {
        return Ok(());
    }
    let geometry = state.geometry;
    let block_bytes = geometry.block_bytes();
    let node = &state.files[&inode_number];
    let end_bytes = offset_bytes + length_bytes;
    let first = offset_bytes / block_bytes;
    let end = end_bytes.div_ceil(block_bytes);
    let direct_end = if offset_bytes % block_bytes == 0 {
        first + length_bytes / block_bytes
    } else {
        first
    };
    let runs = group_runs(
        &node.pointers,
        first,
        end,
        geometry.max_blocks_per_request(),
        direct_end,
    );
    let overlap = |index: u64, count: u64| {
        let start = (index * block_bytes).max(offset_bytes);
        let stop = ((index + count) * block_bytes).min(end_bytes);
        (start, stop)
    };
    for &(index, count, pointer) in &runs {
        if pointer == 0 {
            let (start, stop) = overlap(index, count);
            buffer[(start - offset_bytes) as usize..(stop - offset_bytes) as usize].fill(0);
        }
    }
    let mut direct = SplitBuffer::new(std::mem::replace(buffer, IoBuf::empty()));
    let mut operations = Vec::new();
    let mut bounced = Vec::new();
    let mut bounce_positions = Vec::new();
    for &(index, count, pointer) in runs.iter().filter(|run| run.2 != 0) {
        let run_bytes = (count * block_bytes) as usize;
        let destination = if index + count <= direct_end {
            // The run ends at or before direct_end, inside the requested range; runs
            // are disjoint, so each is a fresh window of the caller's buffer.
            let position = (index * block_bytes - offset_bytes) as usize;
            direct
                .view(position, run_bytes)
                .unwrap_or_else(|refused| panic!("a direct run is a fresh window: {refused}"))
        } else {
            bounced.push((index, count));
            bounce_positions.push(operations.len());
            IoBuf::zeroed(run_bytes)
        };
        operations.push(Operation::Read {
            first_block: geometry.device_block(pointer),
            buffer: destination,
        });
    }
    let completions = run_operations(device, operations);
    let bounce_buffers = take_back_direct_runs(completions, &bounce_positions, direct, buffer)?;
    for &(index, count, pointer) in &runs {
        if pointer != 0 && index + count <= direct_end {
            let position = (index * block_bytes - offset_bytes) as usize;
            let run_bytes = &buffer[position..position + (count * block_bytes) as usize];
            verify_file_blocks(state, inode_number, index, run_bytes)?;
        }
    }
    for ((index, count), bounce) in bounced.into_iter().zip(bounce_buffers) {
        verify_file_blocks(state, inode_number, index, &bounce)?;
        let (start, stop) = overlap(index, count);
        let source_start = (start - index * block_bytes) as usize;
        let length = (stop - start) as usize;
        buffer[(start - offset_bytes) as usize..(stop - offset_bytes) as usize]
            .copy_from_slice(&bounce[source_start..source_start + length]);
    }
    Ok(())
}

/// Takes the bounce buffers (the completions at `bounce_positions`) out of `completions`,
/// drops the views of the caller's buffer that came back with the rest, and puts the
/// caller's buffer back in `buffer`. `run_operations` reaps every request even when one
/// fails, so every view is back; if a device still held one (its drain failed), the caller
/// gets a zeroed buffer of the same length in its place and its own buffer is freed (or
/// returns to its pool) when the device lets go of the view.
fn take_back_direct_runs(
    completions: Result<Vec<Completion>, DeviceError>,
    bounce_positions: &[usize],
    direct: SplitBuffer,
    buffer: &mut IoBuf,
) -> Result<Vec<IoBuf>, DeviceError> {
    let bounce_buffers = completions.map(|mut completions| {
        bounce_positions
            .iter()
            .map(|&position| {
                completions[position]
                    .buffer
                    .take()
                    .expect("a read hands its buffer back")
            })
            .collect::<Vec<IoBuf>>()
    });
    *buffer = direct
        .try_into_parent()
        .unwrap_or_else(|direct| IoBuf::zeroed(direct.len()));
    bounce_buffers
}

/// `base` after a file's pointer count changes from `old_count` to `new_count`.
fn totals_with(
    state: &State,
    base: MetadataTotals,
    name_bytes: usize,
    old_count: u64,
    new_count: u64,
) -> MetadataTotals {
    let mut totals = base;
    totals.account(&state.geometry, name_bytes, old_count, false);
    totals.account(&state.geometry, name_bytes, new_count, true);
    totals
}

fn check_size_limit(state: &State, requested_size_bytes: u64) -> Result<(), FileIoError> {
    let limit_size_bytes = state.geometry.capacity_bytes();
    if requested_size_bytes > limit_size_bytes {
        return Err(FileIoError::FileTooLarge {
            requested_size_bytes,
            limit_size_bytes,
        });
    }
    Ok(())
}

fn no_space((needed_blocks, free_blocks): (u64, u64)) -> FileIoError {
    FileIoError::NoSpace {
        needed_blocks,
        free_blocks,
    }
}

/// Writes `data` at `offset_bytes`: blocks the last commit holds are written anew
/// (copy-on-write), blocks allocated since are overwritten in place; a gap past the end
/// becomes a hole.
pub fn write(
    state: &mut State,
    device: &mut dyn BlockDevice,
    inode_number: u64,
    offset_bytes: u64,
    data: &[u8],
) -> Result<(), FileIoError> {
    let mut results = write_batch(state, device, &[(inode_number, offset_bytes, data)]);
    results.pop().expect("one write gives one result")
}

/// One write of a batch: (inode number, offset, bytes).
pub type BatchWrite<'a> = (u64, u64, &'a [u8]);

/// Carries out several writes with all their device requests in flight together, and
/// returns one result per write, in order. Writes are split into runs in which no two
/// touch the same FS block of one file; each run is planned (space checked, targets
/// chosen, partial edge blocks read), written in one batch, then installed. A device
/// failure fails every write of its run and installs none of them.
pub fn write_batch(
    state: &mut State,
    device: &mut dyn BlockDevice,
    writes: &[BatchWrite<'_>],
) -> Vec<Result<(), FileIoError>> {
    if check_usable(state).is_err() {
        return writes.iter().map(|_| check_usable(state)).collect();
    }
    let mut results = Vec::with_capacity(writes.len());
    let mut start = 0;
    while start < writes.len() {
        let end = end_of_independent_run(state.geometry.block_bytes(), writes, start);
        results.extend(write_independent_run(state, device, &writes[start..end]));
        start = end;
    }
    results
}

/// The end of the longest run from `start` in which no two writes touch the same FS
/// block of one file.
fn end_of_independent_run(block_bytes: u64, writes: &[BatchWrite<'_>], start: usize) -> usize {
    let block_range = |&(_, offset_bytes, data): &BatchWrite<'_>| {
        let end_bytes = offset_bytes.saturating_add(data.len() as u64);
        (offset_bytes / block_bytes, end_bytes.div_ceil(block_bytes))
    };
    let mut end = start + 1;
    while end < writes.len() {
        let (first, stop) = block_range(&writes[end]);
        let overlaps = writes[start..end].iter().any(|earlier| {
            let (earlier_first, earlier_stop) = block_range(earlier);
            earlier.0 == writes[end].0 && first < earlier_stop && earlier_first < stop
        });
        if overlaps {
            break;
        }
        end += 1;
    }
    end
}

/// A write whose targets are chosen and whose device requests are built.
struct PlannedWrite {
    blocks: BlockPlan,
    checksums: Vec<Option<u32>>,
    operations: Vec<Operation>,
}

/// What the writes planned so far (in a run, or in flight) will have changed once
/// installed: the metadata totals and each file's pointer count, so that the space
/// check of the next write counts them.
#[derive(Debug, Clone)]
pub(crate) struct RunAccounting {
    totals: MetadataTotals,
    pointer_counts: HashMap<u64, u64>,
}

impl RunAccounting {
    /// Nothing planned yet on top of `state`.
    pub(crate) fn starting_from(state: &State) -> RunAccounting {
        RunAccounting {
            totals: state.totals,
            pointer_counts: HashMap::new(),
        }
    }
}

fn write_independent_run(
    state: &mut State,
    device: &mut dyn BlockDevice,
    writes: &[BatchWrite<'_>],
) -> Vec<Result<(), FileIoError>> {
    let mut accounting = RunAccounting::starting_from(state);
    let mut results: Vec<Result<(), FileIoError>> = Vec::with_capacity(writes.len());
    let mut planned: Vec<(usize, PlannedWrite)> = Vec::new();
    for (index, &(inode_number, offset_bytes, data)) in writes.iter().enumerate() {
        let plan = plan_blocks(
            state,
            device,
            &mut accounting,
            inode_number,
            offset_bytes,
            data,
        )
        .map(|blocks| {
            blocks.map(|blocks| {
                let (operations, checksums) = build_write_operations(
                    state,
                    &blocks.targets,
                    blocks.first,
                    offset_bytes,
                    data,
                    &blocks.old_edges,
                );
                PlannedWrite {
                    blocks,
                    checksums,
                    operations,
                }
            })
        });
        match plan {
            Ok(Some(plan)) => planned.push((index, plan)),
            Ok(None) => {}
            Err(error) => {
                results.push(Err(error));
                continue;
            }
        }
        results.push(Ok(()));
    }
    let operations: Vec<Operation> = planned
        .iter_mut()
        .flat_map(|(_, plan)| std::mem::take(&mut plan.operations))
        .collect();
    match run_operations(device, operations) {
        Ok(completions) => {
            for buffer in completions
                .into_iter()
                .filter_map(|completion| completion.buffer)
            {
                state.buffers.give_back(buffer);
            }
            for (_, plan) in &planned {
                install_pointers(
                    state,
                    plan.blocks.inode_number,
                    plan.blocks.first,
                    &plan.blocks.targets,
                    &plan.checksums,
                    plan.blocks.end_bytes,
                );
            }
        }
        Err(error) => {
            for (index, plan) in planned {
                for block in plan.blocks.allocated {
                    state.allocator.release(block);
                }
                results[index] = Err(error.clone().into());
            }
        }
    }
    results
}

/// Where one write goes: file blocks `first..first + targets.len()` to `targets`
/// (`allocated` are the newly allocated ones), the old contents of its partial edge
/// blocks that already had data, and the size it grows the file to.
#[derive(Debug)]
pub(crate) struct BlockPlan {
    pub(crate) inode_number: u64,
    pub(crate) first: u64,
    pub(crate) targets: Vec<u64>,
    pub(crate) allocated: Vec<u64>,
    pub(crate) end_bytes: u64,
    pub(crate) old_edges: HashMap<u64, IoBuf>,
}

/// True when a write of `length_bytes` at `offset_bytes` into `inode_number` must read
/// old blocks first (a partial first or last block that already holds data): planning it
/// then needs the device with nothing else in flight.
pub(crate) fn needs_old_blocks(
    state: &State,
    inode_number: u64,
    offset_bytes: u64,
    length_bytes: u64,
) -> bool {
    let Some(node) = state.files.get(&inode_number) else {
        return false;
    };
    if length_bytes == 0 {
        return false;
    }
    let block_bytes = state.geometry.block_bytes();
    let end_bytes = offset_bytes.saturating_add(length_bytes);
    let pointer_at = |index: u64| node.pointers.get(index as usize).copied().unwrap_or(0);
    let first = offset_bytes / block_bytes;
    let last = (end_bytes - 1) / block_bytes;
    let first_partial = offset_bytes % block_bytes != 0 || end_bytes < (first + 1) * block_bytes;
    let last_partial = end_bytes % block_bytes != 0;
    (first_partial && pointer_at(first) != 0) || (last_partial && pointer_at(last) != 0)
}

/// Checks space, reads partial edge blocks and chooses targets for one write; `None` for
/// an empty write. Allocates the new blocks and counts the write in `accounting`.
pub(crate) fn plan_blocks(
    state: &mut State,
    device: &mut dyn BlockDevice,
    accounting: &mut RunAccounting,
    inode_number: u64,
    offset_bytes: u64,
    data: &[u8],
) -> Result<Option<BlockPlan>, FileIoError> {
    let node = state
        .files
        .get(&inode_number)
        .ok_or(FileIoError::StaleHandle {
            file_id: inode_number,
        })?;
    if data.is_empty() {
        return Ok(None);
    }
    let end_bytes = offset_bytes.saturating_add(data.len() as u64);
    check_size_limit(state, end_bytes)?;
    let block_bytes = state.geometry.block_bytes();
    let first = offset_bytes / block_bytes;
    let end = end_bytes.div_ceil(block_bytes);
    let old_count = accounting
        .pointer_counts
        .get(&inode_number)
        .copied()
        .unwrap_or(node.pointers.len() as u64);
    let new_count = old_count.max(end);
    let pointer_at = |index: u64| node.pointers.get(index as usize).copied().unwrap_or(0);
    let new_block_count = (first..end)
        .filter(|&index| pointer_at(index) == 0 || !state.writable_in_place(pointer_at(index)))
        .count() as u64;
    let totals_after = totals_with(
        state,
        accounting.totals,
        node.name.len(),
        old_count,
        new_count,
    );
    state
        .check_space(new_block_count, &totals_after)
        .map_err(no_space)?;
    let is_partial =
        |index: u64| offset_bytes > index * block_bytes || end_bytes < (index + 1) * block_bytes;
    let mut edges: Vec<u64> = vec![first, end - 1];
    edges.dedup();
    edges.retain(|&index| is_partial(index) && pointer_at(index) != 0);
    let edge_pointers: Vec<u64> = edges.iter().map(|&index| pointer_at(index)).collect();
    let old_edges: HashMap<u64, IoBuf> = if edge_pointers.is_empty() {
        HashMap::new()
    } else {
        edges
            .into_iter()
            .zip(read_fs_blocks(device, &state.geometry, &edge_pointers)?)
            .collect()
    };
    for (&index, block) in &old_edges {
        verify_file_blocks(state, inode_number, index, block)?;
    }
    let (targets, allocated) = choose_targets(state, inode_number, first, end);
    accounting.totals = totals_after;
    accounting.pointer_counts.insert(inode_number, new_count);
    Ok(Some(BlockPlan {
        inode_number,
        first,
        targets,
        allocated,
        end_bytes,
        old_edges,
    }))
}

/// The block each of file blocks `first..end` is written to: the current one when it was
/// allocated since the last commit, else a newly allocated one. Returns the targets and
/// the newly allocated blocks.
fn choose_targets(
    state: &mut State,
    inode_number: u64,
    first: u64,
    end: u64,
) -> (Vec<u64>, Vec<u64>) {
    let pointers = &state.files[&inode_number].pointers;
    let current: Vec<u64> = (first..end)
        .map(|index| pointers.get(index as usize).copied().unwrap_or(0))
        .collect();
    let mut targets = Vec::with_capacity(current.len());
    let mut allocated = Vec::new();
    let mut position = 0;
    while position < current.len() {
        let pointer = current[position];
        if pointer != 0 && state.writable_in_place(pointer) {
            targets.push(pointer);
            position += 1;
            continue;
        }
        let stretch = current[position..]
            .iter()
            .take_while(|&&pointer| pointer == 0 || !state.writable_in_place(pointer))
            .count() as u64;
        let (start, count) = state
            .allocator
            .allocate_run(stretch)
            .expect("space was checked");
        for block in start..start + count {
            targets.push(block);
            allocated.push(block);
        }
        position += count as usize;
    }
    (targets, allocated)
}

/// The device writes of one write's blocks, and the checksum of each block written (in
/// `targets` order), computed on the buffers as they go to the device.
pub(crate) fn build_write_operations(
    state: &mut State,
    targets: &[u64],
    first: u64,
    offset_bytes: u64,
    data: &[u8],
    old_edges: &HashMap<u64, IoBuf>,
) -> (Vec<Operation>, Vec<Option<u32>>) {
    let geometry = state.geometry;
    let block_bytes = geometry.block_bytes();
    let end_bytes = offset_bytes + data.len() as u64;
    let runs = group_runs(
        targets,
        0,
        targets.len() as u64,
        geometry.max_blocks_per_request(),
        u64::MAX,
    );
    let mut checksums = Vec::with_capacity(targets.len());
    let operations = runs
        .into_iter()
        .map(|(position, count, target)| {
            let mut buffer = state.buffers.take((count * block_bytes) as usize);
            for block in 0..count {
                let index = first + position + block;
                let slice = &mut buffer
                    [(block * block_bytes) as usize..((block + 1) * block_bytes) as usize];
                let start = (index * block_bytes).max(offset_bytes);
                let stop = ((index + 1) * block_bytes).min(end_bytes);
                match old_edges.get(&index) {
                    Some(old) => slice.copy_from_slice(old),
                    None if stop - start < block_bytes => slice.fill(0),
                    None => {}
                }
                let within = (start - index * block_bytes) as usize;
                slice[within..within + (stop - start) as usize].copy_from_slice(
                    &data[(start - offset_bytes) as usize..(stop - offset_bytes) as usize],
                );
                checksums.push(Some(data_block_checksum(slice)));
            }
            Operation::Write {
                first_block: geometry.device_block(target),
                buffer,
            }
        })
        .collect();
    assert_eq!(
        checksums.len(),
        targets.len(),
        "one checksum per block written"
    );
    (operations, checksums)
}

/// Sets a file's size. Shrinking frees the blocks past the end and zeroes the tail of
/// the new last block (copy-on-write); growing adds a hole.
pub fn truncate(
    state: &mut State,
    device: &mut dyn BlockDevice,
    inode_number: u64,
    size_bytes: u64,
) -> Result<(), FileIoError> {
    check_usable(state)?;
    let node = state
        .files
        .get(&inode_number)
        .ok_or(FileIoError::StaleHandle {
            file_id: inode_number,
        })?;
    check_size_limit(state, size_bytes)?;
    if size_bytes == node.size_bytes {
        return Ok(());
    }
    let block_bytes = state.geometry.block_bytes();
    let old_count = node.pointers.len() as u64;
    let new_count = size_bytes.div_ceil(block_bytes);
    let totals_after = totals_with(state, state.totals, node.name.len(), old_count, new_count);
    if size_bytes < node.size_bytes {
        zero_tail_of_last_block(state, device, inode_number, size_bytes, &totals_after)?;
        let dropped: Vec<u64> = state.files[&inode_number].pointers[new_count as usize..]
            .iter()
            .copied()
            .filter(|&block| block != 0)
            .collect();
        for block in dropped {
            state.release_data_block(block);
        }
    } else {
        state.check_space(0, &totals_after).map_err(no_space)?;
    }
    state.resize_pointers(inode_number, new_count);
    let now = state.now_ns();
    let node = state.files.get_mut(&inode_number).expect("live file");
    node.size_bytes = size_bytes;
    node.modified_clock_ns = now;
    state.changed_since_commit = true;
    Ok(())
}

/// Keeps "bytes past the size in the last block are zero" when shrinking to a size
/// inside a block.
fn zero_tail_of_last_block(
    state: &mut State,
    device: &mut dyn BlockDevice,
    inode_number: u64,
    size_bytes: u64,
    totals_after: &MetadataTotals,
) -> Result<(), FileIoError> {
    let block_bytes = state.geometry.block_bytes();
    let keep_bytes = (size_bytes % block_bytes) as usize;
    let index = (size_bytes / block_bytes) as usize;
    let pointer = state.files[&inode_number]
        .pointers
        .get(index)
        .copied()
        .unwrap_or(0);
    if keep_bytes == 0 || pointer == 0 {
        return Ok(());
    }
    let fresh = state.writable_in_place(pointer);
    state
        .check_space(u64::from(!fresh), totals_after)
        .map_err(no_space)?;
    let mut block = read_fs_blocks(device, &state.geometry, &[pointer])?.remove(0);
    verify_file_blocks(state, inode_number, index as u64, &block)?;
    block[keep_bytes..].fill(0);
    let checksum = Some(data_block_checksum(&block));
    let target = if fresh {
        pointer
    } else {
        state
            .allocator
            .allocate_run(1)
            .expect("space was checked")
            .0
    };
    let operation = Operation::Write {
        first_block: state.geometry.device_block(target),
        buffer: block,
    };
    if let Err(error) = run_operations(device, vec![operation]) {
        if target != pointer {
            state.allocator.release(target);
        }
        return Err(error.into());
    }
    if target != pointer {
        state.release_data_block(pointer);
    }
    let node = state.files.get_mut(&inode_number).expect("live file");
    node.pointers[index] = target;
    node.checksums[index] = checksum;
    node.map_changed = true;
    Ok(())
}

/// Checks that `inode_number` is a live file and that `length_bytes` at `offset_bytes`
/// fit under the largest file size: what a copy's destination must pass.
pub fn check_write_target(
    state: &State,
    inode_number: u64,
    offset_bytes: u64,
    length_bytes: u64,
) -> Result<(), FileIoError> {
    check_usable(state)?;
    if !state.files.contains_key(&inode_number) {
        return Err(FileIoError::StaleHandle {
            file_id: inode_number,
        });
    }
    let end_bytes = offset_bytes
        .checked_add(length_bytes)
        .ok_or(FileIoError::FileTooLarge {
            requested_size_bytes: u64::MAX,
            limit_size_bytes: state.geometry.capacity_bytes(),
        })?;
    check_size_limit(state, end_bytes)
}

/// Checks that `new_block_count` blocks and a pointer table grown to `end_block` entries
/// fit, for a copy into `inode_number`.
pub fn check_copy_space(
    state: &State,
    inode_number: u64,
    end_block: u64,
    new_block_count: u64,
) -> Result<(), FileIoError> {
    let node = &state.files[&inode_number];
    let old_count = node.pointers.len() as u64;
    let new_count = old_count.max(end_block);
    let totals_after = totals_with(state, state.totals, node.name.len(), old_count, new_count);
    state
        .check_space(new_block_count, &totals_after)
        .map_err(no_space)
}

/// Points file blocks `first..first + targets.len()` of `inode_number` at `targets` (0: a
/// hole) with their data `checksums`, releasing the blocks they replace, and grows the
/// size to at least `end_bytes`.
pub fn install_pointers(
    state: &mut State,
    inode_number: u64,
    first: u64,
    targets: &[u64],
    checksums: &[Option<u32>],
    end_bytes: u64,
) {
    assert_eq!(targets.len(), checksums.len(), "one checksum per target");
    let end = first + targets.len() as u64;
    if end > state.files[&inode_number].pointers.len() as u64 {
        state.resize_pointers(inode_number, end);
    }
    let now = state.now_ns();
    let node = state.files.get_mut(&inode_number).expect("live file");
    let mut replaced = Vec::new();
    for (offset, (&target, &checksum)) in targets.iter().zip(checksums).enumerate() {
        assert!(
            target != 0 || checksum.is_none(),
            "a hole carries no checksum"
        );
        let slot = &mut node.pointers[first as usize + offset];
        if *slot != target {
            if *slot != 0 {
                replaced.push(*slot);
            }
            *slot = target;
        }
        node.checksums[first as usize + offset] = checksum;
    }
    node.size_bytes = node.size_bytes.max(end_bytes);
    node.modified_clock_ns = now;
    node.map_changed = true;
    for block in replaced {
        state.release_data_block(block);
    }
    state.changed_since_commit = true;
}
