//! The crash tests' file-system workload: random creates, writes at random offsets,
//! truncates, renames, deletes, reads, flushes and (with
//! [`WorkloadShape::share_copy_percent`]) copies by sharing blocks, each checked against a plain in-memory
//! model (name -> bytes), remembering the state of the last completed flush and of the
//! flush in progress. After a crash and a remount, [`check_recovered`] asserts that the
//! file system holds one of those two states (docs/format.md, "Crash consistency").
//!
//! With [`WorkloadShape::continue_after_device_errors`], an injected device error that is
//! not a crash does not end the run: a failed read or truncate is checked to have changed
//! nothing; a failed write into fresh blocks to have changed nothing; and the run goes on. A failed
//! flush, or a failed write over blocks written since the last flush, makes the mount
//! unusable (docs/format.md, "Device errors"), so it ends the run for the caller to
//! remount, which must find the last flush.

use std::collections::BTreeMap;

use flashpipe_device::{DeviceError, SplitMix64};
use flashpipe_fs::{
    is_crash, CopyError, CopyMethod, FileIoError, Filesystem, FlushError, NamespaceError,
};

/// The model: file name -> bytes.
pub type Model = BTreeMap<String, Vec<u8>>;

/// The names the workload uses (few, so that operations collide).
pub const NAMES: [&str; 6] = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "a-much-longer-name-for-a-file.bin",
    "z",
];

/// How one step ended: a crash (or, with faults injected, any device error) ends the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The step did what the model expects (or ran out of space).
    Done,
    /// The device crashed under it (or, with faults injected, failed a flush).
    Crashed,
    /// A device error failed the operation, which changed nothing visible (only with
    /// [`WorkloadShape::continue_after_device_errors`]).
    FailedCleanly,
}

/// Attempts at a read that checks a failed operation before giving up.
const CHECK_READ_ATTEMPTS: usize = 50;

/// Sizes of the workload's writes and truncates, in FS blocks.
#[derive(Debug, Clone, Copy)]
pub struct WorkloadShape {
    /// FS block size in bytes.
    pub block_size_bytes: u64,
    /// Writes start below this many blocks.
    pub write_offset_blocks_max: u64,
    /// One write in ten spans up to this many blocks (the others up to three).
    pub long_write_blocks_max: u64,
    /// Truncates go below this many blocks.
    pub truncate_blocks_max: u64,
    /// End the run at any device error, not only at a crash (fault-injection runs).
    pub stop_on_any_device_error: bool,
    /// Keep going after a device error that is not a crash, checking that the failed
    /// operation changed nothing visible; only a failed flush ends the run.
    pub continue_after_device_errors: bool,
    /// Percent of steps that copy by sharing blocks ([`CopyMethod::Share`]): a whole file
    /// to a new name, or a range into an existing file (same file and overlapping
    /// included). 0 (the default) draws nothing extra, so older runs keep their sequences.
    /// Not for runs that go on after device errors: a copy that fails half-way may have
    /// shared its whole blocks already.
    pub share_copy_percent: u64,
}

impl WorkloadShape {
    /// The file system's crash test's shape for `block_size_bytes` blocks.
    pub fn new(block_size_bytes: u64) -> WorkloadShape {
        WorkloadShape {
            block_size_bytes,
            write_offset_blocks_max: 20,
            long_write_blocks_max: 30,
            truncate_blocks_max: 25,
            stop_on_any_device_error: false,
            continue_after_device_errors: false,
            share_copy_percent: 0,
        }
    }
}

/// One run: the file system under test, its model, and the states a recovery may show.
pub struct FsWorkload {
    /// The run's seed, in every failure message.
    pub seed: u64,
    rng: SplitMix64,
    /// The file system under test.
    pub fs: Filesystem,
    /// What the file system holds now.
    pub model: Model,
    /// What it held at the last completed flush.
    pub committed: Model,
    /// What it will hold if the flush in progress (at a crash) completed.
    pub in_progress: Option<Model>,
    /// Device errors that failed an operation without ending the run.
    pub device_errors_survived: u64,
    /// Failed writes into fresh blocks, after which the file was found unchanged.
    pub writes_failed_unchanged: u64,
    shape: WorkloadShape,
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

impl FsWorkload {
    /// A run over a freshly formatted `fs`, drawing its operations from `rng`.
    pub fn new(seed: u64, rng: SplitMix64, fs: Filesystem, shape: WorkloadShape) -> FsWorkload {
        FsWorkload {
            seed,
            rng,
            fs,
            model: Model::new(),
            committed: Model::new(),
            in_progress: None,
            device_errors_survived: 0,
            writes_failed_unchanged: 0,
            shape,
        }
    }

