//! Sample frames shared by the protocol's test files.

use flashpipe_protocol::{
    KernelFileOutcome, KernelFileResult, KernelRunSummary, KernelStageFigures, WireFloat,
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
