//! The transmission phase of one NBD connection without I/O (no socket, no thread, no
//! clock), shared by the real server ([`super::transmission`], a reader and a writer
//! thread over a socket) and the simulated disk nodes (`crate::client::sim_network`, a
//! seeded link in virtual time).
//!
//! Two layers:
//! - the request rules, used by both drivers: [`frame`] (what a decoded header asks the
//!   reader to do: end the connection on `NBD_CMD_DISC`, refuse to frame a write payload
//!   over [`MAX_PAYLOAD_BYTES`], else read the payload) and [`plan`] (flags, range,
//!   alignment, permission and payload limits checked against the specification, then a
//!   [`DeviceJob`] for the export's device, a [`BlockStatusQuery`] for its allocation map,
//!   or an immediate reply: a refusal, or success for `NBD_CMD_CACHE` and empty ranges);
//! - [`NbdServerCore`], the whole phase as a state machine for a driver that only moves
//!   bytes: bytes in ([`NbdServerCore::receive`]) are cut into requests, one
//!   [`Step`] at a time ([`NbdServerCore::next_step`]); job completions in
//!   ([`NbdServerCore::complete`], in any order) and reply bytes out
//!   ([`NbdServerCore::take_replies`], one message per reply, encoded as the real
//!   server's writer encodes them). Requests taken but not answered are bounded by the
//!   core's credits: past `request_limit` it asks for a completion before it reads on.
//!
//! The real server's reader frames requests itself (it reads write payloads from the
//! socket straight into pooled buffers, with no copy) and calls [`frame`] and [`plan`];
//! its replies are encoded by the same function as the core's
//! ([`super::replies::encode_reply_header`]).

use std::collections::VecDeque;

use flashpipe_device::IoBuf;
use thiserror::Error;

use super::extents::AllocationRun;
use super::handshake::Negotiated;
use super::replies::encode_reply_header;
use super::worker::{JobKind, OutgoingReply, ReplyBody};
use crate::wire::*;

/// Most extents in one block status reply (well under the specification's 2^20).
pub const MAX_EXTENTS_PER_REPLY: usize = 65_536;

/// What the core knows of the export and of the handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreSettings {
    /// Export size in bytes.
    pub size_bytes: u64,
    /// The minimum block size: offsets and lengths must be multiples of it.
    pub block_size_bytes: u32,
    /// Writes, trims and write-zeroes are refused with `NBD_EPERM`.
    pub read_only: bool,
    /// Trimmed blocks read as zeroes (write-zeroes may trim; holes report `STATE_ZERO`).
    pub trim_reads_zeroes: bool,
    /// Structured replies were negotiated.
    pub structured_replies: bool,
    /// The `base:allocation` context id, when one was selected.
    pub base_allocation_context: Option<u32>,
}

impl CoreSettings {
    /// The settings of a connection that negotiated `negotiated`.
    pub fn from_negotiated(negotiated: &Negotiated) -> CoreSettings {
        let export = &negotiated.export;
        CoreSettings {
            size_bytes: export.size_bytes,
            block_size_bytes: export.block_size_bytes,
            read_only: export.read_only,
            trim_reads_zeroes: export.trim_reads_zeroes,
            structured_replies: negotiated.structured_replies,
            base_allocation_context: negotiated.base_allocation_context,
        }
    }
}

/// A request the client sent that cannot be framed: the connection ends.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CoreEnd {
    /// The client sent `NBD_CMD_DISC`.
    #[error("the client disconnected (NBD_CMD_DISC)")]
    Disconnect,
    /// The bytes are not a request the server can frame.
    #[error("malformed request: {0}")]
    Malformed(String),
}

/// What the reader does after a decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `NBD_CMD_DISC`: stop reading; answer what is in flight.
    Disconnect,
    /// Read `payload_bytes` of payload (zero but for a write), then plan the request.
    Request {
        /// Payload bytes that follow the header.
        payload_bytes: usize,
    },
}

