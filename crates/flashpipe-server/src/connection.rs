//! One client's connection: the handshake, then its reading thread, which checks each
//! request against the limits and hands it to the engine under the client's request
//! id; the answers go back from the thread in `replies`. A mapping client may move
//! its frames into shared-memory rings (`rings`, #14); the same loop then reads them
//! from the request ring, or, on protocol version 6, the engine thread does through
//! `take_frame` (`ring_source`).

use std::io::{BufReader, Read};
use std::os::fd::BorrowedFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crossbeam_channel::{bounded, Receiver, Sender};
use flashpipe_api::Command;
use flashpipe_device::IoBuf;
use flashpipe_engine::{Completion, EngineError, Local, ReplyTo, Submission};
use flashpipe_net::Admitted;
use flashpipe_protocol::{
    encode_frame, read_frame, send_all, CancelOutcome, ErrorCode, Frame, ReadFrameError,
    RemoteError, Request, RequestId, Response, WireCommand, WritePayload, ATTRIBUTES_VERSION,
    MIN_PROTOCOL_VERSION,
};
use flashpipe_shm::send_with_fds;

use crate::core::{
    check_write_length, granted_slot, CoreHost, CoreLimits, Refused, StoreServerCore,
};
use crate::mapped::Mapped;
use crate::region::{take_region_request, ReceivedFds, Regions, RequestSocket};
use crate::replies::send_answers;
use crate::rings::{open_rings, ConnectionRings, OpenRefusal};
use crate::state::{Counters, ServerState};

/// Bytes of the read buffer in front of a client's socket.
const READ_BUFFER_BYTES: usize = 64 << 10;

pub(crate) use crate::core::InFlight;

/// A connection's state, shared by its reading and answering threads.
pub(crate) struct Connection {
    pub(crate) id: u64,
    pub(crate) state: Arc<ServerState>,
    socket: UnixStream,
    send_lock: Mutex<()>,
    /// The request rules: in-flight table, byte credits, admission (`core`).
    core: Mutex<StoreServerCore>,
    peer_gone: AtomicBool,
    /// Read handles and write grants, when the client maps memory.
    pub(crate) mapped: Option<Mapped>,
    /// The rings, once the client moved its frames into them (#14).
    rings: OnceLock<ConnectionRings>,
    /// The protocol version both sides speak (stat replies carry attributes from
    /// version 5 on, region requests from version 6).
    pub(crate) version: u16,
    /// The client's destination regions (`region`).
    pub(crate) regions: Regions,
    /// Encoded frames the engine thread could not push into the reply ring without
    /// waiting, for the answering thread (`ring_source`); bounded.
    deferred: (Sender<Vec<u8>>, Receiver<Vec<u8>>),
}

/// Hands one admitted command to the engine: a read-into's bytes go into its destination
/// (a client region), every other command has none.
pub(crate) type ToEngine<'a> =
    dyn FnMut(RequestId, flashpipe_engine::Command, Option<IoBuf>) -> Result<(), EngineError> + 'a;

/// What to do after a frame.
enum Next {
    Continue,
    /// Read the frames from this request ring from now on (on the engine thread when
    /// the flag is set).
    SwitchToRings(flashpipe_shm::FrameRing, bool),
    /// End the connection (the reason is logged and, where possible, sent).
    Close(RemoteError),
}

impl Connection {
    /// Sends a frame; a client that went away is noted and its frames dropped.
    pub(crate) fn send(&self, frame: &Frame) {
        if self.peer_gone.load(Ordering::Acquire) {
            return;
        }
        if self.rings.get().is_some() && crate::ring_source::sending_must_not_wait() {
            crate::ring_source::with_encoded(frame, |bytes| self.send_encoded(bytes));
            return;
        }
        self.send_encoded(&encode_frame(frame));
    }

