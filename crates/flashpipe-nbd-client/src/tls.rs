//! TLS for the NBD client (`nbds://`, `nbds+unix://`; doc/proto.md "TLS support"): the
//! rustls client configuration a URI asks for, and the upgrade of a connection after the
//! server acknowledged `NBD_OPT_STARTTLS`.
//!
//! What the URI says (doc/uri.md of the NBD project, with libnbd's `tls-certificates`):
//! - `tls-certificates=DIR`: a folder laid out as GnuTLS tools (libnbd, qemu, nbdkit)
//!   expect: `ca-cert.pem` (the authorities trusted for the server's certificate),
//!   `client-cert.pem` and `client-key.pem` (this client's certificate, sent when the
//!   server asks; both or neither). Without it the system's bundle is trusted
//!   (`/etc/ssl/certs/ca-certificates.crt` or `/etc/pki/tls/certs/ca-bundle.crt`).
//!   A server certificate byte-identical to one in `ca-cert.pem` is trusted by itself
//!   (pinned, as gnutls does), so a self-signed certificate made by `openssl req -x509`
//!   (a CA certificate, which chain verification refuses as a server's own) works when
//!   copied there; its name and dates are not checked, the handshake signature is (the
//!   server proves it holds the certificate's key). Any other certificate goes through
//!   normal chain verification against the trusted certificates;
//! - `tls-verify-peer=false`: the server's certificate is not checked (encryption
//!   without authentication of the server; handshake signatures are still checked);
//! - `tls-hostname=NAME`: the name checked against the server's certificate (and sent as
//!   SNI); by default the URI's host, or `localhost` for a Unix socket.
//!
//! After the handshake the connection runs through the pump of `flashpipe_nbd_wire::tls_pump`: the
//! device's reader and writer threads use the plaintext end (a `Stream::Tls`) as they
//! use any stream; a reconnect connects and upgrades again.

use std::net::Shutdown;
use std::os::unix::io::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::transport::Stream;
use crate::uri::{NbdAddress, NbdUri};
use flashpipe_nbd_wire::tls_pump::{self, PumpSocket};
use flashpipe_nbd_wire::tls_words::{self, Side};

/// System bundles of trusted authorities, used when the URI names no `tls-certificates`.
const SYSTEM_CA_BUNDLES: [&str; 2] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
];

/// How long the pump waits for a server that does not read what it is sent.
const TLS_WRITE_LIMIT: Duration = Duration::from_secs(30);

/// What a connection needs to upgrade: the configuration and the name to verify.
#[derive(Debug, Clone)]
pub(crate) struct ClientTlsSetup {
    config: Arc<rustls::ClientConfig>,
    server_name: ServerName<'static>,
}

/// The TLS setup a URI asks for: `None` for `nbd://` and `nbd+unix://`; an error naming
/// the file or setting at fault.
pub(crate) fn client_tls_for(uri: &NbdUri) -> Result<Option<ClientTlsSetup>, String> {
    if !uri.tls.required {
        return Ok(None);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|error| {
            format!(
                "TLS configuration refused: {}",
                tls_words::describe(&error, Side::Client)
            )
        })?;
    let verify_peer = uri.tls.verify_peer.unwrap_or(true);
    let folder = uri.tls.certificates_folder.as_deref();
    let trust = if verify_peer {
        Some(PinnedOrChain::new(
            trusted_certificates(folder)?,
            &provider,
        )?)
    } else {
        None
    };
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ServerVerifier { trust, provider }));
    let config = match folder.map(client_identity).transpose()?.flatten() {
        Some((chain, key)) => builder.with_client_auth_cert(chain, key).map_err(|error| {
            format!(
                "the client certificate is refused: {}",
                tls_words::describe(&error, Side::Client)
            )
        })?,
        None => builder.with_no_client_auth(),
    };
    Ok(Some(ClientTlsSetup {
        config: Arc::new(config),
        server_name: server_name(uri)?,
    }))
}

