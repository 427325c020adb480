//! `flashpipe bench net`: flashpipe's NBD server beside `qemu-nbd` and `nbdkit` serving the
//! same disk, all driven by the same client, fio's own `nbd` ioengine (libnbd), over
//! loopback TCP and a Unix socket, in one run; and a store striped over 1, 2, 4 and 8
//! loopback disk nodes beside the same store over local RAM disks ([`stripe`]).
//!
//! Server rows, for each disk of `--disks` ([`served_disk`]): a RAM disk of the same size
//! per server (flashpipe `ram:SIZE` in this process, `qemu-nbd` on a raw file in
//! `/dev/shm`, `nbdkit memory`), and one file in `--file-dir` that every server serves in
//! turn, with the caching choice of `--file-cache` for all. Workloads: 1 MiB sequential
//! reads and writes (queue depth 8), 4 KiB random reads and writes at queue depth 1 (mean
//! and p99 latency) and 32, each with 1 and 4 connections (fio's `numjobs`, one NBD
//! connection per job; multi-conn). Each server's disk is first filled by one sequential
//! write so reads read data, not holes. The ratio column is flashpipe's throughput over the
//! better of the other two on the same disk (issue #15's target: >= 1.0x on every row); for
//! the queue-depth-1 rows the latency columns are the figures to read. A server whose
//! program is missing is left out with a note. `--parts tls` (not run by default) measures
//! what TLS costs flashpipe's client and server ([`tls`]).

mod disk_nodes;
mod external_server;
mod served_disk;
mod stripe;
mod tls;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use clap::Args;
use flashpipe_base::WaitPolicy;
use flashpipe_nbd::server::{NbdServer, ReaderWindow, ServerConfig, ServerLimits};
use serde_json::json;

pub use served_disk::{FileCache, NetDisk};
use served_disk::{ServedDisk, SharedFile};
use stripe::{StripeRow, StripeSettings};

use crate::error::{internal, invalid_input, not_found, BenchError, BenchErrorKind};
use crate::BenchResult;
use flashpipe_bench_harness::fio;

mod report;
use report::{print_tables, results_json};

/// Least size of the striping part's big file (what `bench fs` allows).
const LEAST_STRIPE_FILE_BYTES: u64 = 8 << 20;
/// Most small files of the striping part.
const MOST_STRIPE_SMALL_FILES: u64 = 1_000_000;

/// The parts of `bench net`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NetPart {
    /// flashpipe's NBD server beside qemu-nbd and nbdkit, through fio.
    Servers,
    /// A store striped over loopback disk nodes beside the same store over RAM disks.
    Stripe,
    /// flashpipe's client and server over nbds:// (TLS) beside nbd://.
    Tls,
}

/// `flashpipe bench net`.
#[derive(Debug, Args)]
pub struct BenchNetArgs {
    /// Parts to run: servers (fio against each NBD server), stripe (a store over disk nodes),
    /// tls (nbds:// beside nbd://, flashpipe's client and server).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "servers,stripe"
    )]
    pub parts: Vec<NetPart>,
    /// Size of each server's disk (RAM disk and file).
    #[arg(long, default_value = "256MiB", value_parser = flashpipe_units::parse_size_bytes)]
    pub size: u64,
    /// Seconds of each measured fio row, and of each random-read row of the stripe part.
    #[arg(long, default_value_t = 5)]
    pub runtime_seconds: u64,
    /// Servers to compare (flashpipe, qemu-nbd, nbdkit).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "flashpipe,qemu-nbd,nbdkit"
    )]
    pub servers: Vec<String>,
    /// Disks every server serves: ram (one each), file (the same file for all).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "ram,file")]
    pub disks: Vec<NetDisk>,
    /// Folder of the served file; its file system is printed [default: the current directory].
    #[arg(long)]
    pub file_dir: Option<PathBuf>,
    /// Caching of the served file, the same choice for every server: direct (O_DIRECT;
    /// nbdkit cache=none) or buffered (the page cache).
    #[arg(long, value_enum, default_value = "direct")]
    pub file_cache: FileCache,
    /// Transports (tcp, unix).
    #[arg(long, value_delimiter = ',', default_value = "tcp,unix")]
    pub transports: Vec<String>,
    /// Hand-off spins of flashpipe's server (its device worker and reply writers polling
    /// their queues) to compare, in microseconds, 0 (park at once) to 10000; each is a
    /// server of its own in the tables (`flashpipe-spinN`).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub spin_us: Vec<WaitPolicy>,
    /// Reader windows of flashpipe's server (each connection's reader polling its socket
    /// for the next request) to compare, in microseconds 0 to 10000 or `auto` (200 on 2
    /// cores or more); each, with each --spin-us, is a server of its own in the tables
    /// (`flashpipe-windowN`, `flashpipe-spinS-windowN`).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "auto",
        value_name = "US|auto"
    )]
    pub reader_window_us: Vec<ReaderWindow>,
    /// Connection counts (fio jobs, one NBD connection each).
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    pub connections: Vec<u32>,
    /// fio workloads to run [default: all six: seq-read-1m-qd8, seq-write-1m-qd8,
    /// rand-read-4k-qd1, rand-write-4k-qd1, rand-read-4k-qd32, rand-write-4k-qd32].
    #[arg(long, value_delimiter = ',')]
    pub workloads: Vec<String>,
    /// Disk-node counts of the stripe part (each a store of its own).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    pub disk_nodes: Vec<u32>,
    /// Size of the stripe part's big file (a multiple of 1 MiB, at least 8 MiB).
    #[arg(long, default_value = "1GiB", value_parser = flashpipe_units::parse_size_bytes)]
    pub stripe_file_size: u64,
    /// Small 2 KiB files of the stripe part (0: none).
    #[arg(long, default_value_t = 10_000)]
    pub stripe_small_files: u64,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
}

