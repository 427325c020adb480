//! `bench net`'s striping part (issue #15, the thesis's 4 and 8 disks): a store striped
//! over N loopback disk nodes beside the same store over N RAM disks in this process, for
//! each N of `--disk-nodes`.
//!
//! Both stores have the same shape (N devices of the same size, 256 KiB stripe unit, 4 KiB
//! blocks, every device block written once before mkfs so no row pays for first touches)
//! and are measured by the very code `bench fs` measures its stores with
//! ([`crate::fs::measure_engine`]: a big file written and read back whole through the
//! engine, 1 MiB commands 32 in flight, every byte checked, then 4 KiB random reads at
//! queue depth 1 and 32; [`crate::fs::small_file_engine_phases`]: 2 KiB files created,
//! written, read and deleted, 32 commands in flight). The disk nodes are child processes
//! ([`super::disk_nodes`]), reached through `nbd://127.0.0.1:PORT/disk` devices, so every
//! block crosses loopback TCP and another process; the ratio column is remote over local.

use std::path::Path;
use std::time::Duration;

use flashpipe_store::store_config::DeviceSpec;
use serde::Serialize;

use super::disk_nodes::DiskNodes;
use crate::column_table::{fixed, ColumnTable};
use crate::fs::{self, StoreShape};
use crate::pattern::DataPattern;
use crate::BenchResult;

/// FS block size of both stores.
const FS_BLOCK_SIZE_BYTES: u32 = 4096;
/// Engine commands a client keeps in flight (what `bench fs` gives its client).
const CLIENT_COMMANDS_IN_FLIGHT: usize = 64;
/// Bytes of room per small file (its block, metadata and the log's share).
const ROOM_PER_SMALL_FILE_BYTES: u64 = 3 * FS_BLOCK_SIZE_BYTES as u64;
/// Least bytes per device.
const LEAST_DEVICE_BYTES: u64 = 64 << 20;

/// What the striping part measures.
#[derive(Debug, Clone)]
pub struct StripeSettings {
    /// Disk-node counts, in order.
    pub node_counts: Vec<u32>,
    /// Size of the big file.
    pub file_bytes: u64,
    /// Small files (0: no small-file rows).
    pub small_file_count: u64,
    /// Time of each random-read row.
    pub random_runtime: Duration,
}

/// One row: a workload on N devices, local RAM disks against disk nodes.
#[derive(Debug, Clone, Serialize)]
pub struct StripeRow {
    /// Devices the store is striped over.
    pub disk_nodes: u32,
    /// The workload's label.
    pub workload: String,
    /// `MiB/s` or `files/s`.
    pub unit: &'static str,
    /// The store over N RAM disks in this process.
    pub local_ram: f64,
    /// The store over N disk nodes.
    pub remote_disk_nodes: f64,
    /// Remote over local.
    pub ratio_remote_to_local: Option<f64>,
}

/// One store's figures: the big file's four workloads in MiB/s, the small-file phases in
/// files per second.
struct StoreFigures {
    big_file_mib_per_s: Vec<f64>,
    small_files_per_s: Vec<f64>,
}

/// Measures both stores for every node count; the disk nodes are ended before it returns,
/// on success or error.
pub fn run(settings: &StripeSettings, folder: &Path) -> BenchResult<Vec<StripeRow>> {
    let mut rows = Vec::new();
    for &count in &settings.node_counts {
        let payload_bytes =
            settings.file_bytes + settings.small_file_count * ROOM_PER_SMALL_FILE_BYTES;
        let device_bytes = fs::device_bytes_each(payload_bytes, count, LEAST_DEVICE_BYTES);
        crate::progress::set_phase(format!("stripe: {count} local RAM disk(s)"));
        let local = measure_store(
            StoreShape::ram(
                count,
                device_bytes,
                fs::STRIPE_UNIT_BYTES,
                FS_BLOCK_SIZE_BYTES,
            ),
            settings,
            folder,
        )?;
        crate::progress::set_phase(format!("stripe: {count} disk node(s)"));
        let nodes = DiskNodes::start(count, device_bytes, folder)?;
        let remote = measure_store(disk_node_shape(&nodes, device_bytes), settings, folder)?;
        drop(nodes);
        rows.extend(rows_of(count, &local, &remote));
    }
    Ok(rows)
}

