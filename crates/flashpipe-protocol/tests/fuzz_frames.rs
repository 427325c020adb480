//! Seeded mutation fuzzing of the frame codec (#14, item 6: fuzzed frames), on stable
//! Rust and in the suite: valid encodings of every frame kind, mutated by a SplitMix64
//! stream (bit flips, bytes set, truncations, extensions, length and count fields set to
//! extremes, kinds swapped with the body length fixed up so the body decoders run). Every
//! case decodes to a frame or an error, never a panic; a frame that decodes re-encodes to
//! the same bytes (the codec is canonical); reading the bytes from a stream gives what
//! decoding them gives.
//!
//! `FLASHPIPE_FUZZ_CASES` sets the number of cases (default 20 000, under a second in a
//! release build); `FLASHPIPE_FUZZ_SEED` the first seed.

mod common;

use flashpipe_api::{
    AttributeChange, Command, CopyMethod, CopyReport, FileId, FileOwner, FileStat, FsStats, Reply,
};
use flashpipe_device::SplitMix64;
use flashpipe_protocol::frame::ALL_FRAME_KINDS;
use flashpipe_protocol::{
    decode_frame, encode_frame, read_frame, CancelOutcome, CheckSummary, DataPayload, ErrorCode,
    Frame, FrameKind, Hello, KernelFileOutcome, ReadInto, RegionRequest, RegionResponse,
    RemoteError, Request, Response, RingsOpened, RunKernelRequest, ServerLimits, SharedRegion,
    SharedWindow, Welcome, WriteGrant, HEADER_BYTES, MAX_BODY_BYTES,
};
use flashpipe_protocol::{ClockKind, WritePayload};

const DEFAULT_CASES: u64 = 20_000;
const DEFAULT_SEED: u64 = 0x5eed_f5a5_0014;

/// Where the body length field sits in the header.
const BODY_LENGTH_OFFSET: usize = 16;
/// Where the kind field sits in the header.
const KIND_OFFSET: usize = 6;

fn environment_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(default)
}

fn stat(index: u64) -> FileStat {
    FileStat {
        file_id: FileId(index),
        name: format!("file-{index}.bin"),
        size_bytes: index * 4096,
        allocated_blocks: index,
        shared_bytes: index * 2048,
        modified_clock_ns: index << 32,
        mode: None,
        owner: None,
        modified_wall_ns: None,
    }
}

fn attributed(index: u64) -> FileStat {
    FileStat {
        mode: Some(0o600),
        owner: Some(FileOwner { uid: 10, gid: 20 }),
        modified_wall_ns: Some(-7),
        ..stat(index)
    }
}

fn shared_window() -> SharedWindow {
    SharedWindow {
        handle: 7,
        slot: 3,
        window_start: 512,
        length_bytes: 4096,
    }
}

fn remote_error() -> RemoteError {
    RemoteError::limit(
        ErrorCode::TooManyInFlight,
        "too many requests in flight",
        64,
    )
}

