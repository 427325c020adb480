//! `flashpipe bench net`: flashpipe's NBD server beside `qemu-nbd` and `nbdkit` (memory
//! plugin) serving a RAM disk of the same size, all driven by the same client, fio's own
//! `nbd` ioengine (libnbd), over loopback TCP and a Unix socket, in one run.
//!
//! Rows: 1 MiB sequential reads and writes (queue depth 8), 4 KiB random reads and writes
//! at queue depth 1 (mean and p99 latency) and 32, each with 1 and 4 connections
//! (fio's `numjobs`, one NBD connection per job; multi-conn). Each server's disk is first
//! filled by one sequential write so reads read data, not holes. The ratio column is
//! flashpipe's throughput over the better of the other two (issue #15's target: >= 1.0x
//! on every row); for the queue-depth-1 rows the latency columns are the figures to read.
//!
//! flashpipe's server runs in this process (its RAM export: `ram:SIZE`); `qemu-nbd`
//! serves a raw file in `/dev/shm` (memory, as close to a RAM disk as qemu-nbd gets);
//! `nbdkit memory` serves its sparse RAM disk. A server whose program is missing is left
//! out with a note.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use clap::Args;
use flashpipe_nbd::server::{Export, ExportDeviceSpec, NbdServer, ServerConfig, ServerLimits};
use serde_json::{json, Value};

use crate::table::Table;
use crate::BenchResult;

/// Rounds of 50 ms to wait for an external server to accept connections.
const SERVER_READY_ROUNDS: u32 = 200;

/// `flashpipe bench net`.
#[derive(Debug, Args)]
pub struct BenchNetArgs {
    /// Size of each server's RAM disk.
    #[arg(long, default_value = "256MiB", value_parser = flashpipe_units::parse_size_bytes)]
    pub size: u64,
    /// Seconds of each measured row.
    #[arg(long, default_value_t = 5)]
    pub runtime_seconds: u64,
    /// Servers to compare (flashpipe, qemu-nbd, nbdkit).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "flashpipe,qemu-nbd,nbdkit"
    )]
    pub servers: Vec<String>,
    /// Transports (tcp, unix).
    #[arg(long, value_delimiter = ',', default_value = "tcp,unix")]
    pub transports: Vec<String>,
    /// Spin windows of flashpipe's server hand-offs to compare, in microseconds (0: park
    /// at once); each is a server of its own in the tables (`flashpipe-spinN`).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub flashpipe_spin_us: Vec<u64>,
    /// Connection counts (fio jobs, one NBD connection each).
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    pub connections: Vec<u32>,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// One fio workload.
#[derive(Debug, Clone, Copy)]
struct Workload {
    name: &'static str,
    rw: &'static str,
    block_size: &'static str,
    iodepth: u32,
}

const WORKLOADS: [Workload; 6] = [
    Workload {
        name: "seq-read-1m-qd8",
        rw: "read",
        block_size: "1m",
        iodepth: 8,
    },
    Workload {
        name: "seq-write-1m-qd8",
        rw: "write",
        block_size: "1m",
        iodepth: 8,
    },
    Workload {
        name: "rand-read-4k-qd1",
        rw: "randread",
        block_size: "4k",
        iodepth: 1,
    },
    Workload {
        name: "rand-write-4k-qd1",
        rw: "randwrite",
        block_size: "4k",
        iodepth: 1,
    },
    Workload {
        name: "rand-read-4k-qd32",
        rw: "randread",
        block_size: "4k",
        iodepth: 32,
    },
    Workload {
        name: "rand-write-4k-qd32",
        rw: "randwrite",
        block_size: "4k",
        iodepth: 32,
    },
];

