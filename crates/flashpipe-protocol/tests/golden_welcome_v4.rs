//! Golden bytes of protocol version 4's handshake: a hello offering versions 3 to 4 and a
//! welcome of version 4 with each value of its store clock byte. Version 4 changed only the
//! welcome (one byte at its end); every header still carries version 3, and the version-3
//! frames of `golden_frames.rs` stay as they are. Each frame must decode to the fields
//! named here and encode back to exactly these bytes. This file is never edited to make a
//! change pass.

use flashpipe_protocol::{
    decode_frame, encode_frame, ClockKind, DecodeError, Frame, Hello, ServerLimits, SharedRegion,
    Welcome, FRAME_VERSION, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION,
};

/// A hello of a client speaking versions 3 to 4, mapping memory, named "c".
const HELLO_V3_TO_V4: &str = "465053560300010000000000000000000a0000000000000003000400010100000063";

/// The version-3 golden welcome of `golden_frames.rs` (no store clock byte).
const WELCOME_V3: &str = "46505356030002000000000000000000550000000000000003002a0000000100000073abababababababababababababababab01000000020000000300000000000000040000000500000000000000060000000700000000000000080000000102000000001000000000000000";

/// The same welcome at version 4: body one byte longer (0x56), version field 4, and the
/// store clock byte last (`00` not told, `01` real, `02` virtual).
const WELCOME_V4: [(Option<ClockKind>, &str); 3] = [
    (None, "46505356030002000000000000000000560000000000000004002a0000000100000073abababababababababababababababab0100000002000000030000000000000004000000050000000000000006000000070000000000000008000000010200000000100000000000000000"),
    (Some(ClockKind::Real), "46505356030002000000000000000000560000000000000004002a0000000100000073abababababababababababababababab0100000002000000030000000000000004000000050000000000000006000000070000000000000008000000010200000000100000000000000001"),
    (Some(ClockKind::Virtual), "46505356030002000000000000000000560000000000000004002a0000000100000073abababababababababababababababab0100000002000000030000000000000004000000050000000000000006000000070000000000000008000000010200000000100000000000000002"),
];

fn bytes_of(hex: &str) -> Vec<u8> {
    assert_eq!(hex.len() % 2, 0, "odd hex length");
    (0..hex.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).expect("hex digits"))
        .collect()
}

fn welcome(version: u16, store_clock: Option<ClockKind>) -> Welcome {
    Welcome {
        version,
        server_pid: 42,
        store_path: "s".into(),
        store_identity: Some([0xab; 16]),
        limits: ServerLimits {
            max_body_bytes: 1,
            max_write_bytes: 2,
            max_read_bytes: 3,
            max_read_files_count: 4,
            max_read_files_bytes: 5,
            max_in_flight_per_client: 6,
            max_bytes_in_flight_per_client: 7,
            max_read_handles_per_client: 8,
        },
        read_region: Some(SharedRegion {
            slot_count: 2,
            slot_size_bytes: 4096,
        }),
        write_region: None,
        store_clock,
    }
}

#[test]
fn the_versions_spoken_are_three_to_six_and_headers_carry_three() {
    assert_eq!(MIN_PROTOCOL_VERSION, 3);
    assert_eq!(PROTOCOL_VERSION, 6);
    assert_eq!(FRAME_VERSION, 3);
}

#[test]
fn a_hello_offering_three_to_four_is_these_bytes() {
    let frame = Frame::Hello(Hello {
        min_version: 3,
        max_version: 4,
        map_memory: true,
        client_name: "c".into(),
    });
    let bytes = bytes_of(HELLO_V3_TO_V4);
    assert_eq!(encode_frame(&frame), bytes);
    assert_eq!(decode_frame(&bytes), Ok(frame));
}

#[test]
fn a_version_four_welcome_ends_with_the_store_clock_byte() {
    for (store_clock, hex) in WELCOME_V4 {
        let bytes = bytes_of(hex);
        let frame = Frame::Welcome(welcome(4, store_clock));
        assert_eq!(encode_frame(&frame), bytes, "clock {store_clock:?}");
        assert_eq!(decode_frame(&bytes), Ok(frame), "clock {store_clock:?}");
    }
}

#[test]
fn a_version_three_welcome_has_no_store_clock_and_keeps_its_bytes() {
    let bytes = bytes_of(WELCOME_V3);
    let frame = Frame::Welcome(welcome(3, None));
    assert_eq!(decode_frame(&bytes), Ok(frame.clone()));
    assert_eq!(encode_frame(&frame), bytes);
}

#[test]
fn a_bad_or_missing_store_clock_byte_is_refused_by_name() {
    let mut bad = bytes_of(WELCOME_V4[2].1);
    *bad.last_mut().expect("a body") = 3;
    assert_eq!(
        decode_frame(&bad),
        Err(DecodeError::BadValue {
            field: "welcome.store_clock",
            value: 3
        })
    );
    let mut short = bytes_of(WELCOME_V4[2].1);
    short.pop();
    short[16] = 0x55;
    match decode_frame(&short) {
        Err(DecodeError::Truncated { field, .. }) => assert_eq!(field, "welcome.store_clock"),
        other => panic!("a version-4 welcome without its clock byte decoded as {other:?}"),
    }
}

#[test]
fn a_server_speaks_the_highest_version_both_speak() {
    let hello = |min_version, max_version| Hello {
        min_version,
        max_version,
        map_memory: false,
        client_name: "c".into(),
    };
    assert_eq!(hello(3, 3).common_version(), Some(3));
    assert_eq!(hello(3, 4).common_version(), Some(4));
    assert_eq!(hello(0, 3).common_version(), Some(3));
    assert_eq!(hello(3, 5).common_version(), Some(5));
    assert_eq!(hello(4, u16::MAX).common_version(), Some(PROTOCOL_VERSION));
    assert_eq!(hello(6, 9).common_version(), Some(6));
    assert_eq!(hello(7, 9).common_version(), None);
    assert_eq!(hello(1, 2).common_version(), None);
    assert_eq!(hello(4, 3).common_version(), None);
    assert!(!Welcome::carries_store_clock(3));
    assert!(Welcome::carries_store_clock(4));
    assert!(Welcome::carries_store_clock(5));
}
