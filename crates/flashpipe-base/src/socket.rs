//! The one send without SIGPIPE: `send(2)`/`sendmsg(2)` with `MSG_NOSIGNAL`.
//!
//! Writing to a socket whose peer has gone raises SIGPIPE, and the CLI restores the
//! default action of that signal (so output into a closed pipe ends quietly): a server or
//! client thread that wrote to a dead peer with `write(2)` would end the whole process.
//! Every socket write of flashpipe's servers and clients goes through here instead, where
//! a gone peer is an `EPIPE` error ([`std::io::ErrorKind::BrokenPipe`]) for the caller
//! to handle.
//!
//! [`send_nosignal`] and [`send_vectored_nosignal`] make one call (a short count or
//! `WouldBlock` is the caller's to handle, as with `Write::write`); [`send_all_nosignal`]
//! sends every byte, retrying on `EINTR`; [`SendNoSignal`] is a `Write` over any socket
//! descriptor. Only stream sockets are meant (Unix stream and TCP): on other descriptors
//! `send` fails with `ENOTSOCK`.

use std::io::{ErrorKind, IoSlice, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

/// Sends what one `send(2)` takes of `bytes` on `socket`, with `MSG_NOSIGNAL`: the
/// count sent (maybe short), or the error (`BrokenPipe` for a gone peer, never SIGPIPE).
pub fn send_nosignal(socket: BorrowedFd<'_>, bytes: &[u8]) -> std::io::Result<usize> {
    // SAFETY: `bytes` is a live slice of `bytes.len()` readable bytes for the whole call,
    // and `socket` is borrowed, so its descriptor stays open until `send` returns; `send`
    // only reads the bytes.
    let sent = unsafe {
        libc::send(
            socket.as_raw_fd(),
            bytes.as_ptr().cast(),
            bytes.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    if sent < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(sent as usize)
}

/// Sends what one `sendmsg(2)` takes of `slices`, in order, with `MSG_NOSIGNAL`: the
/// count sent (maybe short, maybe ending inside a slice), or the error.
pub fn send_vectored_nosignal(
    socket: BorrowedFd<'_>,
    slices: &[IoSlice<'_>],
) -> std::io::Result<usize> {
    // SAFETY: `msghdr` is plain data; all zero is a valid value (no name, no control).
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    // `IoSlice` is guaranteed ABI-compatible with `iovec` on Unix; sendmsg only reads
    // through the pointers. The kernel caps the count at IOV_MAX (EMSGSIZE past it).
    message.msg_iov = slices.as_ptr() as *mut libc::iovec;
    message.msg_iovlen = slices.len() as _;
    // SAFETY: `message` points at `slices`, live and readable for the whole call; the
    // descriptor is borrowed, so it stays open until `sendmsg` returns.
    let sent = unsafe { libc::sendmsg(socket.as_raw_fd(), &message, libc::MSG_NOSIGNAL) };
    if sent < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(sent as usize)
}

/// Sends all of `bytes` on `socket` with `MSG_NOSIGNAL`, retrying after `EINTR`; a
/// gone peer is a `BrokenPipe` error, never SIGPIPE. On a non-blocking socket a full
/// buffer is a `WouldBlock` error with part of `bytes` maybe sent: use it on blocking
/// sockets (a send timeout bounds the wait).
pub fn send_all_nosignal(socket: BorrowedFd<'_>, bytes: &[u8]) -> std::io::Result<()> {
    let mut sent = 0;
    while sent < bytes.len() {
        match send_nosignal(socket, &bytes[sent..]) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    ErrorKind::WriteZero,
                    "the socket took no bytes",
                ))
            }
            Ok(count) => sent += count,
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// A `Write` over a socket whose every write is a send with `MSG_NOSIGNAL`.
#[derive(Debug)]
pub struct SendNoSignal<S: AsFd> {
    socket: S,
}

impl<S: AsFd> SendNoSignal<S> {
    /// Writes go to `socket` (owned or borrowed: `&UnixStream` is `AsFd`).
    pub fn new(socket: S) -> SendNoSignal<S> {
        SendNoSignal { socket }
    }

    /// The socket.
    pub fn get_ref(&self) -> &S {
        &self.socket
    }

    /// The socket back.
    pub fn into_inner(self) -> S {
        self.socket
    }
}

impl<S: AsFd> Write for SendNoSignal<S> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        send_nosignal(self.socket.as_fd(), bytes)
    }

    fn write_vectored(&mut self, slices: &[IoSlice<'_>]) -> std::io::Result<usize> {
        send_vectored_nosignal(self.socket.as_fd(), slices)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    #[test]
    fn bytes_arrive_whole_and_in_order() {
        let (sender, mut receiver) = UnixStream::pair().unwrap();
        send_all_nosignal(sender.as_fd(), b"hello ").unwrap();
        let sent = SendNoSignal::new(&sender)
            .write_vectored(&[IoSlice::new(b"wor"), IoSlice::new(b"ld")])
            .unwrap();
        assert_eq!(sent, 5);
        drop(sender);
        let mut received = String::new();
        receiver.read_to_string(&mut received).unwrap();
        assert_eq!(received, "hello world");
    }

    /// With SIGPIPE at its default action (as the CLI sets it), a send to a gone peer
    /// would end this test process; it must be a `BrokenPipe` error instead.
    #[test]
    fn a_gone_peer_is_an_error_not_a_signal() {
        // SAFETY: restoring the default action of SIGPIPE is process-wide but harmless
        // for other tests: every socket write here goes through MSG_NOSIGNAL, and the
        // test harness writes to its own standard streams.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
        let (sender, receiver) = UnixStream::pair().unwrap();
        drop(receiver);
        let error = send_all_nosignal(sender.as_fd(), b"into the void").unwrap_err();
        assert_eq!(error.kind(), ErrorKind::BrokenPipe);
        let error = SendNoSignal::new(&sender)
            .write_vectored(&[IoSlice::new(b"again")])
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::BrokenPipe);
    }

    #[test]
    fn a_descriptor_that_is_no_socket_is_refused() {
        let file = std::fs::File::open("/dev/null").unwrap();
        let error = send_nosignal(file.as_fd(), b"x").unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::ENOTSOCK));
    }
}
