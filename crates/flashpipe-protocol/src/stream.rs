//! Frames over a byte stream (a Unix socket): read one frame whole, or write one.

use std::io::{ErrorKind, Read, Write};

use crate::codec::{decode_body, decode_header, Header};
use crate::error::DecodeError;
use crate::frame::{DataPayload, Frame, FrameKind, Request, Response, WritePayload};
use crate::whole::encode_frame;
use crate::HEADER_BYTES;
use crate::MAX_NAME_BYTES;
use flashpipe_api::{Command, Reply};

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

/// Bytes before the data of an inline data response: the tag and the length.
const INLINE_DATA_PREFIX_BYTES: usize = 5;

/// Reads the body `header` announces and decodes the frame. The bytes of an inline data
/// response are read straight into their own vector (one copy from the stream).
pub fn read_frame_body(stream: &mut impl Read, header: &Header) -> Result<Frame, ReadFrameError> {
    let body_length = header.body_length_bytes as usize;
    if header.kind == FrameKind::Data && body_length >= INLINE_DATA_PREFIX_BYTES {
        return read_data_body(stream, header);
    }
    if header.kind == FrameKind::Write {
        return read_write_body(stream, header);
    }
    read_whole_body(stream, header, &[])
}

/// A write request: its data is read straight into its own vector when the name's and
/// the data's lengths agree with the body; anything else is read whole and decoded as
/// usual (which names what is wrong).
fn read_write_body(stream: &mut impl Read, header: &Header) -> Result<Frame, ReadFrameError> {
    let body_length = header.body_length_bytes as usize;
    let mut start = Vec::new();
    if body_length < 4 {
        return read_whole_body(stream, header, &start);
    }
    start.resize(4, 0);
    read_body_part(stream, &mut start, header)?;
    let name_length = u32::from_le_bytes([start[0], start[1], start[2], start[3]]) as usize;
    let fixed_bytes = 4 + name_length + 8 + 4;
    if name_length > MAX_NAME_BYTES || fixed_bytes > body_length {
        return read_whole_body(stream, header, &start);
    }
    start.resize(fixed_bytes, 0);
    read_body_part(stream, &mut start[4..], header)?;
    let data_length_at = fixed_bytes - 4;
    let data_length = u32::from_le_bytes([
        start[data_length_at],
        start[data_length_at + 1],
        start[data_length_at + 2],
        start[data_length_at + 3],
    ]) as usize;
    let Ok(name) = std::str::from_utf8(&start[4..4 + name_length]) else {
        return read_whole_body(stream, header, &start);
    };
    if fixed_bytes + data_length != body_length {
        return read_whole_body(stream, header, &start);
    }
    let name = name.to_string();
    let offset_at = 4 + name_length;
    let mut offset = [0u8; 8];
    offset.copy_from_slice(&start[offset_at..offset_at + 8]);
    let data = read_body_tail(stream, header, fixed_bytes)?;
    Ok(Frame::Request {
        request_id: header.request_id,
        request: Request::Command(Command::Write {
            name,
            offset_bytes: u64::from_le_bytes(offset),
            data: WritePayload::Inline(data),
        }),
    })
}

/// Bodies up to this many bytes are read on the stack: an answer by reference or a small
/// request allocates nothing to be read.
const STACK_BODY_BYTES: usize = 256;

/// Reads the rest of a body after `start` (bytes of it already read) and decodes it.
fn read_whole_body(
    stream: &mut impl Read,
    header: &Header,
    start: &[u8],
) -> Result<Frame, ReadFrameError> {
    let body_length = header.body_length_bytes as usize;
    if body_length <= STACK_BODY_BYTES {
        let mut on_stack = [0u8; STACK_BODY_BYTES];
        let body = &mut on_stack[..body_length];
        body[..start.len()].copy_from_slice(start);
        read_body_part(stream, &mut body[start.len()..], header)?;
        return Ok(decode_body(header, body)?);
    }
    let mut body = Vec::with_capacity(body_length);
    body.extend_from_slice(start);
    body.resize(body_length, 0);
    read_body_part(stream, &mut body[start.len()..], header)?;
    Ok(decode_body(header, &body)?)
}

fn read_body_part(
    stream: &mut impl Read,
    part: &mut [u8],
    header: &Header,
) -> Result<(), ReadFrameError> {
    if !read_exact_or_end(stream, part)? && !part.is_empty() {
        return Err(ReadFrameError::ClosedMidFrame {
            read_bytes: 0,
            expected_bytes: u64::from(header.body_length_bytes),
        });
    }
    Ok(())
}

/// Reads the rest of a body, after its first `read_bytes`, into its own vector.
fn read_body_tail(
    stream: &mut impl Read,
    header: &Header,
    read_bytes: usize,
) -> Result<Vec<u8>, ReadFrameError> {
    let body_length = header.body_length_bytes as usize;
    let tail_length = body_length - read_bytes;
    let mut tail = Vec::with_capacity(tail_length);
    let read = stream.take(tail_length as u64).read_to_end(&mut tail)?;
    if read != tail_length {
        return Err(ReadFrameError::ClosedMidFrame {
            read_bytes: (read_bytes + read) as u64,
            expected_bytes: body_length as u64,
        });
    }
    Ok(tail)
}

/// A data response: an inline payload whose length matches the body is read into its
/// own vector; anything else is read whole and decoded as usual.
fn read_data_body(stream: &mut impl Read, header: &Header) -> Result<Frame, ReadFrameError> {
    let mut prefix = [0u8; INLINE_DATA_PREFIX_BYTES];
    read_body_part(stream, &mut prefix, header)?;
    let data_length = u32::from_le_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    let body_length = header.body_length_bytes as usize;
    if prefix[0] != 0 || data_length != body_length - INLINE_DATA_PREFIX_BYTES {
        return read_whole_body(stream, header, &prefix);
    }
    let data = read_body_tail(stream, header, INLINE_DATA_PREFIX_BYTES)?;
    Ok(Frame::Response {
        request_id: header.request_id,
        response: Response::Reply(Reply::Data(DataPayload::Inline(data))),
    })
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
    use std::os::fd::AsFd;
    flashpipe_base::send_all_nosignal(stream.as_fd(), bytes)
}

/// Encodes `frame` and sends it whole on a Unix socket ([`send_all`]).
pub fn send_frame(stream: &std::os::unix::net::UnixStream, frame: &Frame) -> std::io::Result<()> {
    send_all(stream, &encode_frame(frame))
}
