//! TLS for the NBD server (doc/proto.md, "TLS support"): certificates loaded into a
//! `rustls::ServerConfig`, and the upgrade of a connection after `NBD_OPT_STARTTLS`.
//!
//! Why a pump thread: the server reads requests on the connection's thread and writes
//! replies on a writer thread, each with its own handle to the socket. A rustls
//! connection is one state machine for both directions (`StreamOwned` cannot be split),
//! so after the TLS handshake one pump thread owns the `rustls::ServerConnection` and
//! the socket (non-blocking), and relays plaintext to and from one end of a Unix
//! socketpair. The other end is an ordinary [`NbdStream`] (a `UnixStream`): the rest of
//! the handshake and transmission run on it unchanged, with their clones, time limits
//! and shutdowns. The alternative (one `ServerConnection` behind a mutex shared by
//! reader and writer over a non-blocking socket) needs its own wake-ups between the two
//! threads and touches the reader and writer; the pump keeps every other module as it
//! was at the cost of one thread and one local copy per connection.
//!
//! Ends: the client closing TCP (or the server shutting its read side at shutdown)
//! becomes end-of-file on the plaintext end after what was received is delivered; the
//! server closing the plaintext end becomes a TLS close_notify after what it wrote is
//! sent. A client that stops reading for longer than the write limit ends the pump.
//!
//! TLS-PSK is not supported (rustls has no PSK cipher suites); clients are admitted by
//! client certificates signed by a given certificate authority.

use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::io::RawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use thiserror::Error;

use super::NbdStream;

/// Whether clients must upgrade to TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// FORCEDTLS: every option but `NBD_OPT_STARTTLS` and `NBD_OPT_ABORT` before TLS is
    /// answered `NBD_REP_ERR_TLS_REQD`; `NBD_OPT_EXPORT_NAME` before TLS ends the
    /// connection.
    Required,
    /// SELECTIVETLS with no TLS-only export: `NBD_OPT_STARTTLS` is accepted, plaintext
    /// clients are served too.
    Optional,
}

/// TLS settings of a server.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// The rustls configuration (certificate, key, client verifier).
    pub rustls_config: Arc<rustls::ServerConfig>,
    /// Required or optional.
    pub mode: TlsMode,
}

/// Why the TLS settings could not be loaded.
#[derive(Debug, Error)]
pub enum TlsSetupError {
    /// A PEM file could not be read or parsed.
    #[error("cannot read {what} from {path}: {detail}")]
    Pem {
        /// Which file (certificate, key, client CA).
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A PEM file held no certificate.
    #[error("{path} holds no PEM certificate ({what})")]
    NoCertificate {
        /// Which file.
        what: &'static str,
        /// The path.
        path: PathBuf,
    },
    /// rustls refused the combination.
    #[error("TLS configuration refused: {0}")]
    Rustls(String),
}

fn read_certificates(
    path: &Path,
    what: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let pem_error = |detail: String| TlsSetupError::Pem {
        what,
        path: path.to_path_buf(),
        detail,
    };
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|error| pem_error(error.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| pem_error(error.to_string()))?;
    if certificates.is_empty() {
        return Err(TlsSetupError::NoCertificate {
            what,
            path: path.to_path_buf(),
        });
    }
    Ok(certificates)
}

/// Loads a server certificate chain and its private key (PEM), and when
/// `client_ca_path` is given, admits only clients with a certificate signed by it.
pub fn load_rustls_config(
    certificate_path: &Path,
    key_path: &Path,
    client_ca_path: Option<&Path>,
) -> Result<Arc<rustls::ServerConfig>, TlsSetupError> {
    let chain = read_certificates(certificate_path, "server certificate")?;
    let key = PrivateKeyDer::from_pem_file(key_path).map_err(|error| TlsSetupError::Pem {
        what: "private key",
        path: key_path.to_path_buf(),
        detail: error.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|error| TlsSetupError::Rustls(error.to_string()))?;
    let builder = match client_ca_path {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for certificate in read_certificates(path, "client CA")? {
                roots.add(certificate).map_err(|error| TlsSetupError::Pem {
                    what: "client CA",
                    path: path.to_path_buf(),
                    detail: error.to_string(),
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|error| TlsSetupError::Rustls(error.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|error| TlsSetupError::Rustls(error.to_string()))?;
    Ok(Arc::new(config))
}

/// Runs the TLS handshake on `socket` (blocking, within the socket's read limit), then
/// starts the pump thread and returns the plaintext end. `write_limit` bounds how long
/// the pump waits for a client that does not read.
pub fn upgrade(
    socket: Box<dyn NbdStream>,
    config: &Arc<rustls::ServerConfig>,
    write_limit: Option<Duration>,
) -> Result<Box<dyn NbdStream>, String> {
    let mut socket = socket;
    let mut connection = rustls::ServerConnection::new(Arc::clone(config))
        .map_err(|error| format!("cannot start TLS: {error}"))?;
    while connection.is_handshaking() {
        if let Err(error) = connection.complete_io(&mut socket) {
            // Alerts describing the failure go out if they can.
            let _ = connection.write_tls(&mut socket);
            return Err(format!("TLS handshake failed: {error}"));
        }
    }
    let (plaintext_end, pump_end) =
        UnixStream::pair().map_err(|error| format!("cannot make a socketpair: {error}"))?;
    socket
        .set_nonblocking_stream(true)
        .and_then(|()| pump_end.set_nonblocking(true))
        .map_err(|error| format!("cannot make the sockets non-blocking: {error}"))?;
    let pump = Pump {
        connection,
        socket,
        plaintext: pump_end,
        write_limit,
    };
    std::thread::Builder::new()
        .name("nbd-tls-pump".to_string())
        .spawn(move || pump.run())
        .map_err(|error| format!("cannot start the TLS pump thread: {error}"))?;
    Ok(Box::new(plaintext_end))
}

/// Plaintext bytes moved per read.
const PUMP_CHUNK_BYTES: usize = 64 * 1024;

struct Pump {
    connection: rustls::ServerConnection,
    socket: Box<dyn NbdStream>,
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

impl Pump {
    fn run(mut self) {
        let mut state = PumpState::default();
        // An error in either direction ends the connection; there is no one to tell.
        let _ = self.pump(&mut state);
        let _ = self.socket.shutdown_stream(Shutdown::Both);
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
                poll_entry(self.socket.raw_fd(), want_socket_read, want_socket_write),
                poll_entry(
                    std::os::unix::io::AsRawFd::as_raw_fd(&self.plaintext),
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
                    "the TLS client did not read within the write limit",
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
            match self.plaintext.write(&state.to_plaintext) {
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
