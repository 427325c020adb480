//! `flashpipe bench fs`: the file system and its engine measured side by side with fio,
//! ext4, tmpfs and ext4 on a RAM-backed loop device in one run (issues #3 and #13).
//!
//! Three parts, each optional through `--parts`:
//! 1. [`large_file`]: one large file on a store striped over device files, written and
//!    read sequentially (1 MiB commands) and read at random (4 KiB, QD1 and QD32)
//!    through the engine, beside fio (`io_uring`, `direct=1`) on the same device files
//!    and beside the same bytes in an ordinary file of the folder's file system
//!    (buffered `read()`/`write()` and buffered fio), see [`reference`].
//! 2. [`efficiency`]: the thesis's efficiency (HWFS ch. 4, Fig. 4.3-4.5, Tables 4.1-4.3):
//!    raw block transfer time over total time through the engine, on one and two RAM
//!    disks, for file sizes 1 KiB..100 MiB and FS block sizes 4, 8 and 16 KiB; beside it
//!    the same file sizes on tmpfs and on ext4 over a RAM-backed loop device
//!    ([`anchors`]), per file, write + fsync and read.
//! 3. [`small_files`]: create, write, read and delete many 2 KiB files, files per second,
//!    beside the same on the folder's file system.
//!
//! Every issue #13 target is evaluated from the measured figures and printed as met or
//! NOT MET with its figures ([`report`]); nothing is assumed.

mod anchors;
mod devices;
mod efficiency;
mod floor;
mod large_file;
pub(crate) mod page_cache;
mod reference;
mod report;
mod small_files;
mod store;

pub(crate) use store::{
    device_bytes_each, handoff_from_environment, start_engine, write_path_from_environment,
    StoreShape,
};
// The store measurements `bench net` repeats on stores striped over disk nodes.
pub(crate) use large_file::{measure_engine, STRIPE_UNIT_BYTES, WORKLOADS as LARGE_FILE_WORKLOADS};
pub(crate) use report::folder_file_system;
pub(crate) use small_files::{engine_phases as small_file_engine_phases, SMALL_FILE_BYTES};

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use devices::EfficiencyDevice;
use flashpipe_engine::{EngineError, StreamError};
use flashpipe_fs::{FlushError, FormatError, NamespaceError};
use flashpipe_store::units::parse_size_bytes;

/// One mebibyte.
const MIB: u64 = 1 << 20;
/// Default size of the large file.
const DEFAULT_LARGE_FILE_BYTES: u64 = 4 << 30;
/// Size of the large file in `--quick` runs.
const QUICK_LARGE_FILE_BYTES: u64 = 16 * MIB;
/// Default number of small files.
const DEFAULT_SMALL_FILE_COUNT: u64 = 100_000;
/// Number of small files in `--quick` runs.
const QUICK_SMALL_FILE_COUNT: u64 = 300;
/// Most small files.
const MOST_SMALL_FILE_COUNT: u64 = 1_000_000;
/// Default seconds per random-read phase.
const DEFAULT_RANDOM_RUNTIME_SECONDS: f64 = 5.0;
/// Seconds per random-read phase in `--quick` runs.
const QUICK_RANDOM_RUNTIME_SECONDS: f64 = 0.2;
/// The parts of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// The large file beside fio and ext4.
    Large,
    /// The thesis's efficiency on RAM disks.
    Efficiency,
    /// Many small files beside ext4.
    Small,
}

/// Options of `flashpipe bench fs`.
#[derive(Debug, clap::Args)]
pub struct BenchFsArgs {
    /// Size of the large file (human sizes: 4GiB, 256MiB), a multiple of 1 MiB, at least
    /// 8 MiB [default: 4GiB, 16MiB with --quick]. The folder needs about twice this free.
    #[arg(long, value_parser = parse_size_argument)]
    pub size: Option<u64>,
    /// Folder to work in; the benchmark makes (and removes, unless --keep) a subfolder
    /// there [default: the current directory].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Keep the benchmark's files afterwards.
    #[arg(long)]
    pub keep: bool,
    /// Print JSON instead of tables (every ratio sits in a field named *ratio*).
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report to this file (with the tables on standard output).
    #[arg(long)]
    pub save_json: Option<PathBuf>,
    /// A tiny run for tests: 16 MiB file, 0.2 s random phases, 300 small files,
    /// efficiency (and its tmpfs and ext4-RAM anchors) up to 1 MiB files once each, page
    /// cache not dropped.
    #[arg(long)]
    pub quick: bool,
    /// Number of 2 KiB files of the small-file part [default: 100000, 300 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MOST_SMALL_FILE_COUNT))]
    pub small_files: Option<u64>,
    /// Seconds per random-read phase (fractions allowed) [default: 5, 0.2 with --quick].
    #[arg(long, value_parser = crate::device::parse_runtime_seconds)]
    pub runtime_seconds: Option<f64>,
    /// FS block size of the large-file and small-file stores (4KiB, 8KiB, 16KiB, ...).
    #[arg(long, default_value = "4KiB", value_parser = parse_size_argument)]
    pub block_size: u64,
    /// Skip fio (its columns and ratios become n/a).
    #[arg(long)]
    pub no_fio: bool,
    /// Run only these parts (comma-separated) [default: all].
    #[arg(long, value_delimiter = ',', value_enum)]
    pub parts: Vec<Part>,
    /// Devices the efficiency part also measures besides the RAM disks, files of 100 KiB
    /// and more, one commit per file and commits batched (comma-separated: file,
    /// paced-flash, or none) [default: file,paced-flash]. The file device is a device file
    /// in the benchmark's folder (--dir).
    #[arg(long, value_delimiter = ',', value_enum)]
    pub efficiency_devices: Vec<EfficiencyDevice>,
}

