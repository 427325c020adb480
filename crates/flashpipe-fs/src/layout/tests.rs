//! Unit tests of the layout's byte-level encodings: super blocks, metadata headers and
//! pointer entries, round trips and refusals.

use super::*;

fn sample_super_block() -> SuperBlock {
    SuperBlock {
        format_version: FORMAT_VERSION,
        fs_block_size_bytes: 4096,
        fs_block_count: 1000,
        commit_sequence: 3,
        next_inode_number: 7,
        file_count: 2,
        free_block_count: 900,
        map_head: 10,
        map_block_count: 1,
        name_table_block_count: 1,
        inode_table_block_count: 1,
        free_list_block_count: 1,
        free_extent_count: 3,
        log_region_block_count: 8,
        log_block_count: 2,
        log_record_count: 1,
        store_identity: None,
        shared_table_block_count: 0,
        shared_extent_count: 0,
        shared_block_count: 0,
        pages_per_erase_block: 0,
        ring_sequence: 0,
        record_kind: RingRecordKind::Commit,
        flash_totals: FlashTotals::default(),
    }
}

fn re_sealed(mut bytes: [u8; SUPER_BLOCK_SIZE_BYTES]) -> [u8; SUPER_BLOCK_SIZE_BYTES] {
    let checksum = checksum_with_field_zeroed(&bytes, SUPER_CHECKSUM_OFFSET);
    write_u32(&mut bytes, SUPER_CHECKSUM_OFFSET, checksum);
    bytes
}

#[test]
fn store_identity_round_trips_at_its_offset() {
    let identity = [0xa5u8; STORE_IDENTITY_BYTES];
    let with_identity = SuperBlock {
        store_identity: Some(identity),
        ..sample_super_block()
    };
    let encoded = with_identity.encode();
    assert_eq!(&encoded[136..152], &identity);
    assert!(encoded[152..].iter().all(|&byte| byte == 0));
    assert_eq!(SuperBlock::decode(&encoded), Ok(with_identity));
    let without = sample_super_block().encode();
    assert!(without[136..].iter().all(|&byte| byte == 0));
    assert_eq!(SuperBlock::decode(&without), Ok(sample_super_block()));
}

#[test]
fn older_versions_decode_without_identity_and_keep_their_reserved_bytes() {
    for version in 1..FIRST_IDENTIFIED_FORMAT_VERSION {
        let older = SuperBlock {
            format_version: version,
            log_region_block_count: 0,
            log_block_count: 0,
            log_record_count: 0,
            ..sample_super_block()
        };
        let older = if version >= FIRST_LOGGED_FORMAT_VERSION {
            SuperBlock {
                format_version: version,
                ..sample_super_block()
            }
        } else {
            older
        };
        let encoded = older.encode();
        assert_eq!(SuperBlock::decode(&encoded), Ok(older.clone()));
        let mut stray = encoded;
        stray[140] = 1;
        assert!(
            matches!(
                SuperBlock::decode(&re_sealed(stray)),
                Err(SuperBlockProblem::BadField(_))
            ),
            "version {version}: byte 140 is reserved"
        );
    }
    let mut stray = sample_super_block().encode();
    stray[176] = 1;
    assert!(matches!(
        SuperBlock::decode(&re_sealed(stray)),
        Err(SuperBlockProblem::BadField(_))
    ));
}

#[test]
fn super_block_round_trips_and_detects_every_flipped_bit() {
    let encoded = sample_super_block().encode();
    assert_eq!(SuperBlock::decode(&encoded), Ok(sample_super_block()));
    for bit in 0..SUPER_BLOCK_SIZE_BYTES * 8 {
        let mut damaged = encoded;
        damaged[bit / 8] ^= 1 << (bit % 8);
        assert!(
            SuperBlock::decode(&damaged).is_err(),
            "bit {bit} undetected"
        );
    }
}

#[test]
fn newer_version_is_named_even_with_a_bad_checksum() {
    let mut encoded = sample_super_block().encode();
    write_u32(&mut encoded, 8, NEWEST_READABLE_FORMAT_VERSION + 1);
    assert_eq!(
        SuperBlock::decode(&encoded),
        Err(SuperBlockProblem::NewerVersion(
            NEWEST_READABLE_FORMAT_VERSION + 1
        ))
    );
}

#[test]
fn metadata_block_seals_and_opens() {
    let mut block = vec![0u8; 4096];
    write_u64(&mut block, METADATA_HEADER_BYTES, 42);
    let header = MetadataHeader {
        kind: MetadataKind::Indirect,
        commit_sequence: 5,
        next_block: 9,
        entry_count: 1,
        payload_bytes: 8,
        owner: 3,
    };
    seal_metadata_block(&mut block, &header);
    assert_eq!(
        open_metadata_block(&block, MetadataKind::Indirect, 5),
        Ok(header)
    );
    assert!(open_metadata_block(&block, MetadataKind::Map, 5).is_err());
    assert!(open_metadata_block(&block, MetadataKind::Indirect, 4).is_err());
    block[100] ^= 1;
    assert!(open_metadata_block(&block, MetadataKind::Indirect, 5).is_err());
}

#[test]
fn indirect_counts_follow_the_block_size() {
    assert_eq!(pointers_per_indirect_block(4096), 338);
    assert_eq!(indirect_block_count(4096, 12), 0);
    assert_eq!(indirect_block_count(4096, 13), 1);
    assert_eq!(indirect_block_count(4096, 12 + 338), 1);
    assert_eq!(indirect_block_count(4096, 12 + 339), 2);
    assert_eq!(pointers_per_indirect_block_in_version(4096, 1), 507);
    assert_eq!(indirect_block_count_in_version(4096, 12 + 508, 1), 2);
}
