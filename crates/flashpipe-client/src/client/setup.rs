//! The connection's setup and its frame rings: receiving the welcome with the file
//! descriptors beside it, mapping the shared regions it announces, moving the frames into
//! two shared-memory rings (and watching the socket while on them), and checking a read
//! window against the read region.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use flashpipe_protocol::{
    decode_body, decode_header, encode_frame, send_all, Frame, Request, RequestId, RingsOpened,
    SharedRegion, SharedWindow, Welcome, HEADER_BYTES, MAX_BODY_BYTES,
};
use flashpipe_shm::{attach_received_ring, PeerCheck, RingReader, RingWait, RING_HEADER_BYTES};
use flashpipe_shm::{receive_with_fds, Doorbell, MapAccess, SharedMapping};

use super::{Link, RingLink, SharedRegions, RING_PARK_TIMEOUT_US};
use crate::error::ConnectError;

/// Asks the server to move the connection's frames into rings (request `request_id`,
/// the first after the welcome) and attaches the two it passes; `None` when it refuses
/// (the connection stays on the socket).
pub(super) fn open_rings(
    stream: &UnixStream,
    request_id: RequestId,
    spin_us: u32,
) -> Result<Option<Link>, ConnectError> {
    let handshake = |detail: String| ConnectError::Handshake(detail);
    let open = Frame::Request {
        request_id,
        request: Request::OpenRings,
    };
    send_all(stream, &encode_frame(&open))
        .map_err(|error| handshake(format!("asking for rings: {error}")))?;
    let (rings, fds) = match receive_first_frame(stream)? {
        (
            Frame::Response {
                response: flashpipe_protocol::Response::RingsOpened(rings),
                ..
            },
            fds,
        ) => (rings, fds),
        (
            Frame::Error {
                request_id: 0,
                error,
            },
            _,
        ) => return Err(ConnectError::Refused(error)),
        (Frame::Error { .. }, _) => return Ok(None),
        (other, _) => {
            return Err(handshake(format!(
                "the server answered open-rings with a {} frame",
                other.kind().name()
            )))
        }
    };
    let expected_fds = if rings.engine_doorbell { 3 } else { 2 };
    if fds.len() != expected_fds {
        return Err(handshake(format!(
            "rings-opened came with {} file descriptors, not {expected_fds}",
            fds.len()
        )));
    }
    let mut fds = fds.into_iter();
    let (request_fd, reply_fd) = (fds.next(), fds.next());
    let (Some(request_fd), Some(reply_fd)) = (request_fd, reply_fd) else {
        unreachable!("the count was checked");
    };
    let doorbell = fds
        .next()
        .map(Doorbell::attach)
        .transpose()
        .map_err(|error| handshake(format!("attaching the engine's doorbell: {error}")))?;
    let attach = |fd: OwnedFd, capacity_bytes: u32| {
        attach_received_ring(fd, RING_HEADER_BYTES + capacity_bytes as usize)
            .map_err(|error| handshake(format!("attaching a frame ring: {error}")))
    };
    let RingsOpened {
        request_ring_capacity_bytes,
        reply_ring_capacity_bytes,
        ..
    } = rings;
    let requests = attach(request_fd, request_ring_capacity_bytes)?;
    let replies = attach(reply_fd, reply_ring_capacity_bytes)?;
    let watched = stream
        .try_clone()
        .and_then(|watched| watched.set_nonblocking(true).map(|()| watched))
        .map_err(|error| handshake(format!("watching the socket: {error}")))?;
    let peer_check: PeerCheck = Box::new(move |_| server_alive(&watched));
    let spin_us = match (&doorbell, spin_us) {
        (Some(_), 0) => ENGINE_PATH_SPIN_US,
        _ => spin_us,
    };
    let wait = RingWait::SpinThenPark {
        spin_us,
        park_timeout_us: Some(RING_PARK_TIMEOUT_US),
    };
    Ok(Some(Link::Rings(Box::new(RingLink {
        requests,
        replies: RingReader::new(replies, wait, Some(peer_check)),
        doorbell,
    }))))
}

/// Looks (without waiting; the socket is non-blocking once on rings) whether the
/// server's end of the socket is still open: its end, or bytes on it, is an error.
pub(super) fn server_alive(socket: &UnixStream) -> std::io::Result<()> {
    let mut byte = [0u8; 1];
    let mut reading = socket;
    match reading.read(&mut byte) {
        Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::Interrupted => Ok(()),
        Err(error) => Err(error),
        Ok(0) => Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the server closed the connection",
        )),
        Ok(_) => Err(std::io::Error::other(
            "the server sent bytes on the socket of a connection on rings",
        )),
    }
}

