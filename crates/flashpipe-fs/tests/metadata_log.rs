//! The metadata log of format version 3 (docs/format.md, "Metadata log"):
//! - golden bytes of a log record built from known values, field by field as in the doc,
//!   and of a record read off the device after a real commit;
//! - the proof that a commit costs what changed: after one small file changes among
//!   thousands, a flush writes the same, small number of blocks whatever the file count
//!   (device writes counted by a wrapper device; no timing);
//! - a model-based run of random operations, flushes, full checkpoints and remounts
//!   across many log records and checkpoints (seeded; `FLASHPIPE_SEEDS=n` for more);
//! - a damaged log record: fsck names what is lost, mount refuses, `fsck --repair` keeps
//!   the commit before it;
//! - a version-2 image mounts and its first commit writes version 3.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use flashpipe_device::{BlockDevice, DeviceErrorKind, Operation, Request, SplitMix64};
use flashpipe_fs::layout::{read_u32, read_u64, write_u32, FORMAT_VERSION, METADATA_HEADER_BYTES};
use flashpipe_fs::metadata_log::{decode_record, open_log_block, LogFile, LogRecord};
use flashpipe_fs::{
    fsck, CommitPolicy, FileIoError, Filesystem, FlushError, LostFileOutcome, MountError,
    NamespaceError, Structure,
};
use flashpipe_testkit::formatted::format_fs;
use flashpipe_testkit::hooked::{Hooked, Hooks};
use flashpipe_testkit::seeds::run_seeds;
use support::{blocks_of, drop_log_region, pattern, rewrite_super_block, SharedDisk};

const BLOCK_SIZE: u64 = 4096;

fn known_record() -> LogRecord {
    LogRecord {
        commit_sequence: 0x0102,
        next_inode_number: 0x30,
        file_count: 7,
        free_block_count: 0x1234,
        removed: vec![0x21],
        files: vec![LogFile {
            inode_number: 0x2F,
            name: "ab".into(),
            size_bytes: 5000,
            indirect_head: 0,
            modified_clock_ns: 0x99,
            direct_pointers: vec![0x40, 0],
            direct_checksums: vec![Some(0xAABB_CCDD), None],
        }],
        allocated: vec![(0x40, 1)],
        freed: vec![(0x50, 3)],
        shared: None,
        chains: Vec::new(),
    }
}

/// The version-5 record start (tag 7) and a shared-count entry (tag 6), golden bytes.
#[test]
fn a_version_5_log_record_has_the_documented_bytes() {
    let record = LogRecord {
        shared: Some(vec![(0x60, 2, 3)]),
        ..known_record()
    };
    let blocks = record.encode(BLOCK_SIZE as u32, 0);
    let payload = &blocks[0][40..];
    let start: Vec<u8> = [
        &[7, 0, 0, 0][..],               // 0: tag 7, 1..4 reserved
        &[1, 0, 0, 0],                   // 4..8: record_block_count
        &[1, 0, 0, 0],                   // 8..12: removed_count
        &[1, 0, 0, 0],                   // 12..16: file_count_in_record
        &[1, 0, 0, 0],                   // 16..20: allocated_count
        &[1, 0, 0, 0],                   // 20..24: freed_count
        &[0x30, 0, 0, 0, 0, 0, 0, 0],    // 24..32: next_inode_number
        &[7, 0, 0, 0, 0, 0, 0, 0],       // 32..40: file_count
        &[0x34, 0x12, 0, 0, 0, 0, 0, 0], // 40..48: free_block_count
        &[1, 0, 0, 0],                   // 48..52: shared_count
        &[0, 0, 0, 0],                   // 52..56: reserved
    ]
    .concat();
    assert_eq!(&payload[..56], start.as_slice());
    let shared_entry: Vec<u8> = [
        &[6, 0, 0, 0][..],            // 0: tag 6, 1..4 reserved
        &[3, 0, 0, 0],                // 4..8: reference_count
        &[0x60, 0, 0, 0, 0, 0, 0, 0], // 8..16: first_block
        &[2, 0, 0, 0, 0, 0, 0, 0],    // 16..24: block_count
    ]
    .concat();
    let end = 56 + 16 + 70 + 24 + 24;
    assert_eq!(&payload[end..end + 24], shared_entry.as_slice());
    assert!(payload[end + 24..].iter().all(|&byte| byte == 0));
    assert_eq!(decode_record(&[&blocks[0][..]]), Ok(record));
}

