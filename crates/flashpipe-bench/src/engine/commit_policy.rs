//! The commit-policy part of `flashpipe bench engine` (issue #13, item 2): what a small
//! commit costs when the store already holds many files, with the metadata log
//! ([`CommitPolicy::LogWhenItFits`]) against a full checkpoint at every commit
//! ([`CommitPolicy::CheckpointEveryCommit`], the way format version 2 committed), and
//! what a mount costs after a long log against after a checkpoint.
//!
//! Per store size `N` and policy: a fresh RAM-disk store under a [`CountingDevice`],
//! `N` files of 1 KiB created and committed directly (one checkpoint), the policy set on
//! the `Filesystem`, the engine started on it (the engine does not choose the policy);
//! then one client creates, writes 1 KiB and flushes one new file at a time. The row
//! gives the fastest round's mean time per file and the device blocks and write requests
//! each flush wrote (counted below the file system, so everything it writes counts: log
//! records, tables, map, free list, indirect chains, super block), their largest value
//! (a log commit that found the region full writes a checkpoint), and how many of the
//! flushes were checkpoints.
//!
//! The mount part, per `N`: the log is grown to one record short of the region (one
//! small file per commit), the file system unmounted and mounted again (the mount
//! replays every record); then one more file is committed as a checkpoint and the mount
//! timed again (nothing to replay). Fastest of [`MOUNT_REPEATS`] mounts each.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flashpipe_device::{
    BlockDevice, Clock, Completion, DeviceError, DeviceInfo, Operation, RamDisk, Rejected, Request,
};
use flashpipe_engine::{Command, Engine, EngineConfig};
use flashpipe_fs::{CommitPolicy, Filesystem, FormatOptions};
use serde::Serialize;

use super::{
    expect_done, fastest_round_us, file_bytes, timed_count, write_zeros_everywhere,
    BenchEngineError, BLOCK_BYTES, CLIENT_OUTSTANDING_LIMIT, QUEUE_DEPTH,
};
use crate::column_table::{fixed, ColumnTable};

/// Store sizes (files already there) of a default run.
pub const DEFAULT_STORE_FILE_COUNTS: [u64; 4] = [0, 1_000, 10_000, 50_000];
/// Store sizes of a `--quick` run.
pub const QUICK_STORE_FILE_COUNTS: [u64; 3] = [0, 100, 1_000];
/// Most files a store of this part may hold before the measurement.
pub const MOST_STORE_FILE_COUNT: u64 = 200_000;
/// Files created, written and flushed per row in a default run.
const DEFAULT_MEASURED_FILE_COUNT: u64 = 500;
/// Files per row in a `--quick` run.
const QUICK_MEASURED_FILE_COUNT: u64 = 10;
/// Mounts timed per image; the fastest counts.
pub const MOUNT_REPEATS: u32 = 5;
/// RAM-disk blocks beyond two per file: room for the tables of two checkpoints and the
/// log region.
const SPARE_BLOCKS: u64 = 16_384;
/// Log records the mount part appends at most (a bound on its run time).
const MOST_MOUNT_LOG_RECORDS: u64 = 20_000;

/// Write counts below the file system, shared with the bench.
#[derive(Debug, Default)]
pub struct WriteCounts {
    written_bytes: AtomicU64,
    write_requests: AtomicU64,
}

impl WriteCounts {
    /// (bytes written, write requests) so far.
    fn snapshot(&self) -> (u64, u64) {
        (
            self.written_bytes.load(Ordering::Relaxed),
            self.write_requests.load(Ordering::Relaxed),
        )
    }
}

/// A block device wrapper that counts every write request and its bytes.
pub struct CountingDevice {
    inner: Box<dyn BlockDevice>,
    counts: Arc<WriteCounts>,
}

impl CountingDevice {
    /// Wraps `inner`; the counts are read through the returned handle.
    pub fn new(inner: Box<dyn BlockDevice>) -> (CountingDevice, Arc<WriteCounts>) {
        let counts = Arc::new(WriteCounts::default());
        let device = CountingDevice {
            inner,
            counts: Arc::clone(&counts),
        };
        (device, counts)
    }
}

