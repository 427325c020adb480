//! The transmission phase of one connection: a reader (this thread) decodes requests,
//! checks them and serves them; a writer thread sends the replies of requests the
//! export's worker completed, out of order, by cookie.
//!
//! A request's device work is tried on this thread first ([`worker::try_inline`]): when
//! the export's worker is free and the device completes at submission (a RAM disk) the
//! reply is ready at once and joins this thread's own batch of replies, with no thread
//! hand-off (a large read's reply goes to the writer thread, so that sending it overlaps
//! with copying the next: [`WRITER_THREAD_MIN_DATA_BYTES`]). Otherwise the job goes to the worker over its channel, as it must for a
//! device that completes later. The reader writes its batch (one `writev`) before it
//! could block: when no whole request is buffered, before waiting for a credit, when the
//! batch is full. Refusals and block status replies join the same batch.
//!
//! Requests in flight per connection are bounded by credits: the reader takes one per
//! request before serving it and whoever writes the reply returns it, so a client
//! sending faster than the device serves waits in TCP, not in server memory.
//!
//! A request the protocol lets us answer (bad flags, bad range, misaligned, unknown
//! command) gets an error reply and the connection goes on. A request we cannot frame
//! (wrong magic, a write payload over [`MAX_PAYLOAD_BYTES`]) ends this connection only.

use std::io::{BufReader, Read, Write};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use flashpipe_base::{WaitPolicy, Waiter};
use flashpipe_device::IoBuf;
use thiserror::Error;

use super::buffers::BufferRecycler;
use super::export::ExportHandle;
use super::handshake::Negotiated;
use super::replies::{ReplyBatch, ReplySink};
use super::worker::{self, InlineOutcome, Job, JobKind, OutgoingReply, ReplyBody, SharedWorker};
use crate::wire::*;

/// Most extents in one block status reply (well under the specification's 2^20).
pub const MAX_EXTENTS_PER_REPLY: usize = 65_536;
/// Read replies with at least this much data, served on the reader's thread, are
/// written by the writer thread: the reader goes on copying the next request's data
/// while the writer sends this one (two copies per large read overlap; a hand-off costs
/// far less than either), where a small reply is cheaper written by the reader.
pub const WRITER_THREAD_MIN_DATA_BYTES: usize = 256 * 1024;

/// How the transmission phase ended.
#[derive(Debug, Error)]
pub enum TransmissionEnd {
    /// The client sent `NBD_CMD_DISC` (in-flight requests were answered first).
    #[error("the client disconnected (NBD_CMD_DISC)")]
    Disconnect,
    /// The client closed the connection.
    #[error("the client closed the connection")]
    ClientLeft,
    /// The client sent something that cannot be framed; the connection was dropped.
    #[error("malformed request: {0}")]
    Malformed(String),
    /// The reply stream failed.
    #[error("the connection failed while replying")]
    WriterGone,
}

/// Where a connection's requests go and its replies come from.
pub struct TransmissionSetup<'a> {
    /// What the handshake settled.
    pub negotiated: &'a Negotiated,
    /// The export's worker, for serving requests on the reader's thread (`None`: every
    /// job goes over the worker's channel).
    pub worker: Option<SharedWorker>,
    /// Requests in flight at most.
    pub request_limit: usize,
    /// How long the writer polls for a reply before parking.
    pub spin: WaitPolicy,
    /// The server's buffer pool.
    pub buffers: &'a Arc<BufferRecycler>,
}

