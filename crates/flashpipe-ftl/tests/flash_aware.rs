//! The flash-aware layout end to end on the flash model with no FTL: `RawPageDevice`
//! under `Filesystem::format_flash_aware`; files written, flushed, read back, remounted,
//! fsck clean; overwriting several times the device's capacity, the file system's own
//! erases reclaiming the dead pages; collection moving live pages out of fragmented erase
//! blocks; a corrupted commit-ring page passed over; an erased anchor, mkfs on a
//! geometry that does not fit and fsck --repair of the layout refused.

mod support;

use flashpipe_device::{run_one, BlockDevice, IoBuf, Operation};
use flashpipe_fs::{FileId, Filesystem, FormatError, FormatOptions, MountError};
use flashpipe_ftl::RawPageDevice;

const PAGES_PER_BLOCK: u32 = 8;
const PAGE_BYTES: u32 = 4096;

fn raw_device(blocks_per_chip: u32, seed: u64) -> Box<dyn BlockDevice> {
    let config = support::small_config(blocks_per_chip, PAGES_PER_BLOCK);
    let array = support::small_array(config, seed);
    Box::new(RawPageDevice::new(Box::new(array), "raw").expect("raw pages"))
}

fn options() -> FormatOptions {
    FormatOptions {
        fs_block_size_bytes: PAGE_BYTES,
        store_identity: None,
    }
}

fn contents(seed: usize, length: usize) -> Vec<u8> {
    (0..length)
        .map(|offset| (offset.wrapping_mul(31) ^ seed.wrapping_mul(7919)) as u8)
        .collect()
}

/// The flash-aware layout formatted on `device` with this test's options.
fn format_on(device: Box<dyn BlockDevice>) -> Filesystem {
    Filesystem::format_flash_aware(device, &options(), u64::from(PAGES_PER_BLOCK)).expect("mkfs")
}

/// Creates `name` holding `contents(seed, length)` (not flushed).
fn write_new(filesystem: &mut Filesystem, name: &str, seed: usize, length: usize) -> FileId {
    let file = filesystem.create(name).expect("create");
    filesystem
        .write(file, 0, &contents(seed, length))
        .expect("write");
    file
}

fn read_all(filesystem: &mut Filesystem, name: &str, length: usize) -> Vec<u8> {
    let file = filesystem.open(name).expect("open");
    if length == 0 {
        return Vec::new();
    }
    filesystem
        .read(file, 0, length as u64)
        .expect("read")
        .to_vec()
}

#[test]
fn files_survive_a_remount_and_fsck_is_clean() {
    let device = raw_device(16, 3);
    let mut filesystem = format_on(device);
    let lengths = [0usize, 1, 4095, 4096, 70_000, 200_000];
    for (index, &length) in lengths.iter().enumerate() {
        write_new(&mut filesystem, &format!("file-{index}"), index, length);
        filesystem.flush().expect("flush");
    }
    let space = filesystem.flash_space().expect("flash-aware");
    assert_eq!(space.pages_per_erase_block, u64::from(PAGES_PER_BLOCK));
    let device = filesystem.unmount().expect("unmount");
    let mut filesystem = Filesystem::mount(device).expect("mount");
    for (index, &length) in lengths.iter().enumerate() {
        let data = read_all(&mut filesystem, &format!("file-{index}"), length);
        assert!(
            data == contents(index, length),
            "file-{index} differs after remount"
        );
    }
    let report = filesystem.check().expect("fsck");
    assert!(report.is_clean(), "{report:?}");
    let file = filesystem.create("after").expect("create after remount");
    filesystem
        .write(file, 0, &contents(99, 10_000))
        .expect("write after remount");
    filesystem.flush().expect("flush after remount");
    let device = filesystem.unmount().expect("unmount");
    let mut filesystem = Filesystem::mount(device).expect("mount again");
    assert!(read_all(&mut filesystem, "after", 10_000) == contents(99, 10_000));
}

