//! Group commit: several [`Command::Flush`]es served by one file-system commit.
//!
//! A flush is not committed when it is taken from the queue: its client and ticket are
//! set aside, and the engine goes on serving the queue. The commit runs, once for every
//! flush set aside, when the queue runs dry (the engine would otherwise wait), before a
//! [`Command::Check`] (which reads the durable image), when [`GROUP_COMMIT_MAX_FLUSHES`]
//! flushes wait, or when [`GROUP_COMMIT_MAX_COMMANDS_BETWEEN`] other commands have been
//! served since the first of them; and, with [`FlushGrouping::UntilNextChange`], before
//! any command that changes the file system. Every flush set aside is answered after
//! that commit, with its outcome (after a failed commit each of the others tries once
//! more, so each gets its own error, as each would have alone). Commands are still
//! served in arrival order, so a flush answers only after every change queued before
//! it is durable.
//!
//! The groupings differ in what else the commit may carry:
//! - [`FlushGrouping::OnePerFlush`]: none; every flush commits at once (the first design);
//! - [`FlushGrouping::UntilNextChange`] (the default): flushes with only reads and
//!   queries between them share one commit, so the durable image after each answered
//!   flush is exactly the state at that flush (the simulation's crash campaign checks
//!   exactly that);
//! - [`FlushGrouping::UntilIdle`]: changes queued after a flush are served before the
//!   commit and made durable with it (as a journaling file system's group commit does):
//!   interleaved create, write, flush from many clients cost one commit per burst, and
//!   after a crash the durable image is the state at some command boundary no earlier
//!   than the last answered flush.

use crate::client::Ticket;
use crate::command::{Command, EngineError, Reply};
use crate::engine::{answer, EngineThread, Envelope};
use crate::inbound::ReplyTo;

/// Most flushes set aside for one commit.
pub const GROUP_COMMIT_MAX_FLUSHES: usize = 64;

/// Most other commands served while a flush waits for its commit.
pub const GROUP_COMMIT_MAX_COMMANDS_BETWEEN: usize = 64;

/// Which flushes share a commit (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlushGrouping {
    /// Every flush commits at once.
    OnePerFlush,
    /// Flushes share a commit until a command that changes the file system comes.
    #[default]
    UntilNextChange,
    /// Flushes share a commit until the queue runs dry (changes after them included).
    UntilIdle,
}

/// Flushes set aside for the next commit.
#[derive(Default)]
pub(crate) struct PendingFlushes {
    waiting: Vec<(Ticket, ReplyTo)>,
    commands_served_since_first: usize,
    commits: u64,
}

impl PendingFlushes {
    pub(crate) fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    fn is_due(&self) -> bool {
        self.waiting.len() >= GROUP_COMMIT_MAX_FLUSHES
            || self.commands_served_since_first >= GROUP_COMMIT_MAX_COMMANDS_BETWEEN
    }
}

/// True for commands that change the file system.
fn changes_filesystem(command: &Command) -> bool {
    !matches!(
        command,
        Command::Read { .. }
            | Command::ReadFiles { .. }
            | Command::Stat { .. }
            | Command::List
            | Command::Stats
            | Command::Flush
            | Command::Check
    )
}

impl EngineThread {
    /// Serves one command taken from the queue: a flush is set aside for the next group
    /// commit, every other command is handled after the commit it must follow.
    pub(crate) fn serve(
        &mut self,
        envelope: Envelope,
        inputs: &mut crate::inputs::Inputs,
    ) -> Result<(), EngineError> {
        let grouping = self.flush_grouping;
        if matches!(envelope.command, Command::Flush) && grouping != FlushGrouping::OnePerFlush {
            self.pending_flushes
                .waiting
                .push((envelope.ticket, envelope.reply_to));
            return self.commit_pending_flushes_if_due();
        }
        let must_follow_commit = matches!(envelope.command, Command::Check)
            || (grouping == FlushGrouping::UntilNextChange
                && changes_filesystem(&envelope.command));
        if must_follow_commit {
            self.commit_pending_flushes()?;
        }
        self.handle(envelope, inputs)?;
        if !self.pending_flushes.is_empty() {
            self.pending_flushes.commands_served_since_first += 1;
        }
        self.commit_pending_flushes_if_due()
    }

    fn commit_pending_flushes_if_due(&mut self) -> Result<(), EngineError> {
        if self.pending_flushes.is_due() {
            self.commit_pending_flushes()?;
        }
        Ok(())
    }

    /// True while flushes wait for their commit.
    pub(crate) fn has_pending_flushes(&self) -> bool {
        !self.pending_flushes.is_empty()
    }

    /// File-system commits made for groups of flushes so far.
    pub(crate) fn group_commits(&self) -> u64 {
        self.pending_flushes.commits
    }

    /// Commits once for every flush set aside and answers each of them. An error is the
    /// engine's own end (the device failed while reads or writes were in flight), as in
    /// every other command.
    pub(crate) fn commit_pending_flushes(&mut self) -> Result<(), EngineError> {
        if self.pending_flushes.is_empty() {
            return Ok(());
        }
        self.drain_device()?;
        assert!(
            self.device_is_idle(),
            "a group commit runs with nothing in flight"
        );
        let waiting = std::mem::take(&mut self.pending_flushes.waiting);
        self.pending_flushes.commands_served_since_first = 0;
        self.pending_flushes.commits += 1;
        let mut outcome = Some(self.fs.flush(&mut *self.device));
        for (ticket, reply_to) in waiting {
            let result = outcome
                .take()
                .unwrap_or_else(|| self.fs.flush(&mut *self.device));
            match result {
                Ok(()) => {
                    answer(&reply_to, ticket, Ok(Reply::Done));
                    outcome = Some(Ok(()));
                }
                Err(error) => answer(&reply_to, ticket, Err(error.into())),
            }
        }
        Ok(())
    }
}
