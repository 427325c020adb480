//! The set-up of a shared-memory link over a node's Unix socket (docs/cluster-wire.md,
//! "Shared-memory link set-up, version 1"; design: docs/design/25-cluster-shm.md): the
//! socket folder (created 0700, refused when another user owns it or group or other may
//! enter it), the socket's path, the peer's user from the kernel (`SO_PEERCRED`: the
//! node's own uid or root, else refused), and the 16-byte `FPSHM` message with which the
//! accepting side hands over the two rings of the link and its doorbell and the connecting
//! side answers with its own doorbell. The hello and the key proof run over the socket
//! before this, unchanged.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use flashpipe_base::{peer_credentials, PeerCredentials};
use flashpipe_shm::ring::{MAX_RING_CAPACITY_BYTES, MIN_RING_CAPACITY_BYTES};
use flashpipe_shm::{
    attach_received_ring, receive_with_fds, send_with_fds, Doorbell, FrameRing, FrameRingError,
    SharedMemoryError, RING_HEADER_BYTES,
};

/// The first 8 bytes of the set-up message: `FPSHM`, two zero bytes, version 1.
pub const SETUP_MAGIC: [u8; 8] = *b"FPSHM\0\0\x01";
/// The set-up message's size.
pub const SETUP_BYTES: usize = 16;
/// The data capacity of each ring of a link unless told otherwise.
pub const DEFAULT_LINK_RING_BYTES: u32 = 64 * 1024;
/// The longest a set-up exchange may take before the socket is closed.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(5);
/// Descriptors the accepting side sends: the ring the connecting side writes, the ring it
/// reads, the accepting node's doorbell.
pub const OFFER_FDS: usize = 3;

