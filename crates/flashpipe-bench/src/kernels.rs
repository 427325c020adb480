//! `flashpipe bench kernels`: the RAD three-way comparison, per kernel, side by side in one run
//! (RAD III.C, Tables II-III):
//! (a) the near-data pipeline inside the engine over a store of device files;
//! (b) read the whole input through ordinary files, then compute on every core, no overlap
//!     (RAD's host-accelerator shape);
//! (c) a plain single-threaded program over ordinary files (RAD's software shape);
//! (d) a well-known tool (openssl, GNU grep, sha256sum, GNU sort, langid.py) where one exists.
//! The search-index row also answers lookups with the index it built, against `look`.
//! Targets: (a) >= 0.9 x min(storage bandwidth, kernel in-memory throughput on all cores), and
//! (a) at least as fast as (d). With `--small-files`, SISC 3.5's sweep of reader threads, slots
//! and slot size over many 2 KiB files. A sizing table (RAD Table II) closes the report.
//!
//! Fair comparisons (issue #13, item 7): each of (a)..(d) runs twice, cold then warm. Before
//! each side's cold run the page cache is dropped (`sync`, `echo 3 >
//! /proc/sys/vm/drop_caches`, root only), so the ordinary files of (b)..(d) and the tools
//! themselves come from the disk; the warm run follows right after. The store's device files
//! are opened with `O_DIRECT` and the engine keeps no data cache, so for (a) "cold" means the
//! engine freshly given the job with nothing of it buffered, and its two runs differ only by
//! what the disk under the device files caches. Both columns are reported; (a) >= (d) is
//! judged cold against cold and warm against warm. Where the cache could not be dropped (not
//! root, or `--quick`, which never drops it) the report says so and marks the cold figures as
//! warm.
//!
//! This is a benchmark: it reads the wall clock (`std::time::Instant`) for the ordinary-file and
//! tool columns; the pipeline column is timed by the store device's clock.

pub mod blast;
mod cases;
mod langid_anchors;
mod search_lookups;
mod sizing;
mod small_files;
pub mod store;
mod wasm;

use std::path::{Path, PathBuf};
use std::process::Command as Process;
use std::sync::Arc;
use std::time::Instant;

use flashpipe_engine::EngineClient;
use flashpipe_kernels::api::{CountingSink, Kernel, OutputKind, Schedule};
use flashpipe_kernels::driver::{run_files_in_parallel, run_on_bytes, DrivePlan, MapOrder};
use flashpipe_kernels::throughput::measure_kernel;
use flashpipe_pipeline::{OutputTarget, PipelineConfig};
use flashpipe_store::units::parse_size_bytes;
use serde::Serialize;

use crate::error::{invalid_input, BenchError, BenchErrorKind};
use crate::fs::page_cache::{drop_page_cache_if, PageCacheDrop};
use crate::kernels::store::KernelStore;
use cases::{bench_cases, BenchCase, ToolCommand};

use crate::column_table::{fixed, fixed_or, ColumnTable};
use crate::table::Align;
use crate::BenchResult;

const MIB: f64 = 1048576.0;

/// File-system block size of the comparison's store (`format_file_store`'s default geometry).
const DEFAULT_FS_BLOCK_BYTES: u32 = 16 << 10;

