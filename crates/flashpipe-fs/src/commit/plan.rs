//! The commit as a [`Plan`]: its device steps in exactly the order crash safety needs
//! (docs/format.md, "Crash consistency"): the new blocks (indirect chains, the log
//! record or the checkpoint's tables and map) all in flight together; a device flush;
//! the super block into the older slot; a device flush; only then the in-memory
//! bookkeeping (blocks freed by this commit allocatable again). Nothing changed since the
//! last commit: one device flush. Any failure after the first step makes the state
//! unusable, as a failed flush always has.
//!
//! In the flash-aware layout (`crate::flash_layout`) the new blocks go out in ascending
//! page order, the super block goes to the commit ring's next page (its erase block
//! erased first when that page is its first), and after the last flush the erase blocks
//! this commit left wholly dead are erased and given back (retired when an erase fails;
//! the commit itself is durable by then either way). A commit there is a log record in
//! the checkpoint's region when one fits (`crate::flash_log`); one that runs collection
//! is a checkpoint. A log record there writes no super block (format version 9): its
//! changed chain pages and its record pages in one step, then a flush, after which it is
//! durable; a mount takes a record found past the ring record's only when every chain
//! page it wrote reads back whole (`image/scan_chains.rs`).

use flashpipe_device::{Completion, DeviceError, Operation};

use super::collect::{self, Collection};
use super::{
    checkpoint_space, commit_space_needed, finish_checkpoint, finish_log_commit, log_commit_fits,
    prepare_checkpoint, prepare_log_commit, super_block_write,
};
use crate::error::FlushError;
use crate::flash_layout::erase_operation;
use crate::flash_log::log_commit_skips_ring;
use crate::io::block_writes;
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
    /// Flash-aware layout: the live data pages of a collection's victim are being read.
    CollectReading(Collection),
    /// They are being programmed to their new pages.
    CollectWriting(Collection, Vec<u64>),
    /// Nothing changed: the one flush is in flight.
    FlushingOnly,
    /// The new blocks are in flight.
    WritingBlocks(Durable),
    /// Flash-aware log commit: its changed chain pages and its record's pages are in
    /// flight together (every data page it names has completed programming).
    WritingRecord(Durable),
    /// Flash-aware log commit: the flush after the record is in flight; the commit is
    /// durable when it completes (no commit-ring record).
    FlushingRecord(Durable),
    /// The flush after them is in flight.
    FlushingBlocks(Durable),
    /// Flash-aware layout: the ring erase block the super block goes to is being erased.
    ErasingRing(Durable),
    /// The super block is in flight.
    WritingSuperBlock(Durable),
    /// The flush after it is in flight.
    FlushingSuperBlock(Durable),
    /// Flash-aware layout: erase blocks left wholly dead are being erased.
    ErasingDead(Vec<u64>),
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

/// The super block write of `durable`, into the slot its sequence names or the
/// commit ring's next page.
fn super_block_step(state: &State, durable: &Durable) -> Vec<Operation> {
    let geometry = &state.geometry;
    let super_block = durable.super_block();
    let slot = match &state.flash {
        Some(ring) => ring.next_page,
        None => super_block.commit_sequence % 2,
    };
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
        if state.flash.is_some() {
            if let Some(collection) = collect::choose(state, checkpoint_space(state, Some(0))) {
                state.force_checkpoint = true;
                if collection.moves_nothing() {
                    collection.repoint(state, &[]);
                } else {
                    let reads = collection.reads(state);
                    self.phase = Phase::CollectReading(collection);
                    return Ok(Step::Issue(reads));
                }
            }
        }
        self.begin(state)
    }

    fn resume(
        &mut self,
        state: &mut State,
        outcome: Result<Vec<Completion>, DeviceError>,
    ) -> Result<Step<()>, FlushError> {
        let phase = std::mem::replace(&mut self.phase, Phase::Finished);
        match phase {
            Phase::CollectReading(mut collection) => {
                let Ok(completions) = outcome else {
                    return self.begin(state);
                };
                let (targets, mut writes) = collection.place(state, completions);
                writes.sort_unstable_by_key(|write| write.0);
                self.phase = Phase::CollectWriting(collection, targets);
                Ok(Step::Issue(block_writes(&state.geometry, writes)))
            }
            Phase::CollectWriting(collection, targets) => {
                if let Err(error) = outcome {
                    return Err(self.fail(state, error.into()));
                }
                collection.repoint(state, &targets);
                self.begin(state)
            }
            phase => self.resume_commit(state, phase, outcome),
        }
    }
}