    /// Sends an encoded frame (as [`Connection::send`]).
    pub(crate) fn send_encoded(&self, bytes: &[u8]) {
        if self.peer_gone.load(Ordering::Acquire) {
            return;
        }
        if let Some(rings) = self.rings.get() {
            if crate::ring_source::sending_must_not_wait() {
                if !crate::ring_source::push_or_defer(self, bytes) {
                    self.end_rings_and_socket();
                }
                return;
            }
            if crate::rings::push_reply(self, rings, bytes) {
                Counters::add(&self.state.counters.frames_sent, 1);
                Counters::add(&self.state.counters.bytes_sent, bytes.len() as u64);
            } else {
                self.end_rings_and_socket();
            }
            return;
        }
        let _serialized = self.send_lock.lock().expect("no panic while sending");
        match send_all(&self.socket, bytes) {
            Ok(()) => {
                Counters::add(&self.state.counters.frames_sent, 1);
                Counters::add(&self.state.counters.bytes_sent, bytes.len() as u64);
            }
            Err(error) => {
                tracing::info!(connection = self.id, %error, "client gone or not reading its answers; closing, dropping its answers");
                self.peer_gone.store(true, Ordering::Release);
                let _ = self.socket.shutdown(std::net::Shutdown::Both);
            }
        }
    }

    /// Sends an encoded frame on the socket with descriptors beside it; false when the
    /// client is gone.
    pub(crate) fn send_on_socket_with_fds(&self, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> bool {
        let _serialized = self.send_lock.lock().expect("no panic while sending");
        match send_with_fds(&self.socket, bytes, fds) {
            Ok(()) => {
                Counters::add(&self.state.counters.frames_sent, 1);
                Counters::add(&self.state.counters.bytes_sent, bytes.len() as u64);
                true
            }
            Err(error) => {
                tracing::info!(connection = self.id, %error, "client gone");
                self.note_peer_gone();
                false
            }
        }
    }

    /// Sends every later frame through `rings`.
    pub(crate) fn use_rings(&self, rings: ConnectionRings) {
        if self.rings.set(rings).is_err() {
            unreachable!("a connection opens its rings once (checked before)");
        }
    }

    /// The rings, when the client moved to them.
    pub(crate) fn rings(&self) -> Option<&ConnectionRings> {
        self.rings.get()
    }

    /// The connection's request rules (one lock, shared by the reading and answering
    /// threads).
    fn core(&self) -> std::sync::MutexGuard<'_, StoreServerCore> {
        self.core
            .lock()
            .expect("no panic holding the connection's core")
    }

    /// Where the engine thread hands frames it cannot push now.
    pub(crate) fn deferred_sender(&self) -> &Sender<Vec<u8>> {
        &self.deferred.0
    }

    /// The answering thread's end of the deferred frames.
    pub(crate) fn deferred_receiver(&self) -> &Receiver<Vec<u8>> {
        &self.deferred.1
    }

    /// Requests in flight now.
    pub(crate) fn in_flight_count(&self) -> usize {
        self.core().in_flight_count()
    }

    /// True once the client is taken as gone (its answers are dropped).
    pub(crate) fn is_peer_gone(&self) -> bool {
        self.peer_gone.load(Ordering::Acquire)
    }

    /// Takes the client as gone: its answers are dropped from now on.
    pub(crate) fn note_peer_gone(&self) {
        self.peer_gone.store(true, Ordering::Release);
    }

    /// Takes the client as gone and ends everything of the connection: both rings (a
    /// parked reader wakes) and the socket (the watcher and the client see its end).
    pub(crate) fn end_rings_and_socket(&self) {
        self.note_peer_gone();
        if let Some(rings) = self.rings.get() {
            rings.close_both();
        }
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
    }

    pub(crate) fn refuse(&self, request_id: RequestId, error: RemoteError) {
        Counters::add(&self.state.counters.requests_refused, 1);
        tracing::debug!(connection = self.id, request_id, code = %error.code, message = %error.message, "request refused");
        self.send(&Frame::Error { request_id, error });
    }

    /// Removes an answered request, giving back its bytes.
    pub(crate) fn finish(&self, request_id: RequestId) -> Option<InFlight> {
        self.core().finish(self, request_id)
    }

    /// Forgets a request that never reached the engine: its bytes and its reserved
    /// read handle go back.
    pub(crate) fn abandon(&self, request_id: RequestId) {
        self.core().abandon(self, request_id);
    }

    /// Admits a read into one of the client's regions (limits as a read's, no handle).
    pub(crate) fn admit_read_into(
        &self,
        request_id: RequestId,
        command: WireCommand,
    ) -> Result<(), Refused> {
        self.core()
            .admit_read_into(self, request_id, command)
            .map(drop)
    }
}