impl BlockDevice for CountingDevice {
    fn info(&self) -> &DeviceInfo {
        self.inner.info()
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.inner.clock()
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        if let Operation::Write { buffer, .. } = &request.operation {
            self.counts
                .written_bytes
                .fetch_add(buffer.len() as u64, Ordering::Relaxed);
            self.counts.write_requests.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.submit(request)
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        self.inner.poll_completions(completions)
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        self.inner.wait_completions(completions)
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
}

/// One store size under one policy.
#[derive(Debug, Clone, Serialize)]
pub struct CommitPolicyRow {
    /// Files in the store before the measurement.
    pub store_files: u64,
    /// `LogWhenItFits` or `CheckpointEveryCommit`.
    pub policy: String,
    /// Files created, written (1 KiB) and flushed through the engine.
    pub measured_files: u64,
    /// Fastest round's mean time per create + write + flush.
    pub us_per_file: f64,
    /// Device blocks written per flush (the metadata commit; data blocks are written
    /// before it), mean over every measured flush.
    pub device_blocks_per_flush: f64,
    /// The most device blocks one flush wrote.
    pub device_blocks_per_flush_max: u64,
    /// Device write requests per flush, mean.
    pub write_requests_per_flush: f64,
    /// Flushes that wrote a checkpoint (every one under `CheckpointEveryCommit`; under
    /// `LogWhenItFits` those that found the log region full, inferred from the records
    /// left in the log and the region's size: each measured commit is a one-block record).
    pub checkpoints: u64,
    /// The log region's blocks after the measurement (records it holds before the next
    /// checkpoint).
    pub log_region_blocks: u64,
    /// us_per_file over the same store size's `LogWhenItFits` row.
    pub over_log_ratio: f64,
}

/// Mount time after a long log and after a checkpoint, one store size.
#[derive(Debug, Clone, Serialize)]
pub struct MountRow {
    /// Files in the store (at the first mount).
    pub store_files: u64,
    /// Log records the first mount replays.
    pub log_records_replayed: u64,
    /// Log blocks the first mount reads.
    pub log_blocks_replayed: u64,
    /// The log region's blocks.
    pub log_region_blocks: u64,
    /// Fastest mount with that log.
    pub mount_after_log_us: f64,
    /// Fastest mount right after a checkpoint (one file more, nothing to replay).
    pub mount_after_checkpoint_us: f64,
    /// mount_after_log_us over mount_after_checkpoint_us.
    pub log_over_checkpoint_ratio: f64,
}

/// The commit-policy part's settings.
#[derive(Debug, Clone)]
pub struct CommitPolicySettings {
    /// Store sizes measured.
    pub store_file_counts: Vec<u64>,
    /// Files measured per row.
    pub measured_file_count: u64,
}

impl CommitPolicySettings {
    /// The settings of a run: `store_files` when given, else the defaults.
    pub fn new(store_files: &[u64], quick: bool) -> Result<CommitPolicySettings, BenchEngineError> {
        let store_file_counts = match (store_files.is_empty(), quick) {
            (false, _) => store_files.to_vec(),
            (true, true) => QUICK_STORE_FILE_COUNTS.to_vec(),
            (true, false) => DEFAULT_STORE_FILE_COUNTS.to_vec(),
        };
        if let Some(&count) = store_file_counts
            .iter()
            .find(|&&count| count > MOST_STORE_FILE_COUNT)
        {
            return Err(BenchEngineError::BadArgument(crate::error::invalid_input(
                format!("--store-files {count}: at most {MOST_STORE_FILE_COUNT} files"),
            )));
        }
        Ok(CommitPolicySettings {
            store_file_counts,
            measured_file_count: match quick {
                true => QUICK_MEASURED_FILE_COUNT,
                false => DEFAULT_MEASURED_FILE_COUNT,
            },
        })
    }
}

fn policy_name(policy: CommitPolicy) -> String {
    format!("{policy:?}")
}

fn prefilled_name(index: u64) -> String {
    format!("stored-{index:07}")
}

fn measured_name(index: u64) -> String {
    format!("new-{index:07}")
}

/// A fresh file system holding `store_files` committed 1 KiB files, on a counting RAM
/// disk large enough for them, `extra_files` more and two checkpoints.
fn prefilled_filesystem(
    store_files: u64,
    extra_files: u64,
) -> Result<(Filesystem, Arc<WriteCounts>), BenchEngineError> {
    let block_count = 2 * (store_files + extra_files) + SPARE_BLOCKS;
    let mut disk = RamDisk::new("ram0", BLOCK_BYTES, block_count, QUEUE_DEPTH)?;
    write_zeros_everywhere(&mut disk)?;
    let (device, counts) = CountingDevice::new(Box::new(disk));
    let options = FormatOptions {
        fs_block_size_bytes: BLOCK_BYTES,
        store_identity: None,
    };
    let mut filesystem = Filesystem::format(Box::new(device), &options)?;
    for index in 0..store_files {
        let file = filesystem.create(&prefilled_name(index))?;
        filesystem.write(file, 0, &file_bytes(index))?;
    }
    filesystem.flush_checkpoint()?;
    Ok((filesystem, counts))
}

/// What the measured flushes wrote.
#[derive(Default)]
struct FlushWrites {
    blocks: u64,
    blocks_max: u64,
    requests: u64,
    flushes: u64,
    checkpoints: u64,
}

fn measure_row(
    store_files: u64,
    policy: CommitPolicy,
    measured_file_count: u64,
) -> Result<CommitPolicyRow, BenchEngineError> {
    let (mut filesystem, counts) = prefilled_filesystem(store_files, measured_file_count)?;
    filesystem.set_commit_policy(policy);
    let engine = Engine::start(filesystem, EngineConfig::default());
    let mut client = engine.client(CLIENT_OUTSTANDING_LIMIT);
    let mut writes = FlushWrites::default();
    let us_per_file = fastest_round_us(measured_file_count, |index| {
        let name = measured_name(index);
        expect_done(
            client.call(Command::Create { name: name.clone() })?,
            "create",
        )?;
        expect_done(
            client.call(Command::Write {
                name,
                offset_bytes: 0,
                data: file_bytes(index),
            })?,
            "write",
        )?;
        let (bytes_before, requests_before) = counts.snapshot();
        expect_done(client.call(Command::Flush)?, "flush")?;
        let (bytes_after, requests_after) = counts.snapshot();
        let blocks = (bytes_after - bytes_before) / u64::from(BLOCK_BYTES);
        writes.blocks += blocks;
        writes.blocks_max = writes.blocks_max.max(blocks);
        writes.requests += requests_after - requests_before;
        writes.flushes += 1;
        Ok(())
    })?;
    drop(client);
    let filesystem = engine.shutdown()?;
    let fill = filesystem.metadata_log_fill();
    let log_records_written = writes.flushes;
    writes.checkpoints = match policy {
        CommitPolicy::CheckpointEveryCommit => writes.flushes,
        CommitPolicy::LogWhenItFits => checkpoints_among(
            log_records_written,
            fill.region_block_count,
            fill.log_record_count,
        ),
    };
    assert!(
        writes.flushes == timed_count(measured_file_count),
        "every measured file flushed once"
    );
    Ok(CommitPolicyRow {
        store_files,
        policy: policy_name(policy),
        measured_files: writes.flushes,
        us_per_file,
        device_blocks_per_flush: writes.blocks as f64 / writes.flushes as f64,
        device_blocks_per_flush_max: writes.blocks_max,
        write_requests_per_flush: writes.requests as f64 / writes.flushes as f64,
        checkpoints: writes.checkpoints,
        log_region_blocks: fill.region_block_count,
        over_log_ratio: 1.0,
    })
}

/// Checkpoints among `commits` one-record log commits after a checkpoint, given the log
/// left at the end: every commit beyond the records still in the log started or
/// followed a checkpoint, one per full region.
fn checkpoints_among(commits: u64, region_blocks: u64, records_left: u64) -> u64 {
    let flushed_away = commits.saturating_sub(records_left);
    match flushed_away {
        0 => 0,
        _ => flushed_away.div_ceil(region_blocks.max(1) + 1),
    }
}

/// Every store size under both policies.
pub fn commit_policy_rows(
    settings: &CommitPolicySettings,
    note: impl FnMut(&str),
) -> Result<Vec<CommitPolicyRow>, BenchEngineError> {
    per_store_size(settings, note, "commit policies", |store_files| {
        let measure = |policy| measure_row(store_files, policy, settings.measured_file_count);
        let log = measure(CommitPolicy::LogWhenItFits)?;
        let mut checkpoint = measure(CommitPolicy::CheckpointEveryCommit)?;
        checkpoint.over_log_ratio = checkpoint.us_per_file / log.us_per_file;
        Ok(vec![log, checkpoint])
    })
}

/// The rows `rows_of` gives for each store size of `settings`, in order; `note` hears
/// `phase` and the size before each.
fn per_store_size<T>(
    settings: &CommitPolicySettings,
    mut note: impl FnMut(&str),
    phase: &str,
    mut rows_of: impl FnMut(u64) -> Result<Vec<T>, BenchEngineError>,
) -> Result<Vec<T>, BenchEngineError> {
    let mut rows = Vec::new();
    for &store_files in &settings.store_file_counts {
        note(&format!("bench engine: {phase}, {store_files} files"));
        rows.extend(rows_of(store_files)?);
    }
    Ok(rows)
}

/// The fastest of [`MOUNT_REPEATS`] mounts of `device`'s image, and the last mount.
fn fastest_mount(
    mut device: Box<dyn BlockDevice>,
) -> Result<(Duration, Filesystem), BenchEngineError> {
    let mut fastest = Duration::MAX;
    for _ in 1..MOUNT_REPEATS {
        let started = Instant::now();
        let filesystem = Filesystem::mount(device)?;
        fastest = fastest.min(started.elapsed());
        device = filesystem.unmount()?;
    }
    let started = Instant::now();
    let filesystem = Filesystem::mount(device)?;
    Ok((fastest.min(started.elapsed()), filesystem))
}

/// Appends one small file per commit until one more record would not fit the region.
fn grow_log_to_region(filesystem: &mut Filesystem) -> Result<u64, BenchEngineError> {
    let mut added = 0;
    loop {
        let fill = filesystem.metadata_log_fill();
        let room = fill.region_block_count - fill.log_block_count;
        if room <= 1 || added >= MOST_MOUNT_LOG_RECORDS {
            return Ok(added);
        }
        let file = filesystem.create(&measured_name(added))?;
        filesystem.write(file, 0, &file_bytes(added))?;
        filesystem.flush()?;
        added += 1;
    }
}

fn mount_row(store_files: u64) -> Result<MountRow, BenchEngineError> {
    let region_bound = (store_files / 8).clamp(64, MOST_MOUNT_LOG_RECORDS);
    let (mut filesystem, _counts) = prefilled_filesystem(store_files, region_bound + 1)?;
    grow_log_to_region(&mut filesystem)?;
    let fill = filesystem.metadata_log_fill();
    let (after_log, mut filesystem) = fastest_mount(filesystem.unmount()?)?;
    let replayed = filesystem.metadata_log_fill();
    assert_eq!(replayed, fill, "the mount replays the log it was given");
    let file = filesystem.create("after-the-log")?;
    filesystem.write(file, 0, &file_bytes(0))?;
    filesystem.flush_checkpoint()?;
    let (after_checkpoint, _) = fastest_mount(filesystem.unmount()?)?;
    let mount_after_log_us = after_log.as_secs_f64() * 1e6;
    let mount_after_checkpoint_us = after_checkpoint.as_secs_f64() * 1e6;
    Ok(MountRow {
        store_files,
        log_records_replayed: fill.log_record_count,
        log_blocks_replayed: fill.log_block_count,
        log_region_blocks: fill.region_block_count,
        mount_after_log_us,
        mount_after_checkpoint_us,
        log_over_checkpoint_ratio: mount_after_log_us / mount_after_checkpoint_us,
    })
}

/// Mount after a long log and after a checkpoint, every store size.
pub fn mount_rows(
    settings: &CommitPolicySettings,
    note: impl FnMut(&str),
) -> Result<Vec<MountRow>, BenchEngineError> {
    per_store_size(settings, note, "mount after a log", |store_files| {
        Ok(vec![mount_row(store_files)?])
    })
}

/// Prints the commit-policy table.
pub fn print_commit_policy_table(rows: &[CommitPolicyRow]) {
    println!("commit policy: create, write 1 KiB, flush per file through the engine, store already holding N files");
    ColumnTable::new("  ", rows)
        .right("store files", 11, |row| row.store_files.to_string())
        .left("policy", 21, |row| row.policy.clone())
        .right("files", 6, |row| row.measured_files.to_string())
        .right("us/file", 10, |row| fixed(row.us_per_file, 2))
        .right("x log", 7, |row| fixed(row.over_log_ratio, 2))
        .right("blocks/flush", 12, |row| {
            fixed(row.device_blocks_per_flush, 2)
        })
        .right("max", 6, |row| row.device_blocks_per_flush_max.to_string())
        .right("requests/flush", 14, |row| {
            fixed(row.write_requests_per_flush, 2)
        })
        .right("checkpoints", 11, |row| row.checkpoints.to_string())
        .right("log region", 10, |row| row.log_region_blocks.to_string())
        .print();
}

/// Prints the mount table.
pub fn print_mount_table(rows: &[MountRow]) {
    println!("mount: after a log grown to its region's size, and after a checkpoint");
    ColumnTable::new("  ", rows)
        .right("store files", 11, |row| row.store_files.to_string())
        .right("log records", 11, |row| {
            row.log_records_replayed.to_string()
        })
        .right("log blocks", 10, |row| row.log_blocks_replayed.to_string())
        .right("log region", 10, |row| row.log_region_blocks.to_string())
        .right("mount after log us", 18, |row| {
            fixed(row.mount_after_log_us, 0)
        })
        .right("after checkpoint us", 19, |row| {
            fixed(row.mount_after_checkpoint_us, 0)
        })
        .right("x checkpoint", 12, |row| {
            fixed(row.log_over_checkpoint_ratio, 2)
        })
        .print();
}
