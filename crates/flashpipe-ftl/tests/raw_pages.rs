//! `RawPageDevice`: raw flash pages identity-mapped for the flash-aware layout. Programs
//! in order and reads back, erased pages read as 0xFF, and every broken flash rule (a
//! reprogram, a page out of order, a partial erase, a copy by reference) refused with its
//! typed error and nothing changed; factory bad blocks skipped by the fixed table.

mod support;

use flashpipe_device::{run_one, BlockDevice, DeviceErrorKind, IoBuf, Operation};
use flashpipe_ftl::raw_pages::{PARTIAL_ERASE_REFUSED, PROGRAM_REFUSED};
use flashpipe_ftl::RawPageDevice;

const PAGES: u32 = 8;
const PAGE_BYTES: usize = 4096;

fn device(blocks: u32) -> RawPageDevice {
    let array = support::small_array(support::small_config(blocks, PAGES), 7);
    RawPageDevice::new(Box::new(array), "raw").expect("raw pages")
}

fn filled(byte: u8, pages: usize) -> IoBuf {
    let mut buffer = IoBuf::zeroed(pages * PAGE_BYTES);
    buffer.fill(byte);
    buffer
}

fn write(
    device: &mut RawPageDevice,
    first_block: u64,
    byte: u8,
    pages: usize,
) -> Result<(), DeviceErrorKind> {
    let buffer = filled(byte, pages);
    run_one(
        device,
        Operation::Write {
            first_block,
            buffer,
        },
    )
    .map(|_| ())
    .map_err(|error| error.kind)
}

fn read(device: &mut RawPageDevice, first_block: u64, pages: usize) -> Vec<u8> {
    let buffer = IoBuf::zeroed(pages * PAGE_BYTES);
    let completion = run_one(
        device,
        Operation::Read {
            first_block,
            buffer,
        },
    )
    .expect("read");
    completion.buffer.expect("buffer back").to_vec()
}

fn refused_as(result: Result<(), DeviceErrorKind>, expected: &str) {
    match result {
        Err(DeviceErrorKind::Unsupported { operation }) => assert_eq!(operation, expected),
        other => panic!("expected the refusal {expected}, got {other:?}"),
    }
}

#[test]
fn pages_program_in_order_and_read_back_and_erased_pages_read_ff() {
    let mut device = device(16);
    assert_eq!(device.info().block_size_bytes as usize, PAGE_BYTES);
    assert_eq!(device.erase_block_count(), 2 * 2 * 16);
    write(&mut device, 0, 0x11, 3).expect("first three pages");
    write(&mut device, 3, 0x22, 1).expect("the next page");
    let data = read(&mut device, 0, 5);
    assert!(data[..3 * PAGE_BYTES].iter().all(|&byte| byte == 0x11));
    assert!(data[3 * PAGE_BYTES..4 * PAGE_BYTES]
        .iter()
        .all(|&byte| byte == 0x22));
    assert!(
        data[4 * PAGE_BYTES..].iter().all(|&byte| byte == 0xFF),
        "erased page"
    );
    let counters = device.counters();
    assert_eq!(counters.pages_programmed, 4);
    assert_eq!(counters.pages_read, 5);
}

#[test]
fn a_reprogram_and_a_page_out_of_order_are_refused_and_change_nothing() {
    let mut device = device(16);
    write(&mut device, 0, 0x11, 2).expect("two pages");
    refused_as(write(&mut device, 1, 0x99, 1), PROGRAM_REFUSED);
    refused_as(write(&mut device, 5, 0x99, 1), PROGRAM_REFUSED);
    let data = read(&mut device, 0, 6);
    assert!(data[..2 * PAGE_BYTES].iter().all(|&byte| byte == 0x11));
    assert!(data[2 * PAGE_BYTES..].iter().all(|&byte| byte == 0xFF));
    assert_eq!(device.counters().refused_programs, 2);
    write(&mut device, 2, 0x33, 1).expect("the next page in order still programs");
}

#[test]
fn a_trim_erases_whole_erase_blocks_and_refuses_part_of_one() {
    let mut device = device(16);
    let per_block = u64::from(PAGES);
    write(&mut device, 0, 0x11, PAGES as usize).expect("a full erase block");
    let partial = run_one(
        &mut device,
        Operation::Trim {
            first_block: 0,
            block_count: 3,
        },
    );
    refused_as(
        partial.map(|_| ()).map_err(|error| error.kind),
        PARTIAL_ERASE_REFUSED,
    );
    assert!(
        read(&mut device, 0, 1).iter().all(|&byte| byte == 0x11),
        "nothing erased"
    );
    run_one(
        &mut device,
        Operation::Trim {
            first_block: 0,
            block_count: per_block,
        },
    )
    .expect("erase");
    assert!(read(&mut device, 0, PAGES as usize)
        .iter()
        .all(|&byte| byte == 0xFF));
    write(&mut device, 0, 0x44, 1).expect("an erased block programs again from page 0");
    assert_eq!(device.counters().erases, 1);
}

#[test]
fn a_copy_by_reference_is_refused_and_flushes_complete() {
    let mut device = device(16);
    assert!(!device.copies_by_reference());
    let copy = run_one(
        &mut device,
        Operation::CopyByReference {
            source_first_block: 0,
            destination_first_block: 8,
            block_count: 1,
        },
    );
    assert!(matches!(
        copy.map_err(|error| error.kind),
        Err(DeviceErrorKind::Unsupported { .. })
    ));
    write(&mut device, 0, 0x11, 1).expect("write");
    run_one(&mut device, Operation::Flush).expect("flush");
}

#[test]
fn factory_bad_blocks_are_skipped_by_a_fixed_table() {
    let mut config = support::small_config(64, PAGES);
    config.reliability.factory_bad_block_fraction = 0.1;
    let array = support::small_array(config, 11);
    let mut device = RawPageDevice::new(Box::new(array), "raw").expect("raw pages");
    let erase_blocks = device.erase_block_count();
    assert!(erase_blocks < 4 * 64, "some blocks are bad: {erase_blocks}");
    assert_eq!(erase_blocks % 4, 0, "the same count on every chip");
    for erase_block in 0..erase_blocks {
        let first = erase_block * u64::from(PAGES);
        write(&mut device, first, erase_block as u8, 1).expect("every exposed block programs");
    }
    for erase_block in 0..erase_blocks {
        let first = erase_block * u64::from(PAGES);
        assert!(read(&mut device, first, 1)
            .iter()
            .all(|&byte| byte == erase_block as u8));
    }
}