    /// Replaces the file system (after a remount) and the model with what it holds.
    pub fn resume_with(&mut self, fs: Filesystem, recovered: Model) {
        self.fs = fs;
        self.model = recovered.clone();
        self.committed = recovered;
        self.in_progress = None;
    }

    /// Runs up to `steps` operations; true when a crash (or fault) ended the run. The
    /// flush in progress is remembered only while a flush is running.
    pub fn run(&mut self, steps: usize) -> bool {
        for _ in 0..steps {
            match self.step() {
                Outcome::Crashed => return true,
                Outcome::FailedCleanly => self.device_errors_survived += 1,
                Outcome::Done => {}
            }
            self.in_progress = None;
        }
        false
    }

    fn ends_run(&self, error: &DeviceError) -> bool {
        is_crash(error) || self.shape.stop_on_any_device_error
    }

    fn file_outcome(&self, error: FileIoError, what: &str) -> Outcome {
        match error {
            FileIoError::NoSpace { .. } => Outcome::Done,
            FileIoError::Device(error) if self.ends_run(&error) => Outcome::Crashed,
            FileIoError::Device(_) if self.shape.continue_after_device_errors => {
                Outcome::FailedCleanly
            }
            error => panic!("seed {}: {what}: {error}", self.seed),
        }
    }

    /// The whole of `name` as the file system shows it, retrying reads that an injected
    /// device error fails.
    fn read_back(&mut self, name: &str, what: &str) -> Vec<u8> {
        let seed = self.seed;
        let file = self
            .fs
            .open(name)
            .unwrap_or_else(|error| panic!("seed {seed}: {what}: open {name}: {error}"));
        let size_bytes = self
            .fs
            .stat(file)
            .unwrap_or_else(|error| panic!("seed {seed}: {what}: stat {name}: {error}"))
            .size_bytes;
        for _ in 0..CHECK_READ_ATTEMPTS {
            match self.fs.read(file, 0, size_bytes) {
                Ok(bytes) => return bytes.to_vec(),
                Err(FileIoError::Device(error)) if !is_crash(&error) => continue,
                Err(error) => panic!("seed {seed}: {what}: read {name} back: {error}"),
            }
        }
        panic!("seed {seed}: {what}: {CHECK_READ_ATTEMPTS} reads of {name} all failed")
    }

    /// After a failed truncate or read: the file is exactly what the model says.
    fn check_unchanged(&mut self, name: &str, what: &str) {
        let found = self.read_back(name, what);
        let expected = &self.model[name];
        assert!(
            found == *expected,
            "seed {}: the failed {what} changed {name}: {} bytes, the model has {}",
            self.seed,
            found.len(),
            expected.len()
        );
    }

    /// After a failed write at `offset` that left the mount usable (it wrote only into
    /// fresh blocks, which it released): the file is exactly what the model holds.
    fn check_failed_write(&mut self, name: &str, offset: u64, length: usize) {
        let what = format!("write {name} {offset}+{length}");
        self.check_unchanged(name, &what);
        self.writes_failed_unchanged += 1;
    }

    fn pick_name(&mut self) -> &'static str {
        NAMES[self.rng.below(NAMES.len() as u64) as usize]
    }

