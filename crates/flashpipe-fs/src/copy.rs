//! Copying file ranges by reference (the memory-copy thesis, seed 002, ch. 3): whole
//! blocks of the destination come to refer to the source's data without moving it;
//! partial blocks at unaligned ends are copied by bytes (the thesis's head/tail rule).
//!
//! Two ways to refer to the source's data:
//! - [`CopyMethod::Share`] (format version 5): the destination's pointers name the
//!   source's own FS blocks and their reference counts rise (`shared.rs`); nothing is
//!   asked of the device, so it works on every store, and the shared data is stored and
//!   counted once. A later write to a shared block goes copy-on-write to a new block.
//! - [`CopyMethod::ReferenceOrFail`] and [`CopyMethod::ReferenceOrBytes`]: the device's
//!   [`Operation::CopyByReference`] (the FTL remaps pages, the flash copy experiment):
//!   every destination block copied by reference gets a newly allocated FS block, and the
//!   device makes that block read as the source block does.
//!
//! The source's blocks and pointers are taken before anything changes, so overlapping
//! ranges of one file behave as memmove. A copy whose offsets differ modulo the block
//! size cannot refer to blocks: sharing then copies bytes; a device remap, or a device
//! that cannot remap, lets the caller choose between an error
//! ([`CopyMethod::ReferenceOrFail`]) and a byte copy ([`CopyMethod::ReferenceOrBytes`]);
//! [`CopyMethod::Bytes`] always moves bytes (the baseline the copy experiment compares
//! with).
//!
//! Tail rule: when the copied range ends at the source's end and at or past the
//! destination's end, the source's last partial block is referred to too, since the bytes
//! past a file's size in its last block are zero on both sides (a format invariant).

use flashpipe_device::{BlockDevice, DeviceError, DeviceErrorKind, Operation};

pub use flashpipe_api::{CopyMethod, CopyReport};

use crate::data;
use crate::error::{CopyError, FileIoError};
use crate::state::State;

/// Bytes per read-then-write step of a byte copy.
const BYTE_COPY_CHUNK_BYTES: u64 = 8 << 20;

/// One copy request, in bytes.
#[derive(Debug, Clone, Copy)]
pub struct CopyRange {
    /// Source file (inode number).
    pub source_inode: u64,
    /// First source byte.
    pub source_offset_bytes: u64,
    /// Destination file (inode number).
    pub destination_inode: u64,
    /// First destination byte.
    pub destination_offset_bytes: u64,
    /// Bytes to copy.
    pub length_bytes: u64,
}

/// The destination blocks copied by reference, `first..end`, and the byte ranges (in
/// destination offsets) left for the head and the tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ReferencePlan {
    first_block: u64,
    end_block: u64,
    head: (u64, u64),
    tail: (u64, u64),
}

/// Copies `range` with `method`.
pub fn copy_range(
    state: &mut State,
    device: &mut dyn BlockDevice,
    range: CopyRange,
    method: CopyMethod,
) -> Result<CopyReport, CopyError> {
    data::check_read_range(
        state,
        range.source_inode,
        range.source_offset_bytes,
        range.length_bytes,
    )?;
    data::check_write_target(
        state,
        range.destination_inode,
        range.destination_offset_bytes,
        range.length_bytes,
    )?;
    if range.length_bytes == 0 {
        return Ok(CopyReport::default());
    }
    if method == CopyMethod::Bytes {
        return copy_by_bytes(state, device, range);
    }
    if method == CopyMethod::Share {
        return share_blocks(state, device, range);
    }
    match reference_obstacle(state, device, range) {
        None => {}
        Some(reason) if method == CopyMethod::ReferenceOrFail => {
            return Err(CopyError::NotByReference { reason })
        }
        Some(_) => return copy_by_bytes(state, device, range),
    }
    match copy_by_reference(state, device, range) {
        Err(CopyError::NotByReference { .. }) if method == CopyMethod::ReferenceOrBytes => {
            copy_by_bytes(state, device, range)
        }
        result => result,
    }
}

