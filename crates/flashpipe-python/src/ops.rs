//! The store operations of the Python API, written once over the command set's
//! [`Transport`] (the engine's client in this process and the served client both are one),
//! with the command set's streams ([`write_stream`], [`read_stream_retrying`]) for whole
//! files. Every change is flushed before the operation returns, so what Python was told
//! is done is durable, and visible to the server's other clients.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use flashpipe_api::{
    read_stream_retrying, write_stream, CodedError, Command, CopyMethod, CopyReport, ErrorCode,
    FileStat, Payloads, ReadRetry, ReadWindow, Reply, StreamError, StreamPayloads, Ticket,
    Transport, TransportExt, WaitForReadBuffers,
};
use flashpipe_client::Client;
use flashpipe_engine::EngineClient;

use crate::error::StoreError;

/// Bytes per read or write command of a stream (at most what the transport allows).
const CHUNK_BYTES: usize = 1 << 20;
/// Commands in flight per stream (at most what the transport allows).
const IN_FLIGHT: usize = 8;

/// A way to a store: a command-set transport whose payloads streams can fill and read
/// and whose errors are the binding's.
pub trait Way: Transport<P: StreamPayloads, Error: Into<StoreError> + CodedError> {
    /// Most bytes this client may have in flight at once.
    fn max_bytes_in_flight(&self) -> u64;
}

impl Way for EngineClient {
    fn max_bytes_in_flight(&self) -> u64 {
        u64::MAX
    }
}

impl Way for Client {
    fn max_bytes_in_flight(&self) -> u64 {
        self.server_info().limits.max_bytes_in_flight_per_client
    }
}

/// The facts of a check the API returns, whichever way it ran.
pub struct CheckFacts {
    /// True when nothing is wrong.
    pub clean: bool,
    /// Commit sequence of the super block used.
    pub commit_sequence: Option<u64>,
    /// Files in the image.
    pub file_count: u64,
    /// Each finding, in words.
    pub findings: Vec<String>,
    /// The whole report as `flashpipe fsck` prints it.
    pub report: String,
}

/// A check's answer as [`CheckFacts`].
pub trait IntoCheckFacts {
    /// The facts.
    fn facts(self) -> CheckFacts;
}

impl IntoCheckFacts for flashpipe_fs::FsckReport {
    fn facts(self) -> CheckFacts {
        CheckFacts {
            clean: self.is_clean(),
            commit_sequence: self.commit_sequence,
            file_count: self.file_count,
            findings: self.findings.iter().map(ToString::to_string).collect(),
            report: self.to_string(),
        }
    }
}

impl IntoCheckFacts for flashpipe_api::CheckSummary {
    fn facts(self) -> CheckFacts {
        CheckFacts {
            clean: self.clean,
            commit_sequence: self.commit_sequence,
            file_count: self.file_count,
            findings: self.findings,
            report: self.report_text,
        }
    }
}

fn err<E: Into<StoreError>>(error: E) -> StoreError {
    error.into()
}

fn stream_error<E: Into<StoreError>>(error: StreamError<E>, source: &str) -> StoreError {
    match error {
        StreamError::Transport(error) => error.into(),
        StreamError::Source(error) => StoreError::Local {
            what: format!("reading {source}"),
            source: error,
        },
        StreamError::Sink(error) => StoreError::Local {
            what: "keeping the bytes read".to_string(),
            source: error,
        },
    }
}

/// Commands a stream of `chunk_bytes` per command keeps in flight.
fn window<T: Way>(transport: &T, chunk_bytes: u64) -> usize {
    let by_bytes = transport.max_bytes_in_flight() / chunk_bytes.max(1);
    IN_FLIGHT
        .min(usize::try_from(by_bytes).unwrap_or(usize::MAX))
        .max(1)
}

/// Waits for every command still in flight (after a failure), dropping the answers; each
/// call starts with none (the command set's streams require it).
pub fn drain<T: Way>(transport: &mut T) {
    while transport.outstanding() > 0 && transport.wait().is_ok() {}
}