/// A connection's limits, from the server's configuration.
fn core_limits(state: &ServerState) -> CoreLimits {
    CoreLimits {
        max_in_flight: state.config.max_in_flight_per_client,
        max_write_bytes: u64::from(state.config.max_write_bytes),
        max_bytes_in_flight: state.config.max_bytes_in_flight_per_client,
        max_read_bytes: state.limits.max_read_bytes,
        max_read_files_bytes: state.limits.max_read_files_bytes,
    }
}

/// The connection's memory and the server's budget, for its core.
impl CoreHost for Connection {
    type Engine = Local;

    fn reserve_read_handle(&self) -> Result<bool, RemoteError> {
        match &self.mapped {
            Some(mapped) => mapped.reserve_handle().map(|()| true),
            None => Ok(false),
        }
    }

    fn cancel_read_handle(&self) {
        self.mapped
            .as_ref()
            .expect("a handle is reserved only when mapped")
            .cancel_reservation();
    }

    fn forfeit_grant(&self, slot: u32) {
        if let Some(mapped) = &self.mapped {
            mapped.forfeit(slot);
        }
    }

    fn take_server_bytes(&self, bytes: u64) -> Result<(), RemoteError> {
        if self.state.try_take_bytes(bytes) {
            return Ok(());
        }
        let limit = self.state.config.max_bytes_in_flight;
        Err(RemoteError::limit(
            ErrorCode::ServerBytesInFlight,
            format!("request of {bytes} bytes refused: the server's clients have {limit} bytes in flight at most; retry later"),
            limit,
        ))
    }

    fn give_back_server_bytes(&self, bytes: u64) {
        self.state.give_back_bytes(bytes);
    }

    /// The bytes the frame carried, or the granted slot of this client's write pool
    /// (taken back from the client).
    fn engine_write(&self, data: WritePayload, max_write_bytes: u64) -> Result<IoBuf, RemoteError> {
        match data {
            WritePayload::Inline(bytes) => Ok(IoBuf::from_slice(&bytes)),
            WritePayload::Granted { slot, length_bytes } => {
                let mapped = self.mapped.as_ref().ok_or_else(not_mapped)?;
                check_write_length(u64::from(length_bytes), max_write_bytes)?;
                mapped.take_granted(slot, length_bytes)
            }
        }
    }
}

pub(crate) fn serve_connection(state: Arc<ServerState>, socket: UnixStream, admitted: Admitted) {
    let id = admitted.id();
    let reading = match socket.try_clone() {
        Ok(reading) => reading,
        Err(error) => {
            tracing::warn!(connection = id, %error, "cannot clone the client socket; closing");
            return;
        }
    };
    let send_timeout = std::time::Duration::from_millis(state.config.send_timeout_ms);
    if let Err(error) = socket.set_write_timeout(Some(send_timeout)) {
        tracing::warn!(connection = id, %error, "cannot set the client socket's send timeout; closing");
        return;
    }
    let received_fds = ReceivedFds::default();
    let mut reader = BufReader::with_capacity(
        READ_BUFFER_BYTES,
        RequestSocket::new(reading, received_fds.clone()),
    );
    let Some((hello, mapped)) = crate::welcome::handshake(&state, &socket, &mut reader, &admitted)
    else {
        return;
    };
    tracing::info!(connection = id, client = %hello.client_name, map_memory = hello.map_memory, mapped = mapped.is_some(), "client connected");
    let core = Mutex::new(StoreServerCore::new(core_limits(&state)));
    let regions = Regions::new(
        received_fds,
        state.config.max_regions_per_client,
        state.config.max_region_bytes_per_client,
    );
    let state_max_in_flight = state.config.max_in_flight_per_client;
    let connection = Arc::new(Connection {
        id,
        state,
        socket,
        send_lock: Mutex::new(()),
        core,
        peer_gone: AtomicBool::new(false),
        mapped,
        rings: OnceLock::new(),
        version: hello.common_version().unwrap_or(MIN_PROTOCOL_VERSION),
        regions,
        deferred: bounded(crate::ring_source::deferred_capacity(state_max_in_flight)),
    });
    let capacity = connection.state.config.max_in_flight_per_client.max(1);
    let (answers_to, answers) = bounded::<Completion>(capacity);
    let answering = Arc::clone(&connection);
    let answer_thread = std::thread::Builder::new()
        .name(format!("flashpipe-answers-{id}"))
        .spawn(move || send_answers(answering, answers));
    let answer_thread = match answer_thread {
        Ok(thread) => thread,
        Err(error) => {
            tracing::warn!(connection = id, %error, "cannot start the answering thread; closing");
            return;
        }
    };
    let mut watcher = None;
    let mut to_engine = |request_id, command, destination: Option<IoBuf>| {
        connection.state.commands.submit_whole(Submission {
            ticket: request_id,
            command,
            reply_to: ReplyTo::Queue(answers_to.clone()),
            destination,
            write_checksums: None,
        })
    };
    let read = read_requests(&connection, &mut reader, &mut to_engine);
    if let ReadEnd::SwitchToRings(requests, on_engine) = read {
        watcher = match plain_socket(&connection, reader) {
            None => None,
            Some(socket) if on_engine => {
                crate::rings::serve_on_engine(&connection, socket, requests, &answers_to);
                None
            }
            Some(socket) => serve_rings(&connection, socket, requests, &mut to_engine),
        };
    }
    connection.state.kernel_runs.cancel_connection(id);
    drop(answers_to);
    if answer_thread.join().is_err() {
        tracing::error!(connection = id, "the answering thread panicked");
    }
    if let Some(rings) = connection.rings() {
        rings.close_both();
        let _ = connection.socket.shutdown(std::net::Shutdown::Both);
    }
    if watcher.is_some_and(|watcher| watcher.join().is_err()) {
        tracing::error!(connection = id, "the socket watcher panicked");
    }
    tracing::info!(
        connection = id,
        "client disconnected; everything it held released"
    );
}

