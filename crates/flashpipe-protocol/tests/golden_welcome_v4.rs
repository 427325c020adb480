//! Golden bytes of protocol version 4's handshake: a hello offering versions 3 to 4 and a
//! welcome of version 4 with each value of its store clock byte. Version 4 changed only the
//! welcome (one byte at its end); every header still carries version 3, and the version-3
//! frames of `golden_frames.rs` stay as they are. Each frame must decode to the fields
//! named here and encode back to exactly these bytes. This file is never edited to make a
//! change pass (the versions this build speaks are checked in `golden_welcome_v6.rs`).

mod common;

use common::{bytes_of, check_last_byte_missing, golden_welcome};
use flashpipe_protocol::{decode_frame, encode_frame, ClockKind, DecodeError, Frame, Hello};

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
        let frame = Frame::Welcome(golden_welcome(4, store_clock, false));
        assert_eq!(encode_frame(&frame), bytes, "clock {store_clock:?}");
        assert_eq!(decode_frame(&bytes), Ok(frame), "clock {store_clock:?}");
    }
}

#[test]
fn a_version_three_welcome_has_no_store_clock_and_keeps_its_bytes() {
    let bytes = bytes_of(WELCOME_V3);
    let frame = Frame::Welcome(golden_welcome(3, None, false));
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
    check_last_byte_missing(WELCOME_V4[2].1, 0x55, "welcome.store_clock");
}
