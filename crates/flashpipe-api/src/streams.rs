//! Whole files streamed over any [`Transport`], written once: a source's bytes written
//! into a file with several writes in flight ([`write_stream`]), a file read into a sink
//! in order with several reads in flight ([`read_stream`]; [`read_stream_retrying`] tries
//! refused reads again as its [`ReadRetry`] says). The in-process engine client, the served
//! client and every CLI path that moves a file use these.

use std::collections::{BTreeMap, BTreeSet};

use crate::command::{Command, Payloads, Reply};
use crate::error::ErrorCode;
use crate::kind::CommandKind;
use crate::transport::{CodedError, MismatchedReply, Transport, TransportExt};
use crate::values::FileStat;

/// The payloads a stream needs to see into: a write payload's bytes to fill, a completed
/// write's length (and its buffer, to fill again), read data's bytes.
pub trait StreamPayloads: Payloads {
    /// The bytes of a write payload, to fill (its current length).
    fn write_bytes_mut(write: &mut Self::Write) -> &mut [u8];
    /// Sets a write payload's length (at most the length it was made with).
    fn set_write_len(write: &mut Self::Write, length_bytes: usize);
    /// Bytes a completed write wrote.
    fn written_bytes(written: &Self::Written) -> u64;
    /// The payload of a completed write, to fill again, where the transport hands it back.
    fn reuse_written(written: Self::Written) -> Option<Self::Write>;
    /// The bytes of read data.
    fn read_bytes(read: &Self::Read) -> &[u8];
}

/// A streaming transfer failed: in the transport, or in the local source or sink.
#[derive(Debug, thiserror::Error)]
pub enum StreamError<E> {
    /// The transport refused or failed a command.
    #[error(transparent)]
    Transport(E),
    /// Reading the local source failed.
    #[error("reading the source: {0}")]
    Source(std::io::Error),
    /// Writing the local destination failed.
    #[error("writing the destination: {0}")]
    Sink(std::io::Error),
}