/// Readies the transport for a call: commands a failed call left in flight are waited
/// for; a connection that cannot give their answers any more is an error (the streams
/// need nothing outstanding).
pub fn settle<T: Way>(transport: &mut T) -> Result<(), StoreError> {
    drain(transport);
    if transport.outstanding() > 0 {
        return Err(StoreError::Unsettled {
            outstanding: transport.outstanding(),
        });
    }
    Ok(())
}

/// Facts about file `name`.
pub fn stat<T: Way>(transport: &mut T, name: &str) -> Result<FileStat, StoreError> {
    transport.stat(name).map_err(err)
}

/// Every file, in name order.
pub fn list<T: Way>(transport: &mut T) -> Result<Vec<FileStat>, StoreError> {
    let mut files = transport.list().map_err(err)?;
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

/// Whether the store has a file `name`.
fn exists<T: Way>(transport: &mut T, name: &str) -> Result<bool, StoreError> {
    match transport.stat(name) {
        Ok(_) => Ok(true),
        Err(error) if error.code() == ErrorCode::NotFound => Ok(false),
        Err(error) => Err(error.into()),
    }
}

/// A temporary name for a put, not taken in the store: the CLI's pattern
/// `.flashpipe-put-PID-INDEX`, so a put killed midway leaves a temporary the store's next
/// read-write open removes (`flashpipe_store::leftovers`).
fn temporary_name<T: Way>(transport: &mut T) -> Result<String, StoreError> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    loop {
        let name = format!(
            ".flashpipe-put-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        assert!(
            flashpipe_store::leftovers::is_leftover_temporary(&name),
            "a put's temporary is one the store cleans up"
        );
        if !exists(transport, &name)? {
            return Ok(name);
        }
    }
}

/// Stores everything `source` yields as file `name` (`source_name` names it in errors):
/// written under a temporary name, renamed into place and flushed, so the name holds
/// either its old bytes or all of the new ones. An existing `name` is refused unless
/// `replace`. Returns the bytes written.
pub fn put<T: Way>(
    transport: &mut T,
    name: &str,
    source: &mut dyn std::io::Read,
    source_name: &str,
    replace: bool,
) -> Result<u64, StoreError> {
    if name.is_empty() || name.contains('\0') {
        return Err(StoreError::Invalid(format!(
            "{name:?} is not a store name: a name is 1 to 255 bytes of UTF-8 without NUL or '/'"
        )));
    }
    if !replace && exists(transport, name)? {
        return Err(StoreError::Exists {
            name: name.to_string(),
        });
    }
    let temporary = temporary_name(transport)?;
    let limit = usize::try_from(transport.limits().max_write_bytes).unwrap_or(usize::MAX);
    let chunk_bytes = CHUNK_BYTES.min(limit).max(1);
    let in_flight = window(transport, chunk_bytes as u64);
    let written = write_stream(
        transport,
        &temporary,
        source,
        chunk_bytes,
        in_flight,
        &mut |_| {},
    )
    .map_err(|error| stream_error(error, source_name))
    .and_then(|written| {
        transport
            .call_done(Command::Rename {
                from: temporary.clone(),
                to: name.to_string(),
                replace,
            })
            .map_err(err)?;
        Ok(written)
    });
    match written {
        Ok(written) => {
            transport.flush().map_err(err)?;
            Ok(written)
        }
        Err(error) => {
            drain(transport);
            let _ = transport.delete(&temporary);
            Err(error)
        }
    }
}

/// Makes file `name` empty, creating it when missing (a file opened for writing).
pub fn create_empty<T: Way>(transport: &mut T, name: &str) -> Result<(), StoreError> {
    write_stream(transport, name, &mut std::io::empty(), 1, 1, &mut |_| {})
        .map_err(|error| stream_error(error, "nothing"))?;
    Ok(())
}

