//! The one way every store command talks to its store, whichever way the session reaches
//! it: code generic over [`StoreTransport`], a `flashpipe_api::Transport` the engine's
//! client in this process and the served client both are, using the command set's methods
//! (`flashpipe_api::TransportExt`) and streams (`flashpipe_api::write_stream`,
//! `flashpipe_api::read_stream_retrying`). Monomorphised for each transport: nothing is
//! boxed on the path of a chunk.
//!
//! A read refused because every engine read buffer is held (by other clients' reads, or
//! this one's) waits and is tried again rather than failing the command
//! (`flashpipe_api::WaitForReadBuffers`); a file read in
//! several commands is checked, at the end, to be the version it was at the start (through
//! a server another client may write it meanwhile).

use flashpipe_api::{
    read_stream_retrying, write_stream, CodedError, Command, ReadWindow, StreamError,
    StreamPayloads, Transport, TransportExt, WaitForReadBuffers,
};
use flashpipe_client::Client;

use super::SessionError;
use flashpipe_engine::EngineClient;
use flashpipe_fs::FileStat;

/// Bytes per write or read command in transfers (at most what the transport allows).
pub const TRANSFER_CHUNK_BYTES: usize = 1 << 20;
/// Commands in flight per transfer (at most what the transport allows).
pub const TRANSFER_IN_FLIGHT: usize = 8;

/// A transport's result as a session's (its error kept whole, so its message and kind
/// are the same both ways).
pub trait SessionResult<V> {
    /// The result with its error as a [`SessionError`].
    fn session(self) -> Result<V, SessionError>;
}

impl<V, E: Into<SessionError>> SessionResult<V> for Result<V, E> {
    fn session(self) -> Result<V, SessionError> {
        self.map_err(Into::into)
    }
}

/// A way to a store for the CLI's commands: a command-set transport whose payloads the
/// streams can fill and read and whose errors are a session's.
pub trait StoreTransport:
    Transport<P: StreamPayloads, Error: Into<SessionError> + CodedError>
{
    /// Most bytes this client may have in flight at once.
    fn max_bytes_in_flight(&self) -> u64;
}

impl StoreTransport for EngineClient {
    fn max_bytes_in_flight(&self) -> u64 {
        u64::MAX
    }
}

impl StoreTransport for Client {
    fn max_bytes_in_flight(&self) -> u64 {
        self.server_info().limits.max_bytes_in_flight_per_client
    }
}

/// Commands a transfer of `chunk_bytes` per command keeps in flight: the CLI's window,
/// within the transport's byte limit (its command limit is the stream's to keep).
fn transfer_window<T: StoreTransport>(transport: &T, chunk_bytes: u64) -> usize {
    let by_bytes = transport.max_bytes_in_flight() / chunk_bytes.max(1);
    TRANSFER_IN_FLIGHT
        .min(usize::try_from(by_bytes).unwrap_or(usize::MAX))
        .max(1)
}

/// Whether the store has a file `name`.
pub fn file_exists<T: StoreTransport>(transport: &mut T, name: &str) -> Result<bool, SessionError> {
    match transport.stat(name).session() {
        Ok(_) => Ok(true),
        Err(error) if error.is_not_found() => Ok(false),
        Err(error) => Err(error),
    }
}

/// Renames `from` to `to`, replacing `to` when `replace`.
pub fn rename_file<T: StoreTransport>(
    transport: &mut T,
    from: &str,
    to: &str,
    replace: bool,
) -> Result<(), SessionError> {
    transport
        .call_done(Command::Rename {
            from: from.to_string(),
            to: to.to_string(),
            replace,
        })
        .session()
}

fn stream_error<E: Into<SessionError>>(error: StreamError<E>) -> SessionError {
    match error {
        StreamError::Transport(error) => error.into(),
        StreamError::Source(error) => SessionError::Source(error),
        StreamError::Sink(error) => SessionError::Sink(error),
    }
}

/// Writes everything `source` yields into file `name` (created, or emptied if it
/// exists); `progress` gets the bytes acknowledged so far. Returns the bytes written.
pub fn write_file<T: StoreTransport>(
    transport: &mut T,
    name: &str,
    source: &mut dyn std::io::Read,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, SessionError> {
    let limit = usize::try_from(transport.limits().max_write_bytes).unwrap_or(usize::MAX);
    let chunk_bytes = TRANSFER_CHUNK_BYTES.min(limit).max(1);
    let window = transfer_window(transport, chunk_bytes as u64);
    write_stream(transport, name, source, chunk_bytes, window, progress).map_err(stream_error)
}

/// Reads the whole file `name` into `sink`, in order; `progress` gets the bytes
/// delivered so far. Returns the bytes delivered. Fails when the file changed while it
/// was read.
pub fn read_file<T: StoreTransport>(
    transport: &mut T,
    name: &str,
    sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, SessionError> {
    let chunk_bytes = (TRANSFER_CHUNK_BYTES as u64)
        .min(transport.limits().max_read_bytes)
        .max(1);
    let window = ReadWindow {
        chunk_bytes,
        in_flight: transfer_window(transport, chunk_bytes),
    };
    let mut waiting = WaitForReadBuffers::default();
    let before = read_stream_retrying(transport, name, sink, window, progress, &mut waiting)
        .map_err(stream_error)?;
    let after = transport.stat(name).session()?;
    if !same_version(&before, &after) {
        return Err(SessionError::ChangedWhileRead {
            name: name.to_string(),
        });
    }
    Ok(before.size_bytes)
}

/// Waits for every command still in flight (after a failure), dropping the answers.
pub fn drain<T: StoreTransport>(transport: &mut T) {
    while transport.outstanding() > 0 && transport.wait().is_ok() {}
}

/// True when two stats of one name show the same file unchanged: the same file id (a
/// replacement or a delete and re-create gives a new one), size and modification time
/// (every write moves it).
fn same_version(before: &FileStat, after: &FileStat) -> bool {
    before.file_id == after.file_id
        && before.size_bytes == after.size_bytes
        && before.modified_clock_ns == after.modified_clock_ns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_is_another_version() {
        let stat = FileStat {
            file_id: flashpipe_fs::FileId(7),
            name: "f".into(),
            size_bytes: 10,
            allocated_blocks: 1,
            shared_bytes: 0,
            modified_clock_ns: 5,
            mode: None,
            owner: None,
            modified_wall_ns: None,
        };
        assert!(same_version(&stat, &stat.clone()));
        let rewritten = FileStat {
            modified_clock_ns: 6,
            ..stat.clone()
        };
        let replaced = FileStat {
            file_id: flashpipe_fs::FileId(8),
            ..stat.clone()
        };
        assert!(!same_version(&stat, &rewritten));
        assert!(!same_version(&stat, &replaced));
    }
}
