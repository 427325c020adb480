//! The connection to a server: the handshake, pipelined requests, one-shot calls. A
//! mapping client moves its frames into two shared-memory rings after the handshake
//! (#14, [`ClientTransport`]); the socket then only tells whether the server lives.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::BufReader;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use flashpipe_shm::{
    push_stream_bytes, Doorbell, FrameRing, RingReader, SharedMapping, DEFAULT_SERVE_RING_SPIN_US,
};

use crate::trust::{check_server_user, check_store_identity, ServerExpectation};
use flashpipe_api::{Command, Reply};
use flashpipe_protocol::{
    encode_frame, encode_frame_into, encode_release_into, read_frame, send_all, CancelOutcome,
    ClockKind, ErrorCode, Frame, Hello, ReadFrameError, RemoteError, Request, RequestId,
    ServerLimits, SharedRegion, WireCommand, WriteGrant, WritePayload, ATTRIBUTES_VERSION,
    MAX_BODY_BYTES, MAX_RELEASE_HANDLES, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION,
};

use crate::error::{ClientError, ConnectError};

mod answer;
mod region;
mod setup;

pub use answer::Response;
pub use region::DestinationRegion;

use crate::view::{GrantedSlot, WriteBuffer, WriteStorage};
pub use setup::ENGINE_PATH_SPIN_US;
use setup::{map_regions, open_rings, receive_first_frame, server_alive};

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
    /// How frames travel once connected.
    pub transport: ClientTransport,
    /// How long a wait for an answer polls the reply ring before it parks on the
    /// ring's futex (a poll yields the core after the first few), in microseconds. 0
    /// parks at once, except where the server's engine thread answers into the ring
    /// (protocol version 6): there 0 means [`ENGINE_PATH_SPIN_US`].
    pub ring_spin_us: u32,
    /// Who must run the server and which store it must hold; `None` trusts any server
    /// (tests and programs that started the server themselves).
    pub expect: Option<ServerExpectation>,
}

/// How a connection's frames travel after the handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientTransport {
    /// Through two shared-memory rings when the connection maps memory and the server
    /// opens them; on the socket otherwise.
    RingsWhenMapped,
    /// On the socket always.
    Socket,
}

impl Default for ConnectOptions {
    fn default() -> ConnectOptions {
        ConnectOptions {
            map_memory: true,
            client_name: format!("flashpipe-client (pid {})", std::process::id()),
            transport: ClientTransport::RingsWhenMapped,
            ring_spin_us: DEFAULT_SERVE_RING_SPIN_US,
            expect: None,
        }
    }
}

/// Longest park of a wait on the reply ring before it looks whether the server's end of
/// the socket is still open (a server killed cannot close its rings), in microseconds.
const RING_PARK_TIMEOUT_US: u64 = 50_000;

/// What the server told at connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// The protocol version spoken.
    pub version: u16,
    /// The server's process id.
    pub server_pid: u32,
    /// The store the server holds.
    pub store_path: String,
    /// The identity of the store the server holds (`None`: it has none yet).
    pub store_identity: Option<[u8; 16]>,
    /// The server's limits.
    pub limits: ServerLimits,
    /// Which clock the store's file times count; `None` when the server did not say (a
    /// server of protocol version 3: the caller may read the store file to learn it).
    pub store_clock: Option<ClockKind>,
    /// True when the server holds the store read-only (`serve --read-only`; protocol
    /// version 6): every change is refused. False from an older server, which never does.
    pub read_only: bool,
}

/// A connection to a server.
pub struct Client {
    socket: UnixStream,
    link: Link,
    info: ServerInfo,
    next_request_id: RequestId,
    in_flight: HashSet<RequestId>,
    arrived: VecDeque<(RequestId, Result<Response, RemoteError>)>,
    shared: Option<SharedRegions>,
    /// The bytes of the last send, kept for the next (let go above
    /// [`KEPT_SEND_BYTES`]).
    send_buffer: Vec<u8>,
    /// The handles of the last release, kept for the next (swapped with the list the
    /// views fill).
    released: Vec<u64>,
}

/// Capacity the send buffer keeps between requests; a larger one (a write sent inline)
/// is let go after its send.
const KEPT_SEND_BYTES: usize = 64 << 10;

