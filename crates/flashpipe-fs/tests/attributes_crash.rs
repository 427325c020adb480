//! The model-based crash test of file attributes (format version 6): random sequences of
//! creates, writes, `set_attributes` (each of mode, owner and wall-clock time set or
//! cleared at random), renames, copies, deletes and flushes against the file system and
//! a plain model (name -> bytes and attributes), on a simulated disk that crashes after a
//! random number of requests (unflushed blocks lost, torn or kept at random). After the
//! restart, fsck is clean and every file's bytes and attributes are those of the last
//! completed flush (or of the flush in progress at the crash), all or nothing: a rename
//! keeps a file's attributes, a copy and a new file start with none (docs/format.md,
//! "Crash consistency"; docs/design/29-attributes.md).
//!
//! The file system is small (its log region a few blocks), so runs cross log commits and
//! checkpoints and crashes land in both. `FLASHPIPE_SEEDS=5000` runs more seeds (default
//! 200); `FLASHPIPE_SEED=n` replays one.

use std::collections::BTreeMap;

use flashpipe_device::sim::{SimDiskConfig, SimWorld};
use flashpipe_device::SplitMix64;
use flashpipe_fs::{CopyMethod, FileAttributes, FileOwner, Filesystem, Structure};
use flashpipe_testkit::formatted::format_fs;
use flashpipe_testkit::fs_workload::check_clean;
use flashpipe_testkit::seeds::run_seeds;

/// Each file's bytes and attributes.
type Model = BTreeMap<String, (Vec<u8>, FileAttributes)>;

const BLOCK_SIZE: u32 = 4096;
const FS_BLOCKS: u64 = 160;
const NAMES: [&str; 6] = ["a", "b", "c", "dir:d", "dir:e", "f"];

/// A random set of attributes: each field set or left unset (a clear).
fn random_attributes(rng: &mut SplitMix64) -> FileAttributes {
    FileAttributes {
        mode: rng.chance(0.7).then(|| rng.below(0o10000) as u32),
        owner: rng.chance(0.6).then(|| FileOwner {
            uid: rng.below(1 << 32) as u32,
            gid: rng.below(70_000) as u32,
        }),
        modified_wall_ns: rng
            .chance(0.6)
            .then(|| rng.below(1 << 62) as i64 - (1 << 40)),
    }
}

/// The run's state: the file system, the model now, at the last flush and in progress.
struct Run {
    fs: Filesystem,
    now: Model,
    committed: Model,
    in_progress: Option<Model>,
}

impl Run {
    /// One random operation; false when the device crashed under it.
    fn step(&mut self, rng: &mut SplitMix64) -> bool {
        let name = NAMES[rng.below(NAMES.len() as u64) as usize];
        let other = NAMES[rng.below(NAMES.len() as u64) as usize];
        let exists = self.now.contains_key(name);
        match rng.below(10) {
            0 | 1 if !exists => {
                self.fs.create(name).expect("create");
                self.now
                    .insert(name.to_string(), (Vec::new(), FileAttributes::NONE));
            }
            2 | 3 if exists => return self.write(rng, name),
            4..=6 if exists => {
                let attributes = random_attributes(rng);
                self.fs
                    .set_attributes(name, attributes)
                    .expect("set attributes");
                self.now.get_mut(name).expect("exists").1 = attributes;
            }
            7 if exists && !self.now.contains_key(other) => {
                let copy = rng.chance(0.5);
                if copy {
                    if self.fs.copy_file(name, other, CopyMethod::Bytes).is_err() {
                        return false;
                    }
                    let bytes = self.now[name].0.clone();
                    self.now
                        .insert(other.to_string(), (bytes, FileAttributes::NONE));
                } else {
                    self.fs.rename(name, other).expect("rename");
                    let entry = self.now.remove(name).expect("exists");
                    self.now.insert(other.to_string(), entry);
                }
            }
            8 if exists => {
                self.fs.delete(name).expect("delete");
                self.now.remove(name);
            }
            _ => return self.flush(),
        }
        true
    }

    fn write(&mut self, rng: &mut SplitMix64, name: &str) -> bool {
        let offset = rng.below(2 * u64::from(BLOCK_SIZE));
        let length = 1 + rng.below(2 * u64::from(BLOCK_SIZE)) as usize;
        let byte = rng.below(256) as u8;
        let file = self.fs.open(name).expect("open");
        if self.fs.write(file, offset, &vec![byte; length]).is_err() {
            return false;
        }
        let bytes = &mut self.now.get_mut(name).expect("exists").0;
        let end = offset as usize + length;
        if bytes.len() < end {
            bytes.resize(end, 0);
        }
        bytes[offset as usize..end].fill(byte);
        true
    }

