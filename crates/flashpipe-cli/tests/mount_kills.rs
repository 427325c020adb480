//! The mount's kill campaign (sled's way, as `kill_nine.rs` does for the store commands): a
//! foreground `flashpipe mount` of a file store serves a writer that makes files through it
//! (`dd`, some with `conv=fsync`, some without, sizes drawn from the seed) while the test
//! kills the mount process with SIGKILL at a random moment. After each kill: the dead mount
//! is detached, `fsck` finds the store clean, and every file whose `dd ... conv=fsync`
//! returned before the kill reads back byte for byte through the CLI (fsync acknowledged
//! it). A file not acknowledged may be absent or hold what a commit caught of it, always a
//! prefix of what was written (the writer's `dd` writes in order), never other bytes.
//!
//! `FLASHPIPE_KILLS=N` sets the kills (default [`DEFAULT_KILLS`]); each campaign draws a
//! random seed and prints it; `FLASHPIPE_SEED=S` replays the files and kill delays of seed
//! `S` (where a kill lands also depends on the machine). Needs /dev/fuse and fusermount3:
//! without them it prints why and returns, and fails under `FLASHPIPE_REQUIRE_TOOLS=1`.

mod common;
mod mount_support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{flashpipe, fresh_folder, succeed, text};
use flashpipe_device::SplitMix64;
use flashpipe_testkit::seeds;
use mount_support::{fuse_available, store_and_mount_point, Mounted};

/// Kills in the default suite.
const DEFAULT_KILLS: u64 = 6;
/// Files the writer makes per round at most.
const FILES_PER_ROUND: u64 = 12;
/// Largest file, in 64 KiB blocks.
const MOST_BLOCKS: u64 = 48;
/// Longest wait before the kill, in milliseconds.
const MOST_KILL_DELAY_MS: u64 = 600;

fn kills() -> u64 {
    std::env::var("FLASHPIPE_KILLS")
        .ok()
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(DEFAULT_KILLS)
}

/// One file the writer makes: its name, its source and whether `dd` fsyncs it.
struct Planned {
    name: String,
    synced: bool,
}

/// The writer's shell line: each file copied from its source by `dd` (with `conv=fsync`
/// when synced), its name printed once `dd` returned.
fn writer_line(files: &[Planned]) -> String {
    files
        .iter()
        .map(|file| {
            let sync = if file.synced { " conv=fsync" } else { "" };
            format!(
                "dd if=src/{name} of=m/{name} bs=64k{sync} status=none && echo {name}",
                name = file.name
            )
        })
        .collect::<Vec<_>>()
        .join(" && ")
}

/// Writes each planned file's source bytes under `root/src`.
fn write_sources(root: &Path, files: &[Planned], generator: &mut SplitMix64) {
    std::fs::create_dir_all(root.join("src")).expect("src folder");
    for file in files {
        let blocks = 1 + generator.next_u64() % MOST_BLOCKS;
        let mut bytes = vec![0u8; (blocks * 65536 - generator.next_u64() % 4096) as usize];
        for chunk in bytes.chunks_mut(8) {
            let word = generator.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
        std::fs::write(root.join("src").join(&file.name), bytes).expect("source");
    }
}

/// One round: mount, write, kill after `delay_ms`; the names `dd` finished before the kill.
fn kill_round(
    store: &Path,
    directory: &Path,
    root: &Path,
    files: &[Planned],
    delay_ms: u64,
) -> Vec<String> {
    let mount = Mounted::start(store, directory, &[]);
    let mut writer = Command::new("sh")
        .args(["-c", &writer_line(files)])
        .current_dir(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the writer starts");
    let stdout = writer.stdout.take().expect("piped");
    let (lines, done) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    std::thread::sleep(Duration::from_millis(delay_ms));
    // every name read before the kill is acknowledged; one printed after it was not yet
    // known to the test, so it is not counted (never a false loss)
    let acknowledged: Vec<String> = done.try_iter().collect();
    mount.kill();
    let _ = writer.wait();
    let _ = reader.join();
    acknowledged
}

#[test]
fn sigkill_of_a_mount_at_random_moments_keeps_what_fsync_acknowledged() {
    if !fuse_available("the mount's kill campaign") {
        return;
    }
    let seed = seeds::replayed_seed().unwrap_or_else(seeds::random_seed);
    println!("mount kill campaign: seed {seed} (FLASHPIPE_SEED={seed} replays it)");
    let mut generator = SplitMix64::new(seed);
    let folder = fresh_folder("mount-kills");
    let (store, directory) = store_and_mount_point(folder.path());
    let root = folder.path();
    let (mut kept, mut synced_files) = (0u64, 0u64);
    for round in 0..kills() {
        let count = 1 + generator.next_u64() % FILES_PER_ROUND;
        let files: Vec<Planned> = (0..count)
            .map(|index| Planned {
                name: format!("r{round}f{index}"),
                synced: generator.next_u64() % 3 != 0,
            })
            .collect();
        write_sources(root, &files, &mut generator);
        let delay_ms = generator.next_u64() % MOST_KILL_DELAY_MS;
        let acknowledged = kill_round(&store, &directory, root, &files, delay_ms);
        let report = succeed(&["fsck", text(&store)]);
        assert!(
            report.contains("clean"),
            "seed {seed} round {round}: {report}"
        );
        for file in &files {
            let source = std::fs::read(root.join("src").join(&file.name)).expect("source");
            let read = flashpipe(&["cat", text(&store), &file.name]);
            let must_be_whole = file.synced && acknowledged.contains(&file.name);
            if must_be_whole {
                synced_files += 1;
                assert!(
                    read.status.success() && read.stdout == source,
                    "seed {seed} round {round}: {} was acknowledged by fsync and is {}",
                    file.name,
                    if read.status.success() {
                        "different"
                    } else {
                        "missing"
                    }
                );
                kept += 1;
            } else if read.status.success() {
                // not acknowledged: absent, or what a commit caught of it (a prefix)
                assert!(
                    source.starts_with(&read.stdout),
                    "seed {seed} round {round}: {} is neither absent nor a prefix of what was written",
                    file.name
                );
            }
        }
        std::fs::remove_dir_all(root.join("src")).expect("sources removed");
        // the round's files go, so the store never fills (none there is no failure here)
        let _ = flashpipe(&["rm", text(&store), &format!("r{round}f*")]);
    }
    println!(
        "mount kill campaign: {} kills, {synced_files} fsync'd files checked, {kept} kept",
        kills()
    );
    assert_eq!(kept, synced_files, "seed {seed}");
}