/// Frames a decoded header: a write payload over [`MAX_PAYLOAD_BYTES`] cannot be read
/// (the connection ends), `NBD_CMD_DISC` ends reading.
pub fn frame(header: &RequestHeader) -> Result<Framing, CoreEnd> {
    if header.has_payload() && header.length_bytes > MAX_PAYLOAD_BYTES {
        return Err(CoreEnd::Malformed(format!(
            "NBD_CMD_WRITE of {} bytes, limit {MAX_PAYLOAD_BYTES}",
            header.length_bytes
        )));
    }
    if header.command == CMD_DISC {
        return Ok(Framing::Disconnect);
    }
    let payload_bytes = if header.has_payload() {
        header.length_bytes as usize
    } else {
        0
    };
    Ok(Framing::Request { payload_bytes })
}

/// Work for the export's device; its reply comes from the job's completion.
#[derive(Debug)]
pub struct DeviceJob {
    /// The request's cookie.
    pub cookie: u64,
    /// What to do, in blocks.
    pub kind: JobKind,
    /// Flush before replying (FUA).
    pub force_unit_access: bool,
}

/// A `NBD_CMD_BLOCK_STATUS` request: the allocation map's runs over
/// `first_block..end_block`, at most `run_limit` of them, answer it
/// ([`BlockStatusQuery::reply`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockStatusQuery {
    /// The request's cookie.
    pub cookie: u64,
    /// The `base:allocation` context id.
    pub context_id: u32,
    /// First block asked about.
    pub first_block: u64,
    /// One past the last block asked about.
    pub end_block: u64,
    /// Most runs in the reply (1 under `NBD_CMD_FLAG_REQ_ONE`).
    pub run_limit: usize,
}

impl BlockStatusQuery {
    /// The reply listing `runs` (in order, from `first_block`).
    pub fn reply(&self, settings: &CoreSettings, runs: &[AllocationRun]) -> OutgoingReply {
        let block_size_bytes = u64::from(settings.block_size_bytes);
        let hole_flags = if settings.trim_reads_zeroes {
            STATE_HOLE | STATE_ZERO
        } else {
            STATE_HOLE
        };
        let extents = runs
            .iter()
            .take(self.run_limit)
            .map(|run| BlockStatusExtent {
                length_bytes: (run.block_count * block_size_bytes) as u32,
                flags: if run.is_hole { hole_flags } else { 0 },
            })
            .collect();
        OutgoingReply {
            cookie: self.cookie,
            body: ReplyBody::BlockStatus {
                context_id: self.context_id,
                extents,
            },
        }
    }
}

/// What becomes of one framed request.
#[derive(Debug)]
pub enum Plan {
    /// Run it on the export's device.
    Job(DeviceJob),
    /// Answer it from the allocation map.
    BlockStatus(BlockStatusQuery),
    /// Answer it now (a refusal, or a success with nothing to do).
    Reply(OutgoingReply),
}

/// Checks a framed request against the specification and the export and says what
/// to do with it; `payload` is a write's data (ignored for other commands).
pub fn plan(settings: &CoreSettings, header: &RequestHeader, payload: Option<IoBuf>) -> Plan {
    let planned = check(settings, header).and_then(|()| route(settings, header, payload));
    match planned {
        Ok(plan) => plan,
        Err(refusal) => Plan::Reply(OutgoingReply {
            cookie: header.cookie,
            body: ReplyBody::Error {
                error: refusal.error,
                message: refusal.message,
            },
        }),
    }
}

/// A request refused with an NBD error.
struct Refusal {
    error: u32,
    message: String,
}

fn refuse(error: u32, message: String) -> Refusal {
    Refusal { error, message }
}

