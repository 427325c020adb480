//! `flashpipe bench device`: raw device-layer throughput and latency
//! beside fio on the same file, and striped RAM disks and files beside `memcpy`.
//!
//! Workloads on one file (sequential 1 MiB reads and writes at each `--qd`, 4 KiB random
//! reads and writes at QD1 and QD32) run through the device layer (latency measured per
//! request on the device's clock) and through fio (`ioengine=io_uring`, `direct=1`) on
//! the same file, size and block size. RAM disks striped over 1, 2 and 4 members and a
//! stripe of 2 files run sequential reads and writes, compared with this machine's
//! `memcpy` bandwidth measured in the same run. Each issue #2 target is evaluated and
//! printed as met / NOT MET; nothing is assumed.

pub(crate) mod fio;
mod measure;
mod memory;
mod report;

use std::path::{Path, PathBuf};

use flashpipe_device::file::{FileDevice, FileDeviceConfig, FileEngine};
use flashpipe_device::{BlockDevice, BufferPool, DeviceError};

use measure::{Figures, Pattern, Workload};
use memory::CopyShape;
use report::{Report, StripeResult, WorkloadResult};

/// Bytes per sequential request.
const SEQUENTIAL_REQUEST_BYTES: u32 = 1 << 20;
/// Bytes per random request.
const RANDOM_REQUEST_BYTES: u32 = 4096;
/// Queue depths of the random workloads.
const RANDOM_QUEUE_DEPTHS: [u32; 2] = [1, 32];
/// Queue depth of the stripe workloads.
const STRIPE_QUEUE_DEPTH: u32 = 32;
/// Most memory given to RAM stripes (a quarter of it to each `memcpy` buffer).
const MOST_MEMORY_BYTES: u64 = 1 << 30;
/// Least memory given to RAM stripes and to each `memcpy` buffer: more than the caches.
const LEAST_MEMORY_BYTES: u64 = 64 << 20;
/// Largest `--runtime-seconds`.
const MOST_RUNTIME_SECONDS: f64 = 3600.0;

/// `--engine` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineArgument {
    /// io_uring, falling back to worker threads where refused.
    Auto,
    /// io_uring only.
    IoUring,
    /// Worker threads with pread/pwrite.
    ThreadPool,
}

impl EngineArgument {
    fn file_engine(self) -> FileEngine {
        match self {
            EngineArgument::Auto => FileEngine::Auto,
            EngineArgument::IoUring => FileEngine::IoUring,
            EngineArgument::ThreadPool => FileEngine::ThreadPool,
        }
    }
}

/// Options of `flashpipe bench device`.
#[derive(Debug, clap::Args)]
pub struct BenchDeviceArgs {
    /// Working set per file (human sizes: 256MiB, 4GiB); a multiple of 1 MiB.
    #[arg(long, default_value = "256MiB", value_parser = parse_size_argument)]
    pub size: u64,
    /// Folder for the files [default: a fresh folder under the current directory,
    /// removed afterwards unless --keep].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Keep the files (and the folder) afterwards.
    #[arg(long)]
    pub keep: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Seconds per workload (fractions allowed).
    #[arg(long, default_value_t = 3.0, value_parser = parse_runtime_seconds)]
    pub runtime_seconds: f64,
    /// File engine of the device layer.
    #[arg(long, value_enum, default_value = "auto")]
    pub engine: EngineArgument,
    /// Queue depths of the sequential workloads (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "32",
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub qd: Vec<u32>,
    /// Skip fio (its columns and ratios become n/a).
    #[arg(long)]
    pub no_fio: bool,
    /// Buffered I/O instead of O_DIRECT (for comparisons; fio then runs with direct=0).
    #[arg(long)]
    pub buffered: bool,
    /// Skip the RAM and 2-file stripes and the memcpy measurement.
    #[arg(long)]
    pub no_stripes: bool,
    /// Run only these single-file patterns (comma-separated) [default: all].
    #[arg(long, value_delimiter = ',', value_enum)]
    pub only: Vec<Pattern>,
}

