//! `flashpipe bench mount`: a store mounted through FUSE (`flashpipe mount`) beside the
//! CLI on the same store, and beside bindfs (another FUSE file system) over tmpfs, side by
//! side in one run.
//!
//! On one file store (one device file of the scratch folder, /dev/shm by default, so that
//! the device is not what is measured), per round: `flashpipe put` of a source file, then
//! the mount up: the same bytes written into a new file through it (1 MiB writes, then
//! fsync) and the put's file read back through it into a file of the scratch folder;
//! create, stat and unlink of `--files` empty files in one directory; the mount stopped
//! (its last commit), then `flashpipe get` of the file the mount wrote into a file of the
//! scratch folder; the mount again with `--direct-reads` and the put's file read back once
//! more. Both directions have the same source and sink on each side (the source
//! file, a file of the scratch folder); the CLI's times also hold its process start, the
//! store's open and close, which the mount paid before its rows. The same metadata phases
//! through bindfs mirroring a folder of the scratch folder's file system, and on that folder
//! directly. Best of `--rounds`.
//! Targets (issue text): large files through the mount >= 0.8x the CLI's rates; metadata
//! within 2x of bindfs.

mod processes;
mod workloads;

use std::path::{Path, PathBuf};

use clap::Args;
use flashpipe_bench_harness::column_table::{fixed, ColumnTable};
use flashpipe_bench_harness::option_range::check_within;
use flashpipe_bench_harness::output::print_json_or_text;
use flashpipe_bench_harness::pattern::DataPattern;
use serde::Serialize;

use crate::error::{invalid_input, io_with};
use crate::scratch::Scratch;
use crate::BenchResult;
use processes::{flashpipe_program, run_flashpipe, BindfsMount, FlashpipeMount};
use workloads::{metadata, read_copy, write_copy, MetadataTimes, CHUNK_BYTES};

/// The large-file target: the mount's rate over the CLI's.
const LARGE_TARGET_RATIO: f64 = 0.8;
/// The metadata target: the mount's time per operation over bindfs's.
const METADATA_TARGET_RATIO: f64 = 2.0;

