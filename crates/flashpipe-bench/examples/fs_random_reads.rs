//! The 4 KiB random-read rows of `flashpipe bench fs --parts large` alone, for profiling
//! against fio on the same device files (docs/design/27-fio-reads.md): a store of two
//! device files in FOLDER (256 KiB stripe unit, 4 KiB blocks, 32 requests per device, as
//! the benchmark's), one file of SIZE_MIB written through the engine, then 4 KiB reads at
//! random aligned offsets with QUEUE_DEPTH outstanding for SECONDS, each checked against
//! the pattern, as `bench fs` does. Prints the reads completed and the IOPS, and the CPU
//! time and context switches per read of the client thread and of the engine thread
//! (from `/proc/self/task`, over the random phase only).
//!
//! The engine's read pool is registered with the rings, as `bench fs` does
//! (`Engine::register_read_pool`); `FIO_READS_PLAIN=1` leaves it on plain buffers, to
//! compare the two with one binary. `FIO_READS_DEVICES=N` makes a store of N device files instead (1 to 8), to compare with
//! fio on as many files.
//!
//! Counts per read come from two runs under `perf stat` that differ only in SECONDS: the
//! set-up is the same in both, so the difference of the counts over the difference of the
//! reads is what one read costs.
//!
//! `cargo run --release -p flashpipe-bench --example fs_random_reads FOLDER SIZE_MIB QUEUE_DEPTH SECONDS`

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use flashpipe_bench::pattern::{DataPattern, DataPatternReader};
use flashpipe_device::SplitMix64;
use flashpipe_engine::{Command, Engine, EngineClient, EngineConfig, Handoff, Reply};
use flashpipe_fs::{Filesystem, FormatOptions};
use flashpipe_store::store::{open_store_device, DeviceCreation};
use flashpipe_store::store_config::{DeviceSpec, StoreConfig, STORE_FILE_VERSION};

const MIB: u64 = 1024 * 1024;
const FILE_NAME: &str = "large-file";
const READ_BYTES: u64 = 4096;

fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let [folder, size_mib, queue_depth, seconds] = arguments.as_slice() else {
        eprintln!("usage: fs_random_reads FOLDER SIZE_MIB QUEUE_DEPTH SECONDS");
        std::process::exit(2)
    };
    let folder = std::fs::canonicalize(PathBuf::from(folder)).expect("FOLDER exists");
    let size_bytes = size_mib.parse::<u64>().expect("SIZE_MIB is a whole number") * MIB;
    let queue_depth: u32 = queue_depth.parse().expect("QUEUE_DEPTH is a whole number");
    let runtime = Duration::from_secs_f64(seconds.parse().expect("SECONDS is a number"));
    let engine = Engine::start(format_store(&folder, size_bytes), engine_config());
    if std::env::var_os("FIO_READS_PLAIN").is_none() {
        if let Err(error) = engine.register_read_pool() {
            eprintln!("note: reads on plain buffers, the read pool was not registered: {error}");
        }
    }
    let mut client = engine.client(64);
    let pattern = DataPattern::new();
    let mut source = DataPatternReader::new(&pattern, size_bytes);
    client
        .write_stream(FILE_NAME, &mut source, MIB as usize, 32, &mut |_| {})
        .expect("the file is written");
    client.call(Command::Flush).expect("flush");
    let before = thread_costs();
    let (reads, elapsed) = random_reads(&mut client, &pattern, size_bytes, queue_depth, runtime);
    let after = thread_costs();
    println!(
        "{reads} reads in {:.3} s: {:.0} IOPS at QD{queue_depth}",
        elapsed.as_secs_f64(),
        reads as f64 / elapsed.as_secs_f64()
    );
    for (name, cost) in &after {
        let Some((_, earlier)) = before.iter().find(|(other, _)| other == name) else {
            continue;
        };
        let per_read = |now: u64, then: u64| (now - then) as f64 / reads.max(1) as f64;
        println!(
            "  thread {name}: {:.2} us CPU, {:.3} voluntary and {:.3} forced switches per read",
            per_read(cost.cpu_ns, earlier.cpu_ns) / 1000.0,
            per_read(cost.voluntary_switches, earlier.voluntary_switches),
            per_read(cost.forced_switches, earlier.forced_switches),
        );
    }
    drop(client);
    drop(engine.shutdown().expect("shutdown"));
}