/// Reads the server's first frame with the file descriptors that ride on its first
/// bytes (`SCM_RIGHTS`), straight from the socket (no buffering before them).
pub(super) fn receive_first_frame(
    stream: &UnixStream,
) -> Result<(Frame, Vec<OwnedFd>), ConnectError> {
    let handshake = |detail: String| ConnectError::Handshake(detail);
    let mut header_bytes = [0u8; HEADER_BYTES];
    let mut filled = 0;
    let mut fds = Vec::new();
    while filled < HEADER_BYTES {
        let (received, mut received_fds) =
            receive_with_fds(stream, &mut header_bytes[filled..], MAX_WELCOME_FDS)
                .map_err(|error| handshake(format!("receiving the welcome: {error}")))?;
        if received == 0 {
            return Err(handshake(
                "the server closed the connection without a welcome".to_string(),
            ));
        }
        fds.append(&mut received_fds);
        filled += received;
    }
    let header = decode_header(&header_bytes, MAX_BODY_BYTES)
        .map_err(|error| handshake(error.to_string()))?;
    let mut body = vec![0u8; header.body_length_bytes as usize];
    let mut reading = stream;
    reading
        .read_exact(&mut body)
        .map_err(|error| handshake(format!("receiving the welcome: {error}")))?;
    let frame = decode_body(&header, &body).map_err(|error| handshake(error.to_string()))?;
    Ok((frame, fds))
}

/// Most descriptors a first frame carries: a welcome the read pool and the write pool,
/// a rings-opened the two rings and the engine's doorbell.
const MAX_WELCOME_FDS: usize = 3;

/// Spin window of the wait on the reply ring when the engine thread answers into it
/// and the caller left `ring_spin_us` at 0, in microseconds: the engine's own default
/// spin window (`flashpipe_engine::handoff::DEFAULT_SPIN_US`), so a client and the
/// engine wait on each other as an in-process client and its engine do (two threads,
/// each spinning for one window before it parks).
pub const ENGINE_PATH_SPIN_US: u32 = 200;

/// Maps the regions a welcome passed: the read pool read-only, the write pool
/// read-write; `None` on the copying path.
pub(super) fn map_regions(
    welcome: &Welcome,
    fds: Vec<OwnedFd>,
) -> Result<Option<SharedRegions>, ConnectError> {
    let Some(read_region) = welcome.read_region else {
        return Ok(None);
    };
    let mut fds = fds.into_iter();
    let map = |fd: Option<OwnedFd>, region: &SharedRegion, access: MapAccess| {
        let fd = fd.ok_or_else(|| {
            ConnectError::Handshake("a shared region came without its descriptor".to_string())
        })?;
        let size_bytes = usize::try_from(region.size_bytes()).map_err(|_| {
            ConnectError::Handshake(format!(
                "shared region {region:?} exceeds this machine's address space"
            ))
        })?;
        SharedMapping::map(fd, size_bytes, access)
            .map(Arc::new)
            .map_err(|error| ConnectError::Handshake(format!("mapping a shared region: {error}")))
    };
    let read_mapping = map(fds.next(), &read_region, MapAccess::ReadOnly)?;
    let write = match welcome.write_region {
        Some(region) => Some((map(fds.next(), &region, MapAccess::ReadWrite)?, region)),
        None => None,
    };
    Ok(Some(SharedRegions {
        read_mapping,
        read_region,
        write,
        releases: Arc::new(Mutex::new(Vec::new())),
        spare_slots: Arc::new(Mutex::new(Vec::new())),
        granted_slots: HashSet::new(),
        granted_writes: HashMap::new(),
    }))
}

/// Byte offset of a read window in the read pool's mapping, `None` when the window
/// leaves its slot.
pub(super) fn window_offset(region: &SharedRegion, window: &SharedWindow) -> Option<usize> {
    if window.slot >= region.slot_count {
        return None;
    }
    let end_in_slot = window.window_start.checked_add(window.length_bytes)?;
    if end_in_slot > region.slot_size_bytes {
        return None;
    }
    let offset = u64::from(window.slot)
        .checked_mul(region.slot_size_bytes)?
        .checked_add(window.window_start)?;
    usize::try_from(offset).ok()
}
