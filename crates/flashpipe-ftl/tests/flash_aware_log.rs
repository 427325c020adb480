//! The flash-aware layout's log region (format versions 8 and 9, docs/format.md,
//! "Flash-aware layout"; docs/design/29-flash-aware.md): pages programmed per commit
//! counted on the raw device. A 16 KiB overwrite and flush programs its two data pages
//! and one log page, no commit-ring page (version 9; a large file adds only the chain
//! pages whose pointers changed, and the log lists its chain until a checkpoint relinks
//! it); commits that fill the region checkpoint once and go on logging; a mount after an
//! unclean end finds the log commits the ring never named by reading the region forward,
//! replays them and checkpoints at its first commit (also when it changes nothing and
//! unmounts cleanly); the forward read stops at a damaged or foreign page and takes
//! nothing after it; a version-7 image (no region) and a version-8 image (its records
//! named by the ring) mount and their first commit is a checkpoint writing version 9; a
//! log page read off the flash at the documented offsets; damaged chain entries (each
//! resealed) refused by the mount, which writes nothing. Power cuts in runs of log
//! commits that rewrite single chain pages: `flash_aware_chain_cuts.rs`.

mod support;

use std::sync::{Arc, Mutex};

use flashpipe_device::{run_one, BlockDevice, IoBuf, Operation};
use flashpipe_fs::layout::{
    open_metadata_block, read_u32, read_u64, MetadataKind, SuperBlock, FLASH_AWARE_FORMAT_VERSION,
    FLASH_LOG_FORMAT_VERSION, FLASH_SCAN_FORMAT_VERSION, METADATA_HEADER_BYTES,
    SUPER_BLOCK_SIZE_BYTES,
};
use flashpipe_fs::{CommitPolicy, Filesystem, FormatOptions, MountError};
use flashpipe_ftl::{RawPageDevice, SharedFlash};
use support::PowerFailing;

const PAGES_PER_BLOCK: u64 = 16;
const PAGE_BYTES: usize = 8192;
/// The overwrite of every commit: two pages, as an InnoDB page of 16 KiB.
const OVERWRITE_BYTES: usize = 16 * 1024;
/// The file: twelve pages, all named by direct pointers (no indirect chain to rewrite).
const FILE_BYTES: usize = 6 * OVERWRITE_BYTES;
/// What a log commit programs beyond its data pages: the log page (no ring page since
/// version 9).
const LOG_COMMIT_EXTRA_PAGES: u64 = 1;

/// Raw flash kept by the test while file systems over it come and go, and the device
/// the current one runs on (its counters readable while the file system holds it).
struct Rig {
    flash: SharedFlash,
    device: Option<Arc<Mutex<Option<RawPageDevice>>>>,
}

impl Rig {
    fn new(seed: u64) -> Rig {
        let config = support::sized_config(32, PAGES_PER_BLOCK as u32, PAGE_BYTES as u32);
        let array = support::small_array(config, seed);
        Rig {
            flash: SharedFlash::new(Box::new(array)),
            device: None,
        }
    }

    /// A fresh raw device over the flash, wrapped so that its counters stay readable.
    fn device(&mut self) -> Box<dyn BlockDevice> {
        let raw = RawPageDevice::new(Box::new(self.flash.clone()), "raw").expect("raw pages");
        let (device, slot, _) = PowerFailing::new(raw);
        self.device = Some(slot);
        Box::new(device)
    }

    fn pages_programmed(&self) -> u64 {
        let slot = self.device.as_ref().expect("a device");
        let guard = slot.lock().expect("device lock");
        guard
            .as_ref()
            .expect("in place")
            .counters()
            .pages_programmed
    }

    fn format(&mut self) -> Filesystem {
        let options = FormatOptions {
            fs_block_size_bytes: PAGE_BYTES as u32,
            store_identity: None,
        };
        let device = self.device();
        Filesystem::format_flash_aware(device, &options, PAGES_PER_BLOCK).expect("mkfs")
    }

    fn mount(&mut self) -> Filesystem {
        let device = self.device();
        Filesystem::mount(device).expect("mount")
    }
}

