//! Data checksums (format version 2, docs/format.md): a random workload of writes,
//! overwrites, truncates, copies by reference and by bytes, flushes and remounts checked
//! against a model with every read verifying its blocks; a data block overwritten on the
//! device with random bytes fails the read with an error naming the file and the offset,
//! and `fsck --data` reports it; golden bytes of the inode record and indirect block
//! layout; and the upgrade of a version-1 image.

mod support;

use std::collections::BTreeMap;

use flashpipe_device::{BlockDevice, SplitMix64};
use flashpipe_fs::layout::{
    data_block_checksum, open_metadata_block, read_pointer_entry, read_u32, read_u64,
    seal_metadata_block, write_pointer_entry, write_u32, MetadataHeader, MetadataKind,
    FORMAT_VERSION, INODE_RECORD_HEADER_BYTES, METADATA_HEADER_BYTES, POINTER_ENTRY_BYTES,
    UNCHECKED_BLOCK_FLAG,
};
use flashpipe_fs::{
    fsck, fsck_with_options, CopyMethod, FileId, FileIoError, Filesystem, FsckOptions, FsckReport,
    Structure,
};
use flashpipe_testkit::formatted::format_fs;
use flashpipe_testkit::hooked::{CopiesByMoving, Hooked};
use flashpipe_testkit::seeds::run_seeds;
use support::{drop_log_region, pattern, rewrite_super_block, SharedDisk};

const BLOCK_SIZE: u64 = 4096;

/// fsck of `shared` (over [`remapping_disk`]) with data verification and no repair.
fn fsck_verifying_data(shared: &SharedDisk) -> FsckReport {
    fsck_with_options(
        &mut *remapping_disk(shared),
        FsckOptions {
            repair: false,
            verify_data: true,
        },
    )
    .unwrap()
}

/// A shared RAM disk over `shared` that copies by reference the way an FTL does from the
/// file system's point of view: the destination blocks read as the source blocks did. (It
/// moves the bytes itself; only the semantics matter here.)
fn remapping_disk(shared: &SharedDisk) -> Box<dyn BlockDevice> {
    let image = shared.clone();
    let move_blocks =
        move |device: &mut dyn BlockDevice, source: u64, destination: u64, count: u64| {
            let device_block = u64::from(device.info().block_size_bytes);
            let bytes = image.peek(source * device_block, (count * device_block) as usize);
            image.poke(destination * device_block, &bytes);
            Ok(())
        };
    Box::new(Hooked::new(shared.clone(), CopiesByMoving(move_blocks)))
}

fn format(shared: &SharedDisk) -> Filesystem {
    format_fs(remapping_disk(shared), BLOCK_SIZE as u32)
}

fn mount(shared: &SharedDisk) -> Filesystem {
    Filesystem::mount(remapping_disk(shared)).expect("mount")
}

/// Reads every file whole (each read verifies every block) and compares with the model.
fn check_against_model(fs: &mut Filesystem, model: &BTreeMap<String, Vec<u8>>, context: &str) {
    assert_eq!(fs.list().len(), model.len(), "{context}: file count");
    for (name, expected) in model {
        let file = fs.open(name).expect("open");
        let found = fs
            .read(file, 0, expected.len() as u64)
            .unwrap_or_else(|error| panic!("{context}: read of {name:?}: {error}"));
        assert!(found[..] == expected[..], "{context}: {name:?} differs");
    }
}

fn model_write(model: &mut Vec<u8>, offset: usize, bytes: &[u8]) {
    if model.len() < offset + bytes.len() {
        model.resize(offset + bytes.len(), 0);
    }
    model[offset..offset + bytes.len()].copy_from_slice(bytes);
}

/// An offset that is often block aligned, sometimes not.
fn random_offset(rng: &mut SplitMix64, limit: u64) -> u64 {
    let offset = rng.next_u64() % (limit + 1);
    if rng.next_u64() % 2 == 0 {
        offset / BLOCK_SIZE * BLOCK_SIZE
    } else {
        offset
    }
}

