//! Read-only means read-only, and damage stays local (issue 10, items 3 and 6), through
//! the public API on RAM disks:
//! - a device wrapper that counts every request but reads proves that read-only mounts
//!   (with every change refused), fsck without repair, and the mount's refusals write
//!   nothing;
//! - a flipped byte in the newest super block slot: mount (read-write or read-only)
//!   refuses, naming the damage and the commit it could fall back to; fsck says what a
//!   fallback loses; only `fsck --repair` falls back, listing the lost files;
//! - both slots damaged: repair rebuilds from a damaged slot only when its salvaged
//!   super block describes a commit that loads without a finding; otherwise it refuses
//!   and writes nothing;
//! - one damaged block of each metadata structure (name table, inode table, indirect
//!   block, free list) costs only the files it describes: repair keeps every other file
//!   byte-exact, reports each file it drops, truncates or renames, and the repaired file
//!   system mounts and passes fsck.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use flashpipe_device::{BlockDevice, DeviceErrorKind, Operation, Request};
use flashpipe_fs::{
    fsck, CopyMethod, FileId, FileIoError, Filesystem, FormatOptions, LostFileOutcome, MountError,
    NamespaceError, Structure,
};
use flashpipe_testkit::hooked::{Hooked, Hooks};
use support::{pattern, SharedDisk};

const BLOCK_SIZE: u64 = 4096;
const DEVICE_BLOCKS: u64 = 512 * 8 * 4;
const IMAGE_BYTES: usize = (DEVICE_BLOCKS * 512) as usize;

/// A shared disk that counts every request that is not a read (writes, flushes, trims,
/// copies), so a test can prove that nothing was written.
#[derive(Clone)]
struct CountingDisk {
    disk: SharedDisk,
    changes: ChangeCounter,
}

/// The count of requests that are not reads.
#[derive(Clone)]
struct ChangeCounter(Arc<AtomicU64>);