#[test]
fn a_log_record_has_the_documented_bytes() {
    let blocks = known_record().encode(BLOCK_SIZE as u32, 5);
    assert_eq!(blocks.len(), 1);
    let payload: Vec<u8> = [
        // record start, 48 bytes
        &[1, 0, 0, 0][..],               // 0: tag 1, 1..4 reserved
        &[1, 0, 0, 0],                   // 4..8: record_block_count
        &[1, 0, 0, 0],                   // 8..12: removed_count
        &[1, 0, 0, 0],                   // 12..16: file_count_in_record
        &[1, 0, 0, 0],                   // 16..20: allocated_count
        &[1, 0, 0, 0],                   // 20..24: freed_count
        &[0x30, 0, 0, 0, 0, 0, 0, 0],    // 24..32: next_inode_number
        &[7, 0, 0, 0, 0, 0, 0, 0],       // 32..40: file_count
        &[0x34, 0x12, 0, 0, 0, 0, 0, 0], // 40..48: free_block_count
        // removed inode, 16 bytes
        &[3, 0, 0, 0, 0, 0, 0, 0],    // 0: tag 3, 1..8 reserved
        &[0x21, 0, 0, 0, 0, 0, 0, 0], // 8..16: inode_number
        // file, 4 + 40 + 12 x 2 + 2 bytes
        &[2, 0],                         // 0: tag 2, 1: reserved
        &[2, 0],                         // 2..4: name_length_bytes
        &[0x2F, 0, 0, 0, 0, 0, 0, 0],    // inode record: inode_number
        &[0x88, 0x13, 0, 0, 0, 0, 0, 0], // size_bytes 5000
        &[0, 0, 0, 0, 0, 0, 0, 0],       // indirect_head
        &[0x99, 0, 0, 0, 0, 0, 0, 0],    // modified_clock_ns
        &[2, 0, 0, 0],                   // direct_count
        &[0, 0, 0, 0],                   // reserved
        &[0x40, 0, 0, 0, 0, 0, 0, 0],    // pointer 0: block
        &[0xDD, 0xCC, 0xBB, 0xAA],       // pointer 0: data_checksum
        &[0; 12],                        // pointer 1: a hole
        b"ab",                           // name
        // allocated extent, 24 bytes
        &[4, 0, 0, 0, 0, 0, 0, 0],    // 0: tag 4, 1..8 reserved
        &[0x40, 0, 0, 0, 0, 0, 0, 0], // 8..16: first_block
        &[1, 0, 0, 0, 0, 0, 0, 0],    // 16..24: block_count
        // freed extent, 24 bytes
        &[5, 0, 0, 0, 0, 0, 0, 0],    // 0: tag 5, 1..8 reserved
        &[0x50, 0, 0, 0, 0, 0, 0, 0], // 8..16: first_block
        &[3, 0, 0, 0, 0, 0, 0, 0],    // 16..24: block_count
    ]
    .concat();
    assert_eq!(payload.len(), 48 + 16 + 70 + 24 + 24);
    let mut expected: Vec<u8> = [
        &b"LOGR"[..],                          // 0..4: kind
        &[0, 0, 0, 0],                         // 4..8: checksum (zero here)
        &[0x02, 0x01, 0, 0, 0, 0, 0, 0],       // 8..16: commit_sequence
        &[0, 0, 0, 0, 0, 0, 0, 0],             // 16..24: next_block (always 0)
        &[5, 0, 0, 0],                         // 24..28: entry_count
        &(payload.len() as u32).to_le_bytes(), // 28..32: payload_bytes
        &[5, 0, 0, 0, 0, 0, 0, 0],             // 32..40: owner = index in the log region
    ]
    .concat();
    expected.extend_from_slice(&payload);
    expected.resize(BLOCK_SIZE as usize, 0);
    let checksum = crc32c::crc32c(&expected);
    expected[4..8].copy_from_slice(&checksum.to_le_bytes());
    assert_eq!(blocks[0], expected);
    assert!(open_log_block(&blocks[0], 5, 0x0102).is_ok());
    assert_eq!(decode_record(&[&blocks[0][..]]), Ok(known_record()));
}