    fn step(&mut self) -> Outcome {
        if self.shape.share_copy_percent > 0 && self.rng.below(100) < self.shape.share_copy_percent
        {
            return self.share_copy();
        }
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
        let block_size = self.shape.block_size_bytes;
        let span = if self.rng.chance(0.1) {
            self.shape.long_write_blocks_max
        } else {
            3
        };
        let offset = self
            .rng
            .below(self.shape.write_offset_blocks_max * block_size);
        let length = 1 + self.rng.below(span * block_size) as usize;
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
            Err(FileIoError::FileTooLarge {
                limit_size_bytes, ..
            }) => {
                assert!(
                    offset + length as u64 > limit_size_bytes,
                    "seed {}: bogus FileTooLarge",
                    self.seed
                );
                Outcome::Done
            }
            Err(error) => {
                let outcome = self.file_outcome(error, &format!("write {name} {offset}+{length}"));
                if outcome == Outcome::FailedCleanly && self.fs.unusable_reason().is_some() {
                    return Outcome::Crashed;
                }
                if outcome == Outcome::FailedCleanly {
                    self.check_failed_write(name, offset, length);
                }
                outcome
            }
        }
    }

    fn truncate(&mut self) -> Outcome {
        let name = self.pick_name();
        let Ok(file) = self.fs.open(name) else {
            return Outcome::Done;
        };
        let size = self
            .rng
            .below(self.shape.truncate_blocks_max * self.shape.block_size_bytes);
        match self.fs.truncate(file, size) {
            Ok(()) => {
                self.model
                    .get_mut(name)
                    .expect("model has the file")
                    .resize(size as usize, 0);
                Outcome::Done
            }
            Err(error) => {
                let what = format!("truncate {name} to {size}");
                let outcome = self.file_outcome(error, &what);
                if outcome == Outcome::FailedCleanly {
                    self.check_unchanged(name, &what);
                }
                outcome
            }
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

    /// A copy by sharing: a whole file to a new name (half the time), else a range of one
    /// file into another existing one (or itself) at offsets of the same phase in a block
    /// (so that whole blocks are shared) or, now and then, of any phase (bytes).
    fn share_copy(&mut self) -> Outcome {
        let from = self.pick_name();
        let to = self.pick_name();
        let Some(source) = self.model.get(from).cloned() else {
            return Outcome::Done;
        };
        if self.rng.chance(0.5) && from != to {
            let expected = !self.model.contains_key(to);
            return match self.fs.copy_file(from, to, CopyMethod::Share) {
                Ok(_) => {
                    assert!(expected, "seed {}: copy onto existing {to}", self.seed);
                    self.model.insert(to.to_string(), source);
                    Outcome::Done
                }
                Err(CopyError::Namespace(NamespaceError::Exists { .. })) if !expected => {
                    Outcome::Done
                }
                Err(error) => self.copy_failed(error, &format!("copy {from} to {to}")),
            };
        }
        let Some(destination_length) = self.model.get(to).map(Vec::len) else {
            return Outcome::Done;
        };
        let block_bytes = self.shape.block_size_bytes;
        let source_offset = self.rng.below(source.len() as u64 + 1);
        let length = self.rng.below(source.len() as u64 - source_offset + 1);
        let destination_base =
            self.rng.below(destination_length as u64 / block_bytes + 3) * block_bytes;
        let destination_offset = if self.rng.chance(0.8) {
            destination_base + source_offset % block_bytes
        } else {
            destination_base + self.rng.below(block_bytes)
        };
        let what = format!("copy {from} {source_offset}+{length} to {to} at {destination_offset}");
        let (Ok(source_file), Ok(destination_file)) = (self.fs.open(from), self.fs.open(to)) else {
            panic!("seed {}: {what}: open", self.seed);
        };
        match self.fs.copy_range(
            source_file,
            source_offset,
            destination_file,
            destination_offset,
            length,
            CopyMethod::Share,
        ) {
            Ok(_) => {
                if length == 0 {
                    return Outcome::Done;
                }
                let bytes =
                    source[source_offset as usize..(source_offset + length) as usize].to_vec();
                let content = self.model.get_mut(to).expect("model has the file");
                let end = (destination_offset + length) as usize;
                if content.len() < end {
                    content.resize(end, 0);
                }
                content[destination_offset as usize..end].copy_from_slice(&bytes);
                Outcome::Done
            }
            Err(error) => self.copy_failed(error, &what),
        }
    }

    /// A copy that failed: out of space (nothing changed) or a crash end the step; any
    /// other error fails the run.
    fn copy_failed(&mut self, error: CopyError, what: &str) -> Outcome {
        match error {
            CopyError::Io(FileIoError::FileTooLarge { .. })
            | CopyError::Namespace(NamespaceError::NoSpace { .. }) => Outcome::Done,
            CopyError::Io(error) => {
                let outcome = self.file_outcome(error, what);
                assert!(
                    outcome != Outcome::FailedCleanly,
                    "seed {}: {what}: a copy that fails half-way may have shared its whole \
                     blocks already, so runs that go on after device errors do not copy",
                    self.seed
                );
                outcome
            }
            error => panic!("seed {}: {what}: {error}", self.seed),
        }
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
            Err(error) => {
                let outcome = self.file_outcome(error, &format!("read {name}"));
                if outcome == Outcome::FailedCleanly {
                    self.check_unchanged(name, "read");
                }
                outcome
            }
        }
    }

    fn flush(&mut self) -> Outcome {
        self.in_progress = Some(self.model.clone());
        match self.fs.flush() {
            Ok(()) => {
                self.committed = self.in_progress.take().expect("set above");
                Outcome::Done
            }
            Err(FlushError::Device(error))
                if self.ends_run(&error) || self.shape.continue_after_device_errors =>
            {
                Outcome::Crashed
            }
            Err(error) => panic!("seed {}: flush: {error}", self.seed),
        }
    }
}

