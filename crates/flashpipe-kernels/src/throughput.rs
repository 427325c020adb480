//! In-memory throughput of every kernel, on one core and on all cores: the kernel-side number for
//! the RAD comparison (which phase sets the pace) and for the sizing table.
//!
//! Parallel kernels use all cores on one file (chunks mapped by a pool); in-order kernels use all
//! cores on several files at once. Inputs are synthetic and deterministic; the language
//! identifier needs a trained model and sample text from the caller. This is a benchmark, so it
//! reads the wall clock (`std::time::Instant`); the kernels themselves never do.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use crate::api::{CountingSink, Kernel, Schedule};
use crate::driver::{run_files_in_parallel, run_on_bytes, DrivePlan, MapOrder};
use crate::error::{KernelError, OptionsError};
use crate::langid::model::LanguageModel;

/// Chunk size used by the in-memory driver (like the engine's read buffers).
pub const MEASURE_CHUNK_BYTES: usize = 256 * 1024;

/// A measurement failed.
#[derive(Debug, thiserror::Error)]
pub enum ThroughputError {
    /// A kernel could not be configured.
    #[error("kernel options: {0}")]
    Options(#[from] OptionsError),
    /// A kernel failed on its synthetic input.
    #[error("kernel failed: {0}")]
    Kernel(#[from] KernelError),
    /// Preparing an input failed.
    #[error("preparing input: {0}")]
    Input(String),
}

/// A trained language model with sample text to classify.
pub type LanguageSample = (Arc<LanguageModel>, Vec<u8>);

/// What to measure with.
#[derive(Debug, Clone)]
pub struct MeasureSettings {
    /// Bytes of input per kernel (one file, or split among files for in-order kernels).
    pub input_bytes: usize,
    /// Each measurement repeats until at least this long.
    pub minimum_seconds: f64,
    /// Workers for the all-cores column.
    pub worker_count: usize,
    /// Model and sample text for the language identifier (its row is left out without them).
    pub langid: Option<LanguageSample>,
    /// Measure only the rows whose label contains this text.
    pub only: Option<String>,
}

impl Default for MeasureSettings {
    fn default() -> Self {
        Self {
            input_bytes: 16 << 20,
            minimum_seconds: 0.5,
            worker_count: std::thread::available_parallelism().map_or(1, usize::from),
            langid: None,
            only: None,
        }
    }
}

/// One kernel's in-memory throughput.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThroughputRow {
    /// Kernel name (with the variant measured).
    pub kernel: String,
    /// How its chunks are scheduled.
    pub schedule: Schedule,
    /// Input bytes per pass.
    pub input_bytes: u64,
    /// Bytes per second on one worker (wall clock).
    pub single_core_bytes_per_second: f64,
    /// Bytes per CPU-second of the process on one worker: what one dedicated core would do, even
    /// when other programs share the machine.
    pub single_core_bytes_per_cpu_second: f64,
    /// Bytes per second on `worker_count` workers.
    pub all_cores_bytes_per_second: f64,
    /// Workers in the all-cores column.
    pub worker_count: usize,
    /// What the input was.
    pub input_description: String,
}

/// Deterministic bytes (SplitMix64).
pub fn synthetic_bytes(length_bytes: usize, seed: u64) -> Vec<u8> {
    let mut random = flashpipe_base::SplitMix64::new(seed);
    let mut bytes = Vec::with_capacity(length_bytes + 8);
    while bytes.len() < length_bytes {
        bytes.extend_from_slice(&random.next_u64().to_le_bytes());
    }
    bytes.truncate(length_bytes);
    bytes
}

/// Text lines of pseudo-words, one line in 1000 containing `needle<digits>`.
pub fn synthetic_text(length_bytes: usize) -> Vec<u8> {
    let words = [
        "data", "flash", "near", "kernel", "stream", "block", "page", "array", "queue", "the",
    ];
    let noise = synthetic_bytes(length_bytes / 4 + 16, 5);
    let mut text = Vec::with_capacity(length_bytes + 64);
    let mut line = 0usize;
    let mut position = 0usize;
    while text.len() < length_bytes {
        for _ in 0..12 {
            text.extend_from_slice(
                words[usize::from(noise[position % noise.len()]) % words.len()].as_bytes(),
            );
            text.push(b' ');
            position += 1;
        }
        if line % 1000 == 999 {
            text.extend_from_slice(format!("needle{line}").as_bytes());
        }
        text.push(b'\n');
        line += 1;
    }
    text.truncate(length_bytes);
    text
}

/// A smooth gradient with noise, encoded as an 8-bit grayscale PNG.
pub fn synthetic_png(width: usize, height: usize) -> Result<Vec<u8>, ThroughputError> {
    let noise = synthetic_bytes(width * height, 9);
    let pixels = (0..width * height)
        .map(|index| ((index % width + index / width) as u8).wrapping_add(noise[index] >> 4))
        .collect();
    let image = crate::sobel::GrayImage {
        width,
        height,
        pixels,
    };
    crate::sobel::encode_gray_png(&image).map_err(|error| ThroughputError::Input(error.to_string()))
}

/// CPU time consumed by this process so far, in seconds.
fn process_cpu_seconds() -> f64 {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `time`.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut time) };
    assert_eq!(
        status, 0,
        "CLOCK_PROCESS_CPUTIME_ID is always available on Linux"
    );
    time.tv_sec as f64 + time.tv_nsec as f64 * 1e-9
}

