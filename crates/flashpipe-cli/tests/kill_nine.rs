//! The kill -9 harness (sled's way): the real `flashpipe` binary runs `put` (one file up
//! to 3 MiB, or several small files in one command), `put --force` over existing files,
//! multi-file `rm`, `mv` and `cp` (also `--force` over an existing target) and
//! `run aes128-ctr --output` on a store, one command at a time, and is killed with
//! SIGKILL at a random moment; after every kill that lands while the command runs, `fsck`
//! must find the store clean, every file acknowledged before (its command exited 0) must
//! read back byte for byte, and the killed command's files must be all as before or all
//! as after it (nothing half there, no temporary left). Three store kinds: one device
//! file, three striped device files, emulated flash (minflash under the host FTL, a
//! sparse image with `.meta` and a journal beside it), and the same flash in the
//! flash-aware layout (no FTL).
//!
//! What it exercises (issue #13): every command ends in one commit, and these stores
//! hold few files, so their log regions are small (4 blocks): most commits append a
//! metadata log record and every few commits is a checkpoint, so kills land between log
//! records, during a record, and during checkpoints. A fourth store (4 KiB blocks,
//! 5,000 small files put first) has a log region of about 40 blocks, so mounts after its
//! kills replay logs of tens of records. After each kill on the file stores the harness
//! reads the newest super block slot and counts kills after a log commit and after a
//! checkpoint. Large puts go through the engine's overlapped zero-copy write path (many
//! writes in flight, answered as they complete).
//!
//! `FLASHPIPE_KILLS=N` sets the kills per store kind (default [`DEFAULT_KILLS_PER_KIND`]);
//! Each campaign draws a random seed and prints it at the start (so every run explores
//! new files, commands and kill delays); `FLASHPIPE_SEED=S` replays seed `S` (it fixes
//! the files, the commands and the kill delays, while where a kill lands also depends on
//! the machine). A failing campaign names its seed and the command that replays it.
//! Each kind prints its figures: kills, kills that landed mid-command, losses.

mod common;

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use flashpipe_device::SplitMix64;
use flashpipe_testkit::seeds;

/// Kills per store kind in the default suite.
const DEFAULT_KILLS_PER_KIND: u64 = 20;
/// Largest file put, in bytes (the live set stays under [`LIVE_BYTES_LIMIT`]).
const LARGEST_FILE_BYTES: u64 = 3 << 20;
/// Bytes of live files above which the harness removes rather than adds.
const LIVE_BYTES_LIMIT: u64 = 24 << 20;
/// The share of commands killed (the rest run to the end and calibrate the kill delay).
const KILLED_PERCENT: u64 = 80;
/// A long campaign reports its progress this often (kills that landed mid-command).
const PROGRESS_EVERY_KILLS: u64 = 50;
/// The first commands run to the end: they calibrate the kill delay to the machine.
const CALIBRATION_COMMANDS: u64 = 3;

/// A store layout the harness runs on.
struct StoreKind {
    label: &'static str,
    mkfs_arguments: &'static [&'static str],
    /// The file system's block size (mkfs's `--block-size`, 16 KiB by default): super
    /// block slot 1 lies at this byte of the first device.
    fs_block_bytes: usize,
    /// Small files put into the store before the campaign, in one command: they make its
    /// tables, and so its log region (half their size), larger.
    prefilled_files: u64,
}

