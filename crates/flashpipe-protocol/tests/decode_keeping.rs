//! `decode_frame_keeping` (the engine thread's decoding into kept buffers) answers
//! exactly as `decode_frame` does: the same frame or the same error, for well-formed
//! frames of every kind it treats apart (release, read) and beside them, and for hostile
//! bytes (truncated, a lying length, bad UTF-8, trailing bytes, too many handles); the
//! buffers it keeps are reused. The encoders into kept buffers make `encode_frame`'s
//! bytes.

use flashpipe_protocol::{
    decode_frame, decode_frame_keeping, encode_frame, encode_frame_into, encode_header,
    encode_release_into, Frame, FrameKind, KeptBuffers, Request, WireCommand, HEADER_BYTES,
    MAX_RELEASE_HANDLES,
};
use proptest::prelude::*;

fn read(name: &str, offset_bytes: u64, length_bytes: u64) -> Frame {
    Frame::Request {
        request_id: 9,
        request: Request::Command(WireCommand::Read {
            name: name.to_string(),
            offset_bytes,
            length_bytes,
        }),
    }
}

fn release(handles: Vec<u64>) -> Frame {
    Frame::Release { handles }
}

/// `decode_frame_keeping` on `bytes`, as a frame (a release's handles put back into
/// its frame) or the error.
fn keeping(bytes: &[u8], kept: &mut KeptBuffers) -> Result<Frame, String> {
    match decode_frame_keeping(bytes, kept) {
        Ok(Some(frame)) => Ok(frame),
        Ok(None) => Ok(release(kept.released.clone())),
        Err(error) => Err(error.to_string()),
    }
}

fn assert_same(bytes: &[u8], kept: &mut KeptBuffers) {
    let plain = decode_frame(bytes).map_err(|error| error.to_string());
    assert_eq!(keeping(bytes, kept), plain, "bytes {bytes:02x?}");
}

fn well_formed() -> Vec<Frame> {
    vec![
        read("kept", 0, 4096),
        read("", 7, 0),
        read("a longer name with ü", u64::MAX, 1),
        release(vec![]),
        release(vec![1, 2, u64::MAX]),
        Frame::Request {
            request_id: 3,
            request: Request::Command(WireCommand::Stat {
                name: "kept".to_string(),
            }),
        },
    ]
}

#[test]
fn well_formed_frames_decode_as_decode_frame_decodes_them() {
    let mut kept = KeptBuffers::default();
    for frame in well_formed() {
        let bytes = encode_frame(&frame);
        assert_same(&bytes, &mut kept);
        assert_eq!(keeping(&bytes, &mut kept), Ok(frame));
    }
}

#[test]
fn encoding_into_a_kept_buffer_appends_encode_frame_s_bytes() {
    let mut bytes = vec![1, 2, 3];
    let mut expected = bytes.clone();
    for frame in well_formed() {
        encode_frame_into(&frame, &mut bytes);
        expected.extend_from_slice(&encode_frame(&frame));
        assert_eq!(bytes, expected);
    }
    for handles in [vec![], vec![7], vec![1, 2, u64::MAX]] {
        encode_release_into(&handles, &mut bytes);
        expected.extend_from_slice(&encode_frame(&release(handles)));
        assert_eq!(bytes, expected);
    }
}

#[test]
fn a_read_takes_a_spare_name_and_a_release_reuses_the_kept_handles() {
    let mut kept = KeptBuffers::default();
    let spare = String::with_capacity(64);
    let spare_at = spare.as_ptr();
    kept.spare_names.push(spare);
    let decoded = decode_frame_keeping(&encode_frame(&read("kept", 0, 4096)), &mut kept);
    let Ok(Some(Frame::Request {
        request: Request::Command(WireCommand::Read { name, .. }),
        ..
    })) = decoded
    else {
        panic!("a read decoded");
    };
    assert_eq!(name, "kept");
    assert_eq!(
        name.as_ptr(),
        spare_at,
        "the spare name's allocation is used"
    );
    assert!(kept.spare_names.is_empty());
    decode_frame_keeping(&encode_frame(&release(vec![1, 2, 3])), &mut kept).expect("release");
    let handles_at = kept.released.as_ptr();
    decode_frame_keeping(&encode_frame(&release(vec![4, 5])), &mut kept).expect("release");
    assert_eq!(kept.released, vec![4, 5], "replaced, not appended");
    assert_eq!(
        kept.released.as_ptr(),
        handles_at,
        "the handles' allocation is kept"
    );
}

#[test]
fn hostile_reads_and_releases_are_refused_as_decode_frame_refuses_them() {
    let mut kept = KeptBuffers::default();
    kept.spare_names.push("left over".to_string());
    let mut cases: Vec<Vec<u8>> = Vec::new();
    for frame in [read("kept", 0, 4096), release(vec![1, 2])] {
        let bytes = encode_frame(&frame);
        for cut in 0..bytes.len() {
            cases.push(bytes[..cut].to_vec());
        }
        let mut trailing = bytes.clone();
        trailing.push(0);
        cases.push(trailing);
    }
    let mut bad_utf8 = encode_frame(&read("kept", 0, 4096));
    bad_utf8[HEADER_BYTES + 4] = 0xff;
    cases.push(bad_utf8);
    let mut lying_name = encode_frame(&read("kept", 0, 4096));
    lying_name[HEADER_BYTES..HEADER_BYTES + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    cases.push(lying_name);
    let too_many = vec![0; MAX_RELEASE_HANDLES + 1];
    let mut over = encode_frame(&release(vec![]));
    over[HEADER_BYTES..HEADER_BYTES + 4].copy_from_slice(&(too_many.len() as u32).to_le_bytes());
    cases.push(over);
    for bytes in cases {
        assert_same(&bytes, &mut kept);
    }
}

proptest! {
    #[test]
    fn arbitrary_bodies_of_reads_and_releases_decode_as_decode_frame_decodes_them(
        is_read in any::<bool>(),
        request_id in prop_oneof![Just(0u64), Just(9u64)],
        body in proptest::collection::vec(any::<u8>(), 0..48),
        spare in proptest::option::of(".{0,8}"),
    ) {
        let kind = if is_read { FrameKind::Read } else { FrameKind::Release };
        let mut bytes = encode_header(kind, request_id, body.len() as u32).to_vec();
        bytes.extend_from_slice(&body);
        let mut kept = KeptBuffers::default();
        kept.spare_names.extend(spare);
        let plain = decode_frame(&bytes).map_err(|error| error.to_string());
        prop_assert_eq!(keeping(&bytes, &mut kept), plain);
    }

    #[test]
    fn arbitrary_bytes_decode_as_decode_frame_decodes_them(
        bytes in proptest::collection::vec(any::<u8>(), 0..96),
    ) {
        let mut kept = KeptBuffers::default();
        let plain = decode_frame(&bytes).map_err(|error| error.to_string());
        prop_assert_eq!(keeping(&bytes, &mut kept), plain);
    }
}
