//! The model-based crash test: random operation sequences against the file system and a
//! plain in-memory model (name -> bytes) on a simulated disk that crashes after a random
//! number of requests (unflushed blocks torn at random). After restart, remount and fsck
//! must be clean and the file system must equal the model at the last completed flush
//! (or at the flush in progress at the crash): docs/format.md, "Crash consistency".
//!
//! A second test injects read and write failures instead and keeps operating after them:
//! a failed read or truncate must have changed nothing, a failed write must have kept the
//! file's size (the file is then cut at the write's first block, as the blocks it covered
//! may read as damaged; see `fs_workload`), later operations must work, and a failed
//! flush (which leaves the mount unusable) is followed by a power cut and a remount of
//! the same faulty disk whose files must be the last flush (or the failed one); the run
//! then goes on. At the end power fails and the durable image must hold the last flush.
//!
//! The small file systems keep log regions of a few blocks, so a run crosses log commits
//! and checkpoints (docs/format.md, "Metadata log") and crashes land in both; the tally
//! counts the recoveries that replayed a log.
//!
//! `FLASHPIPE_SEEDS=5000` runs more seeds of both (default 300 crash, 100 fault seeds);
//! `FLASHPIPE_SEED=n` replays one.

use flashpipe_array::{CompletionOrder, StripedDevice};
use flashpipe_device::sim::{FaultConfig, SimDiskConfig, SimWorld};
use flashpipe_device::{run_one, BlockDevice, IoBuf, Operation, RamDisk, SplitMix64};
use flashpipe_fs::{FileIoError, Filesystem, FormatOptions, Structure};
use flashpipe_testkit::formatted::format_fs;
use flashpipe_testkit::fs_workload::{check_clean, check_recovered, FsWorkload, WorkloadShape};
use flashpipe_testkit::seeds::run_seeds;

/// The simulated disks under a run: one disk, or a stripe of two.
struct DiskLayout {
    members: u64,
    stripe_unit_bytes: u64,
    device_block_size: u32,
    device_blocks: u64,
}

impl DiskLayout {
    fn create(&self, world: &SimWorld) {
        for member in 0..self.members {
            let name = format!("sim{member}");
            let config = SimDiskConfig::default_for_tests(
                &name,
                self.device_block_size,
                self.device_blocks / self.members,
            );
            world.add_disk(config).expect("disk");
        }
    }

    fn open(&self, world: &SimWorld) -> Box<dyn BlockDevice> {
        let mut disks: Vec<Box<dyn BlockDevice>> = (0..self.members as usize)
            .map(|index| {
                Box::new(world.open_disk(index).expect("open disk")) as Box<dyn BlockDevice>
            })
            .collect();
        if disks.len() == 1 {
            return disks.remove(0);
        }
        let striped = StripedDevice::new(
            "stripe0",
            disks,
            self.stripe_unit_bytes,
            CompletionOrder::AsCompleted,
            64,
        )
        .expect("stripe");
        Box::new(striped)
    }
}

