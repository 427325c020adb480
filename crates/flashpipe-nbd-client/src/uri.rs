//! NBD URIs (doc/uri.md of the NBD project): `nbd://host[:port]/export`,
//! `nbds://...` (TLS), `nbd+unix:///export?socket=PATH` and `nbds+unix://...`.
//!
//! The parser follows RFC 3986 as far as these URIs need it and refuses everything else
//! with the reason: a scheme other than the four, a fragment, a malformed
//! percent-escape, a character a URI may not hold, an export name that is not UTF-8 or
//! holds NUL or is longer than the protocol's 4096-byte string limit, a TCP URI without a
//! host, a Unix URI with an authority or without `socket=`, an unknown or repeated query
//! parameter (the URI specification asks for them to be diagnosed), and a socket path
//! longer than a Unix socket address holds. Scheme names are case-insensitive; the port
//! defaults to 10809 (IANA).
//!
//! TLS parameters (`tls-type`, `tls-hostname`, `tls-verify-peer`, `tls-certificates`,
//! `tls-psk-file`, `tls-username`) are parsed and checked. `nbds` and `nbds+unix` require
//! TLS with X.509 certificates (`client::tls`); [`NbdUri::require_supported`] refuses
//! what this client cannot do (TLS-PSK, anonymous TLS) with "not supported"; on the plain
//! schemes TLS is opportunistic and is not attempted. Two experimental parameters
//! of flashpipe's own: `x-block-size=BYTES` (a power of two from 512 to 65536) sets the
//! device block size the client uses over the export (default 4096), and
//! `x-connections=N` (1 to 16) the connections it opens to the export (multi-conn).

use std::fmt;
use std::path::PathBuf;

/// The IANA-assigned NBD port (10809), used when a TCP URI names none.
pub use flashpipe_nbd_wire::NBD_DEFAULT_PORT;

/// Longest URI accepted, in bytes.
pub const MAX_URI_BYTES: usize = 8192;

/// Longest export name (the protocol's string limit), in bytes after decoding.
pub const MAX_EXPORT_NAME_BYTES: usize = 4096;

/// Longest host name (DNS), in bytes.
pub const MAX_HOST_BYTES: usize = 253;

/// Longest Unix socket path: `sun_path` holds 108 bytes including the terminating NUL.
pub const MAX_SOCKET_PATH_BYTES: usize = 107;

/// Smallest and largest device block size `x-block-size` may ask for.
pub const BLOCK_SIZE_RANGE_BYTES: (u32, u32) = (512, 65536);

/// Where the server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NbdAddress {
    /// TCP: a host name or IP address (IPv6 without its brackets) and a port.
    Tcp {
        /// Host name or address.
        host: String,
        /// Port.
        port: u16,
    },
    /// A Unix domain socket by path.
    Unix {
        /// The socket's path.
        path: PathBuf,
    },
    /// A Unix domain socket in Linux's abstract namespace (`socket=%00name`).
    AbstractUnix {
        /// The name after the leading NUL.
        name: Vec<u8>,
    },
}

/// The TLS authentication method asked for by `tls-type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsType {
    /// Anonymous.
    Anon,
    /// X.509 certificates.
    X509,
    /// Pre-shared keys.
    Psk,
}

/// The TLS settings a URI carries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TlsSettings {
    /// Whether TLS is required (`nbds`, `nbds+unix`).
    pub required: bool,
    /// `tls-type`.
    pub tls_type: Option<TlsType>,
    /// `tls-hostname`.
    pub hostname: Option<String>,
    /// `tls-verify-peer` (`0` or `1`).
    pub verify_peer: Option<bool>,
    /// The authority's user information (only used by TLS authentication).
    pub user: Option<String>,
    /// `tls-certificates`: a folder laid out as GnuTLS tools expect (`ca-cert.pem`,
    /// `client-cert.pem`, `client-key.pem`).
    pub certificates_folder: Option<PathBuf>,
    /// `tls-psk-file` (TLS-PSK: not supported, refused when opened).
    pub psk_file: Option<PathBuf>,
    /// `tls-username` (TLS-PSK: not supported, refused when opened).
    pub username: Option<String>,
}

/// A parsed NBD URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NbdUri {
    text: String,
    /// Where the server listens.
    pub address: NbdAddress,
    /// The export's name (the path without its leading `/`, percent-decoded).
    pub export_name: String,
    /// TLS settings.
    pub tls: TlsSettings,
    /// `x-block-size`: the device block size asked for, if any.
    pub block_size_bytes: Option<u32>,
    /// `x-connections`: connections to open to the export (multi-conn), if given.
    pub connections: Option<u32>,
}