impl StoreKind {
    /// A layout made by `mkfs_arguments` with the default 16 KiB blocks, nothing put first.
    const fn plain(label: &'static str, mkfs_arguments: &'static [&'static str]) -> StoreKind {
        StoreKind {
            label,
            mkfs_arguments,
            fs_block_bytes: 16 << 10,
            prefilled_files: 0,
        }
    }
}

const FILE_STORE: StoreKind = StoreKind::plain("file", &["--devices", "d0.img", "--size", "64MiB"]);

/// A file store with 4 KiB blocks and [`LONG_LOG_PREFILLED_FILES`] files put first: a
/// log region of about 40 blocks, so logs of tens of records are replayed after kills.
const LONG_LOG_FILE_STORE: StoreKind = StoreKind {
    label: "file-long-log",
    mkfs_arguments: &[
        "--devices",
        "d0.img",
        "--size",
        "64MiB",
        "--block-size",
        "4KiB",
    ],
    fs_block_bytes: 4 << 10,
    prefilled_files: LONG_LOG_PREFILLED_FILES,
};

/// Files in the long-log store before its campaign.
const LONG_LOG_PREFILLED_FILES: u64 = 5_000;
/// Largest prefilled file, in bytes.
const PREFILLED_FILE_BYTES: u64 = 64;

const STRIPED_STORE: StoreKind = StoreKind::plain(
    "striped",
    &["--devices", "d0.img,d1.img,d2.img", "--size", "32MiB"],
);

const FLASH_STORE: StoreKind = StoreKind::plain(
    "flash",
    &[
        "--devices",
        "flash:minflash:f.img",
        "--flash-blocks-per-plane",
        "4",
    ],
);

/// Emulated flash in the flash-aware layout: the file system on the pages, no FTL
/// (docs/design/29-flash-aware.md); a kill leaves no clean record, so the next command's
/// mount erases every free erase block.
const FLASH_AWARE_STORE: StoreKind = StoreKind {
    label: "flash-aware",
    mkfs_arguments: &[
        "--devices",
        "flash:minflash:f.img",
        "--flash-blocks-per-plane",
        "4",
        "--layout",
        "flash-aware",
    ],
    fs_block_bytes: 8 << 10,
    prefilled_files: 0,
};

/// Largest small file of a multi-file put, in bytes.
const SMALL_FILE_BYTES: u64 = 8 << 10;
/// Most files of one multi-file put or rm.
const MOST_FILES_PER_COMMAND: u64 = 8;
/// Largest input of a `run` step (the kernel's output is computed here too).
const LARGEST_RUN_INPUT_BYTES: usize = 1 << 20;
/// The kernel of `run` steps and its options (a fixed key and counter block).
const RUN_KERNEL: &str = "aes128-ctr";
const RUN_KERNEL_OPTIONS: [&str; 2] = [
    "key=000102030405060708090a0b0c0d0e0f",
    "iv=f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff",
];

/// One command of the workload, with what it changes.
#[derive(Debug, Clone)]
enum Step {
    /// `put` of local files holding each `content` as `name` (one file: `--as name`;
    /// several: local files named as in the store); `force` replaces existing ones.
    Put {
        files: Vec<(String, Vec<u8>)>,
        force: bool,
    },
    /// `rm` of every name.
    Remove { names: Vec<String> },
    /// `mv` of `from` to `to` (`force`: `to` exists and is replaced).
    Rename {
        from: String,
        to: String,
        force: bool,
    },
    /// `cp` of `from` to `to` (`force`: `to` exists and is replaced).
    Copy {
        from: String,
        to: String,
        force: bool,
    },
    /// `run --output output` of [`RUN_KERNEL`] over `input`, whose result is `expected`
    /// (`force`: `output` exists and is replaced).
    RunOutput {
        input: String,
        output: String,
        expected: Vec<u8>,
        force: bool,
    },
}

/// The files a command touches: each name with its content, or `None` when absent.
type TouchedFiles = Vec<(String, Option<Vec<u8>>)>;

/// Offsets in a super block (docs/format.md, "Super block").
const SUPER_BLOCK_SEQUENCE_OFFSET: usize = 32;
const SUPER_BLOCK_LOG_RECORDS_OFFSET: usize = 128;

/// SIGKILL's number: a command that died of it was killed mid-command.
const SIGKILL: i32 = 9;

/// A campaign's counts and what it found.
#[derive(Debug, Default)]
struct Figures {
    commands: u64,
    kills: u64,
    kills_mid_command: u64,
    acknowledged: u64,
    killed_commands_committed: u64,
    durability_losses: Vec<String>,
    atomicity_findings: Vec<String>,
    /// Kills after which the durable commit (the newest super block slot of the first
    /// device file) was a log commit: its log held records beyond the checkpoint.
    kills_after_log_commit: u64,
    /// Kills after which the durable commit was a checkpoint (an empty log).
    kills_after_checkpoint: u64,
    /// The most log records a durable commit after a kill held.
    most_log_records_after_kill: u64,
    /// Per kind of command ([`step_kind`]): (commands run, kills that landed in one).
    per_kind: BTreeMap<&'static str, (u64, u64)>,
}

fn kills_per_kind() -> u64 {
    std::env::var("FLASHPIPE_KILLS")
        .ok()
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(DEFAULT_KILLS_PER_KIND)
}

/// The seed `FLASHPIPE_SEED` names, else a random one (printed by the campaign).
fn campaign_seed() -> u64 {
    seeds::replayed_seed().unwrap_or_else(seeds::random_seed)
}

fn random_content(generator: &mut SplitMix64) -> Vec<u8> {
    let length = match generator.below(4) {
        0 => generator.below(5),
        1 => generator.below(100_000),
        _ => generator.below(LARGEST_FILE_BYTES + 1),
    };
    content_of_length(generator, length)
}

fn small_content(generator: &mut SplitMix64) -> Vec<u8> {
    let length = generator.below(SMALL_FILE_BYTES + 1);
    content_of_length(generator, length)
}

fn content_of_length(generator: &mut SplitMix64, length: u64) -> Vec<u8> {
    let mut content = Vec::with_capacity(length as usize + 8);
    while (content.len() as u64) < length {
        content.extend_from_slice(&generator.next_u64().to_le_bytes());
    }
    content.truncate(length as usize);
    content
}

/// The store under test, its acknowledged files and the workload's generator.
struct Harness {
    kind: &'static StoreKind,
    /// Removed when the campaign passed, kept (its path printed) when it failed.
    folder: common::TestFolder,
    store_file: String,
    model: BTreeMap<String, Vec<u8>>,
    generator: SplitMix64,
    next_name: u64,
    average_command: Duration,
    figures: Figures,
}

impl Harness {
    fn new(kind: &'static StoreKind, seed: u64) -> Harness {
        let folder = common::fresh_folder(&format!("kill-nine-{}", kind.label));
        let store_file = folder.join("s.toml").display().to_string();
        let mut arguments = vec!["mkfs"];
        arguments.extend_from_slice(kind.mkfs_arguments);
        arguments.push(&store_file);
        let output = Command::new(env!("CARGO_BIN_EXE_flashpipe"))
            .args(&arguments)
            .current_dir(&folder)
            .output()
            .expect("mkfs runs");
        assert!(
            output.status.success(),
            "mkfs of the {} store failed: {}",
            kind.label,
            String::from_utf8_lossy(&output.stderr)
        );
        let mut harness = Harness {
            kind,
            folder,
            store_file,
            model: BTreeMap::new(),
            generator: SplitMix64::new(seed ^ (kind.label.len() as u64 * 0x9E37_79B9)),
            next_name: 0,
            average_command: Duration::ZERO,
            figures: Figures::default(),
        };
        harness.prefill();
        harness
    }

