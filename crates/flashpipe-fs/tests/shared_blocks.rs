//! Shared blocks (format version 5, docs/format.md, "Shared blocks"): a copy by sharing
//! points the destination at the source's blocks and raises their reference counts, on a
//! device that remaps nothing; the blocks are counted once; a write to either side goes
//! copy-on-write; delete and truncate lower the counts and free at zero. The counts reach
//! the disk in the checkpoint's shared table (golden bytes) and in the log's shared-count
//! entries, survive remounts, and fsck checks them against the pointers: a wrong count is
//! a repairable finding and `fsck --repair` rewrites the table. A version-4 image mounts
//! read-only unchanged and is upgraded by its first read-write commit (a checkpoint).
//! A seeded model run of copies, writes, truncates and deletes with remounts checks
//! contents, fsck and that emptying the store gives back every block. (Crash points:
//! `crash.rs` copies by sharing too.) `FLASHPIPE_SEEDS=n` runs more seeds.

mod support;

use flashpipe_device::SplitMix64;
use flashpipe_fs::layout::{
    checksum_with_field_zeroed, open_metadata_block, read_u32, read_u64, write_u32, write_u64,
    MetadataKind, FORMAT_VERSION, METADATA_HEADER_BYTES,
};
use flashpipe_fs::{fsck, CopyMethod, Filesystem, MountError, Structure};
use flashpipe_testkit::formatted::format_fs;
use flashpipe_testkit::seeds::run_seeds;
use support::{
    blocks_of, formatted_4k, newest_super_block, pattern, read_file,
    read_only_and_fsck_write_nothing, remount_clean, write_new, SharedDisk,
};

const BLOCK_SIZE: u64 = 4096;

#[test]
fn a_shared_copy_is_counted_once_and_copy_on_write_keeps_both_sides() {
    let (shared, mut fs) = formatted_4k();
    let original = pattern(40 * BLOCK_SIZE as usize + 123, 1);
    let source = fs.create("source").unwrap();
    fs.write(source, 0, &original).unwrap();
    fs.flush().unwrap();
    let used_before = fs.stats().used_blocks;

    let report = fs.copy_file("source", "copy", CopyMethod::Share).unwrap();
    assert_eq!(
        report.blocks_by_reference, 41,
        "the tail block is shared too"
    );
    assert_eq!(report.bytes_by_bytes, 0);
    fs.flush().unwrap();
    let stats = fs.stats();
    assert_eq!(stats.shared_blocks, 41);
    assert_eq!(stats.saved_blocks, 41);
    assert!(
        stats.used_blocks <= used_before + 4,
        "shared data is counted once: {used_before} -> {}",
        stats.used_blocks
    );
    let copy = fs.open("copy").unwrap();
    assert_eq!(fs.stat(copy).unwrap().shared_bytes, original.len() as u64);

    fs.write(copy, BLOCK_SIZE * 3 + 10, b"changed copy")
        .unwrap();
    fs.write(source, 0, b"changed source").unwrap();
    let mut expected_copy = original.clone();
    expected_copy[3 * BLOCK_SIZE as usize + 10..3 * BLOCK_SIZE as usize + 22]
        .copy_from_slice(b"changed copy");
    let mut expected_source = original.clone();
    expected_source[..14].copy_from_slice(b"changed source");
    assert!(read_file(&mut fs, copy) == expected_copy);
    assert!(read_file(&mut fs, source) == expected_source);
    assert_eq!(
        fs.stats().shared_blocks,
        39,
        "two blocks unshared by writes"
    );
    fs.flush().unwrap();
    let mut fs = remount_clean(fs, &shared);
    assert_eq!(fs.stats().shared_blocks, 39);
    let (source, copy) = (fs.open("source").unwrap(), fs.open("copy").unwrap());
    assert!(read_file(&mut fs, copy) == expected_copy);
    assert!(read_file(&mut fs, source) == expected_source);

    fs.truncate(copy, 5 * BLOCK_SIZE).unwrap();
    fs.delete("source").unwrap();
    fs.flush().unwrap();
    assert_eq!(fs.stats().shared_blocks, 0);
    assert!(read_file(&mut fs, copy) == expected_copy[..5 * BLOCK_SIZE as usize]);
    fs.delete("copy").unwrap();
    fs.flush().unwrap();
    fs.flush().unwrap();
    assert!(fs.check().unwrap().is_clean());
    drop(fs.unmount().unwrap());
    assert!(fsck(&mut *shared.boxed(), false).unwrap().is_clean());
}