/// One seeded run: format, random operations until the crash, restart, remount, check.
fn run_seed(seed: u64) -> Tally {
    let mut rng = SplitMix64::new(seed);
    let block_size: u32 = if rng.chance(0.5) { 4096 } else { 8192 };
    let fs_blocks = if rng.chance(0.25) { 48 } else { 400 };
    let device_block_size: u32 = if rng.chance(0.5) { 512 } else { 4096 };
    let device_blocks = fs_blocks * u64::from(block_size / device_block_size);
    let world = SimWorld::new(seed);
    let layout = DiskLayout {
        members: if rng.chance(0.3) { 2 } else { 1 },
        stripe_unit_bytes: u64::from(block_size) << rng.below(2),
        device_block_size,
        device_blocks,
    };
    layout.create(&world);
    let fs = format_fs(layout.open(&world), block_size);
    world.set_crash_survival_probability([0.0, 0.5, 0.5, 1.0][rng.below(4) as usize]);
    let crash_window = if rng.chance(0.8) { 120 } else { 600 };
    let crash_after = 1 + rng.below(crash_window);
    world.crash_after_requests(crash_after);
    let shape = WorkloadShape {
        share_copy_percent: 10,
        ..WorkloadShape::new(u64::from(block_size))
    };
    let mut run = FsWorkload::new(seed, rng, fs, shape);
    let crashed = run.run(80);
    if !crashed {
        run.in_progress = None;
        world.crash_now();
    }
    drop(run.fs);
    world.restart();
    let mut fs = Filesystem::mount(layout.open(&world))
        .unwrap_or_else(|error| panic!("seed {seed}: mount after crash: {error}"));
    let replayed_a_log = fs
        .metadata_blocks()
        .iter()
        .any(|&(structure, _)| structure == Structure::Log);
    check_clean(&mut fs, seed, "after crash");
    let (_, matches_commit) = check_recovered(
        &mut fs,
        &run.committed,
        run.in_progress.as_ref(),
        seed,
        "after the crash",
    );
    if let Ok(file) = fs.create("after-recovery") {
        match fs.write(file, 0, b"still works") {
            Ok(()) | Err(FileIoError::NoSpace { .. }) => {}
            Err(error) => panic!("seed {seed}: write after recovery: {error}"),
        }
    }
    fs.flush()
        .unwrap_or_else(|error| panic!("seed {seed}: flush after recovery: {error}"));
    check_clean(&mut fs, seed, "after recovery");
    Tally {
        runs: 1,
        striped: u64::from(layout.members > 1),
        crashed_in_operation: u64::from(crashed),
        crashed_in_flush: u64::from(crashed && run.in_progress.is_some()),
        recovered_flush_in_progress: u64::from(!matches_commit),
        recovered_by_replaying_a_log: u64::from(replayed_a_log),
        torn_blocks: world
            .last_crash_decisions()
            .iter()
            .flatten()
            .filter(|decision| !decision.1)
            .count() as u64,
    }
}

flashpipe_testkit::tally! {
    /// What a campaign exercised, printed at its end.
    struct Tally {
        runs: u64, striped: u64, crashed_in_operation: u64, crashed_in_flush: u64,
        recovered_flush_in_progress: u64,
        /// Recoveries whose commit was a log record on top of a checkpoint (format v3).
        recovered_by_replaying_a_log: u64,
        torn_blocks: u64,
    }
}

#[test]
fn crash_at_any_point_recovers_the_last_flushed_state() {
    let total: Tally = run_seeds(300, run_seed).into_iter().sum();
    eprintln!("crash campaign: {total:?}");
    assert!(
        total.runs < 50 || total.recovered_by_replaying_a_log * 5 > total.runs,
        "too few recoveries replayed a metadata log: {total:?}"
    );
}

/// The durable image of disk 0 of `world`, copied onto a fault-free RAM disk.
fn durable_copy(world: &SimWorld, block_size_bytes: u32, block_count: u64) -> Box<dyn BlockDevice> {
    let mut disk =
        RamDisk::new("durable-copy", block_size_bytes, block_count, 64).expect("RAM disk");
    for block in 0..block_count {
        let bytes = world.durable_block(0, block);
        run_one(
            &mut disk,
            Operation::Write {
                first_block: block,
                buffer: IoBuf::from_slice(&bytes),
            },
        )
        .expect("copy");
    }
    Box::new(disk)
}

/// Mount attempts on the faulty disk before giving up (each can hit an injected read
/// failure).
const MOUNT_ATTEMPTS: usize = 50;

/// Operations of one fault run.
const FAULT_RUN_STEPS: usize = 160;

/// What one fault run went through.
#[derive(Debug, Default, Clone, Copy)]
struct FaultTally {
    runs: u64,
    device_errors_survived: u64,
    writes_failed_unchanged: u64,
    failed_flushes_remounted: u64,
}

