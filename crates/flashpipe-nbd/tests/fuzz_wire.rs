//! Seeded mutation fuzzing of the NBD wire format and of the client core's reply decoding
//! (#15, item 6), on stable Rust and in the suite. Valid encodings (options and their
//! data, option replies and their data, request headers, reply headers, structured chunk
//! payloads; whole reply streams answering a read, write, flush or trim) are mutated by a
//! SplitMix64 stream: bit flips, bytes set, truncations, extensions, big-endian length
//! fields set to extremes, message types swapped. Every case decodes or fails with an
//! error, never a panic; a reader never takes more than its limit; where the encoding is
//! canonical what decodes re-encodes to the same bytes; a hostile reply stream finishes
//! the request or ends the connection with a reason naming the device.
//!
//! `FLASHPIPE_FUZZ_CASES` sets the number of cases of each test (default 10 000);
//! `FLASHPIPE_FUZZ_SEED` the first seed. The server's side (arbitrary bytes and option
//! sequences against a running server, other connections unaffected) is tests/protocol.rs.

use flashpipe_device::SplitMix64;
use flashpipe_nbd::client::reply_fuzzing::{
    cookie_of_part, feed_replies, FuzzedCommand, FuzzedRequest,
};
use flashpipe_nbd::wire::{self, InfoReply, InfoRequest, MetaContextRequest, RequestHeader};

const DEFAULT_CASES: u64 = 10_000;
const DEFAULT_SEED: u64 = 0x5eed_0000_0015;

fn environment_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(default)
}

fn cases_and_seed() -> (u64, u64) {
    (
        environment_u64("FLASHPIPE_FUZZ_CASES", DEFAULT_CASES),
        environment_u64("FLASHPIPE_FUZZ_SEED", DEFAULT_SEED),
    )
}

/// Values 32-bit length and count fields are set to.
const EXTREME_U32S: [u32; 9] = [
    0,
    1,
    8,
    4096,
    4097,
    wire::MAX_PAYLOAD_BYTES,
    wire::MAX_PAYLOAD_BYTES + 9,
    i32::MAX as u32,
    u32::MAX,
];

fn set_u32_be(bytes: &mut [u8], offset: usize, value: u32) {
    if offset + 4 <= bytes.len() {
        bytes[offset..offset + 4].copy_from_slice(&value.to_be_bytes());
    }
}

/// Applies one drawn mutation (type swaps are the callers', who know where types sit).
fn mutate(bytes: &mut Vec<u8>, generator: &mut SplitMix64) {
    match generator.index_below(6) {
        0 => {
            if !bytes.is_empty() {
                let bit = generator.index_below(bytes.len() * 8);
                bytes[bit / 8] ^= 1 << (bit % 8);
            }
        }
        1 => {
            if !bytes.is_empty() {
                let at = generator.index_below(bytes.len());
                bytes[at] = [0, 1, 0x7f, 0x80, 0xff][generator.index_below(5)];
            }
        }
        2 => {
            let keep = generator.index_below(bytes.len() + 1);
            bytes.truncate(keep);
        }
        3 => {
            let extra = generator.index_below(24) + 1;
            bytes.extend((0..extra).map(|_| generator.next_u64() as u8));
        }
        4 => {
            let at = generator.index_below(bytes.len() + 1);
            set_u32_be(
                bytes,
                at,
                EXTREME_U32S[generator.index_below(EXTREME_U32S.len())],
            );
        }
        _ => {
            let at = generator.index_below(bytes.len() + 1);
            let count = generator
                .index_below(8)
                .min(bytes.len() - at.min(bytes.len()));
            bytes.drain(at..at + count);
        }
    }
}

fn mutated(seed: &[u8], generator: &mut SplitMix64) -> Vec<u8> {
    let mut bytes = seed.to_vec();
    for _ in 0..generator.index_below(3) + 1 {
        mutate(&mut bytes, generator);
    }
    bytes
}

// ---------------------------------------------------------------------------------------
// The wire format.