/// `flashpipe bench kernels`.
#[derive(Debug, clap::Args)]
pub struct BenchKernelsArgs {
    /// Input bytes per kernel (e.g. 32MiB).
    #[arg(long, default_value = "32MiB")]
    pub size: String,
    /// Folder for the store's device files and the ordinary input files (emptied of ours first).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Small inputs and fewer small files: a smoke run in seconds (the page cache is never
    /// dropped, so its cold figures are warm).
    #[arg(long)]
    pub quick: bool,
    /// Also run the many-small-files sweep (SISC 3.5).
    #[arg(long)]
    pub small_files: bool,
    /// Number of 2 KiB files for --small-files (default 50000; 2000 with --quick).
    #[arg(long)]
    pub small_file_count: Option<usize>,
    /// UDHR corpus for the language-identification row (default: udhr in
    /// $FLASHPIPE_SHARED_DATA or ../shared/data; the row is left out when it is absent).
    #[arg(long)]
    pub udhr: Option<PathBuf>,
    /// CRC32C module for the WebAssembly section (default: examples/wasm-kernels/crc32c,
    /// built for wasm32-unknown-unknown).
    #[arg(long)]
    pub wasm_module: Option<PathBuf>,
    /// Held-out pieces (scripts/fetch-langid-eval DIR): adds the language-identification
    /// section (the shipped profile against langid.py, lingua and fastText's lid.176).
    #[arg(long)]
    pub langid_held_out: Option<PathBuf>,
    /// Queries of the BLAST section, drawn from BioMarKs (default 100, 5 with --quick; 0
    /// leaves the section out).
    #[arg(long)]
    pub blast_queries: Option<usize>,
    /// Sections to run: rad (the built-in kernels beside read-then-compute and the tools),
    /// wasm (the WebAssembly CRC32C module), blast (the blastn kernel beside NCBI blastn).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "rad,wasm,blast"
    )]
    pub parts: Vec<KernelsPart>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// The sections of `bench kernels`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KernelsPart {
    /// The built-in kernels near the data beside read-then-compute and well-known tools.
    Rad,
    /// The WebAssembly CRC32C module beside the built-in kernel.
    Wasm,
    /// The blastn kernel beside NCBI blastn on BioMarKs.
    Blast,
}

/// One kernel's row.
#[derive(Debug, Clone, Serialize)]
pub struct KernelRow {
    /// Kernel label.
    pub kernel: String,
    /// Input files and bytes.
    pub file_count: usize,
    /// Input bytes.
    pub input_bytes: u64,
    /// Kernel alone in memory, all cores.
    pub kernel_in_memory_bytes_per_second: f64,
    /// (a) near-data pipeline, warm (the second run, right after the cold one).
    pub near_data_bytes_per_second: f64,
    /// (a) near-data pipeline, cold (page cache dropped first; see the report's caches).
    pub near_data_cold_bytes_per_second: f64,
    /// The pipeline stage that set the pace in (a).
    pub near_data_slowest_stage: String,
    /// (b) read whole input through ordinary files, then compute; warm.
    pub read_then_compute_bytes_per_second: f64,
    /// (b), cold.
    pub read_then_compute_cold_bytes_per_second: f64,
    /// (c) plain single-threaded program; warm.
    pub single_thread_bytes_per_second: f64,
    /// (c), cold.
    pub single_thread_cold_bytes_per_second: f64,
    /// (d) the tool, if any.
    pub tool: Option<String>,
    /// (d) its throughput, warm.
    pub tool_bytes_per_second: Option<f64>,
    /// (d) its throughput, cold.
    pub tool_cold_bytes_per_second: Option<f64>,
    /// Why (d) is missing or failed.
    pub tool_note: Option<String>,
    /// 0.9 x min(storage, kernel in memory).
    pub target_bytes_per_second: f64,
    /// (a) reached the target.
    pub bandwidth_target_met: bool,
    /// (a) >= (d), warm against warm (None without a tool).
    pub tool_target_met: Option<bool>,
    /// (a) >= (d), cold against cold (None without a tool).
    pub tool_target_met_cold: Option<bool>,
    /// (a) / (d), warm.
    pub tool_throughput_ratio: Option<f64>,
    /// (a) / (d), cold.
    pub tool_throughput_ratio_cold: Option<f64>,
    /// The kernel writes a transformed stream back (sizing counts flash writes for it).
    pub writes_results_back: bool,
    /// For the search index: lookups with the index it built.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_lookups: Option<search_lookups::SearchLookupReport>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct BenchKernelsReport {
    /// Where the store lives.
    pub dir: String,
    /// Cores on this machine.
    pub core_count: usize,
    /// Store read bandwidth (engine reads of a large file, nothing computed).
    pub storage_read_bytes_per_second: f64,
    /// One row per kernel.
    pub rows: Vec<KernelRow>,
    /// The small-file sweep, if asked for (the comparison's store, 16 KiB blocks).
    pub small_files: Option<small_files::SmallFilesReport>,
    /// The same sweep on a store with 4 KiB file-system blocks.
    pub small_files_small_blocks: Option<small_files::SmallFilesReport>,
    /// RAD Table II for these kernels.
    pub sizing: Vec<sizing::SizingRow>,
    /// What "cold" meant in this run.
    pub caches: CacheReport,
    /// Notes (tools installed or missing, page cache).
    pub notes: Vec<String>,
    /// The BLAST section (blastn kernel beside NCBI blastn), when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blast: Option<blast::BlastReport>,
}