/// Why a text is not a usable NBD URI.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("NBD URI {uri:?}: {reason}")]
pub struct NbdUriError {
    /// The URI as given (cut to 200 characters).
    pub uri: String,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for NbdUri {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.text)
    }
}

/// Whether `text` starts with one of the NBD URI schemes (case-insensitive), so that a
/// device list can tell an NBD URI from a path.
pub fn looks_like_nbd_uri(text: &str) -> bool {
    let Some((scheme, _)) = text.split_once("://") else {
        return false;
    };
    Scheme::parse(scheme).is_some()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Nbd,
    Nbds,
    NbdUnix,
    NbdsUnix,
}

impl Scheme {
    fn parse(text: &str) -> Option<Scheme> {
        match text.to_ascii_lowercase().as_str() {
            "nbd" => Some(Scheme::Nbd),
            "nbds" => Some(Scheme::Nbds),
            "nbd+unix" => Some(Scheme::NbdUnix),
            "nbds+unix" => Some(Scheme::NbdsUnix),
            _ => None,
        }
    }

    fn is_unix(self) -> bool {
        matches!(self, Scheme::NbdUnix | Scheme::NbdsUnix)
    }

    fn requires_tls(self) -> bool {
        matches!(self, Scheme::Nbds | Scheme::NbdsUnix)
    }
}

impl NbdUri {
    /// Parses an NBD URI (see the module's documentation for what is refused).
    pub fn parse(text: &str) -> Result<NbdUri, NbdUriError> {
        let fail = |reason: String| NbdUriError {
            uri: text.chars().take(200).collect(),
            reason,
        };
        if text.len() > MAX_URI_BYTES {
            return Err(fail(format!(
                "{} bytes, more than the limit of {MAX_URI_BYTES}",
                text.len()
            )));
        }
        check_uri_characters(text).map_err(fail)?;
        let (scheme_text, rest) = text
            .split_once("://")
            .ok_or_else(|| fail("not a URI: no \"scheme://\"".to_string()))?;
        let scheme = Scheme::parse(scheme_text).ok_or_else(|| {
            fail(format!(
                "unknown scheme {scheme_text:?}: expected nbd, nbds, nbd+unix or nbds+unix"
            ))
        })?;
        if rest.contains('#') {
            return Err(fail(
                "a fragment (#...) has no meaning in an NBD URI".to_string(),
            ));
        }
        let (before_query, query) = match rest.split_once('?') {
            Some((before, query)) => (before, Some(query)),
            None => (rest, None),
        };
        let (authority, path) = match before_query.find('/') {
            Some(slash) => before_query.split_at(slash),
            None => (before_query, ""),
        };
        let export_name = parse_export_name(path).map_err(fail)?;
        let parameters = parse_query(query.unwrap_or("")).map_err(fail)?;
        let mut tls = TlsSettings {
            required: scheme.requires_tls(),
            ..TlsSettings::default()
        };
        let (user, host_port) = match authority.rsplit_once('@') {
            Some((user, host_port)) => (Some(user), host_port),
            None => (None, authority),
        };
        if let Some(user) = user {
            tls.user = Some(percent_decode_utf8(user, "user information").map_err(fail)?);
        }
        let mut socket = None;
        let mut block_size_bytes = None;
        let mut connections = None;
        for (key, value) in parameters {
            match key.as_str() {
                "socket" if scheme.is_unix() => socket = Some(value),
                "socket" => {
                    return Err(fail(
                        "socket= belongs to nbd+unix:// and nbds+unix:// URIs only".to_string(),
                    ))
                }
                "tls-type" => tls.tls_type = Some(parse_tls_type(&value).map_err(fail)?),
                "tls-hostname" => {
                    tls.hostname = Some(bytes_to_utf8(value, "tls-hostname").map_err(fail)?)
                }
                "tls-verify-peer" => {
                    tls.verify_peer = Some(match value.as_slice() {
                        b"0" | b"false" => false,
                        b"1" | b"true" => true,
                        _ => {
                            return Err(fail(
                                "tls-verify-peer is 0, 1, false or true".to_string(),
                            ))
                        }
                    })
                }
                "tls-certificates" => {
                    tls.certificates_folder = Some(parse_local_path(value, "tls-certificates").map_err(fail)?)
                }
                "tls-psk-file" => {
                    tls.psk_file = Some(parse_local_path(value, "tls-psk-file").map_err(fail)?)
                }
                "tls-username" => {
                    tls.username = Some(bytes_to_utf8(value, "tls-username").map_err(fail)?)
                }
                "x-block-size" => {
                    block_size_bytes = Some(parse_block_size(&value).map_err(fail)?)
                }
                "x-connections" => connections = Some(parse_connections(&value).map_err(fail)?),
                other => {
                    return Err(fail(format!(
                        "unknown query parameter {other:?} (known: socket, tls-type, tls-hostname, tls-verify-peer, tls-certificates, tls-psk-file, tls-username, x-block-size, x-connections)"
                    )))
                }
            }
        }
        let address = if scheme.is_unix() {
            if !host_port.is_empty() || user.is_some() {
                return Err(fail(format!(
                    "a Unix-socket URI has no host (found {authority:?}); write nbd+unix:///EXPORT?socket=PATH"
                )));
            }
            let socket =
                socket.ok_or_else(|| fail("a Unix-socket URI needs ?socket=PATH".to_string()))?;
            parse_socket(socket).map_err(fail)?
        } else {
            let (host, port) = parse_host_port(host_port).map_err(fail)?;
            NbdAddress::Tcp { host, port }
        };
        Ok(NbdUri {
            text: text.to_string(),
            address,
            export_name,
            tls,
            block_size_bytes,
            connections,
        })
    }