fn contents(round: usize, length: usize) -> Vec<u8> {
    (0..length)
        .map(|offset| (offset.wrapping_mul(131) ^ round.wrapping_mul(7919)) as u8)
        .collect()
}

/// The file `db` as a model: written whole at round 0, then overwritten 16 KiB at a time.
struct Model {
    bytes: Vec<u8>,
}

impl Model {
    fn create(fs: &mut Filesystem) -> Model {
        let bytes = contents(0, FILE_BYTES);
        let file = fs.create("db").expect("create");
        fs.write(file, 0, &bytes).expect("write");
        fs.flush().expect("flush");
        Model { bytes }
    }

    /// Overwrites 16 KiB (round `round`) and flushes: the pages that programmed.
    fn overwrite(&mut self, rig: &Rig, fs: &mut Filesystem, round: usize) -> u64 {
        let offset = (round * OVERWRITE_BYTES) % FILE_BYTES;
        let patch = contents(round, OVERWRITE_BYTES);
        self.bytes[offset..offset + OVERWRITE_BYTES].copy_from_slice(&patch);
        let before = rig.pages_programmed();
        let file = fs.open("db").expect("open");
        fs.write(file, offset as u64, &patch).expect("overwrite");
        fs.flush().expect("flush");
        rig.pages_programmed() - before
    }

    fn check(&self, fs: &mut Filesystem, when: &str) {
        let file = fs.open("db").expect("open");
        let read = fs.read(file, 0, FILE_BYTES as u64).expect("read").to_vec();
        assert!(read == self.bytes, "{when}: the file's bytes");
        let report = fs.check().expect("fsck");
        assert!(report.is_clean(), "{when}: {report:?}");
    }
}

const DATA_PAGES: u64 = (OVERWRITE_BYTES / PAGE_BYTES) as u64;

fn is_log_commit(programmed: u64) -> bool {
    (DATA_PAGES..=DATA_PAGES + LOG_COMMIT_EXTRA_PAGES).contains(&programmed)
}

#[test]
fn a_small_overwrite_programs_its_data_pages_and_a_log_page_and_no_ring_page() {
    let mut rig = Rig::new(1);
    let mut fs = rig.format();
    let mut model = Model::create(&mut fs);
    let (_, ring_records) = fs.flash_totals().expect("flash-aware");
    for round in 1..=5 {
        let programmed = model.overwrite(&rig, &mut fs, round);
        assert_eq!(
            programmed,
            DATA_PAGES + 1,
            "round {round}: the data pages and one log page"
        );
    }
    let (_, after) = fs.flash_totals().expect("flash-aware");
    assert_eq!(after, ring_records, "no ring record for a log commit");
    fs.unmount().expect("unmount");
    let mut fs = rig.mount();
    model.check(&mut fs, "after a clean remount");
}

/// Overwrites 16 KiB of `large` from page `page` (round `round`, mirrored in `bytes`) and
/// flushes: the pages that programmed.
fn overwrite_at(
    rig: &Rig,
    fs: &mut Filesystem,
    bytes: &mut [u8],
    page: usize,
    round: usize,
) -> u64 {
    let file = fs.open("large").expect("open");
    let patch = contents(round, OVERWRITE_BYTES);
    let offset = page * PAGE_BYTES;
    bytes[offset..offset + OVERWRITE_BYTES].copy_from_slice(&patch);
    let before = rig.pages_programmed();
    fs.write(file, offset as u64, &patch).expect("overwrite");
    fs.flush().expect("flush");
    rig.pages_programmed() - before
}

/// Pages beyond the direct pointers an indirect block of an 8 KiB page names.
const POINTERS_PER_CHAIN_PAGE: usize = (PAGE_BYTES - 40) / 12;