/// Flags, range, alignment, permission and read length, as the specification asks.
fn check(settings: &CoreSettings, header: &RequestHeader) -> Result<(), Refusal> {
    let name = command_name(header.command);
    let allowed_flags = CMD_FLAG_FUA
        | match header.command {
            CMD_READ if settings.structured_replies => CMD_FLAG_DF,
            CMD_WRITE_ZEROES => CMD_FLAG_NO_HOLE | CMD_FLAG_FAST_ZERO,
            CMD_BLOCK_STATUS => CMD_FLAG_REQ_ONE,
            _ => 0,
        };
    if header.flags & !allowed_flags != 0 {
        return Err(refuse(
            NBD_EINVAL,
            format!(
                "{name}: flags {:#x} not valid for it (allowed {allowed_flags:#x})",
                header.flags
            ),
        ));
    }
    let ranged = matches!(
        header.command,
        CMD_READ | CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES | CMD_BLOCK_STATUS | CMD_CACHE
    );
    if header.command == CMD_FLUSH && (header.offset_bytes != 0 || header.length_bytes != 0) {
        return Err(refuse(
            NBD_EINVAL,
            format!("{name}: offset and length must be zero"),
        ));
    }
    if !ranged {
        return if header.command == CMD_FLUSH {
            Ok(())
        } else {
            Err(refuse(
                NBD_EINVAL,
                format!("unknown command {}", header.command),
            ))
        };
    }
    let end_bytes = header
        .offset_bytes
        .checked_add(u64::from(header.length_bytes));
    if end_bytes.is_none_or(|end| end > settings.size_bytes) {
        let error = if matches!(header.command, CMD_WRITE | CMD_WRITE_ZEROES) {
            NBD_ENOSPC
        } else {
            NBD_EINVAL
        };
        return Err(refuse(
            error,
            format!(
                "{name}: {} bytes at offset {} go past the export's {} bytes",
                header.length_bytes, header.offset_bytes, settings.size_bytes
            ),
        ));
    }
    let block_size_bytes = u64::from(settings.block_size_bytes);
    if header.offset_bytes % block_size_bytes != 0
        || u64::from(header.length_bytes) % block_size_bytes != 0
    {
        return Err(refuse(
            NBD_EINVAL,
            format!(
                "{name}: offset {} and length {} must be multiples of the {block_size_bytes}-byte minimum block",
                header.offset_bytes, header.length_bytes
            ),
        ));
    }
    if settings.read_only && matches!(header.command, CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES) {
        return Err(refuse(
            NBD_EPERM,
            format!("{name}: the export is read-only"),
        ));
    }
    if header.command == CMD_READ && header.length_bytes > MAX_PAYLOAD_BYTES {
        return Err(refuse(
            NBD_EINVAL,
            format!(
                "{name}: {} bytes, limit {MAX_PAYLOAD_BYTES}",
                header.length_bytes
            ),
        ));
    }
    Ok(())
}

/// A checked request's work.
fn route(
    settings: &CoreSettings,
    header: &RequestHeader,
    payload: Option<IoBuf>,
) -> Result<Plan, Refusal> {
    let block_size_bytes = u64::from(settings.block_size_bytes);
    let first_block = header.offset_bytes / block_size_bytes;
    let block_count = u64::from(header.length_bytes) / block_size_bytes;
    let done = || {
        Ok(Plan::Reply(OutgoingReply {
            cookie: header.cookie,
            body: ReplyBody::Done,
        }))
    };
    let kind = match header.command {
        CMD_FLUSH => JobKind::Flush,
        CMD_CACHE => return done(),
        CMD_BLOCK_STATUS => return block_status(settings, header).map(Plan::BlockStatus),
        _ if block_count == 0 => return done(),
        CMD_READ => JobKind::Read {
            first_block,
            block_count,
        },
        CMD_WRITE => JobKind::Write {
            first_block,
            buffer: payload.unwrap_or_else(IoBuf::empty),
        },
        CMD_TRIM => JobKind::Trim {
            first_block,
            block_count,
        },
        _ => write_zeroes_kind(settings, header, first_block, block_count)?,
    };
    Ok(Plan::Job(DeviceJob {
        cookie: header.cookie,
        kind,
        force_unit_access: header.flags & CMD_FLAG_FUA != 0,
    }))
}