    /// Puts the kind's prefilled files, from a local folder `base` (store names
    /// `base:NNNNN`), in one acknowledged command.
    fn prefill(&mut self) {
        if self.kind.prefilled_files == 0 {
            return;
        }
        let local = self.folder.join("base");
        std::fs::create_dir_all(&local).expect("prefill folder");
        for index in 0..self.kind.prefilled_files {
            let length = self.generator.below(PREFILLED_FILE_BYTES + 1);
            let content = content_of_length(&mut self.generator, length);
            let name = format!("{index:05}");
            std::fs::write(local.join(&name), &content).expect("prefill file");
            self.model.insert(format!("base:{name}"), content);
        }
        let output = self.run_flashpipe(&["put", &self.store_file, &local.display().to_string()]);
        assert!(
            output.status.success(),
            "{} store: the prefill put failed: {}",
            self.kind.label,
            String::from_utf8_lossy(&output.stderr)
        );
        std::fs::remove_dir_all(&local).expect("prefill folder removed");
    }

    fn new_name(&mut self) -> String {
        self.next_name += 1;
        format!("f{}", self.next_name)
    }

    fn live_bytes(&self) -> u64 {
        self.model
            .values()
            .map(|content| content.len() as u64)
            .sum()
    }

    fn pick_existing(&mut self) -> String {
        let index = self.generator.below(self.model.len() as u64) as usize;
        self.model.keys().nth(index).expect("a file").clone()
    }

    /// The largest file: removed when the live bytes reach their limit (in a store of
    /// many small files a random pick would hardly bring them down).
    fn largest_file(&self) -> String {
        self.model
            .iter()
            .max_by_key(|(_, content)| content.len())
            .map(|(name, _)| name.clone())
            .expect("a file")
    }

    fn pick_other(&mut self, besides: &str) -> Option<String> {
        let others: Vec<&String> = self.model.keys().filter(|name| *name != besides).collect();
        let index = self.generator.below(others.len().max(1) as u64) as usize;
        others.get(index).map(|name| name.to_string())
    }

