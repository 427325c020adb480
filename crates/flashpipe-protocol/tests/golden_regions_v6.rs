//! Golden bytes of the version-6 region frames (docs/protocol.md, "Reads into a client
//! region"): register-region, read-into, unregister-region and their answers, each
//! encoded to exactly these bytes and decoded back; a truncated body is refused.

mod common;

use common::{bytes_of, hex_of};
use flashpipe_protocol::{
    decode_frame, encode_frame, regions_supported, Frame, ReadInto, RegionRequest, RegionResponse,
    Request, Response, REGION_PROTOCOL_VERSION,
};

/// (frame kind name, frame bytes in hex, request id 9).
const GOLDEN_REGION_FRAMES: [(&str, &str); 5] = [
    (
        "register-region",
        "4650535603001301090000000000000008000000000000000000100000000000",
    ),
    (
        "read-into",
        "46505356030014010900000000000000250000000000000001000000610000100000000000140000000000000003000000000000000010000000000000",
    ),
    (
        "unregister-region",
        "4650535603001501090000000000000008000000000000000300000000000000",
    ),
    (
        "region-registered",
        "4650535603000e0209000000000000000c00000000000000030000000000000000100000",
    ),
    (
        "read-into-done",
        "4650535603000f02090000000000000008000000000000001400000000000000",
    ),
];

fn frames() -> [Frame; 5] {
    let request = |request| Frame::Request {
        request_id: 9,
        request: Request::Region(request),
    };
    let response = |response| Frame::Response {
        request_id: 9,
        response: Response::Region(response),
    };
    [
        request(RegionRequest::Register {
            length_bytes: 1 << 20,
        }),
        request(RegionRequest::ReadInto(ReadInto {
            name: "a".to_string(),
            offset_bytes: 1 << 20,
            length_bytes: 20,
            region: 3,
            region_offset_bytes: 4096,
        })),
        request(RegionRequest::Unregister { region: 3 }),
        response(RegionResponse::Registered {
            region: 3,
            block_bytes: 4096,
        }),
        response(RegionResponse::ReadIntoDone { length_bytes: 20 }),
    ]
}

#[test]
fn every_region_frame_is_these_bytes_both_ways() {
    for (frame, (name, golden)) in frames().into_iter().zip(GOLDEN_REGION_FRAMES) {
        assert_eq!(frame.kind().name(), name);
        assert_eq!(hex_of(&encode_frame(&frame)), golden, "{name}");
        assert_eq!(
            decode_frame(&bytes_of(golden)).expect(name),
            frame,
            "{name}"
        );
    }
}

#[test]
fn a_truncated_region_frame_is_refused() {
    for (name, golden) in GOLDEN_REGION_FRAMES {
        let mut bytes = bytes_of(golden);
        bytes.pop();
        let body_length = u32::from_le_bytes(bytes[16..20].try_into().unwrap()) - 1;
        bytes[16..20].copy_from_slice(&body_length.to_le_bytes());
        assert!(decode_frame(&bytes).is_err(), "{name}");
    }
}

#[test]
fn regions_start_at_version_six() {
    assert_eq!(REGION_PROTOCOL_VERSION, 6);
    assert!(!regions_supported(5));
    assert!(regions_supported(6));
}
