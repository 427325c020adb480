//! `flashpipe bench serve`: what a client process pays to use an engine it does not own
//! (issue #14, item 5), every figure beside the in-process engine in one run, over a
//! fresh RAM-disk store and a fresh file store.
//!
//! The bench process formats a store, starts its engine with the read pool in shared
//! memory, writes the files, measures the in-process rows through an `EngineClient`, then
//! hands the store to a `flashpipe-server` and runs the client rows in client processes:
//! the `flashpipe` binary itself ([`std::env::current_exe`]) run with the hidden
//! subcommand `bench serve-client`, one process per client, each with its own `Client`
//! over the socket (or, with `--clients-as threads`, client threads of the bench process,
//! said in the output). Rows:
//! - **QD1 4 KiB read round trip**: one read at a time of 4 KiB at seeded random
//!   offsets: in-process engine, client by reference with its frames through two
//!   shared-memory rings (the default of a mapping client, #14), client by reference
//!   with its frames on the socket, client copying; the mean of the
//!   fastest round, and its ratio to the in-process engine (target <= 1.5x). Beside them
//!   the transport's floors: a 64-byte frame's round trip to a client process and back
//!   through two shared-memory frame rings (`flashpipe_shm::ring`) and
//!   through a Unix socket.
//! - **1 MiB reads**: `--depth` reads in flight: in-process engine, client by reference
//!   over rings (target >= 0.9x in-process) and over the socket, client copying (by
//!   reference >= 3x it), and `read()` of
//!   the same bytes from a tmpfs file in a client process (by reference at least as fast).
//! - **concurrent clients**: 1, 4, 16, 64 clients each reading 1 MiB by reference for a
//!   fixed time: aggregate throughput and Jain's fairness index of the per-client
//!   throughputs (target >= 0.95).
//!
//! Every read checks a sample of its bytes against the written pattern, on every side.
//! Figures measured on a shared machine are worthless: run on an idle machine.

mod children;
mod client_roles;
mod local;
mod remote;
mod ring_floor;
mod roles;
mod targets;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use flashpipe_base::wait::{WaitPolicy, SPIN_US_VARIABLE};
use serde::Serialize;

use crate::column_table::{fixed, ColumnTable};
use crate::error::{invalid_input, io_with, BenchError};
use crate::BenchResult;

pub use roles::{run_client_role, BenchServeClientArgs, ClientResult, ClientRole};

/// One mebibyte.
const MIB: u64 = 1 << 20;
/// Bytes of a QD1 read.
const SMALL_READ_BYTES: u64 = 4096;
/// Bytes of a large read.
const LARGE_READ_BYTES: u64 = MIB;
/// The row of the engine called in process.
const SIDE_IN_PROCESS: &str = "in-process engine";
/// The row of a client reading by reference, its frames through shared-memory rings.
const SIDE_BY_REFERENCE: &str = "client, by reference, frames through rings";
/// The row of a client reading by reference, its frames on the socket.
const SIDE_BY_REFERENCE_SOCKET: &str = "client, by reference, frames on socket";
/// The row of a client reading through the socket.
const SIDE_COPYING: &str = "client, copying (bytes through the socket)";
/// The row of `read()` from tmpfs.
const SIDE_TMPFS: &str = "read() from tmpfs in a client";
/// Rounds each fixed-count measurement runs in (the fastest counts).
const ROUNDS: u64 = 5;
/// Reads in flight in all in the 4 KiB random-read rows: one in-process client keeps them
/// all, or [`SMALL_DEPTH_CLIENTS`] client processes a share each.
const SMALL_DEPTH_TOTAL: u32 = 32;
/// Client processes of the served 4 KiB random-read row.
const SMALL_DEPTH_CLIENTS: u32 = 4;

/// How client "processes" run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientsAs {
    /// The `flashpipe` binary run again (`bench serve-client`), one process per client.
    Processes,
    /// Threads of the bench process, each with its own client over the socket.
    Threads,
}

/// Which stores to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServeStoreKind {
    /// One RAM disk.
    Ram,
    /// One device file (io_uring, `O_DIRECT`) in `--folder`.
    File,
}

