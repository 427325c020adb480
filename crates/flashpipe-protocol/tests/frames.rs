//! The frame format: golden bytes of a few frames (docs/protocol.md's examples), round
//! trips of every frame kind, and arbitrary bytes decoding to an error or a frame,
//! never a panic.

mod common;

use common::check_encoding;
use flashpipe_api::{Command, CopyMethod, CopyReport, FileId, FileStat, FsStats, Reply};
use flashpipe_protocol::{
    decode_frame, encode_frame, CancelOutcome, CheckSummary, DataPayload, DecodeError, ErrorCode,
    Frame, Hello, RemoteError, Request, Response, ServerLimits, SharedRegion, SharedWindow,
    Welcome, WriteGrant,
};
use flashpipe_protocol::{ClockKind, WritePayload};
use proptest::prelude::*;

#[test]
fn a_create_request_is_these_bytes() {
    let frame = Frame::Request {
        request_id: 5,
        request: Request::Command(Command::Create { name: "ab".into() }),
    };
    check_encoding(
        frame,
        [
            b"FPSV".as_slice(),
            &[3, 0],                   // version 3
            &[0x01, 0x01],             // kind 0x0101 create
            &[5, 0, 0, 0, 0, 0, 0, 0], // request id 5
            &[6, 0, 0, 0],             // body length 6
            &[0, 0, 0, 0],             // flags
            &[2, 0, 0, 0],             // name length 2
            b"ab",
        ]
        .concat(),
    );
}

#[test]
fn a_read_by_reference_answer_is_these_bytes() {
    let frame = Frame::Response {
        request_id: 0x0102,
        response: Response::Reply(Reply::Data(DataPayload::Shared(SharedWindow {
            handle: 7,
            slot: 3,
            window_start: 512,
            length_bytes: 4096,
        }))),
    };
    check_encoding(
        frame,
        [
            b"FPSV".as_slice(),
            &[3, 0],
            &[0x03, 0x02], // kind 0x0203 data
            &[0x02, 0x01, 0, 0, 0, 0, 0, 0],
            &[29, 0, 0, 0],
            &[0, 0, 0, 0],
            &[1],                       // tag: shared
            &[7, 0, 0, 0, 0, 0, 0, 0],  // handle
            &[3, 0, 0, 0],              // slot
            &[0, 2, 0, 0, 0, 0, 0, 0],  // window start 512
            &[0, 16, 0, 0, 0, 0, 0, 0], // length 4096
        ]
        .concat(),
    );
}

#[test]
fn an_error_answer_is_these_bytes() {
    let frame = Frame::Error {
        request_id: 9,
        error: RemoteError::limit(ErrorCode::TooManyInFlight, "x", 64),
    };
    check_encoding(
        frame,
        [
            b"FPSV".as_slice(),
            &[3, 0],
            &[0x04, 0x00],
            &[9, 0, 0, 0, 0, 0, 0, 0],
            &[16, 0, 0, 0],
            &[0, 0, 0, 0],
            &[101, 0],                     // code 101
            &[1, 64, 0, 0, 0, 0, 0, 0, 0], // limit present, 64
            &[1, 0, 0, 0],
            b"x",
        ]
        .concat(),
    );
}

