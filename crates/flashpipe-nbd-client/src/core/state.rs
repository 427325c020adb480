//! The client device's state that is the same over real sockets and in the simulation:
//! admission of device requests, completions, the durability ledger (acknowledged and
//! flushed writes) and the reconnect policy.

// Requests in flight move as boxes between queues and tables (a `Box<Parent>` is moved,
// never copied), so lists of boxes are meant.
#![allow(clippy::vec_box)]

use std::collections::VecDeque;

use flashpipe_device::{
    Completion, DeviceError, DeviceErrorKind, DeviceInfo, Operation, Rejected, Request,
};

use flashpipe_nbd_wire as wire;

use crate::handshake::NbdExport;

use super::{Parent, MAX_PARTS};

/// What a flush reports after a reconnect when writes acknowledged by the lost
/// connection were not yet covered by a flush.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReconnectDurability {
    /// The next flush fails, naming how many writes may be lost (the safe default).
    #[default]
    ReportUnflushedWrites,
    /// The server is trusted to have kept them.
    TrustServer,
}

/// Counters of one device's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NbdDeviceCounters {
    /// Connections lost.
    pub connections_lost: u64,
    /// Successful reconnects.
    pub reconnects: u64,
    /// Requests sent again after a reconnect.
    pub requests_reissued: u64,
}

/// Longest wait between two reconnect attempts.
pub const RECONNECT_DELAY_MAX_MS: u64 = 1000;

/// The client's choices that do not depend on how bytes move.
#[derive(Debug, Clone, Copy)]
pub struct ClientPolicy {
    /// Send every write with FUA when the server offers it.
    pub write_with_fua: bool,
    /// Refuse writes and trims at submission.
    pub read_only: bool,
    /// Reconnect attempts after a lost connection (also the bound on losses in a row
    /// without a request completing).
    pub reconnect_attempts: u32,
    /// Wait before the first attempt; doubled each time, at most one second.
    pub reconnect_first_delay_ms: u64,
    /// What a flush says after a reconnect.
    pub reconnect_durability: ReconnectDurability,
}

impl ClientPolicy {
    /// The wait before reconnect attempt `attempt` (0 for the first):
    /// `reconnect_first_delay_ms`, then twice the previous wait, between 1 ms and 1 s.
    pub fn reconnect_delay_ms(&self, attempt: u32) -> u64 {
        let mut delay_ms = self.reconnect_first_delay_ms;
        for _ in 0..attempt {
            delay_ms = delay_ms.saturating_mul(2).clamp(1, RECONNECT_DELAY_MAX_MS);
        }
        delay_ms
    }
}

/// What to do after a lost connection.
#[derive(Debug)]
pub enum RecoveryStep {
    /// Reconnect; on success send these again ([`ClientCore::reissue`]), in this order.
    Reconnect(Vec<Box<Parent>>),
    /// Give up at once (too many losses in a row without progress): fail these with
    /// [`ClientCore::fail_everything`] and this reason.
    GiveUp(Vec<Box<Parent>>, String),
}

/// The state of one NBD client device that is the same over real sockets and in the
/// simulation.
#[derive(Debug)]
pub struct ClientCore {
    info: DeviceInfo,
    export: NbdExport,
    policy: ClientPolicy,
    next_parent_id: u64,
    in_flight: usize,
    ready: VecDeque<Completion>,
    failed: Option<String>,
    losses_without_progress: u32,
    acknowledged_writes: u64,
    flushed_writes: u64,
    writes_possibly_lost: u64,
    counters: NbdDeviceCounters,
}

impl ClientCore {
    /// A device over `export` with geometry `info`.
    pub fn new(info: DeviceInfo, export: NbdExport, policy: ClientPolicy) -> ClientCore {
        ClientCore {
            info,
            export,
            policy,
            next_parent_id: 1,
            in_flight: 0,
            ready: VecDeque::new(),
            failed: None,
            losses_without_progress: 0,
            acknowledged_writes: 0,
            flushed_writes: 0,
            writes_possibly_lost: 0,
            counters: NbdDeviceCounters::default(),
        }
    }

    /// The device's geometry and capabilities.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// What the handshake reported about the export.
    pub fn export(&self) -> &NbdExport {
        &self.export
    }

    /// The reconnect and timeout policy.
    pub fn policy(&self) -> &ClientPolicy {
        &self.policy
    }

    /// Connections lost, reconnects and re-issued requests so far.
    pub fn counters(&self) -> NbdDeviceCounters {
        self.counters
    }

    /// Requests accepted and not yet handed back.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Completions ready to hand back.
    pub fn ready_count(&self) -> usize {
        self.ready.len()
    }

    /// Why the device failed for good, once it has.
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    fn error(&self, kind: DeviceErrorKind) -> DeviceError {
        DeviceError::new(&self.info.name, kind)
    }

    fn reject(&self, request: Request, kind: DeviceErrorKind) -> Rejected {
        Rejected {
            request,
            error: self.error(kind),
        }
    }

