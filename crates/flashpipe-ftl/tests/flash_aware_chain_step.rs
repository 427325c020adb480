//! A flash-aware log commit programs its changed chain pages and its record in one step
//! (docs/design/29-flash-aware.md, "Chain pages and record in one step"): counted on a
//! wrapper of the raw device that numbers the program steps (a write submitted while
//! none is in flight starts one). A 96 MiB file (InnoDB's redo log: a chain of 19 pages
//! of 8 KiB) overwritten 16 KiB at a time commits its changed chain page and its record
//! in one step, then a flush. The mount's forward read takes a record past the ring's
//! only when its chain pages read back whole: a record whose chain page is torn (a byte
//! flipped), zeroed, erased-looking or from an older commit (resealed with that commit's
//! sequence) ends the log before it when it is the last whole record; followed by a whole
//! record it was durable (the next commit starts after its flush), so the log does not end
//! there: the mount refuses naming the damaged chain page, as for damage in any version. The
//! mount that refuses such a record leaves the erase block of its chain page unerased
//! (even when wholly free) until the next checkpoint is durable.

mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use flashpipe_device::{
    run_one, BlockDevice, Clock, Completion, DeviceError, DeviceInfo, IoBuf, Operation, Rejected,
    Request,
};
use flashpipe_fs::layout::{open_metadata_block, MetadataKind};
use flashpipe_fs::{Filesystem, FormatOptions, MountError};
use flashpipe_ftl::{RawPageDevice, SharedFlash};

const PAGES_PER_BLOCK: u64 = 16;
const PAGE_BYTES: usize = 8192;
const OVERWRITE_BYTES: usize = 16 * 1024;
/// Pointers an indirect block of an 8 KiB page holds.
const POINTERS_PER_CHAIN_PAGE: usize = (PAGE_BYTES - 40) / 12;
/// Direct pointers of an inode.
const DIRECT: usize = 12;

/// What the wrapper counted.
#[derive(Default)]
struct Steps {
    /// Program steps: writes submitted while no write was in flight start one.
    program_steps: u64,
    /// Pages programmed.
    pages_programmed: u64,
    /// Tags of the writes in flight.
    writes_in_flight: HashSet<u64>,
}

/// A device that counts the program steps of what runs over it.
struct StepCounting<D> {
    device: D,
    steps: Arc<Mutex<Steps>>,
}

impl<D: BlockDevice> StepCounting<D> {
    fn reaped(&self, completions: &[Completion]) {
        let mut steps = self.steps.lock().expect("steps");
        for completion in completions {
            steps.writes_in_flight.remove(&completion.tag);
        }
    }
}

impl<D: BlockDevice> BlockDevice for StepCounting<D> {
    fn info(&self) -> &DeviceInfo {
        self.device.info()
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.device.clock()
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        if let Operation::Write { buffer, .. } = &request.operation {
            let mut steps = self.steps.lock().expect("steps");
            if steps.writes_in_flight.is_empty() {
                steps.program_steps += 1;
            }
            steps.writes_in_flight.insert(request.tag);
            steps.pages_programmed += (buffer.len() / PAGE_BYTES) as u64;
        }
        self.device.submit(request)
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        let start = completions.len();
        let moved = self.device.poll_completions(completions);
        self.reaped(&completions[start..]);
        moved
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        let start = completions.len();
        let moved = self.device.wait_completions(completions)?;
        self.reaped(&completions[start..]);
        Ok(moved)
    }

    fn in_flight(&self) -> usize {
        self.device.in_flight()
    }
}

/// Raw flash kept by the test while file systems over it come and go.
struct Rig {
    flash: SharedFlash,
    steps: Arc<Mutex<Steps>>,
}

impl Rig {
    /// `blocks` erase blocks per chip of 16 pages of 8 KiB, four chips.
    fn new(blocks: u32, seed: u64) -> Rig {
        let config = support::sized_config(blocks, PAGES_PER_BLOCK as u32, PAGE_BYTES as u32);
        Rig {
            flash: SharedFlash::new(Box::new(support::small_array(config, seed))),
            steps: Arc::default(),
        }
    }

    fn device(&self) -> Box<dyn BlockDevice> {
        let raw = RawPageDevice::new(Box::new(self.flash.clone()), "raw").expect("raw pages");
        Box::new(StepCounting {
            device: raw,
            steps: Arc::clone(&self.steps),
        })
    }

    fn format(&self) -> Filesystem {
        let options = FormatOptions {
            fs_block_size_bytes: PAGE_BYTES as u32,
            store_identity: None,
        };
        Filesystem::format_flash_aware(self.device(), &options, PAGES_PER_BLOCK).expect("mkfs")
    }

