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
//! What each request means is the I/O-free core's to say ([`core::frame`] and
//! [`core::plan`], shared with the simulated disk nodes): a request the protocol lets
//! us answer (bad flags, bad range, misaligned, unknown command) gets an error reply and
//! the connection goes on. A request we cannot frame (wrong magic, a write payload over
//! [`MAX_PAYLOAD_BYTES`]) ends this connection only. This thread keeps the framing's
//! reads (a write payload goes from the socket's buffer straight into a pooled buffer).

use std::io::{BufReader, Read, Write};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use flashpipe_base::{WaitPolicy, Waiter};
use flashpipe_device::IoBuf;
use thiserror::Error;

use super::buffers::BufferRecycler;
use super::core::{self, BlockStatusQuery, CoreEnd, CoreSettings, DeviceJob, Framing, Plan};
use super::export::ExportHandle;
use super::handshake::Negotiated;
use super::replies::{ReplyBatch, ReplySink};
use super::worker::{self, InlineOutcome, Job, OutgoingReply, ReplyBody, SharedWorker};
use crate::wire::*;

pub use super::core::MAX_EXTENTS_PER_REPLY;
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
        settings: CoreSettings::from_negotiated(setup.negotiated),
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

struct Session {
    buffers: Arc<BufferRecycler>,
    export: Arc<ExportHandle>,
    /// What the core checks requests against.
    settings: CoreSettings,
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

impl Session {
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
            let payload_bytes = match core::frame(&header) {
                Ok(Framing::Request { payload_bytes }) => payload_bytes,
                Ok(Framing::Disconnect) => return TransmissionEnd::Disconnect,
                Err(end) => return end.into(),
            };
            if let Err(end) = self.take_credit() {
                return end;
            }
            if let Err(end) = self.serve_request(reader, header, payload_bytes) {
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
        payload_bytes: usize,
    ) -> Result<(), TransmissionEnd> {
        let payload = if header.has_payload() {
            if reader.buffer().len() < payload_bytes {
                self.write_batch()?;
            }
            Some(read_payload(reader, payload_bytes, &self.buffers)?)
        } else {
            None
        };
        match core::plan(&self.settings, &header, payload) {
            Plan::Reply(reply) => self.batch.push(reply),
            Plan::BlockStatus(query) => self.block_status(&query),
            Plan::Job(job) => self.dispatch(job),
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

    /// Serves a device job: on this thread when the export's worker is free, else
    /// over the worker's channel.
    fn dispatch(&mut self, device_job: DeviceJob) {
        let cookie = device_job.cookie;
        let job = Job {
            reply_to: self.replies.clone(),
            cookie,
            kind: device_job.kind,
            force_unit_access: device_job.force_unit_access,
        };
        let job = match &self.worker {
            Some(shared) => match worker::try_inline(shared, job) {
                InlineOutcome::Replied(reply) => {
                    self.keep_or_hand_over(reply);
                    return;
                }
                InlineOutcome::Started { reap_needed } => {
                    if reap_needed {
                        if let Some(jobs) = self.export.job_sender() {
                            worker::send_reap(&jobs, &self.replies);
                        }
                    }
                    return;
                }
                InlineOutcome::Busy(job) => job,
            },
            None => job,
        };
        let refusal = match self.export.job_sender() {
            None => "the server is shutting down",
            Some(jobs) => match jobs.send(job) {
                Ok(()) => return,
                Err(_) => "the export's worker has stopped",
            },
        };
        self.send(
            cookie,
            ReplyBody::Error {
                error: NBD_ESHUTDOWN,
                message: refusal.to_string(),
            },
        );
    }

    /// Answers a block status query from the export's allocation map.
    fn block_status(&mut self, query: &BlockStatusQuery) {
        let runs = self
            .export
            .extents
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .runs(query.first_block, query.end_block, query.run_limit);
        let reply = query.reply(&self.settings, &runs);
        self.batch.push(reply);
    }
}

fn read_payload(
    reader: &mut dyn Read,
    length_bytes: usize,
    buffers: &BufferRecycler,
) -> Result<IoBuf, TransmissionEnd> {
    let mut buffer = buffers.take(length_bytes);
    reader
        .read_exact(buffer.as_mut_slice())
        .map_err(|error| TransmissionEnd::Malformed(format!("write payload: {error}")))?;
    Ok(buffer)
}

impl From<CoreEnd> for TransmissionEnd {
    fn from(end: CoreEnd) -> TransmissionEnd {
        match end {
            CoreEnd::Disconnect => TransmissionEnd::Disconnect,
            CoreEnd::Malformed(message) => TransmissionEnd::Malformed(message),
        }
    }
}
