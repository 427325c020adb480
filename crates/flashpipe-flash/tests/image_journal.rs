//! The file-backed array's crash atomicity (docs/flash-model.md, "Crash atomicity of the
//! image"): programs and erases since the last sync survive a process death through the
//! journal; program records held in memory are written before any acknowledgement leaves
//! the array; a torn last record is ignored; a version 1 `.meta` is upgraded; a read-only
//! open writes nothing.

mod common;

use std::path::{Path, PathBuf};

use common::{acks_of, page_of, scratch, small_config, with_suffix};
use flashpipe_flash::{
    AckStatus, FlashAddress, FlashArray, FlashCommand, FlashError, FlashOptions, FlashRequest,
    StorageMode,
};

fn new_file_array(path: &Path) -> FlashArray {
    FlashArray::new(
        small_config(),
        FlashOptions {
            seed: 5,
            storage: StorageMode::File(path.to_path_buf()),
            host_count: 1,
            host_queue_depth: 64,
        },
    )
    .unwrap()
}

/// A new scratch folder `name`, the image path in it and a file-backed array there.
fn array_in(name: &str) -> (PathBuf, PathBuf, FlashArray) {
    let directory = scratch(name);
    let path = directory.join("array.img");
    let array = new_file_array(&path);
    (directory, path, array)
}

fn address(block: u32, page: u32) -> FlashAddress {
    FlashAddress {
        device: 0,
        bus: 1,
        chip: 0,
        block,
        page,
    }
}

fn run(array: &mut FlashArray, command: FlashCommand) -> flashpipe_flash::Ack {
    acks_of(array, 7, command).pop().unwrap()
}

fn erase(array: &mut FlashArray, at: FlashAddress) {
    assert!(run(array, FlashCommand::EraseBlock { address: at })
        .status
        .is_ok());
}

fn write(array: &mut FlashArray, at: FlashAddress, byte: u8) -> AckStatus {
    let command = FlashCommand::WritePage {
        address: at,
        data: page_of(byte),
        spare: vec![byte; 4],
    };
    run(array, command).status
}

fn read_data(array: &mut FlashArray, at: FlashAddress) -> Vec<u8> {
    run(array, FlashCommand::ReadPage { address: at })
        .data
        .unwrap()
}

/// Synced state, then an erase and reprogram of the same block with no sync, then a death:
/// the reopened array has the new pages, not the synced table over the new bytes.
#[test]
fn programs_and_erases_after_the_last_sync_survive_a_death() {
    let (directory, path, mut array) = array_in("journal-death");
    erase(&mut array, address(2, 0));
    for page in 0..3 {
        assert!(write(&mut array, address(2, page), 0x10 + page as u8).is_ok());
    }
    array.sync().unwrap();
    erase(&mut array, address(2, 0));
    assert!(write(&mut array, address(2, 0), 0x77).is_ok());
    std::mem::forget(array);
    let mut reopened = FlashArray::open(&path, 1, 8).unwrap();
    let state = reopened.block_state(address(2, 0)).unwrap();
    assert_eq!(state.next_page, 1, "the erase and one program were kept");
    assert_eq!(state.pe_cycles, 2);
    assert_eq!(read_data(&mut reopened, address(2, 0)), page_of(0x77));
    assert_eq!(
        read_data(&mut reopened, address(2, 1)),
        vec![0xFF; 4096],
        "page 1 was erased"
    );
    std::fs::remove_dir_all(&directory).unwrap();
}

/// The image, `.meta` and journal of `from` copied beside it as `to` (a snapshot of what a
/// death at this instant would leave).
fn snapshot(from: &Path, to: &Path) {
    for suffix in ["", ".meta", ".journal"] {
        std::fs::copy(with_suffix(from, suffix), with_suffix(to, suffix)).unwrap();
    }
}