impl Hooks for ChangeCounter {
    fn before_submit(&mut self, request: &Request) -> Result<(), DeviceErrorKind> {
        if !matches!(request.operation, Operation::Read { .. }) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

impl CountingDisk {
    fn new(disk: &SharedDisk) -> CountingDisk {
        CountingDisk {
            disk: disk.clone(),
            changes: ChangeCounter(Arc::new(AtomicU64::new(0))),
        }
    }

    fn boxed(&self) -> Box<dyn BlockDevice> {
        Box::new(Hooked::new(self.disk.clone(), self.changes.clone()))
    }

    fn changes(&self) -> u64 {
        self.changes.0.load(Ordering::SeqCst)
    }
}

/// Name -> contents.
type Files = BTreeMap<String, Vec<u8>>;

fn contents(fs: &mut Filesystem) -> Files {
    fs.list()
        .into_iter()
        .map(|stat| {
            let bytes = fs.read(stat.file_id, 0, stat.size_bytes).unwrap().to_vec();
            (stat.name, bytes)
        })
        .collect()
}

/// Name -> inode number.
fn inodes(fs: &Filesystem) -> BTreeMap<String, u64> {
    fs.list()
        .into_iter()
        .map(|stat| (stat.name, stat.file_id.0))
        .collect()
}

/// An image over three commits: 300 small files (several name and inode table blocks),
/// two files long enough for indirect chains; commit 3 adds "newest" and rewrites
/// "chained". Returns the disk, the files at commits 2 and 3, and the metadata blocks.
struct Built {
    disk: SharedDisk,
    files_at_commit_2: Files,
    files: Files,
    metadata: Vec<(Structure, u64)>,
    inodes: BTreeMap<String, u64>,
}

fn build_image() -> Built {
    let disk = SharedDisk::new(512, DEVICE_BLOCKS);
    let mut fs = Filesystem::format(disk.boxed(), &FormatOptions::default()).unwrap();
    for index in 0..300u64 {
        let file = fs.create(&format!("small-{index:03}")).unwrap();
        fs.write(file, 0, &pattern(100 + index as usize, index))
            .unwrap();
    }
    let chained = fs.create("chained").unwrap();
    fs.write(chained, 0, &pattern(700 * BLOCK_SIZE as usize + 5, 1000))
        .unwrap();
    let long = fs.create("long").unwrap();
    fs.write(long, 0, &pattern(30 * BLOCK_SIZE as usize, 1001))
        .unwrap();
    fs.flush().unwrap();
    let files_at_commit_2 = contents(&mut fs);
    let newest = fs.create("newest").unwrap();
    fs.write(newest, 0, b"only in commit 3").unwrap();
    fs.write(chained, 3, b"changed in commit 3").unwrap();
    fs.flush().unwrap();
    assert_eq!(fs.stats().commit_sequence, 3);
    let files = contents(&mut fs);
    let metadata = fs.metadata_blocks();
    let inodes = inodes(&fs);
    fs.unmount().unwrap();
    Built {
        disk,
        files_at_commit_2,
        files,
        metadata,
        inodes,
    }
}

fn flip(disk: &SharedDisk, byte_offset: u64) {
    let block_start = byte_offset / 512 * 512;
    let mut bytes = disk.peek(block_start, 512);
    bytes[(byte_offset - block_start) as usize] ^= 0xff;
    disk.poke(block_start, &bytes);
}

fn blocks_of(metadata: &[(Structure, u64)], wanted: Structure) -> Vec<u64> {
    metadata
        .iter()
        .filter(|entry| entry.0 == wanted)
        .map(|entry| entry.1)
        .collect()
}

#[test]
fn a_read_only_mount_refuses_every_change_and_writes_nothing() {
    let built = build_image();
    let counting = CountingDisk::new(&built.disk);
    let image_before = built.disk.peek(0, IMAGE_BYTES);
    let mut fs = Filesystem::mount_read_only(counting.boxed()).unwrap();
    assert!(fs.is_read_only());
    assert_eq!(contents(&mut fs), built.files);
    let small = fs.open("small-000").unwrap();
    let namespace_refusals = [
        fs.create("new").err(),
        fs.delete("small-000").err(),
        fs.rename("small-000", "renamed").err(),
    ];
    for refusal in namespace_refusals {
        assert!(
            matches!(refusal, Some(NamespaceError::ReadOnly { .. })),
            "{refusal:?}"
        );
    }
    let io_refusals = [
        fs.write(small, 0, b"x").err(),
        fs.truncate(small, 0).err(),
        fs.write_batch(&[(small, 0, b"y".as_slice())])
            .pop()
            .unwrap()
            .err(),
    ];
    for refusal in io_refusals {
        assert!(
            matches!(refusal, Some(FileIoError::ReadOnly { .. })),
            "{refusal:?}"
        );
    }
    let copy_refusal = fs
        .copy_file("small-000", "copy", CopyMethod::Bytes)
        .unwrap_err();
    assert!(
        copy_refusal.to_string().contains("read-only"),
        "{copy_refusal}"
    );
    let range_refusal = fs
        .copy_range(small, 0, small, 0, 1, CopyMethod::Bytes)
        .unwrap_err();
    assert!(
        range_refusal.to_string().contains("read-only"),
        "{range_refusal}"
    );
    fs.flush().unwrap();
    assert!(fs.check().unwrap().is_clean());
    fs.unmount().unwrap();
    assert_eq!(counting.changes(), 0, "a read-only mount sent changes");
    let report = fsck(&mut counting.boxed(), false).unwrap();
    assert!(report.is_clean(), "{report}");
    assert_eq!(counting.changes(), 0, "fsck without repair sent changes");
    assert!(built.disk.peek(0, IMAGE_BYTES) == image_before);
}

#[test]
fn a_damaged_newest_slot_is_refused_until_repair_falls_back_and_lists_the_losses() {
    let built = build_image();
    // Commit 3 is in slot 1 (commit s goes to slot s % 2), at byte BLOCK_SIZE.
    flip(&built.disk, BLOCK_SIZE + 200);
    let image_before = built.disk.peek(0, IMAGE_BYTES);
    let counting = CountingDisk::new(&built.disk);
    for read_only in [false, true] {
        let mounted = if read_only {
            Filesystem::mount_read_only(counting.boxed())
        } else {
            Filesystem::mount(counting.boxed())
        };
        let Err(MountError::DamagedSuperBlock { damage }) = mounted else {
            panic!("the damaged newest slot was not refused");
        };
        assert_eq!(
            (
                damage.slot,
                damage.claimed_sequence,
                damage.fallback_sequence
            ),
            (1, Some(3), 2)
        );
        let message = MountError::DamagedSuperBlock { damage }.to_string();
        for expected in ["slot 1", "checksum mismatch", "commit 2", "fsck --repair"] {
            assert!(message.contains(expected), "{message} lacks {expected:?}");
        }
    }
    let report = fsck(&mut counting.boxed(), false).unwrap();
    assert_eq!(counting.changes(), 0, "refusals and fsck sent changes");
    assert!(built.disk.peek(0, IMAGE_BYTES) == image_before);
    assert!(!report.is_clean());
    let text = report.to_string();
    assert!(
        text.contains("slot 1") && text.contains("commit 2"),
        "{text}"
    );
    let fallback = report
        .slot_fallback
        .clone()
        .expect("the fallback is described");
    assert!(fallback.drops_a_commit);
    let changes = fallback.lost_changes.clone().expect("commit 3 can be read");
    assert!(
        changes.iter().any(|line| line.contains("\"newest\"")),
        "{changes:?}"
    );
    assert!(
        changes
            .iter()
            .any(|line| line.contains("\"chained\" changed")),
        "{changes:?}"
    );
    assert!(report.findings[0].problem.contains("\"newest\""), "{text}");

    let repaired = fsck(&mut built.disk.boxed(), true).unwrap();
    assert!(repaired.repair_refused.is_none(), "{repaired}");
    let lines = repaired.repaired.join("\n");
    assert!(lines.contains("dropped commit 3"), "{lines}");
    assert!(lines.contains("\"newest\""), "{lines}");
    assert!(fsck(&mut built.disk.boxed(), false).unwrap().is_clean());
    let mut fs = Filesystem::mount(built.disk.boxed()).unwrap();
    assert_eq!(contents(&mut fs), built.files_at_commit_2);
}

#[test]
fn with_both_slots_damaged_beyond_salvage_repair_refuses_and_writes_nothing() {
    let built = build_image();
    // The map head (offset 64) of both slots: no commit can be found.
    flip(&built.disk, 64);
    flip(&built.disk, BLOCK_SIZE + 64);
    let image_before = built.disk.peek(0, IMAGE_BYTES);
    let counting = CountingDisk::new(&built.disk);
    let report = fsck(&mut counting.boxed(), true).unwrap();
    assert_eq!(counting.changes(), 0);
    assert!(report.repaired.is_empty(), "{report}");
    let refusal = report.repair_refused.clone().unwrap();
    assert!(refusal.contains("no commit can be found"), "{refusal}");
    assert!(report.to_string().contains("repair refused"));
    assert!(Filesystem::mount(counting.boxed()).is_err());
    assert_eq!(counting.changes(), 0);
    assert!(built.disk.peek(0, IMAGE_BYTES) == image_before);
}

#[test]
fn with_both_slots_damaged_in_reserved_bytes_repair_salvages_the_newest_commit() {
    let built = build_image();
    flip(&built.disk, 200);
    flip(&built.disk, BLOCK_SIZE + 200);
    let counting = CountingDisk::new(&built.disk);
    assert!(Filesystem::mount_read_only(counting.boxed()).is_err());
    let checked = fsck(&mut counting.boxed(), false).unwrap();
    assert_eq!(counting.changes(), 0);
    assert_eq!(checked.commit_sequence, Some(3));
    assert!(
        checked.to_string().contains("rebuilds both slots"),
        "{checked}"
    );
    let repaired = fsck(&mut built.disk.boxed(), true).unwrap();
    assert!(repaired.repair_refused.is_none(), "{repaired}");
    assert!(
        repaired.repaired[0].contains("describes commit 3"),
        "{repaired}"
    );
    assert!(fsck(&mut built.disk.boxed(), false).unwrap().is_clean());
    let mut fs = Filesystem::mount(built.disk.boxed()).unwrap();
    assert_eq!(contents(&mut fs), built.files);
}

/// Damages the payload of `block`, checks the refusals, repairs, and returns the
/// repaired file system's contents with the repair's lost-file list.
/// Block `index` of `structure` in `built`'s metadata, of which there must be `least`.
fn structure_block(built: &Built, structure: Structure, least: usize, index: usize) -> u64 {
    let blocks = blocks_of(&built.metadata, structure);
    assert!(blocks.len() >= least, "{structure:?}: {blocks:?}");
    blocks[index]
}

fn damage_and_repair(
    built: &Built,
    block: u64,
    payload_offset: u64,
) -> (Files, Vec<flashpipe_fs::LostFile>) {
    flip(&built.disk, block * BLOCK_SIZE + 40 + payload_offset);
    let counting = CountingDisk::new(&built.disk);
    let error = Filesystem::mount(counting.boxed()).err().unwrap();
    assert!(
        matches!(error, MountError::Corrupt { .. }) && error.to_string().contains("fsck --repair"),
        "{error}"
    );
    assert!(Filesystem::mount_read_only(counting.boxed()).is_err());
    let checked = fsck(&mut counting.boxed(), false).unwrap();
    assert!(!checked.is_clean());
    assert_eq!(counting.changes(), 0);
    let report = fsck(&mut built.disk.boxed(), true).unwrap();
    assert!(report.repair_refused.is_none(), "{report}");
    assert!(!report.repaired.is_empty(), "{report}");
    assert!(
        fsck(&mut built.disk.boxed(), false).unwrap().is_clean(),
        "the repaired image is not clean"
    );
    let mut fs = Filesystem::mount(built.disk.boxed()).unwrap();
    (contents(&mut fs), report.lost_files)
}

#[test]
fn a_damaged_inode_table_block_costs_only_its_files() {
    let built = build_image();
    let block = structure_block(&built, Structure::InodeTable, 3, 1);
    let (after, lost) = damage_and_repair(&built, block, 100);
    let dropped: Vec<&str> = lost
        .iter()
        .filter(|file| file.outcome == LostFileOutcome::Dropped)
        .map(|file| file.name.as_deref().unwrap())
        .collect();
    assert!(!dropped.is_empty());
    assert_eq!(lost.len(), dropped.len(), "{lost:?}");
    assert!(lost[0].reason.contains("inode table"), "{}", lost[0]);
    for (name, bytes) in &built.files {
        match after.get(name) {
            Some(kept) => assert!(kept == bytes, "{name} changed"),
            None => assert!(dropped.contains(&name.as_str()), "{name} lost silently"),
        }
    }
    assert_eq!(after.len() + dropped.len(), built.files.len());
}

#[test]
fn a_damaged_name_table_block_keeps_its_files_under_lost_and_found() {
    let built = build_image();
    let block = structure_block(&built, Structure::NameTable, 2, 0);
    let (after, lost) = damage_and_repair(&built, block, 10);
    assert!(!lost.is_empty());
    assert_eq!(after.len(), built.files.len(), "every file is kept");
    let by_inode: BTreeMap<u64, &String> = built
        .inodes
        .iter()
        .map(|(name, &inode)| (inode, name))
        .collect();
    for file in &lost {
        let LostFileOutcome::Renamed { to } = &file.outcome else {
            panic!("{file}");
        };
        assert_eq!(to, &format!("lost+found.{}", file.inode_number));
        let original = by_inode[&file.inode_number];
        assert!(after[to] == built.files[original], "{original} as {to}");
    }
    for (name, bytes) in &after {
        if !name.starts_with("lost+found.") {
            assert!(built.files[name] == *bytes, "{name} changed");
        }
    }
}

#[test]
fn a_damaged_indirect_block_truncates_only_its_file() {
    let built = build_image();
    let block = structure_block(&built, Structure::IndirectBlock, 2, 1);
    let (after, lost) = damage_and_repair(&built, block, 16);
    assert_eq!(lost.len(), 1, "{lost:?}");
    let victim = lost[0].name.clone().unwrap();
    let LostFileOutcome::Truncated {
        from_size_bytes,
        to_size_bytes,
    } = lost[0].outcome
    else {
        panic!("{}", lost[0]);
    };
    assert_eq!(from_size_bytes, built.files[&victim].len() as u64);
    assert!(to_size_bytes < from_size_bytes && to_size_bytes % BLOCK_SIZE == 0);
    assert!(after[&victim][..] == built.files[&victim][..to_size_bytes as usize]);
    for (name, bytes) in &built.files {
        if *name != victim {
            assert!(after[name] == *bytes, "{name} changed");
        }
    }
}

#[test]
fn a_damaged_free_list_block_is_rebuilt_and_costs_no_file() {
    let built = build_image();
    let free_blocks = blocks_of(&built.metadata, Structure::FreeList);
    let (after, lost) = damage_and_repair(&built, free_blocks[0], 3);
    assert!(lost.is_empty(), "{lost:?}");
    assert_eq!(after, built.files);
}

#[test]
fn a_file_handle_of_a_read_only_mount_still_reads() {
    let built = build_image();
    let mut fs = Filesystem::mount_read_only(built.disk.boxed()).unwrap();
    let file: FileId = fs.open("long").unwrap();
    let bytes = fs.read(file, BLOCK_SIZE, 10).unwrap();
    assert!(bytes[..] == built.files["long"][BLOCK_SIZE as usize..BLOCK_SIZE as usize + 10]);
}