/// Why `range` cannot be copied by reference, if it cannot.
pub fn reference_obstacle(
    state: &State,
    device: &dyn BlockDevice,
    range: CopyRange,
) -> Option<String> {
    let block_bytes = state.geometry.block_bytes();
    if !device.copies_by_reference() {
        return Some(format!(
            "device {} cannot remap blocks (only an FTL on flash can)",
            device.info().name
        ));
    }
    let source_phase = range.source_offset_bytes % block_bytes;
    let destination_phase = range.destination_offset_bytes % block_bytes;
    if source_phase != destination_phase {
        return Some(format!(
            "source offset {} and destination offset {} differ modulo the {block_bytes}-byte block",
            range.source_offset_bytes, range.destination_offset_bytes
        ));
    }
    None
}

/// Which destination blocks are remapped and which bytes are left for the edges.
fn plan_reference(state: &State, range: CopyRange) -> ReferencePlan {
    let block_bytes = state.geometry.block_bytes();
    let start = range.destination_offset_bytes;
    let end = start + range.length_bytes;
    let first_block = start.div_ceil(block_bytes);
    let mut end_block = end / block_bytes;
    let source_size = state.files[&range.source_inode].size_bytes;
    let destination_size = state.files[&range.destination_inode].size_bytes;
    let tail_is_past_both_ends = range.source_offset_bytes + range.length_bytes == source_size
        && end >= destination_size
        && end % block_bytes != 0
        && end_block >= first_block;
    if tail_is_past_both_ends {
        end_block += 1;
    }
    if first_block >= end_block {
        return ReferencePlan {
            first_block,
            end_block: first_block,
            head: (start, end),
            tail: (end, end),
        };
    }
    ReferencePlan {
        first_block,
        end_block,
        head: (start, (first_block * block_bytes).min(end)),
        tail: ((end_block * block_bytes).min(end), end),
    }
}

/// The source's block pointers and checksums under the destination blocks of `plan`.
fn source_blocks(
    state: &State,
    range: CopyRange,
    plan: &ReferencePlan,
) -> (Vec<u64>, Vec<Option<u32>>) {
    let block_bytes = state.geometry.block_bytes();
    (plan.first_block..plan.end_block)
        .map(|block| {
            let source_block = source_block_of(range, block_bytes, block);
            pointer_and_checksum_at(state, range.source_inode, source_block)
        })
        .unzip()
}

/// The source block index of destination block `destination_block` (same phase).
fn source_block_of(range: CopyRange, block_bytes: u64, destination_block: u64) -> u64 {
    let destination_start = destination_block * block_bytes;
    (range.source_offset_bytes + destination_start - range.destination_offset_bytes) / block_bytes
}

fn copy_by_reference(
    state: &mut State,
    device: &mut dyn BlockDevice,
    range: CopyRange,
) -> Result<CopyReport, CopyError> {
    let plan = plan_reference(state, range);
    let block_bytes = state.geometry.block_bytes();
    let edges = read_edges(state, device, range, &plan)?;
    let (source_pointers, source_checksums) = source_blocks(state, range, &plan);
    let new_block_count = source_pointers
        .iter()
        .filter(|&&pointer| pointer != 0)
        .count() as u64;
    data::check_copy_space(
        state,
        range.destination_inode,
        plan.end_block,
        new_block_count,
    )?;
    let modulus = alignment_modulus(state, &*device);
    let targets = allocate_targets(state, &source_pointers, modulus).ok_or_else(|| {
        CopyError::NotByReference {
            reason: format!(
                "no free blocks at the device's copy alignment ({} blocks)",
                device.copy_alignment_blocks()
            ),
        }
    })?;
    let operations = build_copy_operations(state, &source_pointers, &targets);
    if let Err(error) = crate::io::run_operations(device, operations) {
        release_targets(state, &targets);
        return Err(copy_device_error(error));
    }
    data::install_pointers(
        state,
        range.destination_inode,
        plan.first_block,
        &targets,
        &source_checksums,
        (plan.end_block * block_bytes).min(range.destination_offset_bytes + range.length_bytes),
    );
    write_edges(state, device, range, &plan, edges)
}

