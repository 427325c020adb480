//! Writes in two stages, for a caller that keeps many writes in flight on the device (the
//! engine): [`plan`] checks space, chooses and allocates the target blocks and builds the
//! device requests; the caller issues them and, once every one has completed, [`finish`]
//! installs the block pointers (or, when a request failed, installs nothing and releases
//! the blocks the write allocated). Until then the file system's block map is unchanged,
//! so the caller must not let anything else look at or change the file system while
//! writes are planned and not finished, except more writes to other FS blocks (the
//! engine drains its writes before any other command); [`PendingWrites`] counts them so
//! that each space check includes the writes still in flight, and a flush with writes
//! pending is refused by an assertion.
//!
//! Zero copy: a write that starts on an FS block boundary hands the caller's buffer to the
//! device as views ([`SplitBuffer`]), one per run of physically contiguous target blocks,
//! each block's CRC32C computed on the view as it goes out; only a partial last block is
//! copied into a bounce buffer (merged with its old contents when it had any). A write
//! that starts inside a block is copied whole into bounce buffers, as the synchronous
//! path does. [`finish`] gives the caller's buffer back whole.
//!
//! Checksums off the caller's thread: the whole blocks' CRC32C may come with the write
//! ([`BlockChecksums`], computed where the bytes were produced, e.g. on an engine
//! client's thread while the engine copies the previous write), so the thread that plans
//! does not pass over the bytes a second time. They are used only when they describe
//! this very buffer on this file system's block size and the write starts on a block
//! boundary; otherwise the blocks are checksummed here as before. Every block stored
//! still carries the CRC32C of its bytes.

use flashpipe_device::{BlockDevice, DeviceError, IoBuf, Operation, SplitBuffer};

use crate::data::{
    build_write_operations, check_usable, group_runs, install_pointers, plan_blocks, BlockPlan,
    RunAccounting,
};
use crate::error::FileIoError;
use crate::layout::data_block_checksum;
use crate::state::State;

/// How a planned write sends its bytes to the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteCopy {
    /// Whole FS blocks go from the caller's buffer to the device as views, when the write
    /// starts on a block boundary; the rest is copied.
    ZeroCopy,
    /// Every byte is copied into the file system's own buffers first (the synchronous
    /// path's way; kept to compare).
    Copy,
}

/// The CRC32C of each whole FS block of a write's buffer (block `i` is bytes
/// `i * B..(i + 1) * B`), as [`crate::layout::data_block_checksum`] computes it; a partial
/// last block has none (it is checksummed with the rest of its block when planned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockChecksums {
    block_bytes: u64,
    data_bytes: usize,
    checksums: Vec<u32>,
}

impl BlockChecksums {
    /// The checksums of `data`'s whole blocks of `block_bytes` (a power of two of at
    /// least 512, an FS block size).
    pub fn compute(data: &[u8], block_bytes: u64) -> BlockChecksums {
        assert!(
            block_bytes >= 512 && block_bytes.is_power_of_two(),
            "an FS block size is a power of two of at least 512, not {block_bytes}"
        );
        BlockChecksums {
            block_bytes,
            data_bytes: data.len(),
            checksums: data
                .chunks_exact(block_bytes as usize)
                .map(data_block_checksum)
                .collect(),
        }
    }

    /// The checksums, one per whole block.
    pub fn checksums(&self) -> &[u32] {
        &self.checksums
    }

    /// True when these are the checksums of a buffer of `data_bytes` on blocks of
    /// `block_bytes`.
    fn describe(&self, data_bytes: usize, block_bytes: u64) -> bool {
        self.block_bytes == block_bytes
            && self.data_bytes == data_bytes
            && self.checksums.len() as u64 == data_bytes as u64 / block_bytes
    }
}

/// Writes planned and not yet finished, and what they will have changed once installed.
#[derive(Debug, Default)]
pub(crate) struct PendingWrites {
    count: usize,
    accounting: Option<RunAccounting>,
}

impl PendingWrites {
    /// Writes planned and not yet finished.
    pub(crate) fn count(&self) -> usize {
        self.count
    }
}

/// Where the caller's buffer is while the write is in flight.
#[derive(Debug)]
enum Source {
    /// Handed to the device as views.
    Split(SplitBuffer),
    /// Copied into bounce buffers; kept whole to give back.
    Whole(IoBuf),
}