fn server_name(uri: &NbdUri) -> Result<ServerName<'static>, String> {
    let name = match (&uri.tls.hostname, &uri.address) {
        (Some(hostname), _) => hostname.clone(),
        (None, NbdAddress::Tcp { host, .. }) => host.clone(),
        (None, NbdAddress::Unix { .. } | NbdAddress::AbstractUnix { .. }) => {
            "localhost".to_string()
        }
    };
    ServerName::try_from(name.clone())
        .map_err(|_| format!("'{name}' is not a TLS server name (a DNS name or an IP address); give tls-hostname=NAME"))
}

fn read_pem_certificates(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certificates = CertificateDer::pem_file_iter(path)
        .and_then(|iterator| iterator.collect::<Result<Vec<_>, _>>())
        .map_err(|error| {
            format!(
                "cannot read {what} from {}: {}",
                path.display(),
                tls_words::describe_pem_error(&error)
            )
        })?;
    if certificates.is_empty() {
        return Err(format!(
            "{} holds no PEM certificate ({what})",
            path.display()
        ));
    }
    Ok(certificates)
}

/// The certificates of `DIR/ca-cert.pem`, or of the system's bundle when no folder is
/// given.
fn trusted_certificates(folder: Option<&Path>) -> Result<TrustedCertificates, String> {
    let path = match folder {
        Some(folder) => folder.join("ca-cert.pem"),
        None => SYSTEM_CA_BUNDLES
            .iter()
            .map(PathBuf::from)
            .find(|path| path.is_file())
            .ok_or_else(|| {
                format!(
                    "no tls-certificates=DIR in the URI and no system CA bundle ({}): name a folder holding ca-cert.pem, or tls-verify-peer=false",
                    SYSTEM_CA_BUNDLES.join(", ")
                )
            })?,
    };
    let certificates = read_pem_certificates(&path, "trusted CA")?;
    Ok(TrustedCertificates { path, certificates })
}

/// The certificates a user trusts, and the file they came from (for errors).
struct TrustedCertificates {
    path: PathBuf,
    certificates: Vec<CertificateDer<'static>>,
}

/// The server's certificate check under `tls-verify-peer` (the default): a server
/// certificate byte-identical to a trusted one is accepted by itself (pinned); any
/// other goes through webpki's chain verification against the trusted certificates
/// usable as authorities.
#[derive(Debug)]
struct PinnedOrChain {
    pinned: Vec<CertificateDer<'static>>,
    chain: Option<Arc<rustls::client::WebPkiServerVerifier>>,
}

/// The client's server verifier: with `trust`, the server certificate must pass
/// [`PinnedOrChain`]; without (`tls-verify-peer=false`), any server certificate is
/// accepted. Handshake signatures are always verified with the certificate the
/// server presented (they prove the server holds the key it presented).
#[derive(Debug)]
struct ServerVerifier {
    trust: Option<PinnedOrChain>,
    provider: Arc<CryptoProvider>,
}

impl PinnedOrChain {
    fn new(
        trusted: TrustedCertificates,
        provider: &Arc<CryptoProvider>,
    ) -> Result<PinnedOrChain, String> {
        assert!(
            !trusted.certificates.is_empty(),
            "read_pem_certificates refuses an empty file"
        );
        let mut roots = rustls::RootCertStore::empty();
        let (added, _ignored) = roots.add_parsable_certificates(trusted.certificates.clone());
        let chain = if added == 0 {
            None
        } else {
            let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots),
                Arc::clone(provider),
            )
            .build()
            .map_err(|_| format!("{} holds no usable CA certificate", trusted.path.display()))?;
            Some(verifier)
        };
        Ok(PinnedOrChain {
            pinned: trusted.certificates,
            chain,
        })
    }
}

impl ServerCertVerifier for ServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(trust) = &self.trust else {
            return Ok(ServerCertVerified::assertion());
        };
        if trust
            .pinned
            .iter()
            .any(|trusted| trusted.as_ref() == end_entity.as_ref())
        {
            return Ok(ServerCertVerified::assertion());
        }
        match &trust.chain {
            Some(chain) => {
                chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            }
            None => Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::UnknownIssuer,
            )),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            certificate,
            signature,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            certificate,
            signature,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

