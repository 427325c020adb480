//! Golden bytes of the flash-aware layout's commit-ring record (format versions 7 to 9,
//! docs/format.md, "Flash-aware layout"): version 6's fields, then
//! `pages_per_erase_block` at 176..184, `ring_sequence` at 184..192, `record_kind` at
//! 192..196, the lifetime counters at 196..220, reserved zero from 220; version 8's log
//! fields at 112..136 in use (a version-7 record with a region refused); version 9's
//! record and a version-9 log block's header with its region tag at 16..24; its checks;
//! the ordinary layout still at version 6.

use flashpipe_fs::layout::{
    checksum_with_field_zeroed, FlashTotals, RingRecordKind, SuperBlock, SuperBlockProblem,
    FLASH_AWARE_FORMAT_VERSION, FLASH_LOG_FORMAT_VERSION, FLASH_RESERVED_ERASE_BLOCKS,
    FLASH_SCAN_FORMAT_VERSION, FORMAT_VERSION, METADATA_HEADER_BYTES, SUPER_BLOCK_SIZE_BYTES,
};
use flashpipe_fs::metadata_log::{
    decode_record, open_log_block, open_region_log_block, LogFile, LogRecord,
};

fn known_flash_super_block() -> SuperBlock {
    SuperBlock {
        format_version: FLASH_AWARE_FORMAT_VERSION,
        fs_block_size_bytes: 8192,
        fs_block_count: 0x1_0000,
        commit_sequence: 0x0102_0304,
        next_inode_number: 0x55,
        file_count: 3,
        free_block_count: 0xF000,
        map_head: 0x300,
        map_block_count: 1,
        name_table_block_count: 2,
        inode_table_block_count: 4,
        free_list_block_count: 1,
        free_extent_count: 2,
        log_region_block_count: 0,
        log_block_count: 0,
        log_record_count: 0,
        store_identity: Some([0x11; 16]),
        shared_table_block_count: 0,
        shared_extent_count: 0,
        shared_block_count: 0,
        pages_per_erase_block: 0x100,
        ring_sequence: 0x0A0B,
        record_kind: RingRecordKind::Clean,
        flash_totals: FlashTotals {
            pages_allocated: 0x1122,
            erases: 0x33,
            pages_moved: 0x44,
        },
    }
}

fn put(bytes: &mut [u8], offset: usize, value: &[u8]) {
    bytes[offset..offset + value.len()].copy_from_slice(value);
}

#[test]
fn the_version_7_super_block_has_the_documented_bytes() {
    assert_eq!(FLASH_AWARE_FORMAT_VERSION, 7);
    assert_eq!(
        FORMAT_VERSION, 6,
        "the ordinary layout still writes version 6"
    );
    assert_eq!(FLASH_RESERVED_ERASE_BLOCKS, 3);
    let mut expected = [0u8; SUPER_BLOCK_SIZE_BYTES];
    put(&mut expected, 0, b"FLASHPFS");
    put(&mut expected, 8, &7u32.to_le_bytes());
    put(&mut expected, 16, &8192u32.to_le_bytes());
    put(&mut expected, 20, &512u32.to_le_bytes());
    put(&mut expected, 24, &0x1_0000u64.to_le_bytes());
    put(&mut expected, 32, &0x0102_0304u64.to_le_bytes());
    put(&mut expected, 40, &0x55u64.to_le_bytes());
    put(&mut expected, 48, &3u64.to_le_bytes());
    put(&mut expected, 56, &0xF000u64.to_le_bytes());
    put(&mut expected, 64, &0x300u64.to_le_bytes());
    put(&mut expected, 72, &1u64.to_le_bytes());
    put(&mut expected, 80, &2u64.to_le_bytes());
    put(&mut expected, 88, &4u64.to_le_bytes());
    put(&mut expected, 96, &1u64.to_le_bytes());
    put(&mut expected, 104, &2u64.to_le_bytes());
    // 112..136: no log region in this layout (zero).
    put(&mut expected, 136, &[0x11; 16]);
    // 152..176: no shared table (zero).
    put(&mut expected, 176, &0x100u64.to_le_bytes());
    put(&mut expected, 184, &0x0A0Bu64.to_le_bytes());
    put(&mut expected, 192, &2u32.to_le_bytes());
    put(&mut expected, 196, &0x1122u64.to_le_bytes());
    put(&mut expected, 204, &0x33u64.to_le_bytes());
    put(&mut expected, 212, &0x44u64.to_le_bytes());
    let checksum = crc32c::crc32c(&expected);
    put(&mut expected, 12, &checksum.to_le_bytes());
    let encoded = known_flash_super_block().encode();
    assert_eq!(encoded[..], expected[..]);
    assert_eq!(checksum_with_field_zeroed(&encoded, 12), checksum);
    assert_eq!(checksum, 0xB9D5_6C4D, "the golden checksum");
    assert_eq!(SuperBlock::decode(&encoded), Ok(known_flash_super_block()));
    assert_eq!(
        known_flash_super_block().reserved_block_count(),
        3 * 0x100,
        "the anchor and the ring's two erase blocks"
    );
}