#[test]
fn a_large_file_rewrites_only_its_changed_chain_page_and_replays_its_listed_chain() {
    let mut rig = Rig::new(7);
    let mut fs = rig.format();
    let pages = 12 + POINTERS_PER_CHAIN_PAGE + 50;
    let mut bytes = contents(9, pages * PAGE_BYTES);
    let file = fs.create("large").expect("create");
    fs.write(file, 0, &bytes).expect("write");
    fs.flush().expect("flush");
    let second_chain_page = 12 + POINTERS_PER_CHAIN_PAGE + 10;
    assert_eq!(
        overwrite_at(&rig, &mut fs, &mut bytes, second_chain_page, 1),
        DATA_PAGES + 1 + LOG_COMMIT_EXTRA_PAGES,
        "the data, the chain's second page, the log page and the ring page"
    );
    assert_eq!(
        overwrite_at(&rig, &mut fs, &mut bytes, 0, 2),
        DATA_PAGES + LOG_COMMIT_EXTRA_PAGES,
        "direct pointers only: no chain page"
    );
    drop(fs);
    let mut fs = rig.mount();
    let file = fs.open("large").expect("open");
    let read = fs.read(file, 0, bytes.len() as u64).expect("read").to_vec();
    assert!(read == bytes, "the chain the log listed, replayed");
    let report = fs.check().expect("fsck");
    assert!(report.is_clean(), "{report:?}");
    overwrite_at(&rig, &mut fs, &mut bytes, second_chain_page + 4, 3);
    fs.flush_checkpoint()
        .expect("a checkpoint relinks the chain");
    fs.unmount().expect("unmount");
    let mut fs = rig.mount();
    let file = fs.open("large").expect("open");
    let read = fs.read(file, 0, bytes.len() as u64).expect("read").to_vec();
    assert!(read == bytes, "after the checkpoint");
}

#[test]
fn commits_that_fill_the_region_checkpoint_once_and_go_on_logging() {
    let mut rig = Rig::new(2);
    let mut fs = rig.format();
    let mut model = Model::create(&mut fs);
    let rounds = 3 * PAGES_PER_BLOCK as usize;
    let costs: Vec<u64> = (1..=rounds)
        .map(|round| model.overwrite(&rig, &mut fs, round))
        .collect();
    let checkpoints: Vec<usize> = (0..rounds).filter(|&i| !is_log_commit(costs[i])).collect();
    assert!(
        (2..=3).contains(&checkpoints.len()),
        "one checkpoint per filled region of {PAGES_PER_BLOCK} records: {costs:?}"
    );
    for pair in checkpoints.windows(2) {
        assert!(
            pair[1] - pair[0] >= PAGES_PER_BLOCK as usize - 1,
            "a full region between checkpoints: {costs:?}"
        );
    }
    model.check(&mut fs, "before the remount");
    fs.unmount().expect("unmount");
    let mut fs = rig.mount();
    model.check(&mut fs, "after a clean remount");
    let programmed = model.overwrite(&rig, &mut fs, rounds + 1);
    assert!(
        is_log_commit(programmed),
        "logging after a clean mount: {programmed}"
    );
}

#[test]
fn after_an_unclean_end_the_log_replays_and_the_first_commit_checkpoints() {
    let mut rig = Rig::new(3);
    let mut fs = rig.format();
    let mut model = Model::create(&mut fs);
    for round in 1..=4 {
        model.overwrite(&rig, &mut fs, round);
    }
    drop(fs);
    let mut fs = rig.mount();
    model.check(&mut fs, "after the unclean end (four log records replayed)");
    let first = model.overwrite(&rig, &mut fs, 5);
    assert!(
        !is_log_commit(first),
        "a checkpoint into a fresh region: {first}"
    );
    let second = model.overwrite(&rig, &mut fs, 6);
    assert!(is_log_commit(second), "then log records again: {second}");
    drop(fs);
    let mut fs = rig.mount();
    model.check(&mut fs, "after a second unclean end");
}

#[test]
fn an_unclean_mount_closed_unchanged_checkpoints_before_its_clean_record() {
    let mut rig = Rig::new(4);
    let mut fs = rig.format();
    let mut model = Model::create(&mut fs);
    model.overwrite(&rig, &mut fs, 1);
    drop(fs);
    let fs = rig.mount();
    let before = rig.pages_programmed();
    fs.unmount().expect("unmount");
    let at_unmount = rig.pages_programmed() - before;
    assert!(
        at_unmount > 1 + LOG_COMMIT_EXTRA_PAGES,
        "a checkpoint, then the clean record: {at_unmount} pages"
    );
    let mut fs = rig.mount();
    model.check(&mut fs, "after the clean close");
    let programmed = model.overwrite(&rig, &mut fs, 2);
    assert!(
        is_log_commit(programmed),
        "the fresh region logs: {programmed}"
    );
}