/// Which decoder a seed's bytes are for.
#[derive(Debug, Clone, Copy)]
enum Message {
    Option,
    InfoRequest,
    MetaContextRequest,
    OptionReply,
    ServerEntry,
    MetaContextReply,
    InfoReply,
    RequestHeader,
    ReplyHeaders,
    BlockStatus,
    OffsetHole,
    ErrorChunk,
}

fn wire_seeds() -> Vec<(Message, Vec<u8>)> {
    let mut seeds = Vec::new();
    let mut push = |message: Message, build: &dyn Fn(&mut Vec<u8>)| {
        let mut bytes = Vec::new();
        build(&mut bytes);
        seeds.push((message, bytes));
    };
    let info = InfoRequest {
        export_name: "disk0".into(),
        info_types: vec![wire::INFO_BLOCK_SIZE, wire::INFO_NAME],
    };
    let meta = MetaContextRequest {
        export_name: "disk0".into(),
        queries: vec![
            wire::META_CONTEXT_BASE_ALLOCATION.into(),
            "qemu:dirty".into(),
        ],
    };
    push(Message::Option, &|bytes| {
        let mut data = Vec::new();
        info.encode(&mut data);
        wire::encode_option(bytes, wire::OPT_GO, &data);
    });
    push(Message::InfoRequest, &|bytes| info.encode(bytes));
    push(Message::MetaContextRequest, &|bytes| meta.encode(bytes));
    push(Message::OptionReply, &|bytes| {
        let mut data = Vec::new();
        wire::encode_server_entry(&mut data, "disk0", "a RAM disk");
        wire::encode_option_reply(bytes, wire::OPT_LIST, wire::REP_SERVER, &data);
    });
    push(Message::ServerEntry, &|bytes| {
        wire::encode_server_entry(bytes, "disk0", "a RAM disk")
    });
    push(Message::MetaContextReply, &|bytes| {
        wire::encode_meta_context_reply(bytes, 1, wire::META_CONTEXT_BASE_ALLOCATION)
    });
    for reply in [
        InfoReply::Export {
            size_bytes: 1 << 30,
            transmission_flags: 0x1ed,
        },
        InfoReply::Name("disk0".into()),
        InfoReply::Description("a RAM disk".into()),
        InfoReply::BlockSize {
            minimum_bytes: 512,
            preferred_bytes: 4096,
            maximum_payload_bytes: wire::MAX_PAYLOAD_BYTES,
        },
    ] {
        push(Message::InfoReply, &|bytes| reply.encode(bytes));
    }
    push(Message::RequestHeader, &|bytes| {
        RequestHeader {
            flags: wire::CMD_FLAG_FUA,
            command: wire::CMD_WRITE,
            cookie: 0xdead_beef,
            offset_bytes: 4096,
            length_bytes: 512,
        }
        .encode(bytes)
    });
    push(Message::ReplyHeaders, &|bytes| {
        wire::encode_simple_reply(bytes, 0, 7);
        wire::encode_chunk_offset_hole(bytes, 8, 0, 512, false);
        wire::encode_chunk_error(bytes, 8, wire::NBD_EIO, "bad block");
        wire::encode_chunk_none(bytes, 9);
    });
    let extents = [
        wire::BlockStatusExtent {
            length_bytes: 4096,
            flags: wire::STATE_HOLE | wire::STATE_ZERO,
        },
        wire::BlockStatusExtent {
            length_bytes: 65536,
            flags: 0,
        },
    ];
    push(Message::BlockStatus, &|bytes| {
        let mut chunk = Vec::new();
        wire::encode_chunk_block_status(&mut chunk, 1, 1, &extents, true);
        bytes.extend_from_slice(&chunk[wire::STRUCTURED_REPLY_HEADER_BYTES..]);
    });
    push(Message::OffsetHole, &|bytes| {
        let mut chunk = Vec::new();
        wire::encode_chunk_offset_hole(&mut chunk, 1, 4096, 512, true);
        bytes.extend_from_slice(&chunk[wire::STRUCTURED_REPLY_HEADER_BYTES..]);
    });
    push(Message::ErrorChunk, &|bytes| {
        let mut chunk = Vec::new();
        wire::encode_chunk_error(&mut chunk, 1, wire::NBD_ENOSPC, "no space left");
        bytes.extend_from_slice(&chunk[wire::STRUCTURED_REPLY_HEADER_BYTES..]);
        bytes.extend_from_slice(&4096u64.to_be_bytes());
    });
    seeds
}