#[test]
fn the_shared_table_has_the_documented_bytes_and_a_wrong_count_is_repaired() {
    let (shared, mut fs) = formatted_4k();
    let source = write_new(&mut fs, "source", 3 * BLOCK_SIZE as usize, 2);
    fs.copy_file("source", "copy-1", CopyMethod::Share).unwrap();
    fs.copy_file("source", "copy-2", CopyMethod::Share).unwrap();
    fs.flush_checkpoint().unwrap();
    let table = blocks_of(&fs, Structure::SharedTable);
    assert_eq!(table.len(), 1);
    let super_block = newest_super_block(&shared, &fs);
    assert_eq!(read_u32(&super_block, 8), FORMAT_VERSION);
    assert_eq!(read_u64(&super_block, 152), 1, "shared_table_block_count");
    assert_eq!(read_u64(&super_block, 160), 1, "shared_extent_count");
    assert_eq!(read_u64(&super_block, 168), 3, "shared_block_count");
    let first_block = fs.block_map(source, 0, 3 * BLOCK_SIZE).unwrap()[0]
        .first_fs_block
        .unwrap();
    let mut block = shared.peek(table[0] * BLOCK_SIZE, BLOCK_SIZE as usize);
    let header = open_metadata_block(&block, MetadataKind::SharedTable, u64::MAX).unwrap();
    assert_eq!((header.entry_count, header.payload_bytes), (1, 16));
    assert_eq!(header.owner, 0, "index in its table");
    let entry: Vec<u8> = [
        &first_block.to_le_bytes()[..], // 0..8: first_block
        &[3, 0, 0, 0],                  // 8..12: block_count
        &[3, 0, 0, 0],                  // 12..16: reference_count
    ]
    .concat();
    assert_eq!(
        &block[METADATA_HEADER_BYTES..METADATA_HEADER_BYTES + 16],
        &entry[..]
    );
    assert!(block[METADATA_HEADER_BYTES + 16..]
        .iter()
        .all(|&byte| byte == 0));
    let map = shared.peek(read_u64(&super_block, 64) * BLOCK_SIZE, BLOCK_SIZE as usize);
    let free_list_end = (read_u64(&super_block, 80)
        + read_u64(&super_block, 88)
        + read_u64(&super_block, 96)) as usize;
    assert_eq!(
        read_u64(&map, METADATA_HEADER_BYTES + 8 * free_list_end),
        table[0],
        "the map lists the shared table after the free list"
    );
    drop(fs.unmount().unwrap());

    write_u32(&mut block, METADATA_HEADER_BYTES + 12, 2);
    write_u32(&mut block, 4, 0);
    let checksum = checksum_with_field_zeroed(&block, 4);
    write_u32(&mut block, 4, checksum);
    shared.poke(table[0] * BLOCK_SIZE, &block);
    let report = fsck(&mut *shared.boxed(), false).unwrap();
    assert_eq!(report.findings.len(), 3, "{report}");
    assert!(report
        .findings
        .iter()
        .all(|finding| finding.structure == Structure::SharedTable && finding.repairable));
    assert!(report.findings[0]
        .to_string()
        .contains("3 pointers reference it, the shared table says 2"));
    assert!(matches!(
        Filesystem::mount(shared.boxed()),
        Err(MountError::Corrupt { .. })
    ));
    let repaired = fsck(&mut *shared.boxed(), true).unwrap();
    assert!(!repaired.repaired.is_empty(), "{repaired}");
    let mut fs = Filesystem::mount(shared.boxed()).unwrap();
    assert!(fs.check().unwrap().is_clean());
    assert_eq!(fs.stats().shared_blocks, 3);
    for name in ["source", "copy-1", "copy-2"] {
        let file = fs.open(name).unwrap();
        assert!(read_file(&mut fs, file) == pattern(3 * BLOCK_SIZE as usize, 2));
    }
}

