//! Replies gathered and written together: a batch encodes each reply's header (simple
//! reply or structured chunk) into one byte vector and keeps each read's data buffer
//! as it is, then leaves in vectored writes (`writev`: header and data side by side,
//! never copied into a staging buffer), as few system calls as the socket allows.
//!
//! A connection's replies come from two threads, the reader (requests served on its
//! own thread, refusals, block status) and the writer (replies of requests the export's
//! worker completed); both write through one [`ReplySink`], a lock around the
//! connection's write side, one whole batch at a time, so replies never interleave.

use std::io::{IoSlice, Write};
use std::sync::Mutex;

use super::buffers::BufferRecycler;
use super::worker::{OutgoingReply, ReplyBody};
use crate::wire::*;

/// Most replies in one batch (each takes at most two I/O slices).
pub const MAX_REPLIES_PER_BATCH: usize = 64;
/// Bytes (headers and data) past which a batch asks to be written.
pub const MAX_BATCH_BYTES: usize = 1024 * 1024;
/// I/O slices handed to one `writev` (well under Linux's `IOV_MAX` of 1024).
const SLICES_PER_WRITE: usize = 2 * MAX_REPLIES_PER_BATCH;

/// A connection's write side, shared by its reader and its writer thread.
pub struct ReplySink {
    writer: Mutex<Box<dyn Write + Send>>,
}

impl ReplySink {
    /// A sink writing to `writer`.
    pub fn new(writer: Box<dyn Write + Send>) -> ReplySink {
        ReplySink {
            writer: Mutex::new(writer),
        }
    }
}

/// One reply's place in a batch.
struct BatchedReply {
    header_end: usize,
    data: Option<flashpipe_device::IoBuf>,
}

/// Replies waiting to be written.
pub struct ReplyBatch {
    structured_replies: bool,
    headers: Vec<u8>,
    replies: Vec<BatchedReply>,
    bytes: usize,
}

impl ReplyBatch {
    /// An empty batch for a connection that negotiated `structured_replies` or not.
    pub fn new(structured_replies: bool) -> ReplyBatch {
        ReplyBatch {
            structured_replies,
            headers: Vec::with_capacity(64 * MAX_REPLIES_PER_BATCH),
            replies: Vec::with_capacity(MAX_REPLIES_PER_BATCH),
            bytes: 0,
        }
    }

    /// Replies in the batch.
    pub fn len(&self) -> usize {
        self.replies.len()
    }

    /// Whether the batch holds no reply.
    pub fn is_empty(&self) -> bool {
        self.replies.is_empty()
    }

    /// Whether the batch should be written before another reply joins it.
    pub fn is_full(&self) -> bool {
        self.replies.len() >= MAX_REPLIES_PER_BATCH || self.bytes >= MAX_BATCH_BYTES
    }

    /// Encodes `reply` into the batch (a read's data buffer is kept, not copied).
    pub fn push(&mut self, reply: OutgoingReply) {
        let data = encode_reply_header(self.structured_replies, reply, &mut self.headers);
        if let Some(buffer) = &data {
            self.bytes += buffer.len();
        }
        let header_start = self.replies.last().map_or(0, |reply| reply.header_end);
        self.bytes += self.headers.len() - header_start;
        self.replies.push(BatchedReply {
            header_end: self.headers.len(),
            data,
        });
    }

    /// Writes every reply through `sink` (holding it for the whole batch), gives the
    /// data buffers back to `buffers` and empties the batch; returns how many replies
    /// were written. On an error the batch is emptied too: the connection is over.
    pub fn write_to(
        &mut self,
        sink: &ReplySink,
        buffers: &BufferRecycler,
    ) -> std::io::Result<usize> {
        let count = self.replies.len();
        if count == 0 {
            return Ok(0);
        }
        let written = {
            let mut writer = sink
                .writer
                .lock()
                .unwrap_or_else(|poison| poison.into_inner());
            self.write_slices(&mut **writer)
                .and_then(|()| writer.flush())
        };
        for reply in self.replies.drain(..) {
            if let Some(buffer) = reply.data {
                buffers.give_back(buffer);
            }
        }
        self.headers.clear();
        self.bytes = 0;
        written.map(|()| count)
    }