fn format(device: Box<dyn BlockDevice>) -> Filesystem {
    format_fs(device, BLOCK_SIZE as u32)
}

#[test]
fn a_commit_after_a_checkpoint_appends_one_record_read_back_from_the_device() {
    let shared = SharedDisk::new(4096, 4096);
    let mut fs = format(shared.boxed());
    let kept = fs.create("kept").unwrap();
    fs.write(kept, 0, b"in the checkpoint").unwrap();
    fs.flush_checkpoint().unwrap();
    assert!(blocks_of(&fs, Structure::Log).is_empty());
    let sequence = fs.stats().commit_sequence;
    let added = fs.create("added").unwrap();
    fs.write(added, 0, &pattern(100, 1)).unwrap();
    fs.delete("kept").unwrap();
    fs.flush().unwrap();
    let log = blocks_of(&fs, Structure::Log);
    assert_eq!(log.len(), 1, "one small record");
    let block = shared.peek(log[0] * BLOCK_SIZE, BLOCK_SIZE as usize);
    assert_eq!(read_u32(&block, 0), u32::from_le_bytes(*b"LOGR"));
    let header = open_log_block(&block, 0, sequence + 1).unwrap();
    assert_eq!(header.commit_sequence, sequence + 1);
    let record = decode_record(&[&block[..]]).unwrap();
    assert_eq!(record.removed, vec![kept.0]);
    assert_eq!(record.files.len(), 1);
    assert_eq!(&*record.files[0].name, "added");
    assert_eq!(record.files[0].size_bytes, 100);
    assert_eq!(record.file_count, 1);
    assert_eq!(
        record.allocated.iter().map(|e| e.1).sum::<u64>(),
        1,
        "one data block"
    );
    assert!(
        !record.freed.is_empty(),
        "the deleted file's block comes back"
    );
    let super_block = [0u64, 1]
        .iter()
        .map(|&slot| shared.peek(slot * BLOCK_SIZE, BLOCK_SIZE as usize))
        .max_by_key(|bytes| read_u64(bytes, 32))
        .unwrap();
    assert_eq!(read_u32(&super_block, 8), FORMAT_VERSION);
    assert_eq!(read_u64(&super_block, 120), 1, "log_block_count");
    assert_eq!(read_u64(&super_block, 128), 1, "log_record_count");
    drop(fs);
    let mut fs = Filesystem::mount(shared.boxed()).unwrap();
    assert!(fs.open("kept").is_err());
    let added = fs.open("added").unwrap();
    assert_eq!(fs.read(added, 0, 100).unwrap()[..], pattern(100, 1)[..]);
    assert!(fs.check().unwrap().is_clean());
}

/// A RAM disk that counts the FS blocks written and the flushes.
#[derive(Clone)]
struct CountingDisk {
    disk: SharedDisk,
    writes: WriteCounter,
}

/// The bytes and the requests written.
#[derive(Clone)]
struct WriteCounter {
    written_bytes: Arc<AtomicU64>,
    write_requests: Arc<AtomicU64>,
}