    fn mount(&self) -> Filesystem {
        Filesystem::mount(self.device()).expect("mount")
    }

    /// (program steps, pages programmed) so far.
    fn counted(&self) -> (u64, u64) {
        let steps = self.steps.lock().expect("steps");
        (steps.program_steps, steps.pages_programmed)
    }
}

fn contents(round: usize, length: usize) -> Vec<u8> {
    (0..length)
        .map(|offset| (offset.wrapping_mul(131) ^ round.wrapping_mul(7919)) as u8)
        .collect()
}

/// Writes `bytes` as file `name` in 1 MiB pieces and flushes.
fn write_file(fs: &mut Filesystem, name: &str, bytes: &[u8]) {
    let file = fs.create(name).expect("create");
    for (index, piece) in bytes.chunks(1 << 20).enumerate() {
        fs.write(file, (index << 20) as u64, piece).expect("write");
    }
    fs.flush().expect("flush");
}

/// Overwrites 16 KiB of `name` from page `page` (round `round`, mirrored in `bytes`);
/// flushes; returns the program steps and pages of the flush alone.
fn overwrite(
    rig: &Rig,
    fs: &mut Filesystem,
    (name, bytes): (&str, &mut [u8]),
    page: usize,
    round: usize,
) -> (u64, u64) {
    let file = fs.open(name).expect("open");
    let patch = contents(round, OVERWRITE_BYTES);
    let offset = page * PAGE_BYTES;
    bytes[offset..offset + OVERWRITE_BYTES].copy_from_slice(&patch);
    fs.write(file, offset as u64, &patch).expect("overwrite");
    let before = rig.counted();
    fs.flush().expect("flush");
    let after = rig.counted();
    (after.0 - before.0, after.1 - before.1)
}

fn check_bytes(fs: &mut Filesystem, name: &str, bytes: &[u8], when: &str) {
    let file = fs.open(name).expect("open");
    let read = fs.read(file, 0, bytes.len() as u64).expect("read").to_vec();
    assert!(read == bytes, "{when}: the bytes of {name}");
}

#[test]
fn a_redo_log_overwrite_commits_its_chain_page_and_record_in_one_step() {
    let rig = Rig::new(256, 21);
    let mut fs = rig.format();
    let pages = 96 * 1024 * 1024 / PAGE_BYTES;
    let chain_pages = (pages - DIRECT).div_ceil(POINTERS_PER_CHAIN_PAGE);
    assert_eq!(chain_pages, 19, "InnoDB's redo log has a chain of 19 pages");
    let mut bytes = contents(1, pages * PAGE_BYTES);
    write_file(&mut fs, "ib_logfile0", &bytes);
    for (round, chain_block) in [7usize, 0, 18, 7].into_iter().enumerate() {
        let page = DIRECT + chain_block * POINTERS_PER_CHAIN_PAGE + 5;
        let (steps, programmed) =
            overwrite(&rig, &mut fs, ("ib_logfile0", &mut bytes), page, round + 2);
        assert_eq!(
            (steps, programmed),
            (1, 2),
            "chain block {chain_block}: the changed chain page and the record page, one step"
        );
    }
    drop(fs);
    let mut fs = rig.mount();
    check_bytes(&mut fs, "ib_logfile0", &bytes, "after an unclean end");
    let report = fs.check().expect("fsck");
    assert!(report.is_clean(), "{report:?}");
}

/// Every page of the device that is an indirect block of commit `sequence`.
fn chain_pages_of(device: &mut dyn BlockDevice, sequence: u64) -> Vec<u64> {
    let page_count = device.info().block_count;
    (0..page_count)
        .filter(|&page| {
            let bytes = read_page(device, page);
            open_metadata_block(&bytes, MetadataKind::Indirect, sequence)
                .is_ok_and(|header| header.commit_sequence == sequence)
        })
        .collect()
}

fn read_page(device: &mut dyn BlockDevice, page: u64) -> Vec<u8> {
    let read = Operation::Read {
        first_block: page,
        buffer: IoBuf::zeroed(PAGE_BYTES),
    };
    match run_one(device, read) {
        Ok(completion) => completion.buffer.expect("buffer").to_vec(),
        Err(_) => vec![0; PAGE_BYTES],
    }
}