    /// Bytes per NBD request: the export's maximum payload (at most the protocol's
    /// 32 MiB), rounded down to whole device blocks.
    pub fn part_bytes(&self) -> u64 {
        let block = u64::from(self.info.block_size_bytes);
        let maximum = u64::from(
            self.export
                .maximum_payload_bytes
                .min(wire::MAX_PAYLOAD_BYTES),
        );
        (maximum / block).max(1) * block
    }

    /// The export-dependent refusals: read-only, trim or copy not offered.
    fn check_supported(&self, request: Request) -> Result<Request, Rejected> {
        let request = self.info.refuse_copy_by_reference(request)?;
        let read_only =
            self.policy.read_only || self.export.has_flag(wire::TRANSMISSION_FLAG_READ_ONLY);
        match &request.operation {
            Operation::Write { .. } | Operation::Trim { .. } if read_only => {
                let operation = request.operation.name();
                Err(self.reject(request, DeviceErrorKind::ReadOnly { operation }))
            }
            Operation::Trim { .. } if !self.export.has_flag(wire::TRANSMISSION_FLAG_SEND_TRIM) => {
                Err(self.reject(request, DeviceErrorKind::Unsupported { operation: "trim" }))
            }
            _ => Ok(request),
        }
    }

    /// Checks a submission (queue depth, geometry, what the export offers, a failed
    /// device) and counts it in flight. `Ok(Some(parent))`: send it; `Ok(None)`: it
    /// completed at once (a flush to a server without `NBD_CMD_FLUSH`, which has no
    /// volatile cache).
    pub fn admit(&mut self, request: Request) -> Result<Option<Box<Parent>>, Rejected> {
        if self.in_flight >= self.info.queue_depth as usize {
            return Err(self.info.queue_full(request));
        }
        if let Err(error) = self.info.validate(&request.operation) {
            return Err(Rejected { request, error });
        }
        let request = self.check_supported(request)?;
        if let Some(failure) = &self.failed {
            let detail = failure.clone();
            return Err(self.reject(request, DeviceErrorKind::IoFailed { detail }));
        }
        if matches!(request.operation, Operation::Flush)
            && !self.export.has_flag(wire::TRANSMISSION_FLAG_SEND_FLUSH)
        {
            self.in_flight += 1;
            self.ready.push_back(Completion {
                tag: request.tag,
                status: Ok(()),
                buffer: None,
            });
            return Ok(None);
        }
        let parent = self.build_parent(request)?;
        self.in_flight += 1;
        Ok(Some(parent))
    }

    fn build_parent(&mut self, request: Request) -> Result<Box<Parent>, Rejected> {
        let block = u64::from(self.info.block_size_bytes);
        let (command, first_block, length_bytes) = match &request.operation {
            Operation::Read {
                first_block,
                buffer,
            } => (wire::CMD_READ, *first_block, buffer.len() as u64),
            Operation::Write {
                first_block,
                buffer,
            } => (wire::CMD_WRITE, *first_block, buffer.len() as u64),
            Operation::Trim {
                first_block,
                block_count,
            } => (wire::CMD_TRIM, *first_block, block_count * block),
            Operation::Flush => (wire::CMD_FLUSH, 0, 0),
            Operation::CopyByReference { .. } => unreachable!("refused before"),
        };
        let part_bytes = self.part_bytes();
        let parts = length_bytes.div_ceil(part_bytes).max(1);
        if parts > MAX_PARTS {
            let detail = format!(
                "a {} of {length_bytes} bytes needs {parts} NBD requests of at most {part_bytes} bytes, more than the limit of {MAX_PARTS}",
                request.operation.name()
            );
            return Err(self.reject(request, DeviceErrorKind::IoFailed { detail }));
        }
        let fua = command == wire::CMD_WRITE
            && self.policy.write_with_fua
            && self.export.has_flag(wire::TRANSMISSION_FLAG_SEND_FUA);
        let id = self.next_parent_id;
        self.next_parent_id += 1;
        Ok(Box::new(Parent {
            id,
            request,
            command,
            flags: if fua { wire::CMD_FLAG_FUA } else { 0 },
            offset_bytes: first_block * block,
            length_bytes,
            part_bytes,
            parts_finished: vec![false; parts as usize],
            status: None,
            covered: Vec::new(),
            covers_acknowledged_writes: self.acknowledged_writes,
        }))
    }

    /// Takes in a finished parent: its completion, with the durability bookkeeping.
    pub fn complete_parent(&mut self, parent: Box<Parent>) {
        let command = parent.command;
        let flags = parent.flags;
        let covers = parent.covers_acknowledged_writes;
        self.complete(parent.into_completion(), command, flags, covers);
    }

    /// Takes in a completion reported by a connection.
    pub fn complete(
        &mut self,
        mut completion: Completion,
        command: u16,
        flags: u16,
        covers_acknowledged_writes: u64,
    ) {
        self.losses_without_progress = 0;
        if completion.status.is_ok() {
            self.account_success(&mut completion, command, flags, covers_acknowledged_writes);
        }
        self.ready.push_back(completion);
    }