fn encoded(build: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut bytes = Vec::new();
    build(&mut bytes);
    bytes
}

/// Decodes `bytes` as `message`; checks limits and, where the encoding is canonical, that
/// what decodes re-encodes to the same bytes. Returns whether it decoded.
fn check_message(message: Message, bytes: &[u8]) -> bool {
    match message {
        Message::Option => match wire::read_option(&mut &bytes[..]) {
            Ok((header, data)) => {
                assert!(data.len() <= wire::MAX_OPTION_DATA_BYTES);
                let again = encoded(|out| wire::encode_option(out, header.option, &data));
                assert_eq!(&again[..], &bytes[..again.len()]);
                true
            }
            Err(_) => false,
        },
        Message::InfoRequest => InfoRequest::decode(bytes)
            .map(|request| assert_eq!(encoded(|out| request.encode(out)), bytes))
            .is_ok(),
        Message::MetaContextRequest => MetaContextRequest::decode(bytes)
            .map(|request| {
                assert!(request.queries.len() <= wire::MAX_META_CONTEXT_QUERIES);
                assert_eq!(encoded(|out| request.encode(out)), bytes);
            })
            .is_ok(),
        Message::OptionReply => match wire::read_option_reply(&mut &bytes[..]) {
            Ok((header, data)) => {
                assert!(data.len() <= wire::MAX_OPTION_REPLY_BYTES);
                let again = encoded(|out| {
                    wire::encode_option_reply(out, header.option, header.reply_type, &data)
                });
                assert_eq!(&again[..], &bytes[..again.len()]);
                true
            }
            Err(_) => false,
        },
        Message::ServerEntry => wire::decode_server_entry(bytes)
            .map(|(name, description)| {
                let again = encoded(|out| wire::encode_server_entry(out, &name, &description));
                assert_eq!(again, bytes);
            })
            .is_ok(),
        Message::MetaContextReply => wire::decode_meta_context_reply(bytes)
            .map(|(id, name)| {
                let again = encoded(|out| wire::encode_meta_context_reply(out, id, &name));
                assert_eq!(again, bytes);
            })
            .is_ok(),
        Message::InfoReply => InfoReply::decode(bytes)
            .map(|reply| {
                if !matches!(reply, InfoReply::Unknown { .. }) {
                    assert_eq!(encoded(|out| reply.encode(out)), bytes);
                }
            })
            .is_ok(),
        Message::RequestHeader => match bytes.first_chunk::<{ wire::REQUEST_HEADER_BYTES }>() {
            Some(array) => RequestHeader::decode(array)
                .map(|header| assert_eq!(encoded(|out| header.encode(out)), array))
                .is_ok(),
            None => false,
        },
        Message::ReplyHeaders => check_reply_headers(bytes),
        Message::BlockStatus => wire::decode_block_status_payload(bytes)
            .map(|(context_id, extents)| {
                assert!(extents.iter().all(|extent| extent.length_bytes > 0));
                let chunk = encoded(|out| {
                    wire::encode_chunk_block_status(out, 1, context_id, &extents, true)
                });
                assert_eq!(&chunk[wire::STRUCTURED_REPLY_HEADER_BYTES..], bytes);
            })
            .is_ok(),
        Message::OffsetHole => wire::decode_offset_hole_payload(bytes)
            .map(|(offset_bytes, hole_bytes)| {
                let chunk = encoded(|out| {
                    wire::encode_chunk_offset_hole(out, 1, offset_bytes, hole_bytes, true)
                });
                assert_eq!(&chunk[wire::STRUCTURED_REPLY_HEADER_BYTES..], bytes);
            })
            .is_ok(),
        Message::ErrorChunk => {
            let mut any = false;
            for reply_type in [
                wire::REPLY_TYPE_ERROR,
                wire::REPLY_TYPE_ERROR_OFFSET,
                0x8077,
            ] {
                if let Ok(error) = wire::decode_error_payload(reply_type, bytes) {
                    assert!(error.message.len() <= wire::MAX_STRING_BYTES);
                    assert_eq!(
                        error.offset_bytes.is_some(),
                        reply_type == wire::REPLY_TYPE_ERROR_OFFSET
                    );
                    any = true;
                }
            }
            any
        }
    }
}