/// What can stop the benchmark.
#[derive(Debug, thiserror::Error)]
pub enum BenchDeviceError {
    /// A bad command-line value.
    #[error("bad argument: {0}")]
    BadArgument(#[source] crate::error::BenchError),
    /// The benchmark's folder cannot be made.
    #[error("cannot create folder {path}: {source}")]
    Folder {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A device cannot be opened or set up.
    #[error("{0}")]
    Device(#[from] DeviceError),
    /// A workload failed.
    #[error("{workload}: {detail}")]
    Workload {
        /// Which workload.
        workload: String,
        /// What failed.
        detail: String,
    },
}

fn parse_size_argument(text: &str) -> Result<u64, String> {
    let size_bytes =
        flashpipe_store::units::parse_size_bytes(text).map_err(|error| error.to_string())?;
    let unit_bytes = u64::from(SEQUENTIAL_REQUEST_BYTES);
    if size_bytes < 2 * unit_bytes || size_bytes % unit_bytes != 0 {
        return Err(format!(
            "{text} is not a multiple of 1 MiB of at least 2 MiB"
        ));
    }
    Ok(size_bytes)
}

/// Parses a benchmark phase's length in seconds: a number in (0, 3600] (shared by the
/// `bench` commands).
pub(crate) fn parse_runtime_seconds(text: &str) -> Result<f64, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("\"{text}\" is not a number of seconds"))?;
    if !(seconds > 0.0 && seconds <= MOST_RUNTIME_SECONDS) {
        return Err(format!(
            "{text} is outside (0, {MOST_RUNTIME_SECONDS}] seconds"
        ));
    }
    Ok(seconds)
}

/// Everything one run needs, checked.
struct Plan {
    size_bytes: u64,
    runtime_seconds: f64,
    engine: FileEngine,
    direct_io: bool,
    sequential_queue_depths: Vec<u32>,
    use_fio: bool,
    include_stripes: bool,
    only_patterns: Vec<Pattern>,
    directory: PathBuf,
    keep: bool,
}

impl Plan {
    fn runtime_ns(&self) -> u64 {
        (self.runtime_seconds * 1e9) as u64
    }

    fn deepest_queue(&self) -> u32 {
        self.sequential_queue_depths
            .iter()
            .chain(RANDOM_QUEUE_DEPTHS.iter())
            .copied()
            .max()
            .unwrap_or(1)
    }

    fn workloads(&self) -> Vec<Workload> {
        let sequential = |pattern| {
            self.sequential_queue_depths
                .iter()
                .map(move |&queue_depth| Workload {
                    pattern,
                    request_size_bytes: SEQUENTIAL_REQUEST_BYTES,
                    queue_depth,
                })
        };
        let random = |pattern| {
            RANDOM_QUEUE_DEPTHS
                .iter()
                .map(move |&queue_depth| Workload {
                    pattern,
                    request_size_bytes: RANDOM_REQUEST_BYTES,
                    queue_depth,
                })
        };
        sequential(Pattern::SequentialWrite)
            .chain(sequential(Pattern::SequentialRead))
            .chain(random(Pattern::RandomWrite))
            .chain(random(Pattern::RandomRead))
            .filter(|workload| {
                self.only_patterns.is_empty() || self.only_patterns.contains(&workload.pattern)
            })
            .collect()
    }
}

/// Runs the benchmark.
pub fn run(arguments: BenchDeviceArgs) -> crate::BenchResult {
    if arguments.qd.is_empty() {
        return Err(BenchDeviceError::BadArgument(crate::error::invalid_input(
            "--qd needs at least one queue depth",
        ))
        .into());
    }
    let directory = arguments
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("flashpipe-bench-{}", std::process::id())));
    let plan = Plan {
        size_bytes: arguments.size,
        runtime_seconds: arguments.runtime_seconds,
        engine: arguments.engine.file_engine(),
        direct_io: !arguments.buffered,
        sequential_queue_depths: arguments.qd.clone(),
        use_fio: !arguments.no_fio,
        include_stripes: !arguments.no_stripes,
        only_patterns: arguments.only.clone(),
        directory,
        keep: arguments.keep,
    };
    let progress = crate::progress::Progress::spinner("bench device: preparing the files");
    let report = execute(&plan)?;
    progress.finish();
    if arguments.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report::render_table(&report));
    }
    Ok(())
}

/// Removes the files (and the folder) the run created, unless asked to keep them.
struct Cleanup {
    created_folder: Option<PathBuf>,
    created_files: Vec<PathBuf>,
    keep: bool,
}