/// Serves requests on `reader` until the client leaves; replies go out through
/// `writer`, shared by this thread and a writer thread that runs until every reply of
/// the export's worker is written.
pub fn serve_transmission<R: Read>(
    reader: &mut BufReader<R>,
    writer: Box<dyn Write + Send>,
    setup: TransmissionSetup<'_>,
    hard_disconnect: &dyn Fn(),
) -> TransmissionEnd {
    let request_limit = setup.request_limit;
    let (reply_sender, reply_receiver) = crossbeam_channel::unbounded::<OutgoingReply>();
    let (credit_sender, credit_receiver) = crossbeam_channel::bounded::<()>(request_limit);
    for _ in 0..request_limit {
        credit_sender
            .send(())
            .expect("the credit channel holds request_limit credits");
    }
    let structured_replies = setup.negotiated.structured_replies;
    let sink = Arc::new(ReplySink::new(writer));
    let writer_buffers = Arc::clone(setup.buffers);
    let writer_sink = Arc::clone(&sink);
    let writer_credits = credit_sender.clone();
    let spin = setup.spin;
    let writer_thread = std::thread::Builder::new()
        .name("nbd-writer".to_string())
        .spawn(move || {
            write_replies(
                &writer_sink,
                reply_receiver,
                writer_credits,
                structured_replies,
                spin,
                &writer_buffers,
            )
        });
    let Ok(writer_thread) = writer_thread else {
        return TransmissionEnd::WriterGone;
    };
    let mut session = Session {
        buffers: Arc::clone(setup.buffers),
        export: Arc::clone(&setup.negotiated.export),
        negotiated: setup.negotiated,
        worker: setup.worker,
        replies: reply_sender,
        credits: credit_receiver,
        credit_returns: credit_sender,
        sink,
        batch: ReplyBatch::new(structured_replies),
    };
    let mut end = session.read_requests(reader);
    if matches!(
        end,
        TransmissionEnd::Disconnect | TransmissionEnd::ClientLeft
    ) {
        if let Err(writer_end) = session.write_batch() {
            end = writer_end;
        }
    }
    drop(session);
    if matches!(end, TransmissionEnd::Malformed(_)) {
        hard_disconnect();
    }
    let writer_ok = writer_thread.join().unwrap_or(false);
    match end {
        TransmissionEnd::Disconnect | TransmissionEnd::ClientLeft if !writer_ok => {
            TransmissionEnd::WriterGone
        }
        end => end,
    }
}

/// The writer: writes the worker's replies in batches as they arrive; returns whether
/// every write succeeded.
fn write_replies(
    sink: &ReplySink,
    replies: Receiver<OutgoingReply>,
    credits: Sender<()>,
    structured_replies: bool,
    spin: WaitPolicy,
    buffers: &BufferRecycler,
) -> bool {
    let mut batch = ReplyBatch::new(structured_replies);
    let waiter = Waiter::new(spin);
    while let Ok(reply) = waiter.receive(&replies).0 {
        batch.push(reply);
        while !batch.is_full() {
            match replies.try_recv() {
                Ok(reply) => batch.push(reply),
                Err(_) => break,
            }
        }
        match batch.write_to(sink, buffers) {
            Ok(count) => return_credits(&credits, count),
            Err(_) => return false,
        }
    }
    true
}

fn return_credits(credits: &Sender<()>, count: usize) {
    for _ in 0..count {
        // The reader may be gone; a credit nobody takes is harmless.
        let _ = credits.try_send(());
    }
}

struct Session<'a> {
    buffers: Arc<BufferRecycler>,
    export: Arc<ExportHandle>,
    negotiated: &'a Negotiated,
    worker: Option<SharedWorker>,
    /// Where the worker sends replies for the writer thread.
    replies: Sender<OutgoingReply>,
    credits: Receiver<()>,
    /// Credits of replies this thread wrote go back here.
    credit_returns: Sender<()>,
    sink: Arc<ReplySink>,
    /// Replies this thread produced, not yet written.
    batch: ReplyBatch,
}

/// A request refused with an NBD error.
struct Refusal {
    error: u32,
    message: String,
}

fn refuse(error: u32, message: String) -> Refusal {
    Refusal { error, message }
}

