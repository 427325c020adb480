//! A connection's handshake: the hello read (within the handshake deadline the accepting
//! side set), the version both sides speak chosen, and the welcome sent with the shared
//! regions' descriptors when the client maps memory (the engine's read pool, and a write
//! pool of the client's own); split from `connection.rs`, which serves what follows.

use std::io::Read;
use std::os::fd::BorrowedFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use flashpipe_device::BufferPool;
use flashpipe_net::Admitted;
use flashpipe_protocol::{
    encode_frame, read_frame, send_frame, ClockKind, ErrorCode, Frame, Hello, ReadFrameError,
    RemoteError, Welcome, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION,
};
use flashpipe_shm::send_with_fds;

use crate::mapped::{Mapped, WRITE_POOL_MEMORY_NAME};
use crate::state::{Counters, ServerState};

/// Reads the hello and sends the welcome (with the shared regions' descriptors when the
/// client maps memory and the engine's read pool is shared); `None` when the connection
/// ends here.
pub(crate) fn handshake(
    state: &ServerState,
    socket: &UnixStream,
    reader: &mut impl Read,
    admitted: &Admitted,
) -> Option<(Hello, Option<Mapped>)> {
    let id = admitted.id();
    let refuse = |error: RemoteError| {
        tracing::warn!(connection = id, code = %error.code, reason = %error.message, "closing the connection at the handshake");
        let _ = send_frame(
            socket,
            &Frame::Error {
                request_id: 0,
                error,
            },
        );
        let _ = socket.shutdown(std::net::Shutdown::Both);
    };
    let hello = match read_frame(reader, state.limits.max_body_bytes) {
        Ok(Some(Frame::Hello(hello))) => hello,
        Ok(None) => return None,
        Ok(Some(other)) => {
            refuse(RemoteError::new(
                ErrorCode::HandshakeRequired,
                format!(
                    "the first frame must be a hello, not a {} frame",
                    other.kind().name()
                ),
            ));
            return None;
        }
        Err(error) => {
            if matches!(error, ReadFrameError::Malformed(_)) {
                Counters::add(&state.counters.malformed_frames, 1);
                refuse(RemoteError::new(
                    ErrorCode::MalformedFrame,
                    error.to_string(),
                ));
            }
            return None;
        }
    };
    Counters::add(&state.counters.frames_received, 1);
    let Some(version) = hello.common_version() else {
        refuse(RemoteError::limit(
            ErrorCode::UnsupportedVersion,
            format!(
                "client speaks protocol versions {}..={}; this server speaks versions \
                 {MIN_PROTOCOL_VERSION}..={PROTOCOL_VERSION}",
                hello.min_version, hello.max_version
            ),
            u64::from(PROTOCOL_VERSION),
        ));
        return None;
    };
    // Marked before the welcome goes out: a client that holds its welcome has a place that
    // a newcomer can no longer take back as a silent connection's.
    if !admitted.handshake_done() || !state.admission.handshake_done(id) {
        tracing::info!(
            connection = id,
            "the hello came after the connection's place was taken back; closing"
        );
        return None;
    }
    let mapped = match (&state.read_pool, hello.map_memory) {
        (Some(_), true) => Some(Mapped::new(
            write_pool(state, id),
            state.config.max_read_handles_per_client,
            Arc::clone(&state.read_handles_now),
            state.config.max_read_handles,
        )),
        _ => None,
    };
    let store_clock = if state.device_time_is_virtual {
        ClockKind::Virtual
    } else {
        ClockKind::Real
    };
    let welcome = Welcome {
        version,
        server_pid: std::process::id(),
        store_path: state.config.store_description.clone(),
        store_identity: state.config.store_identity,
        limits: state.limits,
        read_region: mapped.as_ref().and(state.read_region),
        write_region: mapped.as_ref().and_then(Mapped::write_region),
        store_clock: Some(store_clock).filter(|_| Welcome::carries_store_clock(version)),
        read_only: state.read_only && Welcome::carries_flags(version),
    };
    let bytes = encode_frame(&Frame::Welcome(welcome));
    let mut fds: Vec<BorrowedFd<'_>> = Vec::new();
    if let Some(mapped) = &mapped {
        let read_memory = state.read_pool.as_ref().and_then(BufferPool::shared_memory);
        fds.extend(read_memory.map(|memory| memory.as_fd()));
        let write_memory = mapped.write_pool().and_then(BufferPool::shared_memory);
        fds.extend(write_memory.map(|memory| memory.as_fd()));
    }
    if let Err(error) = send_with_fds(socket, &bytes, &fds) {
        tracing::info!(connection = id, %error, "client gone before the welcome");
        return None;
    }
    Counters::add(&state.counters.frames_sent, 1);
    Some((hello, mapped))
}

/// A new write pool in shared memory for a mapping client; `None` (its writes go
/// inline) when the memfd cannot be made.
fn write_pool(state: &ServerState, id: u64) -> Option<BufferPool> {
    let config = &state.config;
    let pool = BufferPool::in_shared_memory(
        WRITE_POOL_MEMORY_NAME,
        config.write_slots_per_client,
        config.max_write_bytes as usize,
    );
    match pool {
        Ok(pool) => Some(pool),
        Err(error) => {
            tracing::warn!(connection = id, %error, "no shared write pool for this client; its writes go inline");
            None
        }
    }
}