#[test]
fn overwriting_several_times_the_capacity_is_reclaimed_by_the_file_systems_erases() {
    let device = raw_device(16, 5);
    let capacity_bytes = device.info().size_bytes() as usize;
    let mut filesystem = format_on(device);
    let length = 160_000;
    write_new(&mut filesystem, "keep", 1, 50_000);
    let file = filesystem.create("hot").expect("create");
    let mut written = 0;
    let mut round = 0;
    while written < 5 * capacity_bytes {
        filesystem
            .write(file, 0, &contents(round, length))
            .expect("overwrite");
        filesystem.flush().expect("flush");
        written += length;
        round += 1;
    }
    let last = round - 1;
    assert!(read_all(&mut filesystem, "hot", length) == contents(last, length));
    let device = filesystem.unmount().expect("unmount");
    let mut filesystem = Filesystem::mount(device).expect("mount");
    assert!(read_all(&mut filesystem, "hot", length) == contents(last, length));
    assert!(read_all(&mut filesystem, "keep", 50_000) == contents(1, 50_000));
    let report = filesystem.check().expect("fsck");
    assert!(report.is_clean(), "{report:?}");
}

#[test]
fn collection_moves_live_pages_out_of_fragmented_erase_blocks() {
    let device = raw_device(16, 9);
    let mut filesystem = format_on(device);
    let length = 3 * PAGE_BYTES as usize;
    let mut live: Vec<(String, usize)> = Vec::new();
    let mut rng = flashpipe_device::SplitMix64::new(17);
    for round in 0..900usize {
        if live.len() >= 80 {
            let victim = rng.below(live.len() as u64) as usize;
            let (name, _) = live.swap_remove(victim);
            filesystem.delete(&name).expect("delete");
        }
        let name = format!("file-{round}");
        write_new(&mut filesystem, &name, round, length);
        filesystem.flush().expect("flush");
        live.push((name, round));
    }
    let space = filesystem.flash_space().expect("flash-aware");
    assert!(space.moved_pages > 0, "collection moved pages: {space:?}");
    assert!(
        space.erased_blocks > 64,
        "the file system erased blocks: {space:?}"
    );
    assert_eq!(space.totals.pages_moved, space.moved_pages);
    assert_eq!(
        space.totals.erases, space.erased_blocks,
        "one session since mkfs: mkfs's erase of the 64 erase blocks is in both"
    );
    assert!(space.totals.pages_allocated > 900 * 3, "{space:?}");
    let device = filesystem.unmount().expect("unmount");
    let mut filesystem = Filesystem::mount(device).expect("mount");
    let (recorded, ring_records) = filesystem.flash_totals().expect("flash-aware");
    assert_eq!(
        recorded.pages_moved, space.totals.pages_moved,
        "carried by the commits"
    );
    assert!(recorded.pages_allocated >= space.totals.pages_allocated);
    assert!(
        ring_records > 100 && ring_records < 900,
        "a ring record a checkpoint (most commits here: they run collection), none a log \
         commit: {ring_records}"
    );
    for (name, round) in &live {
        assert!(
            read_all(&mut filesystem, name, length) == contents(*round, length),
            "{name}"
        );
    }
    let report = filesystem.check().expect("fsck");
    assert!(report.is_clean(), "{report:?}");
}

/// The first erased page of the commit ring after its last programmed one.
fn next_ring_page(device: &mut dyn BlockDevice) -> u64 {
    let pages = u64::from(PAGES_PER_BLOCK);
    let mut last = None;
    for page in pages..3 * pages {
        let buffer = IoBuf::zeroed(PAGE_BYTES as usize);
        let read = run_one(
            device,
            Operation::Read {
                first_block: page,
                buffer,
            },
        )
        .expect("read");
        if read
            .buffer
            .expect("buffer")
            .iter()
            .any(|&byte| byte != 0xFF)
        {
            last = Some(page);
        }
    }
    last.expect("the ring holds records") + 1
}