/// Every file of `fs` and its bytes.
pub fn contents(fs: &mut Filesystem, seed: u64) -> Model {
    let mut found = Model::new();
    for stat in fs.list() {
        let bytes = fs
            .read(stat.file_id, 0, stat.size_bytes)
            .unwrap_or_else(|error| panic!("seed {seed}: read {}: {error}", stat.name));
        found.insert(stat.name, bytes.to_vec());
    }
    found
}

/// Runs fsck on `fs`; panics naming `seed` and `when` (say "after the crash") unless it
/// ran and found nothing.
pub fn check_clean(fs: &mut Filesystem, seed: u64, when: &str) {
    let report = fs
        .check()
        .unwrap_or_else(|error| panic!("seed {seed}: fsck {when}: {error}"));
    assert!(
        report.is_clean(),
        "seed {seed}: fsck {when}: {:#?}",
        report.findings
    );
}

/// Names and sizes, for failure messages.
pub fn describe(model: &Model) -> Vec<(String, usize)> {
    model
        .iter()
        .map(|(name, bytes)| (name.clone(), bytes.len()))
        .collect()
}

/// Asserts that the recovered `fs` holds the state of the last completed flush or of the
/// flush in progress at the crash; returns the files found and whether they are the last
/// completed flush's.
pub fn check_recovered(
    fs: &mut Filesystem,
    committed: &Model,
    in_progress: Option<&Model>,
    seed: u64,
    when: &str,
) -> (Model, bool) {
    let found = contents(fs, seed);
    let matches_commit = found == *committed;
    let matches_in_progress = in_progress.is_some_and(|model| found == *model);
    assert!(
        matches_commit || matches_in_progress,
        "seed {seed}: {when} the files are {:?}; the last flush had {:?}; the flush in progress {:?}",
        describe(&found),
        describe(committed),
        in_progress.map(describe)
    );
    (found, matches_commit)
}

/// The crash tests' last step after a recovery: writes a new file of `payload_bytes`
/// (empty where the device is full), flushes and unmounts cleanly; the files the next
/// mount must show ([`check_files_after_remount`]).
pub fn write_after_recovery(
    mut fs: Filesystem,
    found: &Model,
    payload_bytes: u32,
    seed: u64,
) -> Model {
    let payload: Vec<u8> = (0..payload_bytes)
        .map(|index| (index * 7 + 3) as u8)
        .collect();
    let mut expected = found.clone();
    if let Ok(file) = fs.create("after-recovery") {
        match fs.write(file, 0, &payload) {
            Ok(()) => {
                expected.insert("after-recovery".to_string(), payload);
            }
            Err(FileIoError::NoSpace { .. }) => {
                expected.insert("after-recovery".to_string(), Vec::new());
            }
            Err(error) => panic!("seed {seed}: write after recovery: {error}"),
        }
    }
    fs.flush()
        .unwrap_or_else(|error| panic!("seed {seed}: flush after recovery: {error}"));
    drop(
        fs.unmount()
            .unwrap_or_else(|error| panic!("seed {seed}: unmount after recovery: {error}")),
    );
    expected
}

/// After a clean remount: fsck is clean and the files are `expected`.
pub fn check_files_after_remount(fs: &mut Filesystem, expected: &Model, seed: u64) {
    check_clean(fs, seed, "after a clean remount");
    let found = contents(fs, seed);
    assert!(
        found == *expected,
        "seed {seed}: after a clean remount the files are {:?}, expected {:?}",
        describe(&found),
        describe(expected)
    );
}
