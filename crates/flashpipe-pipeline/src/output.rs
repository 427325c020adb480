//! The kernels' output sink inside the pipeline: counts, collects, or cuts the stream into
//! recycled buffers queued (bounded) to the write stage.
//!
//! Output buffers are recycled within a job (the write stage hands each back when its write
//! completes) and kept between jobs of the process, up to [`KEPT_OUTPUT_BUFFER_BYTES`]: a
//! fresh buffer costs a page fault per page on first touch, which a job writing results at
//! storage speed would otherwise pay on most of its output.

use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender};
use flashpipe_device::{Clock, IoBuf};
use flashpipe_kernels::api::OutputSink;
use flashpipe_kernels::error::{KernelError, KernelErrorKind};

/// Most bytes of output buffers kept between jobs (their capacities added up).
pub const KEPT_OUTPUT_BUFFER_BYTES: usize = 64 << 20;

/// Output buffers kept between jobs, and their capacities added up.
static KEPT_OUTPUT_BUFFERS: Mutex<(Vec<IoBuf>, usize)> = Mutex::new((Vec::new(), 0));

/// Keeps `buffers` for later jobs while the kept bytes stay within
/// [`KEPT_OUTPUT_BUFFER_BYTES`] (the others are let go).
pub(crate) fn keep_output_buffers(buffers: impl IntoIterator<Item = IoBuf>) {
    let mut kept = KEPT_OUTPUT_BUFFERS
        .lock()
        .expect("kept output buffers lock poisoned");
    for buffer in buffers {
        if kept.1 + buffer.capacity() <= KEPT_OUTPUT_BUFFER_BYTES {
            kept.1 += buffer.capacity();
            kept.0.push(buffer);
        }
    }
}

/// A kept buffer of at least `length_bytes` capacity, if one is kept.
fn take_kept_output_buffer(length_bytes: usize) -> Option<IoBuf> {
    let mut kept = KEPT_OUTPUT_BUFFERS
        .lock()
        .expect("kept output buffers lock poisoned");
    let position = kept
        .0
        .iter()
        .position(|buffer| buffer.capacity() >= length_bytes)?;
    let buffer = kept.0.swap_remove(position);
    kept.1 -= buffer.capacity();
    Some(buffer)
}

/// One buffer of a result stream on its way into the store.
pub(crate) struct WriteRequest {
    pub(crate) file: Arc<str>,
    pub(crate) offset_bytes: u64,
    pub(crate) buffer: IoBuf,
}

/// The write stage's queue and its recycled buffers.
#[derive(Clone)]
pub(crate) struct WriteQueue {
    pub(crate) requests: Sender<WriteRequest>,
    pub(crate) spare_buffers: Receiver<IoBuf>,
    pub(crate) chunk_bytes: usize,
    pub(crate) clock: Arc<dyn Clock>,
}

/// Where one file's stream goes.
pub(crate) enum OutputWriter {
    Discard,
    Collect(Vec<u8>),
    Store(StoreWriter),
}

pub(crate) struct StoreWriter {
    file: Arc<str>,
    queue: WriteQueue,
    /// Bytes of the first buffer: the input's size rounded up to 4 KiB, at most a whole
    /// write, so a small file's result does not take a whole write's buffer.
    first_buffer_bytes: usize,
    buffer: Option<IoBuf>,
    filled_bytes: usize,
    flushed_offset_bytes: u64,
    pub(crate) blocked_ns: u64,
}

/// A sink over an [`OutputWriter`], counting what passes through.
pub(crate) struct CountedWriter {
    pub(crate) writer: OutputWriter,
    pub(crate) written_bytes: u64,
}

impl CountedWriter {
    pub(crate) fn discard() -> CountedWriter {
        CountedWriter::new(OutputWriter::Discard)
    }

    pub(crate) fn collect() -> CountedWriter {
        CountedWriter::new(OutputWriter::Collect(Vec::new()))
    }

    pub(crate) fn store(file: &str, queue: WriteQueue, input_bytes: u64) -> CountedWriter {
        let first_buffer_bytes = usize::try_from(input_bytes.div_ceil(4096).max(1) * 4096)
            .unwrap_or(usize::MAX)
            .min(queue.chunk_bytes);
        CountedWriter::new(OutputWriter::Store(StoreWriter {
            file: Arc::from(file),
            queue,
            first_buffer_bytes,
            buffer: None,
            filled_bytes: 0,
            flushed_offset_bytes: 0,
            blocked_ns: 0,
        }))
    }