/// Every programmed page of the commit ring that holds a valid record.
fn ring_records(device: &mut dyn BlockDevice) -> Vec<(u64, SuperBlock)> {
    (PAGES_PER_BLOCK..3 * PAGES_PER_BLOCK)
        .filter_map(|page| {
            let bytes = read_page(device, page);
            SuperBlock::decode(&bytes[..SUPER_BLOCK_SIZE_BYTES])
                .ok()
                .map(|record| (page, record))
        })
        .collect()
}

/// The ring's newest valid record.
fn newest_record(device: &mut dyn BlockDevice) -> SuperBlock {
    ring_records(device)
        .into_iter()
        .map(|(_, record)| record)
        .max_by_key(|record| record.ring_sequence)
        .expect("the ring holds a record")
}

fn read_page(device: &mut dyn BlockDevice, page: u64) -> Vec<u8> {
    let read = Operation::Read {
        first_block: page,
        buffer: IoBuf::zeroed(PAGE_BYTES),
    };
    run_one(device, read)
        .expect("read")
        .buffer
        .expect("buffer")
        .to_vec()
}

fn program(device: &mut dyn BlockDevice, page: u64, bytes: &[u8]) {
    let mut buffer = IoBuf::zeroed(PAGE_BYTES);
    buffer[..bytes.len()].copy_from_slice(bytes);
    let write = Operation::Write {
        first_block: page,
        buffer,
    };
    run_one(device, write).expect("program");
}

/// Rewrites the commit ring as the version-7 layout wrote it: only the records of
/// checkpoints without a log region, each saying version 7, in order from the ring's
/// first page (both ring erase blocks erased first).
fn make_version_7(device: &mut dyn BlockDevice) {
    let kept: Vec<SuperBlock> = ring_records(device)
        .into_iter()
        .map(|(_, record)| record)
        .filter(|record| record.log_region_block_count == 0)
        .collect();
    assert!(!kept.is_empty(), "commits without a region");
    let erase = Operation::Trim {
        first_block: PAGES_PER_BLOCK,
        block_count: 2 * PAGES_PER_BLOCK,
    };
    run_one(device, erase).expect("erase the ring");
    for (index, mut record) in kept.into_iter().enumerate() {
        record.format_version = FLASH_AWARE_FORMAT_VERSION;
        program(device, PAGES_PER_BLOCK + index as u64, &record.encode());
    }
}

#[test]
fn a_version_7_image_mounts_and_its_first_commit_takes_a_region() {
    let mut rig = Rig::new(5);
    let mut fs = rig.format();
    fs.set_commit_policy(CommitPolicy::CheckpointEveryCommit);
    let mut model = Model::create(&mut fs);
    model.overwrite(&rig, &mut fs, 1);
    let mut device = fs.unmount().expect("unmount");
    make_version_7(&mut *device);
    let records = ring_records(&mut *device);
    assert!(records
        .iter()
        .all(|(_, record)| record.format_version == FLASH_AWARE_FORMAT_VERSION));
    drop(device);
    let mut fs = rig.mount();
    model.check(&mut fs, "the version-7 image");
    let first = model.overwrite(&rig, &mut fs, 2);
    assert!(
        !is_log_commit(first),
        "a checkpoint that takes a region: {first}"
    );
    let second = model.overwrite(&rig, &mut fs, 3);
    assert!(is_log_commit(second), "then a log record: {second}");
    let mut device = fs.unmount().expect("unmount");
    let newest = newest_record(&mut *device);
    assert_eq!(newest.format_version, FLASH_SCAN_FORMAT_VERSION);
    assert_eq!(newest.log_region_block_count, PAGES_PER_BLOCK);
    drop(device);
    let mut fs = rig.mount();
    model.check(&mut fs, "after the upgrade");
}

