//! A host's open connection to its node, over TCP or over shared memory
//! ([`crate::shm_stream`]), with what the one-shot host and [`crate::session::HostSession`]
//! do with it: write frames, read frames on a reading half, set timeouts, shut it.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use crate::shm_stream::{ShmReader, ShmStream};

/// A host's connection, after the hello and the key proof (and the rings' set-up).
pub enum HostStream {
    /// Over TCP.
    Tcp(TcpStream),
    /// Over the node's Unix socket and two shared-memory rings.
    Shm(Box<ShmStream>),
}

/// The reading half of a [`HostStream`].
pub enum HostReader {
    /// Over TCP (a clone of the socket).
    Tcp(TcpStream),
    /// The node's ring.
    Shm(Box<ShmReader>),
}

impl HostStream {
    /// The reading half: a read waits at most `timeout` (`None`: until bytes come or the
    /// connection ends). Over shared memory there is one reading half; a second call is
    /// refused.
    pub fn reader(&mut self, timeout: Option<Duration>) -> io::Result<HostReader> {
        match self {
            HostStream::Tcp(stream) => {
                let reading = stream.try_clone()?;
                reading.set_read_timeout(timeout)?;
                Ok(HostReader::Tcp(reading))
            }
            HostStream::Shm(stream) => match stream.reader(timeout)? {
                Some(reader) => Ok(HostReader::Shm(Box::new(reader))),
                None => Err(io::Error::other(
                    "the shared-memory connection's reading half is already taken",
                )),
            },
        }
    }

    /// How long a write may wait (`None`: for ever).
    pub fn set_write_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            HostStream::Tcp(stream) => stream.set_write_timeout(timeout),
            HostStream::Shm(stream) => {
                stream.set_write_timeout(timeout);
                Ok(())
            }
        }
    }

    /// Ends the connection both ways (a reader waiting on it returns).
    pub fn shutdown(&self) {
        match self {
            HostStream::Tcp(stream) => {
                let _ = stream.shutdown(Shutdown::Both);
            }
            HostStream::Shm(stream) => stream.shutdown(),
        }
    }
}

impl Write for HostStream {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            HostStream::Tcp(stream) => stream.write(bytes),
            HostStream::Shm(stream) => stream.write(bytes),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            HostStream::Tcp(stream) => stream.flush(),
            HostStream::Shm(stream) => stream.flush(),
        }
    }
}

impl Read for HostReader {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        match self {
            HostReader::Tcp(stream) => stream.read(buffer),
            HostReader::Shm(reader) => reader.read(buffer),
        }
    }
}

impl HostReader {
    /// Ends the reading half's socket (TCP; the shared-memory half ends with its stream).
    pub fn shutdown(&self) {
        if let HostReader::Tcp(stream) = self {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}