/// Where frames travel.
enum Link {
    /// The socket, read through a buffer.
    Socket(BufReader<UnixStream>),
    /// The rings: requests pushed into one, answers read from the other.
    Rings(Box<RingLink>),
}

/// The two rings of a connection on rings.
struct RingLink {
    requests: FrameRing,
    replies: RingReader,
    /// The engine's doorbell (protocol version 6): the engine thread reads the request
    /// ring and parks on it, so every push is followed by a ring.
    doorbell: Option<Doorbell>,
}

/// The mapped regions of a connection by reference, and what this client holds of them.
struct SharedRegions {
    read_mapping: Arc<SharedMapping>,
    read_region: SharedRegion,
    write: Option<(Arc<SharedMapping>, SharedRegion)>,
    /// Read handles whose views are all dropped, to release with the next request.
    releases: Arc<Mutex<Vec<u64>>>,
    /// Granted write slots no buffer holds now.
    spare_slots: Arc<Mutex<Vec<u32>>>,
    /// Every slot granted to this client (a slot granted twice is refused).
    granted_slots: HashSet<u32>,
    /// Writes by grant in flight, and their slots.
    granted_writes: HashMap<RequestId, u32>,
}

impl Client {
    /// Connects to the server listening on `socket` and shakes hands; with
    /// `map_memory`, maps the regions the server passes (when it offers none, the
    /// connection takes the copying path: see [`Client::is_mapped`]). A mapping client
    /// moves its frames into rings as `options.transport` says; a server older than
    /// the rings closes such a connection (`MalformedFrame`), and the client connects
    /// again on the socket.
    pub fn connect(socket: &Path, options: ConnectOptions) -> Result<Client, ConnectError> {
        let on_socket = ConnectOptions {
            transport: ClientTransport::Socket,
            ..options.clone()
        };
        match Client::connect_once(socket, options) {
            Err(ConnectError::Refused(error)) if error.code == ErrorCode::MalformedFrame => {
                Client::connect_once(socket, on_socket)
            }
            other => other,
        }
    }

    fn connect_once(socket: &Path, options: ConnectOptions) -> Result<Client, ConnectError> {
        let stream = UnixStream::connect(socket).map_err(|source| ConnectError::Connect {
            path: socket.to_path_buf(),
            source,
        })?;
        if let Some(expected) = &options.expect {
            check_server_user(&stream, socket, expected)?;
        }
        let hello = Frame::Hello(Hello {
            min_version: MIN_PROTOCOL_VERSION,
            max_version: PROTOCOL_VERSION,
            map_memory: options.map_memory,
            client_name: options.client_name,
        });
        // A server at its client limit may have closed already; its answer says why.
        let _ = send_all(&stream, &encode_frame(&hello));
        let (welcome, fds) = match receive_first_frame(&stream)? {
            (Frame::Welcome(welcome), fds) => (welcome, fds),
            (Frame::Error { error, .. }, _) => return Err(ConnectError::Refused(error)),
            (other, _) => {
                return Err(ConnectError::Handshake(format!(
                    "the server answered hello with a {} frame",
                    other.kind().name()
                )))
            }
        };
        if !(MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&welcome.version) {
            return Err(ConnectError::Handshake(format!(
                "the server answered with protocol version {}; this client speaks versions \
                 {MIN_PROTOCOL_VERSION}..={PROTOCOL_VERSION}",
                welcome.version
            )));
        }
        if let Some(expected) = &options.expect {
            check_store_identity(socket, expected, welcome.store_identity)?;
        }
        if fds.len() != welcome.fd_count() {
            return Err(ConnectError::Handshake(format!(
                "the welcome announces {} shared regions but {} file descriptors came",
                welcome.fd_count(),
                fds.len()
            )));
        }
        let shared = map_regions(&welcome, fds)?;
        let mut next_request_id = 1;
        let mut link = None;
        if shared.is_some() && options.transport == ClientTransport::RingsWhenMapped {
            link = open_rings(&stream, next_request_id, options.ring_spin_us)?;
            next_request_id += 1;
        }
        let link = match link {
            Some(link) => link,
            None => Link::Socket(BufReader::with_capacity(
                READ_BUFFER_BYTES,
                stream.try_clone().map_err(|error| {
                    ConnectError::Handshake(format!("cloning the socket: {error}"))
                })?,
            )),
        };
        Ok(Client {
            socket: stream,
            link,
            info: ServerInfo {
                version: welcome.version,
                server_pid: welcome.server_pid,
                store_path: welcome.store_path,
                store_identity: welcome.store_identity,
                limits: welcome.limits,
                store_clock: welcome.store_clock,
                read_only: welcome.read_only,
            },
            next_request_id,
            in_flight: HashSet::new(),
            arrived: VecDeque::new(),
            shared,
            send_buffer: Vec::new(),
            released: Vec::new(),
        })
    }