#[test]
fn a_log_page_on_flash_has_the_documented_bytes() {
    let mut rig = Rig::new(6);
    let mut fs = rig.format();
    let mut model = Model::create(&mut fs);
    model.overwrite(&rig, &mut fs, 1);
    let mut device = fs.unmount().expect("unmount");
    let newest = newest_record(&mut *device);
    assert_eq!(newest.format_version, FLASH_SCAN_FORMAT_VERSION);
    assert_eq!(
        (
            newest.log_region_block_count,
            newest.log_block_count,
            newest.log_record_count
        ),
        (PAGES_PER_BLOCK, 2, 2),
        "the create and the overwrite, one page each"
    );
    let map = read_page(&mut *device, newest.map_head);
    let header = open_metadata_block(&map, MetadataKind::Map, newest.commit_sequence)
        .expect("the checkpoint map");
    let listed: Vec<u64> = (0..header.entry_count as usize)
        .map(|slot| read_u64(&map, METADATA_HEADER_BYTES + 8 * slot))
        .collect();
    let region = &listed[listed.len() - PAGES_PER_BLOCK as usize..];
    assert_eq!(
        region[0] % PAGES_PER_BLOCK,
        0,
        "the region starts an erase block"
    );
    assert!(region.windows(2).all(|pair| pair[1] == pair[0] + 1));
    let page = read_page(&mut *device, region[1]);
    let header = open_metadata_block(&page, MetadataKind::Log, newest.commit_sequence)
        .expect("the second log page");
    assert_eq!(&page[0..4], b"LOGR");
    assert_eq!(header.commit_sequence, newest.commit_sequence);
    assert_eq!(
        (header.next_block, header.owner),
        (newest.checkpoint_sequence(), 1),
        "the region's checkpoint, region index 1"
    );
    let start = &page[METADATA_HEADER_BYTES..];
    assert_eq!(start[0], 7, "the version-5 record start");
    assert_eq!(read_u32(start, 4), 1, "one page");
    assert_eq!(read_u32(start, 8), 0, "no removed inode");
    assert_eq!(read_u32(start, 12), 1, "one file entry");
    assert!(read_page(&mut *device, region[2])
        .iter()
        .all(|&byte| byte == 0xFF));
}

/// The region's pages (from the checkpoint map of `newest`) in order.
fn region_pages(device: &mut dyn BlockDevice, newest: &SuperBlock) -> Vec<u64> {
    let map = read_page(device, newest.map_head);
    let header = open_metadata_block(&map, MetadataKind::Map, newest.commit_sequence)
        .expect("the checkpoint map");
    let listed: Vec<u64> = (0..header.entry_count as usize)
        .map(|slot| read_u64(&map, METADATA_HEADER_BYTES + 8 * slot))
        .collect();
    listed[listed.len() - newest.log_region_block_count as usize..].to_vec()
}

/// Erases the region's erase block and programs `pages` (the log's pages, in order).
fn reprogram_region(device: &mut dyn BlockDevice, region: &[u64], pages: &[Vec<u8>]) {
    let erase = Operation::Trim {
        first_block: region[0],
        block_count: region.len() as u64,
    };
    run_one(device, erase).expect("erase the region");
    for (page, bytes) in region.iter().zip(pages) {
        program(device, *page, bytes);
    }
}

/// `page` with its metadata checksum recomputed (so that only the replay's checks see
/// the change).
fn resealed_log_page(mut page: Vec<u8>) -> Vec<u8> {
    page[4..8].fill(0);
    let checksum = crc32c::crc32c(&page);
    page[4..8].copy_from_slice(&checksum.to_le_bytes());
    page
}