impl BenchNetArgs {
    fn runs(&self, part: NetPart) -> bool {
        self.parts.contains(&part)
    }

    /// The workloads to run, in the order of [`WORKLOADS`].
    fn selected_workloads(&self) -> Vec<Workload> {
        WORKLOADS
            .into_iter()
            .filter(|workload| {
                self.workloads.is_empty() || self.workloads.iter().any(|name| name == workload.name)
            })
            .collect()
    }

    fn stripe_settings(&self) -> StripeSettings {
        StripeSettings {
            node_counts: self.disk_nodes.clone(),
            file_bytes: self.stripe_file_size,
            small_file_count: self.stripe_small_files,
            random_runtime: Duration::from_secs(self.runtime_seconds),
        }
    }
}

/// One fio workload.
#[derive(Debug, Clone, Copy)]
struct Workload {
    name: &'static str,
    rw: &'static str,
    block_size: &'static str,
    iodepth: u32,
}

impl Workload {
    const fn new(
        name: &'static str,
        rw: &'static str,
        block_size: &'static str,
        iodepth: u32,
    ) -> Self {
        Workload {
            name,
            rw,
            block_size,
            iodepth,
        }
    }
}

const WORKLOADS: [Workload; 6] = [
    Workload::new("seq-read-1m-qd8", "read", "1m", 8),
    Workload::new("seq-write-1m-qd8", "write", "1m", 8),
    Workload::new("rand-read-4k-qd1", "randread", "4k", 1),
    Workload::new("rand-write-4k-qd1", "randwrite", "4k", 1),
    Workload::new("rand-read-4k-qd32", "randread", "4k", 32),
    Workload::new("rand-write-4k-qd32", "randwrite", "4k", 32),
];

/// Where one fio row ran: which server, disk, transport and connection count, and what.
#[derive(Debug, Clone, PartialEq)]
struct RowKey {
    server: String,
    disk: NetDisk,
    transport: String,
    connections: u32,
    workload: &'static str,
}

/// One measured fio row.
#[derive(Debug, Clone)]
struct Row {
    key: RowKey,
    figures: Figures,
}

/// fio's figures for one row.
#[derive(Debug, Clone, Copy, Default)]
struct Figures {
    bytes_per_second: f64,
    iops: f64,
    latency_us_mean: f64,
    latency_us_p99: f64,
}

/// A server being measured: its URIs and what to stop.
struct RunningServer {
    tcp_uri: String,
    unix_uri: String,
    stop: Stop,
}

enum Stop {
    InProcess(NbdServer),
    /// One process per listener (qemu-nbd and nbdkit take one each).
    Children(Vec<Child>),
}