/// What happened to the caches before the cold runs.
#[derive(Debug, Clone, Serialize)]
pub struct CacheReport {
    /// The page cache was dropped before every cold run.
    pub page_cache_dropped_before_cold_runs: bool,
    /// The cold figures are in truth warm (the cache could not be dropped).
    pub cold_figures_are_warm: bool,
    /// Why the cache was not dropped, when it was not.
    pub not_dropped_reason: Option<String>,
    /// What cold means for the store's side.
    pub store_side: String,
}

/// What cold means for (a), printed with the report.
const STORE_COLD_MEANING: &str = "the store's device files are opened with O_DIRECT and the \
engine keeps no data cache, so (a) cold = the engine given the job with nothing of it buffered \
(after the same page-cache drop); (a) warm = the same job again right after";

/// Drops the page cache before each cold run and remembers whether every drop worked.
struct ColdCaches {
    wanted: bool,
    refused: Option<String>,
}

impl ColdCaches {
    fn new(quick: bool) -> ColdCaches {
        ColdCaches {
            wanted: !quick,
            refused: None,
        }
    }

    fn drop_before_cold_run(&mut self) {
        if let PageCacheDrop::Refused(reason) = drop_page_cache_if(self.wanted) {
            self.refused.get_or_insert(reason);
        }
    }

    /// Runs `measure` cold (page cache dropped first), then warm (right after).
    fn cold_then_warm<T>(
        &mut self,
        mut measure: impl FnMut() -> BenchResult<T>,
    ) -> BenchResult<(T, T)> {
        self.drop_before_cold_run();
        let cold = measure()?;
        let warm = measure()?;
        Ok((cold, warm))
    }

    fn report(&self) -> CacheReport {
        let not_dropped_reason = match (&self.refused, self.wanted) {
            (Some(reason), _) => Some(reason.clone()),
            (None, false) => PageCacheDrop::NotAsked.reason_not_dropped(),
            (None, true) => None,
        };
        CacheReport {
            page_cache_dropped_before_cold_runs: not_dropped_reason.is_none(),
            cold_figures_are_warm: not_dropped_reason.is_some(),
            not_dropped_reason,
            store_side: STORE_COLD_MEANING.to_string(),
        }
    }
}

