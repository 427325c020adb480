//! Tests of the wire: golden bytes per message kind, round trips, hostile decodes.

use super::*;
use flashpipe_flash::{AckStatus, RuleViolation};
use proptest::prelude::*;

const LIMITS: WireLimits = WireLimits {
    max_page_bytes: 16,
    max_spare_bytes: 4,
};

fn address() -> FlashAddress {
    FlashAddress {
        device: 2,
        bus: 1,
        chip: 3,
        block: 0x0102,
        page: 7,
    }
}

/// One frame per message kind, as docs/cluster-wire.md spells them.
fn golden_frames() -> Vec<(&'static str, Frame)> {
    let request = |command| {
        Message::Request(FlashRequest {
            tag: 0x11,
            host: 1,
            command,
        })
    };
    vec![
        (
            "ReadPage",
            Frame {
                hops: 0,
                message: request(FlashCommand::ReadPage { address: address() }),
            },
        ),
        (
            "WritePage",
            Frame {
                hops: 1,
                message: request(FlashCommand::WritePage {
                    address: address(),
                    data: vec![0xAA, 0xBB],
                    spare: vec![0xCC],
                }),
            },
        ),
        (
            "EraseBlock",
            Frame {
                hops: 2,
                message: request(FlashCommand::EraseBlock { address: address() }),
            },
        ),
        (
            "Ack",
            Frame {
                hops: 2,
                message: Message::Ack(WireAck {
                    tag: 0x11,
                    host: 1,
                    kind: CommandKind::Read,
                    status: Status::Flash(AckStatus::Ok {
                        corrected_bits: 3,
                        corrected_symbols: 2,
                    }),
                    payload: Some(PagePayload {
                        data: vec![0xAA, 0xBB],
                        spare: vec![0xCC],
                    }),
                }),
            },
        ),
        (
            "Credit",
            Frame {
                hops: 0,
                message: Message::Credit(Credit {
                    channel: Channel::ReadData,
                    count: 8,
                }),
            },
        ),
    ]
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The golden frames' bytes, as docs/cluster-wire.md spells them.
const GOLDEN: [(&str, &str); 5] = [
    (
        "ReadPage",
        "46 50 43 4c 01 01 00 00 20 00 00 00 13 a2 68 67 11 00 00 00 00 00 00 00 01 00 00 00 02 00 00 00 01 00 00 00 03 00 00 00 02 01 00 00 07 00 00 00",
    ),
    (
        "WritePage",
        "46 50 43 4c 01 02 00 01 2b 00 00 00 dd 82 b9 89 11 00 00 00 00 00 00 00 01 00 00 00 02 00 00 00 01 00 00 00 03 00 00 00 02 01 00 00 07 00 00 00 02 00 00 00 01 00 00 00 aa bb cc",
    ),
    (
        "EraseBlock",
        "46 50 43 4c 01 03 00 02 20 00 00 00 5a 35 b2 dd 11 00 00 00 00 00 00 00 01 00 00 00 02 00 00 00 01 00 00 00 03 00 00 00 02 01 00 00 07 00 00 00",
    ),
    (
        "Ack",
        "46 50 43 4c 01 04 01 02 2f 00 00 00 af 32 d6 bf 11 00 00 00 00 00 00 00 01 00 00 00 01 00 00 00 00 00 00 00 03 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00 02 00 00 00 01 00 00 00 aa bb cc",
    ),
    (
        "Credit",
        "46 50 43 4c 01 05 00 00 08 00 00 00 05 0d 0a 81 02 00 00 00 08 00 00 00",
    ),
];

fn unhex(text: &str) -> Vec<u8> {
    text.split(' ')
        .map(|pair| u8::from_str_radix(pair, 16).unwrap())
        .collect()
}

#[test]
fn golden_bytes_encode_and_decode() {
    for ((name, frame), (golden_name, golden)) in golden_frames().into_iter().zip(GOLDEN) {
        assert_eq!(name, golden_name);
        let bytes = encode(&frame, LIMITS).unwrap();
        assert_eq!(hex(&bytes), golden, "{name}");
        let (decoded, used) = decode(&unhex(golden), LIMITS).unwrap();
        assert_eq!(decoded, frame, "{name}");
        assert_eq!(used, bytes.len());
    }
}

fn every_status() -> Vec<Status> {
    vec![
        Status::Flash(AckStatus::CLEAN),
        Status::Flash(AckStatus::Uncorrectable),
        Status::Flash(AckStatus::BadBlock),
        Status::Flash(AckStatus::RuleViolation(RuleViolation::NotErased {
            block: 4,
            page: 5,
        })),
        Status::Flash(AckStatus::RuleViolation(RuleViolation::OutOfOrder {
            expected_page: 1,
            page: 3,
        })),
        Status::Flash(AckStatus::RuleViolation(RuleViolation::AddressOutOfRange {
            field: "chip",
            value: 9,
            limit: 8,
        })),
        Status::Flash(AckStatus::RuleViolation(RuleViolation::WrongLength {
            field: "spare",
            length: 9,
            expected: 4,
        })),
        Status::NotOwner {
            device: 3,
            block: 77,
        },
        Status::Unreachable { device: 3, hop: 2 },
        Status::Busy { queue_limit: 64 },
        Status::UnknownHost {
            host: 9,
            host_count: 4,
        },
    ]
}

#[test]
fn every_status_round_trips() {
    for (index, status) in every_status().into_iter().enumerate() {
        let frame = Frame {
            hops: 3,
            message: Message::Ack(WireAck {
                tag: index as u64,
                host: 2,
                kind: CommandKind::Erase,
                status,
                payload: None,
            }),
        };
        let bytes = encode(&frame, LIMITS).unwrap();
        assert_eq!(decode(&bytes, LIMITS).unwrap(), (frame, bytes.len()));
    }
}

#[test]
fn encode_refuses_what_the_wire_cannot_carry() {
    let too_long = Frame::from(FlashRequest {
        tag: 1,
        host: 0,
        command: FlashCommand::WritePage {
            address: address(),
            data: vec![0; 17],
            spare: vec![],
        },
    });
    assert!(matches!(
        encode(&too_long, LIMITS),
        Err(EncodeError::TooLong { field: "data", .. })
    ));
    let write_ack = |status, payload| {
        Frame::from(WireAck {
            tag: 1,
            host: 0,
            kind: CommandKind::Write,
            status,
            payload,
        })
    };
    let payload_on_write = write_ack(
        Status::Flash(AckStatus::CLEAN),
        Some(PagePayload {
            data: vec![],
            spare: vec![],
        }),
    );
    let copy_back = Frame::from(FlashRequest {
        tag: 1,
        host: 0,
        command: FlashCommand::CopyBack {
            from: address(),
            to: address(),
            spare: vec![],
        },
    });
    let copy_back_refused = write_ack(
        Status::Flash(AckStatus::RuleViolation(RuleViolation::CopyBackRefused {
            refusal: flashpipe_flash::CopyBackRefusal::Unsupported,
        })),
        None,
    );
    for (frame, refused) in [
        (payload_on_write, EncodeError::PayloadOnNonRead),
        (copy_back, EncodeError::CopyBackNotCarried),
        (copy_back_refused, EncodeError::CopyBackNotCarried),
    ] {
        assert_eq!(encode(&frame, LIMITS), Err(refused));
    }
}

/// Recomputes the checksum of a frame edited in place.
fn reseal(bytes: &mut [u8]) {
    let crc = crc32c::crc32c_append(crc32c::crc32c(&bytes[..12]), &bytes[HEADER_BYTES..]);
    bytes[12..16].copy_from_slice(&crc.to_le_bytes());
}

/// Decodes golden frame `golden` with `replacement` written at `offset`, the checksum
/// recomputed when `seal`.
fn decode_edited(
    golden: usize,
    offset: usize,
    replacement: &[u8],
    seal: bool,
) -> Result<(Frame, usize), WireError> {
    let mut bytes = unhex(GOLDEN[golden].1);
    bytes[offset..offset + replacement.len()].copy_from_slice(replacement);
    if seal {
        reseal(&mut bytes);
    }
    decode(&bytes, LIMITS)
}

#[test]
fn hostile_frames_get_their_own_errors() {
    let good = unhex(GOLDEN[1].1);
    for cut in 0..good.len() {
        let result = decode(&good[..cut], LIMITS);
        assert!(
            matches!(result, Err(WireError::Truncated { .. })),
            "cut at {cut}"
        );
    }
    let last = good.len() - 1;
    let cases: [(usize, usize, &[u8], bool, &str); 10] = [
        (1, last, &[0xcd], false, "checksum mismatch"),
        (1, 0, b"X", false, "bad magic"),
        (1, 4, &[2], false, "unsupported wire version 2"),
        (1, 5, &[9], false, "unknown frame kind 9"),
        (
            1,
            6,
            &[1],
            false,
            "flags 0x01 are not defined for frame kind 2",
        ),
        (1, 8, &[0xff; 4], false, "over the limit of 64"),
        (
            1,
            48,
            &[17, 0, 0, 0],
            true,
            "data length of 17 is over the limit of 16",
        ),
        (1, 48, &[3, 0, 0, 0], true, "its fields say 44"),
        (3, 32, &[99], true, "status holds unknown code 99"),
        (4, 16, &[7], true, "channel holds unknown code 7"),
    ];
    for (golden, offset, replacement, seal, expected) in cases {
        let error = decode_edited(golden, offset, replacement, seal).unwrap_err();
        assert!(
            error.to_string().contains(expected),
            "{error} lacks {expected}"
        );
    }
}

fn arbitrary_frame() -> impl Strategy<Value = Frame> {
    let address = (
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(|(device, bus, chip, block, page)| FlashAddress {
            device,
            bus,
            chip,
            block,
            page,
        });
    let bytes = |limit: usize| proptest::collection::vec(any::<u8>(), 0..=limit);
    let command = prop_oneof![
        address
            .clone()
            .prop_map(|address| FlashCommand::ReadPage { address }),
        address
            .clone()
            .prop_map(|address| FlashCommand::EraseBlock { address }),
        (address, bytes(16), bytes(4)).prop_map(|(address, data, spare)| {
            FlashCommand::WritePage {
                address,
                data,
                spare,
            }
        }),
    ];
    let request = (any::<u64>(), any::<u32>(), command)
        .prop_map(|(tag, host, command)| Message::Request(FlashRequest { tag, host, command }));
    let statuses = every_status();
    let ack = (
        any::<u64>(),
        any::<u32>(),
        0..statuses.len(),
        proptest::option::of((bytes(16), bytes(4))),
        0..3u8,
    )
        .prop_map(move |(tag, host, status, payload, kind)| {
            let kind = match (payload.is_some(), kind) {
                (true, _) | (false, 0) => CommandKind::Read,
                (false, 1) => CommandKind::Write,
                (false, _) => CommandKind::Erase,
            };
            Message::Ack(WireAck {
                tag,
                host,
                kind,
                status: statuses[status].clone(),
                payload: payload.map(|(data, spare)| PagePayload { data, spare }),
            })
        });
    let credit = (0..4u8, any::<u32>()).prop_map(|(channel, count)| {
        Message::Credit(Credit {
            channel: Channel::from_code(channel).unwrap(),
            count,
        })
    });
    (any::<u8>(), prop_oneof![request, ack, credit])
        .prop_map(|(hops, message)| Frame { hops, message })
}

proptest! {
    #[test]
    fn frames_round_trip(frame in arbitrary_frame()) {
        let bytes = encode(&frame, LIMITS).unwrap();
        prop_assert!(bytes.len() <= LIMITS.max_frame_bytes());
        prop_assert_eq!(frame_length(&bytes, LIMITS).unwrap(), bytes.len());
        prop_assert_eq!(decode(&bytes, LIMITS).unwrap(), (frame, bytes.len()));
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
        let _ = decode(&bytes, LIMITS);
    }

    #[test]
    fn resealed_mutations_never_panic(
        frame in arbitrary_frame(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
    ) {
        let mut bytes = encode(&frame, LIMITS).unwrap();
        let length = bytes.len();
        for (at, value) in flips {
            bytes[at % length] = value;
        }
        if bytes.len() >= HEADER_BYTES {
            reseal(&mut bytes);
        }
        if let Ok((decoded, used)) = decode(&bytes, LIMITS) {
            prop_assert_eq!(encode(&decoded, LIMITS).unwrap(), bytes[..used].to_vec());
        }
    }
}