/// Options of `flashpipe bench serve`.
#[derive(Debug, clap::Args)]
pub struct BenchServeArgs {
    /// Stores to measure, comma-separated [default: ram,file].
    #[arg(long, value_delimiter = ',')]
    pub stores: Vec<ServeStoreKind>,
    /// Concurrent client counts, comma-separated [default: 1,4,16,64; 1,4 with --quick].
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=256))]
    pub clients: Vec<u32>,
    /// QD1 reads timed per side [default: 20000; 200 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u64).range(10..=10_000_000))]
    pub operations: Option<u64>,
    /// Size of the file the 1 MiB reads stream over, MiB [default: 256; 8 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub file_mib: Option<u64>,
    /// 1 MiB reads in flight per client [default: 4].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=32))]
    pub depth: Option<u32>,
    /// Seconds each concurrent-clients point runs [default: 3; 0.2 with --quick].
    #[arg(long)]
    pub seconds: Option<f64>,
    /// How long every waiting thread polls before parking, microseconds, 0 to 10000 (run
    /// once per value to compare): the engine's hand-off, the server's answering thread,
    /// its reading thread on a ring client's request ring, and the client on its reply
    /// ring [default: FLASHPIPE_SPIN_US, else each one's own: the engine 200, the server
    /// and clients 0].
    #[arg(long)]
    pub spin_us: Option<WaitPolicy>,
    /// Client processes, or client threads of this process [default: processes].
    #[arg(long, value_enum)]
    pub clients_as: Option<ClientsAs>,
    /// Folder of the file store's device file [default: the system's temporary folder].
    #[arg(long)]
    pub folder: Option<PathBuf>,
    /// A tmpfs folder for the `read()` row [default: /dev/shm].
    #[arg(long)]
    pub tmpfs: Option<PathBuf>,
    /// Print JSON instead of tables (every ratio sits in a field named *ratio*).
    #[arg(long)]
    pub json: bool,
    /// A tiny run for tests.
    #[arg(long)]
    pub quick: bool,
}

/// The resolved settings of one run.
#[derive(Debug, Clone, Serialize)]
pub struct ServeSettings {
    /// Stores measured.
    pub stores: Vec<ServeStoreKind>,
    /// Concurrent client counts.
    pub client_counts: Vec<u32>,
    /// QD1 reads per side.
    pub operation_count: u64,
    /// Bytes of the streamed file.
    pub large_file_bytes: u64,
    /// 1 MiB reads in flight per client.
    pub depth: u32,
    /// Seconds per concurrent-clients point.
    pub seconds: f64,
    /// The spin window of every waiting thread, when one was given (`None`: each role's
    /// default).
    pub spin_us: Option<u32>,
    /// How clients run.
    pub clients_as: ClientsAs,
    /// Folder of the file store.
    pub folder: PathBuf,
    /// Folder of the tmpfs file.
    pub tmpfs: PathBuf,
    /// A tiny run.
    pub quick: bool,
}

impl ServeSettings {
    fn from_arguments(arguments: &BenchServeArgs) -> Result<ServeSettings, BenchError> {
        let quick = arguments.quick;
        let seconds = arguments.seconds.unwrap_or(if quick { 0.2 } else { 3.0 });
        if !(0.01..=3600.0).contains(&seconds) {
            return Err(invalid_input(format!(
                "--seconds {seconds}: from 0.01 to 3600 seconds"
            )));
        }
        let spin = match arguments.spin_us {
            Some(spin) => Some(spin),
            None => WaitPolicy::from_environment()
                .transpose()
                .map_err(|error| invalid_input(format!("{SPIN_US_VARIABLE}: {error}")))?,
        };
        Ok(ServeSettings {
            stores: match arguments.stores.is_empty() {
                true => vec![ServeStoreKind::Ram, ServeStoreKind::File],
                false => arguments.stores.clone(),
            },
            client_counts: match (arguments.clients.is_empty(), quick) {
                (false, _) => arguments.clients.clone(),
                (true, false) => vec![1, 4, 16, 64],
                (true, true) => vec![1, 4],
            },
            operation_count: arguments
                .operations
                .unwrap_or(if quick { 200 } else { 20_000 }),
            large_file_bytes: arguments.file_mib.unwrap_or(if quick { 8 } else { 256 }) * MIB,
            depth: arguments.depth.unwrap_or(4),
            spin_us: spin.map(WaitPolicy::window_us),
            seconds,
            clients_as: arguments.clients_as.unwrap_or(ClientsAs::Processes),
            folder: arguments.folder.clone().unwrap_or_else(std::env::temp_dir),
            tmpfs: arguments
                .tmpfs
                .clone()
                .unwrap_or_else(|| PathBuf::from("/dev/shm")),
            quick,
        })
    }
}

