//! Who is at the other end of a Unix socket, as the kernel recorded it at `connect`
//! (`SO_PEERCRED`): the one reading of peer credentials, used by the servers' accept loop
//! (`flashpipe-net`) to decide who may connect and how many connections a user holds, and
//! by the client (through `flashpipe-protocol`'s re-export) to decide which server it
//! trusts. The credentials cannot be claimed by the peer, only read.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

/// A peer's credentials as the kernel recorded them at connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCredentials {
    /// Its process id (at connect; for logs only: the process may be gone since).
    pub pid: i32,
    /// Its effective uid.
    pub uid: u32,
    /// Its effective gid.
    pub gid: u32,
}

/// The credentials of the process at the other end of `socket` (`SO_PEERCRED`).
pub fn peer_credentials(socket: &UnixStream) -> std::io::Result<PeerCredentials> {
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
        return Err(std::io::Error::last_os_error());
    }
    if length as usize != size_of::<libc::ucred>() {
        return Err(std::io::Error::other(
            "the kernel gave credentials of an unexpected size",
        ));
    }
    Ok(PeerCredentials {
        pid: credentials.pid,
        uid: credentials.uid,
        gid: credentials.gid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_pair_reads_this_process() {
        let (left, _right) = UnixStream::pair().expect("a socket pair");
        let peer = peer_credentials(&left).expect("credentials");
        // SAFETY: getpid, geteuid and getegid take no argument and cannot fail.
        let (pid, uid, gid) = unsafe { (libc::getpid(), libc::geteuid(), libc::getegid()) };
        assert_eq!(peer, PeerCredentials { pid, uid, gid });
    }
}
