//! Golden bytes of the version-6 rings-opened answer that carries the engine's doorbell
//! (docs/protocol.md, "Frames through shared-memory rings"): the version-5 body, byte for
//! byte, then one flag byte 1. The body without the flag still decodes (no doorbell), so a
//! version-5 client, which the server never sends the flag, reads every answer it gets;
//! any other flag value or a longer body is refused.

mod common;

use common::{bytes_of, round_trip};
use flashpipe_protocol::{
    decode_frame, Frame, RequestId, Response, RingsOpened, ENGINE_DOORBELL_VERSION,
    PROTOCOL_VERSION,
};

/// Request id 9, capacities 65536 and 131072, no doorbell (the version-5 answer).
const RINGS_OPENED_V5: &str = "4650535603003002090000000000000008000000000000000000010000000200";
/// The same answer with the doorbell flag: body length 9, last byte 1.
const RINGS_OPENED_DOORBELL: &str =
    "465053560300300209000000000000000900000000000000000001000000020001";

fn answer(engine_doorbell: bool) -> Frame {
    let request_id: RequestId = 9;
    Frame::Response {
        request_id,
        response: Response::RingsOpened(RingsOpened {
            request_ring_capacity_bytes: 1 << 16,
            reply_ring_capacity_bytes: 1 << 17,
            engine_doorbell,
        }),
    }
}

#[test]
fn the_doorbell_flag_is_one_byte_after_the_version_5_body() {
    round_trip(&answer(true), RINGS_OPENED_DOORBELL);
}

#[test]
fn without_a_doorbell_the_answer_is_version_5_byte_for_byte() {
    round_trip(&answer(false), RINGS_OPENED_V5);
}

#[test]
fn another_flag_or_more_bytes_are_refused() {
    let mut other_flag = bytes_of(RINGS_OPENED_DOORBELL);
    *other_flag.last_mut().unwrap() = 2;
    let error = decode_frame(&other_flag).unwrap_err();
    assert!(
        error.to_string().contains("rings_opened.doorbell"),
        "{error}"
    );
    let mut longer = bytes_of(RINGS_OPENED_DOORBELL);
    longer.push(0);
    longer[16] = 10;
    assert!(decode_frame(&longer).is_err());
}

#[test]
fn only_version_6_connections_may_be_sent_the_doorbell() {
    assert_eq!(ENGINE_DOORBELL_VERSION, 6);
    const { assert!(PROTOCOL_VERSION >= ENGINE_DOORBELL_VERSION) };
    assert!(!RingsOpened::may_carry_doorbell(5));
    assert!(RingsOpened::may_carry_doorbell(ENGINE_DOORBELL_VERSION));
}