/// Writes `data` at `offset_bytes` of the existing file `name` (not flushed: see
/// [`flush`]). Returns the bytes written.
pub fn write_at<T: Way>(
    transport: &mut T,
    name: &str,
    offset_bytes: u64,
    data: &[u8],
) -> Result<u64, StoreError> {
    let limit = usize::try_from(transport.limits().max_write_bytes).unwrap_or(usize::MAX);
    let chunk_bytes = CHUNK_BYTES.min(limit).max(1);
    let mut done = 0usize;
    while done < data.len() {
        let length = chunk_bytes.min(data.len() - done);
        let mut buffer = transport.write_buffer(length).map_err(err)?;
        T::P::set_write_len(&mut buffer, length);
        let target = T::P::write_bytes_mut(&mut buffer);
        assert_eq!(
            target.len(),
            length,
            "a write buffer holds the chunk asked for"
        );
        target.copy_from_slice(&data[done..done + length]);
        let written = transport
            .write(name, offset_bytes + done as u64, buffer)
            .map_err(err)?;
        assert_eq!(
            T::P::written_bytes(&written),
            length as u64,
            "a completed write wrote its whole chunk"
        );
        done += length;
    }
    Ok(done as u64)
}

/// Makes every change so far durable.
pub fn flush<T: Way>(transport: &mut T) -> Result<(), StoreError> {
    transport.flush().map_err(err)
}

/// Reads the whole file `name`, failing when it changed while it was read.
pub fn get<T: Way>(transport: &mut T, name: &str) -> Result<Vec<u8>, StoreError> {
    let chunk_bytes = (CHUNK_BYTES as u64)
        .min(transport.limits().max_read_bytes)
        .max(1);
    let window = ReadWindow {
        chunk_bytes,
        in_flight: window(transport, chunk_bytes),
    };
    let mut bytes = Vec::new();
    let mut sink = |chunk: &[u8]| -> std::io::Result<()> {
        bytes.extend_from_slice(chunk);
        Ok(())
    };
    let before = read_stream_retrying(
        transport,
        name,
        &mut sink,
        window,
        &mut |_| {},
        &mut WaitForReadBuffers::default(),
    )
    .map_err(|error| stream_error(error, name));
    let before = match before {
        Ok(before) => before,
        Err(error) => {
            drain(transport);
            return Err(error);
        }
    };
    unchanged_since(transport, name, &before)?;
    Ok(bytes)
}

/// Fails with [`StoreError::ChangedWhileRead`] when file `name` is not the one `before`
/// described any more (another file under the name, another size, a later change): a read
/// of several commands between the two may have mixed old and new bytes.
pub fn unchanged_since<T: Way>(
    transport: &mut T,
    name: &str,
    before: &FileStat,
) -> Result<(), StoreError> {
    let after = transport.stat(name).map_err(err)?;
    if before.file_id != after.file_id
        || before.size_bytes != after.size_bytes
        || before.modified_clock_ns != after.modified_clock_ns
    {
        return Err(StoreError::ChangedWhileRead {
            name: name.to_string(),
        });
    }
    Ok(())
}

/// One read command of at most the transport's limit, tried again while the engine's
/// read buffers are all held.
pub fn read_once<T: Way>(
    transport: &mut T,
    name: &str,
    offset_bytes: u64,
    length_bytes: u64,
) -> Result<<T::P as Payloads>::Read, StoreError> {
    let mut waiting = WaitForReadBuffers::default();
    loop {
        match transport.read(name, offset_bytes, length_bytes) {
            Ok(data) => return Ok(data),
            Err(error) => waiting.failed(error).map_err(err)?,
        }
    }
}

/// Reads `target.len()` bytes at `offset_bytes` of file `name` into `target`, in commands
/// of at most the transport's limit with several in flight (each chunk copied into place
/// as its answer comes, in any order); a read refused for want of engine read buffers is
/// sent again after a pause.
pub fn read_into<T: Way>(
    transport: &mut T,
    name: &str,
    offset_bytes: u64,
    target: &mut [u8],
) -> Result<(), StoreError> {
    let chunk_bytes = (CHUNK_BYTES as u64)
        .min(transport.limits().max_read_bytes)
        .max(1) as usize;
    let in_flight =
        window(transport, chunk_bytes as u64).min(transport.limits().max_in_flight.max(1));
    let result = read_chunks(
        transport,
        name,
        offset_bytes,
        target,
        chunk_bytes,
        in_flight,
    );
    if result.is_err() {
        drain(transport);
    }
    result
}