/// Runs the benchmark.
pub fn run(arguments: BenchKernelsArgs) -> BenchResult {
    // A bad engine choice in the environment ends the process: before anything is made.
    crate::fs::write_path_from_environment();
    crate::fs::handoff_from_environment();
    let size_bytes = if arguments.quick {
        2 << 20
    } else {
        usize::try_from(parse_size_bytes(&arguments.size)?)?
    };
    if size_bytes < 64 * 1024 {
        return Err(invalid_input("--size must be at least 64KiB").into());
    }
    let dir = arguments
        .dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("flashpipe-bench-kernels"));
    let progress = crate::progress::Progress::spinner("bench kernels: preparing the inputs");
    let mut notes = Vec::new();
    let udhr = arguments
        .udhr
        .clone()
        .unwrap_or_else(|| flashpipe_kernels::shared_data::shared_data_directory().join("udhr"));
    let runs = |part: KernelsPart| arguments.parts.contains(&part);
    if arguments.parts.is_empty() {
        return Err(invalid_input("--parts: name at least one of rad, wasm, blast").into());
    }
    let cases = if runs(KernelsPart::Rad) {
        let langid = langid_case(&udhr, size_bytes.min(4 << 20), &mut notes);
        bench_cases(size_bytes, langid)?
    } else {
        Vec::new()
    };
    let store_bytes = (cases.len() as u64 * size_bytes as u64 * 3 + (512 << 20)).max(1 << 30);
    progress.set_message("bench kernels: making the store");
    let store = make_store(&dir, store_bytes)?;
    progress.set_message("bench kernels: measuring the store's read bandwidth");
    let storage = if runs(KernelsPart::Rad) || runs(KernelsPart::Wasm) {
        storage_bandwidth(&store, size_bytes.max(8 << 20))?
    } else {
        0.0
    };
    let mut rows = Vec::new();
    let mut caches = ColdCaches::new(arguments.quick);
    for (index, case) in cases.iter().enumerate() {
        progress.set_counted_message(
            "bench kernels: measuring kernels",
            index as u64,
            cases.len() as u64,
            "done",
        );
        let row = bench_case(&store, &dir, case, storage, arguments.quick, &mut caches)?;
        if !arguments.json {
            crate::progress::note(&format!("measured {}", row.kernel));
        }
        rows.push(row);
    }
    if runs(KernelsPart::Wasm) {
        progress.set_message("bench kernels: WebAssembly kernels");
        wasm::run_section(&store, &arguments, size_bytes, storage, &mut notes)?;
    }
    progress.set_message("bench kernels: BLAST section");
    let blast_queries = match runs(KernelsPart::Blast) {
        true => arguments
            .blast_queries
            .unwrap_or(if arguments.quick { 5 } else { 100 }),
        false => 0,
    };
    let blast = blast::run_section(&store, &dir, blast_queries, arguments.quick, &mut notes)?;
    let small_file_count =
        arguments
            .small_file_count
            .unwrap_or(if arguments.quick { 2000 } else { 50_000 });
    let small = if arguments.small_files {
        progress.set_message("bench kernels: small files");
        Some(small_files::run_sweep(
            &store,
            DEFAULT_FS_BLOCK_BYTES,
            small_file_count,
            arguments.quick,
        )?)
    } else {
        None
    };
    store.close()?;
    let small_blocks = if arguments.small_files {
        Some(small_files::run_sweep_on_small_block_store(
            &dir,
            small_file_count,
            size_bytes.max(8 << 20),
            arguments.quick,
        )?)
    } else {
        None
    };
    notes.push(
        "(b), (c), (d) read ordinary files (cold: the page cache dropped first; warm: right \
         after); (a) reads the store's device files with O_DIRECT (io_uring), from the disk or \
         its cache"
            .to_string(),
    );
    progress.finish();
    let report = BenchKernelsReport {
        dir: dir.display().to_string(),
        core_count: std::thread::available_parallelism().map_or(1, usize::from),
        storage_read_bytes_per_second: storage,
        sizing: sizing::sizing_rows(&rows)?,
        rows,
        small_files: small,
        small_files_small_blocks: small_blocks,
        caches: caches.report(),
        notes,
        blast,
    };
    if arguments.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        if !report.rows.is_empty() {
            print_report(&report);
        }
        if let Some(blast) = &report.blast {
            blast::print_section(blast);
        }
    }
    if let Some(held_out) = &arguments.langid_held_out {
        langid_anchors::run_and_print(held_out, arguments.quick, arguments.json)?;
    }
    Ok(())
}

fn langid_case(
    udhr: &Path,
    size_bytes: usize,
    notes: &mut Vec<String>,
) -> Option<(Arc<dyn Kernel>, Vec<u8>)> {
    use flashpipe_kernels::langid::model::{train, TrainingSettings};
    use flashpipe_kernels::langid::udhr::{load_udhr, training_samples, CorpusSelection};
    let documents = match load_udhr(udhr, CorpusSelection::default()) {
        Ok(documents) => documents,
        Err(error) => {
            notes.push(format!("langid row left out: {error}"));
            return None;
        }
    };
    let model = Arc::new(train(
        &training_samples(&documents),
        TrainingSettings::default(),
    ));
    let sample: Vec<u8> = documents
        .iter()
        .flat_map(|document| document.test_text.iter().copied())
        .collect();
    let mut text = Vec::with_capacity(size_bytes);
    while text.len() < size_bytes && !sample.is_empty() {
        text.extend_from_slice(&sample[..sample.len().min(size_bytes - text.len())]);
    }
    let kernel: Arc<dyn Kernel> = Arc::new(Arc::new(flashpipe_kernels::langid::LangIdKernel::new(
        model, 2048,
    )));
    Some((kernel, text))
}

