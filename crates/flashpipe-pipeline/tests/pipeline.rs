//! Pipeline behaviour at its API: results and order against in-memory references, small and
//! large inputs, back-pressure, errors naming file and offset, and cancellation.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{
    expected_probe_summary, in_memory_summary, names_of, pattern, patterned_files, small_config,
    store_of, store_on_clock, store_with, ProbeFault, ProbeKernel, TestStore, VirtualCost,
};
use flashpipe_device::{Clock, VirtualClock};
use flashpipe_kernels::api::{Schedule, Summary};
use flashpipe_kernels::driver::{run_on_bytes, DrivePlan};
use flashpipe_kernels::registry::build_kernel;
use flashpipe_pipeline::{OutputTarget, PipelineError};

/// Sizes around the edges: empty, one byte, one block, one chunk plus one, larger than every
/// buffer and credit together (8 credits x 4 KiB).
const SIZES: &[usize] = &[0, 1, 4095, 4096, 4097, 3 * 4096 + 17, 200_000];

fn inputs() -> Vec<(String, Vec<u8>)> {
    SIZES
        .iter()
        .enumerate()
        .map(|(index, size)| (format!("input-{size}"), pattern(*size, index as u8)))
        .collect()
}

fn check_probe(schedule: Schedule) {
    let files = inputs();
    let store = store_of(&files);
    let names = names_of(&files);
    let result = store
        .run(
            Arc::new(ProbeKernel::new(schedule)),
            &names,
            &small_config(OutputTarget::ReturnToCaller),
        )
        .expect("probe runs");
    assert_eq!(result.files.len(), files.len());
    for ((name, data), outcome) in files.iter().zip(&result.files) {
        assert_eq!(&outcome.name, name);
        assert_eq!(outcome.size_bytes, data.len() as u64);
        assert_eq!(outcome.summary, expected_probe_summary(data), "{name}");
        assert_eq!(outcome.output.as_deref(), Some(data.as_slice()), "{name}");
    }
    let report = &result.report;
    assert_eq!(
        report.input_bytes,
        files.iter().map(|(_, d)| d.len() as u64).sum::<u64>()
    );
    assert!(report.max_chunks_in_flight <= report.chunk_credit_count);
    assert_eq!(report.stages.len(), 4);
    assert_ne!(report.slowest_stage, "none");
}

#[test]
fn parallel_kernel_sees_every_size_in_order() {
    check_probe(Schedule::ChunksInParallel);
}

#[test]
fn in_order_kernel_sees_every_size_in_order() {
    check_probe(Schedule::ChunksInOrder);
}

/// Registry kernels through the pipeline against the in-memory driver, written back to the store.
#[test]
fn registry_kernels_match_the_in_memory_driver() {
    let cases: &[(&str, &[&str])] = &[
        ("des-ecb", &["key=133457799bbcdff1"]),
        ("des-cbc", &["key=133457799bbcdff1", "iv=0001020304050607"]),
        (
            "aes128-ctr",
            &[
                "key=2b7e151628aed2a6abf7158809cf4f3c",
                "iv=f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff",
            ],
        ),
        ("crc32c", &[]),
        ("sha256", &[]),
        ("grep", &["pattern=ab+c"]),
    ];
    let mut text = pattern(150_001, 3);
    for (index, byte) in text.iter_mut().enumerate() {
        if index % 97 == 0 {
            *byte = b'\n';
        }
    }
    text.extend_from_slice(b"xxabbbc\n");
    let store = store_with(&[("text", text.clone()), ("empty", Vec::new())]);
    for (kernel_name, arguments) in cases {
        let arguments: Vec<String> = arguments.iter().map(|text| text.to_string()).collect();
        let kernel = build_kernel(kernel_name, &arguments).expect("kernel builds");
        let outputs = vec![
            format!("{kernel_name}.out"),
            format!("{kernel_name}.empty.out"),
        ];
        let result = store
            .run(
                Arc::clone(&kernel),
                &["text", "empty"],
                &small_config(OutputTarget::StoreFiles(outputs.clone())),
            )
            .unwrap_or_else(|error| panic!("{kernel_name}: {error}"));
        for ((input, data), output_name) in [("text", &text), ("empty", &Vec::new())]
            .into_iter()
            .zip(&outputs)
        {
            let mut expected_stream = Vec::new();
            let expected = run_on_bytes(
                kernel.as_ref(),
                input,
                data,
                DrivePlan::single(65536),
                &mut expected_stream,
            )
            .expect("reference run");
            let outcome = result
                .files
                .iter()
                .find(|file| file.name == input)
                .expect("outcome");
            assert_eq!(outcome.summary, expected, "{kernel_name} on {input}");
            assert_eq!(
                store.contents(output_name),
                expected_stream,
                "{kernel_name} on {input}"
            );
            assert_eq!(outcome.output_file.as_deref(), Some(output_name.as_str()));
        }
    }
}

