//! The engine: the order in which every concern is driven, without advancing time
//! (`pump`) or waiting in virtual time for the next ack (`wait_and_pump`).
//!
//! Invariants: `drive` runs collection before host operations (so that pacing knows its
//! rate before host pages are issued), the log after host operations (so records issued
//! now go out now), checkpoints after the log (a checkpoint waits for pending records)
//! and pushes the backlog last; a read-only FTL drives only host operations and the
//! backlog, so it never programs or erases.

use super::Ftl;

impl Ftl {
    /// Reaps ready acks and pushes every kind of work forward, without advancing time.
    pub(crate) fn pump(&mut self) {
        let mut acks = std::mem::take(&mut self.raw.acks);
        loop {
            acks.clear();
            self.backend.poll_acks(&mut acks);
            if acks.is_empty() {
                break;
            }
            for ack in acks.drain(..) {
                self.handle_ack(ack);
            }
            self.drive();
        }
        self.raw.acks = acks;
        self.drive();
    }

    pub(crate) fn drive(&mut self) {
        if self.read_only {
            self.start_waiting_ops();
            self.push_backlog();
            return;
        }
        self.drive_collection();
        self.start_waiting_ops();
        self.write_log_pages();
        self.drive_checkpoint();
        self.push_backlog();
    }

    /// Waits (in virtual time) for at least one ack and handles it; false when nothing
    /// is in flight in the array.
    pub(crate) fn wait_and_pump(&mut self) -> bool {
        self.drive();
        let mut acks = std::mem::take(&mut self.raw.acks);
        acks.clear();
        let moved = self.backend.wait_acks(&mut acks);
        for ack in acks.drain(..) {
            self.handle_ack(ack);
        }
        self.raw.acks = acks;
        self.pump();
        moved > 0
    }

    /// Runs until no internal work (collection, log, checkpoint) is in flight.
    pub fn run_until_quiet(&mut self) {
        self.pump();
        while !self.raw.jobs.is_empty() || !self.raw.backlog.is_empty() {
            if !self.wait_and_pump() && self.raw.backlog.is_empty() {
                break;
            }
        }
    }
}
