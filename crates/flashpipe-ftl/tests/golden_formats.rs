//! Golden bytes of the FTL's on-flash formats (docs/ftl.md, "Recovery protocol"): the
//! 36-byte spare record, the 33-byte log record and the checkpoint image, each built with
//! known values, compared with the bytes written out field by field as in the doc, and
//! decoded back. A change to any of these layouts fails here first; it must come with a
//! format version bump and an upgrade rule in docs/ftl.md.

use flashpipe_ftl::layout::{
    CheckpointImage, LogRecord, PageKind, SpareRecord, CHECKPOINT_HEADER_BYTES, CHECKPOINT_MAGIC,
    FORMAT_VERSION, LOG_RECORD_BYTES, SPARE_RECORD_BYTES,
};

/// The CRC the formats use is CRC32C (Castagnoli): its standard check value.
#[test]
fn the_checksum_is_crc32c() {
    assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
}

#[test]
fn the_documented_sizes_and_constants_hold() {
    assert_eq!(SPARE_RECORD_BYTES, 36);
    assert_eq!(LOG_RECORD_BYTES, 33);
    assert_eq!(CHECKPOINT_HEADER_BYTES, 40);
    assert_eq!(FORMAT_VERSION, 1);
    assert_eq!(CHECKPOINT_MAGIC, b"FPFTLCK1");
}

/// The spare bytes before the CRC, for a data page of logical page 0x0102030405060708,
/// version 0x1112131415161718, program 0x2122232425262728, erase count 0x31323334, poisoned.
const DATA_SPARE_BEFORE_CRC: [u8; 32] = [
    0xD7, // 0: kind, data
    0x01, // 1: flags, bit 0 poisoned
    0x01, 0x00, // 2..4: format version 1, u16 LE
    0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, // 4..12: logical page
    0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11, // 12..20: version
    0x28, 0x27, 0x26, 0x25, 0x24, 0x23, 0x22, 0x21, // 20..28: program sequence
    0x34, 0x33, 0x32, 0x31, // 28..32: erase count
];

#[test]
fn a_data_spare_record_has_the_documented_bytes() {
    let record = SpareRecord {
        kind: PageKind::Data,
        poisoned: true,
        field_a: 0x0102_0304_0506_0708,
        field_b: 0x1112_1314_1516_1718,
        program_sequence: 0x2122_2324_2526_2728,
        erase_count: 0x3132_3334,
    };
    let data = vec![0x5Au8; 4096];
    let spare = record.encode(&data);
    assert_eq!(spare.len(), SPARE_RECORD_BYTES);
    assert_eq!(spare[..32], DATA_SPARE_BEFORE_CRC);
    // 32..36: CRC32C of bytes 0..32 followed by the page data, u32 LE.
    let mut covered = DATA_SPARE_BEFORE_CRC.to_vec();
    covered.extend_from_slice(&data);
    assert_eq!(spare[32..36], crc32c::crc32c(&covered).to_le_bytes());
    assert_eq!(SpareRecord::decode(&spare, &data), Some(record));

    let mut other_data = data.clone();
    other_data[4095] ^= 1;
    assert_eq!(
        SpareRecord::decode(&spare, &other_data),
        None,
        "the CRC covers the page data"
    );
    let mut other_version = spare.clone();
    other_version[2] = 2;
    assert_eq!(SpareRecord::decode(&other_version, &data), None);
}

#[test]
fn checkpoint_and_log_spare_records_have_the_documented_kind_bytes_and_fields() {
    let checkpoint = SpareRecord {
        kind: PageKind::Checkpoint,
        poisoned: false,
        // Part index 2 (low 32 bits) of part count 5 (high 32 bits).
        field_a: (5u64 << 32) | 2,
        field_b: 77,
        program_sequence: 78,
        erase_count: 3,
    };
    let data = vec![0u8; 4096];
    let spare = checkpoint.encode(&data);
    assert_eq!(
        spare[..32],
        [
            0xC7, // 0: kind, checkpoint
            0x00, // 1: flags
            0x01, 0x00, // 2..4: version
            0x02, 0x00, 0x00, 0x00, // 4..8: part index
            0x05, 0x00, 0x00, 0x00, // 8..12: part count
            77, 0, 0, 0, 0, 0, 0, 0, // 12..20: checkpoint sequence
            78, 0, 0, 0, 0, 0, 0, 0, // 20..28: program sequence
            3, 0, 0, 0, // 28..32: erase count
        ]
    );
    assert_eq!(SpareRecord::decode(&spare, &data), Some(checkpoint));

    let log = SpareRecord {
        kind: PageKind::Log,
        poisoned: false,
        field_a: 4,
        field_b: 0,
        program_sequence: 9,
        erase_count: 0,
    };
    let spare = log.encode(&data);
    assert_eq!(spare[0], 0x17, "kind, log");
    assert_eq!(spare[4..12], [4, 0, 0, 0, 0, 0, 0, 0], "record count");
    assert_eq!(spare[12..20], [0; 8], "0 for log pages");
    assert_eq!(SpareRecord::decode(&spare, &data), Some(log));
}