fn request_frames() -> Vec<Frame> {
    let name = || "dir/a-file.txt".to_string();
    [
        Request::Command(Command::Create { name: name() }),
        Request::Command(Command::Write {
            name: name(),
            offset_bytes: 4096,
            data: WritePayload::Inline((0..200).map(|index| index as u8).collect()),
        }),
        Request::Command(Command::Write {
            name: name(),
            offset_bytes: 8192,
            data: WritePayload::Granted {
                slot: 2,
                length_bytes: 65536,
            },
        }),
        Request::Command(Command::Read {
            name: name(),
            offset_bytes: 0,
            length_bytes: 1 << 20,
        }),
        Request::Command(Command::ReadFiles {
            names: vec!["a".into(), "bb".into(), "ccc".into()],
        }),
        Request::Command(Command::Truncate {
            name: name(),
            size_bytes: 77,
        }),
        Request::Command(Command::Delete { name: name() }),
        Request::Command(Command::Rename {
            from: name(),
            to: "b".into(),
            replace: false,
        }),
        Request::Command(Command::Rename {
            from: name(),
            to: "c".into(),
            replace: true,
        }),
        Request::Command(Command::Copy {
            from: name(),
            to: "d".into(),
            method: CopyMethod::ReferenceOrBytes,
        }),
        Request::Command(Command::Stat { name: name() }),
        Request::Command(Command::List),
        Request::Command(Command::Stats),
        Request::Command(Command::Flush),
        Request::Command(Command::Check),
        Request::Command(Command::SetAttributes {
            name: "a".to_string(),
            mode: AttributeChange::Set(0o640),
            owner: AttributeChange::Set(FileOwner { uid: 1, gid: 2 }),
            modified_wall_ns: AttributeChange::Clear,
        }),
        Request::Cancel { target: 41 },
        Request::GrantWrite,
        Request::RunKernel(RunKernelRequest {
            kernel: "grep".into(),
            options: vec!["pattern=needle".into()],
            inputs: vec![name(), "other".into()],
            output: Some("out".into()),
            replace_outputs: true,
            reader_count: 2,
            worker_count: 0,
        }),
        Request::OpenRings,
        Request::Region(RegionRequest::Register { length_bytes: 4096 }),
        Request::Region(RegionRequest::ReadInto(ReadInto {
            name: "a".into(),
            offset_bytes: 0,
            length_bytes: 4096,
            region: 1,
            region_offset_bytes: 0,
        })),
        Request::Region(RegionRequest::Unregister { region: 1 }),
    ]
    .into_iter()
    .enumerate()
    .map(|(index, request)| Frame::Request {
        request_id: index as u64 + 1,
        request,
    })
    .collect()
}

fn response_frames() -> Vec<Frame> {
    [
        Response::Reply(Reply::Done),
        Response::Reply(Reply::Written { buffer: 4096 }),
        Response::Reply(Reply::Data(DataPayload::Inline(vec![9; 100]))),
        Response::Reply(Reply::Data(DataPayload::Shared(shared_window()))),
        Response::Reply(Reply::Files(vec![
            Ok(DataPayload::Inline(b"small file".to_vec())),
            Ok(DataPayload::Shared(shared_window())),
            Err(remote_error()),
        ])),
        Response::Reply(Reply::Stat(stat(3))),
        Response::Reply(Reply::Stat(attributed(4))),
        Response::Reply(Reply::List(vec![stat(5), attributed(6)])),
        Response::Reply(Reply::List((1..5).map(stat).collect())),
        Response::Reply(Reply::Stats(FsStats {
            fs_block_size_bytes: 4096,
            fs_block_count: 1 << 20,
            used_blocks: 100,
            shared_blocks: 7,
            saved_blocks: 9,
            free_blocks: 1000,
            pending_free_blocks: 3,
            reserved_blocks: 64,
            file_count: 12,
            commit_sequence: 99,
            unflushed_changes: true,
        })),
        Response::Reply(Reply::Check(CheckSummary {
            clean: false,
            commit_sequence: Some(5),
            file_count: 2,
            findings: vec!["block 7 owned twice".into(), "orphan".into()],
            report_text: "2 findings".into(),
        })),
        Response::Reply(Reply::Copied(CopyReport {
            blocks_by_reference: 10,
            bytes_by_bytes: 512,
        })),
        Response::Granted(WriteGrant {
            slot: 1,
            slot_size_bytes: 1 << 20,
        }),
        Response::Cancel(CancelOutcome::Running),
        Response::KernelFile(common::sample_kernel_file(16)),
        Response::KernelFile(KernelFileOutcome {
            index: 0,
            name: "a".into(),
            size_bytes: 0,
            result: Err(remote_error()),
        }),
        Response::KernelSummary(common::sample_summary()),
        Response::RingsOpened(RingsOpened {
            request_ring_capacity_bytes: 1 << 20,
            reply_ring_capacity_bytes: 1 << 20,
            engine_doorbell: false,
        }),
        Response::RingsOpened(RingsOpened {
            request_ring_capacity_bytes: 1 << 20,
            reply_ring_capacity_bytes: 1 << 20,
            engine_doorbell: true,
        }),
        Response::Region(RegionResponse::Registered {
            region: 1,
            block_bytes: 4096,
        }),
        Response::Region(RegionResponse::ReadIntoDone { length_bytes: 4096 }),
    ]
    .into_iter()
    .enumerate()
    .map(|(index, response)| Frame::Response {
        request_id: index as u64 + 100,
        response,
    })
    .collect()
}

