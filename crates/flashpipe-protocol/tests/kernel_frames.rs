//! The kernel-run frames (issue #14): golden bytes of a run-kernel request (docs/protocol.md's
//! example), round trips of every kernel-run frame, the limits refused by name, and arbitrary
//! bodies under their headers decoding to a frame or an error, never a panic.

mod common;

use common::check_encoding;

use flashpipe_protocol::{
    decode_body, decode_frame, encode_frame, encode_header, CancelOutcome, DecodeError, ErrorCode,
    Frame, FrameKind, Header, KernelFileOutcome, RemoteError, Request, Response, RunKernelRequest,
};
use proptest::prelude::*;

#[test]
fn a_run_kernel_request_is_these_bytes() {
    let frame = Frame::Request {
        request_id: 3,
        request: Request::RunKernel(RunKernelRequest {
            kernel: "grep".into(),
            options: vec!["pattern=x".into()],
            inputs: vec!["a".into()],
            output: None,
            replace_outputs: false,
            reader_count: 1,
            worker_count: 0,
        }),
    };
    check_encoding(
        frame,
        [
            b"FPSV".as_slice(),
            &[3, 0],
            &[0x20, 0x01], // kind 0x0120 run-kernel
            &[3, 0, 0, 0, 0, 0, 0, 0],
            &[44, 0, 0, 0], // body length
            &[0, 0, 0, 0],
            &[4, 0, 0, 0], // kernel name length
            b"grep",
            &[1, 0, 0, 0], // one option
            &[9, 0, 0, 0],
            b"pattern=x",
            &[1, 0, 0, 0], // one input
            &[1, 0, 0, 0],
            b"a",
            &[0],          // no --output
            &[0],          // no --force
            &[1, 0, 0, 0], // one reader
            &[0, 0, 0, 0], // workers: the server's default
        ]
        .concat(),
    );
}

#[test]
fn kernel_run_answers_round_trip_bit_for_bit() {
    let frames = [
        Frame::Response {
            request_id: 9,
            response: Response::KernelFile(common::sample_kernel_file(0)),
        },
        Frame::Response {
            request_id: 9,
            response: Response::KernelFile(KernelFileOutcome {
                index: 0,
                name: "a".into(),
                size_bytes: 0,
                result: Err(RemoteError::new(ErrorCode::KernelFailed, "a at byte 0")),
            }),
        },
        Frame::Response {
            request_id: 9,
            response: Response::KernelSummary(common::sample_summary()),
        },
        Frame::Response {
            request_id: 9,
            response: Response::Cancel(CancelOutcome::Stopping),
        },
    ];
    for frame in frames {
        let decoded = decode_frame(&encode_frame(&frame)).expect("decodes");
        assert_eq!(decoded, frame);
    }
    let summary = common::sample_summary();
    assert!(summary.stages[0]
        .capacity_bytes_per_second
        .to_f64()
        .is_infinite());
    assert!(!Response::KernelFile(KernelFileOutcome {
        index: 0,
        name: "a".into(),
        size_bytes: 0,
        result: Err(RemoteError::new(ErrorCode::Cancelled, "x")),
    })
    .is_final());
    assert!(Response::KernelSummary(summary).is_final());
}

#[test]
fn new_error_codes_keep_their_numbers() {
    for (code, number) in [
        (ErrorCode::Cancelled, 113),
        (ErrorCode::TooManyKernelRuns, 114),
        (ErrorCode::BadKernelRun, 115),
        (ErrorCode::KernelFailed, 116),
        (ErrorCode::ServerReadHandles, 117),
    ] {
        assert_eq!(code.to_wire(), number);
        assert_eq!(ErrorCode::from_wire(number), code);
    }
}

fn body_under(kind: FrameKind, body: &[u8]) -> Result<Frame, DecodeError> {
    let mut bytes = encode_header(kind, 1, body.len() as u32).to_vec();
    bytes.extend_from_slice(body);
    decode_frame(&bytes)
}

#[test]
fn hostile_run_kernel_bodies_are_refused_by_name() {
    let long_kernel = [&65u32.to_le_bytes()[..], &[b'k'; 65]].concat();
    assert_eq!(
        body_under(FrameKind::RunKernel, &long_kernel).unwrap_err(),
        DecodeError::TooLong {
            field: "run_kernel.kernel",
            length_bytes: 65,
            limit_bytes: 64
        }
    );
    // The kernel name "k", then a count of 65 options.
    let many_options = [&1u32.to_le_bytes()[..], b"k", &65u32.to_le_bytes()].concat();
    assert!(matches!(
        body_under(FrameKind::RunKernel, &many_options),
        Err(DecodeError::TooMany {
            field: "run_kernel.option_count",
            count: 65,
            limit: 64
        })
    ));
    let lying_inputs = [
        &1u32.to_le_bytes()[..],
        b"k",
        &0u32.to_le_bytes(),
        &60_000u32.to_le_bytes(),
    ]
    .concat();
    assert!(matches!(
        body_under(FrameKind::RunKernel, &lying_inputs),
        Err(DecodeError::Truncated {
            field: "run_kernel.input_count",
            ..
        })
    ));
    let mut summary = encode_frame(&Frame::Response {
        request_id: 1,
        response: Response::KernelSummary(common::sample_summary()),
    });
    let last = summary.len() - 1;
    summary[last] = 7;
    assert_eq!(
        decode_frame(&summary).unwrap_err(),
        DecodeError::BadValue {
            field: "kernel_summary.device_time_is_virtual",
            value: 7
        }
    );
}

const KERNEL_KINDS: [FrameKind; 3] = [
    FrameKind::RunKernel,
    FrameKind::KernelFile,
    FrameKind::KernelSummary,
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_kernel_run_bodies_never_panic(kind in 0usize..3, body in proptest::collection::vec(any::<u8>(), 0..300)) {
        let header = Header { kind: KERNEL_KINDS[kind], request_id: 1, body_length_bytes: body.len() as u32 };
        let _ = decode_body(&header, &body);
    }

    #[test]
    fn run_kernel_requests_round_trip(
        kernel in "[a-z0-9]{1,20}",
        options in proptest::collection::vec("[a-z]{1,8}=[ -~]{0,20}", 0..5),
        inputs in proptest::collection::vec("[a-z0-9._:-]{1,30}", 0..20),
        output in proptest::option::of("[a-z]{1,10}"),
        replace_outputs in any::<bool>(),
        reader_count in any::<u32>(),
        worker_count in any::<u32>(),
    ) {
        let frame = Frame::Request {
            request_id: 77,
            request: Request::RunKernel(RunKernelRequest { kernel, options, inputs, output, replace_outputs, reader_count, worker_count }),
        };
        prop_assert_eq!(decode_frame(&encode_frame(&frame)), Ok(frame));
    }
}