    /// The name a `mv`, `cp` or `run` step writes: a new one, or now and then an
    /// existing other file replaced with `--force`.
    fn target_name(&mut self, source: &str) -> (String, bool) {
        if self.generator.below(4) == 0 {
            if let Some(existing) = self.pick_other(source) {
                return (existing, true);
            }
        }
        (self.new_name(), false)
    }

    fn next_step(&mut self) -> Step {
        let choice = self.generator.below(100);
        let room = self.live_bytes() < LIVE_BYTES_LIMIT;
        if self.model.len() < 3 || (choice < 30 && room) {
            let name = self.new_name();
            let content = random_content(&mut self.generator);
            return Step::Put {
                files: vec![(name, content)],
                force: false,
            };
        }
        if choice < 42 && room {
            return self.many_small_files_step();
        }
        if choice < 50 && room {
            let name = self.pick_existing();
            let content = random_content(&mut self.generator);
            return Step::Put {
                files: vec![(name, content)],
                force: true,
            };
        }
        if choice < 65 || !room {
            let count = 1 + self.generator.below(3);
            let mut names: Vec<String> = (0..count).map(|_| self.pick_existing()).collect();
            if !room {
                names.push(self.largest_file());
            }
            names.sort();
            names.dedup();
            return Step::Remove { names };
        }
        let from = self.pick_existing();
        let runnable =
            !self.model[&from].is_empty() && self.model[&from].len() <= LARGEST_RUN_INPUT_BYTES;
        if choice < 88 || !runnable {
            let (to, force) = self.target_name(&from);
            return match choice < 76 {
                true => Step::Rename { from, to, force },
                false => Step::Copy { from, to, force },
            };
        }
        let (output, force) = self.target_name(&from);
        let expected = kernel_output(&from, &self.model[&from]);
        Step::RunOutput {
            input: from,
            output,
            expected,
            force,
        }
    }

    /// Several small files in one `put`: new ones, and now and then an existing one
    /// replaced (with `--force`).
    fn many_small_files_step(&mut self) -> Step {
        let count = 2 + self.generator.below(MOST_FILES_PER_COMMAND - 1);
        let mut files: Vec<(String, Vec<u8>)> = Vec::new();
        let mut force = false;
        for _ in 0..count {
            let name = match self.generator.below(5) == 0 {
                true => self.pick_existing(),
                false => self.new_name(),
            };
            if files.iter().any(|(taken, _)| *taken == name) {
                continue;
            }
            force |= self.model.contains_key(&name);
            files.push((name, small_content(&mut self.generator)));
        }
        Step::Put { files, force }
    }

    /// Writes the local files a put reads: `input.bin` for one file, `put/NAME` for each
    /// of several.
    fn write_put_inputs(&self, files: &[(String, Vec<u8>)]) {
        if let [(_, content)] = files {
            std::fs::write(self.folder.join("input.bin"), content).expect("input file");
            return;
        }
        let folder = self.folder.join("put");
        let _ = std::fs::remove_dir_all(&folder);
        std::fs::create_dir_all(&folder).expect("put folder");
        for (name, content) in files {
            std::fs::write(folder.join(name), content).expect("input file");
        }
    }

    fn command_line(&self, step: &Step) -> Vec<String> {
        let store = self.store_file.clone();
        let owned = |words: &[&str]| {
            words
                .iter()
                .map(|word| word.to_string())
                .collect::<Vec<_>>()
        };
        let forced = |force: bool| match force {
            true => vec!["--force".to_string()],
            false => Vec::new(),
        };
        match step {
            Step::Put { files, force } => {
                let mut words = owned(&["put"]);
                words.extend(forced(*force));
                if let [(name, _)] = files.as_slice() {
                    let input = self.folder.join("input.bin").display().to_string();
                    words.extend(owned(&["--as", name, &store, &input]));
                    return words;
                }
                words.push(store);
                let folder = self.folder.join("put");
                words.extend(
                    files
                        .iter()
                        .map(|(name, _)| folder.join(name).display().to_string()),
                );
                words
            }
            Step::Remove { names } => {
                let mut words = owned(&["rm", &store]);
                words.extend(names.iter().cloned());
                words
            }
            Step::Rename { from, to, force } => {
                let mut words = owned(&["mv"]);
                words.extend(forced(*force));
                words.extend(owned(&[&store, from, to]));
                words
            }
            Step::Copy { from, to, force } => {
                let mut words = owned(&["cp"]);
                words.extend(forced(*force));
                words.extend(owned(&[&store, from, to]));
                words
            }
            Step::RunOutput {
                input,
                output,
                force,
                ..
            } => {
                let mut words = owned(&["run", "--output", output]);
                words.extend(forced(*force));
                words.extend(owned(&[&store, RUN_KERNEL]));
                words.extend(owned(&RUN_KERNEL_OPTIONS));
                words.push(input.clone());
                words
            }
        }
    }