fn random_step(
    fs: &mut Filesystem,
    rng: &mut SplitMix64,
    model: &mut BTreeMap<String, Vec<u8>>,
    names: &[&str],
) -> String {
    let name = names[(rng.next_u64() % names.len() as u64) as usize];
    let file = match fs.open(name) {
        Ok(file) => file,
        Err(_) => {
            model.insert(name.to_string(), Vec::new());
            fs.create(name).expect("create")
        }
    };
    let size = model[name].len() as u64;
    match rng.next_u64() % 8 {
        0..=2 => {
            let offset = random_offset(rng, size + 3 * BLOCK_SIZE);
            let length = 1 + rng.next_u64() % (20 * BLOCK_SIZE);
            let bytes = pattern(length as usize, rng.next_u64());
            fs.write(file, offset, &bytes).expect("write");
            model_write(
                model.get_mut(name).expect("modelled"),
                offset as usize,
                &bytes,
            );
            format!("write {name} {offset}+{length}")
        }
        3 => {
            let new_size = random_offset(rng, size + 2 * BLOCK_SIZE);
            fs.truncate(file, new_size).expect("truncate");
            model
                .get_mut(name)
                .expect("modelled")
                .resize(new_size as usize, 0);
            format!("truncate {name} {new_size}")
        }
        4 | 5 => copy_step(fs, rng, model, name, file, names),
        6 => {
            fs.flush().expect("flush");
            "flush".to_string()
        }
        _ => "remount".to_string(),
    }
}

fn copy_step(
    fs: &mut Filesystem,
    rng: &mut SplitMix64,
    model: &mut BTreeMap<String, Vec<u8>>,
    destination_name: &str,
    destination: FileId,
    names: &[&str],
) -> String {
    let source_name = names[(rng.next_u64() % names.len() as u64) as usize];
    let Some(source_bytes) = model.get(source_name).cloned() else {
        return "copy skipped".to_string();
    };
    let source = fs.open(source_name).expect("open source");
    let source_offset = random_offset(rng, source_bytes.len() as u64);
    let length = (rng.next_u64() % (source_bytes.len() as u64 - source_offset + 1)).min(1 << 20);
    let destination_size = model[destination_name].len() as u64;
    let destination_offset = if rng.next_u64() % 2 == 0 {
        destination_size.min(source_offset)
    } else {
        random_offset(rng, destination_size)
    };
    let method = if rng.next_u64() % 3 == 0 {
        CopyMethod::Bytes
    } else {
        CopyMethod::ReferenceOrBytes
    };
    fs.copy_range(
        source,
        source_offset,
        destination,
        destination_offset,
        length,
        method,
    )
    .expect("copy");
    let copied = source_bytes[source_offset as usize..(source_offset + length) as usize].to_vec();
    model_write(
        model.get_mut(destination_name).expect("modelled"),
        destination_offset as usize,
        &copied,
    );
    format!(
        "copy {source_name} {source_offset}+{length} -> {destination_name} {destination_offset} {method:?}"
    )
}

#[test]
fn every_operation_keeps_checksums_right_and_every_read_verifies() {
    run_seeds(12, |seed| {
        let shared = SharedDisk::new(4096, 8192);
        let mut fs = format(&shared);
        let mut rng = SplitMix64::new(seed);
        let mut model = BTreeMap::new();
        let names = ["a", "b", "c", "d"];
        let mut copies_by_reference = 0;
        for step in 0..120 {
            let before = fs.stats().free_blocks;
            let done = random_step(&mut fs, &mut rng, &mut model, &names);
            if done == "remount" {
                drop(fs.unmount().expect("unmount"));
                fs = mount(&shared);
            }
            copies_by_reference += u64::from(done.contains("ReferenceOrBytes"));
            let context = format!("seed {seed} step {step} ({done}, {before} free before)");
            check_against_model(&mut fs, &model, &context);
        }
        fs.flush().expect("flush");
        let report = fs
            .check_with_options(FsckOptions {
                repair: false,
                verify_data: true,
            })
            .expect("fsck");
        assert!(report.is_clean(), "seed {seed}: {report}");
        let mut fs = mount(&shared);
        check_against_model(&mut fs, &model, &format!("seed {seed} final remount"));
        assert!(copies_by_reference > 0, "seed {seed}: no copy by reference");
    });
}

/// Overwrites FS block `fs_block` on the device with random bytes.
fn damage_block(shared: &SharedDisk, fs_block: u64, seed: u64) {
    shared.poke(fs_block * BLOCK_SIZE, &pattern(BLOCK_SIZE as usize, seed));
}