/// Copies `range` by sharing the source's whole blocks (their reference counts rise) and
/// the unaligned edges by bytes; everything by bytes when the offsets differ modulo the
/// block size.
fn share_blocks(
    state: &mut State,
    device: &mut dyn BlockDevice,
    range: CopyRange,
) -> Result<CopyReport, CopyError> {
    let block_bytes = state.geometry.block_bytes();
    if range.source_offset_bytes % block_bytes != range.destination_offset_bytes % block_bytes {
        return copy_by_bytes(state, device, range);
    }
    let plan = plan_reference(state, range);
    let edges = read_edges(state, device, range, &plan)?;
    let (source_pointers, source_checksums) = source_blocks(state, range, &plan);
    let newly_shared = source_pointers
        .iter()
        .filter(|&&pointer| pointer != 0 && !state.shared.is_shared(pointer))
        .count() as u64;
    let table_growth = state.shared_table_blocks(state.shared.shared_block_count() + newly_shared)
        - state.shared_table_blocks(state.shared.shared_block_count());
    let destination_end_block =
        (range.destination_offset_bytes + range.length_bytes).div_ceil(block_bytes);
    data::check_copy_space(
        state,
        range.destination_inode,
        destination_end_block,
        2 * table_growth + edges.len() as u64,
    )?;
    if plan.first_block < plan.end_block {
        install_shared_pointers(
            state,
            range.destination_inode,
            plan.first_block,
            &source_pointers,
            &source_checksums,
            (plan.end_block * block_bytes).min(range.destination_offset_bytes + range.length_bytes),
        );
    }
    write_edges(state, device, range, &plan, edges)
}

/// A device refusal of the copy (it cannot remap these blocks) becomes
/// [`CopyError::NotByReference`]; anything else is a device failure.
fn copy_device_error(error: DeviceError) -> CopyError {
    match error.kind {
        DeviceErrorKind::Unsupported { operation } => CopyError::NotByReference {
            reason: format!("device {} refused {operation}", error.device),
        },
        _ => CopyError::Io(FileIoError::Device(error)),
    }
}

/// A file's block pointer at `index` and its data checksum (a hole past the pointers:
/// `(0, None)`). A block copied by reference reads as its source does, so it takes the
/// source's checksum with the pointer.
fn pointer_and_checksum_at(state: &State, inode_number: u64, index: u64) -> (u64, Option<u32>) {
    let node = &state.files[&inode_number];
    match node.pointers.get(index as usize) {
        Some(&pointer) => (pointer, node.checksums[index as usize]),
        None => (0, None),
    }
}

/// Writes the edges read by [`read_edges`] into the destination by bytes, after the
/// planned whole blocks were installed; the report counts both.
fn write_edges(
    state: &mut State,
    device: &mut dyn BlockDevice,
    range: CopyRange,
    plan: &ReferencePlan,
    edges: Vec<(u64, Vec<u8>)>,
) -> Result<CopyReport, CopyError> {
    let mut report = CopyReport {
        blocks_by_reference: plan.end_block - plan.first_block,
        bytes_by_bytes: 0,
    };
    for (offset_bytes, bytes) in edges {
        data::write(state, device, range.destination_inode, offset_bytes, &bytes)?;
        report.bytes_by_bytes += bytes.len() as u64;
    }
    Ok(report)
}

/// Reads the head and tail bytes from the source before anything changes; returns
/// (destination offset, bytes) for each non-empty edge.
fn read_edges(
    state: &State,
    device: &mut dyn BlockDevice,
    range: CopyRange,
    plan: &ReferencePlan,
) -> Result<Vec<(u64, Vec<u8>)>, CopyError> {
    let mut edges = Vec::new();
    for (start, end) in [plan.head, plan.tail] {
        if start >= end {
            continue;
        }
        let source_offset = range.source_offset_bytes + (start - range.destination_offset_bytes);
        let mut buffer = flashpipe_device::IoBuf::zeroed((end - start) as usize);
        data::read_into(
            state,
            device,
            range.source_inode,
            source_offset,
            &mut buffer,
        )?;
        edges.push((start, buffer.to_vec()));
    }
    Ok(edges)
}

/// In FS blocks, the distance a copy's destination must keep from its source modulo which
/// (the device's copy alignment, e.g. a stripe's width, converted to FS blocks).
fn alignment_modulus(state: &State, device: &dyn BlockDevice) -> u64 {
    let alignment = device.copy_alignment_blocks().max(1);
    let per_fs_block = state.geometry.device_blocks_per_fs_block;
    alignment / greatest_common_divisor(alignment, per_fs_block)
}