impl Cleanup {
    fn track_file(&mut self, path: &Path) {
        if !path.exists() {
            self.created_files.push(path.to_path_buf());
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        for path in &self.created_files {
            let _ = std::fs::remove_file(path);
        }
        if let Some(folder) = &self.created_folder {
            let _ = std::fs::remove_dir(folder);
        }
    }
}

fn prepare_folder(plan: &Plan) -> Result<Cleanup, BenchDeviceError> {
    let existed = plan.directory.exists();
    std::fs::create_dir_all(&plan.directory).map_err(|source| BenchDeviceError::Folder {
        path: plan.directory.clone(),
        source,
    })?;
    Ok(Cleanup {
        created_folder: (!existed).then(|| plan.directory.clone()),
        created_files: Vec::new(),
        keep: plan.keep,
    })
}

fn open_file(
    plan: &Plan,
    cleanup: &mut Cleanup,
    file_name: &str,
    queue_depth: u32,
) -> Result<FileDevice, BenchDeviceError> {
    let path = plan.directory.join(file_name);
    cleanup.track_file(&path);
    Ok(FileDevice::open(FileDeviceConfig {
        queue_depth,
        create_size_bytes: Some(plan.size_bytes),
        engine: plan.engine,
        direct_io: plan.direct_io,
        ..FileDeviceConfig::new(path)
    })?)
}

fn execute(plan: &Plan) -> Result<Report, BenchDeviceError> {
    let mut cleanup = prepare_folder(plan)?;
    let mut fio = if plan.use_fio {
        fio::find()
    } else {
        Err("--no-fio".to_string())
    };
    let fio_version = fio.as_ref().ok().map(|fio| fio.version.clone());
    let mut device = open_file(plan, &mut cleanup, "bench-single.img", plan.deepest_queue())?;
    let pools = register_pools(&mut device, plan.deepest_queue())?;
    prefill(&mut device, Some(&pools.sequential))?;
    let single_file = run_single_file(plan, &mut device, &pools, &mut fio)?;
    let engine_in_use = device.engine_in_use().name().to_string();
    let fallback_reason = device.fallback_reason().map(str::to_string);
    let direct_io = device.direct_io_in_use();
    drop(device);
    let (memcpy_gb_per_s, stripes) = if plan.include_stripes {
        let mut memcpy = memory::MemcpyProbe::new(
            plan.size_bytes
                .clamp(LEAST_MEMORY_BYTES, MOST_MEMORY_BYTES / 4) as usize,
            SEQUENTIAL_REQUEST_BYTES as usize,
            STRIPE_QUEUE_DEPTH as usize,
        );
        let mut stripes = run_stripes(plan, &mut cleanup, &mut memcpy)?;
        let best_gb_per_s = memcpy.best_gb_per_s();
        for stripe in stripes.iter_mut().filter(|stripe| !stripe.in_memory) {
            stripe.throughput_ratio_to_peak_memcpy = Some(stripe.gb_per_s / best_gb_per_s);
        }
        (Some(best_gb_per_s), stripes)
    } else {
        (None, Vec::new())
    };
    let targets = report::evaluate_targets(&single_file, &stripes);
    Ok(Report {
        directory: plan.directory.display().to_string(),
        size_bytes_per_file: plan.size_bytes,
        runtime_seconds: plan.runtime_seconds,
        engine_in_use,
        direct_io,
        fallback_reason,
        fio_version,
        fio_unavailable_reason: fio.err(),
        single_file,
        memcpy_gb_per_s,
        stripes,
        targets,
    })
}

/// Registered buffer pools for the single file: one for each request size.
struct Pools {
    sequential: BufferPool,
    random: BufferPool,
}

fn register_pools(device: &mut FileDevice, queue_depth: u32) -> Result<Pools, BenchDeviceError> {
    let pools = Pools {
        sequential: BufferPool::new(queue_depth, SEQUENTIAL_REQUEST_BYTES as usize),
        random: BufferPool::new(queue_depth, RANDOM_REQUEST_BYTES as usize),
    };
    for pool in [&pools.sequential, &pools.random] {
        if let Err(error) = device.register_buffer_pool(pool) {
            crate::progress::note(&format!("flashpipe: going on with plain buffers: {error}"));
        }
    }
    Ok(pools)
}

/// Writes the whole device once so that every workload finds allocated, written blocks.
fn prefill(
    device: &mut dyn BlockDevice,
    pool: Option<&BufferPool>,
) -> Result<(), BenchDeviceError> {
    let workload = Workload {
        pattern: Pattern::SequentialWrite,
        request_size_bytes: SEQUENTIAL_REQUEST_BYTES,
        queue_depth: STRIPE_QUEUE_DEPTH.min(device.info().queue_depth),
    };
    let requests = device.info().size_bytes() / u64::from(SEQUENTIAL_REQUEST_BYTES);
    crate::progress::set_phase(format!("filling {}", device.info().name));
    crate::progress::note(&format!(
        "flashpipe: filling {} ({} MiB)",
        device.info().name,
        requests
    ));
    measure::run_on_device(device, &workload, u64::MAX / 2, Some(requests), pool)
        .map(|_| ())
        .map_err(|detail| BenchDeviceError::Workload {
            workload: format!("filling {}", device.info().name),
            detail,
        })
}

/// Who runs a round of a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runner {
    Fio,
    Layer,
}

