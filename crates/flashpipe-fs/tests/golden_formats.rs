//! Golden bytes of the file system's metadata formats (docs/format.md): the super block
//! built from known values, the 40-byte metadata block header, and the name table, free
//! list and checkpoint map blocks of a real commit read off the device, each compared
//! with bytes written out field by field as in the doc and decoded back. (Pointer entries,
//! inode records and indirect blocks are pinned in `data_checksums.rs`.)

mod support;

use flashpipe_fs::layout::{
    checksum_with_field_zeroed, open_metadata_block, read_u32, read_u64, seal_metadata_block,
    FlashTotals, MetadataHeader, MetadataKind, RingRecordKind, SuperBlock, SuperBlockProblem,
    FORMAT_VERSION, MAGIC, METADATA_HEADER_BYTES, NEWEST_READABLE_FORMAT_VERSION,
    SUPER_BLOCK_SIZE_BYTES,
};
use flashpipe_fs::{Filesystem, FormatOptions, Structure};
use support::SharedDisk;

const BLOCK_SIZE: u64 = 4096;

/// The identity of [`known_super_block_v4`]: bytes 0x10, 0x11, ... 0x1f.
const KNOWN_IDENTITY: [u8; 16] = [
    0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
];

/// [`known_super_block`] in format version 4, with [`KNOWN_IDENTITY`].
fn known_super_block_v4() -> SuperBlock {
    SuperBlock {
        format_version: 4,
        store_identity: Some(KNOWN_IDENTITY),
        ..known_super_block()
    }
}

/// A version-3 super block (no store identity; reserved bytes from 136).
fn known_super_block() -> SuperBlock {
    SuperBlock {
        format_version: 3,
        fs_block_size_bytes: 8192,
        fs_block_count: 0x1_0000,
        commit_sequence: 0x0102_0304,
        next_inode_number: 0x55,
        file_count: 3,
        free_block_count: 0xF000,
        map_head: 9,
        map_block_count: 1,
        name_table_block_count: 2,
        inode_table_block_count: 4,
        free_list_block_count: 1,
        free_extent_count: 2,
        log_region_block_count: 0x20,
        log_block_count: 3,
        log_record_count: 2,
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

/// [`known_super_block_v4`] in format version 5, with a shared table of 2 blocks holding
/// 3 extents that cover 0x40 blocks.
fn known_super_block_v5() -> SuperBlock {
    SuperBlock {
        format_version: 5,
        shared_table_block_count: 2,
        shared_extent_count: 3,
        shared_block_count: 0x40,
        ..known_super_block_v4()
    }
}

/// The first 136 bytes of [`known_super_block`], checksum field zero.
fn known_super_block_fields() -> Vec<u8> {
    [
        &b"FLASHPFS"[..],                      // 0..8: magic
        &[3, 0, 0, 0],                         // 8..12: format_version
        &[0, 0, 0, 0],                         // 12..16: checksum (zero here)
        &[0x00, 0x20, 0, 0],                   // 16..20: fs_block_size_bytes 8192
        &[0x00, 0x02, 0, 0],                   // 20..24: super_block_size_bytes 512
        &[0x00, 0x00, 0x01, 0, 0, 0, 0, 0],    // 24..32: fs_block_count
        &[0x04, 0x03, 0x02, 0x01, 0, 0, 0, 0], // 32..40: commit_sequence
        &[0x55, 0, 0, 0, 0, 0, 0, 0],          // 40..48: next_inode_number
        &[3, 0, 0, 0, 0, 0, 0, 0],             // 48..56: file_count
        &[0x00, 0xF0, 0, 0, 0, 0, 0, 0],       // 56..64: free_block_count
        &[9, 0, 0, 0, 0, 0, 0, 0],             // 64..72: map_head
        &[1, 0, 0, 0, 0, 0, 0, 0],             // 72..80: map_block_count
        &[2, 0, 0, 0, 0, 0, 0, 0],             // 80..88: name_table_block_count
        &[4, 0, 0, 0, 0, 0, 0, 0],             // 88..96: inode_table_block_count
        &[1, 0, 0, 0, 0, 0, 0, 0],             // 96..104: free_list_block_count
        &[2, 0, 0, 0, 0, 0, 0, 0],             // 104..112: free_extent_count
        &[0x20, 0, 0, 0, 0, 0, 0, 0],          // 112..120: log_region_block_count
        &[3, 0, 0, 0, 0, 0, 0, 0],             // 120..128: log_block_count
        &[2, 0, 0, 0, 0, 0, 0, 0],             // 128..136: log_record_count
    ]
    .concat()
}

#[test]
fn the_version_5_super_block_has_the_documented_bytes() {
    assert_eq!(
        FORMAT_VERSION, 6,
        "version 6 keeps the version-5 super block"
    );
    let encoded = known_super_block_v5().encode();
    let mut fields = known_super_block_fields();
    fields[8] = 5; // 8..12: format_version 5
    fields.extend_from_slice(&KNOWN_IDENTITY); // 136..152: store_identity
    fields.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0, 0]); // 152..160: shared_table_block_count
    fields.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0]); // 160..168: shared_extent_count
    fields.extend_from_slice(&[0x40, 0, 0, 0, 0, 0, 0, 0]); // 168..176: shared_block_count
    let mut expected = [0u8; SUPER_BLOCK_SIZE_BYTES];
    expected[..fields.len()].copy_from_slice(&fields);
    // 12..16: CRC32C of the 512 bytes with the checksum field zero (176..512 reserved, zero).
    let checksum = crc32c::crc32c(&expected);
    expected[12..16].copy_from_slice(&checksum.to_le_bytes());
    assert_eq!(encoded[..], expected[..]);
    assert_eq!(SuperBlock::decode(&encoded), Ok(known_super_block_v5()));
}

