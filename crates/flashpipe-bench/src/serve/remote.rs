//! The client rows of `flashpipe bench serve`: the running store handed to a
//! `flashpipe-server` on a socket of its own, read by clients through
//! `flashpipe-client`, by reference and copying, one client and many at once.

use std::path::Path;

use flashpipe_base::WaitPolicy;
use flashpipe_server::{Server, ServerConfig};
use flashpipe_store::running::RunningStore;

use super::children::ClientGroup;
use super::local::{large_reads_per_round, latency_row, throughput_row, Throughput};
use super::roles::{BenchServeClientArgs, ClientResult, ClientRole};
use super::{
    jain_fairness_index, ConcurrencyRow, ServeSettings, SmallReadsRow, StoreReport,
    LARGE_READ_BYTES, ROUNDS, SIDE_BY_REFERENCE, SIDE_BY_REFERENCE_SOCKET, SIDE_COPYING,
    SMALL_DEPTH_CLIENTS, SMALL_DEPTH_TOTAL, SMALL_READ_BYTES,
};
use crate::BenchResult;

/// Reads each client of a concurrent-clients point keeps in flight (64 clients at one
/// each already keep the engine's reads in flight full; more would only need more
/// engine read buffers).
pub(super) const CONCURRENT_DEPTH: u32 = 1;

/// Serves `running` and measures the client rows into `report`; the server stops and
/// the store closes before this returns.
pub(super) fn measure_clients(
    settings: &ServeSettings,
    running: RunningStore,
    report: &mut StoreReport,
    in_process_us: f64,
    in_process: Throughput,
) -> BenchResult {
    let folder = super::scratch_folder(&std::env::temp_dir(), "socket")?;
    let most_clients = settings
        .client_counts
        .iter()
        .copied()
        .max()
        .unwrap_or(1)
        .max(SMALL_DEPTH_CLIENTS) as usize;
    let config = ServerConfig {
        socket_path: folder.join("serve.sock"),
        max_clients: most_clients + 2,
        // Every benchmark client is this process's user.
        max_clients_per_uid: Some(most_clients + 2),
        max_read_handles_per_client: 16.max(settings.depth as usize),
        store_description: "flashpipe bench serve".to_string(),
        spin: settings
            .spin_us
            .map(WaitPolicy::spin_us)
            .unwrap_or(ServerConfig::default().spin),
        ..ServerConfig::default()
    };
    let server = match Server::start(running, config) {
        Ok(server) => server,
        Err(error) => {
            let _ = std::fs::remove_dir_all(&folder);
            return Err(error.into());
        }
    };
    let stop = server.stop_handle();
    let socket = server.socket_path().to_path_buf();
    let serving = std::thread::spawn(move || server.run_until_stopped());
    let measured = measure_with_server(settings, &socket, report, in_process_us, in_process);
    stop.stop();
    let served = serving
        .join()
        .map_err(|_| "the server thread panicked".to_string());
    let _ = std::fs::remove_dir_all(&folder);
    measured?;
    served??;
    Ok(())
}

fn measure_with_server(
    settings: &ServeSettings,
    socket: &Path,
    report: &mut StoreReport,
    in_process_us: f64,
    in_process: Throughput,
) -> BenchResult {
    for path in CLIENT_PATHS {
        let mut role = server_role(settings, socket, ClientRole::ServerQd1, path);
        role.read_bytes = SMALL_READ_BYTES;
        role.operations = (settings.operation_count / ROUNDS).max(1);
        role.seed = 14;
        let result = run_one(settings, role)?;
        let side = side_name(path, &result, report);
        report.latency.push(latency_row(
            &side,
            settings.operation_count,
            result.us_per_operation(),
            in_process_us,
        ));
    }
    for path in CLIENT_PATHS {
        let mut role = server_role(settings, socket, ClientRole::ServerStream, path);
        role.operations = large_reads_per_round(settings);
        let result = run_one(settings, role)?;
        let side = side_name(path, &result, report);
        report.throughput.push(throughput_row(
            &side,
            settings.depth,
            (result.bytes, result.seconds),
            in_process,
        ));
    }
    let mut one_client_rate = None;
    for &count in &settings.client_counts {
        let row = concurrency_point(settings, socket, count, &mut one_client_rate)?;
        report.concurrency.push(row);
    }
    let row = small_reads_point(settings, socket, &report.small_reads)?;
    report.small_reads.push(row);
    Ok(())
}