/// Replaces page `page` by `bytes`: its erase block erased and reprogrammed in order
/// (its pages after the last programmed one left erased).
fn replace_page(device: &mut dyn BlockDevice, page: u64, bytes: Vec<u8>) {
    let first = page - page % PAGES_PER_BLOCK;
    let mut pages: Vec<Vec<u8>> = (first..first + PAGES_PER_BLOCK)
        .map(|page| read_page(device, page))
        .collect();
    pages[(page - first) as usize] = bytes;
    let programmed = pages
        .iter()
        .rposition(|page| page.iter().any(|&byte| byte != 0xFF))
        .map_or(0, |last| last + 1);
    let erase = Operation::Trim {
        first_block: first,
        block_count: PAGES_PER_BLOCK,
    };
    run_one(device, erase).expect("erase");
    for (offset, bytes) in pages.into_iter().take(programmed).enumerate() {
        let write = Operation::Write {
            first_block: first + offset as u64,
            buffer: IoBuf::from_slice(&bytes),
        };
        run_one(device, write).expect("program");
    }
}

/// `page` with its metadata checksum recomputed.
fn resealed(mut page: Vec<u8>) -> Vec<u8> {
    page[4..8].fill(0);
    let checksum = crc32c::crc32c(&page);
    page[4..8].copy_from_slice(&checksum.to_le_bytes());
    page
}

/// Log commits: two direct-pointer overwrites, then one that rewrites the first chain
/// page (the last commit); an unclean end; the chain page of the last replaced by `damage`
/// of it (given the sequence of the commit before): the mount ends the log at the commit
/// before, refusing the last.
fn mount_with_damaged_chain_page(seed: u64, what: &str, damage: fn(Vec<u8>, u64) -> Vec<u8>) {
    let (rig, states) = overwrites_then_unclean_end(seed, &[0, 2, DIRECT + 5]);
    let (before, kept) = states[1].clone();
    let refused = states[2].0;
    damage_chain_page_of(&rig, refused, before, damage, what);
    let mut fs = rig.mount();
    assert_eq!(
        (fs.stats().commit_sequence, fs.refused_log_record()),
        (before, Some(refused)),
        "{what}: the log ends before the record whose chain page is not whole"
    );
    check_bytes(&mut fs, "large", &kept, what);
    let report = fs.check().expect("fsck");
    assert!(report.is_clean(), "{what}: {report:?}");
    let mut bytes = kept;
    overwrite(&rig, &mut fs, ("large", &mut bytes), DIRECT + 9, 20);
    fs.unmount().expect("unmount");
    let mut fs = rig.mount();
    assert_eq!(fs.refused_log_record(), None, "{what}: a clean remount");
    check_bytes(&mut fs, "large", &bytes, what);
}

/// A file `large` whose chain has one page of pointers, then one log commit per page of
/// `pages` overwriting it (a page past the direct pointers rewrites the chain page), then
/// an unclean end; the commit sequence and the file's bytes after each commit.
fn overwrites_then_unclean_end(seed: u64, pages: &[usize]) -> (Rig, Vec<(u64, Vec<u8>)>) {
    let rig = Rig::new(32, seed);
    let mut fs = rig.format();
    let length = DIRECT + POINTERS_PER_CHAIN_PAGE + 50;
    let mut bytes = contents(3, length * PAGE_BYTES);
    write_file(&mut fs, "large", &bytes);
    let mut states = Vec::new();
    for (round, &page) in pages.iter().enumerate() {
        overwrite(&rig, &mut fs, ("large", &mut bytes), page, round + 10);
        states.push((fs.stats().commit_sequence, bytes.clone()));
    }
    drop(fs);
    (rig, states)
}

/// A byte of the page flipped (its checksum no longer holds).
fn torn(mut page: Vec<u8>, _older: u64) -> Vec<u8> {
    page[100] ^= 0x5A;
    page
}

/// The page's bytes all zero.
fn zeroed(page: Vec<u8>, _older: u64) -> Vec<u8> {
    vec![0; page.len()]
}

/// Replaces the one chain page the commit `sequence` wrote by `damage` of it.
fn damage_chain_page_of(
    rig: &Rig,
    sequence: u64,
    before: u64,
    damage: fn(Vec<u8>, u64) -> Vec<u8>,
    what: &str,
) {
    let mut device = rig.device();
    let written = chain_pages_of(&mut *device, sequence);
    assert_eq!(written.len(), 1, "{what}: the commit wrote one chain page");
    let original = read_page(&mut *device, written[0]);
    replace_page(&mut *device, written[0], damage(original, before));
}