/// `flashpipe bench mount`.
#[derive(Debug, Args)]
pub struct BenchMountArgs {
    /// Folder for the store's device file, the source file and bindfs's folder (default:
    /// /dev/shm where it exists, else the temporary folder).
    #[arg(long)]
    pub folder: Option<PathBuf>,
    /// MiB of the large file (1 to 65536).
    #[arg(long, default_value_t = 1024)]
    pub size_mib: u64,
    /// Files of the metadata phases (1 to 1000000).
    #[arg(long, default_value_t = 10_000)]
    pub files: u32,
    /// Rounds; the best of each figure is shown (1 to 20).
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// The mount's `--commit-delay-ms` (its default when not given).
    #[arg(long, value_name = "MS")]
    pub commit_delay_ms: Option<u64>,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// A large-file row: the mount beside the CLI.
#[derive(Debug, Clone, Serialize)]
pub struct LargeRow {
    /// `write`, `read` or `read, --direct-reads` (a mount with that option).
    pub direction: &'static str,
    /// MiB/s through the mount.
    pub mount_mib_s: f64,
    /// MiB/s of the CLI (`put` from a file, or `get` into one, of the scratch folder).
    pub cli_mib_s: f64,
    /// `mount_mib_s / cli_mib_s`.
    pub ratio: f64,
    /// Whether `ratio` reaches the target.
    pub met: bool,
}

/// A metadata row: microseconds per operation.
#[derive(Debug, Clone, Serialize)]
pub struct MetadataRow {
    /// `create`, `stat` or `unlink`.
    pub operation: &'static str,
    /// Through the mount.
    pub mount_us: f64,
    /// Through bindfs over the folder.
    pub bindfs_us: f64,
    /// On the folder directly.
    pub folder_us: f64,
    /// `mount_us / bindfs_us`.
    pub ratio: f64,
    /// Whether `ratio` is within the target.
    pub met: bool,
}

/// What `bench mount` measured.
#[derive(Debug, Serialize)]
pub struct MountReport {
    /// The command.
    pub command: &'static str,
    /// CPUs of this machine.
    pub cpus: usize,
    /// The scratch folder's parent.
    pub folder: String,
    /// MiB of the large file.
    pub size_mib: u64,
    /// Files of the metadata phases.
    pub files: u32,
    /// Rounds run.
    pub rounds: u32,
    /// The mount's `--commit-delay-ms`, when given.
    pub commit_delay_ms: Option<u64>,
    /// The large-file rows (target: ratio >= 0.8).
    pub large: Vec<LargeRow>,
    /// The metadata rows (target: ratio <= 2).
    pub metadata: Vec<MetadataRow>,
}

/// Runs `flashpipe bench mount`.
pub fn run(arguments: BenchMountArgs) -> BenchResult {
    check_within("--size-mib", arguments.size_mib, 1..=65_536)
        .map_err(|error| invalid_input(error.to_string()))?;
    check_within("--files", arguments.files, 1..=1_000_000)
        .map_err(|error| invalid_input(error.to_string()))?;
    check_within("--rounds", arguments.rounds, 1..=20)
        .map_err(|error| invalid_input(error.to_string()))?;
    if let Some(delay_ms) = arguments.commit_delay_ms {
        check_within("--commit-delay-ms", delay_ms, 0..=60_000)
            .map_err(|error| invalid_input(error.to_string()))?;
    }
    let parent = match &arguments.folder {
        Some(folder) if !folder.is_dir() => {
            return Err(invalid_input(format!(
                "--folder {}: not a folder; give an existing folder",
                folder.display()
            ))
            .into())
        }
        Some(folder) => folder.clone(),
        None if Path::new("/dev/shm").is_dir() => PathBuf::from("/dev/shm"),
        None => std::env::temp_dir(),
    };
    let scratch = Scratch::new(&parent, "mount")?;
    let bench = Bench::prepare(&arguments, scratch.path())?;
    let mut best: Option<RoundFigures> = None;
    for _ in 0..arguments.rounds {
        let round = bench.round()?;
        best = Some(match best {
            None => round,
            Some(best) => best.best(&round),
        });
    }
    let best = best.expect("at least one round");
    let report = MountReport {
        command: "bench mount",
        cpus: std::thread::available_parallelism().map_or(1, usize::from),
        folder: parent.display().to_string(),
        size_mib: arguments.size_mib,
        files: arguments.files,
        rounds: arguments.rounds,
        commit_delay_ms: arguments.commit_delay_ms,
        large: best.large_rows(arguments.size_mib),
        metadata: best.metadata_rows(),
    };
    drop(scratch);
    print_json_or_text(arguments.json, &report, print_text)?;
    Ok(())
}

/// The run's fixed parts: the program, the store, the source file and the folders.
struct Bench {
    program: PathBuf,
    store: PathBuf,
    source: PathBuf,
    mount_point: PathBuf,
    bindfs_source: PathBuf,
    bindfs_point: PathBuf,
    files: u32,
    mount_options: Vec<String>,
}

/// One round's times.
#[derive(Debug, Clone, Copy)]
struct RoundFigures {
    mount_write_s: f64,
    mount_read_s: f64,
    mount_direct_read_s: f64,
    cli_put_s: f64,
    cli_get_s: f64,
    mount_metadata: MetadataTimes,
    bindfs_metadata: MetadataTimes,
    folder_metadata: MetadataTimes,
}

impl Bench {
    fn prepare(arguments: &BenchMountArgs, folder: &Path) -> BenchResult<Bench> {
        let program = flashpipe_program()?;
        let store = folder.join("store.toml");
        let device = folder.join("device0");
        // two copies of the large file, the empty files' blocks, and room for the log
        let store_mib = 2 * arguments.size_mib + u64::from(arguments.files) / 16 + 512;
        run_flashpipe(
            &program,
            &[
                "mkfs",
                "--devices",
                &device.display().to_string(),
                "--size",
                &format!("{store_mib}MiB"),
                &store.display().to_string(),
            ],
        )?;
        let source = folder.join("source.bin");
        write_source(&source, arguments.size_mib << 20)?;
        let bench = Bench {
            program,
            store,
            source,
            mount_point: folder.join("mount"),
            bindfs_source: folder.join("bindfs-source"),
            bindfs_point: folder.join("bindfs"),
            files: arguments.files,
            mount_options: arguments
                .commit_delay_ms
                .map(|delay_ms| vec!["--commit-delay-ms".to_string(), delay_ms.to_string()])
                .unwrap_or_default(),
        };
        for path in [
            &bench.mount_point,
            &bench.bindfs_source,
            &bench.bindfs_point,
        ] {
            std::fs::create_dir(path).map_err(io_with(format!("creating {}", path.display())))?;
        }
        Ok(bench)
    }