#[test]
fn decoding_names_what_is_wrong() {
    let mut bytes = encode_frame(&Frame::Request {
        request_id: 1,
        request: Request::Command(Command::Stat { name: "abc".into() }),
    });
    let length = bytes.len();
    bytes[length - 3] = 0xff;
    assert_eq!(
        decode_frame(&bytes).unwrap_err(),
        DecodeError::BadUtf8 { field: "stat.name" }
    );
    bytes[0] = b'X';
    assert!(matches!(
        decode_frame(&bytes),
        Err(DecodeError::BadMagic { .. })
    ));
    let mut long = encode_frame(&Frame::Request {
        request_id: 1,
        request: Request::Command(Command::List),
    });
    long[16..20].copy_from_slice(&(17u32 << 20).to_le_bytes());
    let error = decode_frame(&long).unwrap_err();
    assert!(
        matches!(error, DecodeError::BodyTooLarge { limit_bytes, .. } if limit_bytes == 16 << 20),
        "{error}"
    );
    let mut zero_id = encode_frame(&Frame::Request {
        request_id: 1,
        request: Request::Command(Command::List),
    });
    zero_id[8] = 0;
    assert!(matches!(
        decode_frame(&zero_id),
        Err(DecodeError::BadRequestId { .. })
    ));
    let mut many = encode_frame(&Frame::Request {
        request_id: 1,
        request: Request::Command(Command::ReadFiles { names: vec![] }),
    });
    let body_start = 24;
    many[body_start..body_start + 4].copy_from_slice(&1000u32.to_le_bytes());
    let error = decode_frame(&many).unwrap_err();
    assert_eq!(
        error,
        DecodeError::TooMany {
            field: "read_files.count",
            count: 1000,
            limit: 256
        }
    );
    assert!(error.to_string().contains("read_files.count"));
}

fn name() -> impl Strategy<Value = String> {
    "[a-z0-9._-]{0,40}"
}

fn file_stat() -> impl Strategy<Value = FileStat> {
    (
        any::<u64>(),
        name(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(|(id, name, size, blocks, shared, clock)| FileStat {
            file_id: FileId(id),
            name,
            size_bytes: size,
            allocated_blocks: blocks,
            shared_bytes: shared,
            modified_clock_ns: clock,
            mode: None,
            owner: None,
            modified_wall_ns: None,
        })
}

fn copy_method() -> impl Strategy<Value = CopyMethod> {
    prop_oneof![
        Just(CopyMethod::ReferenceOrFail),
        Just(CopyMethod::ReferenceOrBytes),
        Just(CopyMethod::Bytes),
        Just(CopyMethod::Share)
    ]
}

fn remote_error() -> impl Strategy<Value = RemoteError> {
    (
        any::<u16>(),
        "[ -~]{0,60}",
        proptest::option::of(any::<u64>()),
    )
        .prop_map(|(code, message, limit)| RemoteError {
            code: ErrorCode::from_wire(code),
            message,
            limit,
        })
}

fn payload() -> impl Strategy<Value = DataPayload> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300).prop_map(DataPayload::Inline),
        (any::<u64>(), any::<u32>(), any::<u64>(), any::<u64>()).prop_map(
            |(handle, slot, window_start, length_bytes)| {
                DataPayload::Shared(SharedWindow {
                    handle,
                    slot,
                    window_start,
                    length_bytes,
                })
            }
        ),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        name().prop_map(|name| Request::Command(Command::Create { name })),
        (
            name(),
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 0..300)
        )
            .prop_map(
                |(name, offset_bytes, data)| Request::Command(Command::Write {
                    name,
                    offset_bytes,
                    data: WritePayload::Inline(data)
                })
            ),
        (name(), any::<u64>(), any::<u32>(), any::<u32>()).prop_map(
            |(name, offset_bytes, slot, length_bytes)| Request::Command(Command::Write {
                name,
                offset_bytes,
                data: WritePayload::Granted { slot, length_bytes }
            })
        ),
        (name(), any::<u64>(), any::<u64>()).prop_map(|(name, offset_bytes, length_bytes)| {
            Request::Command(Command::Read {
                name,
                offset_bytes,
                length_bytes,
            })
        }),
        proptest::collection::vec(name(), 0..20)
            .prop_map(|names| Request::Command(Command::ReadFiles { names })),
        (name(), any::<u64>()).prop_map(|(name, size_bytes)| Request::Command(Command::Truncate {
            name,
            size_bytes
        })),
        name().prop_map(|name| Request::Command(Command::Delete { name })),
        (name(), name()).prop_map(|(from, to)| Request::Command(Command::Rename {
            from,
            to,
            replace: false
        })),
        (name(), name()).prop_map(|(from, to)| Request::Command(Command::Rename {
            from,
            to,
            replace: true
        })),
        (name(), name(), copy_method())
            .prop_map(|(from, to, method)| Request::Command(Command::Copy { from, to, method })),
        name().prop_map(|name| Request::Command(Command::Stat { name })),
        Just(Request::Command(Command::List)),
        Just(Request::Command(Command::Stats)),
        Just(Request::Command(Command::Flush)),
        Just(Request::Command(Command::Check)),
        any::<u64>().prop_map(|target| Request::Cancel { target }),
        Just(Request::GrantWrite),
        Just(Request::OpenRings),
        any::<u64>().prop_map(|length_bytes| Request::Region(
            flashpipe_protocol::RegionRequest::Register { length_bytes }
        )),
        (name(), any::<[u64; 4]>()).prop_map(|(name, [offset, length, region, at])| {
            Request::Region(flashpipe_protocol::RegionRequest::ReadInto(
                flashpipe_protocol::ReadInto {
                    name,
                    offset_bytes: offset,
                    length_bytes: length,
                    region,
                    region_offset_bytes: at,
                },
            ))
        }),
        any::<u64>().prop_map(|region| Request::Region(
            flashpipe_protocol::RegionRequest::Unregister { region }
        )),
    ]
}

