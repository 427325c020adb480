//! An entry point for fuzzing the client core's reply decoding (#15, item 6) from outside
//! the crate: one device request in flight (a read, write, flush or trim, cut into parts
//! as the real client cuts it) and a byte stream from a hostile server fed to the same
//! functions the real reader and the simulation use ([`wire::read_reply_header`],
//! [`core::pending_part`], [`core::read_reply_body`]) until the request finishes, the
//! stream ends or the connection counts as lost.
//!
//! Used by the cargo-fuzz target `nbd_client_replies` (fuzz/) and the seeded fuzz test
//! `tests/fuzz_wire.rs`; not part of the client's interface (hidden from the docs).

use std::sync::Arc;

use flashpipe_device::{IoBuf, Operation, Request};

use crate::core::{self, Parent, ReplyRules, PART_BITS};
use flashpipe_nbd_wire as wire;

/// Which device request the replies answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FuzzedCommand {
    /// A read into a zeroed buffer.
    Read,
    /// A write (its replies carry no data).
    Write,
    /// A flush (one part, no range).
    Flush,
    /// A trim.
    Trim,
}

/// The request in flight and what was negotiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FuzzedRequest {
    /// The command.
    pub command: FuzzedCommand,
    /// Whether structured replies were negotiated.
    pub structured_replies: bool,
    /// First byte of the export it touches.
    pub offset_bytes: u64,
    /// Bytes it touches (at most [`MAX_FUZZED_REQUEST_BYTES`]; 0 for a flush).
    pub length_bytes: u64,
    /// Bytes per part, at least 1 (the export's maximum payload).
    pub part_bytes: u64,
}

/// Largest request a fuzz case builds (its read buffer is allocated).
pub const MAX_FUZZED_REQUEST_BYTES: u64 = 1 << 16;

/// What the replies did to the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FuzzedRepliesOutcome {
    /// Every part was answered.
    pub finished: bool,
    /// The reason the connection counts as lost (a protocol violation, the stream
    /// ending), if it does.
    pub connection_lost: Option<String>,
    /// The error the request completes with, if a server error was recorded.
    pub request_error: Option<String>,
    /// Reply messages taken (headers read).
    pub replies_taken: usize,
    /// The bytes a finished read returned (empty for other commands).
    pub read_data: Vec<u8>,
}

/// Feeds `stream` to one request as a server's replies; never panics on any stream.
pub fn feed_replies(request: FuzzedRequest, stream: &[u8]) -> FuzzedRepliesOutcome {
    let device_name: Arc<str> = Arc::from("nbd://fuzzed/export");
    let rules = ReplyRules {
        device_name: &device_name,
        structured_replies: request.structured_replies,
    };
    let mut parent = build_parent(request);
    let mut input = stream;
    let mut replies_taken = 0;
    let connection_lost = loop {
        if parent.is_finished() {
            break None;
        }
        let header = match wire::read_reply_header(&mut input) {
            Ok(header) => header,
            Err(error) => break Some(core::describe_reply_header_error(&device_name, error)),
        };
        replies_taken += 1;
        let cookie = core::cookie_of_reply(&header);
        if core::parent_id_of_cookie(cookie) != parent.id {
            break Some(format!(
                "{device_name}: protocol violation: a reply for unknown cookie {cookie:#x}"
            ));
        }
        let part = match core::pending_part(&parent, cookie, &device_name) {
            Ok(part) => part,
            Err(reason) => break Some(reason),
        };
        if let Err(reason) = core::read_reply_body(&mut input, &mut parent, part, &header, &rules) {
            break Some(reason);
        }
    };
    let finished = parent.is_finished();
    let request_error = parent.status.as_ref().map(ToString::to_string);
    let read_data = match (&parent.request.operation, finished) {
        (Operation::Read { buffer, .. }, true) => buffer.to_vec(),
        _ => Vec::new(),
    };
    FuzzedRepliesOutcome {
        finished,
        connection_lost,
        request_error,
        replies_taken,
        read_data,
    }
}

/// The cookie the real client gives part `part` of the fuzzed request.
pub fn cookie_of_part(part: u64) -> u64 {
    FUZZED_PARENT_ID << PART_BITS | part
}

const FUZZED_PARENT_ID: u64 = 1;

fn build_parent(request: FuzzedRequest) -> Box<Parent> {
    let length_bytes = match request.command {
        FuzzedCommand::Flush => 0,
        _ => request.length_bytes.clamp(1, MAX_FUZZED_REQUEST_BYTES),
    };
    let offset_bytes = match request.command {
        FuzzedCommand::Flush => 0,
        _ => request.offset_bytes.min(u64::MAX / 2),
    };
    let part_bytes = request.part_bytes.clamp(1, MAX_FUZZED_REQUEST_BYTES);
    let (command, device_request) = match request.command {
        FuzzedCommand::Read => (
            wire::CMD_READ,
            Request::read(1, 0, IoBuf::zeroed(length_bytes as usize)),
        ),
        FuzzedCommand::Write => (
            wire::CMD_WRITE,
            Request::write(1, 0, IoBuf::zeroed(length_bytes as usize)),
        ),
        FuzzedCommand::Flush => (wire::CMD_FLUSH, Request::flush(1)),
        FuzzedCommand::Trim => (wire::CMD_TRIM, Request::trim(1, 0, 1)),
    };
    let parts = length_bytes.div_ceil(part_bytes).max(1);
    Box::new(Parent {
        id: FUZZED_PARENT_ID,
        request: device_request,
        command,
        flags: 0,
        offset_bytes,
        length_bytes,
        part_bytes,
        parts_finished: vec![false; parts as usize],
        status: None,
        covered: Vec::new(),
        covers_acknowledged_writes: 0,
    })
}