/// Why a shared-memory link could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The socket folder is unusable or unsafe.
    #[error("socket folder {path}: {detail}")]
    Folder {
        /// The folder.
        path: String,
        /// What is wrong and what to do.
        detail: String,
    },
    /// The peer runs as another user than this node (and not as root).
    #[error("refused a peer of uid {uid} (pid {pid}): only uid {expected} or root may connect")]
    PeerRefused {
        /// The peer's user.
        uid: u32,
        /// The peer's process.
        pid: i32,
        /// This process's user.
        expected: u32,
    },
    /// The message is not a version 1 set-up message.
    #[error("set-up message refused: {detail}")]
    Message {
        /// What is wrong with it.
        detail: String,
    },
    /// The message came with another number of descriptors than the protocol's.
    #[error("set-up message came with {got} descriptors, not {expected}")]
    Descriptors {
        /// Descriptors expected.
        expected: usize,
        /// Descriptors received.
        got: usize,
    },
    /// The socket failed or closed during the set-up.
    #[error("set-up over the Unix socket failed: {0}")]
    Io(#[from] std::io::Error),
    /// A ring could not be created or was refused.
    #[error("link ring: {0}")]
    Ring(#[from] FrameRingError),
    /// A doorbell could not be created or was refused.
    #[error("link doorbell: {0}")]
    Doorbell(#[from] SharedMemoryError),
}

/// One end's view of a link's rings: it pops `input`, pushes `output` and rings
/// `peer_doorbell` after each push (the peer parks on it).
pub struct LinkRings {
    /// The ring this end reads.
    pub input: FrameRing,
    /// The ring this end writes.
    pub output: FrameRing,
    /// The peer's doorbell.
    pub peer_doorbell: Doorbell,
}

/// The Unix socket of node `node` in `dir`.
pub fn socket_path(dir: &Path, node: u32) -> PathBuf {
    dir.join(format!("node-{node}.sock"))
}

/// Creates the socket folder 0700 when it is absent; refuses one that is not a folder
/// (a link included), belongs to another user than this process's, or that group or
/// other may enter or list.
pub fn prepare_socket_dir(dir: &Path) -> Result<(), SetupError> {
    let folder_error = |detail: String| SetupError::Folder {
        path: dir.display().to_string(),
        detail,
    };
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(folder_error(format!("cannot create it: {error}"))),
    }
    let metadata =
        std::fs::symlink_metadata(dir).map_err(|error| folder_error(error.to_string()))?;
    if !metadata.is_dir() {
        return Err(folder_error(
            "not a folder; name a folder in socket_dir".to_string(),
        ));
    }
    let me = effective_uid();
    if metadata.uid() != me {
        return Err(folder_error(format!(
            "belongs to uid {}, not to uid {me} who runs the node; remove it or name another socket_dir",
            metadata.uid()
        )));
    }
    if metadata.mode() & 0o077 != 0 {
        return Err(folder_error(format!(
            "mode {:o} lets other users in; run chmod 700 on it",
            metadata.mode() & 0o777
        )));
    }
    Ok(())
}

/// Whether a peer of `peer_uid` may use a link of a node run by `own_uid`.
pub fn peer_allowed(peer_uid: u32, own_uid: u32) -> bool {
    peer_uid == own_uid || peer_uid == 0
}

/// Checks the peer of an accepted socket: this process's uid or root, else refused (the
/// caller logs the error, which names the uid and pid).
pub fn check_peer(stream: &UnixStream) -> Result<PeerCredentials, SetupError> {
    let peer = peer_credentials(stream)?;
    let expected = effective_uid();
    if !peer_allowed(peer.uid, expected) {
        return Err(SetupError::PeerRefused {
            uid: peer.uid,
            pid: peer.pid,
            expected,
        });
    }
    Ok(peer)
}

/// The set-up message for rings of `ring_bytes` each.
pub fn encode_setup(ring_bytes: u32) -> [u8; SETUP_BYTES] {
    let mut bytes = [0u8; SETUP_BYTES];
    bytes[..8].copy_from_slice(&SETUP_MAGIC);
    bytes[8..12].copy_from_slice(&ring_bytes.to_le_bytes());
    bytes
}

/// Checks a set-up message and returns its ring size: magic, version, a ring size the
/// ring accepts (a power of two within its limits), the reserved bytes zero.
pub fn decode_setup(bytes: &[u8; SETUP_BYTES]) -> Result<u32, SetupError> {
    let refused = |detail: String| Err(SetupError::Message { detail });
    if bytes[..7] != SETUP_MAGIC[..7] {
        return refused("it does not start with FPSHM (not a flashpipe cluster node?)".into());
    }
    if bytes[7] != SETUP_MAGIC[7] {
        return refused(format!(
            "version {}, this release speaks version {}",
            bytes[7], SETUP_MAGIC[7]
        ));
    }
    let ring_bytes = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    let size = ring_bytes as usize;
    if !size.is_power_of_two()
        || !(MIN_RING_CAPACITY_BYTES..=MAX_RING_CAPACITY_BYTES).contains(&size)
    {
        return refused(format!(
            "ring size {ring_bytes} bytes is not a power of two from {MIN_RING_CAPACITY_BYTES} to {MAX_RING_CAPACITY_BYTES}"
        ));
    }
    if bytes[12..] != [0; 4] {
        return refused("reserved bytes 12-15 are not zero".into());
    }
    Ok(ring_bytes)
}

/// The accepting side, after the hello and the key proof: creates the link's two rings of
/// `ring_bytes` each, sends them with `own_doorbell`, and takes the peer's answer and its
/// doorbell. The socket's timeouts are set to [`SETUP_TIMEOUT`].
pub fn offer_rings(
    stream: &UnixStream,
    ring_bytes: u32,
    own_doorbell: &Doorbell,
) -> Result<LinkRings, SetupError> {
    set_timeouts(stream)?;
    let message = encode_setup(ring_bytes);
    decode_setup(&message)?;
    let input = FrameRing::create(ring_bytes as usize)?;
    let output = FrameRing::create(ring_bytes as usize)?;
    send_with_fds(
        stream,
        &message,
        &[input.as_fd(), output.as_fd(), own_doorbell.as_fd()],
    )?;
    let (answer, mut fds) = receive_message(stream, 1)?;
    if answer != message {
        decode_setup(&answer)?;
        return Err(SetupError::Message {
            detail: "the answer does not repeat the offer".into(),
        });
    }
    let peer_doorbell = Doorbell::attach(fds.remove(0))?;
    Ok(LinkRings {
        input,
        output,
        peer_doorbell,
    })
}

/// The connecting side, after the hello and the key proof: takes the offer (the ring it
/// writes, the ring it reads, the peer's doorbell), checks it, and answers with the same
/// 16 bytes and `own_doorbell`. The socket's timeouts are set to [`SETUP_TIMEOUT`].
pub fn accept_offer(stream: &UnixStream, own_doorbell: &Doorbell) -> Result<LinkRings, SetupError> {
    set_timeouts(stream)?;
    let (message, fds) = receive_message(stream, OFFER_FDS)?;
    let ring_bytes = decode_setup(&message)? as usize;
    let [writes, reads, doorbell]: [OwnedFd; OFFER_FDS] =
        fds.try_into().expect("receive_message checked the count");
    let output = attach_ring(writes, ring_bytes)?;
    let input = attach_ring(reads, ring_bytes)?;
    let peer_doorbell = Doorbell::attach(doorbell)?;
    send_with_fds(stream, &message, &[own_doorbell.as_fd()])?;
    Ok(LinkRings {
        input,
        output,
        peer_doorbell,
    })
}

/// Maps a received ring and checks it holds the capacity the message announced.
fn attach_ring(fd: OwnedFd, ring_bytes: usize) -> Result<FrameRing, SetupError> {
    let ring = attach_received_ring(fd, RING_HEADER_BYTES + ring_bytes)?;
    if ring.capacity_bytes() != ring_bytes {
        return Err(SetupError::Message {
            detail: format!(
                "a ring holds {} bytes, the message says {ring_bytes}",
                ring.capacity_bytes()
            ),
        });
    }
    Ok(ring)
}

/// Receives one 16-byte message with exactly `fds` descriptors (the kernel delivers the
/// descriptors with the first bytes; any rest of the message is read after them).
fn receive_message(
    stream: &UnixStream,
    fds: usize,
) -> Result<([u8; SETUP_BYTES], Vec<OwnedFd>), SetupError> {
    let mut message = [0u8; SETUP_BYTES];
    let (received, descriptors) = receive_with_fds(stream, &mut message, fds)?;
    if received == 0 {
        return Err(SetupError::Io(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the peer closed the socket before its set-up message",
        )));
    }
    let mut reader = stream;
    reader.read_exact(&mut message[received..])?;
    if descriptors.len() != fds {
        return Err(SetupError::Descriptors {
            expected: fds,
            got: descriptors.len(),
        });
    }
    Ok((message, descriptors))
}

fn set_timeouts(stream: &UnixStream) -> std::io::Result<()> {
    stream.set_read_timeout(Some(SETUP_TIMEOUT))?;
    stream.set_write_timeout(Some(SETUP_TIMEOUT))
}

fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(test)]
#[path = "shm_setup_tests.rs"]
mod tests;