fn expect_checksum_error(
    result: Result<impl std::fmt::Debug, FileIoError>,
    name: &str,
    offset: u64,
    block: u64,
) {
    match result {
        Err(FileIoError::DataChecksumMismatch {
            file_name,
            offset_bytes,
            fs_block,
            ..
        }) => {
            assert_eq!(
                (file_name.as_str(), offset_bytes, fs_block),
                (name, offset, block)
            );
        }
        other => panic!("expected a data checksum mismatch, got {other:?}"),
    }
}

#[test]
fn a_data_block_overwritten_with_random_bytes_gives_a_typed_error_not_wrong_bytes() {
    let shared = SharedDisk::new(4096, 4096);
    let mut fs = format(&shared);
    let victim = fs.create("victim").unwrap();
    let bystander = fs.create("bystander").unwrap();
    let victim_bytes = pattern(20 * BLOCK_SIZE as usize + 100, 1);
    fs.write(victim, 0, &victim_bytes).unwrap();
    fs.write(bystander, 0, &pattern(3 * BLOCK_SIZE as usize, 2))
        .unwrap();
    fs.flush().unwrap();
    let direct_block = fs.block_map(victim, BLOCK_SIZE, 1).unwrap()[0]
        .first_fs_block
        .unwrap();
    let indirect_block = fs.block_map(victim, 15 * BLOCK_SIZE, 1).unwrap()[0]
        .first_fs_block
        .unwrap();
    damage_block(&shared, direct_block, 7);
    damage_block(&shared, indirect_block, 8);

    let mut fs = mount(&shared);
    let victim = fs.open("victim").unwrap();
    expect_checksum_error(
        fs.read(victim, 0, victim_bytes.len() as u64),
        "victim",
        BLOCK_SIZE,
        direct_block,
    );
    expect_checksum_error(
        fs.read(victim, BLOCK_SIZE + 10, 5),
        "victim",
        BLOCK_SIZE,
        direct_block,
    );
    expect_checksum_error(
        fs.read(victim, 14 * BLOCK_SIZE + 1, 2 * BLOCK_SIZE),
        "victim",
        15 * BLOCK_SIZE,
        indirect_block,
    );
    let message = fs.read(victim, 0, 3 * BLOCK_SIZE).unwrap_err().to_string();
    assert!(
        message.contains("\"victim\"") && message.contains("offset 4096"),
        "{message}"
    );
    assert_eq!(
        &fs.read(victim, 0, BLOCK_SIZE).unwrap()[..],
        &victim_bytes[..BLOCK_SIZE as usize]
    );
    assert_eq!(
        &fs.read(victim, 2 * BLOCK_SIZE, 3 * BLOCK_SIZE).unwrap()[..],
        &victim_bytes[2 * BLOCK_SIZE as usize..5 * BLOCK_SIZE as usize]
    );

    let plain = fsck(&mut *remapping_disk(&shared), false).unwrap();
    assert!(plain.is_clean(), "metadata is intact: {plain}");
    let with_data = fsck_verifying_data(&shared);
    let data_findings: Vec<_> = with_data
        .findings
        .iter()
        .filter(|finding| finding.structure == Structure::DataBlock)
        .collect();
    assert_eq!(data_findings.len(), 2, "{with_data}");
    assert_eq!(data_findings[0].block, Some(direct_block));
    assert!(
        data_findings[0].problem.contains("\"victim\"")
            && data_findings[0].problem.contains("offset 4096"),
        "{with_data}"
    );
    assert!(data_findings[1].problem.contains("offset 61440"));

    expect_checksum_error(
        fs.write(victim, BLOCK_SIZE + 1, b"partial"),
        "victim",
        BLOCK_SIZE,
        direct_block,
    );
    expect_checksum_error(
        fs.truncate(victim, BLOCK_SIZE + 3),
        "victim",
        BLOCK_SIZE,
        direct_block,
    );
    fs.write(victim, BLOCK_SIZE, &[9u8; BLOCK_SIZE as usize])
        .unwrap();
    let read_back = fs.read(victim, BLOCK_SIZE, BLOCK_SIZE).unwrap();
    assert!(
        read_back.iter().all(|&byte| byte == 9),
        "a whole-block rewrite heals"
    );
}