/// `WRITE_ZEROES`: a trim where trimmed blocks read as zeroes and a hole is allowed
/// (fast), else zeroes written (not fast: `FAST_ZERO` gets `NBD_ENOTSUP`).
fn write_zeroes_kind(
    settings: &CoreSettings,
    header: &RequestHeader,
    first_block: u64,
    block_count: u64,
) -> Result<JobKind, Refusal> {
    let may_trim = settings.trim_reads_zeroes && header.flags & CMD_FLAG_NO_HOLE == 0;
    if may_trim {
        return Ok(JobKind::Trim {
            first_block,
            block_count,
        });
    }
    if header.flags & CMD_FLAG_FAST_ZERO != 0 {
        return Err(refuse(
            NBD_ENOTSUP,
            "NBD_CMD_WRITE_ZEROES: zeroes would be written, no faster than a write".to_string(),
        ));
    }
    Ok(JobKind::WriteZeroes {
        first_block,
        block_count,
    })
}

fn block_status(
    settings: &CoreSettings,
    header: &RequestHeader,
) -> Result<BlockStatusQuery, Refusal> {
    let (true, Some(context_id)) = (
        settings.structured_replies,
        settings.base_allocation_context,
    ) else {
        return Err(refuse(
            NBD_EINVAL,
            "NBD_CMD_BLOCK_STATUS without a metadata context selected".to_string(),
        ));
    };
    if header.length_bytes == 0 {
        return Err(refuse(
            NBD_EINVAL,
            "NBD_CMD_BLOCK_STATUS of length 0".to_string(),
        ));
    }
    let block_size_bytes = u64::from(settings.block_size_bytes);
    let first_block = header.offset_bytes / block_size_bytes;
    let end_block = first_block + u64::from(header.length_bytes) / block_size_bytes;
    let run_limit = if header.flags & CMD_FLAG_REQ_ONE != 0 {
        1
    } else {
        MAX_EXTENTS_PER_REPLY
    };
    Ok(BlockStatusQuery {
        cookie: header.cookie,
        context_id,
        first_block,
        end_block,
        run_limit,
    })
}

/// What [`NbdServerCore::next_step`] asks of its driver.
#[derive(Debug)]
pub enum Step {
    /// Run this job on the export's device; hand its reply to
    /// [`NbdServerCore::complete`] (any time, in any order).
    Job(DeviceJob),
    /// Answer this query from the allocation map with [`NbdServerCore::complete`]
    /// ([`BlockStatusQuery::reply`]).
    BlockStatus(BlockStatusQuery),
    /// A request was answered at once; its reply waits in
    /// [`NbdServerCore::take_replies`].
    Answered,
    /// No whole request is buffered: [`NbdServerCore::receive`] more bytes.
    NeedInput,
    /// `request_limit` requests are unanswered: complete one first.
    NeedCompletion,
    /// Reading is over (replies of requests in flight may still be completed and
    /// sent); bytes received later are ignored.
    End(CoreEnd),
}

/// The transmission phase of one connection as a state machine (the module's
/// documentation).
#[derive(Debug)]
pub struct NbdServerCore {
    settings: CoreSettings,
    request_limit: usize,
    /// Bytes received and not yet taken, from `input_start`.
    input: Vec<u8>,
    input_start: usize,
    /// Requests handed out as jobs or queries and not yet completed.
    unanswered: usize,
    end: Option<CoreEnd>,
    /// Encoded replies, one message each, oldest first.
    replies: VecDeque<Vec<u8>>,
}

