//! The ring transport of a connection (#14, docs/protocol.md "Frames through shared
//! memory rings"): on a mapping client's open-rings request the server makes two
//! [`FrameRing`]s in memfds (requests client -> server, replies server -> client),
//! passes them beside the rings-opened answer, and from then on every frame of the
//! connection, in the same encoding, goes through them. The socket stays open as the
//! liveness signal: a watcher thread blocks reading it, and its end (or any byte on it)
//! closes the rings, which wakes a reading thread parked on the request ring. On protocol
//! version 6 the engine's doorbell rides beside the rings and the engine thread reads the
//! request ring (`ring_source`); the connection's thread then only watches the socket, and
//! rings the doorbell once it closed the rings so the engine lets the source go.

use std::io::{BufReader, Read};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::Sender;
use flashpipe_engine::Completion;
use flashpipe_protocol::{
    encode_frame, ErrorCode, Frame, RemoteError, RequestId, Response, RingsOpened,
};
use flashpipe_shm::{push_stream_bytes, ring_error_of, FrameRing, RingReader, RingWait};

use crate::connection::Connection;
use crate::ring_source::RingSource;
use crate::state::Counters;

/// The rings of a connection that moved to them.
pub(crate) struct ConnectionRings {
    /// The producer's handle of the reply ring (one sender at a time).
    pub(crate) replies: Mutex<FrameRing>,
    /// Second handles of both rings, only ever closed (by the watcher, at the end).
    closers: Mutex<[FrameRing; 2]>,
}

impl ConnectionRings {
    /// Closes both rings: pushes fail from now on, a parked reader wakes and drains.
    pub(crate) fn close_both(&self) {
        let closers = self
            .closers
            .lock()
            .expect("no panic holding the ring closers");
        closers.iter().for_each(FrameRing::close);
    }

    /// Closes the request ring only (a graceful stop: answers still go back).
    fn close_requests(&self) {
        let closers = self
            .closers
            .lock()
            .expect("no panic holding the ring closers");
        closers[0].close();
    }
}

/// Why an open-rings request is refused (the connection goes on, on its socket).
pub(crate) enum OpenRefusal {
    /// Refuse the request; the connection stays on its socket.
    Request(RemoteError),
    /// The client broke the protocol; end the connection.
    Connection(RemoteError),
}

/// Makes the two rings, answers `request_id` with their descriptors (and the engine's
/// doorbell, on a connection of version 6 or newer whose engine takes sources) and
/// switches the connection's sending to the reply ring; returns the request ring to
/// read from, and whether the engine thread reads it (the doorbell went out).
pub(crate) fn open_rings(
    connection: &Connection,
    request_id: RequestId,
) -> Result<(FrameRing, bool), OpenRefusal> {
    check_may_open(connection)?;
    let capacity_bytes = connection.state.config.ring_capacity_bytes as usize;
    let refused = |error: flashpipe_shm::FrameRingError| {
        tracing::warn!(connection = connection.id, %error, "cannot make the frame rings; the client stays on its socket");
        OpenRefusal::Request(RemoteError::new(
            ErrorCode::Internal,
            format!("the server cannot make the frame rings: {error}"),
        ))
    };
    let requests = FrameRing::create(capacity_bytes).map_err(refused)?;
    let replies = FrameRing::create(capacity_bytes).map_err(refused)?;
    let closers = [
        requests.attach_again().map_err(refused)?,
        replies.attach_again().map_err(refused)?,
    ];
    let commands = &connection.state.commands;
    let on_engine = RingsOpened::may_carry_doorbell(connection.version) && commands.takes_sources();
    let answer = |engine_doorbell| Frame::Response {
        request_id,
        response: Response::RingsOpened(RingsOpened {
            request_ring_capacity_bytes: capacity_bytes as u32,
            reply_ring_capacity_bytes: capacity_bytes as u32,
            engine_doorbell,
        }),
    };
    let fds = [requests.as_fd(), replies.as_fd()];
    let sent = match on_engine {
        true => commands.with_doorbell_fd(|doorbell| {
            let fds = [fds[0], fds[1], doorbell];
            connection.send_on_socket_with_fds(&encode_frame(&answer(true)), &fds)
        }),
        false => None,
    };
    let sent = sent
        .unwrap_or_else(|| connection.send_on_socket_with_fds(&encode_frame(&answer(false)), &fds));
    if !sent {
        return Err(OpenRefusal::Connection(RemoteError::new(
            ErrorCode::Internal,
            "the client went away before the rings were passed",
        )));
    }
    connection.use_rings(ConnectionRings {
        replies: Mutex::new(replies),
        closers: Mutex::new(closers),
    });
    tracing::info!(
        connection = connection.id,
        capacity_bytes,
        on_engine,
        "frames go through shared-memory rings from now on"
    );
    Ok((requests, on_engine))
}