    fn new(writer: OutputWriter) -> CountedWriter {
        CountedWriter {
            writer,
            written_bytes: 0,
        }
    }

    /// Time spent so far waiting for room in the write queue.
    pub(crate) fn blocked_ns(&self) -> u64 {
        match &self.writer {
            OutputWriter::Store(store) => store.blocked_ns,
            OutputWriter::Discard | OutputWriter::Collect(_) => 0,
        }
    }

    /// Sends what is buffered; returns the collected stream (if collecting) and the time spent
    /// blocked on the write queue.
    pub(crate) fn finish(self) -> Result<(Option<Vec<u8>>, u64), KernelError> {
        match self.writer {
            OutputWriter::Discard => Ok((None, 0)),
            OutputWriter::Collect(bytes) => {
                assert_eq!(bytes.len() as u64, self.written_bytes);
                Ok((Some(bytes), 0))
            }
            OutputWriter::Store(mut store) => {
                store.send_buffer()?;
                assert_eq!(store.flushed_offset_bytes, self.written_bytes);
                Ok((None, store.blocked_ns))
            }
        }
    }
}

impl OutputSink for CountedWriter {
    fn write_output(&mut self, bytes: &[u8]) -> Result<(), KernelError> {
        self.written_bytes += bytes.len() as u64;
        match &mut self.writer {
            OutputWriter::Discard => Ok(()),
            OutputWriter::Collect(collected) => {
                collected.extend_from_slice(bytes);
                Ok(())
            }
            OutputWriter::Store(store) => store.append(bytes),
        }
    }
}

/// A buffer of `length_bytes`: a recycled one large enough if the write stage gave one
/// back (smaller ones go to the kept buffers), else a kept one, else a new one.
fn recycled_or_new(spare_buffers: &Receiver<IoBuf>, length_bytes: usize) -> IoBuf {
    let mut too_small = Vec::new();
    let recycled = loop {
        match spare_buffers.try_recv() {
            Ok(spare) if spare.capacity() >= length_bytes => break Some(spare),
            Ok(spare) => too_small.push(spare),
            Err(_) => break None,
        }
    };
    keep_output_buffers(too_small);
    let mut buffer = recycled
        .or_else(|| take_kept_output_buffer(length_bytes))
        .unwrap_or_else(|| IoBuf::zeroed(length_bytes));
    buffer.set_len(length_bytes);
    buffer
}

impl StoreWriter {
    fn append(&mut self, mut bytes: &[u8]) -> Result<(), KernelError> {
        while !bytes.is_empty() {
            let buffer_bytes = if self.flushed_offset_bytes == 0 {
                self.first_buffer_bytes
            } else {
                self.queue.chunk_bytes
            };
            let spare_buffers = &self.queue.spare_buffers;
            let buffer = self
                .buffer
                .get_or_insert_with(|| recycled_or_new(spare_buffers, buffer_bytes));
            let room = buffer.len() - self.filled_bytes;
            let taken = room.min(bytes.len());
            buffer[self.filled_bytes..self.filled_bytes + taken].copy_from_slice(&bytes[..taken]);
            self.filled_bytes += taken;
            bytes = &bytes[taken..];
            if self.filled_bytes == buffer.len() {
                self.send_buffer()?;
            }
        }
        Ok(())
    }

    fn send_buffer(&mut self) -> Result<(), KernelError> {
        let Some(mut buffer) = self.buffer.take() else {
            return Ok(());
        };
        if self.filled_bytes == 0 {
            return Ok(());
        }
        buffer.set_len(self.filled_bytes);
        let request = WriteRequest {
            file: Arc::clone(&self.file),
            offset_bytes: self.flushed_offset_bytes,
            buffer,
        };
        let started_ns = self.queue.clock.now_ns();
        let sent = self.queue.requests.send(request);
        self.blocked_ns += self.queue.clock.now_ns().saturating_sub(started_ns);
        sent.map_err(|_| {
            KernelError::new(
                &self.file,
                self.flushed_offset_bytes,
                KernelErrorKind::Internal("the write stage stopped".into()),
            )
        })?;
        self.flushed_offset_bytes += self.filled_bytes as u64;
        self.filled_bytes = 0;
        Ok(())
    }
}
