//! Results do not depend on how the pipeline reads and writes: kernels that write a result
//! stream (AES-CTR, DES-CBC, DES-ECB, Sobel, sort) over many seeded small files and a large
//! one, read in batches that hold one credit per pool buffer (tiny files on 16 KiB blocks
//! with 16 KiB reads, so batches hit their buffer limit and resend the files left out) and
//! written back with several writes in flight, give every output file byte for byte what
//! the in-memory driver gives, whatever the credits, readers and writes in flight. No timing
//! is asserted; a failing seed prints the line that replays it.

mod common;

use std::sync::Arc;

use common::in_memory_summary;
use flashpipe_device::{RamDisk, SplitMix64};
use flashpipe_engine::{Engine, EngineConfig};
use flashpipe_kernels::api::Kernel;
use flashpipe_kernels::driver::{run_on_bytes, DrivePlan};
use flashpipe_kernels::registry::build_kernel;
use flashpipe_kernels::sobel::{encode_gray_png, GrayImage};
use flashpipe_pipeline::run::PipelineJob;
use flashpipe_pipeline::{
    run_pipeline, OutputTarget, PipelineConfig, PipelineError, PipelineResult,
};
use flashpipe_testkit::formatted::format_fs;
use flashpipe_testkit::seeds::run_seeds;

/// Engine bounds that make batches of tiny files on 16 KiB blocks need more buffers than a
/// batch may take (three blocks a buffer).
fn engine_config() -> EngineConfig {
    EngineConfig {
        read_buffer_count: 24,
        max_read_bytes: 16 * 1024,
        reads_in_flight_limit: 16,
        ..EngineConfig::default()
    }
}

/// One store's files: (name, bytes).
type Files = Vec<(String, Vec<u8>)>;

fn random_bytes(random: &mut SplitMix64, length_bytes: usize) -> Vec<u8> {
    (0..length_bytes).map(|_| random.next_u64() as u8).collect()
}

/// Seeded inputs for `kernel`: many small files (some tiny, some over one read) and one
/// large file; record kernels get whole records, Sobel gets grayscale PNGs.
fn inputs_for(kernel: &str, seed: u64) -> Files {
    let mut random = SplitMix64::new(seed ^ 0x5eed);
    let mut files = Vec::new();
    for index in 0..120 {
        let data = match kernel {
            "sobel" => {
                let width = 3 + (random.next_u64() % 40) as usize;
                let height = 3 + (random.next_u64() % 30) as usize;
                let pixels = random_bytes(&mut random, width * height);
                encode_gray_png(&GrayImage {
                    width,
                    height,
                    pixels,
                })
                .expect("encodes")
            }
            "sort" => {
                let records = (random.next_u64() % 60) as usize;
                random_bytes(&mut random, records * 100)
            }
            _ => {
                let size = match index % 5 {
                    0 => (random.next_u64() % 300) as usize + 1,
                    1 => (random.next_u64() % 40_000) as usize,
                    _ => (random.next_u64() % 4096) as usize + 1,
                };
                random_bytes(&mut random, size)
            }
        };
        files.push((format!("{kernel}-in-{index:03}"), data));
    }
    let large_bytes = match kernel {
        "sort" => 3000 * 100,
        "sobel" => 0,
        _ => 300_001,
    };
    if large_bytes > 0 {
        files.push((
            format!("{kernel}-in-large"),
            random_bytes(&mut random, large_bytes),
        ));
    }
    files
}

fn kernel_arguments(kernel: &str) -> Vec<String> {
    let arguments: &[&str] = match kernel {
        "aes128-ctr" => &[
            "key=2b7e151628aed2a6abf7158809cf4f3c",
            "iv=f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff",
        ],
        "des-cbc" => &["key=133457799bbcdff1", "iv=0001020304050607"],
        "des-ecb" => &["key=133457799bbcdff1"],
        "sort" => &["record=100", "key=10"],
        _ => &[],
    };
    arguments.iter().map(|text| text.to_string()).collect()
}

/// A RAM store of 16 KiB blocks holding `files`, written one after another, flushed.
fn store_of(files: &Files) -> Engine {
    let disk = RamDisk::new("ram", 4096, 32768, 32).expect("ram disk");
    let mut filesystem = format_fs(Box::new(disk), 16384);
    for (name, data) in files {
        let file = filesystem.create(name).expect("create");
        filesystem.write(file, 0, data).expect("write");
    }
    filesystem.flush().expect("flush");
    Engine::start(filesystem, engine_config())
}

/// A pipeline reading the test engine's largest reads with `readers` readers, 4 reads
/// each, 3 workers, `credits` chunk credits and `output`; tests change what they vary.
fn store_pipeline(readers: usize, credits: usize, output: OutputTarget) -> PipelineConfig {
    PipelineConfig {
        reader_count: readers,
        reads_in_flight_per_reader: 4,
        chunk_bytes: engine_config().max_read_bytes as u64,
        worker_count: 3,
        chunk_credit_count: credits,
        output_queue_capacity: 4,
        output_chunk_bytes: 4096,
        writes_in_flight: 2,
        output,
    }
}

