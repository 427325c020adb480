//! Truncating a file, as a [`Plan`]: blocks past the new end freed, the tail of the new
//! last block zeroed copy-on-write (read it, then write it zeroed, to the same block when
//! it is fresh since the last commit, to a new one otherwise), or a hole added when it
//! grows.

use flashpipe_device::{BlockDevice, Completion, DeviceError, IoBuf, Operation};

use super::read::verify_file_blocks;
use super::{check_size_limit, check_usable, live_file, no_space, totals_with};
use crate::error::FileIoError;
use crate::layout::data_block_checksum;
use crate::plan::{run_plan, Plan, Step};
use crate::state::State;

/// Sets a file's size. Shrinking frees the blocks past the end and zeroes the tail of
/// the new last block (copy-on-write); growing adds a hole.
pub fn truncate(
    state: &mut State,
    device: &mut dyn BlockDevice,
    inode_number: u64,
    size_bytes: u64,
) -> Result<(), FileIoError> {
    run_plan(
        &mut TruncatePlan::new(inode_number, size_bytes),
        state,
        device,
    )
}

/// The truncation of inode `inode_number` to `size_bytes`.
pub(crate) struct TruncatePlan {
    inode_number: u64,
    size_bytes: u64,
    phase: Phase,
}

/// Where a truncation stands.
enum Phase {
    /// Nothing done yet.
    Start,
    /// The new last block (file block `index`, FS block `pointer`) is being read; its
    /// first `keep_bytes` stay.
    ReadingTail {
        index: usize,
        pointer: u64,
        keep_bytes: usize,
        fresh: bool,
    },
    /// The zeroed tail is being written to `target` (`pointer` itself when fresh).
    WritingTail {
        index: usize,
        pointer: u64,
        target: u64,
        checksum: Option<u32>,
    },
    /// Done or failed: never resumed.
    Finished,
}

impl TruncatePlan {
    pub(crate) fn new(inode_number: u64, size_bytes: u64) -> TruncatePlan {
        TruncatePlan {
            inode_number,
            size_bytes,
            phase: Phase::Start,
        }
    }

    /// The in-memory part, once the tail (if any) is written: blocks past the end
    /// released when shrinking, the pointer count and the size set.
    fn finish(&mut self, state: &mut State) -> Step<()> {
        self.phase = Phase::Finished;
        let block_bytes = state.geometry.block_bytes();
        let new_count = self.size_bytes.div_ceil(block_bytes);
        if self.size_bytes < state.files[&self.inode_number].size_bytes {
            let dropped: Vec<u64> = state.files[&self.inode_number].pointers[new_count as usize..]
                .iter()
                .copied()
                .filter(|&block| block != 0)
                .collect();
            for block in dropped {
                state.release_data_block(block);
            }
        }
        state.resize_pointers(self.inode_number, new_count);
        let now = state.now_ns();
        let node = state.files.get_mut(&self.inode_number).expect("live file");
        node.size_bytes = self.size_bytes;
        node.modified_clock_ns = now;
        state.changed_since_commit = true;
        Step::Done(())
    }
}

impl Plan for TruncatePlan {
    type Output = ();
    type Error = FileIoError;

    fn start(&mut self, state: &mut State) -> Result<Step<()>, FileIoError> {
        assert!(
            matches!(self.phase, Phase::Start),
            "a truncation starts once"
        );
        let inode_number = self.inode_number;
        let size_bytes = self.size_bytes;
        check_usable(state)?;
        let node = live_file(state, inode_number)?;
        check_size_limit(state, size_bytes)?;
        if size_bytes == node.size_bytes {
            self.phase = Phase::Finished;
            return Ok(Step::Done(()));
        }
        let block_bytes = state.geometry.block_bytes();
        let old_count = node.pointers.len() as u64;
        let new_count = size_bytes.div_ceil(block_bytes);
        let totals_after = totals_with(state, state.totals, node.name.len(), old_count, new_count);
        if size_bytes > node.size_bytes {
            state.check_space(0, &totals_after).map_err(no_space)?;
            return Ok(self.finish(state));
        }
        // Shrinking: "bytes past the size in the last block are zero" must still hold
        // when the new size ends inside a block that holds data.
        let keep_bytes = (size_bytes % block_bytes) as usize;
        let index = (size_bytes / block_bytes) as usize;
        let pointer = node.pointers.get(index).copied().unwrap_or(0);
        if keep_bytes == 0 || pointer == 0 {
            return Ok(self.finish(state));
        }
        let fresh = state.writable_in_place(pointer);
        state
            .check_space(u64::from(!fresh), &totals_after)
            .map_err(no_space)?;
        self.phase = Phase::ReadingTail {
            index,
            pointer,
            keep_bytes,
            fresh,
        };
        Ok(Step::Issue(vec![Operation::Read {
            first_block: state.geometry.device_block(pointer),
            buffer: IoBuf::zeroed(block_bytes as usize),
        }]))
    }

    fn resume(
        &mut self,
        state: &mut State,
        outcome: Result<Vec<Completion>, DeviceError>,
    ) -> Result<Step<()>, FileIoError> {
        match std::mem::replace(&mut self.phase, Phase::Finished) {
            Phase::ReadingTail {
                index,
                pointer,
                keep_bytes,
                fresh,
            } => {
                let mut completions = outcome?;
                assert_eq!(completions.len(), 1, "the tail is one block");
                let mut block = completions
                    .remove(0)
                    .buffer
                    .expect("a read hands its buffer back");
                verify_file_blocks(state, self.inode_number, index as u64, &block)?;
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
                self.phase = Phase::WritingTail {
                    index,
                    pointer,
                    target,
                    checksum,
                };
                Ok(Step::Issue(vec![Operation::Write {
                    first_block: state.geometry.device_block(target),
                    buffer: block,
                }]))
            }
            Phase::WritingTail {
                index,
                pointer,
                target,
                checksum,
            } => {
                if let Err(error) = outcome {
                    if target != pointer {
                        state.allocator.release(target);
                    }
                    return Err(error.into());
                }
                if target != pointer {
                    state.release_data_block(pointer);
                }
                let node = state.files.get_mut(&self.inode_number).expect("live file");
                node.pointers[index] = target;
                node.checksums[index] = checksum;
                node.map_changed = true;
                Ok(self.finish(state))
            }
            Phase::Start | Phase::Finished => {
                panic!("a truncation resumes only while its tail is in flight")
            }
        }
    }
}