/// The connection's socket once its frames go through the rings, read without descriptors
/// from now on; `None` after closing the connection when bytes followed open-rings on it.
fn plain_socket(
    connection: &Connection,
    socket: BufReader<RequestSocket>,
) -> Option<BufReader<UnixStream>> {
    if !socket.buffer().is_empty() {
        Counters::add(&connection.state.counters.malformed_frames, 1);
        close_with(
            connection,
            RemoteError::new(
                ErrorCode::MalformedFrame,
                "bytes on the socket after open-rings: frames go through the rings",
            ),
        );
        return None;
    }
    let stream = socket.into_inner().into_stream();
    Some(BufReader::with_capacity(READ_BUFFER_BYTES, stream))
}

/// Reads the frames of a connection on rings from its request ring, the socket left to
/// a watcher thread; returns the watcher to join once the connection ends.
fn serve_rings(
    connection: &Arc<Connection>,
    socket: BufReader<UnixStream>,
    requests: flashpipe_shm::FrameRing,
    to_engine: &mut ToEngine<'_>,
) -> Option<std::thread::JoinHandle<()>> {
    let watcher = crate::rings::start_watcher(connection, socket)?;
    let mut reader = crate::rings::request_reader(connection, requests);
    if let ReadEnd::SwitchToRings(..) = read_requests(connection, &mut reader, to_engine) {
        unreachable!("open-rings on rings ends the connection");
    }
    Some(watcher)
}

/// Sends a closing error (request id 0), logs why, and shuts the socket.
pub(crate) fn close_with(connection: &Connection, error: RemoteError) {
    tracing::warn!(connection = connection.id, code = %error.code, reason = %error.message, "closing the connection");
    connection.send(&Frame::Error {
        request_id: 0,
        error,
    });
    let _ = connection.socket.shutdown(std::net::Shutdown::Both);
}

fn close_malformed(connection: &Connection, error: &ReadFrameError) {
    match error {
        ReadFrameError::Malformed(_) => {
            Counters::add(&connection.state.counters.malformed_frames, 1);
            close_with(
                connection,
                RemoteError::new(ErrorCode::MalformedFrame, error.to_string()),
            );
        }
        ReadFrameError::Io(io_error) if crate::rings::is_corrupt_ring(io_error) => {
            Counters::add(&connection.state.counters.malformed_frames, 1);
            tracing::warn!(connection = connection.id, %error, "the client's request ring is corrupt");
            close_with(
                connection,
                RemoteError::new(ErrorCode::MalformedFrame, error.to_string()),
            );
        }
        ReadFrameError::ClosedMidFrame { .. } | ReadFrameError::Io(_) => {
            tracing::info!(connection = connection.id, %error, "connection ended");
        }
    }
}

