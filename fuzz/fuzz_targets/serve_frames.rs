//! Fuzzes the `flashpipe serve` frame codec (#14, item 6; docs/protocol.md): any bytes
//! decode to a frame or an error naming the field, never a panic; a header is accepted
//! only under its body limit; a frame that decodes re-encodes to the same bytes (the
//! codec is canonical: one encoding per frame); a stream of frames reads without a panic.
//! Half the inputs get a valid header built for them (kind from the first two bytes) so
//! the fuzzer spends its time in the body decoders.
#![no_main]

use flashpipe_protocol::{
    decode_frame, decode_header, encode_frame, encode_header, read_frame, FrameKind, HEADER_BYTES,
    MAX_BODY_BYTES,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    check_frame(bytes);
    if let Some(framed) = with_valid_header(bytes) {
        check_frame(&framed);
    }
    check_header_limit(bytes);
    let mut stream = bytes;
    while let Ok(Some(_)) = read_frame(&mut stream, MAX_BODY_BYTES) {}
});

fn check_frame(bytes: &[u8]) {
    if let Ok(frame) = decode_frame(bytes) {
        assert_eq!(
            encode_frame(&frame),
            bytes,
            "a decoded frame re-encodes to other bytes: {frame:?}"
        );
    }
}

/// The bytes after the first two under a valid header of the kind they name (group
/// 0x00, 0x01 or 0x02 from the first byte, number from the second).
fn with_valid_header(bytes: &[u8]) -> Option<Vec<u8>> {
    let (selector, body) = bytes.split_first_chunk::<2>()?;
    let kind_value = u16::from(selector[0] % 3) << 8 | u16::from(selector[1]);
    let kind = FrameKind::from_wire(kind_value)?;
    let request_id = match kind {
        FrameKind::Hello | FrameKind::Welcome | FrameKind::Release => 0,
        _ => 1,
    };
    let mut framed = encode_header(kind, request_id, body.len() as u32).to_vec();
    framed.extend_from_slice(body);
    Some(framed)
}

fn check_header_limit(bytes: &[u8]) {
    let Some(header_bytes) = bytes.first_chunk::<HEADER_BYTES>() else {
        return;
    };
    let limit_bytes = u32::from(bytes[0]) << 16;
    if let Ok(header) = decode_header(header_bytes, limit_bytes) {
        assert!(header.body_length_bytes <= limit_bytes.min(MAX_BODY_BYTES));
    }
}
