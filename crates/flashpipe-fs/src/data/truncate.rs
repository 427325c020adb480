//! Truncating a file: blocks past the new end freed, the tail of the new last block
//! zeroed copy-on-write, or a hole added when it grows.

use flashpipe_device::{BlockDevice, Operation};

use super::read::verify_file_blocks;
use super::{check_size_limit, check_usable, no_space, totals_with};
use crate::error::FileIoError;
use crate::io::{read_fs_blocks, run_operations};
use crate::layout::data_block_checksum;
use crate::state::{MetadataTotals, State};

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
pub(super) fn zero_tail_of_last_block(
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
