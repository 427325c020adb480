//! What `flashpipe bench net` prints: the servers' rows beside each other, as tables or as
//! JSON.

use super::served_disk::NetDisk;
use super::stripe::StripeRow;
use super::{server_variants, BenchNetArgs, Figures, Row, RowKey, ServerResults};
use crate::column_table::{fixed, ColumnTable};
use crate::table::Table;
use serde_json::{json, Value};

fn find<'a>(results: &'a [Row], key: &RowKey) -> Option<&'a Figures> {
    results
        .iter()
        .find(|row| row.key == *key)
        .map(|row| &row.figures)
}

/// A flashpipe variant's throughput over the better of the others on the same row (same
/// disk, transport, connections and workload).
pub(super) fn ratio(results: &[Row], key: &RowKey) -> Option<f64> {
    if !key.server.starts_with("flashpipe") {
        return None;
    }
    let ours = find(results, key)?;
    let best_other = ["qemu-nbd", "nbdkit"]
        .iter()
        .filter_map(|server| {
            let other = RowKey {
                server: server.to_string(),
                ..key.clone()
            };
            find(results, &other)
        })
        .map(|figures| figures.bytes_per_second)
        .fold(0.0, f64::max);
    (best_other > 0.0).then(|| ours.bytes_per_second / best_other)
}

/// The run's first line: the disks as served.
fn describe_disks(arguments: &BenchNetArgs, servers: &ServerResults) -> String {
    let size_mib = arguments.size / (1024 * 1024);
    let mut disks = Vec::new();
    for disk in &arguments.disks {
        match (disk, &servers.file) {
            (NetDisk::File, Some((path, file_system))) => disks.push(format!(
                "file {path} on {file_system}, {size_mib} MiB, cache {}",
                arguments.file_cache.describe()
            )),
            _ => disks.push(format!("RAM disk {size_mib} MiB")),
        }
    }
    disks.join("; ")
}

pub(super) fn print_tables(arguments: &BenchNetArgs, servers: &ServerResults) {
    println!(
        "bench net: fio nbd ioengine, {} s per row, loopback; {}",
        arguments.runtime_seconds,
        describe_disks(arguments, servers)
    );
    for &disk in &arguments.disks {
        for transport in &arguments.transports {
            for &connections in &arguments.connections {
                println!();
                server_table(arguments, &servers.rows, disk, transport, connections).print();
            }
        }
    }
}

fn server_table(
    arguments: &BenchNetArgs,
    results: &[Row],
    disk: NetDisk,
    transport: &str,
    connections: u32,
) -> Table {
    let mut rows = Vec::new();
    for workload in arguments.selected_workloads() {
        for (server, _) in server_variants(arguments) {
            let key = RowKey {
                server,
                disk,
                transport: transport.to_string(),
                connections,
                workload: workload.name,
            };
            if let Some(figures) = find(results, &key) {
                rows.push((key, figures));
            }
        }
    }
    let ratio_text = |key: &RowKey| match key.server.starts_with("flashpipe") {
        true => ratio(results, key).map_or("-".to_string(), |ratio| format!("{ratio:.2}x")),
        false => String::new(),
    };
    ColumnTable::new("  ", &rows)
        .caption(&format!(
            "{}, {transport}, {connections} connection(s)",
            disk.name()
        ))
        .left("workload", 20, |(key, _)| key.workload.to_string())
        .left("server", 16, |(key, _)| key.server.clone())
        .right("MiB/s", 9, |(_, figures)| {
            fixed(figures.bytes_per_second / 1048576.0, 1)
        })
        .right("IOPS", 9, |(_, figures)| fixed(figures.iops, 0))
        .right("mean us", 9, |(_, figures)| {
            fixed(figures.latency_us_mean, 1)
        })
        .right("p99 us", 9, |(_, figures)| fixed(figures.latency_us_p99, 1))
        .right("ratio", 7, |(key, _)| ratio_text(key))
        .table()
}

pub(super) fn results_json(
    arguments: &BenchNetArgs,
    servers: &ServerResults,
    stripe_rows: &[StripeRow],
) -> Value {
    let rows: Vec<Value> = servers
        .rows
        .iter()
        .map(|row| {
            json!({
                "server": row.key.server,
                "disk": row.key.disk.name(),
                "transport": row.key.transport,
                "connections": row.key.connections,
                "workload": row.key.workload,
                "bytes_per_second": row.figures.bytes_per_second,
                "iops": row.figures.iops,
                "latency_us_mean": row.figures.latency_us_mean,
                "latency_us_p99": row.figures.latency_us_p99,
                "ratio_to_best_other": ratio(&servers.rows, &row.key),
            })
        })
        .collect();
    let file = servers.file.as_ref().map(|(path, file_system)| {
        json!({
            "path": path,
            "file_system": file_system,
            "cache": arguments.file_cache.describe(),
        })
    });
    json!({
        "size_bytes": arguments.size,
        "runtime_seconds": arguments.runtime_seconds,
        "file": file,
        "rows": rows,
        "stripe": {
            "file_size_bytes": arguments.stripe_file_size,
            "small_file_count": arguments.stripe_small_files,
            "rows": stripe_rows,
        },
    })
}