impl CommitPlan {
    /// The commit proper, once any collection is done: the log record or checkpoint.
    fn begin(&mut self, state: &mut State) -> Result<Step<()>, FlushError> {
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
        let (mut writes, durable) = match prepared {
            Ok(prepared) => prepared,
            Err(error) => return Err(self.fail(state, error)),
        };
        if state.flash.is_some() {
            writes.sort_unstable_by_key(|write| write.0);
        }
        if matches!(durable, Durable::Log { .. }) && log_commit_skips_ring(state) {
            self.phase = Phase::WritingRecord(durable);
            return Ok(Step::Issue(block_writes(&state.geometry, writes)));
        }
        if writes.is_empty() {
            self.phase = Phase::FlushingBlocks(durable);
            return Ok(Step::Issue(vec![Operation::Flush]));
        }
        let operations = block_writes(&state.geometry, writes);
        self.phase = Phase::WritingBlocks(durable);
        Ok(Step::Issue(operations))
    }

    /// Once a commit is durable: the state updated, the ring advanced when the commit
    /// wrote a ring record, and the erase blocks left wholly dead erased.
    fn after_durable(&mut self, state: &mut State, durable: Durable, wrote_ring: bool) -> Step<()> {
        durable.apply(state);
        let Some(ring) = state.flash.as_mut() else {
            return Step::Done(());
        };
        if wrote_ring {
            ring.advance();
        }
        let pages = ring.pages_per_erase_block;
        let erase_blocks = state.allocator.take_erasable();
        if erase_blocks.is_empty() {
            return Step::Done(());
        }
        let operations = erase_blocks
            .iter()
            .map(|&erase_block| erase_operation(&state.geometry, pages, erase_block))
            .collect();
        self.phase = Phase::ErasingDead(erase_blocks);
        Step::Issue(operations)
    }

    /// The commit's later steps, given the outcome of the last.
    fn resume_commit(
        &mut self,
        state: &mut State,
        phase: Phase,
        outcome: Result<Vec<Completion>, DeviceError>,
    ) -> Result<Step<()>, FlushError> {
        if let Phase::FlushingOnly = phase {
            return outcome.map(|_| Step::Done(())).map_err(FlushError::from);
        }
        if let Phase::ErasingDead(erase_blocks) = phase {
            for erase_block in erase_blocks {
                match &outcome {
                    Ok(_) => state.allocator.erased(erase_block),
                    Err(_) => state.allocator.retire(erase_block),
                }
            }
            return Ok(Step::Done(()));
        }
        if let Err(error) = outcome {
            return Err(self.fail(state, error.into()));
        }
        let (next, operations) = match phase {
            Phase::WritingBlocks(durable) => {
                (Phase::FlushingBlocks(durable), vec![Operation::Flush])
            }
            Phase::WritingRecord(durable) => {
                (Phase::FlushingRecord(durable), vec![Operation::Flush])
            }
            Phase::FlushingRecord(durable) => return Ok(self.after_durable(state, durable, false)),
            Phase::FlushingBlocks(durable) => {
                let ring_erase = state.flash.as_ref().and_then(|ring| {
                    let erase_block = ring.erase_before_next()?;
                    Some(erase_operation(
                        &state.geometry,
                        ring.pages_per_erase_block,
                        erase_block,
                    ))
                });
                match ring_erase {
                    Some(erase) => (Phase::ErasingRing(durable), vec![erase]),
                    None => {
                        let operations = super_block_step(state, &durable);
                        (Phase::WritingSuperBlock(durable), operations)
                    }
                }
            }
            Phase::ErasingRing(durable) => {
                let operations = super_block_step(state, &durable);
                (Phase::WritingSuperBlock(durable), operations)
            }
            Phase::WritingSuperBlock(durable) => {
                (Phase::FlushingSuperBlock(durable), vec![Operation::Flush])
            }
            Phase::FlushingSuperBlock(durable) => {
                return Ok(self.after_durable(state, durable, true))
            }
            Phase::Start
            | Phase::FlushingOnly
            | Phase::CollectReading(_)
            | Phase::CollectWriting(..)
            | Phase::ErasingDead(_)
            | Phase::Finished => {
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