/// Creates a fresh store of two device files in `dir` and starts it.
fn make_store(dir: &Path, store_bytes: u64) -> BenchResult<KernelStore> {
    std::fs::create_dir_all(dir)?;
    let store_file = dir.join("bench-kernels.toml");
    for name in ["bench-kernels.toml", "kernels-dev0.img", "kernels-dev1.img"] {
        let path = dir.join(name);
        if path.exists() {
            std::fs::remove_file(path)?;
        }
    }
    let per_device = (store_bytes / 2).div_ceil(1 << 20) << 20;
    KernelStore::create(
        &store_file,
        &["kernels-dev0.img", "kernels-dev1.img"],
        per_device,
        16 << 10,
    )
}

/// Copies `files` into the store.
fn put_files(client: &mut EngineClient, files: &[(String, Vec<u8>)]) -> BenchResult<()> {
    for (name, data) in files {
        client.write_stream(name, &mut data.as_slice(), 1 << 20, 8, &mut |_| {})?;
    }
    Ok(())
}

/// Reads a large file through the engine with nothing computed: the store's read bandwidth.
fn storage_bandwidth(store: &KernelStore, size_bytes: usize) -> BenchResult<f64> {
    let mut client = store.engine.client(32);
    let data = flashpipe_kernels::throughput::synthetic_bytes(size_bytes, 3);
    put_files(&mut client, &[("storage.probe".to_string(), data)])?;
    client.call(flashpipe_engine::Command::Flush)?;
    let kernel = flashpipe_kernels::registry::build_kernel("crc32c", &[])?;
    let config = PipelineConfig {
        worker_count: 1,
        ..PipelineConfig::for_engine(&store.engine_config, OutputTarget::Discard)
    };
    let result = store.run(kernel, &["storage.probe".to_string()], &config)?;
    let read = &result.report.stages[0];
    Ok(read.capacity_bytes_per_second)
}

fn bench_case(
    store: &KernelStore,
    dir: &Path,
    case: &BenchCase,
    storage: f64,
    quick: bool,
    caches: &mut ColdCaches,
) -> BenchResult<KernelRow> {
    let mut client = store.engine.client(16);
    put_files(&mut client, &case.files)?;
    client.call(flashpipe_engine::Command::Flush)?;
    let paths = write_ordinary_files(dir, &case.files)?;
    let input_bytes: u64 = case.files.iter().map(|(_, data)| data.len() as u64).sum();
    let rate = |seconds: f64| input_bytes as f64 / seconds;
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let in_memory = measure_kernel(case.kernel.as_ref(), &case.files, cores, 0.3)?.bytes_per_second;
    let ((near_cold, _), (near, slowest)) = caches.cold_then_warm(|| near_data(store, case))?;
    let (read_then_compute_cold, read_then_compute) =
        caches.cold_then_warm(|| read_then_compute_seconds(case, &paths, cores).map(rate))?;
    let (single_cold, single) =
        caches.cold_then_warm(|| single_thread_seconds(case, &paths).map(rate))?;
    let tool = tool_cold_and_warm(case, &paths, caches, rate);
    let lookups = match &case.lookups {
        Some(plan) => Some(search_lookups::run_lookups(plan, store, &paths[0], quick)?),
        None => None,
    };
    for path in &paths {
        let _ = std::fs::remove_file(path);
    }
    let target = 0.9 * storage.min(in_memory);
    Ok(KernelRow {
        kernel: case.label.clone(),
        file_count: case.files.len(),
        input_bytes,
        kernel_in_memory_bytes_per_second: in_memory,
        near_data_bytes_per_second: near,
        near_data_cold_bytes_per_second: near_cold,
        near_data_slowest_stage: slowest,
        read_then_compute_bytes_per_second: read_then_compute,
        read_then_compute_cold_bytes_per_second: read_then_compute_cold,
        single_thread_bytes_per_second: single,
        single_thread_cold_bytes_per_second: single_cold,
        tool: case.tool.as_ref().map(|tool| tool.label.clone()),
        tool_bytes_per_second: tool.warm,
        tool_cold_bytes_per_second: tool.cold,
        tool_note: tool.note,
        target_bytes_per_second: target,
        bandwidth_target_met: near >= target,
        tool_target_met: tool.warm.map(|rate| near >= rate),
        tool_target_met_cold: tool.cold.map(|rate| near_cold >= rate),
        tool_throughput_ratio: tool.warm.map(|rate| near / rate),
        tool_throughput_ratio_cold: tool.cold.map(|rate| near_cold / rate),
        writes_results_back: case.kernel.output_kind() == OutputKind::TransformedStream,
        search_lookups: lookups,
    })
}

