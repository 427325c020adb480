//! File attributes (format version 6, docs/format.md, "Inode table"): the mode, owner
//! and wall-clock modification time a user sets with `set_attributes` are committed by
//! the next flush and survive a log commit, a checkpoint, a remount (log replay) and a
//! crash right after the flush; rename keeps them, a copy and a new file start with none.
//! The inode record with attributes has the documented bytes (golden). A version-5 image
//! mounts read-only and passes fsck unchanged, and its first read-write commit writes
//! version 6 with its data kept. Hostile records (undefined flag bits, mode bits outside
//! 0o7777, attributes in a version-5 image) are fsck findings and refused at mount;
//! hostile requests change nothing. A crash at every point of a flush (log commit or
//! checkpoint) that sets attributes on several files keeps all of them or none; a log
//! record with undefined attribute flags is damage fsck reports and mount refuses.

mod support;

use flashpipe_device::sim::{SimDiskConfig, SimWorld};
use flashpipe_device::BlockDevice;
use flashpipe_fs::layout::{
    open_metadata_block, read_u32, read_u64, seal_metadata_block, write_u32, MetadataKind,
    FORMAT_VERSION, METADATA_HEADER_BYTES,
};
use flashpipe_fs::{
    fsck, CopyMethod, FileAttributes, FileOwner, Filesystem, MountError, SetAttributesError,
    Structure,
};
use flashpipe_testkit::formatted::format_fs;
use support::{
    blocks_of, formatted_4k, newest_super_block, pattern, read_named,
    read_only_and_fsck_write_nothing, remount_clean, write_new, SharedDisk,
};

const BLOCK_SIZE: u64 = 4096;
const DISK_BLOCKS: u64 = 4096;

fn all_set() -> FileAttributes {
    FileAttributes {
        mode: Some(0o640),
        owner: Some(FileOwner {
            uid: 1000,
            gid: 65534,
        }),
        modified_wall_ns: Some(1_700_000_000_123_456_789),
    }
}

#[test]
fn attributes_survive_log_commits_checkpoints_remounts_and_a_crash() {
    let (shared, mut fs) = formatted_4k();
    let file = write_new(&mut fs, "a", 3 * BLOCK_SIZE as usize, 1);
    assert_eq!(fs.attributes(file), Ok(FileAttributes::NONE), "new file");
    fs.flush().unwrap();
    let clock_before = fs.stat(file).unwrap().modified_clock_ns;
    fs.set_attributes("a", all_set()).unwrap();
    assert_eq!(fs.attributes_by_name("a"), Ok(all_set()));
    assert_eq!(
        fs.stat(file).unwrap().modified_clock_ns,
        clock_before,
        "the device clock of the last change is the data's"
    );
    fs.flush().unwrap();
    assert!(
        fs.metadata_log_fill().log_record_count > 0,
        "a log commit carries them"
    );
    let crashed = shared.copy_to(DISK_BLOCKS);
    drop(fs.unmount().unwrap());

    let mut replayed = Filesystem::mount(crashed.boxed()).unwrap();
    assert_eq!(replayed.attributes_by_name("a"), Ok(all_set()), "crash");
    assert!(replayed.check().unwrap().is_clean());
    drop(replayed);

    let mut fs = Filesystem::mount(shared.boxed()).unwrap();
    assert_eq!(fs.attributes_by_name("a"), Ok(all_set()), "log replay");
    fs.rename("a", "b").unwrap();
    fs.copy_file("b", "c", CopyMethod::Share).unwrap();
    let other = FileAttributes {
        mode: Some(0),
        owner: None,
        modified_wall_ns: Some(-5),
    };
    fs.create("d").unwrap();
    fs.set_attributes("d", other).unwrap();
    fs.flush_checkpoint().unwrap();
    assert_eq!(fs.metadata_log_fill().log_record_count, 0);
    drop(fs.unmount().unwrap());

    let mut fs = Filesystem::mount(shared.boxed()).unwrap();
    assert_eq!(fs.attributes_by_name("b"), Ok(all_set()), "rename keeps");
    assert_eq!(
        fs.attributes_by_name("c"),
        Ok(FileAttributes::NONE),
        "a copy starts with none"
    );
    assert_eq!(fs.attributes_by_name("d"), Ok(other), "checkpoint");
    assert!(read_named(&mut fs, "b") == pattern(3 * BLOCK_SIZE as usize, 1));
    fs.set_attributes("b", FileAttributes::NONE).unwrap();
    fs.flush().unwrap();
    drop(fs.unmount().unwrap());
    let mut fs = Filesystem::mount(shared.boxed()).unwrap();
    assert_eq!(
        fs.attributes_by_name("b"),
        Ok(FileAttributes::NONE),
        "cleared"
    );
    assert!(fs.check().unwrap().is_clean());
}