/// Mounts disk 0 of `world` (restarted), retrying mounts an injected read failure fails.
fn mount_faulty_disk(world: &SimWorld, seed: u64) -> Filesystem {
    let mut last_error = String::new();
    for _ in 0..MOUNT_ATTEMPTS {
        let disk = world.open_disk(0).expect("open disk");
        match Filesystem::mount(Box::new(disk)) {
            Ok(fs) => return fs,
            Err(error) => last_error = error.to_string(),
        }
    }
    panic!("seed {seed}: {MOUNT_ATTEMPTS} mounts of the faulty disk failed: {last_error}")
}

/// Cuts power, checks the durable image (on a fault-free copy: fsck clean, the last flush
/// or the flush in progress) and returns the files it holds.
fn power_cut_and_check(
    world: &SimWorld,
    run: &FsWorkload,
    device_blocks: u64,
    when: &str,
) -> flashpipe_testkit::fs_workload::Model {
    let seed = run.seed;
    world.crash_now();
    world.restart();
    let mut copy = Filesystem::mount(durable_copy(world, 512, device_blocks))
        .unwrap_or_else(|error| panic!("seed {seed}: mount {when}: {error}"));
    check_clean(&mut copy, seed, when);
    check_recovered(
        &mut copy,
        &run.committed,
        run.in_progress.as_ref(),
        seed,
        when,
    )
    .0
}

/// One seeded run on a disk that fails reads and writes at random, going on after every
/// failure: failed operations are checked by the workload; a failed flush is followed by
/// a power cut, a check of the durable image and a remount of the faulty disk.
fn run_fault_seed(seed: u64) -> FaultTally {
    let mut rng = SplitMix64::new(seed ^ 0xFA17_5EED);
    let world = SimWorld::new(seed);
    let device_blocks = 400 * 8;
    let mut config = SimDiskConfig::default_for_tests("faulty0", 512, device_blocks);
    config.faults = FaultConfig {
        read_failure_probability: 0.01,
        write_failure_probability: 0.01,
    };
    let disk = world.add_disk(config).expect("disk");
    let mut tally = FaultTally {
        runs: 1,
        ..FaultTally::default()
    };
    let Ok(fs) = Filesystem::format(Box::new(disk), &FormatOptions::default()) else {
        return tally;
    };
    let shape = WorkloadShape {
        continue_after_device_errors: true,
        ..WorkloadShape::new(4096)
    };
    let mut run = FsWorkload::new(seed, SplitMix64::new(rng.next_u64()), fs, shape);
    for _ in 0..FAULT_RUN_STEPS {
        if !run.run(1) {
            continue;
        }
        tally.failed_flushes_remounted += 1;
        let recovered = power_cut_and_check(
            &world,
            &run,
            device_blocks,
            "after a failed flush or a write that left the mount unusable",
        );
        let fs = mount_faulty_disk(&world, seed);
        run.resume_with(fs, recovered);
    }
    tally.device_errors_survived = run.device_errors_survived;
    tally.writes_failed_unchanged = run.writes_failed_unchanged;
    power_cut_and_check(&world, &run, device_blocks, "at the end of a fault run");
    tally
}

#[test]
fn device_faults_never_damage_the_last_flushed_state() {
    let mut total = FaultTally::default();
    let mut runs_with_survived_errors = 0;
    for tally in run_seeds(100, run_fault_seed) {
        total.runs += tally.runs;
        total.device_errors_survived += tally.device_errors_survived;
        total.failed_flushes_remounted += tally.failed_flushes_remounted;
        total.writes_failed_unchanged += tally.writes_failed_unchanged;
        if tally.device_errors_survived + tally.failed_flushes_remounted > 0 {
            runs_with_survived_errors += 1;
        }
    }
    eprintln!(
        "fault campaign: {total:?}; {runs_with_survived_errors} runs went on after an injected device error"
    );
    assert!(
        total.runs < 20 || runs_with_survived_errors * 4 > total.runs,
        "faults were injected too rarely"
    );
}