/// How a connection's reading ended.
enum ReadEnd {
    /// The client left, broke the protocol, or the server stops.
    Done,
    /// The client moved to rings: read this request ring from now on (the engine
    /// thread does when the flag is set).
    SwitchToRings(flashpipe_shm::FrameRing, bool),
}

fn read_requests(
    connection: &Arc<Connection>,
    reader: &mut impl Read,
    to_engine: &mut ToEngine<'_>,
) -> ReadEnd {
    let max_body_bytes = connection.state.limits.max_body_bytes;
    loop {
        let frame = match read_frame(reader, max_body_bytes) {
            Ok(Some(frame)) => frame,
            Ok(None) => return ReadEnd::Done,
            Err(error) => {
                close_malformed(connection, &error);
                return ReadEnd::Done;
            }
        };
        match dispatch(connection, frame, to_engine) {
            Next::Continue => {}
            Next::SwitchToRings(requests, on_engine) => {
                return ReadEnd::SwitchToRings(requests, on_engine)
            }
            Next::Close(error) => {
                close_with(connection, error);
                return ReadEnd::Done;
            }
        }
    }
}

/// Serves one frame read after the handshake (on the engine thread for a ring source);
/// false when the connection ends (its closing error sent).
pub(crate) fn take_frame(
    connection: &Arc<Connection>,
    frame: Frame,
    to_engine: &mut ToEngine<'_>,
) -> bool {
    match dispatch(connection, frame, to_engine) {
        Next::Continue => true,
        Next::SwitchToRings(..) => unreachable!("open-rings on rings ends the connection"),
        Next::Close(error) => {
            close_with(connection, error);
            false
        }
    }
}

/// Serves a release frame read after the handshake (its handles decoded apart, so the
/// engine thread keeps their buffer).
pub(crate) fn take_release(connection: &Connection, handles: &[u64]) {
    Counters::add(&connection.state.counters.frames_received, 1);
    release(connection, handles);
}

fn dispatch(connection: &Arc<Connection>, frame: Frame, to_engine: &mut ToEngine<'_>) -> Next {
    if let Frame::Release { handles } = &frame {
        take_release(connection, handles);
        return Next::Continue;
    }
    Counters::add(&connection.state.counters.frames_received, 1);
    match frame {
        Frame::Request {
            request_id,
            request,
        } => take_request(connection, request_id, request, to_engine),
        other => Next::Close(RemoteError::new(
            ErrorCode::MalformedFrame,
            format!(
                "a client may not send a {} frame after the handshake",
                other.kind().name()
            ),
        )),
    }
}

/// Checks one request and hands it to the engine, or answers it here.
fn take_request(
    connection: &Arc<Connection>,
    request_id: RequestId,
    request: Request,
    to_engine: &mut ToEngine<'_>,
) -> Next {
    if connection.state.is_stopping() {
        let error = RemoteError::new(
            ErrorCode::ShuttingDown,
            "the server is stopping; no new requests",
        );
        refuse_request(connection, request_id, &request, error);
        return Next::Continue;
    }
    if let Err(error) = connection.state.device_watch.check_before(&request) {
        refuse_request(connection, request_id, &request, error);
        return Next::Continue;
    }
    let command = match request {
        Request::Command(command) => command,
        Request::Cancel { target } => {
            answer_cancel(connection, request_id, target);
            return Next::Continue;
        }
        Request::GrantWrite => {
            answer_grant(connection, request_id);
            return Next::Continue;
        }
        Request::RunKernel(run) => return start_kernel_run(connection, request_id, run),
        Request::OpenRings => return answer_open_rings(connection, request_id),
        Request::Region(region) => {
            return match take_region_request(connection, request_id, region, to_engine) {
                Ok(()) => Next::Continue,
                Err(error) => Next::Close(error),
            }
        }
    };
    if let Err(error) = check_command_version(&command, connection.version) {
        connection.refuse(request_id, error);
        return Next::Continue;
    }
    let admitted = connection
        .core()
        .admit_command(&**connection, request_id, command);
    let command = match admitted {
        Ok(command) => command,
        Err(Refused::Request(error)) => {
            connection.refuse(request_id, error);
            return Next::Continue;
        }
        Err(Refused::Connection(error)) => return Next::Close(error),
    };
    if let Err(error) = to_engine(request_id, command, None) {
        connection.abandon(request_id);
        connection.refuse(request_id, error.to_api());
    }
    Next::Continue
}

