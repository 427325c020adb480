//! Golden bytes of protocol version 6's welcome: version 4's welcome (`golden_welcome_v4.rs`)
//! with its version field 6 and one more byte at its end, the flags (bit 0: the store is
//! served read-only; every other bit refused). Every header still carries version 3. Each
//! frame must decode to the fields named here and encode back to exactly these bytes. This
//! file is never edited to make a change pass; it also pins the versions this build speaks.

use flashpipe_protocol::{
    decode_frame, encode_frame, ClockKind, DecodeError, Frame, Hello, ServerLimits, SharedRegion,
    Welcome, FRAME_VERSION, MIN_PROTOCOL_VERSION, PROTOCOL_VERSION, WELCOME_FLAGS_VERSION,
};

/// Version 4's real-clock golden welcome at version 6: body 0x57 bytes, version field 6,
/// the store clock byte `01`, then the flags byte (`00` read-write, `01` read-only).
const WELCOME_V6: [(bool, &str); 2] = [
    (false, "46505356030002000000000000000000570000000000000006002a0000000100000073abababababababababababababababab010000000200000003000000000000000400000005000000000000000600000007000000000000000800000001020000000010000000000000000100"),
    (true, "46505356030002000000000000000000570000000000000006002a0000000100000073abababababababababababababababab010000000200000003000000000000000400000005000000000000000600000007000000000000000800000001020000000010000000000000000101"),
];

fn bytes_of(hex: &str) -> Vec<u8> {
    assert_eq!(hex.len() % 2, 0, "odd hex length");
    (0..hex.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).expect("hex digits"))
        .collect()
}

fn welcome(version: u16, read_only: bool) -> Welcome {
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
        store_clock: Some(ClockKind::Real),
        read_only,
    }
}

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
        let frame = Frame::Welcome(welcome(6, read_only));
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
    let frame = Frame::Welcome(welcome(5, false));
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
    let mut short = bytes_of(WELCOME_V6[1].1);
    short.pop();
    short[16] = 0x56;
    match decode_frame(&short) {
        Err(DecodeError::Truncated { field, .. }) => assert_eq!(field, "welcome.flags"),
        other => panic!("a version-6 welcome without its flags byte decoded as {other:?}"),
    }
}

#[test]
#[should_panic(expected = "no field for the read-only flag")]
fn a_read_only_welcome_of_an_older_version_is_not_encoded() {
    encode_frame(&Frame::Welcome(welcome(5, true)));
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