/// The same damage to a record followed by two whole records: that record was durable
/// (the next commit started after its flush), so the mount does not end the log before
/// it (which would drop three acknowledged commits) but refuses as for damage in any
/// other version, naming the chain page, so that `fsck --repair` decides what is kept.
fn mount_with_damaged_chain_page_before_more(
    seed: u64,
    what: &str,
    damage: fn(Vec<u8>, u64) -> Vec<u8>,
) {
    let (rig, states) = overwrites_then_unclean_end(seed, &[0, DIRECT + 5, 2, 4]);
    damage_chain_page_of(&rig, states[1].0, states[0].0, damage, what);
    match Filesystem::mount(rig.device()) {
        Err(MountError::Corrupt { findings }) => assert!(
            findings.iter().any(|finding| finding
                .problem
                .contains("indirect block at chain position 0")),
            "{what}: the finding names the chain page: {findings:?}"
        ),
        Err(other) => panic!("{what}: refused for another reason: {other}"),
        Ok(fs) => panic!(
            "{what}: mounted at commit {} past a damaged chain page",
            fs.stats().commit_sequence
        ),
    }
}

#[test]
fn a_damaged_chain_page_of_a_record_followed_by_whole_records_is_damage_not_a_log_end() {
    mount_with_damaged_chain_page_before_more(35, "torn", torn);
    mount_with_damaged_chain_page_before_more(36, "zeroed", zeroed);
}

#[test]
fn the_forward_read_stops_at_a_record_whose_chain_page_is_not_whole() {
    mount_with_damaged_chain_page(31, "torn", torn);
    mount_with_damaged_chain_page(32, "zeroed", zeroed);
    mount_with_damaged_chain_page(33, "erased-looking", |page, _| vec![0xFF; page.len()]);
    mount_with_damaged_chain_page(34, "from an older commit", |mut page, older| {
        page[8..16].copy_from_slice(&older.to_le_bytes());
        resealed(page)
    });
}

/// Commits on a device of 32 erase blocks (one open for data at a time): a file `large`
/// of one chain page, `pad` pages of a second file, a direct-pointer overwrite, one that
/// rewrites the chain page (the last commit); then an unclean end. Returns the flash, the
/// chain page the fourth commit wrote and the sequences of the third and fourth commits
/// with the file after the third.
fn aligned_refusal_setup(pad: usize) -> (Rig, u64, (u64, u64), Vec<u8>) {
    let rig = Rig::new(8, 41);
    let mut fs = rig.format();
    let mut bytes = contents(5, (DIRECT + 50) * PAGE_BYTES);
    write_file(&mut fs, "large", &bytes);
    if pad > 0 {
        write_file(&mut fs, "pad", &contents(6, pad * PAGE_BYTES));
    }
    overwrite(&rig, &mut fs, ("large", &mut bytes), 0, 1);
    let before = (fs.stats().commit_sequence, bytes.clone());
    overwrite(&rig, &mut fs, ("large", &mut bytes), DIRECT + 5, 2);
    let refused = fs.stats().commit_sequence;
    drop(fs);
    let mut device = rig.device();
    let written = chain_pages_of(&mut *device, refused);
    assert_eq!(written.len(), 1, "the fourth commit wrote one chain page");
    drop(device);
    (rig, written[0], (before.0, refused), before.1)
}

#[test]
fn a_refused_records_chain_page_is_not_erased_before_the_next_checkpoint_is_durable() {
    let (rig, page, (before, refused), kept) = (0..PAGES_PER_BLOCK as usize)
        .map(aligned_refusal_setup)
        .find(|(_, page, _, _)| page % PAGES_PER_BLOCK == 0)
        .expect("a padding that puts the chain page first in its erase block");
    let mut device = rig.device();
    replace_page(&mut *device, page, vec![0; PAGE_BYTES]);
    drop(device);
    for mount in ["the first mount", "a mount after it crashed"] {
        let fs = rig.mount();
        assert_eq!(
            (fs.stats().commit_sequence, fs.refused_log_record()),
            (before, Some(refused)),
            "{mount}: the log ends before the record whose chain page is torn"
        );
        let mut device = fs.into_parts().1;
        assert!(
            read_page(&mut *device, page).iter().all(|&byte| byte == 0),
            "{mount}: the chain page's erase block (wholly free) was not erased"
        );
    }
    let mut fs = rig.mount();
    check_bytes(&mut fs, "large", &kept, "at the commit before");
    let mut bytes = kept;
    overwrite(&rig, &mut fs, ("large", &mut bytes), DIRECT + 9, 4);
    let mut device = fs.into_parts().1;
    assert!(
        read_page(&mut *device, page)
            .iter()
            .all(|&byte| byte == 0xFF),
        "erased once the checkpoint after the mount is durable"
    );
    drop(device);
    let mut fs = rig.mount();
    assert_eq!(fs.refused_log_record(), None, "the checkpoint's region");
    check_bytes(&mut fs, "large", &bytes, "after the checkpoint");
}
