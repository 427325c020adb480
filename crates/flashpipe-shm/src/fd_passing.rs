//! File descriptors over a Unix stream socket (`SCM_RIGHTS`): [`send_with_fds`] and
//! [`receive_with_fds`], with bounded counts, `MSG_CMSG_CLOEXEC` on receipt, and
//! truncated control data reported as an error after closing every descriptor received.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// Most descriptors one message carries (the kernel's own bound, `SCM_MAX_FD`, is 253).
pub const MAX_FDS_PER_MESSAGE: usize = 16;

/// Sends all of `bytes` on `stream`, the descriptors `fds` attached to its first byte
/// (at most [`MAX_FDS_PER_MESSAGE`]; `bytes` must not be empty when `fds` is not, since
/// a descriptor rides on a byte). The descriptors stay open here: the receiver gets
/// duplicates. A peer that has gone gives `BrokenPipe` (no SIGPIPE).
pub fn send_with_fds(stream: &UnixStream, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    if fds.len() > MAX_FDS_PER_MESSAGE {
        return Err(invalid_input(format!(
            "{} file descriptors in one message exceed the limit of {MAX_FDS_PER_MESSAGE}",
            fds.len()
        )));
    }
    if bytes.is_empty() && !fds.is_empty() {
        return Err(invalid_input(
            "file descriptors need at least one byte to ride on".to_string(),
        ));
    }
    let mut sent_bytes = if fds.is_empty() {
        0
    } else {
        send_first_part(stream, bytes, fds)?
    };
    while sent_bytes < bytes.len() {
        sent_bytes += send_part(stream, &bytes[sent_bytes..], &[])?;
    }
    Ok(())
}

