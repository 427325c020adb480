//! Who is at the other end of an accepted connection, read before the connection's
//! first byte: over a Unix socket the credentials the kernel recorded at `connect`
//! (`SO_PEERCRED`, which the peer cannot claim, only the kernel sets), over TCP the
//! peer's address. A server's [`crate::Protocol::admit`] decides on it.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
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

/// The credentials of the process at the other end of `socket` (`SO_PEERCRED`).
fn unix_peer(socket: &UnixStream) -> io::Result<PeerInfo> {
    let mut credentials = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut length = size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt(2) writes at most `length` bytes into `credentials`, a live
    // `ucred` of exactly that size, and `length` is a live socklen_t; the descriptor stays
    // open as long as `socket` is borrowed.
    let result = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            std::ptr::addr_of_mut!(credentials).cast(),
            &mut length,
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    if length as usize != size_of::<libc::ucred>() {
        return Err(io::Error::other(
            "the kernel gave credentials of an unexpected size",
        ));
    }
    Ok(PeerInfo::Unix {
        pid: credentials.pid,
        uid: credentials.uid,
        gid: credentials.gid,
    })
}