#[test]
fn the_shared_table_fields_are_checked_and_reserved_before_version_5() {
    let encoded = known_super_block_v5().encode();
    let mut impossible = encoded;
    impossible[160..168].copy_from_slice(&0x41u64.to_le_bytes());
    let checksum = checksum_with_field_zeroed(&impossible, 12);
    impossible[12..16].copy_from_slice(&checksum.to_le_bytes());
    assert!(
        matches!(
            SuperBlock::decode(&impossible),
            Err(SuperBlockProblem::BadField(_))
        ),
        "more extents than blocks"
    );
    let mut stray = known_super_block_v4().encode();
    stray[152] = 1;
    let checksum = checksum_with_field_zeroed(&stray, 12);
    stray[12..16].copy_from_slice(&checksum.to_le_bytes());
    assert!(
        matches!(
            SuperBlock::decode(&stray),
            Err(SuperBlockProblem::BadField(_))
        ),
        "version 4: byte 152 is reserved"
    );
    let mut stray = encoded;
    stray[176] = 1;
    let checksum = checksum_with_field_zeroed(&stray, 12);
    stray[12..16].copy_from_slice(&checksum.to_le_bytes());
    assert!(
        matches!(
            SuperBlock::decode(&stray),
            Err(SuperBlockProblem::BadField(_))
        ),
        "version 5: byte 176 is reserved"
    );
}

#[test]
fn the_version_4_super_block_has_the_documented_bytes() {
    let encoded = known_super_block_v4().encode();
    let mut fields = known_super_block_fields();
    fields[8] = 4; // 8..12: format_version 4
    fields.extend_from_slice(&KNOWN_IDENTITY); // 136..152: store_identity
    let mut expected = [0u8; SUPER_BLOCK_SIZE_BYTES];
    expected[..fields.len()].copy_from_slice(&fields);
    // 12..16: CRC32C of the 512 bytes with the checksum field zero (152..512 reserved, zero).
    let checksum = crc32c::crc32c(&expected);
    expected[12..16].copy_from_slice(&checksum.to_le_bytes());
    assert_eq!(encoded[..], expected[..]);
    assert_eq!(SuperBlock::decode(&encoded), Ok(known_super_block_v4()));

    let without_identity = SuperBlock {
        store_identity: None,
        ..known_super_block_v4()
    };
    let encoded = without_identity.encode();
    assert!(
        encoded[136..].iter().all(|&byte| byte == 0),
        "no identity: 16 zero bytes"
    );
    assert_eq!(SuperBlock::decode(&encoded), Ok(without_identity));
}

#[test]
fn the_super_block_has_the_documented_bytes() {
    assert_eq!(MAGIC, *b"FLASHPFS");
    assert_eq!(SUPER_BLOCK_SIZE_BYTES, 512);
    let encoded = known_super_block().encode();
    let fields = known_super_block_fields();
    let mut expected = [0u8; SUPER_BLOCK_SIZE_BYTES];
    expected[..fields.len()].copy_from_slice(&fields);
    // 12..16: CRC32C of the 512 bytes with the checksum field zero (136..512 reserved, zero).
    let checksum = crc32c::crc32c(&expected);
    expected[12..16].copy_from_slice(&checksum.to_le_bytes());
    assert_eq!(encoded[..], expected[..]);
    assert_eq!(checksum_with_field_zeroed(&encoded, 12), checksum);
    assert_eq!(SuperBlock::decode(&encoded), Ok(known_super_block()));
}