#[test]
fn a_copy_by_reference_carries_the_checksum_and_the_damage_it_covers() {
    let shared = SharedDisk::new(4096, 4096);
    let mut fs = format(&shared);
    let source = fs.create("source").unwrap();
    fs.write(source, 0, &pattern(4 * BLOCK_SIZE as usize, 3))
        .unwrap();
    fs.flush().unwrap();
    let source_block = fs.block_map(source, 2 * BLOCK_SIZE, 1).unwrap()[0]
        .first_fs_block
        .unwrap();
    damage_block(&shared, source_block, 9);
    let report = fs.copy_file("source", "copy", CopyMethod::ReferenceOrFail);
    assert_eq!(report.unwrap().blocks_by_reference, 4);
    let copy = fs.open("copy").unwrap();
    let copy_block = fs.block_map(copy, 2 * BLOCK_SIZE, 1).unwrap()[0]
        .first_fs_block
        .unwrap();
    expect_checksum_error(
        fs.read(copy, 0, 4 * BLOCK_SIZE),
        "copy",
        2 * BLOCK_SIZE,
        copy_block,
    );
    assert!(matches!(
        fs.copy_file("source", "by-bytes", CopyMethod::Bytes),
        Err(flashpipe_fs::CopyError::Io(
            FileIoError::DataChecksumMismatch { .. }
        ))
    ));
    assert!(fs.open("by-bytes").is_err(), "a failed copy leaves nothing");
}

#[test]
fn pointer_entries_have_the_documented_bytes() {
    let mut entry = [0xEEu8; POINTER_ENTRY_BYTES];
    write_pointer_entry(&mut entry, 0, 0x0102_0304_0506_0708, Some(0xAABB_CCDD));
    assert_eq!(
        entry,
        [0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0xDD, 0xCC, 0xBB, 0xAA]
    );
    write_pointer_entry(&mut entry, 0, 5, None);
    assert_eq!(entry, [5, 0, 0, 0, 0, 0, 0, 0x80, 0, 0, 0, 0]);
    assert_eq!(read_pointer_entry(&entry, 0, 2), Ok((5, None)));
    write_pointer_entry(&mut entry, 0, 0, None);
    assert_eq!(entry, [0; POINTER_ENTRY_BYTES]);
    assert_eq!(read_pointer_entry(&entry, 0, 2), Ok((0, None)));
    write_u32(&mut entry, 8, 1);
    assert!(
        read_pointer_entry(&entry, 0, 2).is_err(),
        "a hole with a checksum"
    );
    entry[7] = 0x80;
    assert!(read_pointer_entry(&entry, 0, 2).is_err(), "a flagged hole");
    assert_eq!(
        read_pointer_entry(&[7, 0, 0, 0, 0, 0, 0, 0], 0, 1),
        Ok((7, None))
    );
    assert_eq!(UNCHECKED_BLOCK_FLAG, 1 << 63);
}

/// The block of `structure` in the last commit (the first one listed).
fn metadata_block(fs: &Filesystem, structure: Structure) -> u64 {
    fs.metadata_blocks()
        .into_iter()
        .find(|&(found, _)| found == structure)
        .map(|(_, block)| block)
        .expect("structure present")
}

