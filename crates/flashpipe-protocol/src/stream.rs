//! Frames over a byte stream (a Unix socket): read one frame whole, or write one.

use std::io::{ErrorKind, Read, Write};

use crate::codec::{decode_body, decode_header, encode_frame, Header};
use crate::error::DecodeError;
use crate::frame::Frame;
use crate::HEADER_BYTES;

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadFrameError {
    /// The stream failed.
    #[error("reading a frame: {0}")]
    Io(#[from] std::io::Error),
    /// The stream ended inside a frame.
    #[error("the connection closed inside a frame ({read_bytes} of {expected_bytes} bytes read)")]
    ClosedMidFrame {
        /// Bytes of the frame part read.
        read_bytes: u64,
        /// Bytes it should have.
        expected_bytes: u64,
    },
    /// The bytes are not a frame.
    #[error("malformed frame: {0}")]
    Malformed(#[from] DecodeError),
}

/// Reads exactly `buffer.len()` bytes; `Ok(false)` when the stream ends before the first.
fn read_exact_or_end(stream: &mut impl Read, buffer: &mut [u8]) -> Result<bool, ReadFrameError> {
    let mut filled = 0;
    while filled < buffer.len() {
        match stream.read(&mut buffer[filled..]) {
            Ok(0) if filled == 0 => return Ok(false),
            Ok(0) => {
                return Err(ReadFrameError::ClosedMidFrame {
                    read_bytes: filled as u64,
                    expected_bytes: buffer.len() as u64,
                })
            }
            Ok(count) => filled += count,
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => return Err(ReadFrameError::Io(error)),
        }
    }
    Ok(true)
}

/// Reads a header; `Ok(None)` when the stream ended cleanly between frames.
pub fn read_header(
    stream: &mut impl Read,
    max_body_bytes: u32,
) -> Result<Option<Header>, ReadFrameError> {
    let mut header_bytes = [0u8; HEADER_BYTES];
    if !read_exact_or_end(stream, &mut header_bytes)? {
        return Ok(None);
    }
    Ok(Some(decode_header(&header_bytes, max_body_bytes)?))
}

/// Reads the body `header` announces and decodes the frame.
pub fn read_frame_body(stream: &mut impl Read, header: &Header) -> Result<Frame, ReadFrameError> {
    let mut body = vec![0u8; header.body_length_bytes as usize];
    if !read_exact_or_end(stream, &mut body)? && !body.is_empty() {
        return Err(ReadFrameError::ClosedMidFrame {
            read_bytes: 0,
            expected_bytes: body.len() as u64,
        });
    }
    Ok(decode_body(header, &body)?)
}

/// Reads one whole frame (body at most `max_body_bytes`); `Ok(None)` when the stream
/// ended cleanly between frames.
pub fn read_frame(
    stream: &mut impl Read,
    max_body_bytes: u32,
) -> Result<Option<Frame>, ReadFrameError> {
    match read_header(stream, max_body_bytes)? {
        None => Ok(None),
        Some(header) => read_frame_body(stream, &header).map(Some),
    }
}

/// Encodes `frame` and writes it whole.
pub fn write_frame(stream: &mut impl Write, frame: &Frame) -> std::io::Result<()> {
    stream.write_all(&encode_frame(frame))
}

/// Writes all of `bytes` to a Unix socket with `MSG_NOSIGNAL`: a peer that went away is
/// an `EPIPE` error here, never a SIGPIPE that would end a process that restored the
/// default signal action (the CLI does).
pub fn send_all(stream: &std::os::unix::net::UnixStream, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut sent = 0;
    while sent < bytes.len() {
        let rest = &bytes[sent..];
        // SAFETY: `rest` is a live byte slice for the duration of the call and the file
        // descriptor belongs to `stream`, which outlives the call.
        let result = unsafe {
            libc::send(
                stream.as_raw_fd(),
                rest.as_ptr().cast(),
                rest.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if result < 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        sent += result as usize;
    }
    Ok(())
}

/// Encodes `frame` and sends it whole on a Unix socket ([`send_all`]).
pub fn send_frame(stream: &std::os::unix::net::UnixStream, frame: &Frame) -> std::io::Result<()> {
    send_all(stream, &encode_frame(frame))
}
