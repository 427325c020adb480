//! The NBD client's protocol logic without I/O (no threads, no sockets, no clock), shared
//! by the real client ([`crate::device::NbdDevice`], threads over sockets) and the
//! simulated one (`flashpipe_nbd::client::SimNbdDevice`, a seeded link in virtual time,
//! which is why this module is public: it is the simulated driver's way in, not an
//! interface for anything else):
//!
//! - [`Parent`]: a device request in flight, cut into parts of at most the export's
//!   maximum payload, each with its own cookie (`parent id << PART_BITS | part index`);
//! - request frames: [`part_header`], [`encode_request_frames`];
//! - replies: [`read_reply_body`] reads one simple reply or structured chunk from any
//!   [`Read`] (a socket's buffer, or a delivered message's bytes) into its parent and
//!   checks it against the protocol (data inside the part, no overlap, whole part
//!   covered, error chunks well formed, `NBD_ESHUTDOWN` as a lost connection);
//! - [`ClientCore`]: admission of device requests (geometry, queue depth, read-only,
//!   trim, a failed device), the durability ledger (acknowledged and flushed writes), and
//!   the reconnect policy: which requests to re-issue and in what order (every one not
//!   answered, flushes included, in submission order), the backoff between attempts, the
//!   bound on attempts and on losses in a row without progress, and the final error that
//!   names the member; the reply timeout's rule ([`silence_ends_connection`]).
//!
//! The drivers around it only move bytes and wait: the real one on sockets and the wall
//! clock, the simulated one on events of a seeded world in virtual time.

// Requests in flight move as boxes between queues and tables (a `Box<Parent>` is moved,
// never copied), so lists of boxes are meant.
#![allow(clippy::vec_box)]

use std::collections::VecDeque;
use std::io::Read;
use std::sync::Arc;

use flashpipe_device::{
    Completion, DeviceError, DeviceErrorKind, DeviceInfo, Operation, Rejected, Request,
};

use flashpipe_nbd_wire::{self as wire, ReplyHeader, RequestHeader, StructuredReplyHeader};

use crate::handshake::NbdExport;

/// Bits of a cookie that number the part of its parent.
pub const PART_BITS: u32 = 20;

/// Most parts one device request may be cut into.
pub const MAX_PARTS: u64 = 1 << PART_BITS;

/// A device request in flight on the connection.
#[derive(Debug)]
pub struct Parent {
    /// The device's number for it (cookies carry it).
    pub id: u64,
    /// The caller's request, buffer included.
    pub request: Request,
    /// NBD command.
    pub command: u16,
    /// Command flags (FUA).
    pub flags: u16,
    /// First byte of the export it touches.
    pub offset_bytes: u64,
    /// Bytes it touches.
    pub length_bytes: u64,
    /// Bytes per part (the last may be shorter).
    pub part_bytes: u64,
    /// Parts whose reply is complete.
    pub parts_finished: Vec<bool>,
    /// The first error a part met.
    pub status: Option<DeviceError>,
    /// Byte ranges (relative to the parent) a structured read reply has filled.
    pub covered: Vec<(u64, u64)>,
    /// For a flush: how many writes had been acknowledged when it was submitted.
    pub covers_acknowledged_writes: u64,
}

impl Parent {
    /// Parts the request is cut into (one at least, so a request without bytes, a flush, is one part).
    pub fn part_count(&self) -> u64 {
        self.length_bytes.div_ceil(self.part_bytes).max(1)
    }

    /// Relative start and length of part `index`.
    pub fn part_range(&self, index: u64) -> (u64, u64) {
        let start = index * self.part_bytes;
        (start, self.part_bytes.min(self.length_bytes - start))
    }

    /// Forgets what a lost connection had done, so the whole request is sent again.
    pub fn reset_for_reissue(&mut self) {
        self.parts_finished
            .iter_mut()
            .for_each(|done| *done = false);
        self.status = None;
        self.covered.clear();
    }

    /// Whether every part is answered.
    pub fn is_finished(&self) -> bool {
        self.parts_finished.iter().all(|&done| done)
    }

    /// The completion of a finished parent.
    pub fn into_completion(self: Box<Self>) -> Completion {
        Completion {
            tag: self.request.tag,
            status: self.status.map_or(Ok(()), Err),
            buffer: self.request.into_buffer(),
        }
    }
}

/// The parent a cookie names.
pub fn parent_id_of_cookie(cookie: u64) -> u64 {
    cookie >> PART_BITS
}

/// The part of its parent a cookie names.
pub fn part_of_cookie(cookie: u64) -> u64 {
    cookie & (MAX_PARTS - 1)
}

