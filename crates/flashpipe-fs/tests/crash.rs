//! The model-based crash test: random operation sequences against the file system and a
//! plain in-memory model (name -> bytes) on a simulated disk that crashes after a random
//! number of requests (unflushed blocks torn at random). After restart, remount and fsck
//! must be clean and the file system must equal the model at the last completed flush
//! (or at the flush in progress at the crash): docs/format.md, "Crash consistency".
//!
//! A second test injects read and write failures instead: the first device error ends the
//! run, power fails, and the durable image must hold the last flush (or the failed one).
//!
//! `FLASHPIPE_SEEDS=5000` runs more seeds of both (default 300 crash, 100 fault seeds);
//! `FLASHPIPE_SEED=n` replays one.

use std::collections::BTreeMap;

use flashpipe_array::{CompletionOrder, StripedDevice};
use flashpipe_device::sim::{FaultConfig, SimDiskConfig, SimWorld};
use flashpipe_device::{run_one, BlockDevice, DeviceError, IoBuf, Operation, RamDisk, SplitMix64};
use flashpipe_fs::{is_crash, FileIoError, Filesystem, FlushError, FormatOptions, NamespaceError};

type Model = BTreeMap<String, Vec<u8>>;

const NAMES: [&str; 6] = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "a-much-longer-name-for-a-file.bin",
    "z",
];

/// An error from the file system under test: a crash ends the run, anything else is
/// compared with what the model expects.
enum Outcome {
    Done,
    Crashed,
}

fn namespace_outcome(
    result: Result<(), NamespaceError>,
    expected: Result<(), NamespaceError>,
    seed: u64,
) -> Outcome {
    match (result, expected) {
        (Ok(()), Ok(())) => Outcome::Done,
        (Err(NamespaceError::NoSpace { .. }), Ok(())) => Outcome::Done,
        (Err(error), Err(expected)) if error == expected => Outcome::Done,
        (result, expected) => panic!("seed {seed}: got {result:?}, the model expects {expected:?}"),
    }
}

struct Run {
    seed: u64,
    rng: SplitMix64,
    fs: Filesystem,
    model: Model,
    committed: Model,
    in_progress: Option<Model>,
    block_size: u64,
    stop_on_any_device_error: bool,
}

impl Run {
    /// A crash ends the run; so does any device error when faults are injected.
    fn ends_run(&self, error: &DeviceError) -> bool {
        is_crash(error) || self.stop_on_any_device_error
    }