#[test]
fn hostile_requests_change_nothing() {
    let (shared, mut fs) = formatted_4k();
    fs.create("a").unwrap();
    fs.flush().unwrap();
    let bad = FileAttributes {
        mode: Some(0o100644),
        ..FileAttributes::NONE
    };
    let error = fs.set_attributes("a", bad).unwrap_err();
    assert!(matches!(error, SetAttributesError::Bad(_)));
    assert!(error.to_string().contains("0o100644"), "{error}");
    assert!(fs.set_attributes("missing", all_set()).is_err());
    assert_eq!(fs.attributes_by_name("a"), Ok(FileAttributes::NONE));
    drop(fs.unmount().unwrap());
    let mut read_only = Filesystem::mount_read_only(shared.boxed()).unwrap();
    let error = read_only.set_attributes("a", all_set()).unwrap_err();
    assert!(error.to_string().contains("read-only"), "{error}");
    assert_eq!(read_only.attributes_by_name("a"), Ok(FileAttributes::NONE));
}

/// The inode table block of the newest checkpoint, its payload edited by `change` and
/// sealed again.
fn edit_inode_table(fs: &Filesystem, shared: &SharedDisk, change: impl FnOnce(&mut [u8])) {
    let block = blocks_of(fs, Structure::InodeTable)[0];
    let mut bytes = shared.peek(block * BLOCK_SIZE, BLOCK_SIZE as usize);
    let header = open_metadata_block(&bytes, MetadataKind::InodeTable, u64::MAX).unwrap();
    change(&mut bytes[METADATA_HEADER_BYTES..]);
    seal_metadata_block(&mut bytes, &header);
    shared.poke(block * BLOCK_SIZE, &bytes);
}

#[test]
fn an_inode_record_with_attributes_has_the_documented_bytes() {
    let (shared, mut fs) = formatted_4k();
    let file = write_new(&mut fs, "golden", BLOCK_SIZE as usize, 2);
    fs.set_attributes("golden", all_set()).unwrap();
    fs.flush_checkpoint().unwrap();
    let block = blocks_of(&fs, Structure::InodeTable)[0];
    let bytes = shared.peek(block * BLOCK_SIZE, BLOCK_SIZE as usize);
    let header = open_metadata_block(&bytes, MetadataKind::InodeTable, u64::MAX).unwrap();
    assert_eq!(
        header.payload_bytes,
        64 + 12,
        "64-byte header, one direct entry"
    );
    let record = &bytes[METADATA_HEADER_BYTES..];
    assert_eq!(read_u64(record, 0), file.0);
    assert_eq!(read_u64(record, 8), BLOCK_SIZE, "size");
    assert_eq!(read_u32(record, 32), 1, "direct count");
    let mut expected = Vec::new();
    expected.extend_from_slice(&[7, 0, 0, 0]); // 36..40: flags: mode, owner, wall time
    expected.extend_from_slice(&[0xA0, 0x01, 0, 0]); // 40..44: mode 0o640
    expected.extend_from_slice(&[0xE8, 0x03, 0, 0]); // 44..48: uid 1000
    expected.extend_from_slice(&[0xFE, 0xFF, 0, 0]); // 48..52: gid 65534
    expected.extend_from_slice(&[0, 0, 0, 0]); // 52..56: reserved
    expected.extend_from_slice(&1_700_000_000_123_456_789i64.to_le_bytes()); // 56..64
    assert_eq!(&record[36..64], &expected[..]);
    let map = fs.block_map(file, 0, BLOCK_SIZE).unwrap();
    assert_eq!(
        read_u64(record, 64),
        map[0].first_fs_block.unwrap(),
        "direct 0"
    );
    assert_eq!(read_u32(&newest_super_block(&shared, &fs), 8), 6);
    assert_eq!(FORMAT_VERSION, 6);
}