fn resealed(mut bytes: [u8; SUPER_BLOCK_SIZE_BYTES]) -> [u8; SUPER_BLOCK_SIZE_BYTES] {
    bytes[12..16].fill(0);
    let checksum = crc32c::crc32c(&bytes);
    bytes[12..16].copy_from_slice(&checksum.to_le_bytes());
    bytes
}

/// `bytes`, resealed, decode to a bad field (`what` says which).
fn assert_bad_field(bytes: [u8; SUPER_BLOCK_SIZE_BYTES], what: &str) {
    assert!(
        matches!(
            SuperBlock::decode(&resealed(bytes)),
            Err(SuperBlockProblem::BadField(_))
        ),
        "{what}"
    );
}

#[test]
fn a_version_7_super_block_with_a_bad_erase_block_size_or_reserved_byte_is_refused() {
    let encoded = known_flash_super_block().encode();
    for pages in [0u64, 1, 3 << 20, 0x300] {
        let mut bad = encoded;
        bad[176..184].copy_from_slice(&pages.to_le_bytes());
        assert_bad_field(bad, &format!("{pages} pages per erase block"));
    }
    let mut kind = encoded;
    kind[192..196].copy_from_slice(&3u32.to_le_bytes());
    assert_bad_field(kind, "record kind 3");
    let mut stray = encoded;
    stray[220] = 1;
    assert_bad_field(stray, "a stray reserved byte");
    let mut too_few = known_flash_super_block();
    too_few.fs_block_count = 4 * 0x100;
    too_few.free_block_count = 0x10;
    let mut bytes = known_flash_super_block().encode();
    bytes[24..32].copy_from_slice(&too_few.fs_block_count.to_le_bytes());
    bytes[56..64].copy_from_slice(&too_few.free_block_count.to_le_bytes());
    assert_bad_field(bytes, "fewer than the reserved erase blocks and two more");
}

/// A version-8 record whose checkpoint has a log region of one erase block, two records
/// in its first three pages.
fn known_logged_super_block() -> SuperBlock {
    SuperBlock {
        format_version: FLASH_LOG_FORMAT_VERSION,
        log_region_block_count: 0x100,
        log_block_count: 3,
        log_record_count: 2,
        record_kind: RingRecordKind::Commit,
        ..known_flash_super_block()
    }
}

#[test]
fn the_version_8_super_block_carries_the_log_fields() {
    assert_eq!(FLASH_LOG_FORMAT_VERSION, 8);
    let encoded = known_logged_super_block().encode();
    let mut expected = known_flash_super_block().encode();
    put(&mut expected, 8, &8u32.to_le_bytes());
    put(&mut expected, 112, &0x100u64.to_le_bytes());
    put(&mut expected, 120, &3u64.to_le_bytes());
    put(&mut expected, 128, &2u64.to_le_bytes());
    put(&mut expected, 192, &0u32.to_le_bytes());
    let expected = resealed(expected);
    assert_eq!(encoded[..], expected[..]);
    let checksum = u32::from_le_bytes(encoded[12..16].try_into().unwrap());
    assert_eq!(checksum, GOLDEN_VERSION_8_CHECKSUM, "the golden checksum");
    assert_eq!(SuperBlock::decode(&encoded), Ok(known_logged_super_block()));
}

/// The CRC32C of [`known_logged_super_block`]'s 512 bytes.
const GOLDEN_VERSION_8_CHECKSUM: u32 = 0xE372_0FB7;

#[test]
fn a_version_7_record_with_a_log_region_is_refused() {
    let mut bytes = known_logged_super_block().encode();
    bytes[8..12].copy_from_slice(&7u32.to_le_bytes());
    assert_bad_field(bytes, "a region in version 7");
    let mut more_records_than_blocks = known_logged_super_block().encode();
    more_records_than_blocks[128..136].copy_from_slice(&4u64.to_le_bytes());
    assert_bad_field(more_records_than_blocks, "4 records in 3 blocks");
    let mut past_the_region = known_logged_super_block().encode();
    past_the_region[120..128].copy_from_slice(&0x101u64.to_le_bytes());
    assert_bad_field(past_the_region, "log blocks past the region");
}