    fn pick_name(&mut self) -> &'static str {
        NAMES[self.rng.below(NAMES.len() as u64) as usize]
    }

    fn step(&mut self) -> Outcome {
        match self.rng.below(100) {
            0..=14 => self.create(),
            15..=49 => self.write(),
            50..=59 => self.truncate(),
            60..=66 => self.rename(),
            67..=74 => self.delete(),
            75..=84 => self.read(),
            _ => self.flush(),
        }
    }

    fn create(&mut self) -> Outcome {
        let name = self.pick_name();
        let expected = if self.model.contains_key(name) {
            Err(NamespaceError::Exists { name: name.into() })
        } else {
            Ok(())
        };
        let result = self.fs.create(name).map(|_| ());
        if result.is_ok() {
            self.model.insert(name.to_string(), Vec::new());
        }
        namespace_outcome(result, expected, self.seed)
    }

    fn write(&mut self) -> Outcome {
        let name = self.pick_name();
        let Ok(file) = self.fs.open(name) else {
            assert!(
                !self.model.contains_key(name),
                "seed {}: open {name} failed",
                self.seed
            );
            return Outcome::Done;
        };
        let span = if self.rng.chance(0.1) { 30 } else { 3 };
        let offset = self.rng.below(20 * self.block_size);
        let length = 1 + self.rng.below(span * self.block_size) as usize;
        let fill = self.rng.next_u64();
        let bytes: Vec<u8> = (0..length)
            .map(|index| (fill >> (index % 8 * 8)) as u8 ^ index as u8)
            .collect();
        match self.fs.write(file, offset, &bytes) {
            Ok(()) => {
                let content = self.model.get_mut(name).expect("model has the file");
                let end = offset as usize + length;
                if content.len() < end {
                    content.resize(end, 0);
                }
                content[offset as usize..end].copy_from_slice(&bytes);
                Outcome::Done
            }
            Err(FileIoError::NoSpace { .. }) => Outcome::Done,
            Err(FileIoError::FileTooLarge {
                limit_size_bytes, ..
            }) => {
                let end = offset + length as u64;
                assert!(
                    end > limit_size_bytes,
                    "seed {}: bogus FileTooLarge",
                    self.seed
                );
                Outcome::Done
            }
            Err(FileIoError::Device(error)) if self.ends_run(&error) => Outcome::Crashed,
            Err(error) => panic!(
                "seed {}: write {name} {offset}+{length}: {error}",
                self.seed
            ),
        }
    }

    fn truncate(&mut self) -> Outcome {
        let name = self.pick_name();
        let Ok(file) = self.fs.open(name) else {
            return Outcome::Done;
        };
        let size = self.rng.below(25 * self.block_size);
        match self.fs.truncate(file, size) {
            Ok(()) => {
                self.model
                    .get_mut(name)
                    .expect("model has the file")
                    .resize(size as usize, 0);
                Outcome::Done
            }
            Err(FileIoError::NoSpace { .. }) => Outcome::Done,
            Err(FileIoError::Device(error)) if self.ends_run(&error) => Outcome::Crashed,
            Err(error) => panic!("seed {}: truncate {name} to {size}: {error}", self.seed),
        }
    }

    fn rename(&mut self) -> Outcome {
        let from = self.pick_name();
        let to = self.pick_name();
        let expected = if !self.model.contains_key(from) {
            Err(NamespaceError::NotFound { name: from.into() })
        } else if from != to && self.model.contains_key(to) {
            Err(NamespaceError::Exists { name: to.into() })
        } else {
            Ok(())
        };
        let result = self.fs.rename(from, to);
        if result.is_ok() {
            let content = self.model.remove(from).expect("model has the file");
            self.model.insert(to.to_string(), content);
        }
        namespace_outcome(result, expected, self.seed)
    }

    fn delete(&mut self) -> Outcome {
        let name = self.pick_name();
        let expected = if self.model.contains_key(name) {
            Ok(())
        } else {
            Err(NamespaceError::NotFound { name: name.into() })
        };
        let result = self.fs.delete(name);
        if result.is_ok() {
            self.model.remove(name);
        }
        namespace_outcome(result, expected, self.seed)
    }

    fn read(&mut self) -> Outcome {
        let name = self.pick_name();
        let Some(content) = self.model.get(name).cloned() else {
            return Outcome::Done;
        };
        let file = self
            .fs
            .open(name)
            .unwrap_or_else(|error| panic!("seed {}: open {name}: {error}", self.seed));
        let offset = self.rng.below(content.len() as u64 + 1);
        let length = self.rng.below(content.len() as u64 - offset + 1);
        match self.fs.read(file, offset, length) {
            Ok(bytes) => {
                assert!(
                    bytes[..] == content[offset as usize..(offset + length) as usize],
                    "seed {}: read {name} {offset}+{length} differs from the model",
                    self.seed
                );
                Outcome::Done
            }
            Err(FileIoError::Device(error)) if self.ends_run(&error) => Outcome::Crashed,
            Err(error) => panic!("seed {}: read {name}: {error}", self.seed),
        }
    }

    fn flush(&mut self) -> Outcome {
        self.in_progress = Some(self.model.clone());
        match self.fs.flush() {
            Ok(()) => {
                self.committed = self.in_progress.take().expect("set above");
                Outcome::Done
            }
            Err(FlushError::Device(error)) if self.ends_run(&error) => Outcome::Crashed,
            Err(error) => panic!("seed {}: flush: {error}", self.seed),
        }
    }
}