    fn account_success(
        &mut self,
        completion: &mut Completion,
        command: u16,
        flags: u16,
        covers_acknowledged_writes: u64,
    ) {
        match command {
            wire::CMD_WRITE | wire::CMD_TRIM if flags & wire::CMD_FLAG_FUA == 0 => {
                self.acknowledged_writes += 1;
            }
            wire::CMD_FLUSH => {
                self.flushed_writes = self.flushed_writes.max(covers_acknowledged_writes);
                if self.writes_possibly_lost > 0 {
                    let lost = std::mem::take(&mut self.writes_possibly_lost);
                    completion.status = Err(self.error(DeviceErrorKind::IoFailed {
                        detail: format!(
                            "the connection was lost after the server acknowledged {lost} writes that no flush had covered; the server may have lost them"
                        ),
                    }));
                }
            }
            _ => {}
        }
    }

    /// After a connection was lost with `pending` not answered (from the connection and
    /// from any list of requests not yet sent): counts the loss, notes writes no flush
    /// covered, and says whether to reconnect, with `pending` in submission order.
    pub fn begin_recovery(&mut self, mut pending: Vec<Box<Parent>>) -> RecoveryStep {
        self.counters.connections_lost += 1;
        pending.sort_by_key(|parent| parent.id);
        let unflushed = self.acknowledged_writes.saturating_sub(self.flushed_writes);
        if unflushed > 0
            && self.policy.reconnect_durability == ReconnectDurability::ReportUnflushedWrites
        {
            self.writes_possibly_lost += unflushed;
        }
        self.flushed_writes = self.acknowledged_writes;
        self.losses_without_progress += 1;
        if self.losses_without_progress > self.policy.reconnect_attempts.max(1) {
            let reason = format!(
                "the connection was lost {} times in a row without a request completing",
                self.losses_without_progress
            );
            return RecoveryStep::GiveUp(pending, reason);
        }
        RecoveryStep::Reconnect(pending)
    }

    /// Checks that a new connection reached the same export as the first.
    pub fn check_same_export(&self, export: &NbdExport) -> Result<(), String> {
        let same = export.size_bytes == self.export.size_bytes
            && export.transmission_flags == self.export.transmission_flags
            && export.structured_replies == self.export.structured_replies
            && export.maximum_payload_bytes
                >= self
                    .export
                    .maximum_payload_bytes
                    .min(wire::MAX_PAYLOAD_BYTES)
            && self.info.block_size_bytes % export.minimum_block_bytes == 0;
        if !same {
            return Err(format!(
                "the export changed across the reconnect (was {:?}, now {:?})",
                self.export, export
            ));
        }
        Ok(())
    }

    /// After a successful reconnect: counts it and readies `pending` to be sent again
    /// (whole, in the order given).
    pub fn reissue(&mut self, mut pending: Vec<Box<Parent>>) -> Vec<Box<Parent>> {
        self.counters.reconnects += 1;
        self.counters.requests_reissued += pending.len() as u64;
        pending
            .iter_mut()
            .for_each(|parent| parent.reset_for_reissue());
        pending
    }

    /// Reconnecting failed: every request in `pending` (which must hold every request
    /// of every connection, the caller having closed them) completes with an error
    /// naming the device, and so does every later submission.
    pub fn fail_everything(
        &mut self,
        pending: Vec<Box<Parent>>,
        lost_because: &str,
        last_attempt: &str,
    ) {
        let failure = format!(
            "connection lost ({lost_because}); reconnecting failed ({} attempts at most): {last_attempt}",
            self.policy.reconnect_attempts
        );
        for parent in pending {
            let mut completion = parent.into_completion();
            completion.status = Err(self.error(DeviceErrorKind::IoFailed {
                detail: failure.clone(),
            }));
            self.ready.push_back(completion);
        }
        self.failed = Some(failure);
    }

    /// What a wait for completions can answer without waiting: the ready completions
    /// handed over, or the error for a wait with nothing in flight; `None` while
    /// requests are in flight and none is ready.
    pub fn hand_over_without_waiting(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Option<Result<usize, DeviceError>> {
        if self.ready_count() > 0 {
            return Some(Ok(self.hand_over(completions)));
        }
        if self.in_flight() == 0 {
            return Some(Err(self.error(DeviceErrorKind::NothingInFlight)));
        }
        None
    }

    /// Hands every ready completion to the caller; returns how many.
    pub fn hand_over(&mut self, completions: &mut Vec<Completion>) -> usize {
        let count = self.ready.len();
        assert!(
            count <= self.in_flight,
            "{}: {count} completions for {} requests in flight (each request completes once)",
            self.info.name,
            self.in_flight
        );
        self.in_flight -= count;
        completions.extend(self.ready.drain(..));
        count
    }
}
