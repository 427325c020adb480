//! Framed TCP connections of the cluster: the hello exchange, reading one frame (the
//! header first, its length checked against the wire limits before the body is read), and
//! the two threads of a connection: the reader hands frames to the router thread over a
//! bounded channel (blocking when the router does not take them: the socket then backs up
//! to the peer), the writer drains a bounded channel the router fills without blocking.
//! A bad frame ends the connection it came on, and only that one; the reason is logged.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::time::Duration;

use flashpipe_cluster::wire::{self, Frame, WireError, WireLimits, HEADER_BYTES};

use crate::hello::{Hello, HelloError, HELLO_BYTES};
use crate::stream::SetupStream;

/// Frames a connection's reader may hand over before the router takes them.
pub const INBOUND_FRAMES: usize = 64;
/// Encoded frames waiting for a connection's writer.
pub const OUTBOUND_FRAMES: usize = 64;
/// How long a peer may take to send its hello or answer one.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// What a connection's reader hands the router thread.
#[derive(Debug)]
pub enum Inbound {
    /// A frame, decoded and checked.
    Frame(Frame),
    /// The connection ended; why, in words.
    Closed(String),
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The socket failed.
    #[error("the connection failed: {0}")]
    Io(#[from] io::Error),
    /// The bytes are not a valid frame.
    #[error("bad frame: {0}")]
    Wire(#[from] WireError),
}

/// Reads one frame; `Ok(None)` when the peer closed cleanly between frames.
pub fn read_frame(
    stream: &mut impl Read,
    limits: WireLimits,
    buffer: &mut Vec<u8>,
) -> Result<Option<Frame>, ReadError> {
    buffer.clear();
    buffer.resize(HEADER_BYTES, 0);
    let mut filled = 0;
    while filled < HEADER_BYTES {
        let read = stream.read(&mut buffer[filled..])?;
        if read == 0 {
            if filled == 0 {
                return Ok(None);
            }
            return Err(ReadError::Io(io::ErrorKind::UnexpectedEof.into()));
        }
        filled += read;
    }
    let length = wire::frame_length(buffer, limits)?;
    assert!(length >= HEADER_BYTES, "a frame is at least its header");
    buffer.resize(length, 0);
    stream.read_exact(&mut buffer[HEADER_BYTES..])?;
    let (frame, used) = wire::decode(buffer, limits)?;
    assert_eq!(used, length, "decode reads the frame frame_length measured");
    Ok(Some(frame))
}

/// Why a hello exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum HelloExchangeError {
    /// The socket failed or timed out.
    #[error("the hello could not be exchanged: {0}")]
    Io(#[from] io::Error),
    /// The peer's bytes are not a hello.
    #[error(transparent)]
    Hello(#[from] HelloError),
}

/// Sends a hello.
pub fn send_hello(stream: &mut impl Write, hello: &Hello) -> io::Result<()> {
    stream.write_all(&hello.encode())
}

/// Reads a hello, waiting at most [`HELLO_TIMEOUT`].
pub fn read_hello(stream: &mut impl SetupStream) -> Result<Hello, HelloExchangeError> {
    stream.set_setup_timeout(Some(HELLO_TIMEOUT))?;
    let mut bytes = [0u8; HELLO_BYTES];
    stream.read_exact(&mut bytes)?;
    stream.set_setup_timeout(None)?;
    Ok(Hello::decode(&bytes)?)
}

/// The router's end of a connection.
#[derive(Debug)]
pub struct Connection {
    /// Who is at the other end, in words (for logs).
    pub peer: String,
    /// Frames read.
    pub inbound: Receiver<Inbound>,
    /// Encoded frames to write.
    pub outbound: SyncSender<Vec<u8>>,
    /// The socket, to shut when the router lets the connection go.
    pub socket: TcpStream,
}

impl Connection {
    /// Queues encoded bytes for the writer without blocking; hands them back when its
    /// channel is full. `Err(None)`: the writer is gone.
    pub fn try_send(&self, bytes: Vec<u8>) -> Result<(), Option<Vec<u8>>> {
        match self.outbound.try_send(bytes) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(bytes)) => Err(Some(bytes)),
            Err(TrySendError::Disconnected(_)) => Err(None),
        }
    }

    /// Ends the connection both ways (its threads end on their own).
    pub fn close(&self) {
        let _ = self.socket.shutdown(Shutdown::Both);
    }
}

/// Starts the writer thread of `stream` and returns the router's end and the reader's
/// half; run [`run_reader`] with the half on the calling thread. `ring` wakes the router
/// thread (after a frame is handed over, or bytes written).
pub fn open(
    stream: TcpStream,
    peer: String,
    ring: impl Fn() + Send + Clone + 'static,
) -> io::Result<(Connection, ReaderHalf)> {
    let (inbound_sender, inbound) = sync_channel(INBOUND_FRAMES);
    let (outbound, outbound_receiver) = sync_channel::<Vec<u8>>(OUTBOUND_FRAMES);
    let mut writing = stream.try_clone()?;
    let socket = stream.try_clone()?;
    let writer_ring = ring.clone();
    std::thread::Builder::new()
        .name("cluster-writer".to_string())
        .spawn(move || {
            for bytes in outbound_receiver {
                if writing.write_all(&bytes).is_err() {
                    let _ = writing.shutdown(Shutdown::Both);
                    break;
                }
                writer_ring();
            }
        })?;
    Ok((
        Connection {
            peer: peer.clone(),
            inbound,
            outbound,
            socket,
        },
        ReaderHalf {
            stream,
            peer,
            sender: inbound_sender,
            ring: Box::new(ring),
        },
    ))
}

/// The reading half of a connection.
pub struct ReaderHalf {
    stream: TcpStream,
    peer: String,
    sender: SyncSender<Inbound>,
    ring: Box<dyn Fn() + Send>,
}

/// Reads frames until the connection ends, handing them to the router; a bad frame ends
/// the connection (logged). Returns why it ended.
pub fn run_reader(half: ReaderHalf, limits: WireLimits) -> String {
    let ReaderHalf {
        mut stream,
        peer,
        sender,
        ring,
    } = half;
    let mut buffer = Vec::with_capacity(limits.max_frame_bytes());
    let reason = loop {
        match read_frame(&mut stream, limits, &mut buffer) {
            Ok(Some(frame)) => {
                if sender.send(Inbound::Frame(frame)).is_err() {
                    break "the node is stopping".to_string();
                }
                ring();
            }
            Ok(None) => break "the peer closed the connection".to_string(),
            Err(ReadError::Wire(error)) => {
                tracing::warn!(peer = %peer, "bad frame; closing this connection only: {error}");
                break format!("bad frame: {error}");
            }
            Err(ReadError::Io(error)) => break format!("connection failed: {error}"),
        }
    };
    let _ = stream.shutdown(Shutdown::Both);
    let _ = sender.send(Inbound::Closed(reason.clone()));
    ring();
    reason
}