    fn spawn(&self, step: &Step) -> Child {
        Command::new(env!("CARGO_BIN_EXE_flashpipe"))
            .args(self.command_line(step))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the flashpipe binary starts")
    }

    /// Runs one command, killed at a random moment or left to finish.
    fn run_round(&mut self, round: u64) {
        let step = self.next_step();
        if let Step::Put { files, .. } = &step {
            self.write_put_inputs(files);
        }
        let killed = self.generator.below(100) < KILLED_PERCENT && round >= CALIBRATION_COMMANDS;
        let kill_after = killed.then(|| {
            let limit_us = (self.average_command.as_micros() as u64 * 13 / 10).max(1);
            Duration::from_micros(self.generator.below(limit_us))
        });
        self.figures.commands += 1;
        self.figures.per_kind.entry(step_kind(&step)).or_default().0 += 1;
        let started = Instant::now();
        let mut child = self.spawn(&step);
        if let Some(delay) = kill_after {
            std::thread::sleep(delay);
            let _already_gone = child.kill();
            self.figures.kills += 1;
        }
        let output = child.wait_with_output().expect("the command is reaped");
        if output.status.signal() == Some(SIGKILL) {
            self.figures.kills_mid_command += 1;
            self.figures.per_kind.entry(step_kind(&step)).or_default().1 += 1;
            self.check_after_kill(round, &step);
            return;
        }
        let elapsed = started.elapsed();
        self.average_command = if self.average_command.is_zero() {
            elapsed
        } else {
            (self.average_command * 3 + elapsed) / 4
        };
        assert!(
            output.status.success(),
            "{} store, round {round}: {step:?} failed without a kill: {}",
            self.kind.label,
            String::from_utf8_lossy(&output.stderr)
        );
        self.figures.acknowledged += 1;
        self.apply(&step);
    }

    /// The model takes the step's outcome.
    fn apply(&mut self, step: &Step) {
        let (_, after) = self.outcomes(step);
        for (name, content) in after {
            match content {
                Some(content) => self.model.insert(name, content),
                None => self.model.remove(&name),
            };
        }
    }

    fn run_flashpipe(&self, arguments: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_flashpipe"))
            .args(arguments)
            .output()
            .expect("the flashpipe binary runs")
    }

    /// Every file of the store with its bytes, or why the store could not be read.
    fn read_store(&self) -> Result<BTreeMap<String, Vec<u8>>, String> {
        let store = self.store_file.as_str();
        let listing = self.run_flashpipe(&["ls", store]);
        if !listing.status.success() {
            return Err(format!(
                "ls failed: {}",
                String::from_utf8_lossy(&listing.stderr)
            ));
        }
        let text = String::from_utf8_lossy(&listing.stdout).to_string();
        let mut sizes = Vec::new();
        for line in text.lines().filter(|line| !line.contains("file(s)")) {
            let mut words = line.split_whitespace();
            let (Some(size), Some(name)) = (words.next(), words.next()) else {
                return Err(format!("unexpected ls line {line:?}"));
            };
            let size: usize = size
                .parse()
                .map_err(|_| format!("unexpected ls line {line:?}"))?;
            sizes.push((name.to_string(), size));
        }
        let mut files = BTreeMap::new();
        if sizes.is_empty() {
            return Ok(files);
        }
        let mut arguments = vec!["cat", store];
        arguments.extend(sizes.iter().map(|(name, _)| name.as_str()));
        let catted = self.run_flashpipe(&arguments);
        if !catted.status.success() {
            return Err(format!(
                "cat failed: {}",
                String::from_utf8_lossy(&catted.stderr)
            ));
        }
        let total: usize = sizes.iter().map(|(_, size)| size).sum();
        if catted.stdout.len() != total {
            return Err(format!(
                "cat gave {} bytes, ls lists {total}",
                catted.stdout.len()
            ));
        }
        let mut offset = 0;
        for (name, size) in sizes {
            files.insert(name, catted.stdout[offset..offset + size].to_vec());
            offset += size;
        }
        Ok(files)
    }