impl RunningServer {
    fn stop(self) {
        match self.stop {
            Stop::InProcess(server) => drop(server.shutdown()),
            Stop::Children(children) => {
                for mut child in children {
                    // The child may have ended already; killing it then fails harmlessly.
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
        }
    }
}

/// What the server part measured, and on what file.
struct ServerResults {
    rows: Vec<Row>,
    /// The shared file's path and file system, when the file disk ran.
    file: Option<(String, String)>,
}

/// Runs the benchmark and prints its tables (or JSON).
pub fn run(arguments: BenchNetArgs) -> BenchResult {
    check_arguments(&arguments)?;
    if arguments.runs(NetPart::Servers) && !program_exists("fio") {
        return Err(not_found("fio is not on PATH (install it with scripts/install-test-packages); bench net drives every server with fio's nbd ioengine; --parts stripe needs no fio").into());
    }
    let folder = scratch_folder()?;
    let outcome = run_parts(&arguments, &folder);
    // The scratch folder holds qemu-nbd's RAM image, the sockets and the disk nodes' logs;
    // after a failure the logs are kept for the message that names them.
    let (servers, stripe_rows, tls_rows) = match outcome {
        Ok(results) => {
            let _ = std::fs::remove_dir_all(&folder);
            results
        }
        Err(error) => {
            let _ = std::fs::remove_file(folder.join(served_disk::QEMU_NBD_RAM_IMAGE));
            let note = format!("scratch folder kept: {}", folder.display());
            return Err(match error.downcast::<BenchError>() {
                Ok(typed) => Box::new(typed.suffixed(note)),
                Err(other) => {
                    eprintln!("flashpipe: {note}");
                    other
                }
            });
        }
    };
    if arguments.json {
        let mut results = results_json(&arguments, &servers, &stripe_rows);
        results["tls"] = json!(tls_rows);
        println!("{results}");
        return Ok(());
    }
    if arguments.runs(NetPart::Servers) {
        print_tables(&arguments, &servers);
    }
    if arguments.runs(NetPart::Stripe) {
        stripe::print_table(&arguments.stripe_settings(), &stripe_rows);
    }
    if arguments.runs(NetPart::Tls) {
        tls::print_table(arguments.size, &tls_rows);
    }
    Ok(())
}

fn run_parts(
    arguments: &BenchNetArgs,
    folder: &Path,
) -> BenchResult<(ServerResults, Vec<StripeRow>, Vec<tls::TlsRow>)> {
    let servers = match arguments.runs(NetPart::Servers) {
        true => run_servers(arguments, folder)?,
        false => ServerResults {
            rows: Vec::new(),
            file: None,
        },
    };
    let stripe_rows = match arguments.runs(NetPart::Stripe) {
        true => stripe::run(&arguments.stripe_settings(), folder)?,
        false => Vec::new(),
    };
    let tls_rows = match arguments.runs(NetPart::Tls) {
        true => tls::run(arguments.size, folder)?,
        false => Vec::new(),
    };
    Ok((servers, stripe_rows, tls_rows))
}

/// Every server on every disk, transport, connection count and workload.
fn run_servers(arguments: &BenchNetArgs, folder: &Path) -> BenchResult<ServerResults> {
    let shared_file = match arguments.disks.contains(&NetDisk::File) {
        true => Some(SharedFile::create(
            arguments.file_dir.as_deref().unwrap_or(Path::new(".")),
            arguments.size,
        )?),
        false => None,
    };
    let mut rows = Vec::new();
    for &disk in &arguments.disks {
        let served = match (disk, &shared_file) {
            (NetDisk::File, Some(file)) => ServedDisk::File {
                path: file.path.clone(),
                cache: arguments.file_cache,
            },
            _ => ServedDisk::Ram {
                size_bytes: arguments.size,
            },
        };
        for (server_name, waits) in server_variants(arguments) {
            measure_server(arguments, &server_name, waits, &served, folder, &mut rows)?;
        }
        // qemu-nbd's RAM disk is memory in /dev/shm; the other disks do not need it.
        let _ = std::fs::remove_file(folder.join(served_disk::QEMU_NBD_RAM_IMAGE));
    }
    Ok(ServerResults {
        rows,
        file: shared_file.map(|file| (file.path.display().to_string(), file.file_system.clone())),
    })
}

/// One server on one disk: every transport, connection count and workload.
fn measure_server(
    arguments: &BenchNetArgs,
    server_name: &str,
    waits: Waits,
    disk: &ServedDisk,
    folder: &Path,
    rows: &mut Vec<Row>,
) -> BenchResult {
    let Some(server) = start_server(server_name, waits, disk, folder)? else {
        crate::progress::note(&format!(
            "bench net: {server_name} is not installed; left out"
        ));
        return Ok(());
    };
    let measured = measure_running_server(arguments, server_name, disk, &server, rows);
    server.stop();
    measured
}

fn measure_running_server(
    arguments: &BenchNetArgs,
    server_name: &str,
    disk: &ServedDisk,
    server: &RunningServer,
    rows: &mut Vec<Row>,
) -> BenchResult {
    let disk_name = disk.kind().name();
    for transport in &arguments.transports {
        let uri = if transport == "unix" {
            &server.unix_uri
        } else {
            &server.tcp_uri
        };
        // Each listener of nbdkit memory is its own process with its own RAM disk.
        fill(uri, arguments.size)?;
        for &connections in &arguments.connections {
            for workload in arguments.selected_workloads() {
                crate::progress::set_phase(format!(
                    "{server_name} {disk_name} {transport} {connections} conn {}",
                    workload.name
                ));
                let figures = run_fio(
                    uri,
                    arguments.size,
                    &workload,
                    connections,
                    arguments.runtime_seconds,
                )?;
                rows.push(Row {
                    key: RowKey {
                        server: server_name.to_string(),
                        disk: disk.kind(),
                        transport: transport.clone(),
                        connections,
                        workload: workload.name,
                    },
                    figures,
                });
            }
        }
    }
    Ok(())
}

/// How flashpipe's server waits: its hand-off spin and its reader window.
#[derive(Debug, Clone, Copy, Default)]
struct Waits {
    spin: WaitPolicy,
    reader_window: ReaderWindow,
}

/// The servers to run: each flashpipe hand-off spin and reader window is a server of its
/// own, named by the settings that are not the default or that vary.
fn server_variants(arguments: &BenchNetArgs) -> Vec<(String, Waits)> {
    let mut variants = Vec::new();
    for server in &arguments.servers {
        if server != "flashpipe" {
            variants.push((server.clone(), Waits::default()));
            continue;
        }
        for &spin in &arguments.spin_us {
            for &reader_window in &arguments.reader_window_us {
                let mut name = "flashpipe".to_string();
                if arguments.spin_us.len() > 1 || !spin.parks_at_once() {
                    name.push_str(&format!("-spin{spin}"));
                }
                if arguments.reader_window_us.len() > 1 || reader_window != ReaderWindow::Auto {
                    name.push_str(&format!("-window{reader_window}"));
                }
                variants.push((
                    name,
                    Waits {
                        spin,
                        reader_window,
                    },
                ));
            }
        }
    }
    variants
}

fn check_arguments(arguments: &BenchNetArgs) -> BenchResult {
    if arguments.parts.is_empty() {
        return Err(invalid_input("--parts: name at least one part (servers, stripe, tls)").into());
    }
    if arguments.size < 64 * 1024 * 1024 || arguments.size % (1024 * 1024) != 0 {
        return Err(invalid_input(format!(
            "--size {} bytes: at least 64 MiB and whole MiB",
            arguments.size
        ))
        .into());
    }
    if arguments.runtime_seconds == 0 || arguments.runtime_seconds > 3600 {
        return Err(invalid_input("--runtime-seconds must be within 1..=3600").into());
    }
    check_server_arguments(arguments)?;
    check_stripe_arguments(arguments)
}

fn check_server_arguments(arguments: &BenchNetArgs) -> BenchResult {
    for server in &arguments.servers {
        if !["flashpipe", "qemu-nbd", "nbdkit"].contains(&server.as_str()) {
            return Err(invalid_input(format!(
                "--servers: unknown server `{server}` (flashpipe, qemu-nbd, nbdkit)"
            ))
            .into());
        }
    }
    for transport in &arguments.transports {
        if !["tcp", "unix"].contains(&transport.as_str()) {
            return Err(
                format!("--transports: unknown transport `{transport}` (tcp, unix)").into(),
            );
        }
    }
    if arguments
        .connections
        .iter()
        .any(|&count| count == 0 || count > 64)
    {
        return Err(invalid_input("--connections: each count within 1..=64").into());
    }
    for name in &arguments.workloads {
        if !WORKLOADS.iter().any(|workload| workload.name == name) {
            let known: Vec<&str> = WORKLOADS.iter().map(|workload| workload.name).collect();
            return Err(invalid_input(format!(
                "--workloads: unknown workload `{name}` ({})",
                known.join(", ")
            ))
            .into());
        }
    }
    Ok(())
}

fn check_stripe_arguments(arguments: &BenchNetArgs) -> BenchResult {
    let most_nodes = disk_nodes::MOST_DISK_NODES;
    if arguments.runs(NetPart::Stripe) && arguments.disk_nodes.is_empty() {
        return Err(invalid_input("--disk-nodes: name at least one count").into());
    }
    if arguments
        .disk_nodes
        .iter()
        .any(|&count| count == 0 || count > most_nodes)
    {
        return Err(
            invalid_input(format!("--disk-nodes: each count within 1..={most_nodes}")).into(),
        );
    }
    let file_bytes = arguments.stripe_file_size;
    if file_bytes < LEAST_STRIPE_FILE_BYTES || file_bytes % (1024 * 1024) != 0 {
        return Err(
            format!("--stripe-file-size {file_bytes} bytes: at least 8 MiB and whole MiB").into(),
        );
    }
    if arguments.stripe_small_files > MOST_STRIPE_SMALL_FILES {
        return Err(invalid_input(format!(
            "--stripe-small-files: at most {MOST_STRIPE_SMALL_FILES}"
        ))
        .into());
    }
    Ok(())
}

fn program_exists(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|folder| folder.join(program).is_file())
    })
}

