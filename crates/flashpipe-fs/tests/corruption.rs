//! fsck and mount on hand-corrupted images: a bit flipped in every byte of every metadata
//! structure (super block slots, checkpoint map, name table, inode table, indirect
//! blocks, free list) is reported by fsck and refused by mount with a clear error, never
//! a panic (a damaged super block slot included: the mount never falls back on its own);
//! repair fixes what it safely can and leaves the rest untouched.

mod support;

use flashpipe_fs::layout::{
    checksum_with_field_zeroed, open_metadata_block, seal_metadata_block, MetadataKind,
};
use flashpipe_fs::{
    fsck, FileIoError, Filesystem, FormatOptions, FsckError, MountError, Structure,
};
use support::{pattern, SharedDisk};

const BLOCK_SIZE: u64 = 4096;

/// Every file's name and contents.
type Files = Vec<(String, Vec<u8>)>;

/// A formatted image with small, chained and sparse files over two commits (a
/// checkpoint holding "small" and "chained", then a log record with the rest), and the
/// metadata blocks of its last commit.
fn build_image() -> (SharedDisk, Vec<(Structure, u64)>, Files) {
    let shared = SharedDisk::new(512, 512 * 8);
    let mut fs = Filesystem::format(shared.boxed(), &FormatOptions::default()).unwrap();
    let mut files = Vec::new();
    let small = fs.create("small").unwrap();
    fs.write(small, 0, b"tiny").unwrap();
    let chained = fs.create("chained").unwrap();
    fs.write(chained, 0, &pattern(20 * BLOCK_SIZE as usize + 17, 1))
        .unwrap();
    fs.flush_checkpoint().unwrap();
    let sparse = fs.create("sparse").unwrap();
    fs.write(sparse, 3 * BLOCK_SIZE, b"after a hole").unwrap();
    for index in 0..40 {
        fs.create(&format!("empty-{index}")).unwrap();
    }
    fs.write(chained, 5, b"overwritten").unwrap();
    fs.flush().unwrap();
    for stat in fs.list() {
        let bytes = fs.read(stat.file_id, 0, stat.size_bytes).unwrap().to_vec();
        files.push((stat.name, bytes));
    }
    let metadata = fs.metadata_blocks();
    fs.unmount().unwrap();
    (shared, metadata, files)
}

/// Byte offsets to damage in a metadata block: the whole super block, or a metadata
/// block's header, its payload and some of its zero tail.
fn positions(shared: &SharedDisk, structure: Structure, block: u64) -> Vec<usize> {
    if structure == Structure::SuperBlock {
        return (0..512).collect();
    }
    let bytes = shared.peek(block * BLOCK_SIZE, BLOCK_SIZE as usize);
    let payload_bytes = u32::from_le_bytes(bytes[28..32].try_into().unwrap()) as usize;
    let payload_end = 40 + payload_bytes;
    let payload_step = (payload_bytes / 300).max(1);
    (0..40)
        .chain((40..payload_end).step_by(payload_step))
        .chain((payload_end..BLOCK_SIZE as usize).step_by(97))
        .collect()
}

fn contents(fs: &mut Filesystem) -> Files {
    fs.list()
        .into_iter()
        .map(|stat| {
            (
                stat.name.clone(),
                fs.read(stat.file_id, 0, stat.size_bytes).unwrap().to_vec(),
            )
        })
        .collect()
}

#[test]
fn every_flipped_metadata_bit_is_reported_and_refused_without_panic() {
    let (shared, metadata, files) = build_image();
    let structures: std::collections::HashSet<Structure> =
        metadata.iter().map(|entry| entry.0).collect();
    assert_eq!(
        structures.len(),
        7,
        "the image holds every kind of metadata: {structures:?}"
    );
    let mut flips = 0;
    for &(structure, block) in &metadata {
        let original = shared.peek(block * BLOCK_SIZE, BLOCK_SIZE as usize);
        for position in positions(&shared, structure, block) {
            let mut damaged = original.clone();
            damaged[position] ^= 1 << (position % 8);
            shared.poke(block * BLOCK_SIZE, &damaged);
            let context = format!("{structure} block {block} byte {position}");
            match fsck(&mut shared.boxed(), false) {
                Ok(report) => assert!(!report.is_clean(), "{context}: fsck saw nothing"),
                Err(FsckError::NewerVersion { .. }) => assert!(
                    structure == Structure::SuperBlock && (8..12).contains(&position),
                    "{context}"
                ),
                Err(error) => panic!("{context}: fsck failed: {error}"),
            }
            match Filesystem::mount(shared.boxed()) {
                Err(MountError::Corrupt { findings }) => assert!(!findings.is_empty(), "{context}"),
                Err(MountError::NewerVersion { .. }) => {
                    assert!(structure == Structure::SuperBlock, "{context}")
                }
                Err(MountError::DamagedSuperBlock { damage }) => {
                    assert!(structure == Structure::SuperBlock, "{context}");
                    assert_eq!(Some(damage.slot), Some(block), "{context}");
                }
                Err(error) => panic!("{context}: unexpected mount error {error}"),
                Ok(_) => panic!("{context}: mount accepted damaged metadata"),
            }
            shared.poke(block * BLOCK_SIZE, &original);
            flips += 1;
        }
    }
    assert!(flips > 2000, "{flips} flips");
    let mut fs = Filesystem::mount(shared.boxed()).unwrap();
    assert_eq!(contents(&mut fs), files);
}

