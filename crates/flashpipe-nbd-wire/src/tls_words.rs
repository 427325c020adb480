//! Words for TLS failures: every `rustls` error (and the certificate-path errors of
//! `webpki` it carries) turned into a sentence saying what is wrong and what to do, for
//! the NBD client and server alike. rustls's own `Display` falls back to Rust `Debug`
//! text for some errors (`Other(OtherError(CaUsedAsEndEntity))`), which no user should
//! have to decode.

use rustls::{AlertDescription, CertificateError, Error};

/// Which end of the connection the words are for: it decides whose certificate "the
/// peer's" is and which option fixes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The NBD client (`nbds://` URIs): the peer is the server.
    Client,
    /// The NBD server (`--tls-certificate`): the peer is a client.
    Server,
}

impl Side {
    fn peer(self) -> &'static str {
        match self {
            Side::Client => "the server's certificate",
            Side::Server => "the client's certificate",
        }
    }

    fn trust_hint(self) -> &'static str {
        match self {
            Side::Client => "put the certificate authority that signed it, or the server's own certificate, in ca-cert.pem of the URI's tls-certificates folder",
            Side::Server => "give --tls-client-ca the certificate authority that signed the client's certificate",
        }
    }
}

/// The sentence for an I/O error of a handshake: the rustls error inside it when it
/// holds one, its own words otherwise.
pub fn describe_io_error(error: &std::io::Error, side: Side) -> String {
    match error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<Error>())
    {
        Some(tls_error) => describe(tls_error, side),
        None => match error.kind() {
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
                "the peer did not answer the TLS handshake in time".to_string()
            }
            std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset => {
                "the peer closed the connection during the TLS handshake (it may require TLS settings this end lacks, such as a client certificate)".to_string()
            }
            _ => format!("the connection failed during the TLS handshake: {error}"),
        },
    }
}

/// The sentence for one rustls error.
pub fn describe(error: &Error, side: Side) -> String {
    match error {
        Error::InvalidCertificate(certificate) => describe_certificate(certificate, side),
        Error::NoCertificatesPresented => format!(
            "the peer presented no certificate; {}",
            match side {
                Side::Client => "the server must be given a certificate",
                Side::Server => "this server requires a client certificate (client-cert.pem and client-key.pem in the client's tls-certificates folder)",
            }
        ),
        Error::AlertReceived(alert) => describe_alert(*alert, side),
        Error::PeerIncompatible(_) => "the peer supports no TLS version, cipher suite or signature scheme in common with flashpipe (TLS 1.2 or 1.3 with modern ciphers); update the peer's TLS settings".to_string(),
        Error::PeerMisbehaved(_)
        | Error::InappropriateMessage { .. }
        | Error::InappropriateHandshakeMessage { .. }
        | Error::InvalidMessage(_)
        | Error::PeerSentOversizedRecord => "the peer broke the TLS protocol (it may not speak TLS on this port, or a device in between alters the traffic)".to_string(),
        Error::DecryptError => "a TLS record failed its integrity check: the connection was altered in transit or the peer is faulty".to_string(),
        Error::InconsistentKeys(_) => "the private key does not belong to the certificate it was given with; give the key made with that certificate".to_string(),
        Error::FailedToGetCurrentTime => "the system clock could not be read to check certificate dates".to_string(),
        Error::FailedToGetRandomBytes => "the system gave no random bytes for TLS".to_string(),
        Error::HandshakeNotComplete => "the TLS handshake did not complete".to_string(),
        Error::NoApplicationProtocol => "the peer offered no application protocol flashpipe speaks".to_string(),
        Error::UnsupportedNameType => "the TLS server name is neither a DNS name nor an IP address; give tls-hostname=NAME".to_string(),
        Error::InvalidCertRevocationList(_) => "a certificate revocation list is invalid".to_string(),
        Error::General(text) => format!("TLS failed: {text}"),
        _ => "the TLS handshake failed for a reason rustls does not name; check both ends' certificates and TLS settings".to_string(),
    }
}

fn describe_certificate(error: &CertificateError, side: Side) -> String {
    let peer = side.peer();
    match error {
        CertificateError::BadEncoding => {
            format!("{peer} is not a well-formed X.509 certificate")
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => format!(
            "{peer} has expired; renew it (or check this machine's clock)"
        ),
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => format!(
            "{peer} is not valid yet; check this machine's clock, or the certificate's start date"
        ),
        CertificateError::Revoked => format!("{peer} has been revoked"),
        CertificateError::UnknownIssuer => format!(
            "{peer} is not signed by a certificate authority this end trusts; {}",
            side.trust_hint()
        ),
        CertificateError::BadSignature => format!(
            "{peer} carries a signature that does not verify: it was not signed by the authority it names"
        ),
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            format!(
                "{peer} is not valid for the name connected to (its subject alternative names do not include it); connect by a name it holds, or give tls-hostname=NAME with one"
            )
        }
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            format!("{peer} is not allowed for this use (its extended key usage excludes it)")
        }
        CertificateError::UnhandledCriticalExtension => {
            format!("{peer} has a critical extension flashpipe cannot check")
        }
        CertificateError::Other(other) => describe_webpki(other.0.as_ref(), side),
        _ => format!("{peer} is refused; {}", side.trust_hint()),
    }
}