fn response() -> impl Strategy<Value = Response> {
    prop_oneof![
        Just(Response::Reply(Reply::Done)),
        any::<u64>().prop_map(|length_bytes| Response::Reply(Reply::Written {
            buffer: length_bytes
        })),
        payload().prop_map(|value| Response::Reply(Reply::Data(value))),
        proptest::collection::vec(
            prop_oneof![payload().prop_map(Ok), remote_error().prop_map(Err)],
            0..10
        )
        .prop_map(|value| Response::Reply(Reply::Files(value))),
        file_stat().prop_map(|value| Response::Reply(Reply::Stat(value))),
        proptest::collection::vec(file_stat(), 0..10)
            .prop_map(|value| Response::Reply(Reply::List(value))),
        (any::<u32>(), any::<[u64; 9]>(), any::<bool>()).prop_map(|(block, values, unflushed)| {
            Response::Reply(Reply::Stats(FsStats {
                fs_block_size_bytes: block,
                fs_block_count: values[0],
                used_blocks: values[1],
                shared_blocks: values[7],
                saved_blocks: values[8],
                free_blocks: values[2],
                pending_free_blocks: values[3],
                reserved_blocks: values[4],
                file_count: values[5],
                commit_sequence: values[6],
                unflushed_changes: unflushed,
            }))
        }),
        (
            any::<bool>(),
            proptest::option::of(any::<u64>()),
            any::<u64>(),
            proptest::collection::vec("[ -~]{0,30}", 0..5),
            "[ -~]{0,80}"
        )
            .prop_map(
                |(clean, commit_sequence, file_count, findings, report_text)| Response::Reply(
                    Reply::Check(CheckSummary {
                        clean,
                        commit_sequence,
                        file_count,
                        findings,
                        report_text
                    })
                )
            ),
        (any::<u64>(), any::<u64>()).prop_map(|(blocks_by_reference, bytes_by_bytes)| {
            Response::Reply(Reply::Copied(CopyReport {
                blocks_by_reference,
                bytes_by_bytes,
            }))
        }),
        (any::<u32>(), any::<u32>()).prop_map(|(slot, slot_size_bytes)| Response::Granted(
            WriteGrant {
                slot,
                slot_size_bytes
            }
        )),
        prop_oneof![
            Just(CancelOutcome::NotInFlight),
            Just(CancelOutcome::Running)
        ]
        .prop_map(Response::Cancel),
        (any::<u32>(), any::<u32>()).prop_map(|(request, reply)| Response::RingsOpened(
            flashpipe_protocol::RingsOpened {
                request_ring_capacity_bytes: request,
                reply_ring_capacity_bytes: reply,
                engine_doorbell: false,
            }
        )),
        (any::<u64>(), any::<u32>()).prop_map(|(region, block_bytes)| Response::Region(
            flashpipe_protocol::RegionResponse::Registered {
                region,
                block_bytes,
            }
        )),
        any::<u64>().prop_map(|length_bytes| Response::Region(
            flashpipe_protocol::RegionResponse::ReadIntoDone { length_bytes }
        )),
    ]
}

