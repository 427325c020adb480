//! The TLS pump shared by the NBD server and client: after a TLS handshake on a socket,
//! one thread owns the rustls connection and the socket (non-blocking) and relays
//! plaintext to and from one end of a Unix socketpair; the other end is handed to the
//! protocol code as an ordinary stream.
//!
//! Why a pump thread: both sides read on one thread and write on another, each with its
//! own handle to the socket. A rustls connection is one state machine for both
//! directions (`StreamOwned` cannot be split), so the pump keeps the reader and writer
//! (and their clones, time limits and shutdowns) unchanged at the cost of one thread and
//! one local copy per connection.
//!
//! Ends: the peer closing the socket becomes end-of-file on the plaintext end after what
//! was received is delivered; closing the plaintext end becomes a TLS close_notify after
//! what was written is sent. A peer that stops reading for longer than the write limit
//! ends the pump. Writes to the plaintext end never raise `SIGPIPE` (`MSG_NOSIGNAL`).

use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::io::{AsFd, AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::tls_words::{self, Side};

/// A connected socket the pump can own: readable, writable without `SIGPIPE`, pollable.
pub trait PumpSocket: Read + Write + Send + 'static {
    /// The file descriptor, for `poll`.
    fn pump_raw_fd(&self) -> RawFd;
    /// Switches non-blocking mode.
    fn pump_set_nonblocking(&self, nonblocking: bool) -> std::io::Result<()>;
    /// Shuts down one or both directions.
    fn pump_shutdown(&self, how: Shutdown) -> std::io::Result<()>;
}

/// Runs the TLS handshake on `socket` (blocking, within the socket's own time limits).
/// A failure is told in words (`crate::tls_words`) for the `side` running the handshake.
pub fn complete_handshake<S: PumpSocket>(
    connection: &mut rustls::Connection,
    socket: &mut S,
    side: Side,
) -> Result<(), String> {
    while connection.is_handshaking() {
        if let Err(error) = connection.complete_io(socket) {
            // Alerts describing the failure go out if they can.
            let _ = connection.write_tls(socket);
            return Err(format!(
                "TLS handshake failed: {}",
                tls_words::describe_io_error(&error, side)
            ));
        }
    }
    Ok(())
}

/// Starts the pump thread on a connection whose handshake is complete and returns the
/// plaintext end. `write_limit` bounds how long the pump waits for a peer that does not
/// read.
pub fn start_pump<S: PumpSocket>(
    connection: rustls::Connection,
    socket: S,
    write_limit: Option<Duration>,
    thread_name: &str,
) -> Result<UnixStream, String> {
    let (plaintext_end, pump_end) =
        UnixStream::pair().map_err(|error| format!("cannot make a socketpair: {error}"))?;
    socket
        .pump_set_nonblocking(true)
        .and_then(|()| pump_end.set_nonblocking(true))
        .map_err(|error| format!("cannot make the sockets non-blocking: {error}"))?;
    let pump = Pump {
        connection,
        socket,
        plaintext: pump_end,
        write_limit,
    };
    std::thread::Builder::new()
        .name(thread_name.to_string())
        .spawn(move || pump.run())
        .map_err(|error| format!("cannot start the TLS pump thread: {error}"))?;
    Ok(plaintext_end)
}

/// `send(2)` with `MSG_NOSIGNAL` on the plaintext end (`flashpipe_base::socket`): a
/// closed peer is `EPIPE`, never `SIGPIPE`.
fn send_without_signal(socket: &UnixStream, buffer: &[u8]) -> std::io::Result<usize> {
    flashpipe_base::send_nosignal(socket.as_fd(), buffer)
}

/// Plaintext bytes moved per read.
const PUMP_CHUNK_BYTES: usize = 64 * 1024;

struct Pump<S: PumpSocket> {
    connection: rustls::Connection,
    socket: S,
    plaintext: UnixStream,
    write_limit: Option<Duration>,
}

/// What the pump still has to do in each direction.
#[derive(Default)]
struct PumpState {
    /// Decrypted bytes not yet written to the plaintext end.
    to_plaintext: Vec<u8>,
    /// Plaintext bytes read but not yet taken by rustls.
    to_tls: Vec<u8>,
    /// The client (or shutdown) ended the TLS read side.
    tls_read_closed: bool,
    /// End-of-file passed on to the plaintext end.
    plaintext_write_shut: bool,
    /// The server closed the plaintext end.
    plaintext_read_closed: bool,
}

fn would_block(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
    )
}

impl<S: PumpSocket> Pump<S> {
    fn run(mut self) {
        let mut state = PumpState::default();
        // An error in either direction ends the connection; there is no one to tell.
        let _ = self.pump(&mut state);
        let _ = self.socket.pump_shutdown(Shutdown::Both);
        let _ = self.plaintext.shutdown(Shutdown::Both);
    }