fn contents(fs: &mut Filesystem, seed: u64) -> Model {
    let mut found = Model::new();
    for stat in fs.list() {
        let bytes = fs
            .read(stat.file_id, 0, stat.size_bytes)
            .unwrap_or_else(|error| panic!("seed {seed}: read {}: {error}", stat.name));
        found.insert(stat.name, bytes.to_vec());
    }
    found
}

fn describe(model: &Model) -> Vec<(String, usize)> {
    model
        .iter()
        .map(|(name, bytes)| (name.clone(), bytes.len()))
        .collect()
}

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
    let fs = Filesystem::format(
        layout.open(&world),
        &FormatOptions {
            fs_block_size_bytes: block_size,
        },
    )
    .expect("mkfs");
    world.set_crash_survival_probability([0.0, 0.5, 0.5, 1.0][rng.below(4) as usize]);
    let crash_window = if rng.chance(0.8) { 120 } else { 600 };
    let crash_after = 1 + rng.below(crash_window);
    world.crash_after_requests(crash_after);
    let mut run = Run {
        seed,
        rng,
        fs,
        model: Model::new(),
        committed: Model::new(),
        in_progress: None,
        block_size: u64::from(block_size),
        stop_on_any_device_error: false,
    };
    let mut crashed = false;
    for _ in 0..80 {
        if let Outcome::Crashed = run.step() {
            crashed = true;
            break;
        }
        run.in_progress = None;
    }
    if !crashed {
        run.in_progress = None;
        world.crash_now();
    }
    drop(run.fs);
    world.restart();
    let mut fs = Filesystem::mount(layout.open(&world))
        .unwrap_or_else(|error| panic!("seed {seed}: mount after crash: {error}"));
    let report = fs
        .check()
        .unwrap_or_else(|error| panic!("seed {seed}: fsck: {error}"));
    assert!(
        report.is_clean(),
        "seed {seed}: fsck after crash: {:#?}",
        report.findings
    );
    let found = contents(&mut fs, seed);
    let matches_commit = found == run.committed;
    let matches_in_progress = run
        .in_progress
        .as_ref()
        .is_some_and(|model| &found == model);
    assert!(
        matches_commit || matches_in_progress,
        "seed {seed}: after the crash the files are {:?}; the last flush had {:?}; the flush in progress {:?}",
        describe(&found),
        describe(&run.committed),
        run.in_progress.as_ref().map(describe)
    );
    if let Ok(file) = fs.create("after-recovery") {
        match fs.write(file, 0, b"still works") {
            Ok(()) | Err(FileIoError::NoSpace { .. }) => {}
            Err(error) => panic!("seed {seed}: write after recovery: {error}"),
        }
    }
    fs.flush()
        .unwrap_or_else(|error| panic!("seed {seed}: flush after recovery: {error}"));
    let report = fs
        .check()
        .unwrap_or_else(|error| panic!("seed {seed}: fsck: {error}"));
    assert!(
        report.is_clean(),
        "seed {seed}: fsck after recovery: {:#?}",
        report.findings
    );
    Tally {
        runs: 1,
        striped: u64::from(layout.members > 1),
        crashed_in_operation: u64::from(crashed),
        crashed_in_flush: u64::from(crashed && run.in_progress.is_some()),
        recovered_flush_in_progress: u64::from(!matches_commit),
        torn_blocks: world
            .last_crash_decisions()
            .iter()
            .flatten()
            .filter(|decision| !decision.1)
            .count() as u64,
    }
}

/// What a campaign exercised, printed at its end.
#[derive(Debug, Default)]
struct Tally {
    runs: u64,
    striped: u64,
    crashed_in_operation: u64,
    crashed_in_flush: u64,
    recovered_flush_in_progress: u64,
    torn_blocks: u64,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.runs += other.runs;
        self.striped += other.striped;
        self.crashed_in_operation += other.crashed_in_operation;
        self.crashed_in_flush += other.crashed_in_flush;
        self.recovered_flush_in_progress += other.recovered_flush_in_progress;
        self.torn_blocks += other.torn_blocks;
    }
}

