//! The store commands through a server: [`ServedStore`] implements
//! [`StoreOperations`] over a `flashpipe_client::Client`, keeping several writes and reads
//! in flight within the limits the server announced at connect (writes through the command
//! set's one write stream, `flashpipe_api::write_stream`). A read refused because
//! every engine read buffer is held (by other clients' reads) waits and is tried again
//! rather than failing the command.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use flashpipe_client::{
    write_stream, Client, ClientError, CopyMethod, CopyReport, ErrorCode, FileStat, FsStats,
    ReadView, RemoteError, Request, RequestId, Response, StreamError, TransportExt,
};

use super::{SessionError, StoreOperations, TRANSFER_CHUNK_BYTES, TRANSFER_IN_FLIGHT};

/// How long, in all, a read waits for engine read buffers that other reads hold before
/// it fails (each wait ends as soon as a retried read gets a buffer).
const READ_BUFFER_WAIT: Duration = Duration::from_secs(60);

/// Longest pause between two tries of a read refused for want of engine read buffers.
const READ_BUFFER_PAUSE_MAX: Duration = Duration::from_millis(100);

/// A read's waiting for engine read buffers: pauses growing from 1 ms to 100 ms, for
/// [`READ_BUFFER_WAIT`] at most since the first refusal without a read in between.
#[derive(Default)]
struct BufferWait {
    since: Option<Instant>,
    pause: Duration,
}

impl BufferWait {
    /// Pauses before the refused read is tried again, or gives the refusal back once
    /// the reads have waited too long.
    fn wait_or_give_up(&mut self, refusal: &RemoteError) -> Result<(), SessionError> {
        let since = *self.since.get_or_insert_with(Instant::now);
        if since.elapsed() >= READ_BUFFER_WAIT {
            return Err(ClientError::from(refusal.clone()).into());
        }
        self.pause = (self.pause * 2).clamp(Duration::from_millis(1), READ_BUFFER_PAUSE_MAX);
        std::thread::sleep(self.pause);
        Ok(())
    }

    /// A read got its buffer: the next refusal starts a new wait.
    fn reset(&mut self) {
        *self = BufferWait::default();
    }
}

/// A connection to the server holding the store.
pub struct ServedStore {
    /// The connection.
    pub client: Client,
}

impl ServedStore {
    /// Commands a transfer keeps in flight: the CLI's own window, within the server's
    /// per-client limits on commands, bytes and (for reads by reference) read handles.
    fn transfer_window(&self, chunk_bytes: u64, reads: bool) -> usize {
        let limits = &self.client.server_info().limits;
        let by_bytes = limits.max_bytes_in_flight_per_client / chunk_bytes.max(1);
        let mut window = TRANSFER_IN_FLIGHT
            .min(limits.max_in_flight_per_client as usize)
            .min(usize::try_from(by_bytes).unwrap_or(usize::MAX));
        if reads {
            window = window.min(limits.max_read_handles_per_client as usize);
        }
        window.max(1)
    }

    /// Bytes per write command: the CLI's chunk, at most the server's write limit.
    fn write_chunk_bytes(&self) -> usize {
        let limit = self.client.server_info().limits.max_write_bytes as usize;
        TRANSFER_CHUNK_BYTES.min(limit).max(1)
    }

    /// Bytes per read command: the CLI's chunk, at most the server's read limit.
    fn read_chunk_bytes(&self) -> u64 {
        let limit = self.client.server_info().limits.max_read_bytes;
        (TRANSFER_CHUNK_BYTES as u64).min(limit).max(1)
    }
}

/// True when two stats of one name show the same file unchanged: the same file id (a
/// replacement or a delete and re-create gives a new one), size and modification time
/// (every write moves it).
fn same_version(before: &FileStat, after: &FileStat) -> bool {
    before.file_id == after.file_id
        && before.size_bytes == after.size_bytes
        && before.modified_clock_ns == after.modified_clock_ns
}

/// The server's error code of a client error, where the server answered with one.
pub fn remote_code(error: &ClientError) -> Option<ErrorCode> {
    error.remote().map(|remote| remote.code)
}

fn unexpected(command: &'static str, response: &Response) -> SessionError {
    SessionError::UnexpectedReply {
        command,
        reply: format!("{response:?}"),
    }
}

