//! `flashpipe bench engine`: what one command costs through the engine's hand-off, for
//! each hand-off mode side by side in one run, against the file system called directly
//! on the calling thread (issue #13, item 1), and what group commit saves when several
//! clients flush at once (item 2).
//!
//! On a fresh RAM-disk store (1 disk, 4 KiB blocks, written over once before mkfs so no
//! measurement pays for first-touch page faults), one client calls the engine one
//! command at a time (`EngineClient::call`), so every command is one hand-off to the
//! engine thread and one back:
//! - **stat**: `Stat` of one file: the hand-off alone, the file system's work is a lookup;
//! - **create+write+flush**: `Create`, `Write` of 1 KiB, `Flush`, per file (a new file
//!   each time, so every flush commits); each round on a fresh store, so every round
//!   commits the same work;
//! - **read**: `Read` of one 1 KiB file.
//!
//! The **direct** rows do the same calling the `Filesystem` on the calling thread (no
//! engine), on a store of their own: the floor. Every operation runs in rounds; the
//! report gives the fastest round's mean per operation (the machine's other load only
//! ever adds time), its ratio to direct, and how the waits ended: parks per operation of
//! the engine's inbox and of the client's replies (a park is a futex sleep and a wake).
//!
//! The group-commit part runs several client threads, each creating, writing (1 KiB) and
//! flushing its own files, under each [`FlushGrouping`], and reports the time per file
//! and the file-system commits per flush.
//!
//! The commit-policy part ([`commit_policy`]) compares the metadata log with a full
//! checkpoint at every commit on stores already holding many files (time and device
//! blocks per flush), and the mount after a long log with the mount after a checkpoint.

mod commit_policy;

use std::time::{Duration, Instant};

use flashpipe_device::{run_batch, BlockDevice, IoBuf, Operation, RamDisk};
use flashpipe_engine::handoff::MAX_SPIN_US;
use flashpipe_engine::{
    Command, Engine, EngineClient, EngineConfig, EngineCounters, EngineError, FlushGrouping,
    Handoff, Reply, WaitCounts,
};
use flashpipe_fs::{
    FileIoError, Filesystem, FlushError, FormatError, FormatOptions, MountError, NamespaceError,
};
use serde::Serialize;

use crate::column_table::{fixed, ColumnTable};

pub use commit_policy::{
    CommitPolicyRow, CountingDevice, MountRow, WriteCounts, DEFAULT_STORE_FILE_COUNTS,
    MOST_STORE_FILE_COUNT, MOUNT_REPEATS, QUICK_STORE_FILE_COUNTS,
};

/// FS block size and RAM-disk block size.
const BLOCK_BYTES: u32 = 4096;
/// Requests in flight on the RAM disk.
const QUEUE_DEPTH: u32 = 32;
/// Bytes each file holds.
const FILE_BYTES: usize = 1024;
/// Rounds each operation runs in.
const ROUNDS: u64 = 5;

/// What a run's size sets: the RAM disk and the operations per measurement.
struct RunSizes {
    /// RAM-disk size.
    ram_disk_bytes: u64,
    /// Operations per stat and read measurement (unless `--operations` says).
    operation_count: u64,
}

/// A full run's sizes.
const FULL_RUN: RunSizes = RunSizes {
    ram_disk_bytes: 256 << 20,
    operation_count: 20_000,
};
/// A `--quick` run's sizes.
const QUICK_RUN: RunSizes = RunSizes {
    ram_disk_bytes: 16 << 20,
    operation_count: 100,
};

/// Files created per mode: this share of the operation count (commits grow with files).
const FILES_PER_OPERATIONS: u64 = 10;
/// Default client threads of the group-commit part.
const DEFAULT_CLIENT_COUNT: usize = 4;
/// Most client threads.
const MOST_CLIENT_COUNT: usize = 64;
/// Commands one client keeps outstanding.
const CLIENT_OUTSTANDING_LIMIT: usize = 8;