/// Sends `bytes` once with the descriptors attached; returns the bytes the kernel took.
fn send_first_part(stream: &UnixStream, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<usize> {
    let raw_fds: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    send_part(stream, bytes, &raw_fds)
}

fn send_part(stream: &UnixStream, bytes: &[u8], raw_fds: &[RawFd]) -> io::Result<usize> {
    let mut control = ControlBuffer::for_fds(raw_fds.len());
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: msghdr is plain data; all-zero is its empty value.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    if !raw_fds.is_empty() {
        control.fill_rights(&mut message, raw_fds);
    }
    loop {
        // SAFETY: message points at `iov` (valid for bytes.len() bytes, only read by
        // sendmsg) and at `control` (sized and filled for raw_fds), both alive for the call.
        let sent = unsafe { libc::sendmsg(stream.as_raw_fd(), &message, libc::MSG_NOSIGNAL) };
        if sent >= 0 {
            return Ok(sent as usize);
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// Receives up to `buffer.len()` bytes from `stream` and the descriptors that came with
/// them (at most `max_fds`, itself at most [`MAX_FDS_PER_MESSAGE`]), each close-on-exec.
/// Returns the bytes received (0: the peer closed) and the descriptors. When the peer
/// sent more descriptors than `max_fds` the kernel truncates them: every descriptor
/// received is closed and the call fails with `InvalidData`.
pub fn receive_with_fds(
    stream: &UnixStream,
    buffer: &mut [u8],
    max_fds: usize,
) -> io::Result<(usize, Vec<OwnedFd>)> {
    if max_fds > MAX_FDS_PER_MESSAGE {
        return Err(invalid_input(format!(
            "receiving {max_fds} file descriptors exceeds the limit of {MAX_FDS_PER_MESSAGE}"
        )));
    }
    let mut control = ControlBuffer::for_fds(max_fds);
    let mut iov = libc::iovec {
        iov_base: buffer.as_mut_ptr().cast(),
        iov_len: buffer.len(),
    };
    // SAFETY: msghdr is plain data; all-zero is its empty value.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    control.attach(&mut message);
    let received_bytes = loop {
        // SAFETY: message points at `iov` (the caller's buffer, writable for its length)
        // and at `control` (writable for msg_controllen bytes), both alive for the call.
        let received =
            unsafe { libc::recvmsg(stream.as_raw_fd(), &mut message, libc::MSG_CMSG_CLOEXEC) };
        if received >= 0 {
            break received as usize;
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    };
    let fds = received_rights(&message);
    if message.msg_flags & libc::MSG_CTRUNC != 0 {
        drop(fds);
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "the peer sent more file descriptors than the {max_fds} this receive accepts \
                 (control data truncated; every descriptor received was closed)"
            ),
        ));
    }
    Ok((received_bytes, fds))
}

/// Takes ownership of every descriptor in the `SCM_RIGHTS` messages `message` carries.
fn received_rights(message: &libc::msghdr) -> Vec<OwnedFd> {
    let mut fds = Vec::new();
    if message.msg_controllen == 0 {
        return fds;
    }
    // SAFETY: message's control pointer and length describe the buffer recvmsg filled;
    // CMSG_FIRSTHDR/CMSG_NXTHDR stay inside it and return null at its end.
    let mut header = unsafe { libc::CMSG_FIRSTHDR(message) };
    while !header.is_null() {
        // SAFETY: header is non-null and points at a complete cmsghdr inside the buffer.
        let cmsg = unsafe { &*header };
        if cmsg.cmsg_level == libc::SOL_SOCKET && cmsg.cmsg_type == libc::SCM_RIGHTS {
            // SAFETY: CMSG_LEN(0) is arithmetic on a constant.
            let header_bytes = unsafe { libc::CMSG_LEN(0) } as usize;
            let count = (cmsg.cmsg_len as usize - header_bytes) / size_of::<RawFd>();
            // SAFETY: the payload of an SCM_RIGHTS message is `count` ints, possibly
            // unaligned, inside the buffer.
            let data = unsafe { libc::CMSG_DATA(header) }.cast::<RawFd>();
            for index in 0..count {
                // SAFETY: index < count, inside the payload (read unaligned).
                let raw_fd = unsafe { data.add(index).read_unaligned() };
                // SAFETY: the kernel installed raw_fd in this process for us alone.
                fds.push(unsafe { OwnedFd::from_raw_fd(raw_fd) });
            }
        }
        // SAFETY: as for CMSG_FIRSTHDR.
        header = unsafe { libc::CMSG_NXTHDR(message, header) };
    }
    fds
}

/// Control-message space aligned for `cmsghdr` (u64 words).
struct ControlBuffer {
    words: Vec<u64>,
    length_bytes: usize,
}

impl ControlBuffer {
    fn for_fds(fd_count: usize) -> ControlBuffer {
        let payload_bytes = (fd_count * size_of::<RawFd>()) as u32;
        let length_bytes = if fd_count == 0 {
            0
        } else {
            // SAFETY: CMSG_SPACE is arithmetic on its argument.
            unsafe { libc::CMSG_SPACE(payload_bytes) as usize }
        };
        ControlBuffer {
            words: vec![0u64; length_bytes.div_ceil(8)],
            length_bytes,
        }
    }

    fn attach(&mut self, message: &mut libc::msghdr) {
        if self.length_bytes > 0 {
            message.msg_control = self.words.as_mut_ptr().cast();
            message.msg_controllen = self.length_bytes as _;
        }
    }

    fn fill_rights(&mut self, message: &mut libc::msghdr, raw_fds: &[RawFd]) {
        assert!(!raw_fds.is_empty() && raw_fds.len() <= MAX_FDS_PER_MESSAGE);
        self.attach(message);
        let payload_bytes = size_of_val(raw_fds);
        // SAFETY: the control buffer is attached and holds CMSG_SPACE(payload) bytes, so
        // the first header and its payload fit; the payload is written unaligned-safe
        // by copy_nonoverlapping.
        unsafe {
            let header = libc::CMSG_FIRSTHDR(message);
            assert!(!header.is_null(), "control buffer holds one header");
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN(payload_bytes as u32) as _;
            std::ptr::copy_nonoverlapping(
                raw_fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(header),
                payload_bytes,
            );
        }
    }
}

fn invalid_input(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}