    /// True when data goes by reference on this connection.
    pub fn is_mapped(&self) -> bool {
        self.shared.is_some()
    }

    /// True when frames go through shared-memory rings on this connection.
    pub fn uses_rings(&self) -> bool {
        matches!(self.link, Link::Rings(_))
    }

    /// Sends encoded frames: on the socket, or into the request ring (waiting while it
    /// is full, as long as the server lives).
    fn send_bytes(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        match &mut self.link {
            Link::Socket(_) => send_all(&self.socket, bytes).map_err(ClientError::ConnectionLost),
            Link::Rings(rings) => {
                let socket = &self.socket;
                let RingLink {
                    requests, doorbell, ..
                } = &mut **rings;
                // A full ring waits for the engine to pop: ring before each sleep too, so
                // a parked engine takes the records already pushed.
                let pushed = push_stream_bytes(requests, bytes, &mut |_| {
                    if let Some(doorbell) = doorbell.as_mut() {
                        doorbell.ring();
                    }
                    server_alive(socket)
                });
                if let Some(doorbell) = doorbell {
                    doorbell.ring();
                }
                pushed.map_err(ClientError::ConnectionLost)
            }
        }
    }

    /// Sends the release of every read handle whose views are all dropped (also done
    /// before each request and before waiting).
    pub fn release_now(&mut self) -> Result<(), ClientError> {
        self.send_with(|_| {})
    }

    /// Sends the release frames of the handles waiting to be released, then what `add`
    /// appends, in one send from the kept buffer (nothing when both are empty).
    fn send_with(&mut self, add: impl FnOnce(&mut Vec<u8>)) -> Result<(), ClientError> {
        let mut bytes = std::mem::take(&mut self.send_buffer);
        bytes.clear();
        self.append_release_frames(&mut bytes);
        add(&mut bytes);
        let sent = match bytes.is_empty() {
            true => Ok(()),
            false => self.send_bytes(&bytes),
        };
        if bytes.capacity() <= KEPT_SEND_BYTES {
            self.send_buffer = bytes;
        }
        sent
    }

    /// Appends the release frames of the handles waiting to be released to `bytes` (the
    /// views' list and the kept one swap, so neither allocates again).
    fn append_release_frames(&mut self, bytes: &mut Vec<u8>) {
        let Some(shared) = &self.shared else {
            return;
        };
        self.released.clear();
        std::mem::swap(
            &mut self.released,
            &mut *shared
                .releases
                .lock()
                .expect("no panic holding the release list"),
        );
        for chunk in self.released.chunks(MAX_RELEASE_HANDLES) {
            encode_release_into(chunk, bytes);
        }
    }

    /// What the server told at connect.
    pub fn server_info(&self) -> &ServerInfo {
        &self.info
    }

    /// Requests sent and not yet taken back with [`Client::wait`].
    pub fn in_flight(&self) -> usize {
        self.in_flight.len() + self.arrived.len()
    }

    /// Sends a request (a command over the wire's payloads, or a request about the
    /// connection); its answer comes from [`Client::wait`] under the returned id.
    pub fn submit(&mut self, request: impl Into<Request>) -> Result<RequestId, ClientError> {
        let request = request.into();
        self.check_version(&request)?;
        let request_id = self.next_request_id;
        self.next_request_id += 1;
        let frame = Frame::Request {
            request_id,
            request,
        };
        self.send_with(|bytes| encode_frame_into(&frame, bytes))?;
        self.in_flight.insert(request_id);
        Ok(request_id)
    }