/// (d) cold and warm, or why it is missing.
struct ToolRates {
    cold: Option<f64>,
    warm: Option<f64>,
    note: Option<String>,
}

fn tool_cold_and_warm(
    case: &BenchCase,
    paths: &[PathBuf],
    caches: &mut ColdCaches,
    rate: impl Fn(f64) -> f64,
) -> ToolRates {
    let Some(tool) = &case.tool else {
        return ToolRates {
            cold: None,
            warm: None,
            note: Some(case.no_tool_reason.to_string()),
        };
    };
    match caches.cold_then_warm(|| run_tool(tool, paths)) {
        Ok((cold, warm)) => ToolRates {
            cold: Some(rate(cold)),
            warm: Some(rate(warm)),
            note: None,
        },
        Err(error) => ToolRates {
            cold: None,
            warm: None,
            note: Some(format!("{} failed: {error}", tool.label)),
        },
    }
}

/// (a): the pipeline, results written back into the store for stream kernels.
fn near_data(store: &KernelStore, case: &BenchCase) -> BenchResult<(f64, String)> {
    let names: Vec<String> = case.files.iter().map(|(name, _)| name.clone()).collect();
    let output = if case.kernel.output_kind() == OutputKind::TransformedStream {
        OutputTarget::StoreFiles(names.iter().map(|name| format!("{name}.out")).collect())
    } else {
        OutputTarget::Discard
    };
    let config = PipelineConfig::for_engine(&store.engine_config, output);
    let result = store.run(Arc::clone(&case.kernel), &names, &config)?;
    Ok((
        result.report.input_bytes_per_second,
        result.report.slowest_stage.to_string(),
    ))
}

fn write_ordinary_files(dir: &Path, files: &[(String, Vec<u8>)]) -> BenchResult<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for (name, data) in files {
        let path = dir.join(format!("ordinary-{name}"));
        std::fs::write(&path, data)?;
        paths.push(path);
    }
    Ok(paths)
}