fn read_chunks<T: Way>(
    transport: &mut T,
    name: &str,
    offset_bytes: u64,
    target: &mut [u8],
    chunk_bytes: usize,
    mut in_flight: usize,
) -> Result<(), StoreError> {
    let mut pending: HashMap<Ticket, (usize, usize)> = HashMap::new();
    // Chunks to send again: refused for want of read handles while others were in flight.
    let mut again: Vec<(usize, usize)> = Vec::new();
    let mut waiting = WaitForReadBuffers::default();
    let mut next = 0usize;
    let read = |transport: &mut T, start: usize, length: usize| {
        transport
            .submit(Command::Read {
                name: name.to_string(),
                offset_bytes: offset_bytes + start as u64,
                length_bytes: length as u64,
            })
            .map_err(err)
    };
    while next < target.len() || !pending.is_empty() || !again.is_empty() {
        while pending.len() < in_flight {
            let (start, length) = match again.pop() {
                Some(chunk) => chunk,
                None if next < target.len() => {
                    let length = chunk_bytes.min(target.len() - next);
                    next += length;
                    (next - length, length)
                }
                None => break,
            };
            pending.insert(read(transport, start, length)?, (start, length));
        }
        let (ticket, answer) = transport.wait().map_err(err)?;
        let (start, length) = pending
            .remove(&ticket)
            .expect("every completion answers a read this call sent");
        match answer {
            Ok(reply) => {
                copy_chunk::<T>(
                    reply,
                    name,
                    offset_bytes + start as u64,
                    &mut target[start..start + length],
                )?;
                ReadRetry::<T::Error>::succeeded(&mut waiting);
            }
            Err(error) if error.code() == ErrorCode::TooManyReadHandles && !pending.is_empty() => {
                // Views this client still holds (live arrays) leave fewer handles than
                // reads in flight: go on with as many as the server answered.
                in_flight = pending.len();
                again.push((start, length));
            }
            Err(error) => {
                waiting.failed(error).map_err(err)?;
                again.push((start, length));
            }
        }
    }
    Ok(())
}

/// Copies the bytes of a read's `reply` (asked at `offset_bytes` of file `name`) into
/// `target`, which they must fill.
fn copy_chunk<T: Way>(
    reply: Reply<T::P>,
    name: &str,
    offset_bytes: u64,
    target: &mut [u8],
) -> Result<(), StoreError> {
    let Reply::Data(data) = reply else {
        return Err(StoreError::Unexpected(format!(
            "the store answered a read with a {} reply",
            reply.name()
        )));
    };
    let bytes = T::P::read_bytes(&data);
    if bytes.len() != target.len() {
        return Err(StoreError::Invalid(format!(
            "{name}: {} bytes asked at offset {offset_bytes}, {} read (the file is shorter)",
            target.len(),
            bytes.len()
        )));
    }
    target.copy_from_slice(bytes);
    Ok(())
}

/// Renames `from` to `to` (an existing `to` replaced only when `replace`), flushed.
pub fn rename<T: Way>(
    transport: &mut T,
    from: &str,
    to: &str,
    replace: bool,
) -> Result<(), StoreError> {
    transport
        .call_done(Command::Rename {
            from: from.to_string(),
            to: to.to_string(),
            replace,
        })
        .map_err(err)?;
    flush(transport)
}

/// Deletes file `name`, flushed.
pub fn delete<T: Way>(transport: &mut T, name: &str) -> Result<(), StoreError> {
    transport.delete(name).map_err(err)?;
    flush(transport)
}

/// Copies file `from` to the new file `to` by `method`, flushed.
pub fn copy<T: Way>(
    transport: &mut T,
    from: &str,
    to: &str,
    method: CopyMethod,
) -> Result<CopyReport, StoreError> {
    let report = transport.copy(from, to, method).map_err(err)?;
    flush(transport)?;
    Ok(report)
}
