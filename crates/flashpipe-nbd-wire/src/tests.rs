//! Unit tests of the wire format: round trips, refusals, and decoders that never panic.

use super::*;
use proptest::prelude::*;

#[test]
fn greeting_round_trips_and_refuses_oldstyle() {
    let mut bytes = Vec::new();
    encode_server_greeting(&mut bytes, HANDSHAKE_FLAG_FIXED_NEWSTYLE);
    let array: [u8; SERVER_GREETING_BYTES] = bytes.clone().try_into().unwrap();
    assert_eq!(decode_server_greeting(&array).unwrap(), 1);
    bytes[8] ^= 0xff;
    let array: [u8; SERVER_GREETING_BYTES] = bytes.try_into().unwrap();
    assert!(matches!(
        decode_server_greeting(&array),
        Err(WireError::BadMagic { .. })
    ));
}

#[test]
fn client_flags_must_match_the_offer() {
    let both = HANDSHAKE_FLAG_FIXED_NEWSTYLE | HANDSHAKE_FLAG_NO_ZEROES;
    check_client_flags(3, both).unwrap();
    assert!(check_client_flags(2, HANDSHAKE_FLAG_FIXED_NEWSTYLE).is_err());
    assert!(check_client_flags(4, both).is_err());
}

#[test]
fn info_request_round_trips() {
    let request = InfoRequest {
        export_name: "disk0".into(),
        info_types: vec![INFO_BLOCK_SIZE, INFO_NAME],
    };
    let mut data = Vec::new();
    request.encode(&mut data);
    assert_eq!(InfoRequest::decode(&data).unwrap(), request);
    data.push(0);
    assert!(InfoRequest::decode(&data).is_err());
}

#[test]
fn meta_context_request_round_trips() {
    let request = MetaContextRequest {
        export_name: String::new(),
        queries: vec!["base:allocation".into(), "qemu:dirty".into()],
    };
    let mut data = Vec::new();
    request.encode(&mut data);
    assert_eq!(MetaContextRequest::decode(&data).unwrap(), request);
}

#[test]
fn info_replies_round_trip() {
    for reply in [
        InfoReply::Export {
            size_bytes: 1 << 30,
            transmission_flags: 0x1ed,
        },
        InfoReply::Name("n".into()),
        InfoReply::Description("a RAM disk".into()),
        InfoReply::BlockSize {
            minimum_bytes: 512,
            preferred_bytes: 4096,
            maximum_payload_bytes: MAX_PAYLOAD_BYTES,
        },
    ] {
        let mut data = Vec::new();
        reply.encode(&mut data);
        assert_eq!(InfoReply::decode(&data).unwrap(), reply);
    }
}

#[test]
fn request_header_round_trips() {
    let header = RequestHeader {
        flags: CMD_FLAG_FUA,
        command: CMD_WRITE,
        cookie: 0xdead_beef,
        offset_bytes: 4096,
        length_bytes: 512,
    };
    let mut bytes = Vec::new();
    header.encode(&mut bytes);
    let array: [u8; REQUEST_HEADER_BYTES] = bytes.try_into().unwrap();
    assert_eq!(RequestHeader::decode(&array).unwrap(), header);
}

#[test]
fn replies_read_back() {
    let mut bytes = Vec::new();
    encode_simple_reply(&mut bytes, NBD_EIO, 7);
    encode_chunk_block_status(
        &mut bytes,
        9,
        1,
        &[BlockStatusExtent {
            length_bytes: 4096,
            flags: STATE_HOLE | STATE_ZERO,
        }],
        true,
    );
    encode_chunk_error(&mut bytes, 11, NBD_EINVAL, "bad");
    let mut reader = &bytes[..];
    assert_eq!(
        read_reply_header(&mut reader).unwrap(),
        ReplyHeader::Simple {
            error: NBD_EIO,
            cookie: 7
        }
    );
    let ReplyHeader::Structured(header) = read_reply_header(&mut reader).unwrap() else {
        panic!("structured chunk expected");
    };
    let (payload, rest) = reader.split_at(header.length_bytes as usize);
    reader = rest;
    let (context_id, extents) = decode_block_status_payload(payload).unwrap();
    assert_eq!((context_id, extents.len()), (1, 1));
    let ReplyHeader::Structured(header) = read_reply_header(&mut reader).unwrap() else {
        panic!("structured chunk expected");
    };
    let error = decode_error_payload(header.reply_type, reader).unwrap();
    assert_eq!(error.message, "bad");
}

proptest! {
    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = InfoRequest::decode(&bytes);
        let _ = MetaContextRequest::decode(&bytes);
        let _ = InfoReply::decode(&bytes);
        let _ = decode_server_entry(&bytes);
        let _ = decode_meta_context_reply(&bytes);
        let _ = decode_block_status_payload(&bytes);
        let _ = decode_offset_hole_payload(&bytes);
        let _ = decode_error_payload(REPLY_TYPE_ERROR_OFFSET, &bytes);
        let _ = read_reply_header(&mut &bytes[..]);
        let _ = read_option(&mut &bytes[..]);
        let _ = read_option_reply(&mut &bytes[..]);
    }
}