/// SISC-style: many small files dealt to several readers.
#[test]
fn many_small_files_with_several_readers() {
    let files = patterned_files("small", 300, 2048);
    let store = store_of(&files);
    let names = names_of(&files);
    let kernel = build_kernel("crc32c", &[]).expect("crc32c");
    let mut config = small_config(OutputTarget::Discard);
    config.reader_count = 3;
    config.reads_in_flight_per_reader = 2;
    let result = store.run(kernel.clone(), &names, &config).expect("runs");
    for ((name, data), outcome) in files.iter().zip(&result.files) {
        assert_eq!(
            outcome.summary,
            in_memory_summary(kernel.as_ref(), name, data)
        );
    }
}

/// A slow kernel stalls the readers: chunks held never exceed the credits, whatever the size.
/// The kernel's cost is charged to a virtual clock (the pipeline's only clock here), so the
/// verdict does not depend on the machine's load: one worker charges 10 ms a chunk, the
/// kernel stage is busy exactly 32 x 10 ms, and no other stage can overlap the first charge
/// (nothing reaches reduce or write before it) nor the last (every read is done by then).
#[test]
fn slow_kernel_holds_memory_to_the_credits() {
    const CHUNK_COUNT: u64 = 32;
    const COST_PER_CHUNK_NS: u64 = 10_000_000;
    for schedule in [Schedule::ChunksInParallel, Schedule::ChunksInOrder] {
        let data = pattern(CHUNK_COUNT as usize * 4096, 7);
        let virtual_clock = VirtualClock::new();
        let store = store_on_clock(&[("big", data.clone())], virtual_clock.as_clock());
        let mut kernel = ProbeKernel::new(schedule);
        kernel.probe.virtual_cost =
            Some(VirtualCost::new(virtual_clock.clone(), COST_PER_CHUNK_NS));
        let mut config = small_config(OutputTarget::Discard);
        config.chunk_credit_count = 3;
        config.reads_in_flight_per_reader = 8;
        config.worker_count = 1;
        let result = store
            .run(Arc::new(kernel), &["big"], &config)
            .expect("runs");
        assert!(
            result.report.max_chunks_in_flight <= 3,
            "{:?}",
            result.report
        );
        assert_eq!(result.files[0].summary, expected_probe_summary(&data));
        assert_eq!(virtual_clock.now_ns(), CHUNK_COUNT * COST_PER_CHUNK_NS);
        let kernel_stage = &result.report.stages[1];
        assert_eq!(kernel_stage.stage, "kernel");
        assert_eq!(
            kernel_stage.busy_seconds,
            (CHUNK_COUNT * COST_PER_CHUNK_NS) as f64 / 1e9,
            "{:?}",
            result.report
        );
        assert_eq!(result.report.slowest_stage, "kernel", "{:?}", result.report);
    }
}

fn failure_of(kernel: ProbeKernel, schedule_name: &str) -> PipelineError {
    let store = store_with(&[
        ("first", pattern(10_000, 1)),
        ("second", pattern(50_000, 2)),
    ]);
    store
        .run(
            Arc::new(kernel),
            &["first", "second"],
            &small_config(OutputTarget::Discard),
        )
        .expect_err(schedule_name)
}