    /// Refuses what this build cannot connect to: TLS-PSK (`tls-type=psk`,
    /// `tls-psk-file`, `tls-username`) and anonymous TLS (`tls-type=anon`); rustls has
    /// neither.
    pub fn require_supported(&self) -> Result<(), NbdUriError> {
        let refuse = |what: &str| {
            Err(NbdUriError {
                uri: self.text.clone(),
                reason: format!(
                    "{what} is not supported: this client speaks TLS with X.509 certificates only (tls-certificates=DIR, tls-verify-peer, tls-hostname)"
                ),
            })
        };
        if !self.tls.required {
            return Ok(());
        }
        match self.tls.tls_type {
            Some(TlsType::Psk) => return refuse("TLS-PSK (tls-type=psk)"),
            Some(TlsType::Anon) => return refuse("anonymous TLS (tls-type=anon)"),
            Some(TlsType::X509) | None => {}
        }
        if self.tls.psk_file.is_some() {
            return refuse("TLS-PSK (tls-psk-file)");
        }
        if self.tls.username.is_some() {
            return refuse("TLS-PSK (tls-username)");
        }
        Ok(())
    }

    /// The URI as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// Only the characters RFC 3986 allows in a URI (unreserved, reserved and `%`).
fn check_uri_characters(text: &str) -> Result<(), String> {
    match text.char_indices().find(|&(_, character)| {
        !(character.is_ascii_alphanumeric() || "-._~:/?#[]@!$&'()*+,;=%".contains(character))
    }) {
        None => Ok(()),
        Some((index, character)) => Err(format!(
            "character {character:?} at byte {index} is not allowed in a URI (percent-encode it)"
        )),
    }
}

fn hex_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// Decodes `%HH` escapes; `what` names the component in errors.
fn percent_decode(text: &str, what: &str) -> Result<Vec<u8>, String> {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] != b'%' {
            decoded.push(bytes[index]);
            index += 1;
            continue;
        }
        let high = bytes.get(index + 1).copied().and_then(hex_value);
        let low = bytes.get(index + 2).copied().and_then(hex_value);
        match (high, low) {
            (Some(high), Some(low)) => decoded.push(high << 4 | low),
            _ => {
                return Err(format!(
                    "malformed percent-escape at byte {index} of the {what} (expected %HH)"
                ))
            }
        }
        index += 3;
    }
    Ok(decoded)
}

fn bytes_to_utf8(bytes: Vec<u8>, what: &str) -> Result<String, String> {
    String::from_utf8(bytes).map_err(|_| format!("the {what} is not valid UTF-8"))
}

fn percent_decode_utf8(text: &str, what: &str) -> Result<String, String> {
    bytes_to_utf8(percent_decode(text, what)?, what)
}