    fn flush(&mut self) -> bool {
        self.in_progress = Some(self.now.clone());
        if self.fs.flush().is_err() {
            return false;
        }
        self.committed = self.now.clone();
        self.in_progress = None;
        true
    }
}

/// What the file system holds: every file's bytes and attributes.
fn found(fs: &mut Filesystem, seed: u64) -> Model {
    let mut found = Model::new();
    for stat in fs.list() {
        let bytes = fs
            .read(stat.file_id, 0, stat.size_bytes)
            .unwrap_or_else(|error| panic!("seed {seed}: read {}: {error}", stat.name));
        let attributes = fs.attributes(stat.file_id).expect("attributes");
        found.insert(stat.name, (bytes.to_vec(), attributes));
    }
    found
}

/// What one run's recovery found, summed over the seeds.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    /// Runs whose crash came during a flush.
    crashed_in_a_flush: u64,
    /// Recoveries that found a file with attributes set.
    recovered_attributes: u64,
    /// Recoveries that replayed a log (the crash came after a log commit).
    replayed_a_log: u64,
}

impl std::iter::Sum for Tally {
    fn sum<I: Iterator<Item = Tally>>(tallies: I) -> Tally {
        tallies.fold(Tally::default(), |sum, one| Tally {
            crashed_in_a_flush: sum.crashed_in_a_flush + one.crashed_in_a_flush,
            recovered_attributes: sum.recovered_attributes + one.recovered_attributes,
            replayed_a_log: sum.replayed_a_log + one.replayed_a_log,
        })
    }
}

/// One seeded run: format, random operations until the crash, restart, remount, check.
fn run_seed(seed: u64) -> Tally {
    let mut rng = SplitMix64::new(seed);
    let world = SimWorld::new(seed);
    let device_block_size: u32 = if rng.chance(0.5) { 512 } else { 4096 };
    let device_blocks = FS_BLOCKS * u64::from(BLOCK_SIZE / device_block_size);
    world
        .add_disk(SimDiskConfig::default_for_tests(
            "sim0",
            device_block_size,
            device_blocks,
        ))
        .expect("disk");
    let open = || Box::new(world.open_disk(0).expect("open disk"));
    let fs = format_fs(open(), BLOCK_SIZE);
    world.set_crash_survival_probability([0.0, 0.5, 1.0][rng.below(3) as usize]);
    world.crash_after_requests(1 + rng.below(300));
    let mut run = Run {
        fs,
        now: Model::new(),
        committed: Model::new(),
        in_progress: None,
    };
    let mut crashed = false;
    for _ in 0..80 {
        if !run.step(&mut rng) {
            assert!(world.is_crashed(), "seed {seed}: an error without a crash");
            crashed = true;
            break;
        }
    }
    if !crashed {
        run.in_progress = None;
        world.crash_now();
    }
    drop(run.fs);
    world.restart();
    let mut fs = Filesystem::mount(open())
        .unwrap_or_else(|error| panic!("seed {seed}: mount after crash: {error}"));
    let replayed_a_log = fs
        .metadata_blocks()
        .iter()
        .any(|&(structure, _)| structure == Structure::Log);
    check_clean(&mut fs, seed, "after the crash");
    let found = found(&mut fs, seed);
    let matches_in_progress = run.in_progress.as_ref() == Some(&found);
    assert!(
        found == run.committed || matches_in_progress,
        "seed {seed}: after the crash the files are {found:?}; the last flush had {:?}; \
         the flush in progress {:?}",
        run.committed,
        run.in_progress
    );
    Tally {
        crashed_in_a_flush: u64::from(run.in_progress.is_some()),
        recovered_attributes: u64::from(
            found
                .values()
                .any(|(_, attributes)| *attributes != FileAttributes::NONE),
        ),
        replayed_a_log: u64::from(replayed_a_log),
    }
}

#[test]
fn attributes_after_a_crash_are_the_last_flush_or_the_one_in_progress() {
    let tallies = run_seeds(200, run_seed);
    let seeds = tallies.len() as u64;
    let total: Tally = tallies.into_iter().sum();
    eprintln!("{seeds} seeds: {total:?}");
    if seeds >= 100 {
        assert!(
            total.crashed_in_a_flush > 0
                && total.recovered_attributes > seeds / 4
                && total.replayed_a_log > 0,
            "the runs must reach flushes, attributes and logs: {total:?}"
        );
    }
}
