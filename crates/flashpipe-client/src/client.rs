//! The connection to a server: the handshake, pipelined requests, one-shot calls.

use std::collections::{HashSet, VecDeque};
use std::io::BufReader;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use flashpipe_fs::{CopyMethod, CopyReport, FileStat, FsStats};
use flashpipe_protocol::{
    encode_frame, read_frame, send_all, CancelOutcome, CheckSummary, DataPayload, Frame, Hello,
    ReadFrameError, RemoteError, Request, RequestId, ServerLimits, WriteGrant, MAX_BODY_BYTES,
    PROTOCOL_VERSION,
};

use crate::error::{ClientError, ConnectError};
use crate::view::{ReadView, WriteBuffer, WriteStorage};

/// Bytes of the read buffer in front of the socket.
const READ_BUFFER_BYTES: usize = 256 << 10;

/// Most writes one [`Client::write`] keeps in flight.
const WRITE_WINDOW_MAX: usize = 16;

/// Where a server of the store whose store file is `store_file` listens: beside the
/// store file, its name with `.sock` added (`store.toml` -> `store.toml.sock`).
pub fn server_socket_path(store_file: &Path) -> PathBuf {
    let mut name = store_file.as_os_str().to_owned();
    name.push(".sock");
    PathBuf::from(name)
}

/// How to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectOptions {
    /// Map the server's shared memory (data by reference); false for the copying path.
    pub map_memory: bool,
    /// What the server's logs call this client.
    pub client_name: String,
}

impl Default for ConnectOptions {
    fn default() -> ConnectOptions {
        ConnectOptions {
            map_memory: true,
            client_name: format!("flashpipe-client (pid {})", std::process::id()),
        }
    }
}

/// What the server told at connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// The protocol version spoken.
    pub version: u16,
    /// The server's process id.
    pub server_pid: u32,
    /// The store the server holds.
    pub store_path: String,
    /// The server's limits.
    pub limits: ServerLimits,
}

/// A request's answer, with read data as [`ReadView`]s.
#[derive(Debug)]
pub enum Response {
    /// Done.
    Done,
    /// A write completed.
    Written {
        /// Bytes written.
        length_bytes: u64,
    },
    /// Read data.
    Data(ReadView),
    /// Each file's data or its error, in the request's order.
    Files(Vec<Result<ReadView, RemoteError>>),
    /// One file's facts.
    Stat(FileStat),
    /// Every file's facts.
    List(Vec<FileStat>),
    /// Space and counts.
    Stats(FsStats),
    /// What the check found.
    Check(CheckSummary),
    /// What a copy did.
    Copied(CopyReport),
    /// A write slot granted.
    Granted(WriteGrant),
    /// What a cancel did.
    Cancel(CancelOutcome),
}

/// A connection to a server.
pub struct Client {
    socket: UnixStream,
    reader: BufReader<UnixStream>,
    info: ServerInfo,
    next_request_id: RequestId,
    in_flight: HashSet<RequestId>,
    arrived: VecDeque<(RequestId, Result<Response, RemoteError>)>,
}

