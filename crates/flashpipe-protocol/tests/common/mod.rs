//! Sample frames shared by the protocol's test files, and the hex text their golden bytes
//! are written in.

#![allow(dead_code)] // each test file uses the helpers it needs

use flashpipe_protocol::{
    decode_frame, encode_frame, ClockKind, DecodeError, Frame, KernelFileOutcome, KernelFileResult,
    KernelRunSummary, KernelStageFigures, ServerLimits, SharedRegion, Welcome, WireFloat,
};

/// A kernel run's summary with one stage, an infinite capacity among its figures.
pub fn sample_summary() -> KernelRunSummary {
    KernelRunSummary {
        kernel: "sha256".into(),
        file_count: 2,
        input_bytes: 8192,
        output_bytes: 0,
        elapsed_seconds: WireFloat::from_f64(0.25),
        input_bytes_per_second: WireFloat::from_f64(32768.0),
        slowest_stage: "kernel".into(),
        stages: vec![KernelStageFigures {
            stage: "read".into(),
            thread_count: 1,
            item_count: 2,
            bytes: 8192,
            busy_seconds: WireFloat::from_f64(0.001),
            blocked_downstream_seconds: WireFloat::from_f64(0.0),
            capacity_bytes_per_second: WireFloat::from_f64(f64::INFINITY),
        }],
        max_chunks_in_flight: 2,
        chunk_credit_count: 16,
        device_time_is_virtual: false,
    }
}

/// File `b` (4096 bytes, index 1) of a kernel run: a digest summary, `output_bytes`
/// written to `b.des`.
pub fn sample_kernel_file(output_bytes: u64) -> KernelFileOutcome {
    KernelFileOutcome {
        index: 1,
        name: "b".into(),
        size_bytes: 4096,
        result: Ok(KernelFileResult {
            summary_json: br#"{"kind":"digest"}"#.to_vec(),
            output_bytes,
            output_file: Some("b.des".into()),
        }),
    }
}

/// The bytes a golden frame's hex text spells, two digits a byte.
pub fn bytes_of(hex: &str) -> Vec<u8> {
    assert_eq!(hex.len() % 2, 0, "odd hex length");
    (0..hex.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).expect("hex digits"))
        .collect()
}

/// Bytes as golden hex text, two lowercase digits a byte.
pub fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The welcome of the golden welcome frames (`golden_welcome_v4.rs`, `golden_welcome_v6.rs`)
/// at `version`: every limit numbered 1 to 8, a read region of two 4 KiB slots.
pub fn golden_welcome(version: u16, store_clock: Option<ClockKind>, read_only: bool) -> Welcome {
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
        read_only,
    }
}

/// Checks that the golden frame `hex`, its last byte cut off and its body length byte set
/// to `body_length`, is refused as truncated at `field`.
pub fn check_last_byte_missing(hex: &str, body_length: u8, field: &str) {
    let mut short = bytes_of(hex);
    short.pop();
    short[16] = body_length;
    match decode_frame(&short) {
        Err(DecodeError::Truncated { field: missing, .. }) => assert_eq!(missing, field),
        other => panic!("a frame without its last byte ({field}) decoded as {other:?}"),
    }
}

/// Checks that `frame` encodes to the golden bytes `hex` spells and that they decode to it.
pub fn round_trip(frame: &Frame, hex: &str) {
    assert_eq!(encode_frame(frame), bytes_of(hex));
    assert_eq!(&decode_frame(&bytes_of(hex)).unwrap(), frame);
}

/// Checks that `frame` encodes to `expected` and that those bytes decode to it.
pub fn check_encoding(frame: Frame, expected: Vec<u8>) {
    let bytes = encode_frame(&frame);
    assert_eq!(bytes, expected);
    assert_eq!(decode_frame(&bytes), Ok(frame));
}
