//! Reading file data: the block map of a byte range (contiguous device runs and holes,
//! with the checksums a reader verifies), reads into the caller's buffer (views of it
//! for whole aligned blocks, bounce buffers for the edges), and the checksum check.

use flashpipe_device::{BlockDevice, Completion, DeviceError, IoBuf, Operation, SplitBuffer};

use super::{check_usable, live_file};
use crate::error::FileIoError;
use crate::io::run_operations;
use crate::layout::data_block_checksum;
use crate::state::State;

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
pub(super) fn verify_file_blocks(
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

/// Checks that bytes `offset..offset + length` lie inside the file.
pub fn check_read_range(
    state: &State,
    inode_number: u64,
    offset_bytes: u64,
    length_bytes: u64,
) -> Result<(), FileIoError> {
    let node = live_file(state, inode_number)?;
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
pub(super) fn take_back_direct_runs(
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