/// Serves a connection whose request ring the engine thread reads: registers its
/// source, then watches the socket on this thread until the connection ends.
pub(crate) fn serve_on_engine(
    connection: &Arc<Connection>,
    socket: BufReader<UnixStream>,
    requests: FrameRing,
    answers_to: &Sender<Completion>,
) {
    if !socket.buffer().is_empty() {
        Counters::add(&connection.state.counters.malformed_frames, 1);
        crate::connection::close_with(
            connection,
            RemoteError::new(
                ErrorCode::MalformedFrame,
                "bytes on the socket after open-rings: frames go through the rings",
            ),
        );
        return;
    }
    let source = RingSource::new(Arc::clone(connection), requests, answers_to.clone());
    if let Err(error) = connection.state.commands.add_source(Box::new(source)) {
        tracing::info!(connection = connection.id, %error, "the engine stopped before the connection's ring was taken; closing");
        connection.end_rings_and_socket();
        return;
    }
    watch_socket(connection, socket);
}

fn check_may_open(connection: &Connection) -> Result<(), OpenRefusal> {
    if connection.rings().is_some() {
        return Err(OpenRefusal::Connection(RemoteError::new(
            ErrorCode::MalformedFrame,
            "open-rings on a connection whose frames go through rings already",
        )));
    }
    if connection.mapped.is_none() {
        return Err(OpenRefusal::Request(RemoteError::new(
            ErrorCode::NotMapped,
            "this connection does not map memory: frames stay on the socket",
        )));
    }
    let in_flight = connection.in_flight_count();
    if in_flight > 0 {
        return Err(OpenRefusal::Request(RemoteError::limit(
            ErrorCode::TooManyInFlight,
            format!("open-rings with {in_flight} requests in flight: send it with none"),
            0,
        )));
    }
    Ok(())
}

/// Pushes one encoded frame into the reply ring, waiting while it is full (the client
/// not popping) up to the send timeout; false when the client is taken as gone.
pub(crate) fn push_reply(connection: &Connection, rings: &ConnectionRings, bytes: &[u8]) -> bool {
    let timeout = Duration::from_millis(connection.state.config.send_timeout_ms);
    let mut ring = rings
        .replies
        .lock()
        .expect("no panic holding the reply ring");
    let pushed = push_stream_bytes(&mut ring, bytes, &mut |waited| {
        if connection.is_peer_gone() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the client is gone",
            ));
        }
        if waited >= timeout {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the reply ring stayed full for {timeout:?}: the client does not take its answers"),
            ));
        }
        Ok(())
    });
    match pushed {
        Ok(()) => true,
        Err(error) => {
            if error.kind() == std::io::ErrorKind::InvalidData {
                tracing::warn!(connection = connection.id, %error, "the client's reply ring is corrupt; closing the connection");
            } else {
                tracing::info!(connection = connection.id, %error, "client gone or not taking its answers; closing, dropping its answers");
            }
            false
        }
    }
}

/// How the reading thread waits on the request ring: the configured spin window, then
/// parked until a frame comes or the watcher closes the ring.
pub(crate) fn request_reader(connection: &Connection, requests: FrameRing) -> RingReader {
    let wait = RingWait::SpinThenPark {
        spin_us: connection.state.config.spin.window_us(),
        park_timeout_us: None,
    };
    RingReader::new(requests, wait, None)
}

/// Starts the thread that watches the socket of a connection on rings.
pub(crate) fn start_watcher(
    connection: &Arc<Connection>,
    socket: BufReader<UnixStream>,
) -> Option<std::thread::JoinHandle<()>> {
    let watching = Arc::clone(connection);
    let spawned = std::thread::Builder::new()
        .name(format!("flashpipe-watch-{}", connection.id))
        .spawn(move || watch_socket(&watching, socket));
    match spawned {
        Ok(thread) => Some(thread),
        Err(error) => {
            tracing::warn!(connection = connection.id, %error, "cannot start the socket watcher; closing");
            connection.end_rings_and_socket();
            None
        }
    }
}

/// Blocks reading the socket: its end means the client is gone (or, while the server
/// stops, that reading ends); a byte on it breaks the protocol. Either closes the rings.
fn watch_socket(connection: &Connection, mut socket: BufReader<UnixStream>) {
    let mut bytes = [0u8; 64];
    let read = loop {
        match socket.read(&mut bytes) {
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            other => break other,
        }
    };
    let Some(rings) = connection.rings() else {
        return;
    };
    watched_end(connection, rings, read);
    connection.state.commands.ring();
}

/// Closes what the socket's end (or a byte on it) asks for.
fn watched_end(connection: &Connection, rings: &ConnectionRings, read: std::io::Result<usize>) {
    match read {
        Ok(0) | Err(_) if connection.state.is_stopping() => rings.close_requests(),
        Ok(0) | Err(_) => {
            connection.note_peer_gone();
            rings.close_both();
        }
        Ok(count) => {
            Counters::add(&connection.state.counters.malformed_frames, 1);
            crate::connection::close_with(
                connection,
                RemoteError::new(
                    ErrorCode::MalformedFrame,
                    format!(
                        "{count} bytes on the socket after open-rings: frames go through the rings"
                    ),
                ),
            );
            rings.close_both();
        }
    }
}

/// True when a frame-reading error is a corrupt ring (logged and closed as malformed).
pub(crate) fn is_corrupt_ring(error: &std::io::Error) -> bool {
    ring_error_of(error).is_some()
}