/// Runs `kernel` over `names` on `engine` with `config` (never cancelled).
fn run_job(
    engine: &Engine,
    kernel: &Arc<dyn Kernel>,
    names: &[String],
    config: &PipelineConfig,
) -> Result<PipelineResult, PipelineError> {
    run_pipeline(PipelineJob::uncancelled(
        engine,
        &engine_config(),
        Arc::clone(kernel),
        names,
        config,
    ))
}

fn contents(engine: &Engine, name: &str) -> Vec<u8> {
    let mut client = engine.client(4);
    client
        .read_to_vec(name, 16384, 4)
        .unwrap_or_else(|error| panic!("reading {name}: {error}"))
}

/// (credits, readers, writes in flight, output bytes per write).
const SHAPES: &[(usize, usize, usize, usize)] = &[
    (1, 1, 1, 4096),
    (3, 2, 2, 8192),
    (8, 1, 4, 16384),
    (24, 3, 8, 65536),
];

fn check_kernel(kernel_name: &str, seed: u64) {
    let files = inputs_for(kernel_name, seed);
    let engine = store_of(&files);
    let kernel: Arc<dyn Kernel> =
        build_kernel(kernel_name, &kernel_arguments(kernel_name)).expect("kernel builds");
    let expected: Vec<Vec<u8>> = files
        .iter()
        .map(|(name, data)| {
            let mut stream = Vec::new();
            run_on_bytes(
                kernel.as_ref(),
                name,
                data,
                DrivePlan::single(65536),
                &mut stream,
            )
            .unwrap_or_else(|error| panic!("{kernel_name} in memory on {name}: {error}"));
            stream
        })
        .collect();
    let names: Vec<String> = files.iter().map(|(name, _)| name.clone()).collect();
    for &(credits, readers, writes_in_flight, output_chunk_bytes) in SHAPES {
        let outputs: Vec<String> = names.iter().map(|name| format!("{name}.out")).collect();
        let config = PipelineConfig {
            output_chunk_bytes,
            writes_in_flight,
            ..store_pipeline(readers, credits, OutputTarget::StoreFiles(outputs.clone()))
        };
        let result = run_job(&engine, &kernel, &names, &config)
            .unwrap_or_else(|error| panic!("{kernel_name} with {credits} credits: {error}"));
        assert!(result.report.max_chunks_in_flight <= credits);
        for ((output, stream), outcome) in outputs.iter().zip(&expected).zip(&result.files) {
            assert_eq!(outcome.output_bytes, stream.len() as u64, "{output}");
            assert!(
                contents(&engine, output) == *stream,
                "{output} differs from the in-memory result ({credits} credits, {readers} readers, \
                 {writes_in_flight} writes in flight)"
            );
        }
    }
    engine.shutdown().expect("shutdown");
}

#[test]
fn result_streams_of_small_and_large_files_match_the_in_memory_driver() {
    run_seeds(2, |seed| {
        for kernel in ["aes128-ctr", "des-cbc", "des-ecb", "sort", "sobel"] {
            check_kernel(kernel, seed);
        }
    });
}

/// Many tiny files with a summary kernel: every file is read exactly once, in its own
/// outcome, whatever the credits (batches hit their buffer limit on 16 KiB blocks).
#[test]
fn tiny_files_in_batches_that_leave_files_out_are_each_read_once() {
    run_seeds(2, |seed| {
        let mut random = SplitMix64::new(seed);
        let files: Files = (0..400)
            .map(|index| {
                let size = (random.next_u64() % 200) as usize + 1;
                (format!("tiny-{index:03}"), random_bytes(&mut random, size))
            })
            .collect();
        let engine = store_of(&files);
        let kernel = build_kernel("crc32c", &[]).expect("crc32c");
        let names: Vec<String> = files.iter().map(|(name, _)| name.clone()).collect();
        for (credits, readers) in [(2, 1), (8, 1), (24, 2)] {
            let config = PipelineConfig {
                reads_in_flight_per_reader: 8,
                worker_count: 2,
                ..store_pipeline(readers, credits, OutputTarget::Discard)
            };
            let result = run_job(&engine, &kernel, &names, &config)
                .unwrap_or_else(|error| panic!("{credits} credits: {error}"));
            assert!(result.report.max_chunks_in_flight <= credits);
            assert_eq!(
                result.report.input_bytes,
                files.iter().map(|(_, d)| d.len() as u64).sum::<u64>()
            );
            for ((name, data), outcome) in files.iter().zip(&result.files) {
                let expected = in_memory_summary(kernel.as_ref(), name, data);
                assert_eq!(&outcome.name, name);
                assert_eq!(outcome.summary, expected, "{name}");
            }
        }
        engine.shutdown().expect("shutdown");
    });
}
