//! A node's Unix socket for shared-memory links (docs/cluster-wire.md, "Shared-memory link
//! set-up, version 1"; docs/security.md, "Shared-memory cluster links"): listening on
//! `socket_dir/node-<id>.sock` (the folder checked or created 0700; a stale socket file
//! removed only when it is a socket of this user that nobody listens on), the accepting
//! side (the peer's uid checked, the hello and key proof, then the rings offered) and the
//! dialing side (the same opening, then the offer taken). A link whose set-up passed goes
//! to the router thread as a [`RingLink`]; the thread that set it up then only watches the
//! socket, so it returns when the link ends (the dialer then dials again).

use std::io::{ErrorKind, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

use flashpipe_cluster::router::Port;
use flashpipe_cluster_host::shm_setup::{
    accept_offer, check_peer, offer_rings, prepare_socket_dir, socket_path, LinkRings,
    DEFAULT_LINK_RING_BYTES,
};
use flashpipe_net::{Admitted, Listener};

use crate::link::{Link, RingLink};
use crate::node::{open_accepted, open_dialed, NodeError, Shared};

/// Listens on node `node`'s socket in `dir`.
pub(crate) fn listen(dir: &Path, node: u32) -> Result<Listener, NodeError> {
    prepare_socket_dir(dir)?;
    let path = socket_path(dir, node);
    let bind_error = |detail: String| NodeError::Bind {
        address: path.display().to_string(),
        detail,
    };
    remove_stale(&path).map_err(bind_error)?;
    let listener = UnixListener::bind(&path).map_err(|error| bind_error(error.to_string()))?;
    Ok(Listener::Unix { listener, path })
}

/// Removes a socket file left by a node that ended without removing it: only a socket of
/// this user, and only when nobody accepts on it.
fn remove_stale(path: &Path) -> Result<(), String> {
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error.to_string()),
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let own_uid = unsafe { libc::geteuid() };
    if !metadata.file_type().is_socket() || metadata.uid() != own_uid {
        return Err(
            "the path exists and is not a socket of this user; remove it or set another socket_dir"
                .to_string(),
        );
    }
    if UnixStream::connect(path).is_ok() {
        return Err("a process accepts on this socket".to_string());
    }
    std::fs::remove_file(path).map_err(|error| format!("cannot remove the stale socket: {error}"))
}

/// The accepting side of a connection on the node's socket.
pub(crate) fn serve(shared: &Shared, mut stream: UnixStream, admitted: &Admitted) {
    let credentials = match check_peer(&stream) {
        Ok(credentials) => credentials,
        Err(error) => {
            tracing::warn!("refused a connection on the node's socket: {error}");
            return;
        }
    };
    let peer = format!("pid {}, uid {}", credentials.pid, credentials.uid);
    let Some((port, hello)) = open_accepted(shared, &mut stream, &peer) else {
        return;
    };
    if !admitted.handshake_done() {
        return;
    }
    let peer = format!("{} {} ({peer})", hello.role.name(), hello.id);
    let rings = match offer_rings(&stream, DEFAULT_LINK_RING_BYTES, shared.bell.offered()) {
        Ok(rings) => rings,
        Err(error) => {
            tracing::warn!(peer = %peer, "closed a shared-memory set-up: {error}");
            return;
        }
    };
    let reason = run_ring_link(shared, port, rings, stream, peer.clone());
    tracing::debug!(peer = %peer, "shared-memory link ended: {reason}");
}

/// The dialing side: connects to the neighbour's socket, opens, takes the offer and runs
/// the link until it ends (`Ok`: why it ended); `Err`: why it did not open.
pub(crate) fn dial_and_run(
    shared: &Shared,
    link: usize,
    neighbour: u32,
    path: &Path,
) -> Result<String, String> {
    let shown = path.display().to_string();
    let mut stream =
        UnixStream::connect(path).map_err(|error| format!("cannot connect to {shown}: {error}"))?;
    check_peer(&stream).map_err(|error| {
        let reason = format!("node {neighbour} at {shown}: {error}");
        tracing::warn!("{reason}");
        reason
    })?;
    open_dialed(shared, &mut stream, neighbour, &shown)?;
    let rings = accept_offer(&stream, shared.bell.offered()).map_err(|error| {
        let reason = format!("node {neighbour} at {shown}: {error}");
        tracing::warn!("{reason}");
        reason
    })?;
    let peer = format!("node {neighbour} at {shown}");
    Ok(run_ring_link(shared, Port::Link(link), rings, stream, peer))
}

/// Hands the link to the router thread, then watches its socket until it ends.
fn run_ring_link(
    shared: &Shared,
    port: Port,
    rings: LinkRings,
    stream: UnixStream,
    peer: String,
) -> String {
    let cleared = stream
        .set_read_timeout(None)
        .and_then(|()| stream.set_write_timeout(None));
    let watched = match cleared.and_then(|()| stream.try_clone()) {
        Ok(watched) => watched,
        Err(error) => return format!("cannot watch the link's socket: {error}"),
    };
    let link = RingLink::new(rings, stream, peer, shared.limits);
    if shared
        .attach
        .send((port, Link::Ring(Box::new(link))))
        .is_err()
    {
        return "the node is stopping".to_string();
    }
    shared.bell.ring();
    let reason = watch(watched);
    // The router sees the hang-up at its next look; wake it for that look now.
    shared.bell.ring();
    reason
}

/// Blocks until the socket ends (the peer's end, or the router's close); any byte after
/// the set-up is a broken peer. Shuts the socket, so the router's poll sees it too.
fn watch(mut socket: UnixStream) -> String {
    let mut byte = [0u8; 1];
    let reason = loop {
        match socket.read(&mut byte) {
            Ok(0) => break "the link's socket closed".to_string(),
            Ok(_) => break "the peer sent bytes on the socket after the set-up".to_string(),
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => break format!("the link's socket failed: {error}"),
        }
    };
    let _ = socket.shutdown(std::net::Shutdown::Both);
    reason
}