    fn fsck_is_clean(&self) -> Result<(), String> {
        let output = self.run_flashpipe(&["fsck", "--json", &self.store_file]);
        let text = String::from_utf8_lossy(&output.stdout);
        if output.status.success() && text.contains("\"clean\":true") {
            return Ok(());
        }
        Err(format!(
            "fsck: exit {:?}, {text} {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr)
        ))
    }

    /// After a kill that landed mid-command: fsck clean, acknowledged files intact, the
    /// killed command's files absent or whole; the model follows what the command did.
    fn check_after_kill(&mut self, round: u64, step: &Step) {
        let label = self.kind.label;
        let context = format!(
            "{label} store, kill in round {round} during {}",
            describe(step)
        );
        self.note_durable_commit();
        if let Err(problem) = self.fsck_is_clean() {
            self.figures
                .durability_losses
                .push(format!("{context}: {problem}"));
        }
        let found = match self.read_store() {
            Ok(found) => found,
            Err(problem) => {
                panic!(
                    "{context}: the store cannot be read: {problem}; figures {:?}",
                    self.figures
                )
            }
        };
        let (before, after) = self.outcomes(step);
        let committed = after
            .iter()
            .all(|(name, content)| found.get(name) == content.as_ref());
        let untouched = before
            .iter()
            .all(|(name, content)| found.get(name) == content.as_ref());
        if committed && !untouched {
            self.figures.killed_commands_committed += 1;
            self.apply(step);
        } else if !untouched {
            self.figures.atomicity_findings.push(format!(
                "{context}: its files are neither as before nor as after ({})",
                summarize(&found, &before)
            ));
            self.adopt_torn_outcome(&found, &before);
        }
        for (name, content) in &self.model {
            if before.iter().any(|(touched, _)| touched == name) {
                continue;
            }
            if found.get(name) != Some(content) {
                self.figures.durability_losses.push(format!(
                    "{context}: acknowledged file {name} ({} bytes) {}",
                    content.len(),
                    match found.get(name) {
                        None => "is missing".to_string(),
                        Some(read) => format!("reads back {} different bytes", read.len()),
                    }
                ));
            }
        }
        for name in found.keys() {
            if !self.model.contains_key(name) {
                self.figures.atomicity_findings.push(format!(
                    "{context}: unexpected file {name} ({} bytes) left behind",
                    found[name].len()
                ));
                self.remove_stray(name);
            }
        }
        assert!(
            self.figures.durability_losses.is_empty(),
            "{:#?}",
            self.figures
        );
    }

    /// Counts whether the durable commit after a kill is a log commit or a checkpoint,
    /// read from the super block slots of the first device file (file and striped
    /// stores; a flash store's image is not plain blocks, so it is not counted).
    fn note_durable_commit(&mut self) {
        let Ok(bytes) = std::fs::read(self.folder.join("d0.img")) else {
            return;
        };
        let newest = [0, self.kind.fs_block_bytes]
            .into_iter()
            .filter(|&offset| {
                bytes.len() >= offset + 512 && &bytes[offset..offset + 8] == b"FLASHPFS"
            })
            .map(|offset| {
                let field = |at: usize| {
                    u64::from_le_bytes(
                        bytes[offset + at..offset + at + 8]
                            .try_into()
                            .expect("8 bytes"),
                    )
                };
                (
                    field(SUPER_BLOCK_SEQUENCE_OFFSET),
                    field(SUPER_BLOCK_LOG_RECORDS_OFFSET),
                )
            })
            .max();
        let Some((_, log_records)) = newest else {
            return;
        };
        match log_records {
            0 => self.figures.kills_after_checkpoint += 1,
            _ => self.figures.kills_after_log_commit += 1,
        }
        self.figures.most_log_records_after_kill =
            self.figures.most_log_records_after_kill.max(log_records);
    }