/// What can stop the benchmark.
#[derive(Debug, thiserror::Error)]
pub enum BenchFsError {
    /// A bad command-line value.
    #[error("bad argument: {0}")]
    BadArgument(#[source] crate::error::BenchError),
    /// A local file or folder operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with the path.
        what: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A store could not be opened.
    #[error("{0}")]
    StoreOpen(#[from] flashpipe_store::store::StoreOpenError),
    /// mkfs failed.
    #[error("{0}")]
    Format(#[from] FormatError),
    /// A name operation failed.
    #[error("{0}")]
    Namespace(#[from] NamespaceError),
    /// A data operation of the file system failed.
    #[error("{0}")]
    FileIo(#[from] flashpipe_fs::FileIoError),
    /// A flush failed.
    #[error("{0}")]
    Flush(#[from] FlushError),
    /// The engine failed a command.
    #[error("{0}")]
    Engine(#[from] EngineError),
    /// A streamed transfer failed.
    #[error("{0}")]
    Stream(#[from] StreamError),
    /// A raw device request failed.
    #[error("{0}")]
    Device(#[from] flashpipe_device::DeviceError),
    /// Data read back differs from what was written.
    #[error("data check failed: {0}")]
    DataMismatch(String),
}

impl From<crate::pattern::DataMismatch> for BenchFsError {
    fn from(mismatch: crate::pattern::DataMismatch) -> BenchFsError {
        BenchFsError::DataMismatch(mismatch.to_string())
    }
}

impl BenchFsError {
    /// Wraps an I/O error with what was being done.
    fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchFsError {
        let what = what.into();
        move |source| BenchFsError::Io { what, source }
    }
}

/// The resolved settings of one run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Size of the large file.
    pub large_file_bytes: u64,
    /// Number of small files.
    pub small_file_count: u64,
    /// Time per random-read phase.
    pub random_runtime: Duration,
    /// FS block size of the file-backed stores.
    pub fs_block_size_bytes: u32,
    /// A tiny run.
    pub quick: bool,
    /// Run fio.
    pub use_fio: bool,
    /// Drop the page cache before buffered reads (not in quick runs).
    pub drop_page_cache: bool,
    /// The parts to run.
    pub parts: Vec<Part>,
    /// Devices the efficiency part measures besides the RAM disks.
    pub efficiency_devices: Vec<EfficiencyDevice>,
}

impl Settings {
    fn from_arguments(arguments: &BenchFsArgs) -> Result<Settings, BenchFsError> {
        let quick = arguments.quick;
        let large_file_bytes = arguments.size.unwrap_or(if quick {
            QUICK_LARGE_FILE_BYTES
        } else {
            DEFAULT_LARGE_FILE_BYTES
        });
        if large_file_bytes % MIB != 0 || large_file_bytes < 8 * MIB {
            return Err(BenchFsError::BadArgument(crate::error::invalid_input(
                format!("--size {large_file_bytes} must be a multiple of 1 MiB and at least 8 MiB"),
            )));
        }
        let fs_block_size_bytes = check_fs_block_size(arguments.block_size)?;
        let runtime_seconds = arguments.runtime_seconds.unwrap_or(if quick {
            QUICK_RANDOM_RUNTIME_SECONDS
        } else {
            DEFAULT_RANDOM_RUNTIME_SECONDS
        });
        let parts = if arguments.parts.is_empty() {
            vec![Part::Large, Part::Efficiency, Part::Small]
        } else {
            arguments.parts.clone()
        };
        Ok(Settings {
            large_file_bytes,
            small_file_count: arguments.small_files.unwrap_or(if quick {
                QUICK_SMALL_FILE_COUNT
            } else {
                DEFAULT_SMALL_FILE_COUNT
            }),
            random_runtime: Duration::from_secs_f64(runtime_seconds),
            fs_block_size_bytes,
            quick,
            use_fio: !arguments.no_fio,
            drop_page_cache: !quick,
            parts,
            efficiency_devices: efficiency_devices(&arguments.efficiency_devices)?,
        })
    }

    fn runs(&self, part: Part) -> bool {
        self.parts.contains(&part)
    }
}

/// The devices `--efficiency-devices` names: both by default; `none` only alone.
fn efficiency_devices(named: &[EfficiencyDevice]) -> Result<Vec<EfficiencyDevice>, BenchFsError> {
    if named.is_empty() {
        return Ok(vec![EfficiencyDevice::File, EfficiencyDevice::PacedFlash]);
    }
    if named.len() > 1 && named.contains(&EfficiencyDevice::None) {
        return Err(BenchFsError::BadArgument(crate::error::invalid_input(
            "--efficiency-devices none cannot be given with a device: name the devices, or none alone"
                .to_string(),
        )));
    }
    Ok(named.to_vec())
}

fn check_fs_block_size(block_size_bytes: u64) -> Result<u32, BenchFsError> {
    let valid =
        block_size_bytes.is_power_of_two() && (4096..=(1 << 20)).contains(&block_size_bytes);
    if !valid {
        return Err(BenchFsError::BadArgument(crate::error::invalid_input(
            format!("--block-size {block_size_bytes} must be a power of two from 4 KiB to 1 MiB"),
        )));
    }
    Ok(block_size_bytes as u32)
}

fn parse_size_argument(text: &str) -> Result<u64, String> {
    parse_size_bytes(text).map_err(|error| error.to_string())
}

/// The benchmark's own subfolder, removed on drop unless kept.
struct WorkFolder {
    path: PathBuf,
    keep: bool,
}

impl WorkFolder {
    fn create(parent: Option<&Path>, keep: bool) -> Result<WorkFolder, BenchFsError> {
        let parent = parent.map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        std::fs::create_dir_all(&parent).map_err(BenchFsError::io(format!(
            "creating folder {}",
            parent.display()
        )))?;
        // Absolute, because the store files written inside name their devices relative to
        // the working directory.
        let parent = std::fs::canonicalize(&parent).map_err(BenchFsError::io(format!(
            "resolving folder {}",
            parent.display()
        )))?;
        let path = parent.join(format!("flashpipe-bench-fs-{}", std::process::id()));
        std::fs::create_dir(&path).map_err(BenchFsError::io(format!(
            "creating folder {}",
            path.display()
        )))?;
        Ok(WorkFolder { path, keep })
    }
}

impl Drop for WorkFolder {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Runs `flashpipe bench fs`.
pub fn run(arguments: BenchFsArgs) -> crate::BenchResult {
    let settings = Settings::from_arguments(&arguments)?;
    // The engine choices named in the environment end the process on a bad value: read
    // them now, before the work folder exists, so a refused run leaves nothing behind.
    store::engine_config();
    let folder = WorkFolder::create(arguments.dir.as_deref(), arguments.keep)?;
    let progress = crate::progress::Progress::spinner("bench fs: looking for fio");
    let machine = report::Machine::describe(&folder.path);
    let fio = find_fio(&settings);
    let large_file = match settings.runs(Part::Large) {
        true => {
            progress.set_message("bench fs: measuring a large file");
            Some(large_file::run(&settings, &folder.path, fio.as_ref().ok())?)
        }
        false => None,
    };
    let efficiency = match settings.runs(Part::Efficiency) {
        true => {
            progress.set_message("bench fs: measuring the efficiency");
            Some(efficiency::run(&settings, &folder.path)?)
        }
        false => None,
    };
    let small_files = match settings.runs(Part::Small) {
        true => {
            progress.set_message("bench fs: measuring small files");
            Some(small_files::run(&settings, &folder.path)?)
        }
        false => None,
    };
    progress.finish();
    let report = report::Report::new(
        &settings,
        machine,
        fio.as_ref().map(|fio| fio.version.clone()).ok(),
        fio.err(),
        large_file,
        efficiency,
        small_files,
    );
    let json = serde_json::to_string_pretty(&report)?;
    if let Some(path) = &arguments.save_json {
        std::fs::write(path, &json)
            .map_err(BenchFsError::io(format!("writing {}", path.display())))?;
    }
    if arguments.json {
        println!("{json}");
    } else {
        report.print_tables();
    }
    Ok(())
}

fn find_fio(settings: &Settings) -> Result<crate::device::fio::Fio, String> {
    if !settings.use_fio {
        return Err("skipped (--no-fio)".to_string());
    }
    if !settings.runs(Part::Large) {
        return Err("not needed (large-file part not run)".to_string());
    }
    crate::device::fio::find()
}