fn region() -> impl Strategy<Value = Option<SharedRegion>> {
    proptest::option::of(
        (any::<u32>(), any::<u64>()).prop_map(|(slot_count, slot_size_bytes)| SharedRegion {
            slot_count,
            slot_size_bytes,
        }),
    )
}

fn frame() -> impl Strategy<Value = Frame> {
    let request_id = 1..u64::MAX;
    prop_oneof![
        (any::<u16>(), any::<u16>(), any::<bool>(), name()).prop_map(
            |(min_version, max_version, map_memory, client_name)| Frame::Hello(Hello {
                min_version,
                max_version,
                map_memory,
                client_name
            })
        ),
        (
            any::<u16>(),
            any::<u32>(),
            (
                name(),
                proptest::option::of(
                    any::<[u8; 16]>()
                        .prop_filter("not all zero", |bytes| bytes.iter().any(|&byte| byte != 0))
                )
            ),
            any::<[u32; 5]>(),
            any::<[u64; 3]>(),
            region(),
            region(),
            proptest::option::of(prop_oneof![Just(ClockKind::Real), Just(ClockKind::Virtual)]),
            any::<bool>()
        )
            .prop_map(
                |(
                    version,
                    server_pid,
                    (store_path, store_identity),
                    small,
                    large,
                    read_region,
                    write_region,
                    store_clock,
                    read_only,
                )| {
                    Frame::Welcome(Welcome {
                        version,
                        server_pid,
                        store_path,
                        store_identity,
                        limits: ServerLimits {
                            max_body_bytes: small[0],
                            max_write_bytes: small[1],
                            max_read_bytes: large[0],
                            max_read_files_count: small[2],
                            max_read_files_bytes: large[1],
                            max_in_flight_per_client: small[3],
                            max_bytes_in_flight_per_client: large[2],
                            max_read_handles_per_client: small[4],
                        },
                        read_region,
                        write_region,
                        store_clock: store_clock.filter(|_| Welcome::carries_store_clock(version)),
                        read_only: read_only && Welcome::carries_flags(version),
                    })
                }
            ),
        proptest::collection::vec(any::<u64>(), 0..50)
            .prop_map(|handles| Frame::Release { handles }),
        (any::<u64>(), remote_error())
            .prop_map(|(request_id, error)| Frame::Error { request_id, error }),
        (request_id.clone(), request()).prop_map(|(request_id, request)| Frame::Request {
            request_id,
            request
        }),
        (request_id, response()).prop_map(|(request_id, response)| Frame::Response {
            request_id,
            response
        }),
    ]
}