    fn write_slices(&self, writer: &mut dyn Write) -> std::io::Result<()> {
        let mut slices = [IoSlice::new(&[]); SLICES_PER_WRITE];
        let mut slice_count = 0;
        let mut header_start = 0;
        for reply in &self.replies {
            slices[slice_count] = IoSlice::new(&self.headers[header_start..reply.header_end]);
            slice_count += 1;
            header_start = reply.header_end;
            if let Some(data) = &reply.data {
                slices[slice_count] = IoSlice::new(data.as_slice());
                slice_count += 1;
            }
        }
        write_all_vectored(writer, &mut slices[..slice_count])
    }
}

/// Appends `reply`'s simple reply or structured chunk header to `headers` (a
/// structured error's message and a block status's extents included) and returns a
/// read's data, which follows the header on the wire.
pub fn encode_reply_header(
    structured_replies: bool,
    reply: OutgoingReply,
    headers: &mut Vec<u8>,
) -> Option<flashpipe_device::IoBuf> {
    let cookie = reply.cookie;
    match reply.body {
        ReplyBody::Done if structured_replies => encode_chunk_none(headers, cookie),
        ReplyBody::Done => encode_simple_reply(headers, 0, cookie),
        ReplyBody::Data {
            offset_bytes,
            buffer,
        } => {
            if structured_replies {
                let length_bytes = buffer.len() as u32;
                encode_chunk_offset_data_header(headers, cookie, offset_bytes, length_bytes, true);
            } else {
                encode_simple_reply(headers, 0, cookie);
            }
            return Some(buffer);
        }
        ReplyBody::Error { error, message } if structured_replies => {
            encode_chunk_error(headers, cookie, error, &message)
        }
        ReplyBody::Error { error, .. } => encode_simple_reply(headers, error, cookie),
        ReplyBody::BlockStatus {
            context_id,
            extents,
        } => encode_chunk_block_status(headers, cookie, context_id, &extents, true),
    }
    None
}

/// `write_all` over I/O slices: `writev` until every byte is written.
fn write_all_vectored(
    writer: &mut dyn Write,
    mut slices: &mut [IoSlice<'_>],
) -> std::io::Result<()> {
    IoSlice::advance_slices(&mut slices, 0);
    while !slices.is_empty() {
        match writer.write_vectored(slices) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    "the connection took no more reply bytes",
                ))
            }
            Ok(written) => IoSlice::advance_slices(&mut slices, written),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use flashpipe_device::IoBuf;
    use std::sync::Arc;

    /// A writer taking at most `step` bytes per call, recording what it got.
    struct Trickle {
        step: usize,
        bytes: Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Trickle {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let taken = bytes.len().min(self.step);
            self.bytes
                .lock()
                .unwrap()
                .extend_from_slice(&bytes[..taken]);
            Ok(taken)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_batch_writes_headers_and_data_in_order_through_short_writes() {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let sink = ReplySink::new(Box::new(Trickle {
            step: 7,
            bytes: Arc::clone(&bytes),
        }));
        let buffers = BufferRecycler::new(1 << 20);
        let mut batch = ReplyBatch::new(false);
        let mut data = IoBuf::zeroed(4096);
        data.as_mut_slice().fill(0xab);
        batch.push(OutgoingReply {
            cookie: 1,
            body: ReplyBody::Done,
        });
        batch.push(OutgoingReply {
            cookie: 2,
            body: ReplyBody::Data {
                offset_bytes: 0,
                buffer: data,
            },
        });
        batch.push(OutgoingReply {
            cookie: 3,
            body: ReplyBody::Error {
                error: NBD_EINVAL,
                message: "no".to_string(),
            },
        });
        assert_eq!((batch.len(), batch.is_full()), (3, false));
        assert_eq!(batch.write_to(&sink, &buffers).unwrap(), 3);
        assert!(batch.is_empty());
        let mut expected = Vec::new();
        encode_simple_reply(&mut expected, 0, 1);
        encode_simple_reply(&mut expected, 0, 2);
        expected.extend_from_slice(&[0xab; 4096]);
        encode_simple_reply(&mut expected, NBD_EINVAL, 3);
        assert_eq!(*bytes.lock().unwrap(), expected);
    }
}