/// The engine configuration of `bench fs` (1 MiB reads, the hand-off that
/// `FLASHPIPE_SPIN_US` names or the default, the defaults otherwise).
fn engine_config() -> EngineConfig {
    let handoff = match std::env::var(flashpipe_base::wait::SPIN_US_VARIABLE) {
        Ok(text) => Handoff::from_policy(
            flashpipe_base::WaitPolicy::parse(&text).expect("FLASHPIPE_SPIN_US is microseconds"),
        ),
        Err(_) => Handoff::DEFAULT,
    };
    EngineConfig {
        max_read_bytes: MIB as usize,
        handoff,
        ..EngineConfig::default()
    }
}

/// Two device files of the benchmark's shape, formatted.
fn format_store(folder: &Path, size_bytes: u64) -> Filesystem {
    let count = device_count();
    let each = (size_bytes + (size_bytes / 8).max(64 * MIB)).div_ceil(count * MIB) * MIB;
    let devices = (0..count)
        .map(|index| DeviceSpec::File {
            path: folder.join(format!("large-{index}.img")),
            size_bytes: each,
        })
        .collect();
    let config = StoreConfig {
        store_file_version: STORE_FILE_VERSION,
        identity: None,
        block_size_bytes: 4096,
        stripe_unit_bytes: 256 * 1024,
        queue_depth: 32,
        devices,
    };
    let store_file = folder.join("bench-store.toml");
    let opened = open_store_device(&config, &store_file, DeviceCreation::CreateMissing)
        .expect("the store opens");
    for note in &opened.notes {
        eprintln!("note: {note}");
    }
    let options = FormatOptions {
        fs_block_size_bytes: 4096,
        store_identity: None,
    };
    Filesystem::format(opened.device, &options).expect("mkfs")
}

/// What one thread of this process has cost so far (Linux `/proc`).
#[derive(Clone, Copy, Default)]
struct ThreadCost {
    cpu_ns: u64,
    voluntary_switches: u64,
    forced_switches: u64,
}

/// The cost of the client (main) thread and the engine thread, by thread name.
fn thread_costs() -> Vec<(String, ThreadCost)> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| {
            let path = task.path();
            let name = std::fs::read_to_string(path.join("comm")).ok()?;
            let name = if task.file_name().to_str()? == std::process::id().to_string() {
                "client (main)".to_string()
            } else {
                name.trim().to_string()
            };
            if name != "client (main)" && !name.starts_with("flashpipe-engin") {
                return None;
            }
            let schedstat = std::fs::read_to_string(path.join("schedstat")).ok()?;
            let status = std::fs::read_to_string(path.join("status")).ok()?;
            let field = |key: &str| {
                status
                    .lines()
                    .find_map(|line| line.strip_prefix(key))
                    .and_then(|value| value.trim().parse().ok())
                    .unwrap_or(0)
            };
            let cost = ThreadCost {
                cpu_ns: schedstat.split_whitespace().next()?.parse().ok()?,
                voluntary_switches: field("voluntary_ctxt_switches:"),
                forced_switches: field("nonvoluntary_ctxt_switches:"),
            };
            Some((name, cost))
        })
        .collect()
}

/// Device files of the store: `FIO_READS_DEVICES` (1 to 8), 2 (the benchmark's) unset.
fn device_count() -> u64 {
    match std::env::var("FIO_READS_DEVICES") {
        Ok(text) => match text.parse::<u64>() {
            Ok(count @ 1..=8) => count,
            _ => panic!("FIO_READS_DEVICES is a count of device files from 1 to 8"),
        },
        Err(_) => 2,
    }
}

/// The loop of `bench fs`'s random-read rows.
fn random_reads(
    client: &mut EngineClient,
    pattern: &DataPattern,
    size_bytes: u64,
    queue_depth: u32,
    runtime: Duration,
) -> (u64, Duration) {
    let mut generator = SplitMix64::new(u64::from(queue_depth));
    let block_count = size_bytes / READ_BYTES;
    let mut offsets_by_ticket = HashMap::new();
    let started = Instant::now();
    let mut completed = 0u64;
    loop {
        while client.outstanding() < queue_depth as usize && started.elapsed() < runtime {
            let offset_bytes = generator.below(block_count) * READ_BYTES;
            let ticket = client
                .submit(Command::Read {
                    name: FILE_NAME.to_string(),
                    offset_bytes,
                    length_bytes: READ_BYTES,
                })
                .expect("submit");
            offsets_by_ticket.insert(ticket, offset_bytes);
        }
        if client.outstanding() == 0 {
            break;
        }
        let (ticket, result) = client.next_completion().expect("a completion");
        let offset_bytes = offsets_by_ticket.remove(&ticket).expect("a read of ours");
        match result.expect("the read succeeds") {
            Reply::Data(data) => pattern.check(offset_bytes, data.bytes()).expect("pattern"),
            _ => panic!("a read answered with something other than data"),
        }
        completed += 1;
    }
    (completed, started.elapsed())
}