/// Programs whose acknowledgements are ready but not yet taken may still be held in memory:
/// a death then keeps a prefix of them (in submission order); once the acks are taken every
/// one of them is in the journal.
#[test]
fn held_program_records_are_written_before_acks_leave() {
    let (directory, path, mut array) = array_in("journal-held");
    let blocks = [1u32, 3, 5, 6];
    for &block in &blocks {
        erase(&mut array, address(block, 0));
    }
    array.sync().unwrap();
    for (index, &block) in blocks.iter().enumerate() {
        let command = FlashCommand::WritePage {
            address: address(block, 0),
            data: page_of(index as u8),
            spare: vec![0; 4],
        };
        array
            .submit(FlashRequest {
                tag: index as u64,
                host: 0,
                command,
            })
            .unwrap();
    }
    array.run_until(array.now_ns() + 1_000_000_000);
    let before_acks = directory.join("before-acks.img");
    snapshot(&path, &before_acks);
    let mut acks = Vec::new();
    assert_eq!(array.poll_acks(&mut acks), blocks.len());
    let after_acks = directory.join("after-acks.img");
    snapshot(&path, &after_acks);
    std::mem::forget(array);
    let programmed = |image: &Path| -> Vec<bool> {
        let reopened = FlashArray::open(image, 1, 8).unwrap();
        blocks
            .iter()
            .map(|&block| reopened.block_state(address(block, 0)).unwrap().next_page == 1)
            .collect()
    };
    let early = programmed(&before_acks);
    assert!(
        early.windows(2).all(|pair| pair[0] || !pair[1]),
        "a prefix of the programs: {early:?}"
    );
    assert_eq!(programmed(&after_acks), vec![true; blocks.len()]);
    let mut reopened = FlashArray::open(&after_acks, 1, 8).unwrap();
    for (index, &block) in blocks.iter().enumerate() {
        assert_eq!(
            read_data(&mut reopened, address(block, 0)),
            page_of(index as u8)
        );
    }
    std::fs::remove_dir_all(&directory).unwrap();
}

/// A record cut short by the death is ignored; the records before it are kept, and
/// records appended after a reopen are found by the next one.
#[test]
fn a_torn_last_record_is_ignored() {
    let (directory, path, mut array) = array_in("journal-torn");
    let journal = with_suffix(&path, ".journal");
    array.sync().unwrap();
    erase(&mut array, address(3, 0));
    assert!(write(&mut array, address(3, 0), 1).is_ok());
    assert!(write(&mut array, address(3, 1), 2).is_ok());
    std::mem::forget(array);
    // The second program's record, cut 13 bytes short: that program is lost.
    let length = std::fs::metadata(&journal).unwrap().len();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&journal)
        .unwrap();
    file.set_len(length - 13).unwrap();
    let mut reopened = FlashArray::open(&path, 1, 8).unwrap();
    assert_eq!(reopened.block_state(address(3, 0)).unwrap().next_page, 1);
    assert_eq!(read_data(&mut reopened, address(3, 0)), page_of(1));
    assert!(write(&mut reopened, address(3, 1), 9).is_ok());
    std::mem::forget(reopened);
    let mut again = FlashArray::open(&path, 1, 8).unwrap();
    assert_eq!(again.block_state(address(3, 0)).unwrap().next_page, 2);
    assert_eq!(read_data(&mut again, address(3, 1)), page_of(9));
    std::fs::remove_dir_all(&directory).unwrap();
}

/// A version 1 `.meta` (no generation, no checksum) opens and is rewritten as version 2.
#[test]
fn a_version_1_meta_is_upgraded() {
    let (directory, path, mut array) = array_in("journal-upgrade");
    erase(&mut array, address(1, 0));
    assert!(write(&mut array, address(1, 0), 0x42).is_ok());
    array.sync().unwrap();
    drop(array);
    let meta = with_suffix(&path, ".meta");
    let mut bytes = std::fs::read(&meta).unwrap();
    assert_eq!(&bytes[..8], b"FPFLASH2");
    bytes.truncate(bytes.len() - 12);
    bytes[..8].copy_from_slice(b"FPFLASH1");
    std::fs::write(&meta, &bytes).unwrap();
    std::fs::remove_file(with_suffix(&path, ".journal")).unwrap();
    let mut reopened = FlashArray::open(&path, 1, 8).unwrap();
    assert_eq!(read_data(&mut reopened, address(1, 0)), page_of(0x42));
    assert_eq!(&std::fs::read(&meta).unwrap()[..8], b"FPFLASH2");
    std::fs::remove_dir_all(&directory).unwrap();
}

/// A read-only open replays the journal in memory and writes nothing: programs fail,
/// sync is refused, and the three files keep every byte.
#[test]
fn a_read_only_open_writes_nothing() {
    let (directory, path, mut array) = array_in("journal-read-only");
    array.sync().unwrap();
    erase(&mut array, address(4, 0));
    assert!(write(&mut array, address(4, 0), 0x24).is_ok());
    std::mem::forget(array);
    let files = |path: &Path| {
        [
            path.to_path_buf(),
            with_suffix(path, ".meta"),
            with_suffix(path, ".journal"),
        ]
        .map(|file| std::fs::read(file).unwrap())
    };
    let before = files(&path);
    let mut reader = FlashArray::open_read_only(&path, 1, 8).unwrap();
    assert!(reader.is_read_only());
    assert_eq!(read_data(&mut reader, address(4, 0)), page_of(0x24));
    assert!(!write(&mut reader, address(4, 1), 1).is_ok());
    assert!(matches!(reader.sync(), Err(FlashError::ReadOnly { .. })));
    drop(reader);
    assert!(files(&path) == before, "a read-only open changed a file");
    std::fs::remove_dir_all(&directory).unwrap();
}