impl NbdServerCore {
    /// A core for a connection with `settings`, holding at most `request_limit`
    /// requests unanswered (at least one).
    pub fn new(settings: CoreSettings, request_limit: usize) -> NbdServerCore {
        assert!(request_limit > 0, "a connection needs at least one credit");
        assert!(
            settings.block_size_bytes > 0,
            "an export's block size is positive"
        );
        NbdServerCore {
            settings,
            request_limit,
            input: Vec::new(),
            input_start: 0,
            unanswered: 0,
            end: None,
            replies: VecDeque::new(),
        }
    }

    /// The settings the core checks requests against.
    pub fn settings(&self) -> &CoreSettings {
        &self.settings
    }

    /// Requests handed out and not yet completed.
    pub fn unanswered(&self) -> usize {
        self.unanswered
    }

    /// Bytes received and not yet cut into requests.
    pub fn buffered_bytes(&self) -> usize {
        self.input.len() - self.input_start
    }

    /// Takes bytes the client sent (any cut: part of a request, several requests).
    pub fn receive(&mut self, bytes: &[u8]) {
        if self.end.is_some() {
            return;
        }
        if self.input_start > 0 && self.input_start == self.input.len() {
            self.input.clear();
            self.input_start = 0;
        }
        self.input.extend_from_slice(bytes);
    }

    /// Takes the next request buffered, if a credit allows it, and says what to do.
    pub fn next_step(&mut self) -> Step {
        if let Some(end) = &self.end {
            return Step::End(end.clone());
        }
        if self.unanswered >= self.request_limit {
            return Step::NeedCompletion;
        }
        let buffered = &self.input[self.input_start..];
        let Some(header_bytes) = buffered.first_chunk::<REQUEST_HEADER_BYTES>() else {
            return Step::NeedInput;
        };
        let header = match RequestHeader::decode(header_bytes) {
            Ok(header) => header,
            Err(error) => return self.finish(CoreEnd::Malformed(error.to_string())),
        };
        let payload_bytes = match frame(&header) {
            Ok(Framing::Disconnect) => return self.finish(CoreEnd::Disconnect),
            Ok(Framing::Request { payload_bytes }) => payload_bytes,
            Err(end) => return self.finish(end),
        };
        if buffered.len() < REQUEST_HEADER_BYTES + payload_bytes {
            return Step::NeedInput;
        }
        let payload_start = self.input_start + REQUEST_HEADER_BYTES;
        let payload = header
            .has_payload()
            .then(|| IoBuf::from_slice(&self.input[payload_start..payload_start + payload_bytes]));
        self.input_start = payload_start + payload_bytes;
        match plan(&self.settings, &header, payload) {
            Plan::Job(job) => {
                self.unanswered += 1;
                Step::Job(job)
            }
            Plan::BlockStatus(query) => {
                self.unanswered += 1;
                Step::BlockStatus(query)
            }
            Plan::Reply(reply) => {
                self.encode(reply);
                Step::Answered
            }
        }
    }

    /// A job or query handed out by [`NbdServerCore::next_step`] is done: its reply
    /// is encoded and its credit returned.
    pub fn complete(&mut self, reply: OutgoingReply) {
        assert!(
            self.unanswered > 0,
            "a completion for a request the core did not hand out"
        );
        self.unanswered -= 1;
        self.encode(reply);
    }

    /// The reply messages encoded so far, oldest first (each a whole simple reply or
    /// structured chunk, data included).
    pub fn take_replies(&mut self) -> Vec<Vec<u8>> {
        self.replies.drain(..).collect()
    }

    fn finish(&mut self, end: CoreEnd) -> Step {
        self.end = Some(end.clone());
        self.input = Vec::new();
        self.input_start = 0;
        Step::End(end)
    }

    fn encode(&mut self, reply: OutgoingReply) {
        let mut message = Vec::new();
        if let Some(data) =
            encode_reply_header(self.settings.structured_replies, reply, &mut message)
        {
            message.extend_from_slice(data.as_slice());
        }
        self.replies.push_back(message);
    }
}

#[cfg(test)]
mod tests;