type ClientIdentity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// `DIR/client-cert.pem` and `DIR/client-key.pem` when both exist; one without the other
/// is an error.
fn client_identity(folder: &Path) -> Result<Option<ClientIdentity>, String> {
    let certificate_path = folder.join("client-cert.pem");
    let key_path = folder.join("client-key.pem");
    match (certificate_path.is_file(), key_path.is_file()) {
        (false, false) => Ok(None),
        (true, true) => {
            let chain = read_pem_certificates(&certificate_path, "client certificate")?;
            let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|error| {
                format!(
                    "cannot read the client key from {}: {}",
                    key_path.display(),
                    tls_words::describe_pem_error(&error)
                )
            })?;
            Ok(Some((chain, key)))
        }
        (true, false) => Err(format!(
            "{} exists without {}",
            certificate_path.display(),
            key_path.display()
        )),
        (false, true) => Err(format!(
            "{} exists without {}",
            key_path.display(),
            certificate_path.display()
        )),
    }
}

/// Runs the TLS handshake on `stream` (after the server's `NBD_REP_ACK` to
/// `NBD_OPT_STARTTLS`, within the stream's read timeout) and replaces it with the
/// plaintext end of a pump, which keeps that read timeout.
pub(crate) fn upgrade(stream: &mut Stream, setup: &ClientTlsSetup) -> Result<(), String> {
    let read_timeout = stream_read_timeout(stream);
    let mut socket = PumpedStream(
        stream
            .try_clone()
            .map_err(|error| format!("cannot take the socket for TLS: {error}"))?,
    );
    let client =
        rustls::ClientConnection::new(Arc::clone(&setup.config), setup.server_name.clone())
            .map_err(|error| {
                format!(
                    "cannot start TLS: {}",
                    tls_words::describe(&error, Side::Client)
                )
            })?;
    let mut connection = rustls::Connection::Client(client);
    tls_pump::complete_handshake(&mut connection, &mut socket, Side::Client)?;
    let plaintext =
        tls_pump::start_pump(connection, socket, Some(TLS_WRITE_LIMIT), "nbd-client-tls")?;
    plaintext
        .set_read_timeout(read_timeout)
        .map_err(|error| format!("cannot set the handshake timeout: {error}"))?;
    // The pump holds its own handle on the socket; this one closes without a shutdown.
    *stream = Stream::Tls(plaintext);
    Ok(())
}

fn stream_read_timeout(stream: &Stream) -> Option<Duration> {
    let timeout = match stream {
        Stream::Tcp(socket) => socket.read_timeout(),
        Stream::Unix(socket) | Stream::Tls(socket) => socket.read_timeout(),
    };
    timeout.ok().flatten()
}

/// The socket under a TLS connection, owned by the pump.
struct PumpedStream(Stream);

impl std::io::Read for PumpedStream {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buffer)
    }
}

impl std::io::Write for PumpedStream {
    fn write(&mut self, buffer: &[u8]) -> std::io::Result<usize> {
        self.0.write(buffer)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl PumpSocket for PumpedStream {
    fn pump_raw_fd(&self) -> RawFd {
        match &self.0 {
            Stream::Tcp(socket) => socket.as_raw_fd(),
            Stream::Unix(socket) | Stream::Tls(socket) => socket.as_raw_fd(),
        }
    }
    fn pump_set_nonblocking(&self, nonblocking: bool) -> std::io::Result<()> {
        match &self.0 {
            Stream::Tcp(socket) => socket.set_nonblocking(nonblocking),
            Stream::Unix(socket) | Stream::Tls(socket) => socket.set_nonblocking(nonblocking),
        }
    }
    fn pump_shutdown(&self, _how: Shutdown) -> std::io::Result<()> {
        self.0.shutdown();
        Ok(())
    }
}