/// An edit of an inode record's bytes.
type RecordEdit = fn(&mut [u8]);

#[test]
fn hostile_records_are_findings_and_refused_at_mount() {
    let cases: [(&str, RecordEdit); 3] = [
        ("undefined flag bits", |record| write_u32(record, 36, 0x0F)),
        ("mode bits outside 0o7777", |record| {
            write_u32(record, 40, 0o10640)
        }),
        ("a stray owner", |record| {
            write_u32(record, 36, 1);
            write_u32(record, 44, 5);
        }),
    ];
    for (what, change) in cases {
        let (shared, mut fs) = formatted_4k();
        fs.create("a").unwrap();
        fs.set_attributes("a", all_set()).unwrap();
        fs.flush_checkpoint().unwrap();
        edit_inode_table(&fs, &shared, change);
        drop(fs.unmount().unwrap());
        let report = fsck(&mut *shared.boxed(), false).unwrap();
        assert!(!report.is_clean(), "{what}: fsck finds it");
        match Filesystem::mount(shared.boxed()) {
            Err(MountError::Corrupt { .. }) => {}
            Err(other) => panic!("{what}: refused, but as {other}"),
            Ok(_) => panic!("{what}: mounted"),
        }
        assert!(
            Filesystem::mount_read_only(shared.boxed()).is_err(),
            "{what}: read-only too"
        );
    }
}

/// Rewrites both super block slots as version 5 (the same layout).
fn downgrade_to_version_5(shared: &SharedDisk) {
    support::downgrade_super_blocks(shared, 5, |_| {});
}

#[test]
fn a_version_5_image_mounts_unchanged_and_is_upgraded_by_its_first_commit() {
    let (shared, mut fs) = formatted_4k();
    write_new(&mut fs, "old", 14 * BLOCK_SIZE as usize, 5);
    fs.flush_checkpoint().unwrap();
    fs.create("logged").unwrap();
    fs.flush().unwrap();
    drop(fs.unmount().unwrap());
    downgrade_to_version_5(&shared);
    read_only_and_fsck_write_nothing(&shared, |read_only| {
        assert!(read_named(read_only, "old") == pattern(14 * BLOCK_SIZE as usize, 5));
        assert_eq!(
            read_only.attributes_by_name("old"),
            Ok(FileAttributes::NONE)
        );
    });

    let mut fs = Filesystem::mount(shared.boxed()).unwrap();
    fs.set_attributes("old", all_set()).unwrap();
    fs.flush().unwrap();
    assert_eq!(
        read_u32(&newest_super_block(&shared, &fs), 8),
        6,
        "the first commit writes version 6"
    );
    let mut fs = remount_clean(fs, &shared);
    assert_eq!(fs.attributes_by_name("old"), Ok(all_set()));
    assert_eq!(fs.attributes_by_name("logged"), Ok(FileAttributes::NONE));
    assert!(read_named(&mut fs, "old") == pattern(14 * BLOCK_SIZE as usize, 5));
}

#[test]
fn attributes_in_a_version_5_image_are_refused() {
    let (shared, mut fs) = formatted_4k();
    fs.create("a").unwrap();
    fs.set_attributes("a", all_set()).unwrap();
    fs.flush_checkpoint().unwrap();
    drop(fs.unmount().unwrap());
    downgrade_to_version_5(&shared);
    assert!(!fsck(&mut *shared.boxed(), false).unwrap().is_clean());
    assert!(Filesystem::mount(shared.boxed()).is_err());
}