fn connection_frames() -> Vec<Frame> {
    let region = SharedRegion {
        slot_count: 16,
        slot_size_bytes: 1 << 20,
    };
    vec![
        Frame::Hello(Hello {
            min_version: 3,
            max_version: 3,
            map_memory: true,
            client_name: "fuzz-client".into(),
        }),
        Frame::Welcome(welcome(3, Some(region), None)),
        Frame::Hello(Hello {
            min_version: 3,
            max_version: 4,
            map_memory: false,
            client_name: "fuzz-client".into(),
        }),
        Frame::Welcome(welcome(4, None, Some(ClockKind::Virtual))),
        Frame::Release {
            handles: vec![1, 2, 3, u64::MAX],
        },
        Frame::Error {
            request_id: 0,
            error: remote_error(),
        },
        Frame::Error {
            request_id: 5,
            error: RemoteError {
                code: ErrorCode::from_wire(60_000),
                limit: None,
                message: String::new(),
            },
        },
    ]
}

/// One valid frame of every kind (and a few kinds twice), encoded.
fn seed_encodings() -> Vec<Vec<u8>> {
    let frames: Vec<Frame> = [connection_frames(), request_frames(), response_frames()].concat();
    let kinds: std::collections::BTreeSet<u16> =
        frames.iter().map(|frame| frame.kind() as u16).collect();
    assert_eq!(
        kinds.len(),
        ALL_FRAME_KINDS.len(),
        "the seeds cover every frame kind"
    );
    frames.iter().map(encode_frame).collect()
}

/// Values length and count fields are set to.
const EXTREME_U32S: [u32; 8] = [
    0,
    1,
    255,
    4096,
    MAX_BODY_BYTES,
    MAX_BODY_BYTES + 1,
    i32::MAX as u32,
    u32::MAX,
];

