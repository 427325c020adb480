//! Whole frames to bytes and back: [`encode_frame`] and [`decode_frame`], and their forms
//! over buffers the caller keeps between frames ([`encode_frame_into`],
//! [`decode_frame_keeping`]), so a server thread answering a stream of reads allocates
//! nothing per frame once its buffers have grown (docs/design/27-served-path.md).

use flashpipe_api::{Command, CommandKind};

use crate::codec::{decode_body, decode_header, decode_release_into, encode_body, encode_header};
use crate::error::DecodeError;
use crate::frame::{Frame, FrameKind, Request};
use crate::wire::{Reader, Writer};
use crate::{HEADER_BYTES, MAX_BODY_BYTES, MAX_NAME_BYTES, MAX_RELEASE_HANDLES};

/// What [`decode_frame_keeping`] decodes into and keeps between frames.
#[derive(Debug, Default)]
pub struct KeptBuffers {
    /// The handles of the last release frame.
    pub released: Vec<u64>,
    /// Names a read request's file name is decoded into, one taken per read; the caller
    /// gives back the names of the reads it is done with.
    pub spare_names: Vec<String>,
}

/// Encodes a frame, header and body.
pub fn encode_frame(frame: &Frame) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_frame_into(frame, &mut bytes);
    bytes
}

/// Encodes a frame at the end of `bytes` (whose allocation is kept): the same bytes as
/// [`encode_frame`] appends.
pub fn encode_frame_into(frame: &Frame, bytes: &mut Vec<u8>) {
    let start = bytes.len();
    bytes.extend_from_slice(&[0u8; HEADER_BYTES]);
    let mut writer = Writer {
        bytes: std::mem::take(bytes),
    };
    encode_body(frame, &mut writer);
    *bytes = writer.bytes;
    let body_length = bytes.len() - start - HEADER_BYTES;
    assert!(
        body_length <= MAX_BODY_BYTES as usize,
        "a {} frame of {body_length} bytes exceeds the protocol's body limit",
        frame.kind().name()
    );
    let header = encode_header(frame.kind(), frame.request_id(), body_length as u32);
    bytes[start..start + HEADER_BYTES].copy_from_slice(&header);
}

/// Encodes a release frame of `handles` (at most [`MAX_RELEASE_HANDLES`]) at the end of
/// `bytes`: the bytes [`encode_frame`] makes of `Frame::Release`, without the vector.
pub fn encode_release_into(handles: &[u64], bytes: &mut Vec<u8>) {
    assert!(
        handles.len() <= MAX_RELEASE_HANDLES,
        "a release frame carries {MAX_RELEASE_HANDLES} handles at most"
    );
    let body_length = 4 + 8 * handles.len();
    bytes.extend_from_slice(&encode_header(FrameKind::Release, 0, body_length as u32));
    bytes.extend_from_slice(&(handles.len() as u32).to_le_bytes());
    for handle in handles {
        bytes.extend_from_slice(&handle.to_le_bytes());
    }
}

/// Decodes one whole frame: exactly a header and the body it announces.
pub fn decode_frame(bytes: &[u8]) -> Result<Frame, DecodeError> {
    let (header, body) = split_frame(bytes)?;
    decode_body(&header, body)
}

/// Decodes one whole frame as [`decode_frame`] does (the same frame, or the same error),
/// into buffers `kept` keeps: a release frame's handles replace `kept.released` and
/// `None` comes back; a read request's file name goes into one of `kept.spare_names`
/// when there is one.
pub fn decode_frame_keeping(
    bytes: &[u8],
    kept: &mut KeptBuffers,
) -> Result<Option<Frame>, DecodeError> {
    let (header, body) = split_frame(bytes)?;
    if header.kind == FrameKind::Release {
        kept.released.clear();
        let mut reader = Reader::new(body);
        decode_release_into(&mut reader, &mut kept.released)?;
        reader.finish(header.kind.name())?;
        return Ok(None);
    }
    if CommandKind::from_wire(header.kind as u16) == Some(CommandKind::Read) {
        return decode_read(&header, body, &mut kept.spare_names).map(Some);
    }
    decode_body(&header, body).map(Some)
}

/// A read request's body, its name decoded into a spare name (the layout of the read's
/// entry in [`crate::COMMAND_CODECS`]).
fn decode_read(
    header: &crate::codec::Header,
    body: &[u8],
    spare_names: &mut Vec<String>,
) -> Result<Frame, DecodeError> {
    let mut reader = Reader::new(body);
    let mut name = spare_names.pop().unwrap_or_default();
    name.clear();
    reader.string_into("read.name", MAX_NAME_BYTES, &mut name)?;
    let command = Command::Read {
        name,
        offset_bytes: reader.u64("read.offset")?,
        length_bytes: reader.u64("read.length")?,
    };
    reader.finish(header.kind.name())?;
    Ok(Frame::Request {
        request_id: header.request_id,
        request: Request::Command(command),
    })
}

/// The decoded header of a whole frame and its body, checked to be exactly as long as
/// the header announces.
fn split_frame(bytes: &[u8]) -> Result<(crate::codec::Header, &[u8]), DecodeError> {
    let Some((header_bytes, body)) = bytes.split_first_chunk::<HEADER_BYTES>() else {
        return Err(DecodeError::Truncated {
            field: "header",
            needed_bytes: HEADER_BYTES as u64,
            available_bytes: bytes.len() as u64,
        });
    };
    let header = decode_header(header_bytes, MAX_BODY_BYTES)?;
    if body.len() as u64 != u64::from(header.body_length_bytes) {
        return Err(DecodeError::LengthMismatch {
            length_bytes: u64::from(header.body_length_bytes),
            available_bytes: body.len() as u64,
        });
    }
    Ok((header, body))
}