#[test]
fn a_chain_entry_has_the_documented_bytes() {
    let record = LogRecord {
        commit_sequence: 9,
        next_inode_number: 12,
        file_count: 1,
        free_block_count: 300,
        files: vec![LogFile {
            inode_number: 0x0B,
            name: "redo".into(),
            size_bytes: 8192 * 13,
            indirect_head: 0x5A,
            modified_clock_ns: 1,
            direct_pointers: vec![0x40; 12],
            direct_checksums: vec![Some(7); 12],
        }],
        shared: Some(Vec::new()),
        chains: vec![(0x0B, vec![0x5A, 0x29, 0x4D])],
        ..LogRecord::default()
    };
    let blocks = record.encode(8192, 0);
    let payload = &blocks[0][METADATA_HEADER_BYTES..];
    assert_eq!(payload[0], 7, "the tag-7 record start");
    assert_eq!(&payload[52..56], &1u32.to_le_bytes(), "chain_count");
    let header = u32::from_le_bytes(blocks[0][28..32].try_into().unwrap()) as usize;
    let chain = &payload[header - 40..header];
    let mut expected = vec![8, 0, 0, 0, 3, 0, 0, 0, 0x0B, 0, 0, 0, 0, 0, 0, 0];
    for block in [0x5Au64, 0x29, 0x4D] {
        expected.extend_from_slice(&block.to_le_bytes());
    }
    assert_eq!(chain, &expected[..], "the chain entry, last in its record");
    let views: Vec<&[u8]> = blocks.iter().map(Vec::as_slice).collect();
    assert_eq!(decode_record(&views), Ok(record));
    let mut unannounced = blocks[0].clone();
    unannounced[METADATA_HEADER_BYTES + 52] = 0;
    reseal_log_block(&mut unannounced);
    assert!(
        decode_record(&[&unannounced]).is_err(),
        "a chain entry not announced"
    );
}

fn reseal_log_block(block: &mut [u8]) {
    block[4..8].fill(0);
    let checksum = crc32c::crc32c(block);
    block[4..8].copy_from_slice(&checksum.to_le_bytes());
}

#[test]
fn the_version_9_super_block_is_version_8_s_bytes_saying_9() {
    assert_eq!(FLASH_SCAN_FORMAT_VERSION, 9);
    let record = SuperBlock {
        format_version: FLASH_SCAN_FORMAT_VERSION,
        ..known_logged_super_block()
    };
    let encoded = record.encode();
    let mut expected = known_logged_super_block().encode();
    put(&mut expected, 8, &9u32.to_le_bytes());
    let expected = resealed(expected);
    assert_eq!(encoded[..], expected[..]);
    let checksum = u32::from_le_bytes(encoded[12..16].try_into().unwrap());
    assert_eq!(checksum, GOLDEN_VERSION_9_CHECKSUM, "the golden checksum");
    assert_eq!(SuperBlock::decode(&encoded), Ok(record.clone()));
    assert_eq!(
        record.checkpoint_sequence(),
        0x0102_0302,
        "the region tag of its log blocks: commit_sequence - log_record_count"
    );
}

/// The CRC32C of the version-9 record of [`known_logged_super_block`].
const GOLDEN_VERSION_9_CHECKSUM: u32 = 0x3E0C_34BB;

/// A one-file log record of commit `0x0102_0303`, the first after the checkpoint of
/// [`known_logged_super_block`]'s region.
fn known_region_record() -> LogRecord {
    LogRecord {
        commit_sequence: 0x0102_0303,
        next_inode_number: 0x55,
        file_count: 3,
        free_block_count: 0xEFF0,
        files: vec![LogFile {
            inode_number: 0x0B,
            name: "db".into(),
            size_bytes: 8192 * 2,
            indirect_head: 0,
            modified_clock_ns: 1,
            direct_pointers: vec![0x400, 0x401],
            direct_checksums: vec![Some(7), Some(8)],
        }],
        shared: Some(Vec::new()),
        ..LogRecord::default()
    }
}

#[test]
fn a_version_9_log_block_carries_its_region_tag() {
    let tag = 0x0102_0302;
    let blocks = known_region_record().encode_in_region(8192, 3, tag, &[]);
    assert_eq!(blocks.len(), 1);
    let block = &blocks[0];
    assert_eq!(&block[0..4], b"LOGR");
    assert_eq!(
        &block[8..16],
        &0x0102_0303u64.to_le_bytes(),
        "commit_sequence"
    );
    assert_eq!(
        &block[16..24],
        &tag.to_le_bytes(),
        "next_block: the region tag"
    );
    assert_eq!(&block[32..40], &3u64.to_le_bytes(), "owner: region index 3");
    let checksum = u32::from_le_bytes(block[4..8].try_into().unwrap());
    assert_eq!(
        checksum, GOLDEN_REGION_LOG_BLOCK_CHECKSUM,
        "the golden checksum"
    );
    let header = open_region_log_block(block, 3, u64::MAX, tag).expect("opens with its tag");
    assert_eq!(header.next_block, tag);
    assert!(
        open_region_log_block(block, 3, u64::MAX, tag + 1).is_err(),
        "another checkpoint's region"
    );
    assert!(
        open_log_block(block, 3, u64::MAX).is_err(),
        "a version-8 reading"
    );
    let untagged = known_region_record().encode(8192, 3);
    assert_eq!(&untagged[0][16..24], &[0; 8], "before version 9: 0");
    assert!(open_region_log_block(&untagged[0], 3, u64::MAX, tag).is_err());
}

/// The CRC32C of [`known_region_record`]'s block at region index 3 with its tag.
const GOLDEN_REGION_LOG_BLOCK_CHECKSUM: u32 = 0x6A5D_3F89;
