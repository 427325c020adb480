//! Reply decoding for the client core: one simple reply or structured chunk read from any
//! [`Read`] into its parent and checked against the protocol (data inside the part, no
//! overlap, whole part covered, error chunks well formed, `NBD_ESHUTDOWN` as a lost
//! connection), the reply timeout's rule, and the words for a failed header read.

use std::io::Read;
use std::sync::Arc;

use flashpipe_device::{DeviceError, DeviceErrorKind, Operation};
use flashpipe_nbd_wire::{self as wire, ReplyHeader, StructuredReplyHeader};

use super::{part_of_cookie, Parent};

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