fn set_u32(bytes: &mut [u8], offset: usize, value: u32) {
    if offset + 4 <= bytes.len() {
        bytes[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
    }
}

fn fix_body_length(bytes: &mut [u8]) {
    let body_length = bytes.len().saturating_sub(HEADER_BYTES) as u32;
    set_u32(bytes, BODY_LENGTH_OFFSET, body_length);
}

fn swap_kind(bytes: &mut [u8], kind: FrameKind) {
    if bytes.len() >= HEADER_BYTES {
        bytes[KIND_OFFSET..KIND_OFFSET + 2].copy_from_slice(&(kind as u16).to_le_bytes());
        let request_id: u64 = match kind {
            FrameKind::Hello | FrameKind::Welcome | FrameKind::Release => 0,
            _ => 1,
        };
        bytes[8..16].copy_from_slice(&request_id.to_le_bytes());
    }
}

/// Applies one drawn mutation.
fn mutate(bytes: &mut Vec<u8>, generator: &mut SplitMix64) {
    match generator.index_below(8) {
        0 => {
            if !bytes.is_empty() {
                let bit = generator.index_below(bytes.len() * 8);
                bytes[bit / 8] ^= 1 << (bit % 8);
            }
        }
        1 => {
            if !bytes.is_empty() {
                let at = generator.index_below(bytes.len());
                bytes[at] = [0, 1, 2, 0x7f, 0x80, 0xff][generator.index_below(6)];
            }
        }
        2 => {
            let keep = generator.index_below(bytes.len() + 1);
            bytes.truncate(keep);
        }
        3 => {
            let extra = generator.index_below(16) + 1;
            bytes.extend((0..extra).map(|_| generator.next_u64() as u8));
        }
        4 => {
            let offset = HEADER_BYTES.min(bytes.len()) + generator.index_below(bytes.len());
            set_u32(
                bytes,
                offset,
                EXTREME_U32S[generator.index_below(EXTREME_U32S.len())],
            );
        }
        5 => set_u32(
            bytes,
            BODY_LENGTH_OFFSET,
            EXTREME_U32S[generator.index_below(EXTREME_U32S.len())],
        ),
        6 => swap_kind(
            bytes,
            ALL_FRAME_KINDS[generator.index_below(ALL_FRAME_KINDS.len())],
        ),
        _ => fix_body_length(bytes),
    }
}

/// The checks every case must pass.
fn check_case(bytes: &[u8], case: u64) {
    let decoded = decode_frame(bytes);
    if let Ok(frame) = &decoded {
        assert_eq!(
            encode_frame(frame),
            bytes,
            "case {case}: {frame:?} decoded from bytes it does not encode to"
        );
    }
    let mut stream = bytes;
    let from_stream = read_frame(&mut stream, MAX_BODY_BYTES);
    if let Ok(frame) = decoded {
        assert_eq!(
            from_stream.ok().flatten(),
            Some(frame),
            "case {case}: the stream reader disagrees with decode_frame"
        );
    }
}

#[test]
fn mutated_frames_decode_to_a_canonical_frame_or_an_error() {
    let seeds = seed_encodings();
    let cases = environment_u64("FLASHPIPE_FUZZ_CASES", DEFAULT_CASES);
    let first_seed = environment_u64("FLASHPIPE_FUZZ_SEED", DEFAULT_SEED);
    let mut decoded_cases = 0u64;
    for case in 0..cases {
        let mut generator = SplitMix64::for_case(first_seed, case);
        let mut bytes = seeds[generator.index_below(seeds.len())].clone();
        for _ in 0..generator.index_below(4) + 1 {
            mutate(&mut bytes, &mut generator);
        }
        if generator.index_below(2) == 0 {
            fix_body_length(&mut bytes);
        }
        check_case(&bytes, case);
        decoded_cases += u64::from(decode_frame(&bytes).is_ok());
    }
    assert!(
        cases < 1000 || decoded_cases > 0,
        "no mutated case decoded: the mutations never reach past the header"
    );
}

#[test]
fn every_seed_under_every_kind_decodes_or_fails_cleanly() {
    for seed in seed_encodings() {
        for kind in ALL_FRAME_KINDS {
            let mut bytes = seed.clone();
            swap_kind(&mut bytes, kind);
            check_case(&bytes, u64::from(kind as u16));
        }
    }
}

#[test]
fn every_length_field_at_every_extreme_fails_cleanly() {
    for (seed_index, seed) in seed_encodings().into_iter().enumerate() {
        for offset in 0..seed.len().saturating_sub(3) {
            for value in EXTREME_U32S {
                let mut bytes = seed.clone();
                set_u32(&mut bytes, offset, value);
                check_case(&bytes, (seed_index * 1000 + offset) as u64);
            }
        }
    }
}

/// A welcome of `version` with the seed frames' fixed limits.
fn welcome(
    version: u16,
    read_region: Option<SharedRegion>,
    store_clock: Option<ClockKind>,
) -> Welcome {
    Welcome {
        version,
        server_pid: 1234,
        store_path: "/tmp/store".into(),
        store_identity: Some([7; 16]),
        limits: ServerLimits {
            max_body_bytes: 1 << 20,
            max_write_bytes: 1 << 20,
            max_read_bytes: 1 << 24,
            max_read_files_count: 256,
            max_read_files_bytes: 1 << 24,
            max_in_flight_per_client: 64,
            max_bytes_in_flight_per_client: 1 << 26,
            max_read_handles_per_client: 1024,
        },
        read_region,
        write_region: None,
        store_clock,
        read_only: false,
    }
}
