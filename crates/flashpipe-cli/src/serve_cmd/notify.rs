//! The systemd readiness protocol (`sd_notify`), written by hand: when `$NOTIFY_SOCKET`
//! names a Unix datagram socket (a path, or an abstract name written with a leading `@`),
//! the server sends it `READY=1` once it accepts clients and `STOPPING=1` when it begins
//! to stop.
//!
//! Why no crate: the protocol is one datagram of a few bytes to an address taken from
//! the environment, and std's `UnixDatagram` sends it, abstract names included
//! (`SocketAddrExt::from_abstract_name`); the `sd-notify` and `libsystemd` crates would add
//! a dependency (and, for the latter, a large one) for these twenty lines, and neither
//! does anything more that this server needs (no watchdog, no file-descriptor store).

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// The environment variable a service manager sets to ask for notifications.
pub const NOTIFY_SOCKET_VARIABLE: &str = "NOTIFY_SOCKET";

/// Why a notification could not be sent (the server keeps running: it is only logged).
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// `$NOTIFY_SOCKET` is set but empty, or is neither an absolute path nor `@name`.
    #[error("${NOTIFY_SOCKET_VARIABLE} is \"{value}\": neither an absolute path nor an abstract name starting with @")]
    BadAddress {
        /// The variable's value.
        value: String,
    },
    /// The datagram could not be sent.
    #[error("sending {message} to ${NOTIFY_SOCKET_VARIABLE} \"{address}\": {source}")]
    Send {
        /// What was being sent.
        message: String,
        /// The variable's value.
        address: String,
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// Sends `message` (e.g. `READY=1`) to the socket `$NOTIFY_SOCKET` names. Returns
/// `Ok(false)` when the variable is not set (nobody asked), `Ok(true)` when sent.
pub fn notify(message: &str) -> Result<bool, NotifyError> {
    match std::env::var(NOTIFY_SOCKET_VARIABLE) {
        Ok(address) => send_notification(&address, message).map(|()| true),
        Err(_) => Ok(false),
    }
}

/// Sends `message` as one datagram to `address` (`/path` or `@abstract-name`).
pub fn send_notification(address: &str, message: &str) -> Result<(), NotifyError> {
    let socket_address = parse_notify_address(address)?;
    let send_error = |source| NotifyError::Send {
        message: message.to_string(),
        address: address.to_string(),
        source,
    };
    let socket = UnixDatagram::unbound().map_err(send_error)?;
    socket
        .send_to_addr(message.as_bytes(), &socket_address)
        .map_err(send_error)?;
    Ok(())
}

/// The socket address `$NOTIFY_SOCKET` names: `@name` is Linux's abstract namespace, a
/// value starting with `/` a path.
fn parse_notify_address(address: &str) -> Result<SocketAddr, NotifyError> {
    let bad_address = || NotifyError::BadAddress {
        value: address.to_string(),
    };
    if let Some(name) = address.strip_prefix('@') {
        if name.is_empty() {
            return Err(bad_address());
        }
        return SocketAddr::from_abstract_name(name.as_bytes()).map_err(|_| bad_address());
    }
    if !address.starts_with('/') {
        return Err(bad_address());
    }
    SocketAddr::from_pathname(address).map_err(|_| bad_address())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_socket_receives_the_datagram() {
        let folder = std::env::temp_dir().join(format!("flashpipe-notify-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        let path = folder.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let receiver = UnixDatagram::bind(&path).unwrap();
        send_notification(path.to_str().unwrap(), "READY=1").unwrap();
        let mut buffer = [0u8; 64];
        let length = receiver.recv(&mut buffer).unwrap();
        assert_eq!(&buffer[..length], b"READY=1");
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn an_abstract_socket_receives_the_datagram() {
        let name = format!("flashpipe-notify-test-{}", std::process::id());
        let address = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let receiver = UnixDatagram::bind_addr(&address).unwrap();
        send_notification(&format!("@{name}"), "STOPPING=1").unwrap();
        let mut buffer = [0u8; 64];
        let length = receiver.recv(&mut buffer).unwrap();
        assert_eq!(&buffer[..length], b"STOPPING=1");
    }

    #[test]
    fn relative_and_empty_addresses_are_refused() {
        for address in ["", "@", "relative/path"] {
            let error = send_notification(address, "READY=1").unwrap_err();
            assert!(
                matches!(error, NotifyError::BadAddress { .. }),
                "{address:?}: {error}"
            );
        }
    }
}