    fn round(&self) -> BenchResult<RoundFigures> {
        let store = self.store.display().to_string();
        let source = self.source.display().to_string();
        let flashpipe = |arguments: &[&str]| run_flashpipe(&self.program, arguments);
        let cli_put = flashpipe(&["put", &store, &source, "--as", "cli.bin"])?;
        let mount = FlashpipeMount::start(
            &self.program,
            &self.store,
            &self.mount_point,
            &self.mount_options,
        )?;
        let mount_write = write_copy(&self.source, &self.mount_point.join("mount.bin"))?;
        let mount_read = self.read_back()?;
        let mount_metadata = metadata_in(&self.mount_point.join("meta"), self.files)?;
        mount.stop()?;
        let fetched = self.source.with_file_name("fetched.bin");
        let cli_get = flashpipe(&["get", &store, "mount.bin", &fetched.display().to_string()])?;
        std::fs::remove_file(&fetched)
            .map_err(io_with(format!("removing {}", fetched.display())))?;
        let direct_options = [&self.mount_options[..], &["--direct-reads".to_string()]].concat();
        let mount = FlashpipeMount::start(
            &self.program,
            &self.store,
            &self.mount_point,
            &direct_options,
        )?;
        let mount_direct_read = self.read_back()?;
        mount.stop()?;
        flashpipe(&["rm", &store, "cli.bin", "mount.bin"])?;
        let bindfs = BindfsMount::start(&self.bindfs_source, &self.bindfs_point)?;
        let bindfs_metadata = metadata_in(&self.bindfs_point.join("meta"), self.files)?;
        drop(bindfs);
        let folder_metadata = metadata_in(&self.bindfs_source.join("meta"), self.files)?;
        Ok(RoundFigures {
            mount_write_s: mount_write.as_secs_f64(),
            mount_read_s: mount_read.as_secs_f64(),
            mount_direct_read_s: mount_direct_read.as_secs_f64(),
            cli_put_s: cli_put.as_secs_f64(),
            cli_get_s: cli_get.as_secs_f64(),
            mount_metadata,
            bindfs_metadata,
            folder_metadata,
        })
    }
}

impl Bench {
    /// Reads the put's file back through the mount into a file of the scratch folder (as
    /// `get` writes one); how long it took, once its length is checked.
    fn read_back(&self) -> BenchResult<std::time::Duration> {
        let (took, read_bytes) = read_copy(
            &self.mount_point.join("cli.bin"),
            &self.source.with_file_name("read.bin"),
        )?;
        let expected_bytes = std::fs::metadata(&self.source)
            .map_err(io_with("stat of the source file"))?
            .len();
        if read_bytes != expected_bytes {
            return Err(invalid_input(format!(
                "the mount read {read_bytes} bytes of cli.bin, which holds {expected_bytes}"
            ))
            .into());
        }
        Ok(took)
    }
}

/// The metadata phases in a new directory `folder`, removed afterwards.
fn metadata_in(folder: &Path, files: u32) -> BenchResult<MetadataTimes> {
    std::fs::create_dir(folder).map_err(io_with(format!("creating {}", folder.display())))?;
    let times = metadata(folder, files)?;
    std::fs::remove_dir(folder).map_err(io_with(format!("removing {}", folder.display())))?;
    Ok(times)
}

/// Writes `size_bytes` of the harness's data pattern to `path`.
fn write_source(path: &Path, size_bytes: u64) -> BenchResult<()> {
    use std::io::Write;
    let mut file =
        std::fs::File::create(path).map_err(io_with(format!("creating {}", path.display())))?;
    let pattern = DataPattern::new();
    let mut buffer = vec![0u8; CHUNK_BYTES];
    let mut offset_bytes = 0u64;
    while offset_bytes < size_bytes {
        let length = (size_bytes - offset_bytes).min(CHUNK_BYTES as u64) as usize;
        pattern.fill(offset_bytes, &mut buffer[..length]);
        file.write_all(&buffer[..length])
            .map_err(io_with(format!("writing {}", path.display())))?;
        offset_bytes += length as u64;
    }
    Ok(())
}

impl RoundFigures {
    fn best(&self, other: &RoundFigures) -> RoundFigures {
        RoundFigures {
            mount_write_s: self.mount_write_s.min(other.mount_write_s),
            mount_read_s: self.mount_read_s.min(other.mount_read_s),
            mount_direct_read_s: self.mount_direct_read_s.min(other.mount_direct_read_s),
            cli_put_s: self.cli_put_s.min(other.cli_put_s),
            cli_get_s: self.cli_get_s.min(other.cli_get_s),
            mount_metadata: self.mount_metadata.best(other.mount_metadata),
            bindfs_metadata: self.bindfs_metadata.best(other.bindfs_metadata),
            folder_metadata: self.folder_metadata.best(other.folder_metadata),
        }
    }