fn seeds() -> Vec<u64> {
    if let Ok(seed) = std::env::var("FLASHPIPE_SEED") {
        return vec![seed.trim().parse().expect("FLASHPIPE_SEED is a number")];
    }
    let count: u64 = std::env::var("FLASHPIPE_SEEDS")
        .ok()
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(300);
    (0..count).collect()
}

#[test]
fn crash_at_any_point_recovers_the_last_flushed_state() {
    let mut total = Tally::default();
    for seed in seeds() {
        match std::panic::catch_unwind(|| run_seed(seed)) {
            Ok(tally) => total.add(&tally),
            Err(panic) => {
                eprintln!("seed {seed} failed; replay with FLASHPIPE_SEED={seed}");
                std::panic::resume_unwind(panic);
            }
        }
    }
    eprintln!("crash campaign: {total:?}");
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

/// One seeded run on a disk that fails reads and writes at random: the first device
/// error ends it, then power fails; the durable image must hold the last flush (or the
/// flush that failed) and nothing damaged.
fn run_fault_seed(seed: u64) -> bool {
    let mut rng = SplitMix64::new(seed ^ 0xFA17_5EED);
    let world = SimWorld::new(seed);
    let device_blocks = 400 * 8;
    let mut config = SimDiskConfig::default_for_tests("faulty0", 512, device_blocks);
    config.faults = FaultConfig {
        read_failure_probability: 0.01,
        write_failure_probability: 0.01,
    };
    let disk = world.add_disk(config).expect("disk");
    let Ok(fs) = Filesystem::format(Box::new(disk), &FormatOptions::default()) else {
        return true;
    };
    let mut run = Run {
        seed,
        rng: SplitMix64::new(rng.next_u64()),
        fs,
        model: Model::new(),
        committed: Model::new(),
        in_progress: None,
        block_size: 4096,
        stop_on_any_device_error: true,
    };
    let mut faulted = false;
    for _ in 0..80 {
        if let Outcome::Crashed = run.step() {
            faulted = true;
            break;
        }
        run.in_progress = None;
    }
    drop(run.fs);
    world.crash_now();
    world.restart();
    let mut fs = Filesystem::mount(durable_copy(&world, 512, device_blocks))
        .unwrap_or_else(|error| panic!("seed {seed}: mount after a fault: {error}"));
    let report = fs
        .check()
        .unwrap_or_else(|error| panic!("seed {seed}: fsck: {error}"));
    assert!(
        report.is_clean(),
        "seed {seed}: fsck after a fault: {:#?}",
        report.findings
    );
    let found = contents(&mut fs, seed);
    let matches_in_progress = run
        .in_progress
        .as_ref()
        .is_some_and(|model| &found == model);
    assert!(
        found == run.committed || matches_in_progress,
        "seed {seed}: after a fault the files are {:?}; the last flush had {:?}",
        describe(&found),
        describe(&run.committed)
    );
    faulted
}

#[test]
fn device_faults_never_damage_the_last_flushed_state() {
    let seeds = seeds();
    let fault_seeds =
        if std::env::var("FLASHPIPE_SEEDS").is_ok() || std::env::var("FLASHPIPE_SEED").is_ok() {
            seeds
        } else {
            (0..100).collect()
        };
    let runs = fault_seeds.len();
    let mut faulted = 0;
    for seed in fault_seeds {
        match std::panic::catch_unwind(|| run_fault_seed(seed)) {
            Ok(hit_a_fault) => faulted += usize::from(hit_a_fault),
            Err(panic) => {
                eprintln!("fault seed {seed} failed; replay with FLASHPIPE_SEED={seed}");
                std::panic::resume_unwind(panic);
            }
        }
    }
    eprintln!("fault campaign: {faulted} of {runs} runs ended by an injected device error");
    assert!(
        runs < 20 || faulted * 4 > runs,
        "faults were injected too rarely"
    );
}