    /// The files a step touches, as (name, content or absent) before and after it.
    fn outcomes(&self, step: &Step) -> (TouchedFiles, TouchedFiles) {
        let current = |name: &String| self.model.get(name).cloned();
        let now = |names: &[&String]| -> TouchedFiles {
            names
                .iter()
                .map(|name| ((*name).clone(), current(name)))
                .collect()
        };
        match step {
            Step::Put { files, .. } => (
                now(&files.iter().map(|(name, _)| name).collect::<Vec<_>>()),
                files
                    .iter()
                    .map(|(name, content)| (name.clone(), Some(content.clone())))
                    .collect(),
            ),
            Step::Remove { names } => (
                now(&names.iter().collect::<Vec<_>>()),
                names.iter().map(|name| (name.clone(), None)).collect(),
            ),
            Step::Rename { from, to, .. } => (
                now(&[from, to]),
                vec![(from.clone(), None), (to.clone(), current(from))],
            ),
            Step::Copy { from, to, .. } => (
                now(&[from, to]),
                vec![(from.clone(), current(from)), (to.clone(), current(from))],
            ),
            Step::RunOutput {
                input,
                output,
                expected,
                ..
            } => (
                now(&[input, output]),
                vec![
                    (input.clone(), current(input)),
                    (output.clone(), Some(expected.clone())),
                ],
            ),
        }
    }

    /// A torn command (an atomicity finding, not a durability loss): the model takes
    /// what the store holds for the touched names, and a partial file is removed.
    fn adopt_torn_outcome(&mut self, found: &BTreeMap<String, Vec<u8>>, before: &TouchedFiles) {
        for (name, _) in before {
            self.model.remove(name);
            if found.contains_key(name) {
                self.remove_stray(name);
            }
        }
    }