/// A write planned by [`crate::Filesystem::plan_write`]: issue [`PlannedWrite::take_operations`]
/// to the device, give each completion's buffer to [`PlannedWrite::take_back`], then
/// call [`crate::Filesystem::finish_write`] once all have completed.
#[derive(Debug)]
pub struct PlannedWrite {
    /// `None` for an empty write (nothing to install).
    blocks: Option<BlockPlan>,
    checksums: Vec<Option<u32>>,
    operations: Vec<Operation>,
    source: Source,
    length_bytes: usize,
    /// Bounce buffers back from the device, recycled at finish.
    returned_bounces: Vec<IoBuf>,
    zero_copy_blocks: u64,
}

impl PlannedWrite {
    /// The device requests (writes), to issue all at once in any order; empty after the
    /// first call.
    pub fn take_operations(&mut self) -> Vec<Operation> {
        std::mem::take(&mut self.operations)
    }

    /// Takes back the buffer of one of the write's completed requests.
    pub fn take_back(&mut self, buffer: IoBuf) {
        let buffer = match &mut self.source {
            Source::Split(split) => match split.return_view(buffer) {
                Ok(()) => return,
                Err(not_a_view) => not_a_view.buffer,
            },
            Source::Whole(_) => buffer,
        };
        self.returned_bounces.push(buffer);
    }

    /// FS blocks that go to the device straight from the caller's buffer.
    pub fn zero_copy_blocks(&self) -> u64 {
        self.zero_copy_blocks
    }

    /// Bytes the write carries.
    pub fn len(&self) -> usize {
        self.length_bytes
    }

    /// True for an empty write.
    pub fn is_empty(&self) -> bool {
        self.length_bytes == 0
    }

    /// The file (inode number) and the FS blocks `first..end` the write covers, or `None`
    /// for an empty write.
    pub fn block_range(&self) -> Option<(u64, u64, u64)> {
        self.blocks.as_ref().map(|blocks| {
            (
                blocks.inode_number,
                blocks.first,
                blocks.first + blocks.targets.len() as u64,
            )
        })
    }
}

/// What a write carries: where it goes, its bytes and, when the caller computed them, the
/// checksums of its whole blocks.
pub(crate) struct WriteRequest {
    /// The file's inode number.
    pub(crate) inode_number: u64,
    /// Where in the file.
    pub(crate) offset_bytes: u64,
    /// The bytes.
    pub(crate) data: IoBuf,
    /// `data`'s whole blocks' checksums, or `None` to compute them here.
    pub(crate) checksums: Option<BlockChecksums>,
}

/// Plans `request` (see the module doc). When the write has partial edge blocks holding
/// data ([`crate::data::needs_old_blocks`]), they are read here, so the device must have
/// nothing in flight then.
pub(crate) fn plan(
    state: &mut State,
    device: &mut dyn BlockDevice,
    pending: &mut PendingWrites,
    request: WriteRequest,
    copy: WriteCopy,
) -> Result<PlannedWrite, FileIoError> {
    let WriteRequest {
        inode_number,
        offset_bytes,
        data,
        checksums: given,
    } = request;
    check_usable(state)?;
    let mut accounting = pending
        .accounting
        .take()
        .unwrap_or_else(|| RunAccounting::starting_from(state));
    let blocks = plan_blocks(
        state,
        device,
        &mut accounting,
        inode_number,
        offset_bytes,
        &data,
    );
    pending.accounting = Some(accounting);
    let blocks = match blocks {
        Ok(blocks) => blocks,
        Err(error) => {
            if pending.count == 0 {
                pending.accounting = None;
            }
            return Err(error);
        }
    };
    pending.count += 1;
    let length_bytes = data.len();
    let Some(blocks) = blocks else {
        return Ok(PlannedWrite {
            blocks: None,
            checksums: Vec::new(),
            operations: Vec::new(),
            source: Source::Whole(data),
            length_bytes,
            returned_bounces: Vec::new(),
            zero_copy_blocks: 0,
        });
    };
    let block_bytes = state.geometry.block_bytes();
    let aligned = offset_bytes % block_bytes == 0;
    if copy == WriteCopy::ZeroCopy && aligned {
        let given = given.filter(|given| given.describe(data.len(), block_bytes));
        let (operations, checksums, split, zero_copy_blocks) =
            build_zero_copy_operations(state, &blocks, data, given.as_ref());
        return Ok(PlannedWrite {
            blocks: Some(blocks),
            checksums,
            operations,
            source: Source::Split(split),
            length_bytes,
            returned_bounces: Vec::new(),
            zero_copy_blocks,
        });
    }
    let (operations, checksums) = build_write_operations(
        state,
        &blocks.targets,
        blocks.first,
        offset_bytes,
        &data,
        &blocks.old_edges,
    );
    Ok(PlannedWrite {
        blocks: Some(blocks),
        checksums,
        operations,
        source: Source::Whole(data),
        length_bytes,
        returned_bounces: Vec::new(),
        zero_copy_blocks: 0,
    })
}

