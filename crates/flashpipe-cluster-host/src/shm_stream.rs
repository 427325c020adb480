//! A host's connection to its node over shared memory (`link = "shm"`): after the hello,
//! the key proof and the rings' set-up on the node's Unix socket, frames go into the ring
//! the node reads (its doorbell rung after each write) and come back through the ring it
//! writes, read as a byte stream with the same frame decoder as TCP. The socket stays open:
//! its hang-up is the node gone, so a waiting read or write ends instead of hanging.
//! Shutting the stream closes both rings (the node sees the link down at once) and the
//! socket, and wakes a reader parked on the ring.

use std::io::{self, Error, ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use flashpipe_shm::{push_stream_bytes, Doorbell, FrameRing, RingReader, RingWait};

use crate::shm_setup::LinkRings;

/// The longest a waiting read or write sleeps before it looks at the socket again.
const SOCKET_CHECK_US: u64 = 10_000;

/// Whether the peer of `socket` is gone: one `poll` without waiting; a hang-up, the
/// peer's shutdown or an error says so.
pub fn socket_hung_up(socket: &UnixStream) -> bool {
    let mut entry = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call; no wait.
    let ready = unsafe { libc::poll(&mut entry, 1, 0) };
    let down = libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR | libc::POLLNVAL;
    ready > 0 && entry.revents & down != 0
}

/// The writing side of a shared-memory connection (and the handles that close it).
pub struct ShmStream {
    socket: UnixStream,
    output: FrameRing,
    node_bell: Doorbell,
    /// This end's doorbell: the node rings it after each push; kept mapped while open.
    _own_bell: Doorbell,
    input: Option<FrameRing>,
    closers: Vec<FrameRing>,
    write_timeout: Option<Duration>,
}

/// The reading side: the node's ring as a byte stream.
pub struct ShmReader {
    reader: RingReader,
}

impl ShmStream {
    /// The host's end of a set-up that passed over `socket`.
    pub fn new(socket: UnixStream, rings: LinkRings, own_bell: Doorbell) -> io::Result<ShmStream> {
        socket.set_read_timeout(None)?;
        socket.set_write_timeout(None)?;
        let closers = [&rings.input, &rings.output]
            .into_iter()
            .map(|ring| ring.attach_again().map_err(Error::other))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(ShmStream {
            socket,
            output: rings.output,
            node_bell: rings.peer_doorbell,
            _own_bell: own_bell,
            input: Some(rings.input),
            closers,
            write_timeout: None,
        })
    }

    /// The reading side (once; `None` after): a read waits at most `timeout` for a byte
    /// (`None`: until one comes, the node closes the link or its socket hangs up).
    pub fn reader(&mut self, timeout: Option<Duration>) -> io::Result<Option<ShmReader>> {
        let Some(input) = self.input.take() else {
            return Ok(None);
        };
        let socket = self.socket.try_clone()?;
        let check: flashpipe_shm::PeerCheck =
            Box::new(move |waited| check(&socket, waited, timeout));
        let wait = RingWait::SpinThenPark {
            spin_us: 0,
            park_timeout_us: Some(SOCKET_CHECK_US),
        };
        let node_bell = self
            .node_bell
            .as_fd()
            .try_clone_to_owned()
            .map_err(Error::other)
            .and_then(|fd| Doorbell::attach(fd).map_err(Error::other))?;
        Ok(Some(ShmReader {
            reader: RingReader::new(input, wait, Some(check)).with_room_bell(node_bell),
        }))
    }

    /// How long a write may wait for room in the node's ring (`None`: while the node lives).
    pub fn set_write_timeout(&mut self, timeout: Option<Duration>) {
        self.write_timeout = timeout;
    }

    /// Ends the connection both ways: both rings closed, the socket shut.
    pub fn shutdown(&self) {
        for ring in &self.closers {
            ring.close();
        }
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
    }
}

/// A waiting read's or write's look at the node: its socket hung up, or `timeout` passed.
fn check(socket: &UnixStream, waited: Duration, timeout: Option<Duration>) -> io::Result<()> {
    if socket_hung_up(socket) {
        return Err(Error::new(
            ErrorKind::BrokenPipe,
            "the node's socket hung up",
        ));
    }
    if timeout.is_some_and(|timeout| waited > timeout) {
        return Err(Error::new(
            ErrorKind::TimedOut,
            "the node's ring stayed empty or full past the timeout",
        ));
    }
    Ok(())
}

impl Write for ShmStream {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let (socket, timeout) = (&self.socket, self.write_timeout);
        let pushed = push_stream_bytes(&mut self.output, bytes, &mut |waited| {
            check(socket, waited, timeout)
        });
        self.node_bell.ring();
        pushed.map(|()| bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for ShmReader {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        self.reader.read(buffer)
    }
}