    /// Refuses, before sending, a request newer than the server's protocol version (a
    /// set-attributes to a version-3/4 server, which would close the connection).
    fn check_version(&self, request: &Request) -> Result<(), ClientError> {
        let version = self.info.version;
        if let Request::Region(_) = request {
            return self.check_regions();
        }
        if let Request::Command(Command::SetAttributes { .. }) = request {
            if version < ATTRIBUTES_VERSION {
                return Err(ClientError::LimitReached {
                    what: format!(
                        "set-attributes needs protocol version {ATTRIBUTES_VERSION} and the \
                         server speaks version {version} (nothing sent; upgrade the server); \
                         the oldest version that has it"
                    ),
                    limit: u64::from(ATTRIBUTES_VERSION),
                });
            }
        }
        Ok(())
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
        self.release_now()?;
        let read = match &mut self.link {
            Link::Socket(reader) => read_frame(reader, MAX_BODY_BYTES),
            Link::Rings(rings) => read_frame(&mut rings.replies, MAX_BODY_BYTES),
        };
        let frame = match read {
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
        let mut is_final = true;
        let (request_id, answer) = match frame {
            Frame::Response {
                request_id,
                response,
            } => {
                is_final = response.is_final();
                (request_id, Ok(self.response(response)?))
            }
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
        let known = if is_final {
            self.in_flight.remove(&request_id)
        } else {
            self.in_flight.contains(&request_id)
        };
        if !known {
            return Err(ClientError::Protocol(format!(
                "an answer to request {request_id}, which is not in flight"
            )));
        }
        self.note_granted_write(request_id, &answer);
        Ok((request_id, answer))
    }

    /// Keeps the slot of an answered write by grant for the next buffer (after a
    /// success; after an error the server took the grant back).
    fn note_granted_write(
        &mut self,
        request_id: RequestId,
        answer: &Result<Response, RemoteError>,
    ) {
        let Some(shared) = &mut self.shared else {
            return;
        };
        let Some(slot) = shared.granted_writes.remove(&request_id) else {
            return;
        };
        if answer.is_ok() {
            shared
                .spare_slots
                .lock()
                .expect("no panic holding the spare slots")
                .push(slot);
        } else {
            shared.granted_slots.remove(&slot);
        }
    }

    /// Sends a request and waits for its own answer (other answers are kept for
    /// [`Client::wait`]).
    pub fn call(&mut self, request: impl Into<Request>) -> Result<Response, ClientError> {
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
        let by_slots = match self
            .shared
            .as_ref()
            .and_then(|shared| shared.write.as_ref())
        {
            Some((_, region)) => region.slot_count as usize,
            None => usize::MAX,
        };
        by_bytes
            .min(by_slots)
            .min(limits.max_in_flight_per_client as usize)
            .clamp(1, WRITE_WINDOW_MAX)
    }

    /// A buffer to fill and send with [`Client::submit_write`]: a granted slot of the
    /// shared write pool when mapped, else memory of this client's own.
    pub fn write_buffer(&mut self) -> Result<WriteBuffer, ClientError> {
        let Some(shared) = &self.shared else {
            return Ok(WriteBuffer::owned(self.write_chunk_bytes()));
        };
        if shared.write.is_none() {
            return Ok(WriteBuffer::owned(self.write_chunk_bytes()));
        }
        let spare = shared
            .spare_slots
            .lock()
            .expect("no panic holding the spare slots")
            .pop();
        let slot = match spare {
            Some(slot) => slot,
            None => match self.call(Request::GrantWrite) {
                Ok(Response::Granted(grant)) => self.accept_grant(grant)?,
                Ok(other) => return Err(unexpected("grant-write", &other)),
                Err(ClientError::Remote(error)) if error.code == ErrorCode::NoWriteSlots => {
                    return Ok(WriteBuffer::owned(self.write_chunk_bytes()))
                }
                Err(error) => return Err(error),
            },
        };
        let shared = self.shared.as_ref().expect("checked above");
        let (mapping, region) = shared.write.as_ref().expect("checked above");
        Ok(WriteBuffer {
            storage: WriteStorage::Granted(GrantedSlot {
                mapping: Arc::clone(mapping),
                slot,
                offset_bytes: (u64::from(slot) * region.slot_size_bytes) as usize,
                size_bytes: region.slot_size_bytes as usize,
                spare_slots: Arc::clone(&shared.spare_slots),
                sent: false,
            }),
        })
    }

    /// Checks a new grant: inside the write region, not granted already.
    fn accept_grant(&mut self, grant: WriteGrant) -> Result<u32, ClientError> {
        let shared = self
            .shared
            .as_mut()
            .expect("grants come only to mapping clients");
        let (_, region) = shared
            .write
            .as_ref()
            .expect("grants come only with a write region");
        if grant.slot >= region.slot_count
            || u64::from(grant.slot_size_bytes) != region.slot_size_bytes
        {
            return Err(ClientError::Protocol(format!(
                "grant of slot {} ({} bytes) does not fit the write region ({} slots of {} bytes)",
                grant.slot, grant.slot_size_bytes, region.slot_count, region.slot_size_bytes
            )));
        }
        if !shared.granted_slots.insert(grant.slot) {
            return Err(ClientError::Protocol(format!(
                "write slot {} granted twice",
                grant.slot
            )));
        }
        Ok(grant.slot)
    }

    /// Sends a write of the first `length_bytes` of `buffer` (answered
    /// `Response::Reply(Reply::Written { .. })` through [`Client::wait`]).
    pub fn submit_write(
        &mut self,
        name: &str,
        offset_bytes: u64,
        buffer: WriteBuffer,
        length_bytes: usize,
    ) -> Result<RequestId, ClientError> {
        let mut granted = None;
        let data = wire_write(buffer, length_bytes, &mut granted)?;
        self.submit_command(
            Command::Write {
                name: name.to_string(),
                offset_bytes,
                data,
            },
            granted,
        )
    }

    /// Sends a command whose write payload, if any, was mapped by [`wire_write`] (which
    /// put a granted slot in `granted`): the slot is the server's from now on, until the
    /// write's answer gives it back.
    pub(crate) fn submit_command(
        &mut self,
        command: WireCommand,
        granted: Option<GrantedSlot>,
    ) -> Result<RequestId, ClientError> {
        let request_id = self.submit(command)?;
        if let Some(mut granted) = granted {
            granted.sent = true;
            let shared = self
                .shared
                .as_mut()
                .expect("a granted buffer comes from a mapping client");
            shared.granted_writes.insert(request_id, granted.slot);
        }
        Ok(request_id)
    }

    /// Asks the server to cancel request `id`; says whether it was still running (a
    /// command the engine has taken completes, and its answer still comes).
    pub fn cancel(&mut self, id: RequestId) -> Result<CancelOutcome, ClientError> {
        match self.call(Request::Cancel { target: id })? {
            Response::Cancel(outcome) => Ok(outcome),
            other => Err(unexpected("cancel", &other)),
        }
    }
}

/// The wire payload of a write of the first `length_bytes` of `buffer`: its bytes inline,
/// or its granted slot (kept in `granted` until the write is sent).
pub(crate) fn wire_write(
    buffer: WriteBuffer,
    length_bytes: usize,
    granted: &mut Option<GrantedSlot>,
) -> Result<WritePayload, ClientError> {
    if length_bytes > buffer.len() {
        return Err(ClientError::LimitReached {
            what: format!(
                "write of {length_bytes} bytes from a buffer of {} bytes",
                buffer.len()
            ),
            limit: buffer.len() as u64,
        });
    }
    Ok(match buffer.storage {
        WriteStorage::Owned(mut bytes) => {
            bytes.truncate(length_bytes);
            WritePayload::Inline(bytes)
        }
        WriteStorage::Granted(slot) => {
            let payload = WritePayload::Granted {
                slot: slot.slot,
                length_bytes: length_bytes as u32,
            };
            *granted = Some(slot);
            payload
        }
    })
}

fn expect_written(response: Response) -> Result<(), ClientError> {
    match response {
        Response::Reply(Reply::Written { .. }) => Ok(()),
        other => Err(unexpected("write", &other)),
    }
}

fn note_error(first_error: &mut Option<ClientError>, result: Result<(), ClientError>) {
    if let Err(error) = result {
        first_error.get_or_insert(error);
    }
}

fn unexpected(request: &str, response: &Response) -> ClientError {
    ClientError::Protocol(format!(
        "a {request} request answered with a {} answer",
        response.name()
    ))
}