fn describe_webpki(error: &(dyn std::error::Error + Send + Sync + 'static), side: Side) -> String {
    let peer = side.peer();
    let Some(error) = error.downcast_ref::<webpki::Error>() else {
        return format!("{peer} is refused: {error}");
    };
    match error {
        webpki::Error::CaUsedAsEndEntity => match side {
            Side::Client => format!(
                "{peer} is a certificate authority's certificate (basic constraints CA:TRUE, as `openssl req -x509` makes), which chain verification refuses as a server's own; put that exact certificate in ca-cert.pem of the URI's tls-certificates folder to trust it by itself (pinned), or give the server a certificate signed by a CA"
            ),
            Side::Server => format!(
                "{peer} is a certificate authority's certificate (CA:TRUE), refused as a client's own; give the client a certificate signed by the CA of --tls-client-ca"
            ),
        },
        webpki::Error::EndEntityUsedAsCa => format!(
            "{peer} chain uses an end-entity certificate as an authority; {}",
            side.trust_hint()
        ),
        webpki::Error::UnsupportedSignatureAlgorithmContext(_)
        | webpki::Error::UnsupportedSignatureAlgorithmForPublicKeyContext(_) => {
            format!("{peer} is signed with an algorithm flashpipe does not accept")
        }
        webpki::Error::PathLenConstraintViolated | webpki::Error::MaximumPathDepthExceeded => {
            format!("{peer} chain is too long")
        }
        webpki::Error::RequiredEkuNotFoundContext(_) => format!(
            "{peer} lacks the extended key usage for this end (serverAuth or clientAuth)"
        ),
        _ => format!("{peer} is refused; {}", side.trust_hint()),
    }
}

fn describe_alert(alert: AlertDescription, side: Side) -> String {
    let peer = match side {
        Side::Client => "the server",
        Side::Server => "the client",
    };
    match alert {
        AlertDescription::CertificateRequired => format!(
            "{peer} requires a client certificate; put client-cert.pem and client-key.pem in the URI's tls-certificates folder"
        ),
        AlertDescription::UnknownCA
        | AlertDescription::BadCertificate
        | AlertDescription::CertificateUnknown
        | AlertDescription::UnsupportedCertificate => format!(
            "{peer} refused this end's certificate (it does not trust the authority that signed it)"
        ),
        AlertDescription::CertificateExpired => {
            format!("{peer} says this end's certificate has expired")
        }
        AlertDescription::CertificateRevoked => {
            format!("{peer} says this end's certificate is revoked")
        }
        AlertDescription::HandshakeFailure | AlertDescription::InsufficientSecurity => format!(
            "{peer} ended the TLS handshake: no TLS version or cipher suite in common, or it refused this end's certificate"
        ),
        AlertDescription::ProtocolVersion => {
            format!("{peer} supports no TLS version flashpipe speaks (TLS 1.2 or 1.3)")
        }
        AlertDescription::AccessDenied => format!("{peer} denied access"),
        AlertDescription::DecryptError => format!(
            "{peer} could not verify this end's handshake signature (wrong private key for the certificate?)"
        ),
        _ => format!("{peer} ended the TLS handshake with an alert"),
    }
}

/// The sentence for a PEM file that cannot be read or parsed (rustls-pki-types shows
/// the bytes of a missing end marker as a Rust list).
pub fn describe_pem_error(error: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error as PemError;
    match error {
        PemError::MissingSectionEnd { .. } => {
            "a PEM section has no END line (the file is cut short or damaged)".to_string()
        }
        PemError::IllegalSectionStart { .. } => {
            "a PEM section's BEGIN line is malformed".to_string()
        }
        PemError::Base64Decode(_) => {
            "a PEM section's body is not valid base64 (the file is damaged)".to_string()
        }
        PemError::Io(io) => io.to_string(),
        PemError::NoItemsFound => "it holds no PEM item of the kind needed".to_string(),
        PemError::SectionTooLarge => "a PEM section is larger than 256 MB".to_string(),
        _ => "it is not a PEM file flashpipe can read".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_word_is_rust_debug_text() {
        let cases = [
            Error::InvalidCertificate(CertificateError::UnknownIssuer),
            Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(
                std::sync::Arc::new(webpki::Error::CaUsedAsEndEntity),
            ))),
            Error::AlertReceived(AlertDescription::CertificateRequired),
            Error::NoCertificatesPresented,
            Error::DecryptError,
        ];
        for error in &cases {
            for side in [Side::Client, Side::Server] {
                let text = describe(error, side);
                assert!(!text.contains("CaUsedAsEndEntity"), "{text}");
                assert!(!text.contains('{') && !text.contains("Other("), "{text}");
                assert!(text.len() > 20, "{text}");
            }
        }
    }
}