/// A latency row: one side's QD1 round trip.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyRow {
    /// in-process engine, client by reference, client copying, ring floor.
    pub side: String,
    /// Round trips timed.
    pub operations: u64,
    /// Mean microseconds per round trip of the fastest round.
    pub us_per_operation: f64,
    /// Over the in-process engine's.
    pub over_in_process_ratio: f64,
}

/// A throughput row: one side's 1 MiB reads.
#[derive(Debug, Clone, Serialize)]
pub struct ThroughputRow {
    /// in-process engine, client by reference, client copying, read() from tmpfs.
    pub side: String,
    /// Reads in flight.
    pub depth: u32,
    /// Bytes read in the fastest round.
    pub bytes: u64,
    /// GiB per second of the fastest round.
    pub gib_per_second: f64,
    /// Over the in-process engine's.
    pub over_in_process_ratio: f64,
}

/// One concurrent-clients point.
#[derive(Debug, Clone, Serialize)]
pub struct ConcurrencyRow {
    /// Clients reading at once.
    pub clients: u32,
    /// Seconds they read.
    pub seconds: f64,
    /// Sum of every client's throughput.
    pub aggregate_gib_per_second: f64,
    /// Aggregate over the one-client point's.
    pub over_one_client_ratio: f64,
    /// Jain's index of the per-client throughputs (1 = equal shares).
    pub jain_fairness_ratio: f64,
    /// Slowest client's throughput over the fastest's.
    pub slowest_over_fastest_ratio: f64,
}

/// One side's 4 KiB random reads with [`SMALL_DEPTH_TOTAL`] in flight in all.
#[derive(Debug, Clone, Serialize)]
pub struct SmallReadsRow {
    /// in-process engine, or client processes by reference through rings.
    pub side: String,
    /// Clients (threads or processes) sharing the reads in flight.
    pub clients: u32,
    /// Reads in flight in all.
    pub depth: u32,
    /// Seconds they read.
    pub seconds: f64,
    /// Thousands of reads per second, all clients together.
    pub thousand_reads_per_second: f64,
    /// Over the in-process engine's.
    pub over_in_process_ratio: f64,
}