/// The cookie a reply header answers.
pub fn cookie_of_reply(header: &ReplyHeader) -> u64 {
    match header {
        ReplyHeader::Simple { cookie, .. } => *cookie,
        ReplyHeader::Structured(chunk) => chunk.cookie,
    }
}

/// The request header of part `index` of `parent`.
pub fn part_header(parent: &Parent, index: u64) -> RequestHeader {
    let (start, length) = if parent.command == wire::CMD_FLUSH {
        (0, 0)
    } else {
        parent.part_range(index)
    };
    let offset_bytes = if parent.command == wire::CMD_FLUSH {
        0
    } else {
        parent.offset_bytes + start
    };
    RequestHeader {
        flags: parent.flags,
        command: parent.command,
        cookie: parent.id << PART_BITS | index,
        offset_bytes,
        length_bytes: u32::try_from(length).expect("a part fits the 32-bit length field"),
    }
}

/// Every part's header of a request without payload (read, flush, trim).
pub fn part_headers(parent: &Parent) -> Vec<u8> {
    let mut headers = Vec::with_capacity(wire::REQUEST_HEADER_BYTES * parent.part_count() as usize);
    for index in 0..parent.part_count() {
        part_header(parent, index).encode(&mut headers);
    }
    headers
}

/// The payload of part `index` of a write.
///
/// # Panics
/// When `parent` is not a write.
pub fn write_part_payload(parent: &Parent, index: u64) -> &[u8] {
    let Operation::Write { buffer, .. } = &parent.request.operation else {
        panic!("write_part_payload is given writes only");
    };
    let (start, length) = parent.part_range(index);
    &buffer[start as usize..(start + length) as usize]
}

/// Every NBD request of `parent`, headers and write payloads, as sent on the wire.
pub fn encode_request_frames(parent: &Parent, output: &mut Vec<u8>) {
    if parent.command != wire::CMD_WRITE {
        output.extend_from_slice(&part_headers(parent));
        return;
    }
    for index in 0..parent.part_count() {
        part_header(parent, index).encode(output);
        output.extend_from_slice(write_part_payload(parent, index));
    }
}

/// What reply checks need to know of the connection.
#[derive(Debug, Clone, Copy)]
pub struct ReplyRules<'a> {
    /// The device's name (its URI), for errors.
    pub device_name: &'a Arc<str>,
    /// Whether structured replies were negotiated.
    pub structured_replies: bool,
}

/// Turns a failed reply-header read into the reason the connection is lost.
pub fn describe_reply_header_error(device_name: &str, error: wire::WireError) -> String {
    match error {
        wire::WireError::Io { source, .. }
            if source.kind() == std::io::ErrorKind::UnexpectedEof =>
        {
            format!("{device_name}: the server closed the connection")
        }
        wire::WireError::Io { source, .. } => {
            format!("{device_name}: receiving from the server failed: {source}")
        }
        other => format!("{device_name}: protocol violation: {other}"),
    }
}

/// The reply timeout's rule: with `waiting` requests in flight and nothing received or
/// sent for `quiet_for_ns`, the connection counts as lost once `timeout_ns` has passed (a
/// network partition sends no reset); an idle connection never times out. Returns the
/// reason when it has.
pub fn silence_ends_connection(
    device_name: &str,
    waiting: usize,
    quiet_for_ns: u64,
    timeout_ns: u64,
) -> Option<String> {
    (waiting > 0 && quiet_for_ns >= timeout_ns).then(|| {
        format!(
            "{device_name}: no reply from the server for {} ms with {waiting} requests in flight",
            timeout_ns / 1_000_000
        )
    })
}

/// Checks that the part a reply's cookie names is pending on `parent`; returns the part.
pub fn pending_part(parent: &Parent, cookie: u64, device_name: &str) -> Result<u64, String> {
    let part = part_of_cookie(cookie);
    if part >= parent.part_count() || parent.parts_finished[part as usize] {
        return Err(format!(
            "{device_name}: protocol violation: a reply for cookie {cookie:#x}, whose request has no such part pending"
        ));
    }
    Ok(part)
}

/// Reads the body of one reply message (after its header) for part `part` of `parent`;
/// true when the parent has finished (every part answered). An `Err` is the reason the
/// connection is lost (already naming the device).
pub fn read_reply_body(
    input: &mut impl Read,
    parent: &mut Parent,
    part: u64,
    header: &ReplyHeader,
    rules: &ReplyRules<'_>,
) -> Result<bool, String> {
    let outcome = match header {
        ReplyHeader::Simple { error, .. } => read_simple_reply(input, parent, part, *error, rules),
        ReplyHeader::Structured(chunk) => read_chunk(input, parent, part, chunk, rules),
    };
    match outcome {
        Ok(part_done) => {
            if part_done {
                parent.parts_finished[part as usize] = true;
            }
            Ok(parent.is_finished())
        }
        Err(reason) => Err(format!("{}: {reason}", rules.device_name)),
    }
}