/// (b): read every file whole, then compute with every core.
fn read_then_compute_seconds(
    case: &BenchCase,
    paths: &[PathBuf],
    cores: usize,
) -> BenchResult<f64> {
    let started = Instant::now();
    let mut files = Vec::new();
    for (path, (name, _)) in paths.iter().zip(&case.files) {
        files.push((name.clone(), std::fs::read(path)?));
    }
    if case.kernel.schedule() == Schedule::ChunksInOrder {
        run_files_in_parallel(case.kernel.as_ref(), &files, 1 << 20, cores)?;
    } else {
        for (name, data) in &files {
            let plan = DrivePlan {
                chunk_size_bytes: 1 << 20,
                worker_count: cores,
                map_order: MapOrder::Forward,
            };
            run_on_bytes(
                case.kernel.as_ref(),
                name,
                data,
                plan,
                &mut CountingSink::default(),
            )?;
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

/// (c): one thread, one file after another.
fn single_thread_seconds(case: &BenchCase, paths: &[PathBuf]) -> BenchResult<f64> {
    let started = Instant::now();
    for (path, (name, _)) in paths.iter().zip(&case.files) {
        let data = std::fs::read(path)?;
        run_on_bytes(
            case.kernel.as_ref(),
            name,
            &data,
            DrivePlan::single(1 << 20),
            &mut CountingSink::default(),
        )?;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// (d): the tool once per input file.
fn run_tool(tool: &ToolCommand, paths: &[PathBuf]) -> BenchResult<f64> {
    let started = Instant::now();
    for path in paths {
        let argv: Vec<String> = tool
            .argv
            .iter()
            .map(|argument| argument.replace("{input}", &path.display().to_string()))
            .collect();
        let output = Process::new(&argv[0])
            .args(&argv[1..])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .output()?;
        let grep_found_nothing = argv[0] == "grep" && output.status.code() == Some(1);
        if !(output.status.success() || grep_found_nothing) {
            return Err(BenchError::new(
                BenchErrorKind::Io(std::io::ErrorKind::Other),
                format!(
                    "{} failed: {}",
                    argv[0],
                    String::from_utf8_lossy(&output.stderr).trim()
                ),
            )
            .into());
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

fn print_report(report: &BenchKernelsReport) {
    println!(
        "store in {} ({} cores); store read bandwidth {:.1} MiB/s",
        report.dir,
        report.core_count,
        report.storage_read_bytes_per_second / MIB
    );
    println!("warm: each side's second run, right after its cold run");
    let mib = |bytes: f64| fixed(bytes / MIB, 1);
    ColumnTable::new(" ", &report.rows)
        .left("kernel", 30, |row| row.kernel.clone())
        .right("MiB", 8, |row| mib(row.input_bytes as f64))
        .right("mem", 9, |row| mib(row.kernel_in_memory_bytes_per_second))
        .right("(a)near", 9, |row| mib(row.near_data_bytes_per_second))
        .right("(b)r+c", 9, |row| {
            mib(row.read_then_compute_bytes_per_second)
        })
        .right("(c)1thr", 9, |row| mib(row.single_thread_bytes_per_second))
        .right("(d)tool", 9, |row| {
            row.tool_bytes_per_second.map_or("-".to_string(), mib)
        })
        .right("a/(d)", 8, |row| {
            let ratio = row
                .tool_bytes_per_second
                .map(|rate| row.near_data_bytes_per_second / rate);
            fixed_or(ratio, 2, "-")
        })
        .column_after("  ", "slowest", 8, Align::Left, |row| {
            row.near_data_slowest_stage.clone()
        })
        .left("0.9xmin", 9, |row| {
            met(Some(row.bandwidth_target_met)).to_string()
        })
        .left("a>=(d)", 9, |row| met(row.tool_target_met).to_string())
        .print();
    print_cold_table(report);
    println!("(throughputs in MiB/s of input)");
    for row in &report.rows {
        if let Some(note) = &row.tool_note {
            println!("  {}: (d) {note}", row.kernel);
        }
    }
    for row in &report.rows {
        if let Some(lookups) = &row.search_lookups {
            search_lookups::print_lookups(&row.kernel, lookups);
        }
    }
    for small in [&report.small_files, &report.small_files_small_blocks]
        .into_iter()
        .flatten()
    {
        small_files::print_sweep(small);
    }
    sizing::print_sizing(&report.sizing);
    for note in &report.notes {
        println!("note: {note}");
    }
}

/// The cold runs; each figure marked `w` when the page cache could not be dropped.
fn print_cold_table(report: &BenchKernelsReport) {
    let caches = &report.caches;
    match &caches.not_dropped_reason {
        None => println!(
            "cold: page cache dropped (sync; echo 3 > /proc/sys/vm/drop_caches) before each side's first run"
        ),
        Some(reason) => println!(
            "cold: page cache NOT dropped ({reason}): every figure below is WARM (marked w)"
        ),
    }
    let marker = if caches.cold_figures_are_warm {
        "w"
    } else {
        ""
    };
    let mib = |bytes: f64| format!("{:.1}{marker}", bytes / MIB);
    ColumnTable::new(" ", &report.rows)
        .left("kernel", 30, |row| row.kernel.clone())
        .right(
            "(a)near",
            10,
            |row| mib(row.near_data_cold_bytes_per_second),
        )
        .right("(b)r+c", 10, |row| {
            mib(row.read_then_compute_cold_bytes_per_second)
        })
        .right("(c)1thr", 10, |row| {
            mib(row.single_thread_cold_bytes_per_second)
        })
        .right("(d)tool", 10, |row| {
            row.tool_cold_bytes_per_second.map_or("-".to_string(), mib)
        })
        .right("a/(d)", 8, |row| {
            fixed_or(row.tool_throughput_ratio_cold, 2, "-")
        })
        .column_after("  ", "a>=(d)", 9, Align::Left, |row| {
            met(row.tool_target_met_cold).to_string()
        })
        .print();
    println!("(a) cold: {}", caches.store_side);
}

fn met(value: Option<bool>) -> &'static str {
    value.map_or("-", |met| crate::verdict::Verdict::of(met).label())
}