/// The path without its leading `/`, decoded: UTF-8, no NUL, at most 4096 bytes.
fn parse_export_name(path: &str) -> Result<String, String> {
    let raw = path.strip_prefix('/').unwrap_or(path);
    let name = percent_decode_utf8(raw, "export name")?;
    if name.contains('\0') {
        return Err("the export name holds a NUL character".to_string());
    }
    if name.len() > MAX_EXPORT_NAME_BYTES {
        return Err(format!(
            "the export name is {} bytes, more than the protocol's limit of {MAX_EXPORT_NAME_BYTES}",
            name.len()
        ));
    }
    Ok(name)
}

/// `key=value&key=value`, keys and values decoded; a repeated key is refused.
fn parse_query(query: &str) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut parameters: Vec<(String, Vec<u8>)> = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("query parameter {pair:?} has no value (expected key=value)"))?;
        let key = percent_decode_utf8(key, "query parameter name")?;
        if parameters.iter().any(|(known, _)| *known == key) {
            return Err(format!("query parameter {key:?} is given twice"));
        }
        parameters.push((key, percent_decode(value, "query parameter value")?));
    }
    Ok(parameters)
}

/// A local file or folder named by a query parameter: not empty, no NUL.
fn parse_local_path(value: Vec<u8>, what: &str) -> Result<PathBuf, String> {
    if value.is_empty() {
        return Err(format!("{what}= names no path"));
    }
    if value.contains(&0) {
        return Err(format!("the {what} path holds a NUL character"));
    }
    use std::os::unix::ffi::OsStringExt;
    Ok(PathBuf::from(std::ffi::OsString::from_vec(value)))
}

fn parse_tls_type(value: &[u8]) -> Result<TlsType, String> {
    match value {
        b"anon" => Ok(TlsType::Anon),
        b"x509" => Ok(TlsType::X509),
        b"psk" => Ok(TlsType::Psk),
        _ => Err("tls-type is anon, x509 or psk".to_string()),
    }
}

fn parse_block_size(value: &[u8]) -> Result<u32, String> {
    let (minimum, maximum) = BLOCK_SIZE_RANGE_BYTES;
    let refuse = || format!("x-block-size is a power of two from {minimum} to {maximum} bytes");
    let text = std::str::from_utf8(value).map_err(|_| refuse())?;
    let size: u32 = text.parse().map_err(|_| refuse())?;
    if !size.is_power_of_two() || !(minimum..=maximum).contains(&size) {
        return Err(refuse());
    }
    Ok(size)
}

/// Most connections `x-connections` may ask for.
pub const MAX_URI_CONNECTIONS: u32 = 16;

fn parse_connections(value: &[u8]) -> Result<u32, String> {
    let refuse = || format!("x-connections is a number from 1 to {MAX_URI_CONNECTIONS}");
    let text = std::str::from_utf8(value).map_err(|_| refuse())?;
    match text.parse::<u32>() {
        Ok(count @ 1..=MAX_URI_CONNECTIONS) if !text.starts_with('+') => Ok(count),
        _ => Err(refuse()),
    }
}

fn parse_socket(value: Vec<u8>) -> Result<NbdAddress, String> {
    if value.is_empty() {
        return Err("socket= names no socket".to_string());
    }
    if value.len() > MAX_SOCKET_PATH_BYTES {
        return Err(format!(
            "the socket path is {} bytes, more than a Unix socket address holds ({MAX_SOCKET_PATH_BYTES})",
            value.len()
        ));
    }
    if value[0] == 0 {
        let name = value[1..].to_vec();
        if name.contains(&0) {
            return Err("the abstract socket name holds a NUL character".to_string());
        }
        return Ok(NbdAddress::AbstractUnix { name });
    }
    if value.contains(&0) {
        return Err("the socket path holds a NUL character".to_string());
    }
    use std::os::unix::ffi::OsStringExt;
    Ok(NbdAddress::Unix {
        path: PathBuf::from(std::ffi::OsString::from_vec(value)),
    })
}

/// `host[:port]`, `[v6]:port`: the host is required, the port defaults to 10809.
fn parse_host_port(text: &str) -> Result<(String, u16), String> {
    let (host, port_text) = if let Some(bracketed) = text.strip_prefix('[') {
        let (literal, after) = bracketed
            .split_once(']')
            .ok_or_else(|| "an IPv6 address opened with [ is not closed with ]".to_string())?;
        literal
            .parse::<std::net::Ipv6Addr>()
            .map_err(|_| format!("[{literal}] is not an IPv6 address"))?;
        let port_text = match after {
            "" => None,
            _ => Some(after.strip_prefix(':').ok_or_else(|| {
                format!("unexpected {after:?} after the IPv6 address (expected :PORT)")
            })?),
        };
        (literal.to_string(), port_text)
    } else {
        let (host, port_text) = match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        };
        (check_host_name(host)?, port_text)
    };
    if host.is_empty() {
        return Err("a TCP URI needs a host: nbd://HOST[:PORT]/EXPORT".to_string());
    }
    let port = match port_text {
        None | Some("") => NBD_DEFAULT_PORT,
        Some(port) => parse_port(port)?,
    };
    Ok((host, port))
}