fn first_block_of(metadata: &[(Structure, u64)], wanted: Structure) -> u64 {
    metadata
        .iter()
        .find(|entry| entry.0 == wanted)
        .expect("structure present")
        .1
}

/// Flips the bits `mask` of byte `at` of the first block of `structure`; returns that
/// block.
fn flip_bits(
    shared: &SharedDisk,
    metadata: &[(Structure, u64)],
    structure: Structure,
    at: usize,
    mask: u8,
) -> u64 {
    let block = first_block_of(metadata, structure);
    let mut bytes = shared.peek(block * BLOCK_SIZE, BLOCK_SIZE as usize);
    bytes[at] ^= mask;
    shared.poke(block * BLOCK_SIZE, &bytes);
    block
}

#[test]
fn repair_rebuilds_a_damaged_free_list() {
    let (shared, metadata, files) = build_image();
    flip_bits(&shared, &metadata, Structure::FreeList, 45, 0x10);
    assert!(Filesystem::mount(shared.boxed()).is_err());
    let report = fsck(&mut shared.boxed(), true).unwrap();
    assert!(report
        .findings
        .iter()
        .any(|finding| finding.structure == Structure::FreeList && finding.repairable));
    assert!(!report.repaired.is_empty(), "{report:?}");
    assert!(fsck(&mut shared.boxed(), false).unwrap().is_clean());
    let mut fs = Filesystem::mount(shared.boxed()).unwrap();
    assert_eq!(contents(&mut fs), files);
}

#[test]
fn repair_returns_leaked_blocks() {
    let (shared, metadata, files) = build_image();
    let free_before = {
        let fs = Filesystem::mount(shared.boxed()).unwrap();
        fs.stats().free_blocks
    };
    let block = first_block_of(&metadata, Structure::FreeList);
    let mut bytes = shared.peek(block * BLOCK_SIZE, BLOCK_SIZE as usize);
    let header = open_metadata_block(&bytes, MetadataKind::FreeList, u64::MAX).unwrap();
    let last = 40 + 16 * (header.entry_count as usize - 1);
    let count = u64::from_le_bytes(bytes[last + 8..last + 16].try_into().unwrap());
    bytes[last + 8..last + 16].copy_from_slice(&(count - 3).to_le_bytes());
    seal_metadata_block(&mut bytes, &header);
    shared.poke(block * BLOCK_SIZE, &bytes);
    let report = fsck(&mut shared.boxed(), false).unwrap();
    let leak = report
        .findings
        .iter()
        .find(|finding| finding.structure == Structure::BlockAccounting)
        .expect("leak reported");
    assert!(
        leak.problem.contains("leaked") && leak.problem.contains("3 blocks"),
        "{leak}"
    );
    assert!(matches!(
        Filesystem::mount(shared.boxed()),
        Err(MountError::Corrupt { .. })
    ));
    let repaired = fsck(&mut shared.boxed(), true).unwrap();
    assert!(
        repaired.repaired.iter().any(|line| line.contains("leaked")),
        "{repaired:?}"
    );
    assert!(fsck(&mut shared.boxed(), false).unwrap().is_clean());
    let mut fs = Filesystem::mount(shared.boxed()).unwrap();
    assert_eq!(contents(&mut fs), files);
    assert!(
        fs.stats().free_blocks + 8 >= free_before,
        "free blocks came back"
    );
}

#[test]
fn repair_refuses_damage_it_cannot_fix_and_changes_nothing() {
    let (shared, metadata, _) = build_image();
    let block = flip_bits(&shared, &metadata, Structure::CheckpointMap, 60, 1);
    let image_before = shared.peek(0, 512 * 8 * 512);
    let report = fsck(&mut shared.boxed(), true).unwrap();
    assert!(
        report.repair_refused.is_some() && report.repaired.is_empty(),
        "{report:?}"
    );
    let text = report.to_string();
    assert!(
        text.contains("checkpoint map") && text.contains("repair refused"),
        "{text}"
    );
    assert!(report.findings.iter().any(
        |finding| finding.structure == Structure::CheckpointMap && finding.block == Some(block)
    ));
    assert!(
        shared.peek(0, 512 * 8 * 512) == image_before,
        "a refused repair wrote to the image"
    );
}

