//! The two sockets a cluster connection opens over, TCP and a node's Unix socket (for a
//! shared-memory link), as one trait: the hello and the key proof run over either
//! unchanged, with the same timeouts.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// A socket the hello and the key proof run over.
pub trait SetupStream: Read + Write {
    /// Sets how long one read may wait (`None`: for ever).
    fn set_setup_timeout(&self, timeout: Option<Duration>) -> io::Result<()>;
}

impl SetupStream for TcpStream {
    fn set_setup_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(timeout)
    }
}

impl SetupStream for UnixStream {
    fn set_setup_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(timeout)
    }
}
