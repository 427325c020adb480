//! Who is at the other end of an accepted connection, read before the connection's
//! first byte: over a Unix socket the credentials the kernel recorded at `connect`
//! (`SO_PEERCRED`, which the peer cannot claim, only the kernel sets), over TCP the
//! peer's address. A server's [`crate::Protocol::admit`] decides on it.

use std::io;
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;

use crate::accept::Accepted;

/// The peer of an accepted connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerInfo {
    /// A Unix socket's peer, as the kernel recorded it at connect.
    Unix {
        /// Its process id at connect (for logs only: the process may be gone since).
        pid: i32,
        /// Its effective uid.
        uid: u32,
        /// Its effective gid.
        gid: u32,
    },
    /// A TCP peer's address.
    Tcp {
        /// The address.
        address: SocketAddr,
    },
}

impl PeerInfo {
    /// Reads the peer of `connection` without reading any of its bytes.
    pub fn of(connection: &Accepted) -> io::Result<PeerInfo> {
        match connection {
            Accepted::Tcp(stream) => stream.peer_addr().map(|address| PeerInfo::Tcp { address }),
            Accepted::Unix(stream) => unix_peer(stream),
        }
    }
}

/// The credentials of the process at the other end of `socket` (`SO_PEERCRED`, read by
/// the one reader in `flashpipe-base`).
fn unix_peer(socket: &UnixStream) -> io::Result<PeerInfo> {
    let credentials = flashpipe_base::peer_credentials(socket)?;
    Ok(PeerInfo::Unix {
        pid: credentials.pid,
        uid: credentials.uid,
        gid: credentials.gid,
    })
}
