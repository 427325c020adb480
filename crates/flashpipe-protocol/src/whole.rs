//! Whole frames to bytes and back: [`encode_frame`] and [`decode_frame`], and their forms
//! over buffers the caller keeps between frames ([`encode_frame_into`],
//! [`decode_frame_keeping`]), so a server thread answering a stream of frames allocates
//! nothing per frame once its buffers have grown (docs/design/27-served-path.md).

use crate::codec::{decode_body, decode_header, decode_release_into, encode_body, encode_header};
use crate::error::DecodeError;
use crate::frame::{Frame, FrameKind};
use crate::wire::{Reader, Writer};
use crate::{HEADER_BYTES, MAX_BODY_BYTES};

/// Encodes a frame, header and body.
pub fn encode_frame(frame: &Frame) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_frame_into(frame, &mut bytes);
    bytes
}

/// Encodes a frame into `bytes`, replacing what it held and keeping its allocation: the
/// same bytes as [`encode_frame`].
pub fn encode_frame_into(frame: &Frame, bytes: &mut Vec<u8>) {
    bytes.clear();
    bytes.extend_from_slice(&[0u8; HEADER_BYTES]);
    let mut writer = Writer {
        bytes: std::mem::take(bytes),
    };
    encode_body(frame, &mut writer);
    *bytes = writer.bytes;
    let body_length = bytes.len() - HEADER_BYTES;
    assert!(
        body_length <= MAX_BODY_BYTES as usize,
        "a {} frame of {body_length} bytes exceeds the protocol's body limit",
        frame.kind().name()
    );
    let header = encode_header(frame.kind(), frame.request_id(), body_length as u32);
    bytes[..HEADER_BYTES].copy_from_slice(&header);
}

/// Decodes one whole frame: exactly a header and the body it announces.
pub fn decode_frame(bytes: &[u8]) -> Result<Frame, DecodeError> {
    let (header, body) = split_frame(bytes)?;
    decode_body(&header, body)
}

/// Decodes one whole frame as [`decode_frame`] does, except a release frame: its handles
/// are appended to `released` (which keeps its allocation) and `None` comes back.
pub fn decode_frame_keeping(
    bytes: &[u8],
    released: &mut Vec<u64>,
) -> Result<Option<Frame>, DecodeError> {
    let (header, body) = split_frame(bytes)?;
    if header.kind != FrameKind::Release {
        return decode_body(&header, body).map(Some);
    }
    let mut reader = Reader::new(body);
    decode_release_into(&mut reader, released)?;
    reader.finish(header.kind.name())?;
    Ok(None)
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