/// One measured row: server, transport, connections, workload, figures.
type Row = (String, String, u32, &'static str, Figures);

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

/// Runs the benchmark and prints its tables (or JSON).
pub fn run(arguments: BenchNetArgs) -> BenchResult {
    check_arguments(&arguments)?;
    if !program_exists("fio") {
        return Err("fio is not on PATH (Debian: apt-get install fio); bench net drives every server with fio's nbd ioengine".into());
    }
    let folder = scratch_folder()?;
    let mut results: Vec<Row> = Vec::new();
    for (server_name, spin_us) in server_variants(&arguments) {
        let server_name = &server_name;
        let Some(server) = start_server(server_name, spin_us, arguments.size, &folder)? else {
            crate::progress::note(&format!(
                "bench net: {server_name} is not installed; left out"
            ));
            continue;
        };
        for transport in &arguments.transports {
            let uri = if transport == "unix" {
                &server.unix_uri
            } else {
                &server.tcp_uri
            };
            // Each listener of nbdkit is its own process with its own RAM disk.
            fill(uri, arguments.size)?;
            for &connections in &arguments.connections {
                for workload in WORKLOADS {
                    crate::progress::set_phase(format!(
                        "{server_name} {transport} {connections} conn {}",
                        workload.name
                    ));
                    let figures = run_fio(
                        uri,
                        arguments.size,
                        &workload,
                        connections,
                        arguments.runtime_seconds,
                    )?;
                    results.push((
                        server_name.clone(),
                        transport.clone(),
                        connections,
                        workload.name,
                        figures,
                    ));
                }
            }
        }
        server.stop();
    }
    // The scratch folder holds only qemu-nbd's image and the sockets.
    let _ = std::fs::remove_dir_all(&folder);
    if arguments.json {
        println!("{}", results_json(&arguments, &results));
    } else {
        print_tables(&arguments, &results);
    }
    Ok(())
}

/// The servers to run: each flashpipe spin window is a server of its own.
fn server_variants(arguments: &BenchNetArgs) -> Vec<(String, u64)> {
    let mut variants = Vec::new();
    for server in &arguments.servers {
        if server != "flashpipe" {
            variants.push((server.clone(), 0));
            continue;
        }
        for &spin_us in &arguments.flashpipe_spin_us {
            let name = if arguments.flashpipe_spin_us.len() == 1 && spin_us == 0 {
                "flashpipe".to_string()
            } else {
                format!("flashpipe-spin{spin_us}")
            };
            variants.push((name, spin_us));
        }
    }
    variants
}

fn check_arguments(arguments: &BenchNetArgs) -> BenchResult {
    if arguments.size < 64 * 1024 * 1024 || arguments.size % (1024 * 1024) != 0 {
        return Err(format!(
            "--size {} bytes: at least 64 MiB and whole MiB",
            arguments.size
        )
        .into());
    }
    if arguments.runtime_seconds == 0 || arguments.runtime_seconds > 3600 {
        return Err("--runtime-seconds must be within 1..=3600".into());
    }
    for server in &arguments.servers {
        if !["flashpipe", "qemu-nbd", "nbdkit"].contains(&server.as_str()) {
            return Err(format!(
                "--servers: unknown server `{server}` (flashpipe, qemu-nbd, nbdkit)"
            )
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
        return Err("--connections: each count within 1..=64".into());
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

fn free_tcp_port() -> BenchResult<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

fn start_server(
    name: &str,
    spin_us: u64,
    size_bytes: u64,
    folder: &Path,
) -> BenchResult<Option<RunningServer>> {
    let socket = folder.join(format!("{name}.sock"));
    let unix_uri = format!("nbd+unix:///disk?socket={}", socket.display());
    match name {
        _ if name.starts_with("flashpipe") => {
            let export = Export::open("disk", &ExportDeviceSpec::Ram { size_bytes })?;
            let config = ServerConfig {
                tcp_address: Some("127.0.0.1:0".parse()?),
                unix_socket_path: Some(socket),
                allow_non_loopback: false,
                tls: None,
                limits: ServerLimits::default(),
                log_connections: false,
                handoff_spin_us: spin_us,
            };
            let server = NbdServer::start(config, vec![export])?;
            let address = server
                .tcp_address()
                .ok_or("the server has no TCP address")?;
            Ok(Some(RunningServer {
                tcp_uri: format!("nbd://{address}/disk"),
                unix_uri,
                stop: Stop::InProcess(server),
            }))
        }
        "qemu-nbd" | "nbdkit" => {
            if !program_exists(name) {
                return Ok(None);
            }
            let port = free_tcp_port()?;
            let tcp = spawn_external(name, size_bytes, folder, port, None)?;
            wait_until_accepting(&format!("127.0.0.1:{port}"), name)?;
            let unix = spawn_external(name, size_bytes, folder, port, Some(&socket))?;
            wait_until_socket(&socket, name)?;
            Ok(Some(RunningServer {
                tcp_uri: format!("nbd://127.0.0.1:{port}/disk"),
                unix_uri,
                stop: Stop::Children(vec![tcp, unix]),
            }))
        }
        _ => Err(format!("unknown server {name}").into()),
    }
}

fn spawn_external(
    name: &str,
    size_bytes: u64,
    folder: &Path,
    port: u16,
    socket: Option<&Path>,
) -> BenchResult<Child> {
    let mut command = Command::new(name);
    if name == "qemu-nbd" {
        let image = folder.join("qemu-nbd.raw");
        if !image.exists() {
            std::fs::File::create(&image)?.set_len(size_bytes)?;
        }
        command.args([
            "-f",
            "raw",
            "-x",
            "disk",
            "-t",
            "-e",
            "64",
            "--cache=writeback",
            "--aio=threads",
        ]);
        match socket {
            Some(socket) => command.arg("-k").arg(socket),
            None => command.args(["-b", "127.0.0.1", "-p", &port.to_string()]),
        };
        command.arg(&image);
    } else {
        command.args(["-f", "--exit-with-parent", "-e", "disk"]);
        match socket {
            Some(socket) => command.arg("-U").arg(socket),
            None => command.args(["-i", "127.0.0.1", "-p", &port.to_string()]),
        };
        command.args(["memory", &format!("size={size_bytes}")]);
    }
    Ok(command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?)
}

fn wait_until_accepting(address: &str, name: &str) -> BenchResult {
    for _ in 0..SERVER_READY_ROUNDS {
        if TcpStream::connect(address).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("{name} never accepted connections on {address}").into())
}

fn wait_until_socket(socket: &Path, name: &str) -> BenchResult {
    for _ in 0..SERVER_READY_ROUNDS {
        if std::os::unix::net::UnixStream::connect(socket).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("{name} never accepted connections on {}", socket.display()).into())
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
    let output = Command::new("fio").args(arguments).output()?;
    if !output.status.success() {
        return Err(format!(
            "fio {} failed: {}",
            arguments.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )
        .into());
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn parse_fio(report: &str, is_read: bool) -> BenchResult<Figures> {
    let start = report.find('{').ok_or("fio printed no JSON")?;
    let value: Value = serde_json::from_str(&report[start..])?;
    let side = &value["jobs"][0][if is_read { "read" } else { "write" }];
    let number = |value: &Value| value.as_f64().unwrap_or(0.0);
    Ok(Figures {
        bytes_per_second: number(&side["bw_bytes"]),
        iops: number(&side["iops"]),
        latency_us_mean: number(&side["lat_ns"]["mean"]) / 1000.0,
        latency_us_p99: number(&side["clat_ns"]["percentile"]["99.000000"]) / 1000.0,
    })
}

fn find<'a>(
    results: &'a [Row],
    server: &str,
    transport: &str,
    connections: u32,
    workload: &str,
) -> Option<&'a Figures> {
    results
        .iter()
        .find(|row| {
            row.0 == server && row.1 == transport && row.2 == connections && row.3 == workload
        })
        .map(|row| &row.4)
}

/// A flashpipe variant's throughput over the better of the others on the same row.
fn ratio(
    results: &[Row],
    server: &str,
    transport: &str,
    connections: u32,
    workload: &str,
) -> Option<f64> {
    let ours = find(results, server, transport, connections, workload)?;
    let best_other = ["qemu-nbd", "nbdkit"]
        .iter()
        .filter_map(|server| find(results, server, transport, connections, workload))
        .map(|figures| figures.bytes_per_second)
        .fold(0.0, f64::max);
    (best_other > 0.0).then(|| ours.bytes_per_second / best_other)
}

fn print_tables(arguments: &BenchNetArgs, results: &[Row]) {
    println!(
        "bench net: fio nbd ioengine, RAM disk {} MiB, {} s per row, loopback",
        arguments.size / (1024 * 1024),
        arguments.runtime_seconds
    );
    for transport in &arguments.transports {
        for &connections in &arguments.connections {
            let mut table = Table::new("  ")
                .caption(&format!("{transport}, {connections} connection(s)"))
                .left("workload", 20)
                .left("server", 16)
                .right("MiB/s", 9)
                .right("IOPS", 9)
                .right("mean us", 9)
                .right("p99 us", 9)
                .right("ratio", 7);
            for workload in WORKLOADS {
                for (server, _) in server_variants(arguments) {
                    let server = &server;
                    let Some(figures) =
                        find(results, server, transport, connections, workload.name)
                    else {
                        continue;
                    };
                    let ratio_text = if server.starts_with("flashpipe") {
                        ratio(results, server, transport, connections, workload.name)
                            .map_or("-".to_string(), |ratio| format!("{ratio:.2}x"))
                    } else {
                        String::new()
                    };
                    table.row(vec![
                        workload.name.to_string(),
                        server.clone(),
                        format!("{:.1}", figures.bytes_per_second / 1048576.0),
                        format!("{:.0}", figures.iops),
                        format!("{:.1}", figures.latency_us_mean),
                        format!("{:.1}", figures.latency_us_p99),
                        ratio_text,
                    ]);
                }
            }
            println!();
            table.print();
        }
    }
}

fn results_json(arguments: &BenchNetArgs, results: &[Row]) -> Value {
    let rows: Vec<Value> = results
        .iter()
        .map(|(server, transport, connections, workload, figures)| {
            json!({
                "server": server,
                "transport": transport,
                "connections": connections,
                "workload": workload,
                "bytes_per_second": figures.bytes_per_second,
                "iops": figures.iops,
                "latency_us_mean": figures.latency_us_mean,
                "latency_us_p99": figures.latency_us_p99,
                "ratio_to_best_other": if server.starts_with("flashpipe") {
                    ratio(results, server, transport, *connections, workload)
                } else {
                    None
                },
            })
        })
        .collect();
    json!({
        "size_bytes": arguments.size,
        "runtime_seconds": arguments.runtime_seconds,
        "rows": rows,
    })
}
