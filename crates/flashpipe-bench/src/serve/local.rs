//! One store of `flashpipe bench serve`: made fresh, its files written, the in-process
//! engine measured, the `read()` row and the ring floor measured beside it, then the
//! engine handed to the server for the client rows ([`super::remote`]).

use std::time::Instant;

use flashpipe_base::WaitPolicy;
use flashpipe_device::{IoBuf, SplitMix64};
use flashpipe_engine::{Command, EngineClient, EngineConfig, Handoff, PoolMemory, ReadData, Reply};
use flashpipe_store::running::RunningStore;

use super::children::ClientGroup;
use super::roles::{BenchServeClientArgs, ClientRole};
use super::{
    LatencyRow, ServeSettings, ServeStoreKind, SmallReadsRow, StoreReport, ThroughputRow,
    LARGE_READ_BYTES, MIB, ROUNDS, SIDE_IN_PROCESS, SIDE_TMPFS, SMALL_DEPTH_TOTAL,
    SMALL_READ_BYTES,
};
use crate::error::{internal, io_with};
use crate::fs::{device_bytes_each, StoreShape};
use crate::pattern::DataPattern;
use crate::BenchResult;

/// Name of the file every row reads.
pub(super) const FILE_NAME: &str = "serve-data";
/// FS block size and stripe unit of the stores.
const BLOCK_BYTES: u32 = 4096;
/// Commands one in-process client keeps outstanding.
const OUTSTANDING_LIMIT: usize = 64;

/// Measures every row on one fresh store of `kind` (its device file, for a file store,
/// in a folder of its own under `settings.folder`, removed afterwards).
pub(super) fn measure_store(
    settings: &ServeSettings,
    kind: ServeStoreKind,
) -> BenchResult<StoreReport> {
    let folder = super::scratch_folder(&settings.folder, "store")?;
    let measured = measure_store_in(settings, kind, &folder);
    let _ = std::fs::remove_dir_all(&folder);
    measured
}

fn measure_store_in(
    settings: &ServeSettings,
    kind: ServeStoreKind,
    folder: &std::path::Path,
) -> BenchResult<StoreReport> {
    let device_bytes = device_bytes_each(settings.large_file_bytes, 1, 0);
    let unit_bytes = u64::from(BLOCK_BYTES);
    let shape = match kind {
        ServeStoreKind::Ram => StoreShape::ram(1, device_bytes, unit_bytes, BLOCK_BYTES),
        ServeStoreKind::File => {
            StoreShape::files(folder, "serve", 1, device_bytes, unit_bytes, BLOCK_BYTES)
        }
    };
    let fresh = shape.format(folder)?;
    let mut notes = fresh.notes.clone();
    let running = RunningStore::start(fresh.filesystem, engine_config(settings));
    if let Some(refusal) = running.engine.shared_read_pool_refusal() {
        notes.push(format!("the read pool is on the heap: {refusal}"));
    }
    measure_running(settings, kind, running, notes)
}

/// The engine configuration of every store: 1 MiB reads, the read pool in shared memory
/// with a buffer for every read the most clients keep in flight, the hand-off and write
/// path the environment names (as `bench fs`; `--spin-us` names the hand-off first).
fn engine_config(settings: &ServeSettings) -> EngineConfig {
    let most_clients = settings.client_counts.iter().copied().max().unwrap_or(1);
    let reads_held = (most_clients * super::remote::CONCURRENT_DEPTH)
        .max(settings.depth)
        .max(SMALL_DEPTH_TOTAL);
    EngineConfig {
        read_buffer_count: (reads_held + 16).max(EngineConfig::default().read_buffer_count),
        max_read_bytes: LARGE_READ_BYTES as usize,
        write_path: crate::fs::write_path_from_environment(),
        handoff: match settings.spin_us {
            Some(spin_us) => Handoff::from_policy(WaitPolicy::spin_us(spin_us)),
            None => crate::fs::handoff_from_environment(),
        },
        read_pool_memory: PoolMemory::Shared,
        ..EngineConfig::default()
    }
}