    fn remove_stray(&mut self, name: &str) {
        let output = self.run_flashpipe(&["rm", &self.store_file, name]);
        assert!(
            output.status.success(),
            "{} store: removing the stray file {name} failed: {}",
            self.kind.label,
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// The final check: fsck clean and every acknowledged file intact.
    fn check_final(&mut self) {
        let label = self.kind.label;
        if let Err(problem) = self.fsck_is_clean() {
            self.figures
                .durability_losses
                .push(format!("{label} store at the end: {problem}"));
        }
        let found = self.read_store().expect("the store reads at the end");
        if found != self.model {
            self.figures.durability_losses.push(format!(
                "{label} store at the end: {} files found, {} acknowledged, or contents differ",
                found.len(),
                self.model.len()
            ));
        }
    }
}

/// The kind of a command, for the per-kind counts.
fn step_kind(step: &Step) -> &'static str {
    match step {
        Step::Put { files, force } => match (files.len() > 1, *force) {
            (true, _) => "put of several small files",
            (false, true) => "put --force over a file",
            (false, false) => "put of one new file",
        },
        Step::Remove { names } if names.len() > 1 => "rm of several files",
        Step::Remove { .. } => "rm of one file",
        Step::Rename { force: true, .. } => "mv --force",
        Step::Rename { .. } => "mv",
        Step::Copy { force: true, .. } => "cp --force",
        Step::Copy { .. } => "cp",
        Step::RunOutput { .. } => "run --output",
    }
}

fn describe(step: &Step) -> String {
    let force = |force: &bool| if *force { " --force" } else { "" };
    match step {
        Step::Put {
            files,
            force: forced,
        } => {
            let listed: Vec<String> = files
                .iter()
                .map(|(name, content)| format!("{name} ({} bytes)", content.len()))
                .collect();
            format!("put{} {}", force(forced), listed.join(", "))
        }
        Step::Remove { names } => format!("rm {}", names.join(" ")),
        Step::Rename {
            from,
            to,
            force: forced,
        } => format!("mv{} {from} {to}", force(forced)),
        Step::Copy {
            from,
            to,
            force: forced,
        } => format!("cp{} {from} {to}", force(forced)),
        Step::RunOutput {
            input,
            output,
            force: forced,
            ..
        } => format!(
            "run{} --output {output} {RUN_KERNEL} {input}",
            force(forced)
        ),
    }
}

/// What [`RUN_KERNEL`] with [`RUN_KERNEL_OPTIONS`] makes of `content`, computed here with
/// the kernel crate's in-memory driver.
fn kernel_output(name: &str, content: &[u8]) -> Vec<u8> {
    let options: Vec<String> = RUN_KERNEL_OPTIONS
        .iter()
        .map(|option| option.to_string())
        .collect();
    let kernel =
        flashpipe_kernels::registry::build_kernel(RUN_KERNEL, &options).expect("the kernel builds");
    let mut output = Vec::new();
    flashpipe_kernels::driver::run_on_bytes(
        kernel.as_ref(),
        name,
        content,
        flashpipe_kernels::driver::DrivePlan::single(64 << 10),
        &mut output,
    )
    .expect("the kernel runs in memory");
    output
}

fn summarize(found: &BTreeMap<String, Vec<u8>>, touched: &TouchedFiles) -> String {
    touched
        .iter()
        .map(|(name, before)| {
            let now = found.get(name).map_or("absent".to_string(), |bytes| {
                format!("{} bytes", bytes.len())
            });
            let then = before.as_ref().map_or("absent".to_string(), |bytes| {
                format!("{} bytes", bytes.len())
            });
            format!("{name}: {now}, was {then}")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Runs the campaign on one store kind with a fresh (or the replayed) seed; a failure
/// names the seed and the command that replays it.
fn kill_campaign(kind: &'static StoreKind) {
    let seed = campaign_seed();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        kill_campaign_with_seed(kind, seed);
    }));
    if let Err(panic) = outcome {
        eprintln!(
            "kill -9 campaign on a {} store failed with seed {seed}; replay with FLASHPIPE_SEED={seed} cargo test --release -p flashpipe-cli --test kill_nine",
            kind.label
        );
        std::panic::resume_unwind(panic);
    }
}

/// Runs the campaign on one store kind with `seed` and checks its figures.
fn kill_campaign_with_seed(kind: &'static StoreKind, seed: u64) {
    let kills = kills_per_kind();
    eprintln!(
        "kill -9 campaign on a {} store: seed {seed} (FLASHPIPE_SEED={seed} replays the workload), {kills} kills",
        kind.label
    );
    let mut harness = Harness::new(kind, seed);
    let mut round = 0;
    while harness.figures.kills_mid_command < kills {
        let landed_before = harness.figures.kills_mid_command;
        harness.run_round(round);
        round += 1;
        let landed = harness.figures.kills_mid_command;
        if landed > landed_before && landed % PROGRESS_EVERY_KILLS == 0 {
            eprintln!(
                "{} store: {landed} kills landed mid-command, {} commands, losses 0 so far, atomicity findings {}",
                kind.label,
                harness.figures.commands,
                harness.figures.atomicity_findings.len()
            );
        }
        assert!(
            round < kills * 20 + 100,
            "{} store: {round} rounds and only {} kills landed mid-command",
            kind.label,
            harness.figures.kills_mid_command
        );
    }
    harness.check_final();
    let figures = &harness.figures;
    let (commands, kills, acknowledged) = (figures.commands, figures.kills, figures.acknowledged);
    let (mid_command, committed) = (figures.kills_mid_command, figures.killed_commands_committed);
    let losses = figures.durability_losses.len();
    let findings = figures.atomicity_findings.len();
    eprintln!(
        "{} store, seed {seed}: {commands} commands, {kills} kill signals, {mid_command} landed \
         mid-command ({committed} of those commands had committed), {acknowledged} acknowledged, \
         losses {losses}, atomicity findings {findings}",
        kind.label
    );
    if figures.kills_after_log_commit + figures.kills_after_checkpoint > 0 {
        eprintln!(
            "  durable commit after a kill: a log commit {} times (up to {} records beyond the checkpoint), a checkpoint {} times",
            figures.kills_after_log_commit,
            figures.most_log_records_after_kill,
            figures.kills_after_checkpoint
        );
    }
    for (kind_of_command, (commands, kills)) in &figures.per_kind {
        eprintln!("  {kind_of_command}: {commands} commands, {kills} killed mid-command");
    }
    for finding in &figures.atomicity_findings {
        eprintln!("  atomicity finding: {finding}");
    }
    assert!(figures.durability_losses.is_empty(), "{figures:#?}");
    assert!(
        figures.atomicity_findings.is_empty(),
        "{} store, seed {seed}: a killed command left a torn outcome: {:#?}",
        kind.label,
        figures.atomicity_findings
    );
}

#[test]
fn a_file_store_survives_kill_nine() {
    kill_campaign(&FILE_STORE);
}

#[test]
fn a_file_store_with_a_long_log_survives_kill_nine() {
    kill_campaign(&LONG_LOG_FILE_STORE);
}

#[test]
fn a_striped_store_survives_kill_nine() {
    kill_campaign(&STRIPED_STORE);
}

#[test]
fn an_emulated_flash_store_survives_kill_nine() {
    kill_campaign(&FLASH_STORE);
}

#[test]
fn a_flash_aware_store_survives_kill_nine() {
    kill_campaign(&FLASH_AWARE_STORE);
}