    fn pump(&mut self, state: &mut PumpState) -> std::io::Result<()> {
        let mut chunk = vec![0u8; PUMP_CHUNK_BYTES];
        // The handshake's last read may have brought the first records of data too.
        self.take_decrypted(state, &mut chunk)?;
        loop {
            self.move_plaintext(state, &mut chunk)?;
            if state.plaintext_read_closed
                && state.to_tls.is_empty()
                && !self.connection.wants_write()
            {
                return Ok(());
            }
            let want_socket_read = !state.tls_read_closed && state.to_plaintext.is_empty();
            let want_socket_write = self.connection.wants_write();
            let want_plaintext_read = !state.plaintext_read_closed && state.to_tls.is_empty();
            let want_plaintext_write = !state.to_plaintext.is_empty();
            let mut fds = [
                poll_entry(
                    self.socket.pump_raw_fd(),
                    want_socket_read,
                    want_socket_write,
                ),
                poll_entry(
                    self.plaintext.as_raw_fd(),
                    want_plaintext_read,
                    want_plaintext_write,
                ),
            ];
            let timeout_ms = match self.write_limit {
                Some(limit) if want_socket_write => {
                    i32::try_from(limit.as_millis()).unwrap_or(i32::MAX)
                }
                _ => -1,
            };
            // SAFETY: `fds` is a valid array of two pollfd for the duration of the call.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout_ms) };
            if ready < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(error);
            }
            if ready == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the TLS peer did not read within the write limit",
                ));
            }
            if fds[0].revents != 0 {
                self.socket_ready(state, &mut chunk, fds[0].revents)?;
            }
        }
    }

    /// Moves bytes between the plaintext end and rustls as far as they go without
    /// waiting.
    fn move_plaintext(&mut self, state: &mut PumpState, chunk: &mut [u8]) -> std::io::Result<()> {
        while !state.to_plaintext.is_empty() {
            match send_without_signal(&self.plaintext, &state.to_plaintext) {
                Ok(written) => {
                    state.to_plaintext.drain(..written);
                }
                Err(error) if would_block(&error) => break,
                Err(error) => return Err(error),
            }
        }
        if state.tls_read_closed && state.to_plaintext.is_empty() && !state.plaintext_write_shut {
            state.plaintext_write_shut = true;
            // The server may have closed its end already.
            let _ = self.plaintext.shutdown(Shutdown::Write);
        }
        // Feeding rustls and sending what it encrypted alternate until neither moves:
        // sending makes room for more plaintext.
        loop {
            let fed = self.feed_tls(state, chunk)?;
            let sent = self.send_tls()?;
            if !fed && !sent {
                break;
            }
        }
        Ok(())
    }

    /// Hands rustls plaintext from the plaintext end; true when anything moved.
    fn feed_tls(&mut self, state: &mut PumpState, chunk: &mut [u8]) -> std::io::Result<bool> {
        if !state.to_tls.is_empty() {
            let taken = self.connection.writer().write(&state.to_tls)?;
            state.to_tls.drain(..taken);
            return Ok(taken > 0);
        }
        if state.plaintext_read_closed {
            return Ok(false);
        }
        match self.plaintext.read(chunk) {
            Ok(0) => {
                state.plaintext_read_closed = true;
                self.connection.send_close_notify();
                Ok(true)
            }
            Ok(read) => {
                state.to_tls.extend_from_slice(&chunk[..read]);
                Ok(true)
            }
            Err(error) if would_block(&error) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Sends encrypted records to the socket until it would block; true when anything
    /// was sent.
    fn send_tls(&mut self) -> std::io::Result<bool> {
        let mut sent = false;
        while self.connection.wants_write() {
            match self.connection.write_tls(&mut self.socket) {
                Ok(0) => break,
                Ok(_) => sent = true,
                Err(error) if would_block(&error) => break,
                Err(error) => return Err(error),
            }
        }
        Ok(sent)
    }

    fn socket_ready(
        &mut self,
        state: &mut PumpState,
        chunk: &mut [u8],
        revents: libc::c_short,
    ) -> std::io::Result<()> {
        if state.tls_read_closed || revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) == 0 {
            return Ok(());
        }
        match self.connection.read_tls(&mut self.socket) {
            Ok(0) => state.tls_read_closed = true,
            Ok(_) => {}
            Err(error) if would_block(&error) => return Ok(()),
            Err(error) => return Err(error),
        }
        let processed = self.connection.process_new_packets();
        if let Err(error) = processed {
            let _ = self.connection.write_tls(&mut self.socket);
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, error));
        }
        self.take_decrypted(state, chunk)
    }

    /// Moves what rustls has decrypted into `state.to_plaintext`.
    fn take_decrypted(&mut self, state: &mut PumpState, chunk: &mut [u8]) -> std::io::Result<()> {
        loop {
            match self.connection.reader().read(chunk) {
                Ok(0) => {
                    state.tls_read_closed = true;
                    break;
                }
                Ok(read) => state.to_plaintext.extend_from_slice(&chunk[..read]),
                Err(error) if would_block(&error) => break,
                Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => {
                    state.tls_read_closed = true;
                    break;
                }
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }
}

fn poll_entry(fd: RawFd, read: bool, write: bool) -> libc::pollfd {
    let mut events = 0;
    if read {
        events |= libc::POLLIN;
    }
    if write {
        events |= libc::POLLOUT;
    }
    libc::pollfd {
        // A negative descriptor is ignored by poll: nothing wanted on this one.
        fd: if events == 0 { -1 } else { fd },
        events,
        revents: 0,
    }
}
