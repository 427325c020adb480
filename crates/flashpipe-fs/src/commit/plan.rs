//! The commit as a [`Plan`]: its device steps in exactly the order crash safety needs
//! (docs/format.md, "Crash consistency"): the new blocks (indirect chains, the log
//! record or the checkpoint's tables and map) all in flight together; a device flush;
//! the super block into the older slot; a device flush; only then the in-memory
//! bookkeeping (blocks freed by this commit allocatable again). Nothing changed since the
//! last commit: one device flush. Any failure after the first step makes the state
//! unusable, as a failed flush always has.

use flashpipe_device::{Completion, DeviceError, Operation};

use super::{
    commit_space_needed, finish_checkpoint, finish_log_commit, log_commit_fits, prepare_checkpoint,
    prepare_log_commit, super_block_write,
};
use crate::error::FlushError;
use crate::io::{block_writes, Geometry};
use crate::layout::SuperBlock;
use crate::plan::{Plan, Step};
use crate::state::State;

/// What a commit makes durable, applied to the state once the second flush is done.
pub(super) enum Durable {
    /// A log record: the files it touched and the super block naming it.
    Log {
        touched: Vec<u64>,
        super_block: SuperBlock,
    },
    /// A checkpoint: its blocks, its log region and its super block.
    Checkpoint {
        checkpoint_blocks: Vec<u64>,
        log_region: Vec<u64>,
        super_block: SuperBlock,
    },
}

impl Durable {
    fn super_block(&self) -> &SuperBlock {
        match self {
            Durable::Log { super_block, .. } | Durable::Checkpoint { super_block, .. } => {
                super_block
            }
        }
    }

    fn apply(self, state: &mut State) {
        match self {
            Durable::Log {
                touched,
                super_block,
            } => finish_log_commit(state, touched, super_block),
            Durable::Checkpoint {
                checkpoint_blocks,
                log_region,
                super_block,
            } => finish_checkpoint(state, checkpoint_blocks, log_region, super_block),
        }
    }
}

/// Where a commit stands.
enum Phase {
    Start,
    /// Nothing changed: the one flush is in flight.
    FlushingOnly,
    /// The new blocks are in flight.
    WritingBlocks(Durable),
    /// The flush after them is in flight.
    FlushingBlocks(Durable),
    /// The super block is in flight.
    WritingSuperBlock(Durable),
    /// The flush after it is in flight.
    FlushingSuperBlock(Durable),
    Finished,
}

/// One commit of the state (a flush of the file system).
pub struct CommitPlan {
    phase: Phase,
}

impl CommitPlan {
    /// A commit of whatever changed when it starts.
    pub(crate) fn new() -> CommitPlan {
        CommitPlan {
            phase: Phase::Start,
        }
    }
}

/// The super block write of `durable`, into the slot its sequence names.
fn super_block_step(geometry: &Geometry, durable: &Durable) -> Vec<Operation> {
    let super_block = durable.super_block();
    let slot = super_block.commit_sequence % 2;
    block_writes(
        geometry,
        vec![super_block_write(slot, super_block, geometry)],
    )
}

impl Plan for CommitPlan {
    type Output = ();
    type Error = FlushError;

    fn start(&mut self, state: &mut State) -> Result<Step<()>, FlushError> {
        assert!(matches!(self.phase, Phase::Start), "a commit starts once");
        if let Some(reason) = &state.unusable_reason {
            self.phase = Phase::Finished;
            return Err(FlushError::Unusable {
                reason: reason.clone(),
            });
        }
        if !state.changed_since_commit {
            self.phase = Phase::FlushingOnly;
            return Ok(Step::Issue(vec![Operation::Flush]));
        }
        let prepared = if log_commit_fits(state) {
            Ok(prepare_log_commit(state))
        } else {
            let needed_blocks = commit_space_needed(state);
            let free_blocks = state.allocator.free_block_count();
            if needed_blocks > free_blocks {
                self.phase = Phase::Finished;
                return Err(FlushError::NoSpace {
                    needed_blocks,
                    free_blocks,
                });
            }
            prepare_checkpoint(state)
        };
        let (writes, durable) = match prepared {
            Ok(prepared) => prepared,
            Err(error) => return Err(self.fail(state, error)),
        };
        if writes.is_empty() {
            self.phase = Phase::FlushingBlocks(durable);
            return Ok(Step::Issue(vec![Operation::Flush]));
        }
        let operations = block_writes(&state.geometry, writes);
        self.phase = Phase::WritingBlocks(durable);
        Ok(Step::Issue(operations))
    }

    fn resume(
        &mut self,
        state: &mut State,
        outcome: Result<Vec<Completion>, DeviceError>,
    ) -> Result<Step<()>, FlushError> {
        let phase = std::mem::replace(&mut self.phase, Phase::Finished);
        if let Phase::FlushingOnly = phase {
            return outcome.map(|_| Step::Done(())).map_err(FlushError::from);
        }
        if let Err(error) = outcome {
            return Err(self.fail(state, error.into()));
        }
        let (next, operations) = match phase {
            Phase::WritingBlocks(durable) => {
                (Phase::FlushingBlocks(durable), vec![Operation::Flush])
            }
            Phase::FlushingBlocks(durable) => {
                let operations = super_block_step(&state.geometry, &durable);
                (Phase::WritingSuperBlock(durable), operations)
            }
            Phase::WritingSuperBlock(durable) => {
                (Phase::FlushingSuperBlock(durable), vec![Operation::Flush])
            }
            Phase::FlushingSuperBlock(durable) => {
                durable.apply(state);
                return Ok(Step::Done(()));
            }
            Phase::Start | Phase::FlushingOnly | Phase::Finished => {
                panic!("a commit resumes only while its operations are in flight")
            }
        };
        self.phase = next;
        Ok(Step::Issue(operations))
    }
}

impl CommitPlan {
    /// A failure half-way: the state is unusable from now on.
    fn fail(&mut self, state: &mut State, error: FlushError) -> FlushError {
        self.phase = Phase::Finished;
        state.unusable_reason = Some(error.to_string());
        error
    }
}