fn measure_running(
    settings: &ServeSettings,
    kind: ServeStoreKind,
    running: RunningStore,
    notes: Vec<String>,
) -> BenchResult<StoreReport> {
    let mut client = running.engine.client(OUTSTANDING_LIMIT);
    write_file(&mut client, settings.large_file_bytes)?;
    let in_process_us = qd1_round_trip_us(&mut client, settings)?;
    let in_process = large_reads(&mut client, settings)?;
    let (small_reads, small_seconds) = small_reads_at_depth(&mut client, settings)?;
    drop(client);
    let mut report = StoreReport {
        store: kind,
        notes,
        latency: vec![latency_row(
            SIDE_IN_PROCESS,
            settings.operation_count,
            in_process_us,
            in_process_us,
        )],
        throughput: vec![throughput_row(
            SIDE_IN_PROCESS,
            settings.depth,
            in_process,
            in_process,
        )],
        concurrency: Vec::new(),
        small_reads: vec![SmallReadsRow {
            side: SIDE_IN_PROCESS.to_string(),
            clients: 1,
            depth: SMALL_DEPTH_TOTAL,
            seconds: small_seconds,
            thousand_reads_per_second: small_reads as f64 / small_seconds / 1e3,
            over_in_process_ratio: 1.0,
        }],
        targets: Vec::new(),
    };
    let floors: [(&str, FloorProbe); 2] = [
        ("frame rings", super::ring_floor::ring_round_trip_us),
        ("Unix socket", super::ring_floor::socket_round_trip_us),
    ];
    for (path, round_trip_us) in floors {
        let us = round_trip_us(settings)?;
        report.latency.push(latency_row(
            &format!(
                "{path}, {} B there and back (floor)",
                super::ring_floor::FRAME_BYTES
            ),
            settings.operation_count,
            us,
            in_process_us,
        ));
    }
    let tmpfs = tmpfs_reads(settings)?;
    report
        .throughput
        .push(throughput_row(SIDE_TMPFS, 1, tmpfs, in_process));
    super::remote::measure_clients(settings, running, &mut report, in_process_us, in_process)?;
    report.targets = super::targets::judge(&report);
    Ok(report)
}

/// Measures the round trip of one floor path (a frame ring pair or a Unix socket), in us.
type FloorProbe = fn(&ServeSettings) -> Result<f64, String>;

pub(super) fn latency_row(side: &str, operations: u64, us: f64, in_process_us: f64) -> LatencyRow {
    LatencyRow {
        side: side.to_string(),
        operations: timed_count(operations),
        us_per_operation: us,
        over_in_process_ratio: us / in_process_us,
    }
}

/// (bytes, seconds) of the fastest round.
pub(super) type Throughput = (u64, f64);

pub(super) fn throughput_row(
    side: &str,
    depth: u32,
    measured: Throughput,
    in_process: Throughput,
) -> ThroughputRow {
    let rate = |(bytes, seconds): Throughput| bytes as f64 / seconds.max(1e-12);
    ThroughputRow {
        side: side.to_string(),
        depth,
        bytes: measured.0,
        gib_per_second: rate(measured) / (1u64 << 30) as f64,
        over_in_process_ratio: rate(measured) / rate(in_process),
    }
}

/// Operations a fixed-count measurement times (whole rounds).
fn timed_count(count: u64) -> u64 {
    (count / ROUNDS).max(1) * ROUNDS
}

/// Large reads per round: the file once over, at least 16.
pub(super) fn large_reads_per_round(settings: &ServeSettings) -> u64 {
    (settings.large_file_bytes / LARGE_READ_BYTES).max(16)
}

/// Seeded 4 KiB-aligned offsets of QD1 reads inside the file.
pub(super) fn small_read_offset(generator: &mut SplitMix64, file_bytes: u64) -> u64 {
    generator.next_u64() % (file_bytes / SMALL_READ_BYTES) * SMALL_READ_BYTES
}

fn write_file(client: &mut EngineClient, file_bytes: u64) -> BenchResult {
    client.call(Command::Create {
        name: FILE_NAME.to_string(),
    })?;
    let pattern = DataPattern::new();
    for offset_bytes in (0..file_bytes).step_by(MIB as usize) {
        let mut data = IoBuf::zeroed(MIB.min(file_bytes - offset_bytes) as usize);
        pattern.fill(offset_bytes, &mut data);
        client.call(Command::Write {
            name: FILE_NAME.to_string(),
            offset_bytes,
            data,
        })?;
    }
    client.call(Command::Flush)?;
    Ok(())
}

fn read_command(offset_bytes: u64, length_bytes: u64) -> Command {
    Command::Read {
        name: FILE_NAME.to_string(),
        offset_bytes,
        length_bytes,
    }
}

fn checked_data(reply: Reply, offset_bytes: u64, pattern: &DataPattern) -> BenchResult<ReadData> {
    match reply {
        Reply::Data(data) => {
            pattern.check(offset_bytes, data.bytes())?;
            Ok(data)
        }
        _ => Err(internal("the engine answered a read with no data").into()),
    }
}