/// One block of rounds in ABBA order, so that a drifting device (host-side caches, a
/// noisy neighbour) favours neither side. A workload runs one block per second of
/// `--runtime-seconds` (at least one); each side gets the runtime in all.
const ALTERNATING_BLOCK: [Runner; 4] = [Runner::Fio, Runner::Layer, Runner::Layer, Runner::Fio];

fn run_single_file(
    plan: &Plan,
    device: &mut FileDevice,
    pools: &Pools,
    fio: &mut Result<fio::Fio, String>,
) -> Result<Vec<WorkloadResult>, BenchDeviceError> {
    let path = PathBuf::from(&*device.info().name);
    let block_count = (plan.runtime_seconds.round() as usize).max(1);
    let round_ns = plan.runtime_ns() / (2 * block_count as u64);
    let mut results = Vec::new();
    for workload in plan.workloads() {
        let label = workload.label();
        let failed = |detail: String| BenchDeviceError::Workload {
            workload: label.clone(),
            detail,
        };
        crate::progress::set_phase(format!("measuring {label}"));
        crate::progress::note(&format!("flashpipe: {label}"));
        let pool = if workload.request_size_bytes == SEQUENTIAL_REQUEST_BYTES {
            &pools.sequential
        } else {
            &pools.random
        };
        let enters_before = device.uring_counters().map(|counters| counters.enter_calls);
        let mut layer_rounds = Vec::new();
        let mut fio_rounds = Vec::new();
        for runner in ALTERNATING_BLOCK.repeat(block_count) {
            if runner == Runner::Layer {
                layer_rounds.push(
                    measure::run_on_device(device, &workload, round_ns, None, Some(pool))
                        .map_err(failed)?,
                );
                continue;
            }
            let Ok(reference) = fio.as_ref() else {
                continue;
            };
            let fio_run = fio::FioRun {
                path: &path,
                size_bytes: plan.size_bytes,
                workload: &workload,
                runtime_ms: round_ns / 1_000_000,
                direct_io: plan.direct_io,
            };
            match reference.run(&fio_run) {
                Ok(figures) => fio_rounds.push(figures),
                Err(detail) => {
                    crate::progress::note(&format!(
                        "flashpipe: going on without fio, which failed: {detail}"
                    ));
                    *fio = Err(format!("fio failed on {label}: {detail}"));
                    fio_rounds.clear();
                }
            }
        }
        let layer = measure::combine_rounds(&layer_rounds);
        let enters_per_request = enters_per_request(device, enters_before, &layer);
        let fio_figures = (!fio_rounds.is_empty()).then(|| measure::combine_rounds(&fio_rounds));
        results.push(WorkloadResult::new(
            workload,
            layer,
            fio_figures,
            enters_per_request,
        ));
    }
    Ok(results)
}

fn enters_per_request(
    device: &FileDevice,
    enters_before: Option<u64>,
    layer: &Figures,
) -> Option<f64> {
    let enters_after = device.uring_counters()?.enter_calls;
    Some((enters_after - enters_before?) as f64 / layer.requests.max(1) as f64)
}