#[test]
fn fsck_reports_unformatted_and_wholly_damaged_super_blocks() {
    let blank = SharedDisk::new(512, 4096);
    let report = fsck(&mut blank.boxed(), true).unwrap();
    assert_eq!(report.findings.len(), 1);
    assert!(report.findings[0].problem.contains("not formatted"));
    let (shared, _, _) = build_image();
    for slot in 0..2u64 {
        let mut bytes = shared.peek(slot * BLOCK_SIZE, 512);
        bytes[20] ^= 4;
        shared.poke(slot * BLOCK_SIZE, &bytes);
    }
    let report = fsck(&mut shared.boxed(), true).unwrap();
    assert_eq!(report.findings.len(), 2, "{report:?}");
    assert!(report.repair_refused.is_some());
    let error = Filesystem::mount(shared.boxed()).err().unwrap();
    assert!(error.to_string().contains("slot 0"), "{error}");
}

#[test]
fn repair_names_an_orphan_inode_lost_and_found() {
    let (shared, metadata, files) = build_image();
    let block = first_block_of(&metadata, Structure::NameTable);
    let mut bytes = shared.peek(block * BLOCK_SIZE, BLOCK_SIZE as usize);
    let mut header = open_metadata_block(&bytes, MetadataKind::NameTable, u64::MAX).unwrap();
    let first_entry_bytes = 10 + u16::from_le_bytes([bytes[48], bytes[49]]) as usize;
    let orphan_inode = u64::from_le_bytes(bytes[40..48].try_into().unwrap());
    let payload_end = 40 + header.payload_bytes as usize;
    bytes.copy_within(40 + first_entry_bytes..payload_end, 40);
    bytes[payload_end - first_entry_bytes..payload_end].fill(0);
    header.entry_count -= 1;
    header.payload_bytes -= first_entry_bytes as u32;
    seal_metadata_block(&mut bytes, &header);
    shared.poke(block * BLOCK_SIZE, &bytes);
    let report = fsck(&mut shared.boxed(), true).unwrap();
    assert!(
        report
            .findings
            .iter()
            .any(|finding| finding.problem.contains("orphan")),
        "{report:?}"
    );
    assert!(!report.repaired.is_empty(), "{report:?}");
    assert!(fsck(&mut shared.boxed(), false).unwrap().is_clean());
    let mut fs = Filesystem::mount(shared.boxed()).unwrap();
    let adopted = format!("lost+found.{orphan_inode}");
    let found = contents(&mut fs);
    assert_eq!(found.len(), files.len());
    assert!(
        found.iter().any(|entry| entry.0 == adopted),
        "{:?}",
        found.iter().map(|entry| &entry.0).collect::<Vec<_>>()
    );
}

/// Flips a bit and recomputes the block's checksum, so that the damage gets past the
/// checksum and reaches the semantic checks.
fn flip_and_reseal(bytes: &mut [u8], structure: Structure, position: usize) {
    bytes[position] ^= 1 << (position % 8);
    let checksum_offset = if structure == Structure::SuperBlock {
        12
    } else {
        4
    };
    if (checksum_offset..checksum_offset + 4).contains(&position) {
        return;
    }
    let checksum = if structure == Structure::SuperBlock {
        checksum_with_field_zeroed(&bytes[..512], checksum_offset)
    } else {
        checksum_with_field_zeroed(bytes, checksum_offset)
    };
    bytes[checksum_offset..checksum_offset + 4].copy_from_slice(&checksum.to_le_bytes());
}

#[test]
fn damage_behind_a_valid_checksum_never_panics_and_mount_agrees_with_fsck() {
    let (shared, metadata, _) = build_image();
    let mut reported = 0;
    let mut flips = 0;
    for &(structure, block) in &metadata {
        let original = shared.peek(block * BLOCK_SIZE, BLOCK_SIZE as usize);
        for position in positions(&shared, structure, block) {
            let mut damaged = original.clone();
            flip_and_reseal(&mut damaged, structure, position);
            shared.poke(block * BLOCK_SIZE, &damaged);
            let context = format!("{structure} block {block} byte {position} (resealed)");
            let clean = match fsck(&mut shared.boxed(), false) {
                Ok(report) => report.is_clean(),
                Err(FsckError::NewerVersion { .. } | FsckError::WrongDeviceSize { .. }) => false,
                Err(error) => panic!("{context}: fsck failed: {error}"),
            };
            reported += usize::from(!clean);
            if let Ok(mut fs) = Filesystem::mount(shared.boxed()) {
                let report = fs.check().unwrap();
                assert!(
                    clean || structure == Structure::SuperBlock,
                    "{context}: mount accepted what fsck reported"
                );
                assert!(
                    report.is_clean(),
                    "{context}: mounted, yet fsck finds {report}"
                );
                for stat in fs.list() {
                    // A flip that lands in a block pointer's data checksum leaves the
                    // metadata consistent; the read must then refuse the block, not
                    // hand out its bytes.
                    match fs.read(stat.file_id, 0, stat.size_bytes) {
                        Ok(_) | Err(FileIoError::DataChecksumMismatch { .. }) => {}
                        Err(error) => panic!("{context}: read of {:?} failed: {error}", stat.name),
                    }
                }
            }
            shared.poke(block * BLOCK_SIZE, &original);
            flips += 1;
        }
    }
    assert!(
        reported * 2 > flips,
        "{reported} of {flips} resealed flips reported"
    );
}