proptest! {
    #[test]
    fn every_frame_kind_round_trips(frame in frame()) {
        let bytes = encode_frame(&frame);
        prop_assert_eq!(decode_frame(&bytes), Ok(frame));
    }

    #[test]
    fn arbitrary_bytes_decode_to_a_frame_or_an_error(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode_frame(&bytes);
    }

    #[test]
    fn arbitrary_bodies_under_a_valid_header_never_panic(kind in 0usize..flashpipe_protocol::frame::ALL_FRAME_KINDS.len(), body in proptest::collection::vec(any::<u8>(), 0..200)) {
        let kind = flashpipe_protocol::frame::ALL_FRAME_KINDS[kind];
        let request_id = match kind {
            flashpipe_protocol::FrameKind::Hello | flashpipe_protocol::FrameKind::Welcome | flashpipe_protocol::FrameKind::Release => 0,
            _ => 1,
        };
        let mut bytes = flashpipe_protocol::encode_header(kind, request_id, body.len() as u32).to_vec();
        bytes.extend_from_slice(&body);
        let _ = decode_frame(&bytes);
    }

    #[test]
    fn a_truncated_or_extended_frame_is_an_error(frame in frame(), cut in 1usize..40) {
        let bytes = encode_frame(&frame);
        let cut = cut.min(bytes.len());
        prop_assert!(decode_frame(&bytes[..bytes.len() - cut]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        prop_assert!(decode_frame(&longer).is_err());
    }
}

#[test]
fn the_one_copy_data_frame_is_the_data_response() {
    for length in [0usize, 1, 4096, 100_000] {
        let bytes: Vec<u8> = (0..length).map(|index| (index % 253) as u8).collect();
        let frame = Frame::Response {
            request_id: 77,
            response: Response::Reply(Reply::Data(DataPayload::Inline(bytes.clone()))),
        };
        assert_eq!(
            flashpipe_protocol::encode_inline_data(77, &bytes),
            encode_frame(&frame)
        );
    }
}

proptest! {
    #[test]
    fn frames_read_from_a_stream_are_the_frames_decoded(frame in frame(), bad_tag in 2u8..=255) {
        let bytes = encode_frame(&frame);
        let mut stream = std::io::Cursor::new(bytes.clone());
        let read = flashpipe_protocol::read_frame(&mut stream, flashpipe_protocol::MAX_BODY_BYTES).expect("read").expect("a frame");
        prop_assert_eq!(read, frame);
        let mut damaged = flashpipe_protocol::encode_inline_data(3, &[1, 2, 3]);
        damaged[24] = bad_tag;
        let mut stream = std::io::Cursor::new(damaged.clone());
        let from_stream = flashpipe_protocol::read_frame(&mut stream, flashpipe_protocol::MAX_BODY_BYTES).map_err(|error| error.to_string());
        let decoded = decode_frame(&damaged).map_err(|error| format!("malformed frame: {error}"));
        prop_assert_eq!(from_stream.map(Option::unwrap), decoded);
        let mut write = encode_frame(&Frame::Request { request_id: 4, request: Request::Command(Command::Write { name: "w".into(), offset_bytes: 9, data: WritePayload::Inline(vec![7; 10]) }) });
        write[24] = bad_tag;
        let mut stream = std::io::Cursor::new(write.clone());
        let from_stream = flashpipe_protocol::read_frame(&mut stream, flashpipe_protocol::MAX_BODY_BYTES).map_err(|error| error.to_string());
        let decoded = decode_frame(&write).map_err(|error| format!("malformed frame: {error}"));
        prop_assert_eq!(from_stream.map(Option::unwrap), decoded);
        let mut short = flashpipe_protocol::encode_inline_data(3, &[1, 2, 3]);
        short.pop();
        let mut stream = std::io::Cursor::new(short);
        prop_assert!(flashpipe_protocol::read_frame(&mut stream, flashpipe_protocol::MAX_BODY_BYTES).is_err());
    }
}

proptest! {
    #[test]
    fn arbitrary_bodies_read_from_a_stream_never_panic(kind in 0usize..flashpipe_protocol::frame::ALL_FRAME_KINDS.len(), body in proptest::collection::vec(any::<u8>(), 0..200), extra in 0u32..50) {
        let kind = flashpipe_protocol::frame::ALL_FRAME_KINDS[kind];
        let request_id = match kind {
            flashpipe_protocol::FrameKind::Hello | flashpipe_protocol::FrameKind::Welcome | flashpipe_protocol::FrameKind::Release => 0,
            _ => 1,
        };
        let mut bytes = flashpipe_protocol::encode_header(kind, request_id, body.len() as u32 + extra).to_vec();
        bytes.extend_from_slice(&body);
        let mut stream = std::io::Cursor::new(bytes);
        let _ = flashpipe_protocol::read_frame(&mut stream, flashpipe_protocol::MAX_BODY_BYTES);
    }
}
