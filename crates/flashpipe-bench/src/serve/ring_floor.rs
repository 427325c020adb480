//! The transport's floors: a small frame's round trip to a client and back with nothing
//! served, through two shared-memory frame rings (`flashpipe_shm::ring`)
//! and through a Unix socket (`write` then `read` on each side, as the server's protocol
//! does), the least a request and its answer can cost between two processes each way.

use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::time::Instant;

use flashpipe_shm::send_with_fds;
use flashpipe_shm::{FrameRing, PushOutcome, RingWait};

use super::children::ClientGroup;
use super::roles::{BenchServeClientArgs, ClientRole};
use super::{ServeSettings, ROUNDS};

/// Bytes of each frame (a request naming a file, offset and length is about this size).
pub(super) const FRAME_BYTES: usize = 64;
/// Data bytes of each ring.
const RING_CAPACITY_BYTES: usize = 64 * 1024;

/// Mean microseconds per round trip of the fastest of [`ROUNDS`] rounds of
/// `settings.operation_count / ROUNDS` round trips.
pub(super) fn ring_round_trip_us(settings: &ServeSettings) -> Result<f64, String> {
    let folder =
        super::scratch_folder(&std::env::temp_dir(), "rings").map_err(|error| error.to_string())?;
    let socket_path = folder.join("rings.sock");
    let listener = UnixListener::bind(&socket_path)
        .map_err(|error| format!("binding {}: {error}", socket_path.display()))?;
    let mut requests = FrameRing::create(RING_CAPACITY_BYTES).map_err(|e| e.to_string())?;
    let mut replies = FrameRing::create(RING_CAPACITY_BYTES).map_err(|e| e.to_string())?;
    let mut role = BenchServeClientArgs::new(ClientRole::RingEcho);
    role.socket = Some(socket_path.clone());
    let group = ClientGroup::start(&[role], settings.clients_as, |_| {
        let (stream, _) = listener
            .accept()
            .map_err(|error| format!("accepting the ring client: {error}"))?;
        let size = requests.region_size_bytes().to_string();
        send_with_fds(
            &stream,
            size.as_bytes(),
            &[requests.as_fd(), replies.as_fd()],
        )
        .map_err(|error| format!("handing the rings over: {error}"))
    })?;
    measure_with_client(group, &folder, || {
        let measured = time_round_trips(settings, &mut requests, &mut replies);
        requests.close();
        measured
    })
}

/// Starts `group`'s client, runs `measure` (which ends the client's work), collects the
/// client and removes `folder`: the measurement, or the first error.
fn measure_with_client(
    group: ClientGroup,
    folder: &std::path::Path,
    measure: impl FnOnce() -> Result<f64, String>,
) -> Result<f64, String> {
    let started = group.go()?;
    let measured = measure();
    let collected = started.collect();
    let _ = std::fs::remove_dir_all(folder);
    collected?;
    measured
}

fn time_round_trips(
    settings: &ServeSettings,
    requests: &mut FrameRing,
    replies: &mut FrameRing,
) -> Result<f64, String> {
    let per_round = (settings.operation_count / ROUNDS).max(1);
    let frame = [7u8; FRAME_BYTES];
    let mut reply = Vec::with_capacity(FRAME_BYTES);
    let mut fastest_us = f64::MAX;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for _ in 0..per_round {
            while requests.try_push(&frame).map_err(|e| e.to_string())? == PushOutcome::Full {
                std::hint::spin_loop();
            }
            let came = replies
                .pop_into(RingWait::DEFAULT, &mut reply)
                .map_err(|e| e.to_string())?;
            if !came || reply.len() != FRAME_BYTES {
                return Err("the ring client stopped answering".to_string());
            }
        }
        fastest_us = fastest_us.min(started.elapsed().as_secs_f64() * 1e6 / per_round as f64);
    }
    Ok(fastest_us)
}

/// Mean microseconds per round trip of a [`FRAME_BYTES`] frame through a Unix socket to a
/// client that writes it back, the fastest of [`ROUNDS`] rounds.
pub(super) fn socket_round_trip_us(settings: &ServeSettings) -> Result<f64, String> {
    let folder = super::scratch_folder(&std::env::temp_dir(), "socket-echo")
        .map_err(|error| error.to_string())?;
    let socket_path = folder.join("echo.sock");
    let listener = UnixListener::bind(&socket_path)
        .map_err(|error| format!("binding {}: {error}", socket_path.display()))?;
    let mut role = BenchServeClientArgs::new(ClientRole::SocketEcho);
    role.socket = Some(socket_path.clone());
    let mut accepted = None;
    let group = ClientGroup::start(&[role], settings.clients_as, |_| {
        let (stream, _) = listener
            .accept()
            .map_err(|error| format!("accepting the echo client: {error}"))?;
        accepted = Some(stream);
        Ok(())
    })?;
    let mut stream = accepted.ok_or("the echo client never connected")?;
    measure_with_client(group, &folder, move || {
        time_socket_round_trips(settings, &mut stream)
    })
}

fn time_socket_round_trips(
    settings: &ServeSettings,
    stream: &mut std::os::unix::net::UnixStream,
) -> Result<f64, String> {
    let per_round = (settings.operation_count / ROUNDS).max(1);
    let frame = [7u8; FRAME_BYTES];
    let mut reply = [0u8; FRAME_BYTES];
    let mut fastest_us = f64::MAX;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for _ in 0..per_round {
            stream
                .write_all(&frame)
                .and_then(|()| stream.read_exact(&mut reply))
                .map_err(|error| format!("the socket echo client stopped answering: {error}"))?;
        }
        fastest_us = fastest_us.min(started.elapsed().as_secs_f64() * 1e6 / per_round as f64);
    }
    Ok(fastest_us)
}