impl Hooks for WriteCounter {
    fn before_submit(&mut self, request: &Request) -> Result<(), DeviceErrorKind> {
        if let Operation::Write { buffer, .. } = &request.operation {
            self.written_bytes
                .fetch_add(buffer.len() as u64, Ordering::SeqCst);
            self.write_requests.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

impl CountingDisk {
    fn new(disk: &SharedDisk) -> CountingDisk {
        CountingDisk {
            disk: disk.clone(),
            writes: WriteCounter {
                written_bytes: Arc::new(AtomicU64::new(0)),
                write_requests: Arc::new(AtomicU64::new(0)),
            },
        }
    }

    fn boxed(&self) -> Box<dyn BlockDevice> {
        Box::new(Hooked::new(self.disk.clone(), self.writes.clone()))
    }

    /// FS blocks and write requests so far.
    fn counts(&self) -> (u64, u64) {
        (
            self.writes.written_bytes.load(Ordering::SeqCst) / BLOCK_SIZE,
            self.writes.write_requests.load(Ordering::SeqCst),
        )
    }
}

/// Blocks written by each of `rounds` flushes that each follow one 1 KiB file created
/// among `file_count` files, and by one full checkpoint after that.
fn blocks_per_flush(file_count: u64, rounds: u64, policy: CommitPolicy) -> (Vec<(u64, u64)>, u64) {
    let shared = SharedDisk::new(4096, 16384);
    let counting = CountingDisk::new(&shared);
    let mut fs = format(counting.boxed());
    fs.set_commit_policy(policy);
    for index in 0..file_count {
        let file = fs.create(&format!("file-{index:06}")).unwrap();
        fs.write(file, 0, &pattern(100, index)).unwrap();
    }
    fs.flush().unwrap();
    let mut per_flush = Vec::new();
    for round in 0..rounds {
        let file = fs.create(&format!("new-{round}")).unwrap();
        fs.write(file, 0, &pattern(1024, 1000 + round)).unwrap();
        let before = counting.counts();
        fs.flush().unwrap();
        let after = counting.counts();
        per_flush.push((after.0 - before.0, after.1 - before.1));
    }
    let file = fs.create("before-checkpoint").unwrap();
    fs.write(file, 0, b"x").unwrap();
    let before = counting.counts();
    fs.flush_checkpoint().unwrap();
    let checkpoint_blocks = counting.counts().0 - before.0;
    assert!(fs.check().unwrap().is_clean());
    (per_flush, checkpoint_blocks)
}

#[test]
fn a_flush_after_one_small_change_writes_the_same_few_blocks_whatever_the_file_count() {
    let (small, small_checkpoint) = blocks_per_flush(1000, 4, CommitPolicy::LogWhenItFits);
    let (large, large_checkpoint) = blocks_per_flush(4000, 4, CommitPolicy::LogWhenItFits);
    eprintln!(
        "blocks (and write requests) per flush: 1,000 files {small:?}, 4,000 files {large:?}; \
         a full checkpoint: {small_checkpoint} and {large_checkpoint} blocks"
    );
    assert_eq!(
        small, large,
        "the commit's cost does not depend on the file count"
    );
    for &(blocks, _) in &small {
        assert!(
            blocks <= 2,
            "one log block and the super block, got {blocks}"
        );
    }
    assert!(
        large_checkpoint > 3 * small_checkpoint.max(1) && large_checkpoint > 40,
        "a checkpoint grows with the file count ({small_checkpoint} -> {large_checkpoint})"
    );
    let (every_small, _) = blocks_per_flush(1000, 2, CommitPolicy::CheckpointEveryCommit);
    let (every_large, _) = blocks_per_flush(4000, 2, CommitPolicy::CheckpointEveryCommit);
    eprintln!("with a checkpoint at every commit: {every_small:?} and {every_large:?}");
    assert!(
        every_large[1].0 > 3 * every_small[1].0 && every_small[1].0 > 10 * small[1].0,
        "the version-2 way grows with the file count"
    );
}

/// Names the model run uses (few, so that operations collide).
const MODEL_NAMES: [&str; 8] = ["a", "b", "c", "d", "e", "long-name-for-a-file", "g", "h"];

/// One seeded run: random creates, writes, truncates, renames, deletes, flushes, full
/// checkpoints and remounts against a plain model; after every remount the files equal
/// the model of the last flush and fsck is clean. Returns how many remounts replayed a
/// non-empty log.
fn run_model_seed(seed: u64) -> u64 {
    let mut rng = SplitMix64::new(seed);
    let device_blocks = if rng.chance(0.3) { 96 } else { 2048 };
    let shared = SharedDisk::new(4096, device_blocks);
    let mut fs = format(shared.boxed());
    let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut flushed = model.clone();
    let mut replayed_logs = 0;
    for step in 0..200 {
        let context = format!("seed {seed} step {step}");
        let name = MODEL_NAMES[rng.below(MODEL_NAMES.len() as u64) as usize];
        match rng.below(12) {
            0 | 1 => match fs.create(name) {
                Ok(_) => {
                    model.insert(name.to_string(), Vec::new());
                }
                Err(NamespaceError::Exists { .. } | NamespaceError::NoSpace { .. }) => {}
                Err(error) => panic!("{context}: create: {error}"),
            },
            2..=4 => {
                let Ok(file) = fs.open(name) else { continue };
                let offset = rng.below(6 * BLOCK_SIZE);
                let bytes = pattern(1 + rng.below(20 * BLOCK_SIZE) as usize, rng.next_u64());
                match fs.write(file, offset, &bytes) {
                    Ok(()) => {
                        let contents = model.get_mut(name).unwrap();
                        let end = offset as usize + bytes.len();
                        if contents.len() < end {
                            contents.resize(end, 0);
                        }
                        contents[offset as usize..end].copy_from_slice(&bytes);
                    }
                    Err(FileIoError::NoSpace { .. }) => {}
                    Err(error) => panic!("{context}: write: {error}"),
                }
            }
            5 => {
                let Ok(file) = fs.open(name) else { continue };
                let size = rng.below(15 * BLOCK_SIZE);
                match fs.truncate(file, size) {
                    Ok(()) => model.get_mut(name).unwrap().resize(size as usize, 0),
                    Err(FileIoError::NoSpace { .. }) => {}
                    Err(error) => panic!("{context}: truncate: {error}"),
                }
            }
            6 => {
                let to = MODEL_NAMES[rng.below(MODEL_NAMES.len() as u64) as usize];
                if model.contains_key(name) {
                    match fs.rename_replacing(name, to) {
                        Ok(()) => {
                            let contents = model.remove(name).unwrap();
                            model.insert(to.to_string(), contents);
                        }
                        Err(NamespaceError::NoSpace { .. }) => {}
                        Err(error) => panic!("{context}: rename: {error}"),
                    }
                }
            }
            7 => {
                if fs.delete(name).is_ok() {
                    model.remove(name);
                }
            }
            8 | 9 => match fs.flush() {
                Ok(()) => flushed = model.clone(),
                Err(FlushError::NoSpace { .. }) => {}
                Err(error) => panic!("{context}: flush: {error}"),
            },
            10 => match fs.flush_checkpoint() {
                Ok(()) => flushed = model.clone(),
                Err(FlushError::NoSpace { .. }) => {}
                Err(error) => panic!("{context}: checkpoint: {error}"),
            },
            _ => {
                let had_log = !blocks_of(&fs, Structure::Log).is_empty();
                drop(fs);
                fs = Filesystem::mount(shared.boxed())
                    .unwrap_or_else(|error| panic!("{context}: mount: {error}"));
                replayed_logs += u64::from(had_log);
                let report = fs.check().unwrap();
                assert!(report.is_clean(), "{context}: fsck: {report}");
                model = flushed.clone();
                check_files(&mut fs, &model, &context);
            }
        }
    }
    replayed_logs
}

fn check_files(fs: &mut Filesystem, model: &BTreeMap<String, Vec<u8>>, context: &str) {
    let names: Vec<String> = fs.list().into_iter().map(|stat| stat.name).collect();
    assert_eq!(
        names,
        model.keys().cloned().collect::<Vec<_>>(),
        "{context}: names"
    );
    for (name, expected) in model {
        let file = fs.open(name).unwrap();
        let read = fs.read(file, 0, expected.len() as u64).unwrap();
        assert!(read[..] == expected[..], "{context}: contents of {name:?}");
    }
}

#[test]
fn random_operations_with_logs_checkpoints_and_remounts_match_a_model() {
    let replayed: u64 = run_seeds(40, run_model_seed).into_iter().sum();
    eprintln!("model run: {replayed} remounts replayed a non-empty log");
    assert!(replayed > 20, "logs were replayed too rarely ({replayed})");
}

/// A store with a checkpoint holding "base" and three log records creating "log-1",
/// "log-2" and "log-3".
fn store_with_three_records() -> (SharedDisk, Vec<u64>) {
    let shared = SharedDisk::new(4096, 4096);
    let mut fs = format(shared.boxed());
    let base = fs.create("base").unwrap();
    fs.write(base, 0, b"base").unwrap();
    fs.flush_checkpoint().unwrap();
    for index in 1..=3 {
        let file = fs.create(&format!("log-{index}")).unwrap();
        fs.write(file, 0, &pattern(10, index)).unwrap();
        fs.flush().unwrap();
    }
    let log = blocks_of(&fs, Structure::Log);
    assert_eq!(log.len(), 3);
    drop(fs.unmount().unwrap());
    (shared, log)
}

fn names(fs: &Filesystem) -> Vec<String> {
    fs.list().into_iter().map(|stat| stat.name).collect()
}

#[test]
fn a_damaged_log_record_is_reported_with_what_it_loses_and_repair_keeps_the_commit_before() {
    let (shared, log) = store_with_three_records();
    let mut block = shared.peek(log[1] * BLOCK_SIZE, BLOCK_SIZE as usize);
    block[METADATA_HEADER_BYTES + 68] ^= 0x04;
    shared.poke(log[1] * BLOCK_SIZE, &block);

    let image_before = shared.peek(0, 4096 * 4096);
    let report = fsck(&mut shared.boxed(), false).unwrap();
    let finding = report
        .findings
        .iter()
        .find(|finding| finding.structure == Structure::Log)
        .unwrap_or_else(|| panic!("the damaged record is reported: {report}"));
    assert_eq!(finding.block, Some(log[1]));
    assert!(finding.repairable);
    let text = finding.to_string();
    assert!(
        text.contains("checksum") && text.contains("\"log-2\"") && text.contains("\"log-3\""),
        "the finding names the damage and the lost files: {text}"
    );
    let rolled_back: Vec<&str> = report
        .lost_files
        .iter()
        .filter(|lost| matches!(lost.outcome, LostFileOutcome::RolledBack { .. }))
        .filter_map(|lost| lost.name.as_deref())
        .collect();
    assert_eq!(rolled_back, vec!["log-2", "log-3"], "{report}");
    assert!(matches!(
        Filesystem::mount(shared.boxed()),
        Err(MountError::Corrupt { .. })
    ));
    assert!(
        shared.peek(0, 4096 * 4096) == image_before,
        "fsck and a refused mount write nothing"
    );

    let repaired = fsck(&mut shared.boxed(), true).unwrap();
    assert!(!repaired.repaired.is_empty(), "{repaired}");
    assert!(fsck(&mut shared.boxed(), false).unwrap().is_clean());
    let mut fs = Filesystem::mount(shared.boxed()).unwrap();
    assert_eq!(names(&fs), vec!["base", "log-1"]);
    let file = fs.open("log-1").unwrap();
    assert_eq!(fs.read(file, 0, 10).unwrap()[..], pattern(10, 1)[..]);
    assert!(
        blocks_of(&fs, Structure::Log).is_empty(),
        "repair writes a checkpoint"
    );
}

#[test]
fn a_version_2_image_mounts_and_its_first_commit_writes_version_3() {
    let shared = SharedDisk::new(4096, 4096);
    let mut fs = format(shared.boxed());
    let old = fs.create("old").unwrap();
    fs.write(old, 0, &pattern(20 * BLOCK_SIZE as usize, 5))
        .unwrap();
    fs.flush_checkpoint().unwrap();
    let newest_slot = fs.stats().commit_sequence % 2;
    let rewritten = rewrite_super_block(&shared, newest_slot, |super_block| {
        drop_log_region(&fs, &shared, super_block);
        write_u32(super_block, 8, 2);
    });
    assert!(rewritten, "the newest slot holds a super block");
    drop(fs);

    assert!(fsck(&mut shared.boxed(), false).unwrap().is_clean());
    let mut fs = Filesystem::mount(shared.boxed()).unwrap();
    let version_of = |slot: u64| read_u32(&shared.peek(slot * BLOCK_SIZE, BLOCK_SIZE as usize), 8);
    assert_eq!(version_of(newest_slot), 2);
    let new = fs.create("new").unwrap();
    fs.write(new, 0, b"written by version 3").unwrap();
    fs.flush().unwrap();
    assert_eq!(
        version_of(1 - newest_slot),
        FORMAT_VERSION,
        "the upgrade commit"
    );
    assert!(
        blocks_of(&fs, Structure::Log).is_empty(),
        "it is a checkpoint"
    );
    fs.write(new, 0, b"W").unwrap();
    fs.flush().unwrap();
    assert_eq!(
        blocks_of(&fs, Structure::Log).len(),
        1,
        "then the log is used"
    );
    drop(fs);
    let mut fs = Filesystem::mount(shared.boxed()).unwrap();
    assert!(fs.check().unwrap().is_clean());
    let old = fs.open("old").unwrap();
    assert_eq!(
        fs.read(old, 0, 20 * BLOCK_SIZE).unwrap()[..],
        pattern(20 * BLOCK_SIZE as usize, 5)[..]
    );
    let new = fs.open("new").unwrap();
    assert_eq!(&fs.read(new, 0, 20).unwrap()[..], b"Written by version 3");
}
