//! Fuzzes the NBD wire format (#15, item 6; crates/flashpipe-nbd-wire/src, docs/nbd.md):
//! the first byte picks a message (greeting, option, option data, option reply and its
//! data, request header, reply header, structured chunk payloads), the rest is its bytes.
//! Every decoder returns a value or an error, never a panic; a reader never takes more
//! than its limit; and where the encoding is canonical (every field fixed or
//! length-prefixed, trailing bytes refused) what decodes re-encodes to the same bytes.
#![no_main]

use flashpipe_nbd::wire::{
    decode_block_status_payload, decode_error_payload, decode_meta_context_reply,
    decode_offset_hole_payload, decode_option_header, decode_option_reply_header,
    decode_server_entry, decode_server_greeting, encode_chunk_block_status,
    encode_meta_context_reply, encode_option, encode_option_reply, encode_server_entry,
    encode_server_greeting, read_option, read_option_reply, read_reply_header, InfoReply,
    InfoRequest, MetaContextRequest, ReplyHeader, RequestHeader, MAX_OPTION_DATA_BYTES,
    MAX_OPTION_REPLY_BYTES, OPTION_HEADER_BYTES, OPTION_REPLY_HEADER_BYTES, REPLY_TYPE_ERROR,
    REPLY_TYPE_ERROR_OFFSET, REQUEST_HEADER_BYTES, SERVER_GREETING_BYTES,
    STRUCTURED_REPLY_HEADER_BYTES,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Some((&selector, bytes)) = input.split_first() else {
        return;
    };
    match selector % 12 {
        0 => greeting(bytes),
        1 => option(bytes),
        2 => info_request(bytes),
        3 => meta_context_request(bytes),
        4 => option_reply(bytes),
        5 => option_reply_data(bytes),
        6 => request_header(bytes),
        7 => reply_headers(bytes),
        8 => block_status(bytes),
        9 => offset_hole(bytes),
        10 => error_payload(bytes),
        _ => every_decoder(bytes),
    }
});

fn greeting(bytes: &[u8]) {
    let Some(array) = bytes.first_chunk::<SERVER_GREETING_BYTES>() else {
        return;
    };
    if let Ok(flags) = decode_server_greeting(array) {
        let mut encoded = Vec::new();
        encode_server_greeting(&mut encoded, flags);
        assert_eq!(&encoded[..], &array[..]);
    }
}

fn option(bytes: &[u8]) {
    if let Some(array) = bytes.first_chunk::<OPTION_HEADER_BYTES>() {
        let _ = decode_option_header(array);
    }
    let mut stream = bytes;
    if let Ok((header, data)) = read_option(&mut stream) {
        assert!(data.len() <= MAX_OPTION_DATA_BYTES);
        assert_eq!(data.len(), header.data_length_bytes as usize);
        let mut encoded = Vec::new();
        encode_option(&mut encoded, header.option, &data);
        assert_eq!(&encoded[..], &bytes[..encoded.len()]);
    }
}

fn info_request(bytes: &[u8]) {
    if let Ok(request) = InfoRequest::decode(bytes) {
        let mut encoded = Vec::new();
        request.encode(&mut encoded);
        assert_eq!(encoded, bytes);
    }
}

fn meta_context_request(bytes: &[u8]) {
    if let Ok(request) = MetaContextRequest::decode(bytes) {
        let mut encoded = Vec::new();
        request.encode(&mut encoded);
        assert_eq!(encoded, bytes);
    }
}

fn option_reply(bytes: &[u8]) {
    if let Some(array) = bytes.first_chunk::<OPTION_REPLY_HEADER_BYTES>() {
        let _ = decode_option_reply_header(array);
    }
    let mut stream = bytes;
    if let Ok((header, data)) = read_option_reply(&mut stream) {
        assert!(data.len() <= MAX_OPTION_REPLY_BYTES);
        let mut encoded = Vec::new();
        encode_option_reply(&mut encoded, header.option, header.reply_type, &data);
        assert_eq!(&encoded[..], &bytes[..encoded.len()]);
    }
}

fn option_reply_data(bytes: &[u8]) {
    if let Ok((name, description)) = decode_server_entry(bytes) {
        let mut encoded = Vec::new();
        encode_server_entry(&mut encoded, &name, &description);
        assert_eq!(encoded, bytes);
    }
    if let Ok((context_id, name)) = decode_meta_context_reply(bytes) {
        let mut encoded = Vec::new();
        encode_meta_context_reply(&mut encoded, context_id, &name);
        assert_eq!(encoded, bytes);
    }
    if let Ok(reply) = InfoReply::decode(bytes) {
        let mut encoded = Vec::new();
        reply.encode(&mut encoded);
        if !matches!(reply, InfoReply::Unknown { .. }) {
            assert_eq!(encoded, bytes);
        }
    }
}

fn request_header(bytes: &[u8]) {
    let Some(array) = bytes.first_chunk::<REQUEST_HEADER_BYTES>() else {
        return;
    };
    if let Ok(header) = RequestHeader::decode(array) {
        let mut encoded = Vec::new();
        header.encode(&mut encoded);
        assert_eq!(&encoded[..], &array[..]);
    }
}

fn reply_headers(bytes: &[u8]) {
    let mut stream = bytes;
    while let Ok(header) = read_reply_header(&mut stream) {
        if let ReplyHeader::Structured(chunk) = header {
            let mut encoded = Vec::new();
            chunk.encode(&mut encoded);
            assert_eq!(encoded.len(), STRUCTURED_REPLY_HEADER_BYTES);
            let skip = (chunk.length_bytes as usize).min(stream.len());
            stream = &stream[skip..];
        }
    }
}

fn block_status(bytes: &[u8]) {
    if let Ok((context_id, extents)) = decode_block_status_payload(bytes) {
        let mut encoded = Vec::new();
        encode_chunk_block_status(&mut encoded, 1, context_id, &extents, true);
        assert_eq!(&encoded[STRUCTURED_REPLY_HEADER_BYTES..], bytes);
    }
}

fn offset_hole(bytes: &[u8]) {
    if let Ok((offset_bytes, hole_size_bytes)) = decode_offset_hole_payload(bytes) {
        assert!(hole_size_bytes > 0);
        let mut encoded = Vec::new();
        encoded.extend_from_slice(&offset_bytes.to_be_bytes());
        encoded.extend_from_slice(&hole_size_bytes.to_be_bytes());
        assert_eq!(encoded, bytes);
    }
}

fn error_payload(bytes: &[u8]) {
    for reply_type in [REPLY_TYPE_ERROR, REPLY_TYPE_ERROR_OFFSET, 0x8000 | 77] {
        if let Ok(error) = decode_error_payload(reply_type, bytes) {
            assert!(error.message.len() <= flashpipe_nbd::wire::MAX_STRING_BYTES);
            assert_eq!(
                error.offset_bytes.is_some(),
                reply_type == REPLY_TYPE_ERROR_OFFSET
            );
        }
    }
}

fn every_decoder(bytes: &[u8]) {
    let _ = InfoRequest::decode(bytes);
    let _ = MetaContextRequest::decode(bytes);
    let _ = InfoReply::decode(bytes);
    let _ = decode_server_entry(bytes);
    let _ = decode_meta_context_reply(bytes);
    let _ = decode_block_status_payload(bytes);
    let _ = decode_offset_hole_payload(bytes);
    let _ = read_reply_header(&mut &bytes[..]);
    let _ = read_option(&mut &bytes[..]);
    let _ = read_option_reply(&mut &bytes[..]);
}