#[test]
fn log_commits_carry_the_counts_and_a_remount_replays_them() {
    let (shared, mut fs) = formatted_4k();
    let source = write_new(&mut fs, "source", 6 * BLOCK_SIZE as usize, 3);
    fs.flush_checkpoint().unwrap();
    fs.copy_file("source", "copy", CopyMethod::Share).unwrap();
    fs.flush().unwrap();
    assert!(fs.metadata_log_fill().log_record_count > 0, "a log commit");
    let copy = fs.open("copy").unwrap();
    fs.copy_range(
        source,
        0,
        copy,
        2 * BLOCK_SIZE,
        BLOCK_SIZE,
        CopyMethod::Share,
    )
    .unwrap();
    fs.delete("source").unwrap();
    fs.flush().unwrap();
    assert!(fs.metadata_log_fill().log_record_count >= 2);
    assert_eq!(
        fs.stats().shared_blocks,
        1,
        "the source's first block stays shared within the copy (its blocks 0 and 2)"
    );
    let mut fs = remount_clean(fs, &shared);
    let copy = fs.open("copy").unwrap();
    let mut expected = pattern(6 * BLOCK_SIZE as usize, 3);
    expected.copy_within(..BLOCK_SIZE as usize, 2 * BLOCK_SIZE as usize);
    assert!(read_file(&mut fs, copy) == expected);
}

#[test]
fn a_block_shared_within_one_file_is_counted_and_unshared_by_a_write() {
    let (shared, mut fs) = formatted_4k();
    let file = fs.create("self").unwrap();
    let original = pattern(4 * BLOCK_SIZE as usize, 4);
    fs.write(file, 0, &original).unwrap();
    fs.copy_range(
        file,
        0,
        file,
        4 * BLOCK_SIZE,
        2 * BLOCK_SIZE,
        CopyMethod::Share,
    )
    .unwrap();
    fs.copy_range(file, 0, file, 0, 4 * BLOCK_SIZE, CopyMethod::Share)
        .unwrap();
    assert_eq!(
        fs.stats().shared_blocks,
        2,
        "a copy onto itself changes no count"
    );
    fs.flush().unwrap();
    let mut fs = remount_clean(fs, &shared);
    let file = fs.open("self").unwrap();
    fs.write(file, 4 * BLOCK_SIZE, b"x").unwrap();
    assert_eq!(fs.stats().shared_blocks, 1);
    let mut expected = original.clone();
    expected.extend_from_slice(&original[..2 * BLOCK_SIZE as usize]);
    expected[4 * BLOCK_SIZE as usize] = b'x';
    assert!(read_file(&mut fs, file) == expected);
    fs.flush().unwrap();
    assert!(fs.check().unwrap().is_clean());
}

/// Rewrites the newest slot (and the older one, when valid) as version 4: the shared
/// fields zero (they are reserved bytes there).
fn downgrade_to_version_4(shared: &SharedDisk) {
    support::downgrade_super_blocks(shared, 4, |bytes| {
        assert_eq!(read_u64(bytes, 152), 0, "no shared table to drop");
        write_u64(bytes, 160, 0);
        write_u64(bytes, 168, 0);
    });
}

#[test]
fn a_version_4_image_mounts_read_only_unchanged_and_is_upgraded_by_its_first_commit() {
    let (shared, mut fs) = formatted_4k();
    write_new(&mut fs, "old", 5 * BLOCK_SIZE as usize, 5);
    fs.flush_checkpoint().unwrap();
    fs.flush_checkpoint().unwrap();
    drop(fs.unmount().unwrap());
    downgrade_to_version_4(&shared);
    read_only_and_fsck_write_nothing(&shared, |read_only| {
        let old = read_only.open("old").unwrap();
        assert!(read_file(read_only, old) == pattern(5 * BLOCK_SIZE as usize, 5));
        assert!(read_only
            .copy_file("old", "new", CopyMethod::Share)
            .is_err());
    });

    let mut fs = Filesystem::mount(shared.boxed()).unwrap();
    fs.copy_file("old", "new", CopyMethod::Share).unwrap();
    fs.flush().unwrap();
    assert_eq!(
        fs.metadata_log_fill().log_record_count,
        0,
        "the upgrade is a checkpoint"
    );
    let super_block = newest_super_block(&shared, &fs);
    assert_eq!(read_u32(&super_block, 8), FORMAT_VERSION);
    assert_eq!(read_u64(&super_block, 168), 5, "shared_block_count");
    let mut fs = remount_clean(fs, &shared);
    let new = fs.open("new").unwrap();
    assert!(read_file(&mut fs, new) == pattern(5 * BLOCK_SIZE as usize, 5));
}