fn scratch_folder() -> BenchResult<PathBuf> {
    let base = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let folder = base.join(format!("flashpipe-bench-net-{}", std::process::id()));
    std::fs::create_dir_all(&folder)?;
    Ok(folder)
}

fn start_server(
    name: &str,
    waits: Waits,
    disk: &ServedDisk,
    folder: &Path,
) -> BenchResult<Option<RunningServer>> {
    // A socket of its own per server and disk: a killed server leaves its socket file.
    let socket = folder.join(format!("{name}-{}.sock", disk.kind().name()));
    let _ = std::fs::remove_file(&socket);
    match name {
        _ if name.starts_with("flashpipe") => {
            let export = disk.flashpipe_export("disk")?;
            let config = ServerConfig {
                tcp_address: Some("127.0.0.1:0".parse()?),
                unix_socket_path: Some(socket.clone()),
                allow_non_loopback: false,
                tls: None,
                limits: ServerLimits::default(),
                log_connections: false,
                spin: waits.spin,
                reader_window: waits.reader_window,
            };
            let server = NbdServer::start(config, vec![export])?;
            let address = server
                .tcp_address()
                .ok_or_else(|| internal("the server has no TCP address"))?;
            Ok(Some(RunningServer {
                tcp_uri: format!("nbd://{address}/disk"),
                unix_uri: unix_uri(&socket),
                stop: Stop::InProcess(server),
            }))
        }
        "qemu-nbd" | "nbdkit" => external_server::start(name, disk, folder, &socket),
        _ => Err(internal(format!("unknown server {name}")).into()),
    }
}