#[test]
fn a_super_block_is_judged_in_the_documented_order() {
    let encoded = known_super_block_v5().encode();
    let mut newer = encoded;
    newer[8..12].copy_from_slice(&(NEWEST_READABLE_FORMAT_VERSION + 1).to_le_bytes());
    assert_eq!(
        SuperBlock::decode(&newer),
        Err(SuperBlockProblem::NewerVersion(
            NEWEST_READABLE_FORMAT_VERSION + 1
        )),
        "the version is judged before the checksum"
    );
    let mut damaged = encoded;
    damaged[300] = 1;
    assert_eq!(
        SuperBlock::decode(&damaged),
        Err(SuperBlockProblem::ChecksumMismatch)
    );
    let mut no_magic = encoded;
    no_magic[0] = b'X';
    assert_eq!(
        SuperBlock::decode(&no_magic),
        Err(SuperBlockProblem::NoMagic)
    );
    let mut reserved = encoded;
    reserved[200] = 1;
    let checksum = checksum_with_field_zeroed(&reserved, 12);
    reserved[12..16].copy_from_slice(&checksum.to_le_bytes());
    assert!(matches!(
        SuperBlock::decode(&reserved),
        Err(SuperBlockProblem::BadField(_))
    ));
}

#[test]
fn the_kind_codes_are_the_documented_ascii() {
    assert_eq!(MetadataKind::Map.code(), 0x5041_4D43);
    assert_eq!(MetadataKind::NameTable.code(), 0x4C42_544E);
    assert_eq!(MetadataKind::InodeTable.code(), 0x444F_4E49);
    assert_eq!(MetadataKind::FreeList.code(), 0x4545_5246);
    assert_eq!(MetadataKind::Indirect.code(), 0x5244_4E49);
    assert_eq!(MetadataKind::Log.code(), 0x5247_4F4C);
    assert_eq!(MetadataKind::SharedTable.code(), 0x4452_4853);
}

#[test]
fn a_metadata_header_has_the_documented_bytes() {
    let mut block = vec![0u8; BLOCK_SIZE as usize];
    block[40..48].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    let header = MetadataHeader {
        kind: MetadataKind::FreeList,
        commit_sequence: 0x0A0B,
        next_block: 0x0C,
        entry_count: 1,
        payload_bytes: 8,
        owner: 0x0D0E,
    };
    seal_metadata_block(&mut block, &header);
    let mut expected: Vec<u8> = [
        &b"FREE"[..],                    // 0..4: kind
        &[0, 0, 0, 0],                   // 4..8: checksum (zero here)
        &[0x0B, 0x0A, 0, 0, 0, 0, 0, 0], // 8..16: commit_sequence
        &[0x0C, 0, 0, 0, 0, 0, 0, 0],    // 16..24: next_block
        &[1, 0, 0, 0],                   // 24..28: entry_count
        &[8, 0, 0, 0],                   // 28..32: payload_bytes
        &[0x0E, 0x0D, 0, 0, 0, 0, 0, 0], // 32..40: owner
        &[1, 2, 3, 4, 5, 6, 7, 8],       // 40..48: payload
    ]
    .concat();
    expected.resize(BLOCK_SIZE as usize, 0);
    // 4..8: CRC32C of the whole block with the checksum field zero.
    let checksum = crc32c::crc32c(&expected);
    expected[4..8].copy_from_slice(&checksum.to_le_bytes());
    assert_eq!(block, expected);
    assert_eq!(
        open_metadata_block(&block, MetadataKind::FreeList, 0x0A0B),
        Ok(header)
    );
    assert!(open_metadata_block(&block, MetadataKind::NameTable, 0x0A0B).is_err());
    assert!(
        open_metadata_block(&block, MetadataKind::FreeList, 0x0A0A).is_err(),
        "a block newer than the super block"
    );
}

/// A formatted file system with two files, flushed; the disk and the blocks of each
/// structure of the last commit.
fn committed_image() -> (SharedDisk, Filesystem) {
    let shared = SharedDisk::new(BLOCK_SIZE as u32, 4096);
    let mut fs = Filesystem::format(
        shared.boxed(),
        &FormatOptions {
            fs_block_size_bytes: BLOCK_SIZE as u32,
            store_identity: None,
        },
    )
    .expect("format");
    let first = fs.create("a").unwrap();
    fs.write(first, 0, &[7u8; 5000]).unwrap();
    fs.create("bcd").unwrap();
    fs.flush_checkpoint().unwrap();
    (shared, fs)
}

fn blocks_of(fs: &Filesystem, structure: Structure) -> Vec<u64> {
    fs.metadata_blocks()
        .into_iter()
        .filter(|&(found, _)| found == structure)
        .map(|(_, block)| block)
        .collect()
}

fn read_block(shared: &SharedDisk, block: u64) -> Vec<u8> {
    shared.peek(block * BLOCK_SIZE, BLOCK_SIZE as usize)
}

