//! Golden bytes of protocol version 6's welcome: version 4's welcome (`golden_welcome_v4.rs`)
//! with its version field 6 and one more byte at its end, the flags (bit 0: the store is
//! served read-only; every other bit refused). Every header still carries version 3. Each
//! frame must decode to the fields named here and encode back to exactly these bytes. This
//! file is never edited to make a change pass; it also pins the versions this build speaks.

mod common;

use common::{bytes_of, check_last_byte_missing, golden_welcome};
use flashpipe_protocol::{
    decode_frame, encode_frame, ClockKind, DecodeError, Frame, Hello, Welcome, FRAME_VERSION,
    MIN_PROTOCOL_VERSION, PROTOCOL_VERSION, WELCOME_FLAGS_VERSION,
};

/// Version 4's real-clock golden welcome at version 6: body 0x57 bytes, version field 6,
/// the store clock byte `01`, then the flags byte (`00` read-write, `01` read-only).
const WELCOME_V6: [(bool, &str); 2] = [
    (false, "46505356030002000000000000000000570000000000000006002a0000000100000073abababababababababababababababab010000000200000003000000000000000400000005000000000000000600000007000000000000000800000001020000000010000000000000000100"),
    (true, "46505356030002000000000000000000570000000000000006002a0000000100000073abababababababababababababababab010000000200000003000000000000000400000005000000000000000600000007000000000000000800000001020000000010000000000000000101"),
];

#[test]
fn the_versions_spoken_are_three_to_six_and_headers_carry_three() {
    assert_eq!(MIN_PROTOCOL_VERSION, 3);
    assert_eq!(PROTOCOL_VERSION, 6);
    assert_eq!(WELCOME_FLAGS_VERSION, 6);
    assert_eq!(FRAME_VERSION, 3);
}

#[test]
fn a_version_six_welcome_ends_with_the_flags_byte() {
    for (read_only, hex) in WELCOME_V6 {
        let bytes = bytes_of(hex);
        let frame = Frame::Welcome(golden_welcome(6, Some(ClockKind::Real), read_only));
        assert_eq!(encode_frame(&frame), bytes, "read-only {read_only}");
        assert_eq!(decode_frame(&bytes), Ok(frame), "read-only {read_only}");
    }
}

#[test]
fn a_version_five_welcome_has_no_flags_and_reads_as_read_write() {
    let mut bytes = bytes_of(WELCOME_V6[0].1);
    bytes.pop();
    bytes[16] = 0x56;
    bytes[24] = 5;
    let frame = Frame::Welcome(golden_welcome(5, Some(ClockKind::Real), false));
    assert_eq!(decode_frame(&bytes), Ok(frame.clone()));
    assert_eq!(encode_frame(&frame), bytes);
}

#[test]
fn unknown_flag_bits_and_a_missing_flags_byte_are_refused_by_name() {
    for flags in [2u8, 0x80, 0xff] {
        let mut bad = bytes_of(WELCOME_V6[1].1);
        *bad.last_mut().expect("a body") = flags;
        assert_eq!(
            decode_frame(&bad),
            Err(DecodeError::BadValue {
                field: "welcome.flags",
                value: u64::from(flags)
            })
        );
    }
    check_last_byte_missing(WELCOME_V6[1].1, 0x56, "welcome.flags");
}

#[test]
#[should_panic(expected = "no field for the read-only flag")]
fn a_read_only_welcome_of_an_older_version_is_not_encoded() {
    encode_frame(&Frame::Welcome(golden_welcome(
        5,
        Some(ClockKind::Real),
        true,
    )));
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
    assert_eq!(hello(4, u16::MAX).common_version(), Some(6));
    assert_eq!(hello(7, 9).common_version(), None);
    assert_eq!(hello(1, 2).common_version(), None);
    assert_eq!(hello(4, 3).common_version(), None);
    assert!(!Welcome::carries_store_clock(3));
    assert!(Welcome::carries_store_clock(4));
    assert!(!Welcome::carries_flags(5));
    assert!(Welcome::carries_flags(6));
}