impl StoreOperations for ServedStore {
    fn stat(&mut self, name: &str) -> Result<FileStat, SessionError> {
        Ok(self.client.stat(name)?)
    }

    fn list(&mut self) -> Result<Vec<FileStat>, SessionError> {
        Ok(self.client.list()?)
    }

    fn delete(&mut self, name: &str) -> Result<(), SessionError> {
        Ok(self.client.delete(name)?)
    }

    fn rename(&mut self, from: &str, to: &str, replace: bool) -> Result<(), SessionError> {
        if replace {
            Ok(self.client.rename_replacing(from, to)?)
        } else {
            Ok(self.client.rename(from, to)?)
        }
    }

    fn copy(
        &mut self,
        from: &str,
        to: &str,
        method: CopyMethod,
    ) -> Result<CopyReport, SessionError> {
        Ok(self.client.copy(from, to, method)?)
    }

    fn stats(&mut self) -> Result<FsStats, SessionError> {
        Ok(self.client.stats()?)
    }

    fn flush(&mut self) -> Result<(), SessionError> {
        Ok(self.client.flush()?)
    }

    fn write_stream(
        &mut self,
        name: &str,
        source: &mut dyn std::io::Read,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64, SessionError> {
        let chunk_bytes = self.write_chunk_bytes();
        let window = self.transfer_window(chunk_bytes as u64, false);
        write_stream(
            &mut self.client,
            name,
            source,
            chunk_bytes,
            window,
            progress,
        )
        .map_err(|error| match error {
            StreamError::Transport(error) => SessionError::Served(error),
            StreamError::Source(error) => SessionError::Source(error),
            StreamError::Sink(error) => SessionError::Sink(error),
        })
    }

    fn read_stream(
        &mut self,
        name: &str,
        sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64, SessionError> {
        let before = self.client.stat(name)?;
        let size_bytes = before.size_bytes;
        let chunk_bytes = self.read_chunk_bytes();
        let window = self.transfer_window(chunk_bytes, true);
        let mut offsets: HashMap<RequestId, u64> = HashMap::new();
        let mut arrived: BTreeMap<u64, ReadView> = BTreeMap::new();
        let mut again: BTreeSet<u64> = BTreeSet::new();
        let mut waiting = BufferWait::default();
        let (mut next_submit, mut next_deliver) = (0u64, 0u64);
        while next_deliver < size_bytes {
            while offsets.len() + arrived.len() < window {
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
                let request_id = self.client.submit(Request::Read {
                    name: name.to_string(),
                    offset_bytes,
                    length_bytes,
                })?;
                offsets.insert(request_id, offset_bytes);
            }
            let (request_id, answer) = self.client.wait()?;
            let offset = offsets
                .remove(&request_id)
                .expect("an answer to a read this call submitted");
            let answer = match answer {
                Err(error) if error.code == ErrorCode::ReadBuffersExhausted => {
                    // Every engine read buffer is held by reads of other clients (or
                    // ours): wait for some to come back instead of failing. Views this
                    // call holds past the refused offset cannot be delivered before it:
                    // give them back too and read them again.
                    waiting.wait_or_give_up(&error)?;
                    again.insert(offset);
                    let later: Vec<u64> = arrived.range(offset..).map(|(at, _)| *at).collect();
                    for at in later {
                        arrived.remove(&at);
                        again.insert(at);
                    }
                    continue;
                }
                answer => answer,
            };
            waiting.reset();
            match answer.map_err(ClientError::from)? {
                Response::Data(view) => arrived.insert(offset, view),
                other => return Err(unexpected("read", &other)),
            };
            while let Some(view) = arrived.remove(&next_deliver) {
                if view.is_empty() {
                    return Err(SessionError::UnexpectedReply {
                        command: "read",
                        reply: format!("no bytes at offset {next_deliver} of {size_bytes}"),
                    });
                }
                sink(&view).map_err(SessionError::Sink)?;
                next_deliver += view.len() as u64;
                progress(next_deliver);
            }
        }
        let after = self.client.stat(name)?;
        if !same_version(&before, &after) {
            return Err(SessionError::ChangedWhileRead {
                name: name.to_string(),
            });
        }
        Ok(size_bytes)
    }

    fn drain(&mut self) {
        while self.client.in_flight() > 0 {
            if self.client.wait().is_err() {
                break;
            }
        }
    }
}