impl Client {
    /// Connects to the server listening on `socket` and shakes hands.
    pub fn connect(socket: &Path, options: ConnectOptions) -> Result<Client, ConnectError> {
        let stream = UnixStream::connect(socket).map_err(|source| ConnectError::Connect {
            path: socket.to_path_buf(),
            source,
        })?;
        let hello = Frame::Hello(Hello {
            min_version: PROTOCOL_VERSION,
            max_version: PROTOCOL_VERSION,
            map_memory: options.map_memory,
            client_name: options.client_name,
        });
        // A server at its client limit may have closed already; its answer says why.
        let _ = send_all(&stream, &encode_frame(&hello));
        let reading = stream
            .try_clone()
            .map_err(|error| ConnectError::Handshake(format!("cloning the socket: {error}")))?;
        let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, reading);
        let welcome = match read_frame(&mut reader, MAX_BODY_BYTES) {
            Ok(Some(Frame::Welcome(welcome))) => welcome,
            Ok(Some(Frame::Error { error, .. })) => return Err(ConnectError::Refused(error)),
            Ok(Some(other)) => {
                return Err(ConnectError::Handshake(format!(
                    "the server answered hello with a {} frame",
                    other.kind().name()
                )))
            }
            Ok(None) => {
                return Err(ConnectError::Handshake(
                    "the server closed the connection without a welcome".to_string(),
                ))
            }
            Err(error) => return Err(ConnectError::Handshake(error.to_string())),
        };
        Ok(Client {
            socket: stream,
            reader,
            info: ServerInfo {
                version: welcome.version,
                server_pid: welcome.server_pid,
                store_path: welcome.store_path,
                limits: welcome.limits,
            },
            next_request_id: 1,
            in_flight: HashSet::new(),
            arrived: VecDeque::new(),
        })
    }

    /// True when data goes by reference on this connection.
    pub fn is_mapped(&self) -> bool {
        false
    }

    /// What the server told at connect.
    pub fn server_info(&self) -> &ServerInfo {
        &self.info
    }

    /// Requests sent and not yet taken back with [`Client::wait`].
    pub fn in_flight(&self) -> usize {
        self.in_flight.len() + self.arrived.len()
    }

    /// Sends a request; its answer comes from [`Client::wait`] under the returned id.
    pub fn submit(&mut self, request: Request) -> Result<RequestId, ClientError> {
        let request_id = self.next_request_id;
        self.next_request_id += 1;
        let frame = Frame::Request {
            request_id,
            request,
        };
        send_all(&self.socket, &encode_frame(&frame)).map_err(ClientError::ConnectionLost)?;
        self.in_flight.insert(request_id);
        Ok(request_id)
    }

    /// Waits for the next answer of any request in flight.
    pub fn wait(&mut self) -> Result<(RequestId, Result<Response, RemoteError>), ClientError> {
        if let Some(answer) = self.arrived.pop_front() {
            return Ok(answer);
        }
        if self.in_flight.is_empty() {
            return Err(ClientError::NothingInFlight);
        }
        self.receive()
    }

    /// Reads frames until an answer to a request in flight comes.
    fn receive(&mut self) -> Result<(RequestId, Result<Response, RemoteError>), ClientError> {
        let frame = match read_frame(&mut self.reader, MAX_BODY_BYTES) {
            Ok(Some(frame)) => frame,
            Ok(None) => {
                return Err(ClientError::ConnectionLost(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the server closed the connection",
                )))
            }
            Err(ReadFrameError::Malformed(error)) => return Err(ClientError::Malformed(error)),
            Err(error) => {
                return Err(ClientError::ConnectionLost(std::io::Error::other(
                    error.to_string(),
                )))
            }
        };
        let (request_id, answer) = match frame {
            Frame::Response {
                request_id,
                response,
            } => (request_id, Ok(self.response(response)?)),
            Frame::Error {
                request_id: 0,
                error,
            } => return Err(ClientError::Closed(error)),
            Frame::Error { request_id, error } => (request_id, Err(error)),
            other => {
                return Err(ClientError::Protocol(format!(
                    "a {} frame where an answer was expected",
                    other.kind().name()
                )))
            }
        };
        if !self.in_flight.remove(&request_id) {
            return Err(ClientError::Protocol(format!(
                "an answer to request {request_id}, which is not in flight"
            )));
        }
        Ok((request_id, answer))
    }

    fn response(
        &mut self,
        response: flashpipe_protocol::Response,
    ) -> Result<Response, ClientError> {
        use flashpipe_protocol::Response as Wire;
        Ok(match response {
            Wire::Done => Response::Done,
            Wire::Written { length_bytes } => Response::Written { length_bytes },
            Wire::Data(payload) => Response::Data(self.view(payload)?),
            Wire::Files(files) => Response::Files(
                files
                    .into_iter()
                    .map(|file| match file {
                        Ok(payload) => self.view(payload).map(Ok),
                        Err(error) => Ok(Err(error)),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            Wire::Stat(stat) => Response::Stat(stat),
            Wire::List(stats) => Response::List(stats),
            Wire::Stats(stats) => Response::Stats(stats),
            Wire::Check(summary) => Response::Check(summary),
            Wire::Copied(report) => Response::Copied(report),
            Wire::Granted(grant) => Response::Granted(grant),
            Wire::Cancel(outcome) => Response::Cancel(outcome),
        })
    }

    fn view(&mut self, payload: DataPayload) -> Result<ReadView, ClientError> {
        match payload {
            DataPayload::Inline(bytes) => Ok(ReadView::owned(bytes)),
            DataPayload::Shared(_) => Err(ClientError::Protocol(
                "data by reference on a connection that maps no memory".to_string(),
            )),
        }
    }

    /// Sends a request and waits for its own answer (other answers are kept for
    /// [`Client::wait`]).
    pub fn call(&mut self, request: Request) -> Result<Response, ClientError> {
        let request_id = self.submit(request)?;
        self.wait_for(request_id)
    }

    /// Waits for the answer of request `request_id` (others are kept).
    pub fn wait_for(&mut self, request_id: RequestId) -> Result<Response, ClientError> {
        if let Some(position) = self.arrived.iter().position(|(id, _)| *id == request_id) {
            let (_, answer) = self.arrived.remove(position).expect("found above");
            return Ok(answer?);
        }
        loop {
            let (id, answer) = self.receive()?;
            if id == request_id {
                return Ok(answer?);
            }
            self.arrived.push_back((id, answer));
        }
    }

    /// Creates an empty file.
    pub fn create(&mut self, name: &str) -> Result<(), ClientError> {
        self.call_done(Request::Create {
            name: name.to_string(),
        })
    }

    /// Writes `bytes` at `offset_bytes`, in requests of at most the server's write limit
    /// with several in flight.
    pub fn write(
        &mut self,
        name: &str,
        offset_bytes: u64,
        bytes: &[u8],
    ) -> Result<(), ClientError> {
        let chunk_bytes = self.write_chunk_bytes();
        let window = self.write_window(chunk_bytes);
        let mut waiting = VecDeque::new();
        let mut first_error = None;
        for (index, chunk) in bytes.chunks(chunk_bytes.max(1)).enumerate() {
            if waiting.len() >= window {
                note_error(&mut first_error, self.wait_written(waiting.pop_front()));
            }
            let mut buffer = self.write_buffer()?;
            buffer[..chunk.len()].copy_from_slice(chunk);
            let chunk_offset = offset_bytes + (index * chunk_bytes) as u64;
            waiting.push_back(self.submit_write(name, chunk_offset, buffer, chunk.len())?);
        }
        while let Some(request_id) = waiting.pop_front() {
            note_error(&mut first_error, self.wait_written(Some(request_id)));
        }
        first_error.map_or(Ok(()), Err)
    }

    fn wait_written(&mut self, request_id: Option<RequestId>) -> Result<(), ClientError> {
        match request_id {
            Some(request_id) => self.wait_for(request_id).and_then(expect_written),
            None => Ok(()),
        }
    }

    fn write_chunk_bytes(&self) -> usize {
        self.info.limits.max_write_bytes as usize
    }

    fn write_window(&self, chunk_bytes: usize) -> usize {
        let limits = &self.info.limits;
        let by_bytes = (limits.max_bytes_in_flight_per_client / chunk_bytes.max(1) as u64) as usize;
        by_bytes
            .min(limits.max_in_flight_per_client as usize)
            .clamp(1, WRITE_WINDOW_MAX)
    }

    /// A buffer to fill and send with [`Client::submit_write`]: a granted slot of the
    /// shared write pool when mapped, else memory of this client's own.
    pub fn write_buffer(&mut self) -> Result<WriteBuffer, ClientError> {
        Ok(WriteBuffer::owned(self.write_chunk_bytes()))
    }

    /// Sends a write of the first `length_bytes` of `buffer` (answered
    /// [`Response::Written`] through [`Client::wait`]).
    pub fn submit_write(
        &mut self,
        name: &str,
        offset_bytes: u64,
        buffer: WriteBuffer,
        length_bytes: usize,
    ) -> Result<RequestId, ClientError> {
        if length_bytes > buffer.len() {
            return Err(ClientError::LimitReached {
                what: format!(
                    "write of {length_bytes} bytes from a buffer of {} bytes",
                    buffer.len()
                ),
                limit: buffer.len() as u64,
            });
        }
        match buffer.storage {
            WriteStorage::Owned(mut bytes) => {
                bytes.truncate(length_bytes);
                self.submit(Request::Write {
                    name: name.to_string(),
                    offset_bytes,
                    data: bytes,
                })
            }
        }
    }

    /// Reads `length_bytes` at `offset_bytes` (at most the server's read limit).
    pub fn read(
        &mut self,
        name: &str,
        offset_bytes: u64,
        length_bytes: u64,
    ) -> Result<ReadView, ClientError> {
        match self.call(Request::Read {
            name: name.to_string(),
            offset_bytes,
            length_bytes,
        })? {
            Response::Data(view) => Ok(view),
            other => Err(unexpected("read", &other)),
        }
    }

    /// Reads several small files whole in one request: each file's data or its error.
    pub fn read_files(
        &mut self,
        names: &[String],
    ) -> Result<Vec<Result<ReadView, RemoteError>>, ClientError> {
        match self.call(Request::ReadFiles {
            names: names.to_vec(),
        })? {
            Response::Files(files) => Ok(files),
            other => Err(unexpected("read-files", &other)),
        }
    }

    /// Sets a file's size.
    pub fn truncate(&mut self, name: &str, size_bytes: u64) -> Result<(), ClientError> {
        self.call_done(Request::Truncate {
            name: name.to_string(),
            size_bytes,
        })
    }

    /// Deletes a file.
    pub fn delete(&mut self, name: &str) -> Result<(), ClientError> {
        self.call_done(Request::Delete {
            name: name.to_string(),
        })
    }

    /// Renames a file (the target must not exist).
    pub fn rename(&mut self, from: &str, to: &str) -> Result<(), ClientError> {
        self.call_done(Request::Rename {
            from: from.to_string(),
            to: to.to_string(),
        })
    }

    /// Renames a file, replacing the target if it exists.
    pub fn rename_replacing(&mut self, from: &str, to: &str) -> Result<(), ClientError> {
        self.call_done(Request::RenameReplacing {
            from: from.to_string(),
            to: to.to_string(),
        })
    }

    /// Copies the whole file `from` to the new file `to`.
    pub fn copy(
        &mut self,
        from: &str,
        to: &str,
        method: CopyMethod,
    ) -> Result<CopyReport, ClientError> {
        match self.call(Request::Copy {
            from: from.to_string(),
            to: to.to_string(),
            method,
        })? {
            Response::Copied(report) => Ok(report),
            other => Err(unexpected("copy", &other)),
        }
    }

    /// One file's facts.
    pub fn stat(&mut self, name: &str) -> Result<FileStat, ClientError> {
        match self.call(Request::Stat {
            name: name.to_string(),
        })? {
            Response::Stat(stat) => Ok(stat),
            other => Err(unexpected("stat", &other)),
        }
    }

    /// Every file.
    pub fn list(&mut self) -> Result<Vec<FileStat>, ClientError> {
        match self.call(Request::List)? {
            Response::List(stats) => Ok(stats),
            other => Err(unexpected("list", &other)),
        }
    }

    /// Space and counts (df).
    pub fn stats(&mut self) -> Result<FsStats, ClientError> {
        match self.call(Request::Stats)? {
            Response::Stats(stats) => Ok(stats),
            other => Err(unexpected("stats", &other)),
        }
    }

    /// Makes every change so far durable.
    pub fn flush(&mut self) -> Result<(), ClientError> {
        self.call_done(Request::Flush)
    }

    /// Checks the durable image (flush first to check the current state).
    pub fn check(&mut self) -> Result<CheckSummary, ClientError> {
        match self.call(Request::Check)? {
            Response::Check(summary) => Ok(summary),
            other => Err(unexpected("check", &other)),
        }
    }

    /// Asks the server to cancel request `id`; says whether it was still running (a
    /// command the engine has taken completes, and its answer still comes).
    pub fn cancel(&mut self, id: RequestId) -> Result<CancelOutcome, ClientError> {
        match self.call(Request::Cancel { target: id })? {
            Response::Cancel(outcome) => Ok(outcome),
            other => Err(unexpected("cancel", &other)),
        }
    }

    fn call_done(&mut self, request: Request) -> Result<(), ClientError> {
        let kind = request.kind().name();
        match self.call(request)? {
            Response::Done => Ok(()),
            other => Err(unexpected(kind, &other)),
        }
    }
}

fn expect_written(response: Response) -> Result<(), ClientError> {
    match response {
        Response::Written { .. } => Ok(()),
        other => Err(unexpected("write", &other)),
    }
}

fn note_error(first_error: &mut Option<ClientError>, result: Result<(), ClientError>) {
    if let Err(error) = result {
        first_error.get_or_insert(error);
    }
}

fn unexpected(request: &str, response: &Response) -> ClientError {
    ClientError::Protocol(format!("a {request} request answered with {response:?}"))
}
