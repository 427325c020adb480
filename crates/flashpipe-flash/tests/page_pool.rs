//! The free list of page buffers: buffers come back on erase, overwrite, image write and
//! recycled reads, the list stays within its bound, and a reused buffer never shows the
//! bytes of the page it held before (erased pages read 0xFF, programmed pages read exactly
//! what was programmed), in memory and in an image file.

mod common;

use common::{array_of, only_ack, page_of, scratch, small_config};
use flashpipe_flash::pool::PAGE_POOL_LIMIT;
use flashpipe_flash::{Ack, FlashAddress, FlashArray, FlashCommand, StorageMode};

const PAGES_PER_BLOCK: u32 = 8;

fn array_with(storage: StorageMode) -> FlashArray {
    array_of(small_config(), storage, 11)
}

/// Page `page` of `block` on the first chip.
fn address(block: u32, page: u32) -> FlashAddress {
    common::address(0, 0, block, page)
}

fn run(array: &mut FlashArray, command: FlashCommand) -> Ack {
    only_ack(array, 3, command)
}

/// Programs `page` of `block` with `byte`'s test page, built in a buffer from the pool.
fn program(array: &mut FlashArray, block: u32, page: u32, byte: u8) {
    let mut data = array.take_page_buffer();
    assert!(data.is_empty(), "a buffer leaves the pool empty");
    data.extend_from_slice(&page_of(byte));
    let ack = run(
        array,
        FlashCommand::WritePage {
            address: address(block, page),
            data,
            spare: vec![byte; 4],
        },
    );
    assert!(ack.status.is_ok(), "program of block {block} page {page}");
}

/// Reads a page, checks data and spare against `expected` (None: erased), and gives the
/// data buffer back to the pool as the FTL does.
fn read_and_check(array: &mut FlashArray, block: u32, page: u32, expected: Option<u8>) {
    let ack = run(
        array,
        FlashCommand::ReadPage {
            address: address(block, page),
        },
    );
    assert!(ack.status.is_ok());
    let data = ack
        .data
        .expect("a read of a data-keeping array carries data");
    let spare = ack.spare.expect("and its spare");
    match expected {
        Some(byte) => {
            assert_eq!(data, page_of(byte), "block {block} page {page} data");
            assert_eq!(spare[..4], [byte; 4], "block {block} page {page} spare");
            assert!(spare[4..].iter().all(|&value| value == 0xFF));
        }
        None => {
            assert!(
                data.iter().all(|&value| value == 0xFF),
                "block {block} page {page}: an erased page reads 0xFF, never old bytes"
            );
            assert!(spare.iter().all(|&value| value == 0xFF));
        }
    }
    array.recycle_page_buffer(data);
}

fn erase(array: &mut FlashArray, block: u32) {
    let ack = run(
        array,
        FlashCommand::EraseBlock {
            address: address(block, 0),
        },
    );
    assert!(ack.status.is_ok());
}

/// Fills blocks 1 and 2, erases block 1, and checks every page after the buffers of the
/// erased block were reused for new programs and reads.
fn reused_buffers_never_leak(array: &mut FlashArray) {
    for block in [1, 2] {
        for page in 0..PAGES_PER_BLOCK {
            program(array, block, page, 0xA0 + page as u8);
        }
    }
    for page in 0..PAGES_PER_BLOCK {
        read_and_check(array, 1, page, Some(0xA0 + page as u8));
    }
    erase(array, 1);
    assert!(
        array.free_page_buffers() > 0,
        "erase and reads give buffers back"
    );
    for page in 0..PAGES_PER_BLOCK {
        read_and_check(array, 1, page, None);
    }
    for page in 0..PAGES_PER_BLOCK / 2 {
        program(array, 1, page, 0x10 + page as u8);
    }
    for page in 0..PAGES_PER_BLOCK {
        let expected = (page < PAGES_PER_BLOCK / 2).then_some(0x10 + page as u8);
        read_and_check(array, 1, page, expected);
        read_and_check(array, 2, page, Some(0xA0 + page as u8));
    }
}

#[test]
fn reused_buffers_never_leak_old_bytes_in_memory() {
    let mut array = array_with(StorageMode::Memory);
    reused_buffers_never_leak(&mut array);
}

#[test]
fn reused_buffers_never_leak_old_bytes_in_an_image() {
    let directory = scratch("pool");
    let mut array = array_with(StorageMode::File(directory.join("image")));
    reused_buffers_never_leak(&mut array);
    assert!(
        array.free_page_buffers() > 0,
        "image writes give buffers back"
    );
    drop(array);
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn the_free_list_stays_within_its_bound() {
    let mut array = array_with(StorageMode::Memory);
    for _ in 0..PAGE_POOL_LIMIT + 100 {
        let buffer = Vec::with_capacity(small_config().raw_page_bytes());
        array.recycle_page_buffer(buffer);
    }
    assert_eq!(array.free_page_buffers(), PAGE_POOL_LIMIT);
    array.recycle_page_buffer(Vec::new());
    assert_eq!(array.free_page_buffers(), PAGE_POOL_LIMIT);
}
