//! Indirect chains in the flash-aware layout's log commits (format version 8,
//! docs/format.md, "Flash-aware layout"): a file whose block map changed gets new pages
//! only for the chain blocks whose pointer entries changed, not its whole chain (a large
//! file, InnoDB's redo log of 12,288 pages, has a chain of 19 pages). A block rewritten
//! after a block that is not leaves the earlier block's `next_block` naming the old page,
//! so the chain is *unlinked*: every log record that holds the file then lists its chain's
//! blocks (a chain entry), and the next checkpoint rewrites the chain whole and linked.
//!
//! What each chain holds on flash is remembered from when this mount wrote it
//! (`FlashChains`); a chain not written since mount, one whose length changes and one
//! longer than a chain entry can list ([`MAX_LOGGED_CHAIN_BLOCKS`]) are rewritten whole.

use flashpipe_device::IoBuf;

use super::{indirect_chain_blocks, rewrite_indirect_chains};
use crate::layout::{indirect_block_count, pointers_per_indirect_block, DIRECT_POINTER_COUNT};
use crate::metadata_log::{
    LOG_CHAIN_ENTRY_HEADER_BYTES, LOG_LARGEST_CHAIN_ENTRY_BYTES, MAX_LOGGED_CHAIN_BLOCKS,
};
use crate::state::{FileNode, State};

/// The new chains of `inode_numbers` (whose maps changed) for a log commit: only their
/// changed blocks in the flash-aware layout, whole chains otherwise.
pub(super) fn rewrite_changed_chains(
    state: &mut State,
    sequence: u64,
    inode_numbers: &[u64],
) -> Vec<(u64, IoBuf)> {
    if state.flash.is_none() {
        return rewrite_indirect_chains(state, sequence, inode_numbers);
    }
    let mut writes = Vec::new();
    for &inode_number in inode_numbers {
        match changed_blocks(state, inode_number) {
            Some(changed) => writes.extend(rewrite_blocks(state, sequence, inode_number, &changed)),
            None => writes.extend(rewrite_indirect_chains(state, sequence, &[inode_number])),
        }
    }
    writes
}

/// The files whose chains a checkpoint rewrites: those whose block maps changed and, in
/// the flash-aware layout, those whose chains are unlinked (forgetting the chains of
/// files that are gone).
pub(super) fn chains_to_rewrite(state: &mut State) -> Vec<u64> {
    let files = &state.files;
    state
        .flash_chains
        .retain(|inode_number| files.contains_key(&inode_number));
    state
        .files
        .iter()
        .filter(|(&inode_number, node)| {
            node.map_changed || state.flash_chains.is_unlinked(inode_number)
        })
        .map(|(&inode_number, _)| inode_number)
        .collect()
}

/// The chain entries of a log record holding the files `touched`: the unlinked chains.
pub(super) fn unlinked_chains(state: &State, touched: &[u64]) -> Vec<(u64, Vec<u64>)> {
    touched
        .iter()
        .filter(|&&inode_number| state.flash_chains.is_unlinked(inode_number))
        .filter_map(|&inode_number| {
            let node = state.files.get(&inode_number)?;
            Some((inode_number, node.indirect_chain.clone()))
        })
        .collect()
}

/// Bytes a chain entry for a chain of `chain_blocks` blocks may add to a log record (0
/// outside the flash-aware layout and for chains too long to list).
pub(super) fn chain_entry_bound(state: &State, chain_blocks: u64) -> u64 {
    let listed = state.flash.is_some() && chain_blocks as usize <= MAX_LOGGED_CHAIN_BLOCKS;
    if listed {
        (LOG_CHAIN_ENTRY_HEADER_BYTES + 8 * chain_blocks as usize) as u64
    } else {
        0
    }
}

/// The largest chain entry a log record may hold (0 outside the flash-aware layout).
pub(super) fn largest_chain_entry(state: &State) -> usize {
    match state.flash {
        Some(_) => LOG_LARGEST_CHAIN_ENTRY_BYTES,
        None => 0,
    }
}

/// Remembers what the chain of `inode_number` holds on flash after a whole rewrite
/// (linked). Nothing outside the flash-aware layout.
pub(super) fn note_whole_chain(state: &mut State, inode_number: u64) {
    if state.flash.is_none() {
        return;
    }
    let entries = entries_beyond_direct(&state.files[&inode_number]);
    state.flash_chains.note_written(inode_number, entries, true);
}

/// The pointer entries a file's chain holds: its pointers beyond the direct ones.
fn entries_beyond_direct(node: &FileNode) -> Vec<(u64, Option<u32>)> {
    let pointers = node.pointers.get(DIRECT_POINTER_COUNT..).unwrap_or(&[]);
    let checksums = node.checksums.get(DIRECT_POINTER_COUNT..).unwrap_or(&[]);
    pointers
        .iter()
        .copied()
        .zip(checksums.iter().copied())
        .collect()
}

/// The chain positions whose entries differ from what the flash holds, or `None` when the
/// chain must be rewritten whole.
fn changed_blocks(state: &State, inode_number: u64) -> Option<Vec<usize>> {
    let node = &state.files[&inode_number];
    let block_size = state.geometry.fs_block_size_bytes;
    let length = node.indirect_chain.len();
    let new_length = indirect_block_count(block_size, node.pointers.len() as u64) as usize;
    if length == 0 || length != new_length || length > MAX_LOGGED_CHAIN_BLOCKS {
        return None;
    }
    let written = state.flash_chains.written(inode_number)?;
    let now = entries_beyond_direct(node);
    if written.len() != now.len() {
        return None;
    }
    let per_block = pointers_per_indirect_block(block_size);
    let changed = now
        .chunks(per_block)
        .zip(written.chunks(per_block))
        .enumerate()
        .filter(|(_, (now, written))| now != written)
        .map(|(position, _)| position)
        .collect();
    Some(changed)
}

/// Rewrites the chain blocks at `changed` positions of `inode_number`'s chain into fresh
/// pages (the old ones released); notes whether the chain stays linked.
fn rewrite_blocks(
    state: &mut State,
    sequence: u64,
    inode_number: u64,
    changed: &[usize],
) -> Vec<(u64, IoBuf)> {
    let geometry = state.geometry;
    let per_block = pointers_per_indirect_block(geometry.fs_block_size_bytes);
    let runs = state
        .allocator
        .allocate(changed.len() as u64)
        .expect("the log rule checked room for every changed chain");
    let fresh: Vec<u64> = runs
        .into_iter()
        .flat_map(|(first, count)| first..first + count)
        .collect();
    let mut chain = state.files[&inode_number].indirect_chain.clone();
    for (&position, &page) in changed.iter().zip(&fresh) {
        state.allocator.release(chain[position]);
        chain[position] = page;
    }
    let node = state.files.get_mut(&inode_number).expect("a live file");
    node.indirect_chain = chain.clone();
    let blocks = indirect_chain_blocks(&geometry, per_block, sequence, inode_number, node, &chain);
    let writes = blocks
        .into_iter()
        .enumerate()
        .filter(|(position, _)| changed.contains(position))
        .map(|(_, write)| write)
        .collect();
    let stays_linked = !state.flash_chains.is_unlinked(inode_number)
        && changed
            .iter()
            .all(|&position| position == 0 || changed.contains(&(position - 1)));
    let entries = entries_beyond_direct(&state.files[&inode_number]);
    state
        .flash_chains
        .note_written(inode_number, entries, stays_linked);
    writes
}