/// Attributes set on several files (one of them also written), a flush that crashes
/// after `crash_after` device requests (unflushed blocks kept with `survival`), a
/// restart: the remounted file system is clean and holds either every change or none.
/// Returns whether the flush completed and whether the changes were found.
fn crash_during_the_flush(crash_after: u64, survival: f64, checkpoint: bool) -> (bool, bool) {
    let what = format!("crash after {crash_after} requests, survival {survival}");
    let world = SimWorld::new(crash_after);
    world
        .add_disk(SimDiskConfig::default_for_tests("sim0", 512, 400 * 8))
        .expect("disk");
    let open = || Box::new(world.open_disk(0).expect("open disk")) as Box<dyn BlockDevice>;
    let mut fs = format_fs(open(), BLOCK_SIZE as u32);
    for name in ["a", "b", "c"] {
        let file = fs.create(name).unwrap();
        fs.write(file, 0, &pattern(2 * BLOCK_SIZE as usize, 3))
            .unwrap();
    }
    fs.flush().unwrap();
    world.set_crash_survival_probability(survival);
    world.crash_after_requests(crash_after);
    for name in ["a", "b", "c"] {
        fs.set_attributes(name, all_set()).unwrap();
    }
    let c = fs.open("c").unwrap();
    let written = fs.write(c, 0, &pattern(BLOCK_SIZE as usize, 4)).is_ok();
    let flushed = written
        && if checkpoint {
            fs.flush_checkpoint().is_ok()
        } else {
            fs.flush().is_ok()
        };
    if flushed {
        world.crash_now();
    }
    drop(fs);
    world.restart();
    let mut fs = Filesystem::mount(open()).unwrap_or_else(|error| panic!("{what}: {error}"));
    assert!(fs.check().unwrap().is_clean(), "{what}: fsck");
    let seen: Vec<FileAttributes> = ["a", "b", "c"]
        .iter()
        .map(|name| fs.attributes_by_name(name).unwrap())
        .collect();
    let new = seen[0] == all_set();
    assert!(
        seen.iter()
            .all(|&attributes| (attributes == all_set()) == new),
        "{what}: all or nothing"
    );
    if flushed {
        assert!(new, "{what}: a completed flush is durable");
    }
    let mut expected = pattern(2 * BLOCK_SIZE as usize, 3);
    if new {
        expected[..BLOCK_SIZE as usize].copy_from_slice(&pattern(BLOCK_SIZE as usize, 4));
    }
    assert!(
        read_named(&mut fs, "c") == expected,
        "{what}: data with them"
    );
    (flushed, new)
}

#[test]
fn a_crash_during_the_flush_keeps_all_attributes_or_none() {
    let mut outcomes = std::collections::BTreeSet::new();
    for crash_after in 1..60 {
        for survival in [0.0, 0.5, 1.0] {
            outcomes.insert(crash_during_the_flush(crash_after, survival, false));
            outcomes.insert(crash_during_the_flush(crash_after, survival, true));
        }
    }
    for expected in [(false, false), (false, true), (true, true)] {
        assert!(
            outcomes.contains(&expected),
            "outcome (flushed, found) {expected:?} never reached: {outcomes:?}"
        );
    }
}

#[test]
fn a_log_record_with_hostile_attributes_is_damage() {
    let (shared, mut fs) = formatted_4k();
    fs.create("a").unwrap();
    fs.flush_checkpoint().unwrap();
    fs.set_attributes("a", all_set()).unwrap();
    fs.flush().unwrap();
    assert_eq!(fs.metadata_log_fill().log_record_count, 1);
    let block = blocks_of(&fs, Structure::Log)[0];
    drop(fs.unmount().unwrap());
    let mut bytes = shared.peek(block * BLOCK_SIZE, BLOCK_SIZE as usize);
    let header = open_metadata_block(&bytes, MetadataKind::Log, u64::MAX).unwrap();
    // The record start (tag 7, 56 bytes), then the file entry: 4 bytes, then its inode
    // record, whose flags word is at 36.
    let flags_at = METADATA_HEADER_BYTES + 56 + 4 + 36;
    assert_eq!(read_u32(&bytes, flags_at), 7);
    write_u32(&mut bytes, flags_at, 0x0F);
    seal_metadata_block(&mut bytes, &header);
    shared.poke(block * BLOCK_SIZE, &bytes);
    let report = fsck(&mut *shared.boxed(), false).unwrap();
    assert!(!report.is_clean(), "fsck finds it");
    assert!(Filesystem::mount(shared.boxed()).is_err(), "mount refuses");
}