/// Rates of one measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeasuredRate {
    /// Bytes per wall-clock second.
    pub bytes_per_second: f64,
    /// Bytes per CPU-second of the whole process.
    pub bytes_per_cpu_second: f64,
}

/// Rates of `kernel` over `files`, repeated for at least `minimum_seconds`.
pub fn measure_kernel(
    kernel: &dyn Kernel,
    files: &[(String, Vec<u8>)],
    worker_count: usize,
    minimum_seconds: f64,
) -> Result<MeasuredRate, ThroughputError> {
    let bytes_per_pass: usize = files.iter().map(|(_, data)| data.len()).sum();
    let started = Instant::now();
    let cpu_started = process_cpu_seconds();
    let mut passes = 0u64;
    loop {
        run_pass(kernel, files, worker_count)?;
        passes += 1;
        let elapsed = started.elapsed().as_secs_f64();
        if elapsed >= minimum_seconds {
            let total_bytes = bytes_per_pass as f64 * passes as f64;
            let cpu_seconds = (process_cpu_seconds() - cpu_started).max(1e-9);
            return Ok(MeasuredRate {
                bytes_per_second: total_bytes / elapsed.max(1e-9),
                bytes_per_cpu_second: total_bytes / cpu_seconds,
            });
        }
    }
}

fn run_pass(
    kernel: &dyn Kernel,
    files: &[(String, Vec<u8>)],
    worker_count: usize,
) -> Result<(), ThroughputError> {
    if kernel.schedule() == Schedule::ChunksInOrder {
        run_files_in_parallel(kernel, files, MEASURE_CHUNK_BYTES, worker_count)?;
        return Ok(());
    }
    for (name, data) in files {
        let plan = DrivePlan {
            chunk_size_bytes: MEASURE_CHUNK_BYTES,
            worker_count,
            map_order: MapOrder::Forward,
        };
        run_on_bytes(kernel, name, data, plan, &mut CountingSink::default())?;
    }
    Ok(())
}

/// A kernel configuration to measure.
struct Candidate {
    label: String,
    kernel: Arc<dyn Kernel>,
    files: Vec<(String, Vec<u8>)>,
    description: String,
}

/// Splits `data` into `count` files for in-order kernels, or keeps one file for parallel ones.
fn as_files(
    kernel: &dyn Kernel,
    data: Vec<u8>,
    count: usize,
    record_bytes: usize,
) -> Vec<(String, Vec<u8>)> {
    if kernel.schedule() == Schedule::ChunksInParallel || count <= 1 {
        return vec![("input".to_string(), data)];
    }
    let per_file = (data.len() / count / record_bytes).max(1) * record_bytes;
    data.chunks(per_file)
        .filter(|piece| piece.len() % record_bytes == 0)
        .enumerate()
        .map(|(index, piece)| (format!("input-{index}"), piece.to_vec()))
        .collect()
}

fn build(name: &str, arguments: &[&str]) -> Result<Arc<dyn Kernel>, ThroughputError> {
    let arguments: Vec<String> = arguments
        .iter()
        .map(|argument| argument.to_string())
        .collect();
    Ok(crate::registry::build_kernel(name, &arguments)?)
}