fn check_host_name(host: &str) -> Result<String, String> {
    if host.len() > MAX_HOST_BYTES {
        return Err(format!(
            "the host name is {} bytes, more than the limit of {MAX_HOST_BYTES}",
            host.len()
        ));
    }
    if let Some(bad) = host
        .chars()
        .find(|&character| !(character.is_ascii_alphanumeric() || "-._".contains(character)))
    {
        return Err(format!(
            "character {bad:?} is not allowed in a host name (letters, digits, '-', '.', '_'; IPv6 in [brackets])"
        ));
    }
    Ok(host.to_string())
}

fn parse_port(text: &str) -> Result<u16, String> {
    let refuse = || format!("port {text:?} is not a number from 1 to 65535");
    if text.is_empty() || text.len() > 5 || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(refuse());
    }
    match text.parse::<u32>() {
        Ok(port @ 1..=65535) => Ok(port as u16),
        _ => Err(refuse()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> NbdUri {
        NbdUri::parse(text).unwrap_or_else(|error| panic!("{text}: {error}"))
    }

    fn refused(text: &str, fragment: &str) {
        let error = NbdUri::parse(text).expect_err(text).to_string();
        assert!(
            error.contains(fragment),
            "{text}: error {error:?} lacks {fragment:?}"
        );
    }

    #[test]
    fn the_specification_s_export_name_examples_parse() {
        for (uri, name) in [
            ("nbd://example.com/disk", "disk"),
            ("nbd+unix:///disk?socket=sock", "disk"),
            ("nbd://example.com/", ""),
            ("nbd://example.com", ""),
            ("nbd://example.com//disk", "/disk"),
            ("nbd://example.com/hello%20world", "hello world"),
        ] {
            assert_eq!(parse(uri).export_name, name, "{uri}");
        }
    }

    #[test]
    fn addresses_and_ports() {
        let tcp_cases = [
            ("nbd://127.0.0.1:10810/disk0", "127.0.0.1", 10810),
            ("NBD://host/", "host", NBD_DEFAULT_PORT),
            ("nbd://[::1]:99/x", "::1", 99),
            ("nbd://host:/x", "host", NBD_DEFAULT_PORT),
        ];
        for (uri, host, port) in tcp_cases {
            let expected = NbdAddress::Tcp {
                host: host.into(),
                port,
            };
            assert_eq!(parse(uri).address, expected, "{uri}");
        }
        assert_eq!(
            parse("nbd+unix:///e?socket=/tmp/a%20b.sock").address,
            NbdAddress::Unix {
                path: PathBuf::from("/tmp/a b.sock")
            }
        );
        assert_eq!(
            parse("nbd+unix:///?socket=%00/abstract").address,
            NbdAddress::AbstractUnix {
                name: b"/abstract".to_vec()
            }
        );
        assert_eq!(
            parse("nbd://h/e?x-block-size=512").block_size_bytes,
            Some(512)
        );
        assert_eq!(parse("nbd://h/e?x-connections=4").connections, Some(4));
    }

    #[test]
    fn tls_uris_parse_and_psk_and_anonymous_tls_are_refused_as_unsupported() {
        let uri = parse("nbds://user@host/e?tls-type=x509&tls-hostname=h&tls-verify-peer=0");
        assert!(uri.tls.required);
        assert_eq!(uri.tls.tls_type, Some(TlsType::X509));
        assert_eq!(uri.tls.verify_peer, Some(false));
        assert_eq!(uri.tls.user.as_deref(), Some("user"));
        assert!(uri.require_supported().is_ok());
        let uri =
            parse("nbds+unix:///e?socket=s&tls-certificates=/etc/pki/x&tls-verify-peer=false");
        assert_eq!(
            uri.tls.certificates_folder.as_deref(),
            Some(std::path::Path::new("/etc/pki/x"))
        );
        assert_eq!(uri.tls.verify_peer, Some(false));
        assert!(uri.require_supported().is_ok());
        for unsupported in [
            "nbds://h/e?tls-type=psk",
            "nbds://h/e?tls-type=anon",
            "nbds://h/e?tls-psk-file=/k.psk",
            "nbds://h/e?tls-username=alice",
        ] {
            let error = parse(unsupported)
                .require_supported()
                .unwrap_err()
                .to_string();
            assert!(error.contains("not supported"), "{unsupported}: {error}");
        }
        assert!(parse("nbd://h/e").require_supported().is_ok());
    }

    #[test]
    fn hostile_uris_are_refused_with_the_reason() {
        refused("http://host/e", "unknown scheme");
        refused("nbd:host/e", "no \"scheme://\"");
        refused("nbd:///e", "needs a host");
        refused("nbd://host:0/e", "port \"0\"");
        refused("nbd://host:65536/e", "port");
        refused("nbd://host:-1/e", "port");
        refused("nbd://host:99999999999999999999/e", "port");
        refused("nbd://ho st/e", "not allowed in a URI");
        refused("nbd://host/e\n", "not allowed in a URI");
        refused("nbd://host/é", "not allowed in a URI");
        refused("nbd://host/e#frag", "fragment");
        refused("nbd://host/%zz", "percent-escape");
        refused("nbd://host/%4", "percent-escape");
        refused("nbd://host/%", "percent-escape");
        refused("nbd://host/a%00b", "NUL");
        refused("nbd://host/%ff%fe", "UTF-8");
        refused("nbd://[::1/e", "not closed");
        refused("nbd://[nonsense]/e", "not an IPv6 address");
        refused("nbd://[::1]x/e", "after the IPv6 address");
        refused("nbd://h%41st/e", "not allowed in a host name");
        refused("nbd://host/e?socket=/s", "nbd+unix");
        refused("nbd+unix:///e", "needs ?socket=PATH");
        refused("nbd+unix://host/e?socket=s", "has no host");
        refused("nbd+unix:///e?socket=", "names no socket");
        refused("nbd+unix:///e?socket=a%00b", "NUL");
        refused("nbd://host/e?colour=red", "unknown query parameter");
        refused("nbd://host/e?x-other=1", "unknown query parameter");
        refused("nbd://host/e?tls-type=magic", "tls-type");
        refused("nbd://host/e?tls-verify-peer=yes", "tls-verify-peer");
        refused("nbd://host/e?x-block-size=1000", "x-block-size");
        refused("nbd://host/e?x-block-size=256", "x-block-size");
        refused("nbd://host/e?x-block-size=131072", "x-block-size");
        refused("nbd://host/e?tls-type=psk&tls-type=anon", "twice");
        refused("nbd://host/e?x-connections=0", "x-connections");
        refused("nbd://host/e?x-connections=17", "x-connections");
        refused("nbd://host/e?x-connections=+2", "x-connections");
        refused("nbd://host/e?novalue", "no value");
        refused(&format!("nbd://host/{}", "a".repeat(5000)), "limit of 4096");
        refused(&format!("nbd://{}/e", "a".repeat(300)), "limit of 253");
        refused(&format!("nbd://host/{}", "a".repeat(9000)), "limit of 8192");
        refused(
            &format!("nbd+unix:///e?socket=/{}", "s".repeat(200)),
            "socket path",
        );
    }

    #[test]
    fn looks_like_tells_uris_from_paths() {
        assert!(looks_like_nbd_uri("nbd://h/e"));
        assert!(looks_like_nbd_uri("NBDS+UNIX:///e"));
        assert!(!looks_like_nbd_uri("disk.img"));
        assert!(!looks_like_nbd_uri("ram:1MiB"));
        assert!(!looks_like_nbd_uri("file://x"));
    }

    #[test]
    fn arbitrary_text_never_panics() {
        let mut random = flashpipe_base::SplitMix64::new(1);
        let alphabet = b"nbd+unix:/?#[]@%0aFz=&.-socket";
        for _ in 0..20_000 {
            let state = random.next_u64();
            let length = (state >> 58) as usize;
            let text: String = (0..length)
                .map(|index| {
                    let pick =
                        (state.rotate_left(index as u32 * 5) % alphabet.len() as u64) as usize;
                    alphabet[pick] as char
                })
                .collect();
            let _ = NbdUri::parse(&text);
            let _ = NbdUri::parse(&format!("nbd://{text}"));
            let _ = NbdUri::parse(&format!("nbd+unix:///{text}"));
        }
    }
}