fn greatest_common_divisor(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// A new FS block for every source block that holds data (0 for holes), in runs, each
/// target congruent to its source modulo `modulus` (so that a stripe keeps every block on
/// its member). `None` when the free space holds no such run: then nothing is allocated.
fn allocate_targets(state: &mut State, source_pointers: &[u64], modulus: u64) -> Option<Vec<u64>> {
    let mut targets = vec![0u64; source_pointers.len()];
    let mut position = 0;
    while position < source_pointers.len() {
        let source = source_pointers[position];
        if source == 0 {
            position += 1;
            continue;
        }
        let stretch = source_pointers[position..]
            .iter()
            .enumerate()
            .take_while(|&(offset, &pointer)| {
                pointer != 0 && (modulus == 1 || pointer == source + offset as u64)
            })
            .count() as u64;
        let run = if modulus == 1 {
            state.allocator.allocate_run(stretch)
        } else {
            state
                .allocator
                .allocate_run_congruent(stretch, source, modulus)
        };
        let Some((start, count)) = run else {
            release_targets(state, &targets);
            return None;
        };
        for (offset, target) in targets[position..position + count as usize]
            .iter_mut()
            .enumerate()
        {
            *target = start + offset as u64;
        }
        position += count as usize;
    }
    Some(targets)
}

fn release_targets(state: &mut State, targets: &[u64]) {
    for &target in targets.iter().filter(|&&target| target != 0) {
        state.allocator.release(target);
    }
}

/// One device copy per stretch where both the source and the target blocks are
/// consecutive.
fn build_copy_operations(
    state: &State,
    source_pointers: &[u64],
    targets: &[u64],
) -> Vec<Operation> {
    let geometry = state.geometry;
    let mut runs: Vec<(u64, u64, u64)> = Vec::new();
    for (&source, &target) in source_pointers.iter().zip(targets) {
        if source == 0 {
            continue;
        }
        match runs.last_mut() {
            Some(run) if run.0 + run.2 == source && run.1 + run.2 == target => run.2 += 1,
            _ => runs.push((source, target, 1)),
        }
    }
    runs.into_iter()
        .map(|(source, target, count)| Operation::CopyByReference {
            source_first_block: geometry.device_block(source),
            destination_first_block: geometry.device_block(target),
            block_count: count * geometry.device_blocks_per_fs_block,
        })
        .collect()
}

/// Reads and writes every byte, in chunks, in the direction that keeps an overlapping
/// copy within one file correct (memmove).
fn copy_by_bytes(
    state: &mut State,
    device: &mut dyn BlockDevice,
    range: CopyRange,
) -> Result<CopyReport, CopyError> {
    let chunk_count = range.length_bytes.div_ceil(BYTE_COPY_CHUNK_BYTES);
    let backwards = range.source_inode == range.destination_inode
        && range.destination_offset_bytes > range.source_offset_bytes;
    for step in 0..chunk_count {
        let chunk = if backwards {
            chunk_count - 1 - step
        } else {
            step
        };
        let start = chunk * BYTE_COPY_CHUNK_BYTES;
        let length = BYTE_COPY_CHUNK_BYTES.min(range.length_bytes - start);
        let mut buffer = flashpipe_device::IoBuf::zeroed(length as usize);
        data::read_into(
            state,
            device,
            range.source_inode,
            range.source_offset_bytes + start,
            &mut buffer,
        )?;
        data::write(
            state,
            device,
            range.destination_inode,
            range.destination_offset_bytes + start,
            &buffer,
        )?;
    }
    Ok(CopyReport {
        blocks_by_reference: 0,
        bytes_by_bytes: range.length_bytes,
    })
}

/// Points file blocks `first..first + blocks.len()` of `inode_number` at `blocks`, blocks
/// that other pointers already reference (0: a hole), with their data `checksums`: each
/// block gains a reference unless its slot holds it already, then
/// [`data::install_pointers`] releases the blocks replaced (all gains come before any
/// release, so no count reaches zero on the way). Grows the size to at least `end_bytes`.
fn install_shared_pointers(
    state: &mut State,
    inode_number: u64,
    first: u64,
    blocks: &[u64],
    checksums: &[Option<u32>],
    end_bytes: u64,
) {
    let end = first + blocks.len() as u64;
    if end > state.files[&inode_number].pointers.len() as u64 {
        state.resize_pointers(inode_number, end);
    }
    let pointers = &state.files[&inode_number].pointers[first as usize..end as usize];
    let gained: Vec<u64> = blocks
        .iter()
        .zip(pointers)
        .filter(|&(&block, &slot)| block != 0 && slot != block)
        .map(|(&block, _)| block)
        .collect();
    for block in gained {
        state.shared.add_reference(block);
    }
    data::install_pointers(state, inode_number, first, blocks, checksums, end_bytes);
}