/// The store over the disk nodes: the RAM store's shape with `nbd://` devices.
fn disk_node_shape(nodes: &DiskNodes, device_bytes: u64) -> StoreShape {
    let devices = nodes
        .uris()
        .iter()
        .map(|uri| DeviceSpec::Nbd {
            uri: uri.clone(),
            size_bytes: device_bytes,
        })
        .collect();
    StoreShape {
        devices,
        stripe_unit_bytes: fs::STRIPE_UNIT_BYTES,
        fs_block_size_bytes: FS_BLOCK_SIZE_BYTES,
        pre_touch: true,
    }
}

/// Formats the store, then the big file and the small files through its engine.
fn measure_store(
    shape: StoreShape,
    settings: &StripeSettings,
    folder: &Path,
) -> BenchResult<StoreFigures> {
    let fresh = shape.format(folder)?;
    let engine = fs::start_engine(fresh.filesystem);
    let fs_settings = fs::Settings {
        large_file_bytes: settings.file_bytes,
        small_file_count: settings.small_file_count,
        random_runtime: settings.random_runtime,
        fs_block_size_bytes: FS_BLOCK_SIZE_BYTES,
        quick: false,
        use_fio: false,
        drop_page_cache: false,
        parts: vec![fs::Part::Large, fs::Part::Small],
        efficiency_devices: Vec::new(),
    };
    let pattern = DataPattern::new();
    let mut client = engine.client(CLIENT_COMMANDS_IN_FLIGHT);
    let big_file = fs::measure_engine(&mut client, &fs_settings, &pattern)?;
    let small_file_seconds = match settings.small_file_count {
        0 => Vec::new(),
        count => fs::small_file_engine_phases(&mut client, count, &pattern)?.to_vec(),
    };
    drop(client);
    drop(engine.shutdown()?);
    Ok(StoreFigures {
        big_file_mib_per_s: big_file
            .iter()
            .map(|measured| measured.mb_per_s * 1e6 / 1_048_576.0)
            .collect(),
        small_files_per_s: small_file_seconds
            .iter()
            .map(|seconds| settings.small_file_count as f64 / seconds.max(1e-9))
            .collect(),
    })
}

/// Names of the small-file phases, in the order `small_file_engine_phases` returns them.
const SMALL_FILE_PHASES: [&str; 4] = ["create", "write", "read", "delete"];

fn rows_of(count: u32, local: &StoreFigures, remote: &StoreFigures) -> Vec<StripeRow> {
    let row = |workload: String, unit, local: f64, remote: f64| StripeRow {
        disk_nodes: count,
        workload,
        unit,
        local_ram: local,
        remote_disk_nodes: remote,
        ratio_remote_to_local: (local > 0.0).then(|| remote / local),
    };
    let big_file = fs::LARGE_FILE_WORKLOADS
        .iter()
        .zip(
            local
                .big_file_mib_per_s
                .iter()
                .zip(&remote.big_file_mib_per_s),
        )
        .map(|(label, (&local, &remote))| row(label.to_string(), "MiB/s", local, remote));
    let small_files = SMALL_FILE_PHASES
        .iter()
        .zip(
            local
                .small_files_per_s
                .iter()
                .zip(&remote.small_files_per_s),
        )
        .map(|(phase, (&local, &remote))| {
            row(
                format!("small {} B {phase}", fs::SMALL_FILE_BYTES),
                "files/s",
                local,
                remote,
            )
        });
    big_file.chain(small_files).collect()
}

/// Prints the striping table.
pub fn print_table(settings: &StripeSettings, rows: &[StripeRow]) {
    println!();
    println!(
        "bench net stripe: a store striped over N loopback disk nodes (flashpipe serve \
         --export disk=ram:SIZE, nbd:// over TCP) beside the same store over N RAM disks in \
         process; big file {} MiB, {} small files, {:.1} s per random-read row",
        settings.file_bytes >> 20,
        settings.small_file_count,
        settings.random_runtime.as_secs_f64()
    );
    let rate = |value: f64| fixed(value, 1);
    ColumnTable::new("  ", rows)
        .left("nodes", 5, |row| row.disk_nodes.to_string())
        .left("workload", 24, |row| row.workload.clone())
        .left("unit", 7, |row| row.unit.to_string())
        .right("local RAM", 10, |row| rate(row.local_ram))
        .right("disk nodes", 10, |row| rate(row.remote_disk_nodes))
        .right("remote/local", 12, |row| {
            row.ratio_remote_to_local
                .map_or("-".to_string(), |ratio| format!("{ratio:.2}x"))
        })
        .print();
}