/// Reads reply headers off `bytes` (skipping chunk payloads) until one fails.
fn check_reply_headers(bytes: &[u8]) -> bool {
    let mut stream = bytes;
    let mut headers = 0;
    while let Ok(header) = wire::read_reply_header(&mut stream) {
        headers += 1;
        if let wire::ReplyHeader::Structured(chunk) = header {
            let again = encoded(|out| chunk.encode(out));
            assert_eq!(again.len(), wire::STRUCTURED_REPLY_HEADER_BYTES);
            let skip = (chunk.length_bytes as usize).min(stream.len());
            stream = &stream[skip..];
        }
    }
    headers > 0
}

#[test]
fn every_wire_seed_decodes() {
    for (message, bytes) in wire_seeds() {
        assert!(check_message(message, &bytes), "{message:?} seed");
    }
}

#[test]
fn mutated_wire_messages_decode_canonically_or_fail_cleanly() {
    let seeds = wire_seeds();
    let (cases, first_seed) = cases_and_seed();
    let mut decoded = 0u64;
    for case in 0..cases {
        let mut generator = SplitMix64::for_case(first_seed, case);
        let (message, seed) = &seeds[generator.index_below(seeds.len())];
        let bytes = mutated(seed, &mut generator);
        decoded += u64::from(check_message(*message, &bytes));
        // Kinds swapped: the same bytes through another decoder.
        let (other, _) = seeds[generator.index_below(seeds.len())];
        check_message(other, &bytes);
    }
    assert!(cases < 1000 || decoded > 0, "no mutated case decoded");
}