#[test]
fn failing_kernel_names_file_and_offset() {
    for schedule in [Schedule::ChunksInParallel, Schedule::ChunksInOrder] {
        let mut kernel = ProbeKernel::new(schedule);
        kernel.probe.fault_at = Some((20_000, ProbeFault::Refuse));
        let seen = Arc::clone(&kernel.probe.chunks_seen);
        match failure_of(kernel, "fails") {
            PipelineError::Kernel(error) => {
                assert_eq!(&*error.file, "second");
                assert_eq!(error.offset_bytes, 20_000);
            }
            other => panic!("unexpected {other}"),
        }
        assert!(seen.load(Ordering::Relaxed) < 20, "the job stopped early");
    }
}

#[test]
fn panicking_kernel_is_an_error_naming_file_and_offset() {
    for schedule in [Schedule::ChunksInParallel, Schedule::ChunksInOrder] {
        let mut kernel = ProbeKernel::new(schedule);
        kernel.probe.fault_at = Some((5000, ProbeFault::Panic));
        match failure_of(kernel, "panics") {
            PipelineError::KernelPanicked {
                file, offset_bytes, ..
            } => {
                assert!(file == "first" || file == "second", "{file}");
                assert_eq!(offset_bytes, 4096);
            }
            other => panic!("unexpected {other}"),
        }
    }
}

#[test]
fn read_error_names_file_and_offset() {
    let store = store_with(&[("data", pattern(40_000, 4))]);
    let (file, offset_bytes, error) = failed_read(&store, Schedule::ChunksInParallel, &["data"]);
    assert_eq!(file, "data");
    assert_eq!(offset_bytes % 4096, 0);
    assert!(error.contains("data at byte"), "{error}");
}