/// Refuses a command newer than the connection's protocol version (set-attributes
/// before version 5): the request alone, the connection goes on.
fn check_command_version(command: &WireCommand, version: u16) -> Result<(), RemoteError> {
    if matches!(command, Command::SetAttributes { .. }) && version < ATTRIBUTES_VERSION {
        return Err(RemoteError::new(
            ErrorCode::UnsupportedVersion,
            format!(
                "set-attributes needs protocol version {ATTRIBUTES_VERSION}; this connection \
                 speaks version {version}: upgrade the client"
            ),
        ));
    }
    Ok(())
}

/// Refuses a request before the engine; a refused write by grant gives its grant up
/// (after any error answer to a write by grant, the slot is no longer the client's).
fn refuse_request(
    connection: &Connection,
    request_id: RequestId,
    request: &Request,
    error: RemoteError,
) {
    if let Request::Command(command) = request {
        if let Some(slot) = granted_slot(command) {
            connection.forfeit_grant(slot);
        }
    }
    connection.refuse(request_id, error);
}

fn answer_cancel(connection: &Connection, request_id: RequestId, target: RequestId) {
    let state = &connection.state;
    if state.kernel_runs.cancel(connection.id, target) {
        return connection.send(&Frame::Response {
            request_id,
            response: Response::Cancel(CancelOutcome::Stopping),
        });
    }
    let running = connection.core().is_in_flight(target);
    let outcome = if running {
        CancelOutcome::Running
    } else {
        CancelOutcome::NotInFlight
    };
    connection.send(&Frame::Response {
        request_id,
        response: Response::Cancel(outcome),
    });
}

fn answer_open_rings(connection: &Connection, request_id: RequestId) -> Next {
    match open_rings(connection, request_id) {
        Ok((requests, on_engine)) => Next::SwitchToRings(requests, on_engine),
        Err(OpenRefusal::Request(error)) => {
            connection.refuse(request_id, error);
            Next::Continue
        }
        Err(OpenRefusal::Connection(error)) => Next::Close(error),
    }
}

fn not_mapped() -> RemoteError {
    RemoteError::new(
        ErrorCode::NotMapped,
        "this connection does not map memory: send data inline with write frames",
    )
}

fn answer_grant(connection: &Connection, request_id: RequestId) {
    let granted = match &connection.mapped {
        Some(mapped) => mapped.grant(),
        None => Err(not_mapped()),
    };
    match granted {
        Ok(grant) => connection.send(&Frame::Response {
            request_id,
            response: Response::Granted(grant),
        }),
        Err(error) => connection.refuse(request_id, error),
    }
}

fn release(connection: &Connection, handles: &[u64]) {
    let Some(mapped) = &connection.mapped else {
        tracing::debug!(
            connection = connection.id,
            "release on a connection that holds no read handles; ignored"
        );
        return;
    };
    let unknown = mapped.release(handles);
    if unknown > 0 {
        tracing::debug!(
            connection = connection.id,
            unknown,
            "release of read handles not held; ignored"
        );
    }
}

/// Admits a kernel run (it counts as one request in flight) and starts it on a thread of
/// its own (`kernel_runs`), or refuses it.
fn start_kernel_run(
    connection: &Arc<Connection>,
    request_id: RequestId,
    run: flashpipe_protocol::RunKernelRequest,
) -> Next {
    let admitted = connection
        .core()
        .admit_kernel_run(&**connection, request_id);
    match admitted {
        Ok(()) => {}
        Err(Refused::Request(error)) => {
            connection.refuse(request_id, error);
            return Next::Continue;
        }
        Err(Refused::Connection(error)) => return Next::Close(error),
    }
    let started = connection
        .state
        .kernel_runs
        .start(Arc::clone(connection), request_id, run);
    if let Err(error) = started {
        connection.abandon(request_id);
        connection.refuse(request_id, error);
    }
    Next::Continue
}