#[test]
fn inode_records_and_indirect_blocks_have_the_documented_bytes() {
    let shared = SharedDisk::new(4096, 4096);
    let mut fs = format(&shared);
    let file = fs.create("golden").unwrap();
    let size_bytes = 14 * BLOCK_SIZE - 1000;
    let data = pattern(size_bytes as usize, 11);
    fs.write(file, 0, &data).unwrap();
    fs.truncate(file, size_bytes + 2 * BLOCK_SIZE).unwrap();
    fs.flush_checkpoint().unwrap();
    let mut padded = data.clone();
    padded.resize(16 * BLOCK_SIZE as usize, 0);
    let map = fs.block_map(file, 0, size_bytes + 2 * BLOCK_SIZE).unwrap();
    let blocks: Vec<u64> = map
        .iter()
        .flat_map(|run| {
            (0..run.block_count).map(|offset| run.first_fs_block.map_or(0, |first| first + offset))
        })
        .collect();
    assert_eq!(blocks.len(), 16);
    let checksum_of = |index: usize| {
        data_block_checksum(&padded[index * BLOCK_SIZE as usize..(index + 1) * BLOCK_SIZE as usize])
    };

    let inode_block = shared.peek(
        metadata_block(&fs, Structure::InodeTable) * BLOCK_SIZE,
        4096,
    );
    let header = open_metadata_block(&inode_block, MetadataKind::InodeTable, u64::MAX).unwrap();
    assert_eq!(
        header.payload_bytes as usize,
        INODE_RECORD_HEADER_BYTES + 12 * POINTER_ENTRY_BYTES
    );
    let record = &inode_block[METADATA_HEADER_BYTES..];
    assert_eq!(read_u64(record, 0), file.0, "inode number");
    assert_eq!(read_u64(record, 8), size_bytes + 2 * BLOCK_SIZE, "size");
    let indirect = read_u64(record, 16);
    assert_eq!(read_u32(record, 32), 12, "direct count");
    assert_eq!(read_u32(record, 36), 0, "reserved");
    for (index, &block) in blocks.iter().enumerate().take(12) {
        let entry = &record[40 + 12 * index..52 + 12 * index];
        assert_eq!(read_u64(entry, 0), block, "direct pointer {index}");
        assert_eq!(
            read_u32(entry, 8),
            checksum_of(index),
            "direct checksum {index}"
        );
    }

    let indirect_block = shared.peek(indirect * BLOCK_SIZE, 4096);
    let header = open_metadata_block(&indirect_block, MetadataKind::Indirect, u64::MAX).unwrap();
    assert_eq!((header.entry_count, header.payload_bytes), (4, 48));
    assert_eq!((header.owner, header.next_block), (file.0, 0));
    let entries = &indirect_block[METADATA_HEADER_BYTES..METADATA_HEADER_BYTES + 48];
    for (slot, &block) in blocks[12..].iter().enumerate() {
        let entry = &entries[12 * slot..12 * slot + 12];
        assert_eq!(read_u64(entry, 0), block, "indirect pointer {slot}");
        let checksum = if block == 0 {
            0
        } else {
            checksum_of(12 + slot)
        };
        assert_eq!(read_u32(entry, 8), checksum, "indirect checksum {slot}");
    }
    assert_eq!(&blocks[14..], &[0, 0], "the grown tail is a hole");
    assert!(indirect_block[METADATA_HEADER_BYTES + 48..]
        .iter()
        .all(|&byte| byte == 0));
}

/// Rewrites the newest commit of `shared` in the version-1 layout: the inode table's and
/// the indirect chains' pointer entries lose their checksums (8 bytes each), the super
/// block says version 1. (Files of this test fit one inode table block.)
fn downgrade_to_version_1(fs: &Filesystem, shared: &SharedDisk) {
    let rewrite = |block: u64, kind: MetadataKind, entries_from: &dyn Fn(&[u8]) -> Vec<u8>| {
        let bytes = shared.peek(block * BLOCK_SIZE, BLOCK_SIZE as usize);
        let header = open_metadata_block(&bytes, kind, u64::MAX).unwrap();
        let payload =
            &bytes[METADATA_HEADER_BYTES..METADATA_HEADER_BYTES + header.payload_bytes as usize];
        let new_payload = entries_from(payload);
        let mut new_block = vec![0u8; BLOCK_SIZE as usize];
        new_block[METADATA_HEADER_BYTES..METADATA_HEADER_BYTES + new_payload.len()]
            .copy_from_slice(&new_payload);
        let new_header = MetadataHeader {
            payload_bytes: new_payload.len() as u32,
            ..header
        };
        seal_metadata_block(&mut new_block, &new_header);
        shared.poke(block * BLOCK_SIZE, &new_block);
    };
    let narrow = |entries: &[u8]| -> Vec<u8> {
        entries
            .chunks_exact(POINTER_ENTRY_BYTES)
            .flat_map(|entry| entry[..8].to_vec())
            .collect()
    };
    let inode_records = |payload: &[u8]| -> Vec<u8> {
        let mut out = Vec::new();
        let mut offset = 0;
        while offset < payload.len() {
            let direct_count = read_u32(payload, offset + 32) as usize;
            let end = offset + INODE_RECORD_HEADER_BYTES + POINTER_ENTRY_BYTES * direct_count;
            out.extend_from_slice(&payload[offset..offset + INODE_RECORD_HEADER_BYTES]);
            out.extend(narrow(&payload[offset + INODE_RECORD_HEADER_BYTES..end]));
            offset = end;
        }
        out
    };
    for (structure, block) in fs.metadata_blocks() {
        match structure {
            Structure::InodeTable => rewrite(block, MetadataKind::InodeTable, &inode_records),
            Structure::IndirectBlock => rewrite(block, MetadataKind::Indirect, &narrow),
            _ => {}
        }
    }
    let sequence_of =
        |slot: u64| read_u64(&shared.peek(slot * BLOCK_SIZE, BLOCK_SIZE as usize), 32);
    let newest_slot = if sequence_of(1) > sequence_of(0) {
        1
    } else {
        0
    };
    let rewritten = rewrite_super_block(shared, newest_slot, |super_block| {
        drop_log_region(fs, shared, super_block);
        write_u32(super_block, 8, 1);
    });
    assert!(rewritten, "the newest slot holds a super block");
}