/// One seeded run of copies by sharing (whole files and ranges), writes, truncates and
/// deletes against a model, with flushes and remounts; at every remount fsck (which
/// checks the counts against the pointers) is clean and every file equals the model; at
/// the end every file is deleted and every block comes back.
fn run_model_seed(seed: u64) {
    const NAMES: [&str; 4] = ["a", "b", "c", "d"];
    let mut rng = SplitMix64::new(seed);
    let shared = SharedDisk::new(BLOCK_SIZE as u32, 1024);
    let mut fs = format_fs(shared.boxed(), BLOCK_SIZE as u32);
    let free_at_start = fs.stats().free_blocks + fs.stats().pending_free_blocks;
    let mut model: std::collections::BTreeMap<&str, Vec<u8>> = Default::default();
    for step in 0..300 {
        let name = NAMES[rng.below(4) as usize];
        let other = NAMES[rng.below(4) as usize];
        match rng.below(10) {
            0 if !model.contains_key(name) => {
                fs.create(name).unwrap();
                model.insert(name, Vec::new());
            }
            1 | 2 if model.contains_key(name) => {
                let offset = rng.below(12 * BLOCK_SIZE);
                let bytes = pattern(1 + rng.below(3 * BLOCK_SIZE) as usize, rng.next_u64());
                let file = fs.open(name).unwrap();
                if fs.write(file, offset, &bytes).is_ok() {
                    let content = model.get_mut(name).unwrap();
                    let end = offset as usize + bytes.len();
                    if content.len() < end {
                        content.resize(end, 0);
                    }
                    content[offset as usize..end].copy_from_slice(&bytes);
                }
            }
            3 | 4 if model.contains_key(name) && model.contains_key(other) => {
                let source = model[name].clone();
                let source_offset = rng.below(source.len() as u64 + 1);
                let length = rng.below(source.len() as u64 - source_offset + 1);
                let destination_offset = rng.below(10) * BLOCK_SIZE + source_offset % BLOCK_SIZE;
                let (from, to) = (fs.open(name).unwrap(), fs.open(other).unwrap());
                let copied = fs.copy_range(
                    from,
                    source_offset,
                    to,
                    destination_offset,
                    length,
                    CopyMethod::Share,
                );
                if copied.is_ok() && length > 0 {
                    let content = model.get_mut(other).unwrap();
                    let end = (destination_offset + length) as usize;
                    if content.len() < end {
                        content.resize(end, 0);
                    }
                    content[destination_offset as usize..end].copy_from_slice(
                        &source[source_offset as usize..(source_offset + length) as usize],
                    );
                }
            }
            5 if model.contains_key(name)
                && !model.contains_key(other)
                && fs.copy_file(name, other, CopyMethod::Share).is_ok() =>
            {
                let content = model[name].clone();
                model.insert(other, content);
            }
            6 if model.contains_key(name) => {
                let size = rng.below(14 * BLOCK_SIZE);
                let file = fs.open(name).unwrap();
                fs.truncate(file, size).unwrap();
                model.get_mut(name).unwrap().resize(size as usize, 0);
            }
            7 if model.contains_key(name) => {
                fs.delete(name).unwrap();
                model.remove(name);
            }
            8 => fs.flush().unwrap(),
            9 => {
                fs.flush().unwrap();
                drop(fs.unmount().unwrap());
                fs = Filesystem::mount(shared.boxed())
                    .unwrap_or_else(|error| panic!("seed {seed} step {step}: mount: {error}"));
                let report = fs.check().unwrap();
                assert!(report.is_clean(), "seed {seed} step {step}: {report}");
                for (name, content) in &model {
                    let file = fs.open(name).unwrap();
                    assert!(
                        read_file(&mut fs, file) == *content,
                        "seed {seed} step {step}: {name} differs from the model"
                    );
                }
            }
            _ => {}
        }
    }
    for name in model.keys() {
        fs.delete(name).unwrap();
    }
    fs.create("change").unwrap();
    fs.delete("change").unwrap();
    fs.flush_checkpoint().unwrap();
    let report = fs.check().unwrap();
    assert!(report.is_clean(), "seed {seed}: {report}");
    let stats = fs.stats();
    assert_eq!(stats.shared_blocks, 0, "seed {seed}");
    assert_eq!(
        stats.free_blocks + stats.pending_free_blocks,
        free_at_start,
        "seed {seed}: every block comes back once the files are gone"
    );
}

#[test]
fn counts_follow_random_copies_writes_truncates_and_deletes() {
    run_seeds(40, run_model_seed);
}