/// Everything measured on one store.
#[derive(Debug, Clone, Serialize)]
pub struct StoreReport {
    /// ram or file.
    pub store: ServeStoreKind,
    /// Remarks (engine fallbacks, rows skipped and why).
    pub notes: Vec<String>,
    /// QD1 4 KiB round trips.
    pub latency: Vec<LatencyRow>,
    /// 1 MiB reads.
    pub throughput: Vec<ThroughputRow>,
    /// Concurrent clients.
    pub concurrency: Vec<ConcurrencyRow>,
    /// 4 KiB random reads at depth, in process and from several client processes.
    pub small_reads: Vec<SmallReadsRow>,
    /// Issue #14's targets, each judged from the rows above.
    pub targets: Vec<targets::TargetRow>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct ServeReport {
    /// How it was measured.
    pub method: String,
    /// The settings.
    pub settings: ServeSettings,
    /// One report per store.
    pub stores: Vec<StoreReport>,
}

/// Runs `flashpipe bench serve`.
pub fn run(arguments: BenchServeArgs) -> BenchResult {
    let settings = ServeSettings::from_arguments(&arguments)?;
    let report = measure(&settings)?;
    if arguments.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(())
}

/// Measures every store of `settings`.
pub fn measure(settings: &ServeSettings) -> BenchResult<ServeReport> {
    let mut stores = Vec::new();
    for &store in &settings.stores {
        stores.push(local::measure_store(settings, store)?);
    }
    Ok(ServeReport {
        method: method_text(settings),
        settings: settings.clone(),
        stores,
    })
}

fn method_text(settings: &ServeSettings) -> String {
    let clients = match settings.clients_as {
        ClientsAs::Processes => {
            "client processes (the flashpipe binary run as `bench serve-client`)"
        }
        ClientsAs::Threads => {
            "client threads of the bench process, each with its own client over the socket"
        }
    };
    let spin = match settings.spin_us {
        Some(spin_us) => format!("{spin_us} us for every waiting thread"),
        None => "each waiting thread's default".to_string(),
    };
    format!(
        "one engine (read pool in shared memory) measured in process, then served over a Unix \
         socket (spin {spin}) to {clients}; fastest of {ROUNDS} rounds; every read checks a \
         sample of its bytes"
    )
}

/// A new empty folder under `parent` named after this process and `label`.
fn scratch_folder(parent: &Path, label: &str) -> Result<PathBuf, BenchError> {
    static NEXT_FOLDER: AtomicU64 = AtomicU64::new(0);
    let folder = parent.join(format!(
        "flashpipe-bench-serve-{label}-{}-{}",
        std::process::id(),
        NEXT_FOLDER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&folder).map_err(io_with(format!("creating {}", folder.display())))?;
    Ok(folder)
}

/// Jain's fairness index of `shares`: (sum x)^2 / (n * sum x^2), 1 when all are equal,
/// 1/n when one gets everything.
pub fn jain_fairness_index(shares: &[f64]) -> f64 {
    let sum: f64 = shares.iter().sum();
    let sum_of_squares: f64 = shares.iter().map(|share| share * share).sum();
    if shares.is_empty() || sum_of_squares == 0.0 {
        return 1.0;
    }
    sum * sum / (shares.len() as f64 * sum_of_squares)
}

fn print_report(report: &ServeReport) {
    println!("flashpipe bench serve: {}", report.method);
    for store in &report.stores {
        println!();
        println!("store: {}", format!("{:?}", store.store).to_lowercase());
        for note in &store.notes {
            println!("  note: {note}");
        }
        print_side_table(&store.latency, LATENCY_HEADERS, |row| {
            let (count, us) = (row.operations.to_string(), row.us_per_operation);
            (&row.side, count, us, row.over_in_process_ratio)
        });
        print_side_table(&store.throughput, THROUGHPUT_HEADERS, |row| {
            let (depth, gib_per_second) = (row.depth.to_string(), row.gib_per_second);
            (&row.side, depth, gib_per_second, row.over_in_process_ratio)
        });
        ColumnTable::new("  ", &store.concurrency)
            .indent("  ")
            .right("clients", 8, |row| row.clients.to_string())
            .right("seconds", 8, |row| fixed(row.seconds, 2))
            .right("aggregate GiB/s", 16, |row| {
                fixed(row.aggregate_gib_per_second, 2)
            })
            .right("x 1 client", 11, |row| fixed(row.over_one_client_ratio, 2))
            .right("Jain", 6, |row| fixed(row.jain_fairness_ratio, 3))
            .right("slowest/fastest", 16, |row| {
                fixed(row.slowest_over_fastest_ratio, 2)
            })
            .print();
        ColumnTable::new("  ", &store.small_reads)
            .indent("  ")
            .left("4 KiB random reads", 46, |row| row.side.clone())
            .right("clients", 8, |row| row.clients.to_string())
            .right("depth", 6, |row| row.depth.to_string())
            .right("k reads/s", 10, |row| {
                fixed(row.thousand_reads_per_second, 1)
            })
            .right("x in-proc", 10, |row| fixed(row.over_in_process_ratio, 2))
            .print();
        targets::print(&store.targets);
    }
}

/// The latency table's headers and least widths.
const LATENCY_HEADERS: [(&str, usize); 4] = [
    ("QD1 4 KiB read round trip", 46),
    ("reads", 8),
    ("us/read", 9),
    ("x in-proc", 10),
];
/// The throughput table's headers and least widths.
const THROUGHPUT_HEADERS: [(&str, usize); 4] = [
    ("1 MiB reads", 46),
    ("depth", 6),
    ("GiB/s", 8),
    ("x in-proc", 10),
];

/// A table of one figure per side: the side, a count, the figure and the figure over the
/// in-process engine's, under `headers` (each a header and its column's least width).
fn print_side_table<R>(
    rows: &[R],
    headers: [(&str, usize); 4],
    cells: impl Fn(&R) -> (&String, String, f64, f64),
) {
    let [side, count, figure, ratio] = headers;
    let cells: Vec<_> = rows.iter().map(cells).collect();
    ColumnTable::new("  ", &cells)
        .indent("  ")
        .left(side.0, side.1, |cells| cells.0.clone())
        .right(count.0, count.1, |cells| cells.1.clone())
        .right(figure.0, figure.1, |cells| fixed(cells.2, 2))
        .right(ratio.0, ratio.1, |cells| fixed(cells.3, 2))
        .print();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jains_index_is_one_for_equal_shares_and_one_over_n_for_one_taker() {
        assert!((jain_fairness_index(&[3.0, 3.0, 3.0]) - 1.0).abs() < 1e-12);
        assert!((jain_fairness_index(&[5.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        assert_eq!(jain_fairness_index(&[]), 1.0);
        let uneven = jain_fairness_index(&[1.0, 2.0]);
        assert!((uneven - 0.9).abs() < 1e-12, "{uneven}");
    }
}