fn candidates(settings: &MeasureSettings) -> Result<Vec<Candidate>, ThroughputError> {
    let size = settings.input_bytes;
    let files_for_in_order = settings.worker_count.max(1) * 2;
    let random = synthetic_bytes(size, 1);
    let text = synthetic_text(size);
    let mut list = Vec::new();
    let mut add = |label: &str,
                   kernel: Arc<dyn Kernel>,
                   data: Vec<u8>,
                   record_bytes: usize,
                   description: &str| {
        let files = as_files(kernel.as_ref(), data, files_for_in_order, record_bytes);
        list.push(Candidate {
            label: label.to_string(),
            kernel,
            files,
            description: description.to_string(),
        });
    };
    let des_key = "key=133457799bbcdff1";
    add(
        "des-ecb",
        build("des-ecb", &[des_key])?,
        random.clone(),
        8,
        "random bytes",
    );
    add(
        "des-cbc",
        build("des-cbc", &[des_key, "iv=0001020304050607"])?,
        random.clone(),
        8,
        "random bytes",
    );
    let aes_key = "key=2b7e151628aed2a6abf7158809cf4f3c";
    add(
        "aes128-ctr",
        build(
            "aes128-ctr",
            &[aes_key, "iv=f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"],
        )?,
        random.clone(),
        1,
        "random bytes",
    );
    add(
        "crc32c",
        build("crc32c", &[])?,
        random.clone(),
        1,
        "random bytes",
    );
    add(
        "sha256",
        build("sha256", &[])?,
        random.clone(),
        1,
        "random bytes",
    );
    add(
        "grep (regex)",
        build("grep", &[r"pattern=needle\d+"])?,
        text.clone(),
        1,
        "text lines, 1 in 1000 matching",
    );
    add(
        "grep (literal)",
        build("grep", &["pattern=needle", "literal=true"])?,
        text,
        1,
        "text lines, 1 in 1000 matching",
    );
    let side = ((size as f64).sqrt() as usize).clamp(16, 1024);
    let image = synthetic_png(side, side)?;
    let image_description = format!(
        "{side}x{side} gray PNG ({} bytes; rate in PNG bytes)",
        image.len()
    );
    let sobel_files: Vec<(String, Vec<u8>)> = (0..files_for_in_order)
        .map(|index| (format!("image-{index}.png"), image.clone()))
        .collect();
    if let Some((model, sample)) = &settings.langid {
        let mut langid_text = Vec::with_capacity(size);
        while langid_text.len() < size && !sample.is_empty() {
            langid_text.extend_from_slice(&sample[..sample.len().min(size - langid_text.len())]);
        }
        for piece in [2048usize, 0] {
            let kernel: Arc<dyn Kernel> = Arc::new(Arc::new(crate::langid::LangIdKernel::new(
                Arc::clone(model),
                piece,
            )));
            let label = if piece == 0 {
                "langid (whole file)".to_string()
            } else {
                format!("langid ({piece} B pieces)")
            };
            let description = format!("UDHR text, {} languages", model.languages.len());
            add(&label, kernel, langid_text.clone(), 1, &description);
        }
    }
    let dimensions = 32;
    let queries = crate::knn::encode_vectors(
        &(0..dimensions * 16)
            .map(|index| (index % 97) as f32)
            .collect::<Vec<_>>(),
    );
    let knn_values: Vec<f32> = random
        .chunks_exact(4)
        .map(|bytes| f32::from(bytes[0]) / 8.0)
        .collect();
    let knn_data =
        crate::knn::encode_vectors(&knn_values[..knn_values.len() / dimensions * dimensions]);
    let knn = Arc::new(Arc::new(crate::knn::KnnKernel::new(
        dimensions,
        10,
        crate::knn::decode_vectors(&queries, dimensions).expect("whole vectors"),
    )));
    add(
        "knn (D=32, 16 queries, k=10)",
        knn,
        knn_data,
        dimensions * 4,
        "random f32 vectors",
    );
    let memory = format!("memory={}", (size / 4).max(1024));
    add(
        "sort (100 B records, 10 B key)",
        build("sort", &["record=100", "key=10", &memory])?,
        random.clone(),
        100,
        "random records, memory = input/4 (spills)",
    );
    let sorted = sorted_records(&random, 16);
    add(
        "search-index (16 B records)",
        build("search-index", &["record=16", "key=8"])?,
        sorted,
        16,
        "sorted random records",
    );
    list.push(Candidate {
        label: "sobel".into(),
        kernel: build("sobel", &[])?,
        files: sobel_files,
        description: image_description,
    });
    Ok(list)
}

fn sorted_records(data: &[u8], record_bytes: usize) -> Vec<u8> {
    let mut records: Vec<&[u8]> = data.chunks_exact(record_bytes).collect();
    records.sort_unstable();
    records.concat()
}

/// Measures every kernel; `progress` is called with each row as it completes.
pub fn measure_all(
    settings: &MeasureSettings,
    mut progress: impl FnMut(&ThroughputRow),
) -> Result<Vec<ThroughputRow>, ThroughputError> {
    let mut rows = Vec::new();
    for candidate in candidates(settings)? {
        if settings
            .only
            .as_ref()
            .is_some_and(|only| !candidate.label.contains(only.as_str()))
        {
            continue;
        }
        let single = measure_kernel(
            candidate.kernel.as_ref(),
            &candidate.files,
            1,
            settings.minimum_seconds,
        )?;
        let all = measure_kernel(
            candidate.kernel.as_ref(),
            &candidate.files,
            settings.worker_count,
            settings.minimum_seconds,
        )?;
        let row = ThroughputRow {
            kernel: candidate.label,
            schedule: candidate.kernel.schedule(),
            input_bytes: candidate
                .files
                .iter()
                .map(|(_, data)| data.len() as u64)
                .sum(),
            single_core_bytes_per_second: single.bytes_per_second,
            single_core_bytes_per_cpu_second: single.bytes_per_cpu_second,
            all_cores_bytes_per_second: all.bytes_per_second,
            worker_count: settings.worker_count,
            input_description: candidate.description,
        };
        progress(&row);
        rows.push(row);
    }
    Ok(rows)
}