/// Runs a probe kernel scheduled as `schedule` over `names` with every read of `store`
/// failing; returns the read error's file, offset and text.
fn failed_read(store: &TestStore, schedule: Schedule, names: &[&str]) -> (String, u64, String) {
    store.fail_reads.store(true, Ordering::Release);
    let error = store
        .run(
            Arc::new(ProbeKernel::new(schedule)),
            names,
            &small_config(OutputTarget::Discard),
        )
        .expect_err("reads fail");
    match &error {
        PipelineError::Read {
            file, offset_bytes, ..
        } => (file.clone(), *offset_bytes, error.to_string()),
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn missing_input_is_an_open_error() {
    let store = store_with(&[("data", pattern(10, 4))]);
    let error = store
        .run(
            Arc::new(ProbeKernel::new(Schedule::ChunksInOrder)),
            &["data", "nope"],
            &small_config(OutputTarget::Discard),
        )
        .expect_err("missing file");
    assert!(
        matches!(&error, PipelineError::Open { file, .. } if file == "nope"),
        "{error}"
    );
}

#[test]
fn output_over_an_input_is_refused() {
    let data = pattern(10, 4);
    let store = store_with(&[("data", data.clone())]);
    let error = store
        .run(
            Arc::new(ProbeKernel::new(Schedule::ChunksInOrder)),
            &["data"],
            &small_config(OutputTarget::StoreFiles(vec!["data".into()])),
        )
        .expect_err("refused");
    assert!(matches!(error, PipelineError::Config(_)), "{error}");
    assert_eq!(store.contents("data"), data, "the input is untouched");
}

/// The kernel itself raises the flag after 8 of 256 chunks (no timer): the job must end
/// with `Cancelled` rather than run to the end.
#[test]
fn cancellation_ends_a_slow_job() {
    let store = store_with(&[("big", pattern(256 * 4096, 9))]);
    let mut kernel = ProbeKernel::new(Schedule::ChunksInParallel);
    let cancel = Arc::new(AtomicBool::new(false));
    kernel.probe.cancel_after_chunks = Some((8, Arc::clone(&cancel)));
    let chunks_seen = Arc::clone(&kernel.probe.chunks_seen);
    let error = store
        .run_cancellable(
            Arc::new(kernel),
            &["big"],
            &small_config(OutputTarget::Discard),
            cancel,
        )
        .expect_err("cancelled");
    assert!(matches!(error, PipelineError::Cancelled), "{error}");
    assert!(
        chunks_seen.load(Ordering::Relaxed) < 256,
        "the job stopped before the end"
    );
}

#[test]
fn bad_settings_are_refused() {
    let store = store_with(&[("data", pattern(10, 4))]);
    let kernel = Arc::new(ProbeKernel::new(Schedule::ChunksInOrder));
    let mut too_many_credits = small_config(OutputTarget::Discard);
    too_many_credits.chunk_credit_count = 1000;
    let mut too_large_chunks = small_config(OutputTarget::Discard);
    too_large_chunks.chunk_bytes = 1 << 30;
    let mut no_workers = small_config(OutputTarget::Discard);
    no_workers.worker_count = 0;
    for config in [too_many_credits, too_large_chunks, no_workers] {
        let error = store
            .run(kernel.clone(), &["data"], &config)
            .expect_err("refused");
        assert!(matches!(error, PipelineError::Config(_)), "{error}");
    }
    let summary = store
        .run(kernel, &["data"], &small_config(OutputTarget::Discard))
        .expect("the store still works")
        .files[0]
        .summary
        .clone();
    assert!(matches!(summary, Summary::Digest { .. }));
}

/// Small whole files go through batched reads when the credits allow batches (at least two
/// credits a reader; a batch holds a credit per pool buffer) and through single reads when
/// they do not (1 credit): both give every file's exact bytes, in order, for both schedules,
/// mixed with empty and large files.
#[test]
fn batched_small_files_match_single_reads() {
    let files: Vec<(String, Vec<u8>)> = (0..120)
        .map(|index| {
            let size = match index % 7 {
                0 => 0,
                1 => 9000,
                other => (index * 37 + other * 500) % 4096 + 1,
            };
            (format!("mixed-{index:03}"), pattern(size, index as u8))
        })
        .collect();
    let store = store_of(&files);
    let names = names_of(&files);
    for schedule in [Schedule::ChunksInParallel, Schedule::ChunksInOrder] {
        for (credits, readers) in [(8, 1), (16, 2), (2, 1), (1, 1)] {
            let mut config = small_config(OutputTarget::ReturnToCaller);
            config.chunk_credit_count = credits;
            config.reader_count = readers;
            let result = store
                .run(Arc::new(ProbeKernel::new(schedule)), &names, &config)
                .expect("runs");
            for ((name, data), outcome) in files.iter().zip(&result.files) {
                assert_eq!(&outcome.name, name);
                assert_eq!(outcome.summary, expected_probe_summary(data), "{name}");
                assert_eq!(outcome.output.as_deref(), Some(data.as_slice()), "{name}");
            }
            assert!(result.report.max_chunks_in_flight <= credits);
        }
    }
}

/// A slow kernel over batched small files: the batches never hold more files than the credits.
#[test]
fn slow_kernel_over_small_files_holds_memory_to_the_credits() {
    let files = patterned_files("slow", 40, 2048);
    let store = store_of(&files);
    let names = names_of(&files);
    let mut kernel = ProbeKernel::new(Schedule::ChunksInParallel);
    kernel.probe.delay = Duration::from_millis(1);
    let mut config = small_config(OutputTarget::Discard);
    config.chunk_credit_count = 6;
    let result = store.run(Arc::new(kernel), &names, &config).expect("runs");
    assert!(
        result.report.max_chunks_in_flight <= 6,
        "{:?}",
        result.report
    );
    for ((name, data), outcome) in files.iter().zip(&result.files) {
        assert_eq!(outcome.summary, expected_probe_summary(data), "{name}");
    }
}

/// A failed batched read ends the job with an error naming one of the files, at byte 0.
#[test]
fn read_error_in_a_batch_names_the_file() {
    let files = patterned_files("batched", 20, 1000);
    let store = store_of(&files);
    let (file, offset_bytes, error) =
        failed_read(&store, Schedule::ChunksInOrder, &names_of(&files));
    assert!(file.starts_with("batched-"), "{file}");
    assert_eq!(offset_bytes, 0);
    assert!(error.contains("batched-"), "{error}");
}