/// [`SMALL_DEPTH_CLIENTS`] client processes (or threads), by reference through rings,
/// each with its share of [`SMALL_DEPTH_TOTAL`] 4 KiB random reads in flight, for the
/// point's seconds; over the in-process row in `in_process` (the first).
fn small_reads_point(
    settings: &ServeSettings,
    socket: &Path,
    in_process: &[SmallReadsRow],
) -> Result<SmallReadsRow, String> {
    let roles: Vec<BenchServeClientArgs> = (0..SMALL_DEPTH_CLIENTS)
        .map(|index| {
            let mut role = server_role(
                settings,
                socket,
                ClientRole::ServerRandom,
                ClientPath::ByReferenceRings,
            );
            role.depth = SMALL_DEPTH_TOTAL / SMALL_DEPTH_CLIENTS;
            role.read_bytes = SMALL_READ_BYTES;
            role.seconds = settings.seconds;
            role.seed = 32 + u64::from(index);
            role
        })
        .collect();
    let results = ClientGroup::start(&roles, settings.clients_as, |_| Ok(()))?.go_and_collect()?;
    let per_second: f64 = results
        .iter()
        .map(|result| result.operations as f64 / result.seconds.max(1e-12))
        .sum();
    let reference = in_process
        .first()
        .map_or(f64::NAN, |row| row.thousand_reads_per_second * 1e3);
    Ok(SmallReadsRow {
        side: SIDE_BY_REFERENCE.to_string(),
        clients: SMALL_DEPTH_CLIENTS,
        depth: SMALL_DEPTH_TOTAL,
        seconds: settings.seconds,
        thousand_reads_per_second: per_second / 1e3,
        over_in_process_ratio: per_second / reference,
    })
}

/// How a client row's client reads: by reference with its frames through rings or on
/// the socket, or copying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientPath {
    ByReferenceRings,
    ByReferenceSocket,
    Copying,
}

/// The client rows, in print order.
const CLIENT_PATHS: [ClientPath; 3] = [
    ClientPath::ByReferenceRings,
    ClientPath::ByReferenceSocket,
    ClientPath::Copying,
];

fn server_role(
    settings: &ServeSettings,
    socket: &Path,
    role: ClientRole,
    path: ClientPath,
) -> BenchServeClientArgs {
    let mut arguments = BenchServeClientArgs::new(role);
    arguments.socket = Some(socket.to_path_buf());
    arguments.file_bytes = settings.large_file_bytes;
    arguments.depth = settings.depth;
    arguments.read_bytes = LARGE_READ_BYTES;
    arguments.copying = path == ClientPath::Copying;
    arguments.socket_frames = path == ClientPath::ByReferenceSocket;
    if let Some(spin_us) = settings.spin_us {
        arguments.spin_us = spin_us;
    }
    arguments
}

fn run_one(settings: &ServeSettings, role: BenchServeClientArgs) -> Result<ClientResult, String> {
    let group = ClientGroup::start(&[role], settings.clients_as, |_| Ok(()))?;
    Ok(group.go_and_collect()?.remove(0))
}

/// The row's name; a note when a client asked for data by reference and got copies, or
/// for rings and stayed on the socket.
fn side_name(path: ClientPath, result: &ClientResult, report: &mut StoreReport) -> String {
    let mut note = |text: &str| {
        if !report.notes.iter().any(|existing| existing == text) {
            report.notes.push(text.to_string());
        }
    };
    match (path, result.by_reference, result.through_rings) {
        (ClientPath::Copying, _, _) => SIDE_COPYING.to_string(),
        (_, Some(false), _) => {
            note("a client asked for data by reference and the server sent copies");
            "client, by reference REFUSED (copies)".to_string()
        }
        (ClientPath::ByReferenceRings, _, Some(false)) => {
            note("a client asked for frame rings and the server kept it on the socket");
            "client, by reference, rings REFUSED (socket)".to_string()
        }
        (ClientPath::ByReferenceRings, _, _) => SIDE_BY_REFERENCE.to_string(),
        (ClientPath::ByReferenceSocket, _, _) => SIDE_BY_REFERENCE_SOCKET.to_string(),
    }
}

/// `count` clients reading 1 MiB by reference at once for the point's seconds.
fn concurrency_point(
    settings: &ServeSettings,
    socket: &Path,
    count: u32,
    one_client_rate: &mut Option<f64>,
) -> Result<ConcurrencyRow, String> {
    let mut role = server_role(
        settings,
        socket,
        ClientRole::ServerStream,
        ClientPath::ByReferenceRings,
    );
    role.depth = CONCURRENT_DEPTH;
    role.seconds = settings.seconds;
    let roles = vec![role; count as usize];
    let results = ClientGroup::start(&roles, settings.clients_as, |_| Ok(()))?.go_and_collect()?;
    let rates: Vec<f64> = results.iter().map(ClientResult::bytes_per_second).collect();
    let aggregate: f64 = rates.iter().sum();
    let reference_rate = *one_client_rate.get_or_insert(aggregate / f64::from(count));
    let fastest = rates.iter().copied().fold(0.0, f64::max);
    let slowest = rates.iter().copied().fold(f64::MAX, f64::min);
    Ok(ConcurrencyRow {
        clients: count,
        seconds: settings.seconds,
        aggregate_gib_per_second: aggregate / (1u64 << 30) as f64,
        over_one_client_ratio: aggregate / reference_rate,
        jain_fairness_ratio: jain_fairness_index(&rates),
        slowest_over_fastest_ratio: slowest / fastest.max(1e-12),
    })
}