/// The URI of the export `disk` on the Unix socket `socket`.
fn unix_uri(socket: &Path) -> String {
    format!("nbd+unix:///disk?socket={}", socket.display())
}

/// One sequential write over the whole disk, so that reads read data.
fn fill(uri: &str, size_bytes: u64) -> BenchResult {
    let arguments = vec![
        "--name=fill".to_string(),
        "--ioengine=nbd".to_string(),
        format!("--uri={uri}"),
        "--rw=write".to_string(),
        "--bs=1m".to_string(),
        "--iodepth=8".to_string(),
        format!("--size={size_bytes}"),
        "--output-format=json".to_string(),
    ];
    run_fio_command(&arguments).map(|_| ())
}

fn run_fio(
    uri: &str,
    size_bytes: u64,
    workload: &Workload,
    connections: u32,
    runtime_seconds: u64,
) -> BenchResult<Figures> {
    let arguments = vec![
        format!("--name={}", workload.name),
        "--ioengine=nbd".to_string(),
        format!("--uri={uri}"),
        format!("--rw={}", workload.rw),
        format!("--bs={}", workload.block_size),
        format!("--iodepth={}", workload.iodepth),
        format!("--numjobs={connections}"),
        "--group_reporting=1".to_string(),
        format!("--size={size_bytes}"),
        "--time_based=1".to_string(),
        format!("--runtime={runtime_seconds}"),
        "--randrepeat=0".to_string(),
        "--output-format=json".to_string(),
    ];
    let report = run_fio_command(&arguments)?;
    parse_fio(&report, workload.rw.contains("read"))
}

fn run_fio_command(arguments: &[String]) -> BenchResult<String> {
    fio::run(arguments).map_err(|error| {
        BenchError::new(
            BenchErrorKind::Io(std::io::ErrorKind::Other),
            error.to_string(),
        )
        .into()
    })
}

/// The harness's one fio parser; the p99 is the completion latency (`clat_ns`), as the
/// `bench net` tables have always shown.
fn parse_fio(report: &str, is_read: bool) -> BenchResult<Figures> {
    let figures = fio::parse_report(
        report,
        fio::Direction::of_read(is_read),
        fio::LatencySource::Completion,
    )
    .map_err(|error| internal(error.to_string()))?;
    Ok(Figures {
        bytes_per_second: figures.bytes_per_second,
        iops: figures.iops,
        latency_us_mean: figures.latency_us_mean,
        latency_us_p99: figures.latency_us_p99,
    })
}