/// Writes everything `source` yields into file `name` (created, or truncated if it
/// exists), `chunk_bytes` per command with up to `in_flight` commands outstanding.
/// Calls `progress` with the bytes acknowledged so far. Returns the bytes written.
/// The transport must have nothing else outstanding.
pub fn write_stream<T>(
    transport: &mut T,
    name: &str,
    source: &mut dyn std::io::Read,
    chunk_bytes: usize,
    in_flight: usize,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, StreamError<T::Error>>
where
    T: Transport + ?Sized,
    T::P: StreamPayloads,
{
    assert_eq!(
        transport.outstanding(),
        0,
        "a stream starts with nothing else outstanding"
    );
    prepare_empty_file(transport, name).map_err(StreamError::Transport)?;
    let limits = transport.limits();
    let chunk_bytes = chunk_bytes.clamp(
        1,
        usize::try_from(limits.max_write_bytes).unwrap_or(usize::MAX),
    );
    let in_flight = in_flight.clamp(1, limits.max_in_flight.max(1));
    let mut spare: Vec<<T::P as Payloads>::Write> = Vec::new();
    let (mut offset_bytes, mut acknowledged_bytes, mut outstanding) = (0u64, 0u64, 0usize);
    loop {
        if outstanding >= in_flight {
            acknowledged_bytes += reap_write(transport, &mut spare)?;
            outstanding -= 1;
            progress(acknowledged_bytes);
        }
        // taken after the reap, so no more buffers are held than writes in flight (a
        // served client's granted slots are few; the engine's come back to be refilled)
        let mut buffer = match spare.pop() {
            Some(buffer) => buffer,
            None => transport
                .write_buffer(chunk_bytes)
                .map_err(StreamError::Transport)?,
        };
        T::P::set_write_len(&mut buffer, chunk_bytes);
        let filled =
            fill_from(source, T::P::write_bytes_mut(&mut buffer)).map_err(StreamError::Source)?;
        if filled == 0 {
            break;
        }
        T::P::set_write_len(&mut buffer, filled);
        transport
            .submit(Command::Write {
                name: name.to_string(),
                offset_bytes,
                data: buffer,
            })
            .map_err(StreamError::Transport)?;
        outstanding += 1;
        offset_bytes += filled as u64;
    }
    while outstanding > 0 {
        acknowledged_bytes += reap_write(transport, &mut spare)?;
        outstanding -= 1;
        progress(acknowledged_bytes);
    }
    Ok(offset_bytes)
}

fn prepare_empty_file<T: Transport + ?Sized>(
    transport: &mut T,
    name: &str,
) -> Result<(), T::Error> {
    match transport.create(name) {
        Ok(()) => Ok(()),
        Err(error) if error.code() == ErrorCode::Exists => transport.truncate(name, 0),
        Err(error) => Err(error),
    }
}

fn reap_write<T>(
    transport: &mut T,
    spare: &mut Vec<<T::P as Payloads>::Write>,
) -> Result<u64, StreamError<T::Error>>
where
    T: Transport + ?Sized,
    T::P: StreamPayloads,
{
    let (_, result) = transport.wait().map_err(StreamError::Transport)?;
    match result.map_err(StreamError::Transport)? {
        Reply::Written { buffer } => {
            let written = T::P::written_bytes(&buffer);
            spare.extend(T::P::reuse_written(buffer));
            Ok(written)
        }
        other => Err(mismatched(CommandKind::Write, other.name())),
    }
}

/// Reads file `name` from its start to its end into `sink`, `chunk_bytes` per command
/// with up to `in_flight` reads outstanding, delivering the data in order. Calls
/// `progress` with the bytes delivered so far. Returns the bytes delivered. The
/// transport must have nothing else outstanding. A refused read fails the stream
/// ([`read_stream_retrying`] may try it again).
pub fn read_stream<T>(
    transport: &mut T,
    name: &str,
    sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    chunk_bytes: u64,
    in_flight: usize,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, StreamError<T::Error>>
where
    T: Transport + ?Sized,
    T::P: StreamPayloads,
{
    let window = ReadWindow {
        chunk_bytes,
        in_flight,
    };
    read_stream_retrying(transport, name, sink, window, progress, &mut NeverRetry)
        .map(|stat| stat.size_bytes)
}

/// How a read stream cuts its file: bytes per read command and reads held at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadWindow {
    /// Bytes per read command (at most the transport's limit).
    pub chunk_bytes: u64,
    /// Reads outstanding or arrived and not yet delivered, at most (a transport's read
    /// data may hold a buffer of the engine's until delivered).
    pub in_flight: usize,
}

/// What a read stream does with a read that failed: give up, or pause and try it again
/// (a read refused for want of engine read buffers that other reads hold, say).
pub trait ReadRetry<E> {
    /// A read failed with `error`: `Ok(())` once it may be tried again (after a pause
    /// of the retry's choosing), or the error to end the stream with.
    fn failed(&mut self, error: E) -> Result<(), E>;

    /// A read succeeded (a later failure starts a new wait).
    fn succeeded(&mut self) {}
}

/// Never tries a failed read again.
#[derive(Debug, Clone, Copy, Default)]
pub struct NeverRetry;

impl<E> ReadRetry<E> for NeverRetry {
    fn failed(&mut self, error: E) -> Result<(), E> {
        Err(error)
    }
}

/// How long, in all, [`WaitForReadBuffers`] waits for engine read buffers that other reads
/// hold before it gives up (each wait ends as soon as a retried read gets a buffer).
pub const READ_BUFFER_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Longest pause of [`WaitForReadBuffers`] between two tries.
pub const READ_BUFFER_PAUSE_MAX: std::time::Duration = std::time::Duration::from_millis(100);

/// Waits out a read refused because every engine read buffer is held
/// ([`ErrorCode::ReadBuffersExhausted`], by other clients' reads or this one's): pauses
/// growing from 1 ms to [`READ_BUFFER_PAUSE_MAX`], for [`READ_BUFFER_WAIT`] at most since
/// the first refusal without a read in between. Any other failure ends the read. The CLI's
/// commands and the Python package read with it.
#[derive(Debug, Default)]
pub struct WaitForReadBuffers {
    since: Option<std::time::Instant>,
    pause: std::time::Duration,
}

impl<E: CodedError> ReadRetry<E> for WaitForReadBuffers {
    fn failed(&mut self, error: E) -> Result<(), E> {
        if error.code() != ErrorCode::ReadBuffersExhausted {
            return Err(error);
        }
        let since = *self.since.get_or_insert_with(std::time::Instant::now);
        if since.elapsed() >= READ_BUFFER_WAIT {
            return Err(error);
        }
        self.pause =
            (self.pause * 2).clamp(std::time::Duration::from_millis(1), READ_BUFFER_PAUSE_MAX);
        std::thread::sleep(self.pause);
        Ok(())
    }

    fn succeeded(&mut self) {
        *self = WaitForReadBuffers::default();
    }
}

/// [`read_stream`] whose failed reads `retry` may try again: when it does, the data that
/// arrived for later offsets is given back too (it holds read buffers the failed read may
/// be waiting for) and read again after it. Returns the file's stat taken before the
/// first read (its size is the bytes delivered), so a caller can tell whether the file
/// changed while it was read.
pub fn read_stream_retrying<T, R>(
    transport: &mut T,
    name: &str,
    sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    window: ReadWindow,
    progress: &mut dyn FnMut(u64),
    retry: &mut R,
) -> Result<FileStat, StreamError<T::Error>>
where
    T: Transport + ?Sized,
    T::P: StreamPayloads,
    R: ReadRetry<T::Error> + ?Sized,
{
    assert_eq!(
        transport.outstanding(),
        0,
        "a stream starts with nothing else outstanding"
    );
    let before = transport.stat(name).map_err(StreamError::Transport)?;
    let size_bytes = before.size_bytes;
    let limits = transport.limits();
    let chunk_bytes = window.chunk_bytes.clamp(1, limits.max_read_bytes.max(1));
    let in_flight = window.in_flight.clamp(1, limits.max_in_flight.max(1));
    let mut offsets_by_ticket = BTreeMap::new();
    let mut arrived: BTreeMap<u64, <T::P as Payloads>::Read> = BTreeMap::new();
    let mut again: BTreeSet<u64> = BTreeSet::new();
    let (mut next_submit, mut next_deliver) = (0u64, 0u64);
    while next_deliver < size_bytes {
        while offsets_by_ticket.len() + arrived.len() < in_flight {
            let offset_bytes = match again.pop_first() {
                Some(offset_bytes) => offset_bytes,
                None if next_submit < size_bytes => {
                    let offset_bytes = next_submit;
                    next_submit += chunk_bytes.min(size_bytes - offset_bytes);
                    offset_bytes
                }
                None => break,
            };
            let length_bytes = chunk_bytes.min(size_bytes - offset_bytes);
            let ticket = transport
                .submit(Command::Read {
                    name: name.to_string(),
                    offset_bytes,
                    length_bytes,
                })
                .map_err(StreamError::Transport)?;
            offsets_by_ticket.insert(ticket, (offset_bytes, length_bytes));
        }
        let (ticket, result) = transport.wait().map_err(StreamError::Transport)?;
        let (offset, length_bytes) = offsets_by_ticket
            .remove(&ticket)
            .expect("a read this call submitted");
        let reply = match result {
            Ok(reply) => reply,
            Err(error) => {
                retry.failed(error).map_err(StreamError::Transport)?;
                again.insert(offset);
                again.extend(arrived.split_off(&offset).into_keys());
                continue;
            }
        };
        retry.succeeded();
        match reply {
            Reply::Data(data) if T::P::read_bytes(&data).len() as u64 == length_bytes => {
                arrived.insert(offset, data)
            }
            Reply::Data(_) => return Err(mismatched(CommandKind::Read, "data of another length")),
            other => return Err(mismatched(CommandKind::Read, other.name())),
        };
        while let Some(data) = arrived.remove(&next_deliver) {
            let bytes = T::P::read_bytes(&data);
            sink(bytes).map_err(StreamError::Sink)?;
            next_deliver += bytes.len() as u64;
            progress(next_deliver);
        }
    }
    Ok(before)
}

/// A stream's command answered with something else than its reply.
fn mismatched<E: From<MismatchedReply>>(
    asked: CommandKind,
    answered: &'static str,
) -> StreamError<E> {
    StreamError::Transport(
        MismatchedReply {
            asked: asked.name(),
            answered,
        }
        .into(),
    )
}

/// Reads from `source` until `buffer` is full or the source ends; returns bytes read.
fn fill_from(source: &mut dyn std::io::Read, buffer: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match source.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(count) => filled += count,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ApiError;

    #[test]
    fn only_a_refusal_for_want_of_read_buffers_is_waited_out() {
        let mut waiting = WaitForReadBuffers::default();
        let refusal = ApiError::new(ErrorCode::ReadBuffersExhausted, "no read buffers");
        assert!(waiting.failed(refusal.clone()).is_ok());
        assert!(waiting.failed(refusal).is_ok());
        assert_eq!(
            waiting.pause,
            std::time::Duration::from_millis(2),
            "pauses grow"
        );
        let other = ApiError::new(ErrorCode::NotFound, "gone");
        assert_eq!(
            waiting.failed(other).expect_err("not waited out").code,
            ErrorCode::NotFound
        );
        ReadRetry::<ApiError>::succeeded(&mut waiting);
        assert!(
            waiting.since.is_none(),
            "a read that succeeds ends the wait"
        );
    }
}