#[test]
fn a_corrupted_commit_page_is_passed_over_and_the_ring_goes_on_after_it() {
    let mut filesystem = format_on(raw_device(16, 21));
    write_new(&mut filesystem, "kept", 1, 20_000);
    let mut device = filesystem.unmount().expect("unmount");
    let page = next_ring_page(&mut *device);
    let mut garbage = IoBuf::zeroed(PAGE_BYTES as usize);
    garbage[..8].copy_from_slice(b"FLASHPFS");
    garbage[8..12].copy_from_slice(&7u32.to_le_bytes());
    garbage[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
    run_one(
        &mut *device,
        Operation::Write {
            first_block: page,
            buffer: garbage,
        },
    )
    .expect("program a corrupted record");
    let mut filesystem = Filesystem::mount(device).expect("mount past the corrupted record");
    assert!(read_all(&mut filesystem, "kept", 20_000) == contents(1, 20_000));
    write_new(&mut filesystem, "after", 2, 9_000);
    let device = filesystem.unmount().expect("unmount");
    let mut filesystem = Filesystem::mount(device).expect("mount again");
    assert!(read_all(&mut filesystem, "after", 9_000) == contents(2, 9_000));
    let report = filesystem.check().expect("fsck");
    assert!(report.is_clean(), "{report:?}");
}

#[test]
fn an_erased_anchor_is_refused_naming_it() {
    let filesystem = format_on(raw_device(16, 23));
    let mut device = filesystem.unmount().expect("unmount");
    run_one(
        &mut *device,
        Operation::Trim {
            first_block: 0,
            block_count: u64::from(PAGES_PER_BLOCK),
        },
    )
    .expect("erase the anchor");
    let Err(error) = Filesystem::mount(device) else {
        panic!("a mount without the anchor is refused");
    };
    assert!(matches!(error, MountError::Corrupt { .. }), "{error}");
    assert!(error.to_string().contains("anchor"), "{error}");
}

#[test]
fn mkfs_refuses_a_block_that_is_not_the_page_and_a_device_too_small() {
    let refused = Filesystem::format_flash_aware(
        raw_device(16, 25),
        &FormatOptions {
            fs_block_size_bytes: 2 * PAGE_BYTES,
            store_identity: None,
        },
        u64::from(PAGES_PER_BLOCK),
    );
    assert!(matches!(refused, Err(FormatError::FlashGeometry { .. })));
    let refused = Filesystem::format_flash_aware(raw_device(1, 25), &options(), 64);
    let Err(FormatError::FlashGeometry { detail }) = refused else {
        panic!("a device of fewer than 5 erase blocks is refused");
    };
    assert!(detail.contains("larger flash device"), "{detail}");
}

#[test]
fn fsck_repair_refuses_the_layout_and_writes_nothing() {
    let mut filesystem = format_on(raw_device(16, 27));
    write_new(&mut filesystem, "kept", 3, 30_000);
    filesystem.flush().expect("flush");
    let table_block = filesystem
        .metadata_blocks()
        .into_iter()
        .find(|(structure, _)| *structure == flashpipe_fs::Structure::InodeTable)
        .map(|(_, block)| block)
        .expect("an inode table block");
    let mut device = filesystem.unmount().expect("unmount");
    let pages = u64::from(PAGES_PER_BLOCK);
    run_one(
        &mut *device,
        Operation::Trim {
            first_block: table_block / pages * pages,
            block_count: pages,
        },
    )
    .expect("erase the inode table's erase block");
    let report = flashpipe_fs::fsck(&mut *device, true).expect("fsck runs");
    assert!(!report.findings.is_empty(), "the erased table is found");
    let refused = report.repair_refused.expect("repair refused");
    assert!(
        refused.contains("flash-aware layout has no repair"),
        "{refused}"
    );
    let again = flashpipe_fs::fsck(&mut *device, false).expect("fsck runs again");
    assert_eq!(
        again.findings.len(),
        report.findings.len(),
        "nothing changed"
    );
    assert!(report.repaired.is_empty());
}