/// Records a server error on the parent (the first one wins). `NBD_ESHUTDOWN` is not an
/// answer but the server leaving: the connection is treated as lost and the request
/// re-issued on the next one.
fn record_server_error(
    parent: &mut Parent,
    error: u32,
    message: &str,
    rules: &ReplyRules<'_>,
) -> Result<(), String> {
    if error == wire::NBD_ESHUTDOWN {
        return Err("the server is shutting down (NBD_ESHUTDOWN)".to_string());
    }
    let operation = parent.request.operation.name();
    let detail = if message.is_empty() {
        format!(
            "the server failed the {operation}: {}",
            wire::error_name(error)
        )
    } else {
        format!(
            "the server failed the {operation}: {}: {message}",
            wire::error_name(error)
        )
    };
    let kind = match error {
        wire::NBD_ENOSPC => DeviceErrorKind::OutOfSpace { detail },
        _ => DeviceErrorKind::IoFailed { detail },
    };
    parent
        .status
        .get_or_insert_with(|| DeviceError::new(rules.device_name, kind));
    Ok(())
}

fn read_buffer_range(parent: &mut Parent, start: u64, length: u64) -> &mut [u8] {
    let Operation::Read { buffer, .. } = &mut parent.request.operation else {
        panic!("data is read into read requests only");
    };
    &mut buffer[start as usize..(start + length) as usize]
}

fn read_simple_reply(
    input: &mut impl Read,
    parent: &mut Parent,
    part: u64,
    error: u32,
    rules: &ReplyRules<'_>,
) -> Result<bool, String> {
    let is_read = parent.command == wire::CMD_READ;
    if is_read && rules.structured_replies {
        return Err(
            "protocol violation: a simple reply to NBD_CMD_READ after structured replies were negotiated"
                .to_string(),
        );
    }
    if error != 0 {
        record_server_error(parent, error, "", rules)?;
        return Ok(true);
    }
    if is_read {
        let (start, length) = parent.part_range(part);
        input
            .read_exact(read_buffer_range(parent, start, length))
            .map_err(|error| format!("receiving read data failed: {error}"))?;
    }
    Ok(true)
}

fn read_payload(input: &mut impl Read, length_bytes: u32) -> Result<Vec<u8>, String> {
    let mut payload = vec![0u8; length_bytes as usize];
    input
        .read_exact(&mut payload)
        .map_err(|error| format!("receiving a reply chunk failed: {error}"))?;
    Ok(payload)
}

/// Reads one structured chunk; `Ok(true)` when it ends its part's reply.
fn read_chunk(
    input: &mut impl Read,
    parent: &mut Parent,
    part: u64,
    chunk: &StructuredReplyHeader,
    rules: &ReplyRules<'_>,
) -> Result<bool, String> {
    let is_read = parent.command == wire::CMD_READ;
    match chunk.reply_type {
        wire::REPLY_TYPE_NONE => {
            if chunk.length_bytes != 0 || !chunk.is_done() {
                return Err(format!(
                    "protocol violation: NBD_REPLY_TYPE_NONE with length {} and flags {:#x} (length 0 and the DONE flag required)",
                    chunk.length_bytes, chunk.flags
                ));
            }
        }
        wire::REPLY_TYPE_OFFSET_DATA if is_read => {
            if chunk.length_bytes < 9 {
                return Err(format!(
                    "protocol violation: NBD_REPLY_TYPE_OFFSET_DATA of {} bytes (at least 9)",
                    chunk.length_bytes
                ));
            }
            let mut offset = [0u8; 8];
            input
                .read_exact(&mut offset)
                .map_err(|error| format!("receiving a reply chunk failed: {error}"))?;
            let data_bytes = u64::from(chunk.length_bytes - 8);
            let start = claim_content(parent, part, u64::from_be_bytes(offset), data_bytes)?;
            input
                .read_exact(read_buffer_range(parent, start, data_bytes))
                .map_err(|error| format!("receiving read data failed: {error}"))?;
        }
        wire::REPLY_TYPE_OFFSET_HOLE if is_read => {
            let payload = read_payload(input, chunk.length_bytes)?;
            let (offset_bytes, hole_bytes) = wire::decode_offset_hole_payload(&payload)
                .map_err(|error| format!("protocol violation: {error}"))?;
            let start = claim_content(parent, part, offset_bytes, u64::from(hole_bytes))?;
            read_buffer_range(parent, start, u64::from(hole_bytes)).fill(0);
        }
        reply_type if reply_type & wire::REPLY_TYPE_FLAG_ERROR != 0 => {
            let payload = read_payload(input, chunk.length_bytes)?;
            let error = wire::decode_error_payload(reply_type, &payload)
                .map_err(|error| format!("protocol violation: {error}"))?;
            if error.error == 0 {
                return Err("protocol violation: an error chunk with error 0".to_string());
            }
            record_server_error(parent, error.error, &error.message, rules)?;
        }
        other => {
            return Err(format!(
                "protocol violation: structured reply type {other} to {}",
                wire::command_name(parent.command)
            ))
        }
    }
    if chunk.is_done() && parent.status.is_none() && is_read {
        check_part_covered(parent, part)?;
    }
    Ok(chunk.is_done())
}