/// RAM stripes of 1, 2 and 4 members (each workload compared with `memcpy` measured
/// right before and after it) and a stripe of 2 files (ratio filled in by the caller).
fn run_stripes(
    plan: &Plan,
    cleanup: &mut Cleanup,
    memcpy: &mut memory::MemcpyProbe,
) -> Result<Vec<StripeResult>, BenchDeviceError> {
    let mut results = Vec::new();
    let ram_total_bytes = plan.size_bytes.clamp(LEAST_MEMORY_BYTES, MOST_MEMORY_BYTES);
    for member_count in [1u32, 2, 4] {
        let mut stripe = memory::ram_stripe(
            member_count,
            ram_total_bytes,
            SEQUENTIAL_REQUEST_BYTES,
            STRIPE_QUEUE_DEPTH,
        )
        .map_err(|detail| BenchDeviceError::Workload {
            workload: format!("RAM x{member_count}"),
            detail,
        })?;
        let device_name = format!("RAM x{member_count}");
        results.extend(run_sequential_pair(
            plan,
            &mut stripe,
            &device_name,
            member_count,
            Some(&mut *memcpy),
        )?);
    }
    let members = ["bench-stripe-a.img", "bench-stripe-b.img"]
        .iter()
        .map(|file_name| {
            open_file(plan, cleanup, file_name, STRIPE_QUEUE_DEPTH)
                .map(|device| Box::new(device) as Box<dyn BlockDevice>)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut stripe = memory::stripe(
        "file-stripe-x2",
        members,
        SEQUENTIAL_REQUEST_BYTES,
        STRIPE_QUEUE_DEPTH,
    )
    .map_err(|detail| BenchDeviceError::Workload {
        workload: "2-file stripe".to_string(),
        detail,
    })?;
    prefill(&mut stripe, None)?;
    results.extend(run_sequential_pair(plan, &mut stripe, "2 files", 2, None)?);
    Ok(results)
}

/// Sequential write then read of 1 MiB at QD32 on a stripe; in memory (with a
/// `memcpy` probe), each compared with the better `memcpy` measured around it.
fn run_sequential_pair(
    plan: &Plan,
    stripe: &mut dyn BlockDevice,
    device_name: &str,
    member_count: u32,
    mut memcpy: Option<&mut memory::MemcpyProbe>,
) -> Result<Vec<StripeResult>, BenchDeviceError> {
    let mut results = Vec::new();
    for pattern in [Pattern::SequentialWrite, Pattern::SequentialRead] {
        let workload = Workload {
            pattern,
            request_size_bytes: SEQUENTIAL_REQUEST_BYTES,
            queue_depth: STRIPE_QUEUE_DEPTH,
        };
        crate::progress::set_phase(format!("measuring {device_name} {}", workload.label()));
        crate::progress::note(&format!("flashpipe: {device_name} {}", workload.label()));
        let window_ns = plan.runtime_ns() / 4;
        let before = memcpy.as_mut().map(|probe| {
            (
                probe.sustained_gb_per_s(window_ns, CopyShape::WholeBuffer),
                probe.sustained_gb_per_s(window_ns, CopyShape::RequestSized),
            )
        });
        let figures = measure::run_on_device(stripe, &workload, plan.runtime_ns(), None, None)
            .map_err(|detail| BenchDeviceError::Workload {
                workload: format!("{device_name} {}", workload.label()),
                detail,
            })?;
        let after = memcpy.as_mut().map(|probe| {
            (
                probe.sustained_gb_per_s(window_ns, CopyShape::WholeBuffer),
                probe.sustained_gb_per_s(window_ns, CopyShape::RequestSized),
            )
        });
        let around = before
            .zip(after)
            .map(|(before, after)| ((before.0 + after.0) / 2.0, (before.1 + after.1) / 2.0));
        let memcpy_peak_gb_per_s = memcpy.as_mut().map(|probe| probe.best_gb_per_s());
        let gb_per_s = figures.mb_per_s / 1e3;
        let ratio = |reference: Option<f64>| reference.map(|reference| gb_per_s / reference);
        results.push(StripeResult {
            device: device_name.to_string(),
            member_count,
            pattern,
            gb_per_s,
            throughput_ratio_to_memcpy: ratio(around.map(|around| around.0)),
            memcpy_sustained_gb_per_s: around.map(|around| around.0),
            throughput_ratio_to_request_sized_memcpy: ratio(around.map(|around| around.1)),
            request_sized_memcpy_gb_per_s: around.map(|around| around.1),
            throughput_ratio_to_peak_memcpy: ratio(memcpy_peak_gb_per_s),
            figures,
            in_memory: around.is_some(),
        });
    }
    Ok(results)
}