fn super_block_of(shared: &SharedDisk, fs: &Filesystem) -> SuperBlock {
    let slots: Vec<SuperBlock> = [0, 1]
        .iter()
        .filter_map(|&slot| SuperBlock::decode(&read_block(shared, slot)).ok())
        .collect();
    let newest = slots
        .into_iter()
        .max_by_key(|super_block| super_block.commit_sequence)
        .expect("a valid slot");
    assert_eq!(newest.file_count, fs.stats().file_count);
    newest
}

#[test]
fn the_name_table_has_the_documented_bytes() {
    let (shared, fs) = committed_image();
    let super_block = super_block_of(&shared, &fs);
    let table = blocks_of(&fs, Structure::NameTable);
    assert_eq!(table.len() as u64, super_block.name_table_block_count);
    let block = read_block(&shared, table[0]);
    let header = open_metadata_block(&block, MetadataKind::NameTable, u64::MAX).unwrap();
    assert_eq!(header.entry_count, 2);
    assert_eq!(header.commit_sequence, super_block.commit_sequence);
    assert_eq!(header.owner, 0, "index in its table");
    let (first_inode, second_inode) = (fs.open("a").unwrap().0, fs.open("bcd").unwrap().0);
    let mut entries: Vec<Vec<u8>> = vec![
        [
            &first_inode.to_le_bytes()[..], // 0..8: inode_number
            &[1, 0],                        // 8..10: name_length_bytes
            b"a",                           // 10..: name
        ]
        .concat(),
        [&second_inode.to_le_bytes()[..], &[3, 0], b"bcd"].concat(),
    ];
    let payload = &block[METADATA_HEADER_BYTES..METADATA_HEADER_BYTES + 11 + 13];
    if payload[..8] != entries[0][..8] {
        entries.reverse();
    }
    assert_eq!(payload, entries.concat().as_slice());
    assert_eq!(header.payload_bytes, 24);
    assert!(
        block[METADATA_HEADER_BYTES + 24..]
            .iter()
            .all(|&byte| byte == 0),
        "bytes after payload_bytes are zero"
    );
}

#[test]
fn the_free_list_and_checkpoint_map_have_the_documented_bytes() {
    let (shared, fs) = committed_image();
    let super_block = super_block_of(&shared, &fs);

    let mut extents = Vec::new();
    for (index, block_number) in blocks_of(&fs, Structure::FreeList).iter().enumerate() {
        let block = read_block(&shared, *block_number);
        let header = open_metadata_block(&block, MetadataKind::FreeList, u64::MAX).unwrap();
        assert_eq!(header.owner, index as u64, "index in its table");
        assert_eq!(header.payload_bytes, header.entry_count * 16);
        for entry in 0..header.entry_count as usize {
            let offset = METADATA_HEADER_BYTES + 16 * entry;
            // offset 0: first_block u64; offset 8: block_count u64.
            extents.push((read_u64(&block, offset), read_u64(&block, offset + 8)));
        }
    }
    assert_eq!(extents.len() as u64, super_block.free_extent_count);
    assert_eq!(
        extents.iter().map(|(_, count)| count).sum::<u64>(),
        super_block.free_block_count
    );
    for pair in extents.windows(2) {
        assert!(
            pair[0].0 + pair[0].1 < pair[1].0,
            "sorted, not overlapping, not adjacent: {extents:?}"
        );
    }

    let map_blocks = blocks_of(&fs, Structure::CheckpointMap);
    assert_eq!(map_blocks[0], super_block.map_head);
    assert_eq!(map_blocks.len() as u64, super_block.map_block_count);
    let map = read_block(&shared, super_block.map_head);
    let header = open_metadata_block(&map, MetadataKind::Map, u64::MAX).unwrap();
    assert_eq!(header.next_block, 0, "a one-block chain ends with 0");
    let listed: Vec<u64> = (0..header.entry_count as usize)
        .map(|index| read_u64(&map, METADATA_HEADER_BYTES + 8 * index))
        .collect();
    let expected: Vec<u64> = [
        blocks_of(&fs, Structure::NameTable),
        blocks_of(&fs, Structure::InodeTable),
        blocks_of(&fs, Structure::FreeList),
    ]
    .concat();
    assert_eq!(
        listed[..expected.len()],
        expected[..],
        "name table, then inode table, then free list, then the log region"
    );
    assert_eq!(
        listed.len() as u64,
        expected.len() as u64 + super_block.log_region_block_count
    );
    assert!(super_block.log_region_block_count >= 1);
    assert_eq!(
        (super_block.log_block_count, super_block.log_record_count),
        (0, 0),
        "a checkpoint starts with an empty log"
    );
    assert_eq!(header.payload_bytes, 8 * header.entry_count);
    assert_eq!(read_u32(&map, 0), MetadataKind::Map.code());
}
