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

use flashpipe_device::{Completion, DeviceError, Operation, Request};

use flashpipe_nbd_wire::{self as wire, ReplyHeader, RequestHeader};

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

mod replies;
mod state;
#[cfg(test)]
mod tests;

pub use replies::{
    describe_reply_header_error, pending_part, read_reply_body, silence_ends_connection, ReplyRules,
};
pub use state::{
    ClientCore, ClientPolicy, NbdDeviceCounters, ReconnectDurability, RecoveryStep,
    RECONNECT_DELAY_MAX_MS,
};
