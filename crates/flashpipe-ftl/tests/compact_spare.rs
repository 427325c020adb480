//! The compact spare record (format 2, 20 bytes) for pages whose host spare cannot hold
//! the full 36-byte one (the rad preset): its golden bytes, its round trip and its
//! refusals; an FTL over such pages formats, survives collection, and mounts after a
//! power cut with every completed write; arrays with fewer than 20 host spare bytes are
//! still refused.

mod support;

use flashpipe_device::{conformance, run_one, BlockDevice, Operation};
use flashpipe_flash::FlashConfig;
use flashpipe_ftl::layout::{
    check_spare_layout, uses_compact_spare, PageKind, SpareRecord, COMPACT_SPARE_RECORD_BYTES,
    SPARE_RECORD_BYTES,
};
use flashpipe_ftl::{FlashBackend, Ftl};

/// A data page of logical page 0x0102030405, version 0x1112131415, program 0x2122232425.
const COMPACT_DATA_BEFORE_CRC: [u8; 16] = [
    0xD3, // 0: kind data, format 2, poisoned
    0x05, 0x04, 0x03, 0x02, 0x01, // 1..6: logical page, 40 bits LE
    0x15, 0x14, 0x13, 0x12, 0x11, // 6..11: version, 40 bits LE
    0x25, 0x24, 0x23, 0x22, 0x21, // 11..16: program sequence, 40 bits LE
];

#[test]
fn a_compact_data_record_has_the_documented_bytes() {
    assert_eq!(COMPACT_SPARE_RECORD_BYTES, 20);
    let record = SpareRecord {
        kind: PageKind::Data,
        poisoned: true,
        field_a: 0x01_0203_0405,
        field_b: 0x11_1213_1415,
        program_sequence: 0x21_2223_2425,
        erase_count: 0,
    };
    let data = vec![0xA5u8; 4096];
    let spare = record.encode_compact(&data);
    assert_eq!(spare.len(), COMPACT_SPARE_RECORD_BYTES);
    assert_eq!(spare[..16], COMPACT_DATA_BEFORE_CRC);
    let mut covered = COMPACT_DATA_BEFORE_CRC.to_vec();
    covered.extend_from_slice(&data);
    assert_eq!(spare[16..20], crc32c::crc32c(&covered).to_le_bytes());
    assert_eq!(SpareRecord::decode(&spare, &data), Some(record));
    let mut other = data.clone();
    other[7] ^= 1;
    assert_eq!(
        SpareRecord::decode(&spare, &other),
        None,
        "the CRC covers the data"
    );
    // The encoder picks the compact record on small spares only.
    assert_eq!(record.encode_for(&data, 20), spare);
    assert_eq!(record.encode_for(&data, 36).len(), SPARE_RECORD_BYTES);
    assert!(uses_compact_spare(35) && !uses_compact_spare(36));
}

#[test]
fn compact_checkpoint_and_log_records_round_trip() {
    let data = vec![0x3Cu8; 2048];
    for (kind, byte, field_a) in [
        (PageKind::Checkpoint, 0xC2, 7 | 9 << 32),
        (PageKind::Log, 0x12, 41),
        (PageKind::Data, 0xD2, 0),
    ] {
        let record = SpareRecord {
            kind,
            poisoned: false,
            field_a,
            field_b: 99,
            program_sequence: 1234,
            erase_count: 0,
        };
        let spare = record.encode_compact(&data);
        assert_eq!(spare[0], byte);
        assert_eq!(SpareRecord::decode(&spare, &data), Some(record));
    }
    // Part 7 of 9 packs as 7 | 9 << 20.
    let checkpoint = SpareRecord {
        kind: PageKind::Checkpoint,
        poisoned: false,
        field_a: 7 | 9 << 32,
        field_b: 1,
        program_sequence: 2,
        erase_count: 0,
    };
    let spare = checkpoint.encode_compact(&data);
    assert_eq!(spare[1..6], (7u64 | 9 << 20).to_le_bytes()[..5]);
    assert_eq!(SpareRecord::decode(&[0xFF; 20], &data), None);
    assert_eq!(SpareRecord::decode(&[0x00; 20], &data), None);
    assert_eq!(SpareRecord::decode(&spare[..19], &data), None);
}

/// The small test geometry with the rad preset's spare: 20 host bytes after the parity.
fn compact_config() -> FlashConfig {
    let mut config = support::sized_config(32, 16, 4096);
    config.geometry.page_spare_bytes = 224;
    config
}

#[test]
fn the_rad_preset_fits_and_smaller_spares_are_refused() {
    let rad = FlashConfig::preset("rad").unwrap();
    assert_eq!(rad.host_spare_bytes(), 20);
    check_spare_layout(&rad).expect("rad carries the compact record");
    assert_eq!(compact_config().host_spare_bytes(), 20);
    let mut tiny = compact_config();
    tiny.geometry.page_spare_bytes = 210;
    assert!(tiny.host_spare_bytes() < 20);
    let error = check_spare_layout(&tiny).unwrap_err();
    assert!(error.contains("at least 20"), "{error}");
    let array = support::small_array(tiny, 3);
    let refused = Ftl::format(
        Box::new(array) as Box<dyn FlashBackend>,
        support::test_options(4),
    );
    assert!(refused.is_err());
}

fn compact_ftl(queue_depth: u32) -> Ftl {
    let array = support::small_array(compact_config(), 5);
    Ftl::format(
        Box::new(array) as Box<dyn FlashBackend>,
        support::test_options(queue_depth),
    )
    .expect("format on compact spares")
}

#[test]
fn an_ftl_on_compact_spares_passes_the_block_device_conformance_suite() {
    conformance::check_all(&mut |queue_depth| {
        Box::new(compact_ftl(queue_depth)) as Box<dyn BlockDevice>
    });
}

#[test]
fn an_ftl_on_compact_spares_mounts_after_a_power_cut_with_its_writes() {
    let mut ftl = compact_ftl(8);
    let page = ftl.info().block_size_bytes as usize;
    let logical_pages = ftl.info().block_count;
    // Several passes over the device, so collection moves pages and checkpoints and log
    // pages are written on compact spares too.
    for round in 0..4u8 {
        for logical in 0..logical_pages {
            support::fill_page(&mut ftl, logical, round ^ logical as u8);
        }
    }
    run_one(
        &mut ftl,
        Operation::Trim {
            first_block: 3,
            block_count: 2,
        },
    )
    .expect("trim")
    .status
    .expect("trimmed");
    assert!(ftl.stats().gc_victims > 0, "collection ran");
    let backend = ftl.into_backend();
    let (mut ftl, _) = Ftl::mount(backend, support::test_options(8)).expect("mount");
    for logical in 0..logical_pages {
        let data = support::read_pages(&mut ftl, logical, page);
        let expected = if (3..5).contains(&logical) {
            0
        } else {
            3 ^ logical as u8
        };
        assert!(
            data.iter().all(|&byte| byte == expected),
            "logical page {logical}"
        );
    }
    ftl.check_invariants().expect("invariants");
}