#[test]
fn every_length_field_at_every_extreme_fails_cleanly() {
    for (message, seed) in wire_seeds() {
        for offset in 0..seed.len().saturating_sub(3) {
            for value in EXTREME_U32S {
                let mut bytes = seed.clone();
                set_u32_be(&mut bytes, offset, value);
                check_message(message, &bytes);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The client core on reply streams.

/// The byte a valid read reply puts at `position` of the export.
fn pattern_byte(position: u64) -> u8 {
    (position % 251) as u8 + 1
}

fn part_ranges(request: &FuzzedRequest) -> Vec<(u64, u64)> {
    let length = match request.command {
        FuzzedCommand::Flush => return vec![(0, 0)],
        _ => request.length_bytes,
    };
    (0..length.div_ceil(request.part_bytes))
        .map(|part| {
            let start = part * request.part_bytes;
            (start, request.part_bytes.min(length - start))
        })
        .collect()
}

/// A valid stream answering every part of `request`: for a structured read, the first
/// half of each part as data and the rest as a hole (parts in reverse order, chunks out
/// of order within none); otherwise simple replies (with data for reads) or NONE chunks.
fn valid_reply_stream(request: &FuzzedRequest) -> Vec<u8> {
    let mut stream = Vec::new();
    for (part, (start, length)) in part_ranges(request).into_iter().enumerate().rev() {
        let cookie = cookie_of_part(part as u64);
        let absolute = request.offset_bytes + start;
        match (request.command, request.structured_replies) {
            (FuzzedCommand::Read, true) => {
                let data_bytes = length.div_ceil(2);
                let hole_bytes = length - data_bytes;
                let done_with_data = hole_bytes == 0;
                wire::encode_chunk_offset_data_header(
                    &mut stream,
                    cookie,
                    absolute,
                    data_bytes as u32,
                    done_with_data,
                );
                stream.extend((absolute..absolute + data_bytes).map(pattern_byte));
                if hole_bytes > 0 {
                    wire::encode_chunk_offset_hole(
                        &mut stream,
                        cookie,
                        absolute + data_bytes,
                        hole_bytes as u32,
                        true,
                    );
                }
            }
            (FuzzedCommand::Read, false) => {
                wire::encode_simple_reply(&mut stream, 0, cookie);
                stream.extend((absolute..absolute + length).map(pattern_byte));
            }
            (_, true) => wire::encode_chunk_none(&mut stream, cookie),
            (_, false) => wire::encode_simple_reply(&mut stream, 0, cookie),
        }
    }
    stream
}

fn expected_read_data(request: &FuzzedRequest) -> Vec<u8> {
    let mut data = Vec::new();
    for (start, length) in part_ranges(request) {
        let absolute = request.offset_bytes + start;
        let data_bytes = if request.structured_replies {
            length.div_ceil(2)
        } else {
            length
        };
        data.extend((absolute..absolute + data_bytes).map(pattern_byte));
        data.resize(data.len() + (length - data_bytes) as usize, 0);
    }
    data
}

fn drawn_request(generator: &mut SplitMix64) -> FuzzedRequest {
    let command = [
        FuzzedCommand::Read,
        FuzzedCommand::Read,
        FuzzedCommand::Write,
        FuzzedCommand::Flush,
        FuzzedCommand::Trim,
    ][generator.index_below(5)];
    let length_bytes = [512, 1000, 4096, 8192][generator.index_below(4)];
    FuzzedRequest {
        command,
        structured_replies: generator.index_below(2) == 0,
        offset_bytes: generator.index_below(1 << 20) as u64 * 512,
        length_bytes,
        part_bytes: [512, 1024, 4096, 65536][generator.index_below(4)],
    }
}

#[test]
fn valid_reply_streams_finish_their_requests() {
    let (_, first_seed) = cases_and_seed();
    for case in 0..200 {
        let mut generator = SplitMix64::for_case(first_seed, case);
        let request = drawn_request(&mut generator);
        let outcome = feed_replies(request, &valid_reply_stream(&request));
        assert!(outcome.finished, "{request:?}: {outcome:?}");
        assert_eq!(outcome.connection_lost, None);
        assert_eq!(outcome.request_error, None);
        if request.command == FuzzedCommand::Read {
            assert_eq!(
                outcome.read_data,
                expected_read_data(&request),
                "{request:?}"
            );
        }
    }
}

#[test]
fn mutated_reply_streams_finish_or_end_the_connection_naming_the_device() {
    let (cases, first_seed) = cases_and_seed();
    let (mut finished, mut lost) = (0u64, 0u64);
    for case in 0..cases {
        let mut generator = SplitMix64::for_case(first_seed, case);
        let request = drawn_request(&mut generator);
        let stream = mutated(&valid_reply_stream(&request), &mut generator);
        let outcome = feed_replies(request, &stream);
        match &outcome.connection_lost {
            Some(reason) => {
                assert!(reason.starts_with("nbd://fuzzed/export"), "{reason}");
                lost += 1;
            }
            None => {
                assert!(outcome.finished, "case {case}: {outcome:?}");
                finished += 1;
            }
        }
        if let Some(error) = &outcome.request_error {
            assert!(error.contains("nbd://fuzzed/export"), "{error}");
        }
        assert!(outcome.replies_taken <= stream.len() / 16 + 1);
        if outcome.finished && request.command == FuzzedCommand::Read {
            assert_eq!(outcome.read_data.len() as u64, request.length_bytes);
        }
    }
    assert!(
        cases < 1000 || (finished > 0 && lost > 0),
        "finished {finished}, lost {lost}: the mutations should do both"
    );
}

#[test]
fn a_server_error_chunk_fails_the_request_and_keeps_the_connection() {
    let request = FuzzedRequest {
        command: FuzzedCommand::Read,
        structured_replies: true,
        offset_bytes: 0,
        length_bytes: 512,
        part_bytes: 512,
    };
    let mut stream = Vec::new();
    wire::encode_chunk_error(&mut stream, cookie_of_part(0), wire::NBD_ENOSPC, "full");
    let outcome = feed_replies(request, &stream);
    assert!(outcome.finished);
    assert_eq!(outcome.connection_lost, None);
    let error = outcome.request_error.expect("the request failed");
    assert!(error.contains("full"), "{error}");
}
