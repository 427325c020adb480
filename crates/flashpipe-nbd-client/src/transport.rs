//! The byte stream under an NBD connection: TCP (Nagle off, as the specification asks)
//! or a Unix domain socket (by path or in Linux's abstract namespace), or, after
//! `NBD_OPT_STARTTLS`, the plaintext end of the TLS pump (`client::tls`).
//!
//! Writes never raise `SIGPIPE`: a server that died must become an error the device can
//! recover from, not the end of a process that restored the default `SIGPIPE` action (as
//! the `flashpipe` binary does). TCP writes go through `send(MSG_NOSIGNAL)` in the
//! standard library already; Unix-socket writes through `flashpipe_base::socket`.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::uri::NbdAddress;

/// A connected stream.
#[derive(Debug)]
pub(crate) enum Stream {
    /// TCP.
    Tcp(TcpStream),
    /// A Unix domain socket.
    Unix(UnixStream),
    /// TLS: the plaintext end of the pump thread that owns the socket.
    Tls(UnixStream),
}

impl Stream {
    /// Connects to `address`, giving up on one TCP address after `timeout`.
    pub(crate) fn connect(address: &NbdAddress, timeout: Duration) -> std::io::Result<Stream> {
        match address {
            NbdAddress::Tcp { host, port } => {
                let mut last_error = None;
                for socket_address in (host.as_str(), *port).to_socket_addrs()? {
                    match TcpStream::connect_timeout(&socket_address, timeout) {
                        Ok(stream) => {
                            stream.set_nodelay(true)?;
                            return Ok(Stream::Tcp(stream));
                        }
                        Err(error) => last_error = Some(error),
                    }
                }
                Err(last_error.unwrap_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!("host {host} has no address"),
                    )
                }))
            }
            NbdAddress::Unix { path } => Ok(Stream::Unix(UnixStream::connect(path)?)),
            NbdAddress::AbstractUnix { name } => {
                use std::os::linux::net::SocketAddrExt;
                let socket_address = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                Ok(Stream::Unix(UnixStream::connect_addr(&socket_address)?))
            }
        }
    }

    /// A second handle on the same connection (one thread reads, one writes).
    pub(crate) fn try_clone(&self) -> std::io::Result<Stream> {
        match self {
            Stream::Tcp(stream) => stream.try_clone().map(Stream::Tcp),
            Stream::Unix(stream) => stream.try_clone().map(Stream::Unix),
            Stream::Tls(stream) => stream.try_clone().map(Stream::Tls),
        }
    }

    /// Ends the connection both ways, waking a thread blocked on it.
    pub(crate) fn shutdown(&self) {
        let _ = match self {
            Stream::Tcp(stream) => stream.shutdown(Shutdown::Both),
            Stream::Unix(stream) | Stream::Tls(stream) => stream.shutdown(Shutdown::Both),
        };
    }

    /// Bounds every read (the handshake) or lifts the bound (`None`, transmission).
    pub(crate) fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Tcp(stream) => stream.set_read_timeout(timeout),
            Stream::Unix(stream) | Stream::Tls(stream) => stream.set_read_timeout(timeout),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(stream) => stream.read(buffer),
            Stream::Unix(stream) | Stream::Tls(stream) => stream.read(buffer),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buffer: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(stream) => stream.write(buffer),
            // MSG_NOSIGNAL: a closed peer is `EPIPE`, never `SIGPIPE` (which the CLI
            // leaves at its default action, the end of the process).
            Stream::Unix(stream) | Stream::Tls(stream) => {
                flashpipe_base::send_nosignal(stream.as_fd(), buffer)
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Tcp(stream) => stream.flush(),
            Stream::Unix(stream) | Stream::Tls(stream) => stream.flush(),
        }
    }
}
