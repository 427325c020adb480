//! File data: reads at any byte offset (straight into the caller's buffer when aligned),
//! copy-on-write writes (overwrite, append, sparse holes), truncate, and the block map
//! the engine uses to issue its own device reads.
//!
//! Large transfers become many requests in flight at once (`run_operations`), each at
//! most [`crate::io::MAX_REQUEST_BYTES`], grouped by physically contiguous blocks.

mod read;
mod truncate;
mod write;

pub(crate) use read::group_runs;
pub use read::{block_map, check_read_range, read_into, verify_data_block, MappedRun};
pub use truncate::truncate;
pub(crate) use write::{
    build_write_operations, needs_old_blocks, plan_blocks, BlockPlan, RunAccounting,
};
pub use write::{write, write_batch, BatchWrite};

use crate::error::FileIoError;
use crate::state::{FileNode, MetadataTotals, State};

/// Refuses when a failed flush left the file system unusable.
pub(crate) fn check_usable(state: &State) -> Result<(), FileIoError> {
    match &state.unusable_reason {
        Some(reason) => Err(FileIoError::Unusable {
            reason: reason.clone(),
        }),
        None => Ok(()),
    }
}

/// The live file with inode `inode_number`, or a stale-handle error naming it.
fn live_file(state: &State, inode_number: u64) -> Result<&FileNode, FileIoError> {
    state
        .files
        .get(&inode_number)
        .ok_or(FileIoError::StaleHandle {
            file_id: inode_number,
        })
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

/// Checks that `inode_number` is a live file and that `length_bytes` at `offset_bytes`
/// fit under the largest file size: what a copy's destination must pass.
pub fn check_write_target(
    state: &State,
    inode_number: u64,
    offset_bytes: u64,
    length_bytes: u64,
) -> Result<(), FileIoError> {
    check_usable(state)?;
    live_file(state, inode_number)?;
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