/// Mean microseconds per QD1 4 KiB read of the fastest round.
fn qd1_round_trip_us(client: &mut EngineClient, settings: &ServeSettings) -> BenchResult<f64> {
    let pattern = DataPattern::new();
    let mut generator = SplitMix64::new(14);
    let per_round = (settings.operation_count / ROUNDS).max(1);
    let mut fastest_us = f64::MAX;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for _ in 0..per_round {
            let offset = small_read_offset(&mut generator, settings.large_file_bytes);
            let reply = client.call(read_command(offset, SMALL_READ_BYTES))?;
            checked_data(reply, offset, &pattern)?;
        }
        fastest_us = fastest_us.min(started.elapsed().as_secs_f64() * 1e6 / per_round as f64);
    }
    Ok(fastest_us)
}

/// The fastest round of 1 MiB reads over the file with `depth` in flight.
fn large_reads(client: &mut EngineClient, settings: &ServeSettings) -> BenchResult<Throughput> {
    let reads_in_file = (settings.large_file_bytes / LARGE_READ_BYTES).max(1);
    let per_round = large_reads_per_round(settings);
    let mut fastest: Throughput = (0, f64::MAX);
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let next = |index: u64| {
            (index < per_round)
                .then_some(((index % reads_in_file) * LARGE_READ_BYTES, LARGE_READ_BYTES))
        };
        reads_in_flight(client, settings.depth, next)?;
        let seconds = started.elapsed().as_secs_f64();
        if seconds < fastest.1 {
            fastest = (per_round * LARGE_READ_BYTES, seconds);
        }
    }
    Ok(fastest)
}

/// 4 KiB reads at seeded random offsets, [`SMALL_DEPTH_TOTAL`] in flight, for the
/// settings' seconds: (reads, seconds).
fn small_reads_at_depth(
    client: &mut EngineClient,
    settings: &ServeSettings,
) -> BenchResult<(u64, f64)> {
    let mut generator = SplitMix64::new(32);
    let started = Instant::now();
    let next = |_| {
        (started.elapsed().as_secs_f64() < settings.seconds).then(|| {
            let offset = small_read_offset(&mut generator, settings.large_file_bytes);
            (offset, SMALL_READ_BYTES)
        })
    };
    let completed = reads_in_flight(client, SMALL_DEPTH_TOTAL, next)?;
    Ok((completed, started.elapsed().as_secs_f64()))
}

/// Reads `next` gives (offset and length of read number N; `None` ends the submitting),
/// `depth` in flight, each checked against the written pattern; the reads completed.
fn reads_in_flight(
    client: &mut EngineClient,
    depth: u32,
    mut next: impl FnMut(u64) -> Option<(u64, u64)>,
) -> BenchResult<u64> {
    let pattern = DataPattern::new();
    let mut offsets = std::collections::HashMap::new();
    let (mut submitted, mut completed, mut open) = (0u64, 0u64, true);
    loop {
        while open && submitted - completed < u64::from(depth) {
            let Some((offset, length_bytes)) = next(submitted) else {
                open = false;
                break;
            };
            let ticket = client.submit(read_command(offset, length_bytes))?;
            offsets.insert(ticket, offset);
            submitted += 1;
        }
        if completed == submitted {
            return Ok(completed);
        }
        let (ticket, reply) = client.next_completion()?;
        let offset = offsets
            .remove(&ticket)
            .expect("every completion answers a read");
        checked_data(reply?, offset, &pattern)?;
        completed += 1;
    }
}

/// `read()` of the same bytes from a tmpfs file, in one client.
fn tmpfs_reads(settings: &ServeSettings) -> BenchResult<Throughput> {
    let path = settings
        .tmpfs
        .join(format!("flashpipe-bench-serve-{}.bin", std::process::id()));
    let written = write_tmpfs_file(&path, settings.large_file_bytes);
    let measured = written.and_then(|()| {
        let mut role = BenchServeClientArgs::new(ClientRole::TmpfsRead);
        role.file = Some(path.display().to_string());
        role.file_bytes = settings.large_file_bytes;
        role.operations = large_reads_per_round(settings);
        let group = ClientGroup::start(&[role], settings.clients_as, |_| Ok(()))?;
        let result = group.go_and_collect()?.remove(0);
        Ok((result.bytes, result.seconds))
    });
    let _ = std::fs::remove_file(&path);
    measured
}

fn write_tmpfs_file(path: &std::path::Path, file_bytes: u64) -> BenchResult {
    use std::io::Write;
    let pattern = DataPattern::new();
    let mut file =
        std::fs::File::create(path).map_err(io_with(format!("creating {}", path.display())))?;
    let mut buffer = vec![0u8; MIB as usize];
    for offset_bytes in (0..file_bytes).step_by(MIB as usize) {
        let length = MIB.min(file_bytes - offset_bytes) as usize;
        pattern.fill(offset_bytes, &mut buffer[..length]);
        file.write_all(&buffer[..length])?;
    }
    Ok(())
}