#[test]
fn a_damaged_chain_entry_is_refused_and_the_mount_writes_nothing() {
    let mut rig = Rig::new(8);
    let mut fs = rig.format();
    let pages = 12 + POINTERS_PER_CHAIN_PAGE + 50;
    let mut bytes = contents(11, pages * PAGE_BYTES);
    let file = fs.create("large").expect("create");
    fs.write(file, 0, &bytes).expect("write");
    fs.flush().expect("flush");
    overwrite_at(
        &rig,
        &mut fs,
        &mut bytes,
        12 + POINTERS_PER_CHAIN_PAGE + 5,
        1,
    );
    let mut device = fs.unmount().expect("unmount");
    let newest = newest_record(&mut *device);
    let region = region_pages(&mut *device, &newest);
    let log: Vec<Vec<u8>> = region[..newest.log_block_count as usize]
        .iter()
        .map(|&page| read_page(&mut *device, page))
        .collect();
    let last = log.last().expect("a record").clone();
    let payload_bytes = read_u32(&last, 28) as usize;
    let entry = METADATA_HEADER_BYTES + payload_bytes - (16 + 2 * 8);
    assert_eq!(last[entry], 8, "the record ends with its chain entry");
    let (head, second) = (read_u64(&last, entry + 16), read_u64(&last, entry + 24));
    let damages: [(&str, usize, u64); 4] = [
        (
            "blocks swapped: the first is not the head",
            entry + 16,
            second,
        ),
        ("a block out of range", entry + 24, u64::MAX / 2),
        ("a block listed twice", entry + 24, head),
        ("an inode the record does not hold", entry + 8, 0x7777),
    ];
    drop(device);
    for (what, offset, value) in damages {
        let mut damaged = last.clone();
        damaged[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
        let mut pages = log.clone();
        *pages.last_mut().expect("a record") = resealed_log_page(damaged);
        let mut device = rig.device();
        reprogram_region(&mut *device, &region, &pages);
        let before = rig.pages_programmed();
        let refused = Filesystem::mount(device);
        let Err(MountError::Corrupt { findings }) = refused else {
            panic!("{what}: the mount is refused as corrupt");
        };
        assert!(
            findings
                .iter()
                .any(|finding| finding.problem.contains("chain entry")),
            "{what}: {findings:?}"
        );
        assert_eq!(
            rig.pages_programmed(),
            before,
            "{what}: the mount wrote nothing"
        );
    }
    let mut device = rig.device();
    reprogram_region(&mut *device, &region, &log);
    drop(device);
    let mut fs = rig.mount();
    let file = fs.open("large").expect("open");
    let read = fs.read(file, 0, bytes.len() as u64).expect("read").to_vec();
    assert!(read == bytes, "the undamaged log replays");
}

#[test]
fn log_commits_the_ring_never_named_replay_after_an_unclean_end() {
    let mut rig = Rig::new(9);
    let mut fs = rig.format();
    let mut model = Model::create(&mut fs);
    let commits = 6;
    for round in 1..=commits {
        model.overwrite(&rig, &mut fs, round);
    }
    let sequence = fs.stats().commit_sequence;
    drop(fs);
    let mut device = rig.device();
    let newest = newest_record(&mut *device);
    assert!(
        newest.commit_sequence + commits as u64 <= sequence,
        "the ring names none of the {commits} log commits: it says {}, the last was {sequence}",
        newest.commit_sequence
    );
    drop(device);
    let mut fs = rig.mount();
    assert_eq!(
        fs.stats().commit_sequence,
        sequence,
        "every log commit found by reading the region forward"
    );
    model.check(&mut fs, "after the unclean end");
}

/// Log pages of the region, read as the forward read of a mount finds them (up to the
/// first erased page).
fn programmed_log(device: &mut dyn BlockDevice, region: &[u64]) -> Vec<Vec<u8>> {
    region
        .iter()
        .map(|&page| read_page(device, page))
        .take_while(|page| page.iter().any(|&byte| byte != 0xFF))
        .collect()
}

/// Five log commits, an unclean end, then the log page `position` after those the ring
/// names replaced by `damage` of it: the mount takes the records before it only.
fn mount_with_damaged_log_page(seed: u64, position: usize, damage: fn(Vec<u8>) -> Vec<u8>) {
    let mut rig = Rig::new(seed);
    let mut fs = rig.format();
    let mut model = Model::create(&mut fs);
    let mut states = vec![(fs.stats().commit_sequence, model.bytes.clone())];
    for round in 1..=5 {
        model.overwrite(&rig, &mut fs, round);
        states.push((fs.stats().commit_sequence, model.bytes.clone()));
    }
    drop(fs);
    let mut device = rig.device();
    let newest = newest_record(&mut *device);
    let region = region_pages(&mut *device, &newest);
    let mut log = programmed_log(&mut *device, &region);
    let damaged = newest.log_block_count as usize + position;
    assert!(damaged + 1 < log.len(), "records after the damaged one");
    log[damaged] = damage(log[damaged].clone());
    reprogram_region(&mut *device, &region, &log);
    drop(device);
    let mut fs = rig.mount();
    let expected = newest.checkpoint_sequence() + damaged as u64;
    assert_eq!(
        fs.stats().commit_sequence,
        expected,
        "the records before the damaged page, none after it"
    );
    let (_, bytes) = states
        .iter()
        .find(|(sequence, _)| *sequence == expected)
        .expect("a commit of the run");
    model.bytes = bytes.clone();
    model.check(&mut fs, "at the record before the damaged page");
    let programmed = model.overwrite(&rig, &mut fs, 9);
    assert!(
        !is_log_commit(programmed),
        "then a checkpoint: {programmed}"
    );
    fs.unmount().expect("unmount");
    let mut fs = rig.mount();
    model.check(&mut fs, "after a clean remount");
}

#[test]
fn the_forward_read_stops_at_a_torn_or_foreign_page_and_takes_nothing_after_it() {
    mount_with_damaged_log_page(10, 1, |mut page| {
        page[METADATA_HEADER_BYTES + 40] ^= 0x5A;
        page
    });
    mount_with_damaged_log_page(11, 2, |mut page| {
        let tag = read_u64(&page, 16);
        page[16..24].copy_from_slice(&(tag + 1).to_le_bytes());
        resealed_log_page(page)
    });
    mount_with_damaged_log_page(12, 3, |page| vec![0; page.len()]);
}

/// Rewrites the image as version 8 wrote it: the region's log pages without their
/// region tag (resealed), every ring record saying version 8, in ring order from the
/// ring's first page (both ring erase blocks erased first). The newest record (a clean
/// unmount's) names every record of the region, as version 8's ring records did.
fn make_version_8(device: &mut dyn BlockDevice) {
    let newest = newest_record(device);
    let region = region_pages(device, &newest);
    let log: Vec<Vec<u8>> = programmed_log(device, &region)
        .into_iter()
        .map(|mut page| {
            page[16..24].fill(0);
            resealed_log_page(page)
        })
        .collect();
    assert_eq!(log.len() as u64, newest.log_block_count);
    reprogram_region(device, &region, &log);
    let mut records: Vec<SuperBlock> = ring_records(device)
        .into_iter()
        .map(|(_, record)| record)
        .collect();
    records.sort_by_key(|record| record.ring_sequence);
    let erase = Operation::Trim {
        first_block: PAGES_PER_BLOCK,
        block_count: 2 * PAGES_PER_BLOCK,
    };
    run_one(device, erase).expect("erase the ring");
    for (index, mut record) in records.into_iter().enumerate() {
        record.format_version = FLASH_LOG_FORMAT_VERSION;
        program(device, PAGES_PER_BLOCK + index as u64, &record.encode());
    }
}

#[test]
fn a_version_8_image_replays_its_named_records_and_upgrades_at_its_first_commit() {
    let mut rig = Rig::new(13);
    let mut fs = rig.format();
    let mut model = Model::create(&mut fs);
    for round in 1..=3 {
        model.overwrite(&rig, &mut fs, round);
    }
    let mut device = fs.unmount().expect("unmount");
    make_version_8(&mut *device);
    assert_eq!(
        newest_record(&mut *device).format_version,
        FLASH_LOG_FORMAT_VERSION
    );
    drop(device);
    let mut fs = rig.mount();
    model.check(&mut fs, "the version-8 image");
    let first = model.overwrite(&rig, &mut fs, 4);
    assert!(
        !is_log_commit(first),
        "a checkpoint writing version 9: {first}"
    );
    let second = model.overwrite(&rig, &mut fs, 5);
    assert!(is_log_commit(second), "then a log record: {second}");
    let mut device = fs.unmount().expect("unmount");
    assert_eq!(
        newest_record(&mut *device).format_version,
        FLASH_SCAN_FORMAT_VERSION
    );
    drop(device);
    let mut fs = rig.mount();
    model.check(&mut fs, "after the upgrade");
}
