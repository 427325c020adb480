//! Writing file data copy-on-write: one write or a batch (independent runs planned
//! together), the block plan of a byte range (targets chosen, old edge blocks read), and
//! the device requests that carry it.

use std::collections::HashMap;

use flashpipe_device::{BlockDevice, DeviceError, IoBuf, Operation};

use super::read::{group_runs, verify_file_blocks};
use super::{check_size_limit, check_usable, install_pointers, live_file, no_space, totals_with};
use crate::error::FileIoError;
use crate::io::{read_fs_blocks, run_operations};
use crate::layout::data_block_checksum;
use crate::state::{MetadataTotals, State};

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
pub(super) fn end_of_independent_run(
    block_bytes: u64,
    writes: &[BatchWrite<'_>],
    start: usize,
) -> usize {
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
pub(super) struct PlannedWrite {
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

pub(super) fn write_independent_run(
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
                plan.blocks.abandon(state, &error);
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

impl BlockPlan {
    /// Undoes a write whose device requests failed: the blocks it allocated go back
    /// to the allocator and no pointer is installed. A failed request may have left
    /// any bytes in its target, so when the write overwrote blocks in place (blocks
    /// written since the last commit, whose pointers and checksums the next commit
    /// would record), their contents are no longer what those checksums describe:
    /// the mount becomes unusable, so the next flush fails instead of committing
    /// pointers to damaged blocks (the last commit on disk stays intact).
    pub(crate) fn abandon(self, state: &mut State, error: &DeviceError) {
        let overwrote_in_place = self
            .targets
            .iter()
            .any(|target| !self.allocated.contains(target));
        for block in self.allocated {
            state.allocator.release(block);
        }
        if overwrote_in_place && state.unusable_reason.is_none() {
            state.unusable_reason = Some(format!(
                "a write over blocks written since the last flush failed ({error}), so their contents are unknown"
            ));
        }
    }
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
    let node = live_file(state, inode_number)?;
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
pub(super) fn choose_targets(
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