#[test]
fn a_version_1_image_mounts_unverified_and_its_first_commit_upgrades_it() {
    let shared = SharedDisk::new(4096, 4096);
    let mut fs = format(&shared);
    let small = fs.create("small").unwrap();
    let large = fs.create("large").unwrap();
    let small_bytes = pattern(3 * BLOCK_SIZE as usize, 21);
    let large_bytes = pattern(20 * BLOCK_SIZE as usize + 5, 22);
    fs.write(small, 0, &small_bytes).unwrap();
    fs.write(large, 0, &large_bytes).unwrap();
    fs.flush_checkpoint().unwrap();
    let small_block = fs.block_map(small, 0, 1).unwrap()[0]
        .first_fs_block
        .unwrap();
    let large_block = fs.block_map(large, 16 * BLOCK_SIZE, 1).unwrap()[0]
        .first_fs_block
        .unwrap();
    downgrade_to_version_1(&fs, &shared);
    drop(fs);

    let report = fsck(&mut *remapping_disk(&shared), false).unwrap();
    assert!(report.is_clean(), "a version-1 image is valid: {report}");
    let mut fs = Filesystem::mount_read_only(remapping_disk(&shared)).unwrap();
    let large = fs.open("large").unwrap();
    let read = fs.read(large, 0, large_bytes.len() as u64).unwrap();
    assert!(read[..] == large_bytes[..], "version-1 data reads back");
    drop(fs);
    assert_eq!(
        read_u32(&shared.peek(0, BLOCK_SIZE as usize), 8)
            .min(read_u32(&shared.peek(BLOCK_SIZE, BLOCK_SIZE as usize), 8)),
        1
    );

    damage_block(&shared, large_block, 23);
    let mut fs = mount(&shared);
    let large = fs.open("large").unwrap();
    assert!(
        fs.read(large, 16 * BLOCK_SIZE, BLOCK_SIZE).is_ok(),
        "a block without a checksum is not verified (the documented limit of version 1)"
    );
    let small = fs.open("small").unwrap();
    fs.write(small, BLOCK_SIZE, b"rewritten").unwrap();
    fs.flush().unwrap();
    drop(fs.unmount().unwrap());

    let versions: Vec<u32> = (0..2)
        .map(|slot| read_u32(&shared.peek(slot * BLOCK_SIZE, BLOCK_SIZE as usize), 8))
        .collect();
    assert!(versions.contains(&FORMAT_VERSION), "{versions:?}");
    let report = fsck_verifying_data(&shared);
    assert!(report.is_clean(), "the upgraded image is clean: {report}");
    damage_block(&shared, small_block, 24);
    let rewritten_block = {
        let fs = mount(&shared);
        let small = fs.open("small").unwrap();
        fs.block_map(small, BLOCK_SIZE, 1).unwrap()[0]
            .first_fs_block
            .unwrap()
    };
    damage_block(&shared, rewritten_block, 25);
    let mut fs = mount(&shared);
    let small = fs.open("small").unwrap();
    assert!(
        fs.read(small, 0, BLOCK_SIZE).is_ok(),
        "a block inherited from version 1 stays unverified until rewritten"
    );
    expect_checksum_error(
        fs.read(small, BLOCK_SIZE, BLOCK_SIZE),
        "small",
        BLOCK_SIZE,
        rewritten_block,
    );
}
