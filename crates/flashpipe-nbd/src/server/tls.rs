//! TLS for the NBD server (doc/proto.md, "TLS support"): certificates loaded into a
//! `rustls::ServerConfig`, and the upgrade of a connection after `NBD_OPT_STARTTLS`.
//!
//! After the TLS handshake, one pump thread (`flashpipe_nbd_wire::tls_pump`, shared with the client)
//! owns the `rustls::ServerConnection` and the socket and relays plaintext to and from
//! one end of a Unix socketpair. The other end is an ordinary [`NbdStream`] (a
//! `UnixStream`): the rest of the handshake and transmission run on it unchanged, with
//! their clones, time limits and shutdowns. The alternative (one `ServerConnection`
//! behind a mutex shared by reader and writer over a non-blocking socket) needs its own
//! wake-ups between the two threads and touches the reader and writer. The client
//! closing TCP (or the server shutting its read side at shutdown) becomes end-of-file
//! on the plaintext end; the server closing the plaintext end becomes a TLS
//! close_notify. A client that stops reading for longer than the write limit ends the
//! pump.
//!
//! TLS-PSK is not supported (rustls has no PSK cipher suites); clients are admitted by
//! client certificates signed by a given certificate authority.

use std::net::Shutdown;
use std::os::unix::io::RawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use thiserror::Error;

use super::NbdStream;
use flashpipe_nbd_wire::tls_pump::{self, PumpSocket};
use flashpipe_nbd_wire::tls_words::{describe, describe_pem_error, Side};

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
        .map_err(|error| pem_error(describe_pem_error(&error)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| pem_error(describe_pem_error(&error)))?;
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
        detail: describe_pem_error(&error),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|error| TlsSetupError::Rustls(describe(&error, Side::Server)))?;
    let builder = match client_ca_path {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for certificate in read_certificates(path, "client CA")? {
                roots.add(certificate).map_err(|error| TlsSetupError::Pem {
                    what: "client CA",
                    path: path.to_path_buf(),
                    detail: describe(&error, Side::Server),
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
        .map_err(|error| TlsSetupError::Rustls(describe(&error, Side::Server)))?;
    Ok(Arc::new(config))
}

/// Runs the TLS handshake on `socket` (blocking; the runtime's handshake deadline shuts
/// the socket under a client that stalls it), then
/// starts the pump thread (`flashpipe_nbd_wire::tls_pump`) and returns the plaintext end.
/// `write_limit` bounds how long the pump waits for a client that does not read.
pub fn upgrade(
    socket: Box<dyn NbdStream>,
    config: &Arc<rustls::ServerConfig>,
    write_limit: Option<Duration>,
) -> Result<Box<dyn NbdStream>, String> {
    let mut socket = socket;
    let mut connection = rustls::Connection::Server(
        rustls::ServerConnection::new(Arc::clone(config))
            .map_err(|error| format!("cannot start TLS: {}", describe(&error, Side::Server)))?,
    );
    tls_pump::complete_handshake(&mut connection, &mut socket, Side::Server)?;
    let plaintext_end = tls_pump::start_pump(connection, socket, write_limit, "nbd-tls-pump")?;
    Ok(Box::new(plaintext_end))
}

impl PumpSocket for Box<dyn NbdStream> {
    fn pump_raw_fd(&self) -> RawFd {
        self.raw_fd()
    }
    fn pump_set_nonblocking(&self, nonblocking: bool) -> std::io::Result<()> {
        self.set_nonblocking_stream(nonblocking)
    }
    fn pump_shutdown(&self, how: Shutdown) -> std::io::Result<()> {
        self.shutdown_stream(how)
    }
}