#[test]
fn erased_and_factory_marked_spares_decode_as_nothing() {
    let data = vec![0xFFu8; 4096];
    assert_eq!(
        SpareRecord::decode(&[0xFF; SPARE_RECORD_BYTES], &data),
        None
    );
    assert_eq!(
        SpareRecord::decode(&[0x00; SPARE_RECORD_BYTES], &data),
        None
    );
    assert!(flashpipe_ftl::layout::is_factory_bad_mark(&[0x00, 0xFF]));
    assert!(!flashpipe_ftl::layout::is_factory_bad_mark(&[0xFF, 0x00]));
}

#[test]
fn log_records_have_the_documented_bytes() {
    let records = [
        LogRecord::Trim {
            sequence: 0x0A0B,
            first: 0x10,
            count: 3,
        },
        LogRecord::Copy {
            sequence: 0x0C0D,
            source: 0x20,
            destination: 0x0102_0304_0506_0708,
            count: 0x0100,
        },
    ];
    let mut page = Vec::new();
    for record in &records {
        record.encode_into(&mut page);
    }
    let expected: Vec<u8> = [
        // Record 0, offset 0.
        &[0x01][..],                     // 0: kind, trim
        &[0x0B, 0x0A, 0, 0, 0, 0, 0, 0], // 1..9: sequence
        &[0x10, 0, 0, 0, 0, 0, 0, 0],    // 9..17: first
        &[0, 0, 0, 0, 0, 0, 0, 0],       // 17..25: destination, 0 for trims
        &[3, 0, 0, 0, 0, 0, 0, 0],       // 25..33: count
        // Record 1, offset 33.
        &[0x02],                                           // 33: kind, copy
        &[0x0D, 0x0C, 0, 0, 0, 0, 0, 0],                   // 34..42: sequence
        &[0x20, 0, 0, 0, 0, 0, 0, 0],                      // 42..50: source
        &[0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01], // 50..58: destination
        &[0x00, 0x01, 0, 0, 0, 0, 0, 0],                   // 58..66: count
    ]
    .concat();
    assert_eq!(page, expected);
    page.resize(4096, 0);
    assert_eq!(
        LogRecord::decode_page(&page, 2).as_deref(),
        Some(&records[..])
    );
    page[33] = 3;
    assert_eq!(LogRecord::decode_page(&page, 2), None, "an unknown kind");
}

#[test]
fn a_checkpoint_image_has_the_documented_bytes() {
    let image = CheckpointImage {
        sequence: 0x0102,
        versions: vec![0, 7, 0x0A0B_0C0D],
        erase_counts: vec![1, 0x0203],
        bad_states: vec![0, 2],
        pages_per_block: 64,
    };
    let bytes = image.encode();
    let before_crc: Vec<u8> = [
        &b"FPFTLCK1"[..],                      // 0..8: magic
        &[0x02, 0x01, 0, 0, 0, 0, 0, 0],       // 8..16: checkpoint sequence
        &[3, 0, 0, 0, 0, 0, 0, 0],             // 16..24: logical page count
        &[2, 0, 0, 0, 0, 0, 0, 0],             // 24..32: block count
        &[64, 0, 0, 0],                        // 32..36: pages per block
        &[0, 0, 0, 0],                         // 36..40: zero
        &[0, 0, 0, 0, 0, 0, 0, 0],             // 40..48: version of logical page 0 (unmapped)
        &[7, 0, 0, 0, 0, 0, 0, 0],             // 48..56: version of logical page 1
        &[0x0D, 0x0C, 0x0B, 0x0A, 0, 0, 0, 0], // 56..64: version of logical page 2
        &[1, 0, 0, 0],                         // 64..68: erase count of block 0
        &[0x03, 0x02, 0, 0],                   // 68..72: erase count of block 1
        &[0, 2],                               // 72..74: bad states (good, grown bad)
    ]
    .concat();
    assert_eq!(bytes.len(), before_crc.len() + 4);
    assert_eq!(bytes[..before_crc.len()], before_crc[..]);
    // 74..78: CRC32C of everything before, u32 LE.
    assert_eq!(
        bytes[before_crc.len()..],
        crc32c::crc32c(&before_crc).to_le_bytes()
    );
    let mut padded = bytes.clone();
    padded.resize(4096, 0);
    assert_eq!(CheckpointImage::decode(&padded), Some(image));
    padded[50] ^= 1;
    assert_eq!(CheckpointImage::decode(&padded), None, "the CRC covers it");
}