/// The device writes of a write that starts on a block boundary: every whole block as a
/// view of `data` (one view per run of contiguous targets, at most a request's size), the
/// partial last block, if any, through a bounce buffer. The whole blocks' checksums are
/// taken from `given` when there are some (they describe `data`), else computed here.
/// Returns the operations, the checksum of each block in target order, the split holding
/// `data`, and the number of blocks sent without a copy.
fn build_zero_copy_operations(
    state: &mut State,
    blocks: &BlockPlan,
    data: IoBuf,
    given: Option<&BlockChecksums>,
) -> (Vec<Operation>, Vec<Option<u32>>, SplitBuffer, u64) {
    let geometry = state.geometry;
    let block_bytes = geometry.block_bytes();
    let block_count = blocks.targets.len() as u64;
    let whole_blocks = data.len() as u64 / block_bytes;
    let tail_bytes = data.len() as u64 % block_bytes;
    assert_eq!(
        whole_blocks + u64::from(tail_bytes > 0),
        block_count,
        "a block-aligned write covers its whole blocks and at most one partial block"
    );
    let tail = (tail_bytes > 0).then(|| {
        let index = blocks.first + whole_blocks;
        let mut bounce = state.buffers.take(block_bytes as usize);
        match blocks.old_edges.get(&index) {
            Some(old) => bounce.copy_from_slice(old),
            None => bounce.fill(0),
        }
        let start = (whole_blocks * block_bytes) as usize;
        bounce[..tail_bytes as usize].copy_from_slice(&data[start..]);
        bounce
    });
    let mut tail = tail;
    let mut split = SplitBuffer::new(data);
    let runs = group_runs(
        &blocks.targets,
        0,
        block_count,
        geometry.max_blocks_per_request(),
        whole_blocks,
    );
    let mut checksums = Vec::with_capacity(block_count as usize);
    let mut operations = Vec::with_capacity(runs.len());
    for (position, count, target) in runs {
        let buffer = if position < whole_blocks {
            assert!(position + count <= whole_blocks, "runs split at the tail");
            split
                .view(
                    (position * block_bytes) as usize,
                    (count * block_bytes) as usize,
                )
                .unwrap_or_else(|refused| panic!("a write's runs are fresh windows: {refused}"))
        } else {
            assert_eq!(
                (position, count),
                (whole_blocks, 1),
                "the tail is one block"
            );
            tail.take()
                .expect("a partial last block has a bounce buffer")
        };
        match given {
            Some(given) if position < whole_blocks => checksums.extend(
                given.checksums[position as usize..(position + count) as usize]
                    .iter()
                    .map(|&checksum| Some(checksum)),
            ),
            _ => checksums.extend(
                buffer
                    .chunks_exact(block_bytes as usize)
                    .map(|block| Some(data_block_checksum(block))),
            ),
        }
        operations.push(Operation::Write {
            first_block: geometry.device_block(target),
            buffer,
        });
    }
    assert_eq!(
        checksums.len() as u64,
        block_count,
        "one checksum per block"
    );
    (operations, checksums, split, whole_blocks)
}

/// Finishes a planned write whose requests have all completed: installs its block
/// pointers when `outcome` is a success, else releases the blocks it allocated and
/// installs nothing. Returns the caller's buffer, whole, and the write's result.
pub(crate) fn finish(
    state: &mut State,
    pending: &mut PendingWrites,
    planned: PlannedWrite,
    outcome: Result<(), DeviceError>,
) -> (IoBuf, Result<(), FileIoError>) {
    assert!(
        pending.count > 0,
        "finishing a write that was never planned"
    );
    assert!(
        planned.operations.is_empty(),
        "a write is finished only after its requests were issued"
    );
    pending.count -= 1;
    if pending.count == 0 {
        pending.accounting = None;
    }
    let PlannedWrite {
        blocks,
        checksums,
        source,
        length_bytes,
        returned_bounces,
        ..
    } = planned;
    for bounce in returned_bounces {
        state.buffers.give_back(bounce);
    }
    let buffer = match source {
        Source::Whole(buffer) => buffer,
        Source::Split(split) => split
            .try_into_parent()
            .unwrap_or_else(|_| IoBuf::zeroed(length_bytes)),
    };
    let result = match (blocks, outcome) {
        (None, _) => Ok(()),
        (Some(blocks), Ok(())) => {
            install_pointers(
                state,
                blocks.inode_number,
                blocks.first,
                &blocks.targets,
                &checksums,
                blocks.end_bytes,
            );
            Ok(())
        }
        (Some(blocks), Err(error)) => {
            blocks.abandon(state, &error);
            Err(error.into())
        }
    };
    (buffer, result)
}