impl Session<'_> {
    fn read_requests<R: Read>(&mut self, reader: &mut BufReader<R>) -> TransmissionEnd {
        let mut header_bytes = [0u8; REQUEST_HEADER_BYTES];
        loop {
            if reader.buffer().len() < REQUEST_HEADER_BYTES {
                if let Err(end) = self.write_batch() {
                    return end;
                }
            }
            if let Err(error) = reader.read_exact(&mut header_bytes) {
                return if error.kind() == std::io::ErrorKind::UnexpectedEof {
                    TransmissionEnd::ClientLeft
                } else {
                    TransmissionEnd::Malformed(format!("request header: {error}"))
                };
            }
            let header = match RequestHeader::decode(&header_bytes) {
                Ok(header) => header,
                Err(error) => return TransmissionEnd::Malformed(error.to_string()),
            };
            if header.has_payload() && header.length_bytes > MAX_PAYLOAD_BYTES {
                return TransmissionEnd::Malformed(format!(
                    "NBD_CMD_WRITE of {} bytes, limit {MAX_PAYLOAD_BYTES}",
                    header.length_bytes
                ));
            }
            if header.command == CMD_DISC {
                return TransmissionEnd::Disconnect;
            }
            if let Err(end) = self.take_credit() {
                return end;
            }
            if let Err(end) = self.serve_request(reader, header) {
                return end;
            }
            if self.batch.is_full() {
                if let Err(end) = self.write_batch() {
                    return end;
                }
            }
        }
    }

    /// Takes a credit, writing this thread's replies first if it must wait for one
    /// (their credits may be the ones it waits for).
    fn take_credit(&mut self) -> Result<(), TransmissionEnd> {
        match self.credits.try_recv() {
            Ok(()) => return Ok(()),
            Err(TryRecvError::Disconnected) => return Err(TransmissionEnd::WriterGone),
            Err(TryRecvError::Empty) => {}
        }
        self.write_batch()?;
        self.credits.recv().map_err(|_| TransmissionEnd::WriterGone)
    }

    /// Writes this thread's batch of replies and returns their credits.
    fn write_batch(&mut self) -> Result<(), TransmissionEnd> {
        let count = self
            .batch
            .write_to(&self.sink, &self.buffers)
            .map_err(|_| TransmissionEnd::WriterGone)?;
        return_credits(&self.credit_returns, count);
        Ok(())
    }

    fn serve_request<R: Read>(
        &mut self,
        reader: &mut BufReader<R>,
        header: RequestHeader,
    ) -> Result<(), TransmissionEnd> {
        let payload = if header.has_payload() {
            if reader.buffer().len() < header.length_bytes as usize {
                self.write_batch()?;
            }
            Some(read_payload(reader, header.length_bytes, &self.buffers)?)
        } else {
            None
        };
        let outcome = self
            .check(&header)
            .and_then(|()| self.dispatch(&header, payload));
        if let Err(refusal) = outcome {
            self.send(
                header.cookie,
                ReplyBody::Error {
                    error: refusal.error,
                    message: refusal.message,
                },
            );
        }
        Ok(())
    }

    /// Adds a reply to this thread's batch.
    fn send(&mut self, cookie: u64, body: ReplyBody) {
        self.batch.push(OutgoingReply { cookie, body });
    }

    /// A reply served on this thread: a large read's goes to the writer thread
    /// ([`WRITER_THREAD_MIN_DATA_BYTES`]), any other joins this thread's batch.
    fn keep_or_hand_over(&mut self, reply: OutgoingReply) {
        let large = matches!(&reply.body, ReplyBody::Data { buffer, .. }
            if buffer.len() >= WRITER_THREAD_MIN_DATA_BYTES);
        if large {
            if let Err(returned) = self.replies.send(reply) {
                // The writer thread has ended (a failed write): the batch's write will
                // find the connection broken too.
                self.batch.push(returned.into_inner());
            }
            return;
        }
        self.batch.push(reply);
    }

    /// Checks flags, range, alignment and permission against the specification.
    fn check(&self, header: &RequestHeader) -> Result<(), Refusal> {
        let name = command_name(header.command);
        let allowed_flags = CMD_FLAG_FUA
            | match header.command {
                CMD_READ if self.negotiated.structured_replies => CMD_FLAG_DF,
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
        if end_bytes.is_none_or(|end| end > self.export.size_bytes) {
            let error = if matches!(header.command, CMD_WRITE | CMD_WRITE_ZEROES) {
                NBD_ENOSPC
            } else {
                NBD_EINVAL
            };
            return Err(refuse(
                error,
                format!(
                    "{name}: {} bytes at offset {} go past the export's {} bytes",
                    header.length_bytes, header.offset_bytes, self.export.size_bytes
                ),
            ));
        }
        let block_size_bytes = u64::from(self.export.block_size_bytes);
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
        if self.export.read_only
            && matches!(header.command, CMD_WRITE | CMD_TRIM | CMD_WRITE_ZEROES)
        {
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

    fn dispatch(&mut self, header: &RequestHeader, payload: Option<IoBuf>) -> Result<(), Refusal> {
        let block_size_bytes = u64::from(self.export.block_size_bytes);
        let first_block = header.offset_bytes / block_size_bytes;
        let block_count = u64::from(header.length_bytes) / block_size_bytes;
        let force_unit_access = header.flags & CMD_FLAG_FUA != 0;
        let kind = match header.command {
            CMD_FLUSH => JobKind::Flush,
            CMD_CACHE => return self.reply_done(header.cookie),
            CMD_BLOCK_STATUS => return self.block_status(header),
            _ if block_count == 0 => return self.reply_done(header.cookie),
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
            _ => self.write_zeroes_kind(header, first_block, block_count)?,
        };
        let job = Job {
            reply_to: self.replies.clone(),
            cookie: header.cookie,
            kind,
            force_unit_access,
        };
        let job = match &self.worker {
            Some(shared) => match worker::try_inline(shared, job) {
                InlineOutcome::Replied(reply) => {
                    self.keep_or_hand_over(reply);
                    return Ok(());
                }
                InlineOutcome::Started { reap_needed } => {
                    if reap_needed {
                        if let Some(jobs) = self.export.job_sender() {
                            worker::send_reap(&jobs, &self.replies);
                        }
                    }
                    return Ok(());
                }
                InlineOutcome::Busy(job) => job,
            },
            None => job,
        };
        let Some(jobs) = self.export.job_sender() else {
            return Err(refuse(
                NBD_ESHUTDOWN,
                "the server is shutting down".to_string(),
            ));
        };
        jobs.send(job)
            .map_err(|_| refuse(NBD_ESHUTDOWN, "the export's worker has stopped".to_string()))
    }

    /// `WRITE_ZEROES`: a trim where trimmed blocks read as zeroes and a hole is allowed
    /// (fast), else zeroes written (not fast: `FAST_ZERO` gets `NBD_ENOTSUP`).
    fn write_zeroes_kind(
        &self,
        header: &RequestHeader,
        first_block: u64,
        block_count: u64,
    ) -> Result<JobKind, Refusal> {
        let may_trim = self.export.trim_reads_zeroes && header.flags & CMD_FLAG_NO_HOLE == 0;
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

    fn reply_done(&mut self, cookie: u64) -> Result<(), Refusal> {
        self.send(cookie, ReplyBody::Done);
        Ok(())
    }

    fn block_status(&mut self, header: &RequestHeader) -> Result<(), Refusal> {
        let (true, Some(context_id)) = (
            self.negotiated.structured_replies,
            self.negotiated.base_allocation_context,
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
        let block_size_bytes = u64::from(self.export.block_size_bytes);
        let first_block = header.offset_bytes / block_size_bytes;
        let end_block = first_block + u64::from(header.length_bytes) / block_size_bytes;
        let run_limit = if header.flags & CMD_FLAG_REQ_ONE != 0 {
            1
        } else {
            MAX_EXTENTS_PER_REPLY
        };
        let runs = self
            .export
            .extents
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .runs(first_block, end_block, run_limit);
        let hole_flags = if self.export.trim_reads_zeroes {
            STATE_HOLE | STATE_ZERO
        } else {
            STATE_HOLE
        };
        let extents = runs
            .iter()
            .map(|run| BlockStatusExtent {
                length_bytes: (run.block_count * block_size_bytes) as u32,
                flags: if run.is_hole { hole_flags } else { 0 },
            })
            .collect();
        self.send(
            header.cookie,
            ReplyBody::BlockStatus {
                context_id,
                extents,
            },
        );
        Ok(())
    }
}

fn read_payload(
    reader: &mut dyn Read,
    length_bytes: u32,
    buffers: &BufferRecycler,
) -> Result<IoBuf, TransmissionEnd> {
    let mut buffer = buffers.take(length_bytes as usize);
    reader
        .read_exact(buffer.as_mut_slice())
        .map_err(|error| TransmissionEnd::Malformed(format!("write payload: {error}")))?;
    Ok(buffer)
}