    fn large_rows(&self, size_mib: u64) -> Vec<LargeRow> {
        let mib = size_mib as f64;
        [
            ("write", self.mount_write_s, self.cli_put_s),
            ("read", self.mount_read_s, self.cli_get_s),
            (
                "read, --direct-reads",
                self.mount_direct_read_s,
                self.cli_get_s,
            ),
        ]
        .into_iter()
        .map(|(direction, mount_s, cli_s)| {
            let (mount_mib_s, cli_mib_s) = (mib / mount_s, mib / cli_s);
            let ratio = mount_mib_s / cli_mib_s;
            LargeRow {
                direction,
                mount_mib_s,
                cli_mib_s,
                ratio,
                met: ratio >= LARGE_TARGET_RATIO,
            }
        })
        .collect()
    }

    fn metadata_rows(&self) -> Vec<MetadataRow> {
        let (mount, bindfs, folder) = (
            self.mount_metadata,
            self.bindfs_metadata,
            self.folder_metadata,
        );
        [
            (
                "create",
                mount.create_us,
                bindfs.create_us,
                folder.create_us,
            ),
            ("stat", mount.stat_us, bindfs.stat_us, folder.stat_us),
            (
                "unlink",
                mount.unlink_us,
                bindfs.unlink_us,
                folder.unlink_us,
            ),
        ]
        .into_iter()
        .map(|(operation, mount_us, bindfs_us, folder_us)| {
            let ratio = mount_us / bindfs_us;
            MetadataRow {
                operation,
                mount_us,
                bindfs_us,
                folder_us,
                ratio,
                met: ratio <= METADATA_TARGET_RATIO,
            }
        })
        .collect()
    }
}

fn met_word(met: bool) -> String {
    if met { "MET" } else { "NOT MET" }.to_string()
}

fn print_text(report: &MountReport) {
    println!(
        "bench mount: a file store in {} mounted (flashpipe mount, in process{}) beside the CLI on the same store and bindfs over the same folder; {} CPUs; best of {} round(s)",
        report.folder,
        report
            .commit_delay_ms
            .map_or(String::new(), |delay_ms| format!(", --commit-delay-ms {delay_ms}")),
        report.cpus,
        report.rounds
    );
    println!();
    println!(
        "Large file, {} MiB (MiB/s; write: 1 MiB writes from a file then fsync, against put of that file; read: 1 MiB reads into a file, against get into a file; the CLI's times include its process start and the store's open)",
        report.size_mib
    );
    ColumnTable::new("  ", report.large.iter())
        .left("direction", 20, |row: &LargeRow| row.direction.to_string())
        .right("mount", 9, |row| fixed(row.mount_mib_s, 1))
        .right("CLI", 9, |row| fixed(row.cli_mib_s, 1))
        .right("ratio", 6, |row| fixed(row.ratio, 2))
        .left(">= 0.8x", 7, |row| met_word(row.met))
        .print();
    println!();
    println!(
        "Metadata, {} empty files in one directory (us per operation; folder: the same operations on bindfs's folder directly)",
        report.files
    );
    ColumnTable::new("  ", report.metadata.iter())
        .left("operation", 9, |row: &MetadataRow| {
            row.operation.to_string()
        })
        .right("mount", 9, |row| fixed(row.mount_us, 1))
        .right("bindfs", 9, |row| fixed(row.bindfs_us, 1))
        .right("folder", 9, |row| fixed(row.folder_us, 1))
        .right("ratio", 6, |row| fixed(row.ratio, 2))
        .left("<= 2x", 7, |row| met_word(row.met))
        .print();
}