/// Checks that a content chunk lies inside its part and overlaps nothing received
/// before; records it and returns its start relative to the parent.
fn claim_content(
    parent: &mut Parent,
    part: u64,
    offset_bytes: u64,
    length_bytes: u64,
) -> Result<u64, String> {
    let (part_start, part_length) = parent.part_range(part);
    let absolute_start = parent.offset_bytes + part_start;
    let inside = offset_bytes >= absolute_start
        && offset_bytes
            .checked_add(length_bytes)
            .is_some_and(|end| end <= absolute_start + part_length);
    if !inside {
        return Err(format!(
            "protocol violation: read data at bytes {offset_bytes}+{length_bytes}, outside the request's {absolute_start}+{part_length}"
        ));
    }
    let start = offset_bytes - parent.offset_bytes;
    let end = start + length_bytes;
    if parent
        .covered
        .iter()
        .any(|&(covered_start, covered_end)| start < covered_end && covered_start < end)
    {
        return Err(format!(
            "protocol violation: read data at bytes {offset_bytes}+{length_bytes} overlaps data already received"
        ));
    }
    parent.covered.push((start, end));
    Ok(start)
}

/// A successful read reply covers its whole part.
fn check_part_covered(parent: &Parent, part: u64) -> Result<(), String> {
    let (part_start, part_length) = parent.part_range(part);
    let part_end = part_start + part_length;
    let covered: u64 = parent
        .covered
        .iter()
        .map(|&(start, end)| end.min(part_end).saturating_sub(start.max(part_start)))
        .sum();
    if covered != part_length {
        return Err(format!(
            "protocol violation: a successful read reply covered {covered} of its {part_length} bytes"
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The device's state: admission, completions, durability, reconnect policy.

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

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(first_delay_ms: u64) -> ClientPolicy {
        ClientPolicy {
            write_with_fua: false,
            read_only: false,
            reconnect_attempts: 8,
            reconnect_first_delay_ms: first_delay_ms,
            reconnect_durability: ReconnectDurability::default(),
        }
    }

    #[test]
    fn the_backoff_doubles_from_the_first_delay_up_to_one_second() {
        let delays: Vec<u64> = (0..7)
            .map(|attempt| policy(50).reconnect_delay_ms(attempt))
            .collect();
        assert_eq!(delays, [50, 100, 200, 400, 800, 1000, 1000]);
        let from_zero: Vec<u64> = (0..4)
            .map(|attempt| policy(0).reconnect_delay_ms(attempt))
            .collect();
        assert_eq!(from_zero, [0, 1, 2, 4]);
        assert_eq!(policy(5000).reconnect_delay_ms(0), 5000);
        assert_eq!(policy(5000).reconnect_delay_ms(1), 1000);
        assert_eq!(policy(u64::MAX).reconnect_delay_ms(40), 1000);
    }

    #[test]
    fn silence_ends_only_a_connection_with_requests_waiting() {
        assert_eq!(
            silence_ends_connection("d", 0, 10_000_000_000, 1_000_000),
            None
        );
        assert_eq!(silence_ends_connection("d", 3, 999_999, 1_000_000), None);
        let reason = silence_ends_connection("d", 3, 1_000_000, 1_000_000).expect("timed out");
        assert_eq!(
            reason,
            "d: no reply from the server for 1 ms with 3 requests in flight"
        );
    }

    #[test]
    fn cookies_name_parent_and_part() {
        let cookie = 77 << PART_BITS | 5;
        assert_eq!(parent_id_of_cookie(cookie), 77);
        assert_eq!(part_of_cookie(cookie), 5);
    }
}