/// Options of `flashpipe bench engine`.
#[derive(Debug, clap::Args)]
pub struct BenchEngineArgs {
    /// Operations per stat and read measurement; a tenth as many files are created,
    /// written and flushed [default: 20000, 100 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u64).range(10..=10_000_000))]
    pub operations: Option<u64>,
    /// Spin windows to measure, microseconds, comma-separated: each adds a
    /// spin-then-park mode beside park [default: the engine's default window].
    #[arg(long, value_delimiter = ',')]
    pub spin_us: Vec<u32>,
    /// Client threads of the group-commit part [default: 4].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=MOST_CLIENT_COUNT as u64))]
    pub clients: Option<u64>,
    /// Store sizes of the commit-policy and mount parts: files already in the store,
    /// comma-separated [default: 0,1000,10000,50000; 0,100,1000 with --quick].
    #[arg(long, value_delimiter = ',')]
    pub store_files: Vec<u64>,
    /// Print JSON instead of tables (every ratio sits in a field named *ratio*).
    #[arg(long)]
    pub json: bool,
    /// A tiny run for tests: 100 operations, a 16 MiB RAM disk.
    #[arg(long)]
    pub quick: bool,
}

/// What can stop the benchmark.
#[derive(Debug, thiserror::Error)]
pub enum BenchEngineError {
    /// A bad command-line value.
    #[error("bad argument: {0}")]
    BadArgument(#[source] crate::error::BenchError),
    /// The RAM disk could not be made or written.
    #[error("{0}")]
    Device(#[from] flashpipe_device::DeviceError),
    /// mkfs failed.
    #[error("{0}")]
    Format(#[from] FormatError),
    /// A name operation of the direct file system failed.
    #[error("{0}")]
    Namespace(#[from] NamespaceError),
    /// A data operation of the direct file system failed.
    #[error("{0}")]
    FileIo(#[from] FileIoError),
    /// A mount of the commit-policy part failed.
    #[error("{0}")]
    Mount(#[from] MountError),
    /// A direct flush failed.
    #[error("{0}")]
    Flush(#[from] FlushError),
    /// The engine failed a command.
    #[error("{0}")]
    Engine(#[from] EngineError),
    /// The engine answered a command with a reply of another kind.
    #[error("the engine answered {command} with {reply}")]
    UnexpectedReply {
        /// The command.
        command: &'static str,
        /// What came back.
        reply: String,
    },
    /// Data read back differs from what was written.
    #[error("data check failed: {0} read back other bytes than were written")]
    DataMismatch(String),
    /// A client thread of the group-commit part panicked.
    #[error("a client thread of the group-commit part panicked")]
    ClientPanicked,
}

/// One operation measured one way.
#[derive(Debug, Clone, Serialize)]
pub struct OperationRow {
    /// stat, create+write+flush, or read.
    pub operation: String,
    /// direct, park, or spin-then-park N us.
    pub mode: String,
    /// The spin window (0 for park and direct).
    pub spin_us: u32,
    /// Operations timed (over all rounds).
    pub operations: u64,
    /// Mean time per operation of the fastest round.
    pub us_per_operation: f64,
    /// us_per_operation over the direct row's.
    pub over_direct_ratio: f64,
    /// Parks of the engine's inbox per operation (none for direct).
    pub engine_parks_per_operation: Option<f64>,
    /// Parks of the client waiting for replies per operation (none for direct).
    pub client_parks_per_operation: Option<f64>,
}

/// The group-commit part, one hand-off mode and grouping.
#[derive(Debug, Clone, Serialize)]
pub struct GroupCommitRow {
    /// park, or spin-then-park N us.
    pub mode: String,
    /// The flush grouping.
    pub grouping: String,
    /// Client threads.
    pub clients: usize,
    /// Files each client created, wrote and flushed.
    pub files_per_client: u64,
    /// Wall time over all files.
    pub us_per_file: f64,
    /// File-system flushes (commit calls) the engine made per flush command: 1 for
    /// one per flush, less when flushes shared a commit.
    pub commit_calls_per_flush_ratio: f64,
    /// File-system commits that wrote changes per flush command (a commit call finding
    /// nothing changed only flushes the device).
    pub commits_with_changes_per_flush_ratio: f64,
}

/// Everything measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// How it was measured.
    pub method: String,
    /// A tiny run.
    pub quick: bool,
    /// One row per operation and mode.
    pub operations: Vec<OperationRow>,
    /// One row per mode and grouping.
    pub group_commit: Vec<GroupCommitRow>,
    /// One row per store size and commit policy.
    pub commit_policy: Vec<CommitPolicyRow>,
    /// One row per store size: mount after a long log and after a checkpoint.
    pub mount: Vec<MountRow>,
}

/// The resolved settings of one run.
struct Settings {
    operation_count: u64,
    file_count: u64,
    handoffs: Vec<Handoff>,
    client_count: usize,
    ram_disk_bytes: u64,
    quick: bool,
    commit_policy: commit_policy::CommitPolicySettings,
}

impl Settings {
    fn from_arguments(arguments: &BenchEngineArgs) -> Result<Settings, BenchEngineError> {
        let sizes = match arguments.quick {
            true => QUICK_RUN,
            false => FULL_RUN,
        };
        let operation_count = arguments.operations.unwrap_or(sizes.operation_count);
        let spin_windows_us = match arguments.spin_us.is_empty() {
            true => vec![Handoff::DEFAULT.spin_us()],
            false => arguments.spin_us.clone(),
        };
        let mut handoffs = vec![Handoff::Park];
        for spin_us in spin_windows_us {
            if spin_us == 0 || spin_us > MAX_SPIN_US {
                return Err(BenchEngineError::BadArgument(crate::error::invalid_input(
                    format!(
                        "--spin-us {spin_us}: a spin window is 1 to {MAX_SPIN_US} microseconds \
                     (park is always measured)"
                    ),
                )));
            }
            handoffs.push(Handoff::SpinThenPark { spin_us });
        }
        Ok(Settings {
            operation_count,
            file_count: (operation_count / FILES_PER_OPERATIONS).max(ROUNDS),
            handoffs,
            client_count: arguments
                .clients
                .map_or(DEFAULT_CLIENT_COUNT, |count| count as usize),
            ram_disk_bytes: sizes.ram_disk_bytes,
            quick: arguments.quick,
            commit_policy: commit_policy::CommitPolicySettings::new(
                &arguments.store_files,
                arguments.quick,
            )?,
        })
    }
}

fn mode_name(handoff: Handoff) -> String {
    match handoff {
        Handoff::Park => "park".to_string(),
        Handoff::SpinThenPark { spin_us } => format!("spin {spin_us} us, then park"),
    }
}

/// A fresh file system on a RAM disk written over once.
fn fresh_filesystem(settings: &Settings) -> Result<Filesystem, BenchEngineError> {
    let block_count = settings.ram_disk_bytes / u64::from(BLOCK_BYTES);
    let mut disk = RamDisk::new("ram0", BLOCK_BYTES, block_count, QUEUE_DEPTH)?;
    write_zeros_everywhere(&mut disk)?;
    let options = FormatOptions {
        fs_block_size_bytes: BLOCK_BYTES,
        store_identity: None,
    };
    Ok(Filesystem::format(Box::new(disk), &options)?)
}

fn write_zeros_everywhere(device: &mut dyn BlockDevice) -> Result<(), BenchEngineError> {
    const BLOCKS_PER_REQUEST: u64 = 256;
    let block_count = device.info().block_count;
    let mut first_block = 0;
    while first_block < block_count {
        let count = BLOCKS_PER_REQUEST.min(block_count - first_block);
        let buffer = IoBuf::zeroed((count * u64::from(BLOCK_BYTES)) as usize);
        run_batch(
            device,
            vec![Operation::Write {
                first_block,
                buffer,
            }],
        )?;
        first_block += count;
    }
    Ok(())
}

fn file_name(index: u64) -> String {
    format!("file-{index}")
}

fn file_bytes(index: u64) -> IoBuf {
    let mut buffer = IoBuf::zeroed(FILE_BYTES);
    for (offset, byte) in buffer.iter_mut().enumerate() {
        *byte = (index as usize * 7 + offset) as u8;
    }
    buffer
}

/// The fastest round's mean per operation, in microseconds: `operation(index)` runs
/// `count` times split into [`ROUNDS`] rounds.
fn fastest_round_us(
    count: u64,
    mut operation: impl FnMut(u64) -> Result<(), BenchEngineError>,
) -> Result<f64, BenchEngineError> {
    let per_round = (count / ROUNDS).max(1);
    let mut fastest = Duration::MAX;
    for round in 0..ROUNDS {
        let started = Instant::now();
        for index in round * per_round..(round + 1) * per_round {
            operation(index)?;
        }
        fastest = fastest.min(started.elapsed());
    }
    Ok(fastest.as_secs_f64() * 1e6 / per_round as f64)
}

/// The fastest round's mean per operation, in microseconds, where every round starts
/// from a fresh state made by `fresh` (untimed) and runs `operation(state, index)` for
/// indexes `0..count / ROUNDS`. Every round then does the same work on a store of the
/// same size: over one store that grows between rounds, later rounds commit more and the
/// fastest round is simply the first, or a later one when the first was disturbed (what
/// made this row bimodal). Returns the last round's state.
fn fastest_fresh_round_us<S>(
    count: u64,
    mut fresh: impl FnMut() -> Result<S, BenchEngineError>,
    mut operation: impl FnMut(&mut S, u64) -> Result<(), BenchEngineError>,
) -> Result<(f64, S), BenchEngineError> {
    let per_round = (count / ROUNDS).max(1);
    let mut fastest = Duration::MAX;
    let mut last = None;
    for _ in 0..ROUNDS {
        let mut state = fresh()?;
        let started = Instant::now();
        for index in 0..per_round {
            operation(&mut state, index)?;
        }
        fastest = fastest.min(started.elapsed());
        last = Some(state);
    }
    let last = last.expect("at least one round");
    Ok((fastest.as_secs_f64() * 1e6 / per_round as f64, last))
}

/// Operations each measurement times (whole rounds).
fn timed_count(count: u64) -> u64 {
    (count / ROUNDS).max(1) * ROUNDS
}

/// The three operations calling the file system directly: (stat, create+write+flush,
/// read) microseconds per operation.
fn measure_direct(settings: &Settings) -> Result<[f64; 3], BenchEngineError> {
    let (write_us, mut filesystem) = fastest_fresh_round_us(
        settings.file_count,
        || fresh_filesystem(settings),
        |filesystem, index| {
            let file = filesystem.create(&file_name(index))?;
            filesystem.write(file, 0, &file_bytes(index))?;
            Ok(filesystem.flush()?)
        },
    )?;
    let name = file_name(0);
    let stat_us = fastest_round_us(settings.operation_count, |_| {
        filesystem.stat_name(&name)?;
        Ok(())
    })?;
    let file = filesystem.open(&name)?;
    let expected = file_bytes(0);
    let mut buffer = IoBuf::zeroed(FILE_BYTES);
    let read_us = fastest_round_us(settings.operation_count, |_| {
        Ok(filesystem.read_into(file, 0, &mut buffer)?)
    })?;
    if buffer[..] != expected[..] {
        return Err(BenchEngineError::DataMismatch(format!(
            "direct read of {name}"
        )));
    }
    Ok([stat_us, write_us, read_us])
}

/// One operation through the engine: microseconds per operation and parks per
/// operation (engine inbox, client replies).
struct ThroughEngine {
    us_per_operation: f64,
    engine_parks_per_operation: f64,
    client_parks_per_operation: f64,
}

fn parks_per_operation(before: WaitCounts, after: WaitCounts, operations: u64) -> f64 {
    (after.parked - before.parked) as f64 / operations as f64
}

/// Times `operation` through `engine` and counts the parks it caused.
fn measure_through_engine(
    engine: &Engine,
    client: &mut EngineClient,
    count: u64,
    mut operation: impl FnMut(&mut EngineClient, u64) -> Result<(), BenchEngineError>,
) -> Result<ThroughEngine, BenchEngineError> {
    let engine_before: EngineCounters = engine.counters();
    let client_before = client.reply_waits();
    let us_per_operation = fastest_round_us(count, |index| operation(client, index))?;
    let operations = timed_count(count);
    Ok(ThroughEngine {
        us_per_operation,
        engine_parks_per_operation: parks_per_operation(
            engine_before.inbox_waits,
            engine.counters().inbox_waits,
            operations,
        ),
        client_parks_per_operation: parks_per_operation(
            client_before,
            client.reply_waits(),
            operations,
        ),
    })
}

fn expect_done(reply: Reply, command: &'static str) -> Result<(), BenchEngineError> {
    match reply {
        Reply::Done | Reply::Written { .. } | Reply::Stat(_) => Ok(()),
        _ => Err(BenchEngineError::UnexpectedReply {
            command,
            reply: "a reply of another kind".to_string(),
        }),
    }
}

/// An engine on a fresh store, one client, and the wait counts at its start.
struct EngineRun {
    engine: Engine,
    client: EngineClient,
    engine_waits_before: WaitCounts,
    client_waits_before: WaitCounts,
}

impl EngineRun {
    fn start(settings: &Settings, config: EngineConfig) -> Result<EngineRun, BenchEngineError> {
        let engine = Engine::start(fresh_filesystem(settings)?, config);
        let client = engine.client(CLIENT_OUTSTANDING_LIMIT);
        Ok(EngineRun {
            engine_waits_before: engine.counters().inbox_waits,
            client_waits_before: client.reply_waits(),
            engine,
            client,
        })
    }

    /// `us_per_operation` with the parks of this run's `operations`.
    fn through(&self, us_per_operation: f64, operations: u64) -> ThroughEngine {
        ThroughEngine {
            us_per_operation,
            engine_parks_per_operation: parks_per_operation(
                self.engine_waits_before,
                self.engine.counters().inbox_waits,
                operations,
            ),
            client_parks_per_operation: parks_per_operation(
                self.client_waits_before,
                self.client.reply_waits(),
                operations,
            ),
        }
    }
}

/// Creates file `index`, writes its 1 KiB and flushes, one command at a time.
fn create_write_flush(client: &mut EngineClient, index: u64) -> Result<(), BenchEngineError> {
    let name = file_name(index);
    expect_done(
        client.call(Command::Create { name: name.clone() })?,
        "create",
    )?;
    let data = file_bytes(index);
    expect_done(
        client.call(Command::Write {
            name,
            offset_bytes: 0,
            data,
        })?,
        "write",
    )?;
    expect_done(client.call(Command::Flush)?, "flush")
}

/// The three operations through an engine with `handoff`: (stat, create+write+flush,
/// read).
fn measure_engine(
    settings: &Settings,
    handoff: Handoff,
) -> Result<[ThroughEngine; 3], BenchEngineError> {
    let config = EngineConfig {
        handoff,
        ..EngineConfig::default()
    };
    let (write_us, run) = fastest_fresh_round_us(
        settings.file_count,
        || EngineRun::start(settings, config),
        |run, index| create_write_flush(&mut run.client, index),
    )?;
    let write = run.through(write_us, timed_count(settings.file_count) / ROUNDS);
    let EngineRun {
        engine, mut client, ..
    } = run;
    let name = file_name(0);
    let stat = measure_through_engine(
        &engine,
        &mut client,
        settings.operation_count,
        |client, _| expect_done(client.call(Command::Stat { name: name.clone() })?, "stat"),
    )?;
    let expected = file_bytes(0);
    let read = measure_through_engine(
        &engine,
        &mut client,
        settings.operation_count,
        |client, _| {
            let command = Command::Read {
                name: name.clone(),
                offset_bytes: 0,
                length_bytes: FILE_BYTES as u64,
            };
            match client.call(command)? {
                Reply::Data(data) if data.bytes() == &expected[..] => Ok(()),
                Reply::Data(_) => Err(BenchEngineError::DataMismatch(format!(
                    "engine read of {name}"
                ))),
                _ => Err(BenchEngineError::UnexpectedReply {
                    command: "read",
                    reply: "a reply of another kind".to_string(),
                }),
            }
        },
    )?;
    drop(client);
    engine.shutdown()?;
    Ok([stat, write, read])
}

const OPERATION_NAMES: [&str; 3] = ["stat", "create+write 1 KiB+flush", "read 1 KiB"];

fn operation_rows(settings: &Settings) -> Result<Vec<OperationRow>, BenchEngineError> {
    let direct = measure_direct(settings)?;
    let counts = [
        settings.operation_count,
        settings.file_count,
        settings.operation_count,
    ];
    let mut rows: Vec<OperationRow> = (0..3)
        .map(|index| OperationRow {
            operation: OPERATION_NAMES[index].to_string(),
            mode: "direct (no engine)".to_string(),
            spin_us: 0,
            operations: timed_count(counts[index]),
            us_per_operation: direct[index],
            over_direct_ratio: 1.0,
            engine_parks_per_operation: None,
            client_parks_per_operation: None,
        })
        .collect();
    for &handoff in &settings.handoffs {
        let measured = measure_engine(settings, handoff)?;
        for (index, through) in measured.into_iter().enumerate() {
            rows.push(OperationRow {
                operation: OPERATION_NAMES[index].to_string(),
                mode: mode_name(handoff),
                spin_us: handoff.spin_us(),
                operations: timed_count(counts[index]),
                us_per_operation: through.us_per_operation,
                over_direct_ratio: through.us_per_operation / direct[index],
                engine_parks_per_operation: Some(through.engine_parks_per_operation),
                client_parks_per_operation: Some(through.client_parks_per_operation),
            });
        }
    }
    rows.sort_by_key(|row| {
        OPERATION_NAMES
            .iter()
            .position(|name| *name == row.operation)
    });
    Ok(rows)
}

/// Several client threads each create, write and flush their own files.
fn group_commit_row(
    settings: &Settings,
    handoff: Handoff,
    grouping: FlushGrouping,
) -> Result<GroupCommitRow, BenchEngineError> {
    let files_per_client = (settings.file_count / settings.client_count as u64).max(1);
    let filesystem = fresh_filesystem(settings)?;
    let sequence_before = filesystem.stats().commit_sequence;
    let config = EngineConfig {
        handoff,
        flush_grouping: grouping,
        ..EngineConfig::default()
    };
    let engine = Engine::start(filesystem, config);
    let clients: Vec<EngineClient> = (0..settings.client_count)
        .map(|_| engine.client(CLIENT_OUTSTANDING_LIMIT))
        .collect();
    let started = Instant::now();
    let threads: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(client_index, mut client)| {
            std::thread::spawn(move || -> Result<(), EngineError> {
                for file_index in 0..files_per_client {
                    let index = client_index as u64 * files_per_client + file_index;
                    let name = file_name(index);
                    client.call(Command::Create { name: name.clone() })?;
                    let data = file_bytes(index);
                    client.call(Command::Write {
                        name,
                        offset_bytes: 0,
                        data,
                    })?;
                    client.call(Command::Flush)?;
                }
                Ok(())
            })
        })
        .collect();
    for thread in threads {
        thread
            .join()
            .map_err(|_| BenchEngineError::ClientPanicked)??;
    }
    let elapsed = started.elapsed();
    let group_commits = engine.counters().group_commits;
    let filesystem = engine.shutdown_without_commit()?;
    let commits = filesystem.stats().commit_sequence - sequence_before;
    let files = files_per_client * settings.client_count as u64;
    let commit_calls = match grouping {
        FlushGrouping::OnePerFlush => files,
        FlushGrouping::UntilNextChange | FlushGrouping::UntilIdle => group_commits,
    };
    Ok(GroupCommitRow {
        mode: mode_name(handoff),
        grouping: format!("{grouping:?}"),
        clients: settings.client_count,
        files_per_client,
        us_per_file: elapsed.as_secs_f64() * 1e6 / files as f64,
        commit_calls_per_flush_ratio: commit_calls as f64 / files as f64,
        commits_with_changes_per_flush_ratio: commits as f64 / files as f64,
    })
}

fn group_commit_rows(settings: &Settings) -> Result<Vec<GroupCommitRow>, BenchEngineError> {
    let groupings = [
        FlushGrouping::OnePerFlush,
        FlushGrouping::UntilNextChange,
        FlushGrouping::UntilIdle,
    ];
    let mut rows = Vec::new();
    for &handoff in &settings.handoffs {
        for grouping in groupings {
            rows.push(group_commit_row(settings, handoff, grouping)?);
        }
    }
    Ok(rows)
}

fn method() -> String {
    format!(
        "fresh RAM-disk store per mode (1 disk, {BLOCK_BYTES} B blocks, written over before \
         mkfs); one client, one command at a time (call); {ROUNDS} rounds per operation, the \
         fastest round's mean per operation (create+write+flush: each round on a fresh store, \
         parks counted over the last round); direct = the file system called on the calling \
         thread; parks = futex sleeps of the engine's inbox and of the client's replies; \
         group commit: client threads each create, write {FILE_BYTES} B and flush their own \
         files, wall time per file, file-system commit calls per flush and commits that \
         wrote changes per flush; commit policy: a fresh store per size and policy holding \
         N committed {FILE_BYTES} B files, the policy set on the file system before the \
         engine starts, then create, write and flush per file through the engine (default \
         hand-off), device blocks and write requests counted below the file system around \
         each flush; mount: the log grown one small file per commit until its region is \
         full, fastest of {MOUNT_REPEATS} mounts, then after one checkpoint"
    )
}

impl Report {
    fn print_tables(&self) {
        let parks = |value: Option<f64>| value.map_or("-".to_string(), |v| fixed(v, 3));
        println!("engine hand-off: per operation, one client, RAM-disk store");
        ColumnTable::new("  ", &self.operations)
            .left("operation", 24, |row| row.operation.clone())
            .left("mode", 22, |row| row.mode.clone())
            .right("us/op", 10, |row| fixed(row.us_per_operation, 2))
            .right("x direct", 9, |row| fixed(row.over_direct_ratio, 1))
            .right("engine parks/op", 15, |row| {
                parks(row.engine_parks_per_operation)
            })
            .right("client parks/op", 16, |row| {
                parks(row.client_parks_per_operation)
            })
            .print();
        println!();
        println!("group commit: create, write 1 KiB, flush per file from several client threads");
        ColumnTable::new("  ", &self.group_commit)
            .left("mode", 22, |row| row.mode.clone())
            .left("grouping", 16, |row| row.grouping.clone())
            .right("clients", 7, |row| row.clients.to_string())
            .right("files/client", 12, |row| row.files_per_client.to_string())
            .right("us/file", 10, |row| fixed(row.us_per_file, 2))
            .right("commit calls/flush", 18, |row| {
                fixed(row.commit_calls_per_flush_ratio, 3)
            })
            .right("commits with changes/flush", 26, |row| {
                fixed(row.commits_with_changes_per_flush_ratio, 3)
            })
            .print();
        println!();
        commit_policy::print_commit_policy_table(&self.commit_policy);
        println!();
        commit_policy::print_mount_table(&self.mount);
        println!();
        println!("method: {}", self.method);
    }
}

/// Runs `flashpipe bench engine`.
pub fn run(arguments: BenchEngineArgs) -> crate::BenchResult {
    let settings = Settings::from_arguments(&arguments)?;
    let progress = crate::progress::Progress::spinner("bench engine: one command at a time");
    let operations = operation_rows(&settings)?;
    progress.set_message("bench engine: group commit");
    let group_commit = group_commit_rows(&settings)?;
    let commit_policy = commit_policy::commit_policy_rows(&settings.commit_policy, |phase| {
        progress.set_message(phase)
    })?;
    let mount =
        commit_policy::mount_rows(&settings.commit_policy, |phase| progress.set_message(phase))?;
    progress.finish();
    let report = Report {
        method: method(),
        quick: settings.quick,
        operations,
        group_commit,
        commit_policy,
        mount,
    };
    if arguments.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        report.print_tables();
    }
    Ok(())
}
