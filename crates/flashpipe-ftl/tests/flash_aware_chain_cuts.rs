//! Power cuts in runs of flash-aware log commits that rewrite single chain pages of a
//! large file (docs/design/29-flash-aware.md): a log commit programs its changed chain
//! pages and its record in one step, so a cut can leave the record whole and a chain page
//! torn or lost; the mount then refuses that record (counted) and is at the commit
//! before. A second cut lands in the first commit after that mount (a checkpoint into a
//! fresh region, which carries the refused record's commit sequence): the mount after it
//! finds the file as the first mount did or as that commit left it, never as the refused
//! record would have (the first mount keeps the refused record's chain pages from being
//! erased and reprogrammed before the checkpoint is durable).
//!
//! `FLASHPIPE_SEEDS=n` runs n seeds (default 40); `FLASHPIPE_SEED=n` replays one.

mod support;

use flashpipe_fs::{Filesystem, FormatOptions};
use flashpipe_ftl::{PowerCutFlash, RawPageDevice, SharedFlash};
use support::PowerFailing;

const PAGES_PER_BLOCK: u64 = 16;
const PAGE_BYTES: usize = 8192;
/// The overwrite of every commit: two pages, as an InnoDB page of 16 KiB.
const OVERWRITE_BYTES: usize = 16 * 1024;
/// Pages beyond the direct pointers an indirect block of an 8 KiB page names.
const POINTERS_PER_CHAIN_PAGE: usize = (PAGE_BYTES - 40) / 12;

fn contents(round: usize, length: usize) -> Vec<u8> {
    (0..length)
        .map(|offset| (offset.wrapping_mul(131) ^ round.wrapping_mul(7919)) as u8)
        .collect()
}

type SharedArray = SharedFlash<PowerCutFlash>;

fn raw_over(array: &SharedArray) -> RawPageDevice {
    RawPageDevice::new(Box::new(array.clone()), "raw").expect("raw pages")
}

fn read_large(fs: &mut Filesystem, length: usize) -> Vec<u8> {
    let file = fs.open("large").expect("open");
    fs.read(file, 0, length as u64).expect("read").to_vec()
}

/// The first commit after the mount that followed the cut, itself cut at a random device
/// call: the mount after that second cut finds `found` or the overwrite's bytes, fsck
/// clean. Returns the file system and its file's bytes, and whether the cut landed.
fn cut_the_recovery_commit(
    array: &SharedArray,
    rng: &mut flashpipe_device::SplitMix64,
    found: Vec<u8>,
    seed: u64,
) -> (Filesystem, Vec<u8>, bool) {
    let (device, _, switch) = PowerFailing::new(raw_over(array));
    let mut fs = Filesystem::mount(Box::new(device))
        .unwrap_or_else(|error| panic!("seed {seed}: mount after the cut: {error}"));
    switch.lock().expect("switch").countdown = Some(rng.below(60));
    let page = rng.below(40) as usize;
    let mut patched = found.clone();
    let patch = contents(page + 7, OVERWRITE_BYTES);
    patched[page * PAGE_BYTES..page * PAGE_BYTES + OVERWRITE_BYTES].copy_from_slice(&patch);
    let file = fs.open("large").expect("open");
    let done = fs.write(file, (page * PAGE_BYTES) as u64, &patch).is_ok() && fs.flush().is_ok();
    let mut switch = switch.lock().expect("switch");
    if done && !switch.crashed {
        switch.countdown = None;
        drop(switch);
        return (fs, patched, false);
    }
    drop(switch);
    drop(fs);
    array
        .lock()
        .cut_power(seed.wrapping_mul(0x9E37_79B9) ^ 0x005E_C00D);
    let mut fs = Filesystem::mount(Box::new(raw_over(array)))
        .unwrap_or_else(|error| panic!("seed {seed}: mount after the second cut: {error}"));
    let report = fs.check().expect("fsck");
    assert!(
        report.is_clean(),
        "seed {seed}: after the second cut: {report:?}"
    );
    let again = read_large(&mut fs, found.len());
    assert!(
        again == found || again == patched,
        "seed {seed}: after the second cut the file is neither the first mount's nor the \
         recovery commit's"
    );
    (fs, again, true)
}

/// A power cut in a run of 16 KiB overwrites of a file whose chain spans two pages (so
/// that log commits rewrite single chain pages and list unlinked chains): what one seed
/// found.
struct ChainCut {
    crashed: bool,
    /// The first commit after the mount was cut too.
    recovery_cut: bool,
    records_replayed: u64,
    /// The mount refused a whole record whose chain page was torn or lost.
    refused_for_chains: bool,
}

/// One seed: a file of two chain pages, random overwrites each flushed, power cut at a
/// random device call; mount (read-only first): fsck clean, the file as its last flush
/// (or the flush in progress) left it; the first commit after a read-write mount cut
/// ([`cut_the_recovery_commit`]); then an overwrite and a clean remount.
fn chain_cut_seed(seed: u64) -> ChainCut {
    let mut rng = flashpipe_device::SplitMix64::new(seed ^ 0xC4A1_1065);
    let config = support::sized_config(32, PAGES_PER_BLOCK as u32, PAGE_BYTES as u32);
    let array: SharedFlash<PowerCutFlash> = SharedFlash::from_box(Box::new(PowerCutFlash::new(
        support::small_array(config, seed),
    )));
    let (device, _, switch) = PowerFailing::new(raw_over(&array));
    let options = FormatOptions {
        fs_block_size_bytes: PAGE_BYTES as u32,
        store_identity: None,
    };
    let mut fs = Filesystem::format_flash_aware(Box::new(device), &options, PAGES_PER_BLOCK)
        .unwrap_or_else(|error| panic!("seed {seed}: mkfs: {error}"));
    let pages = 12 + POINTERS_PER_CHAIN_PAGE + 40;
    let mut committed = contents(seed as usize, pages * PAGE_BYTES);
    let file = fs.create("large").expect("create");
    fs.write(file, 0, &committed).expect("write");
    fs.flush().expect("flush");
    switch.lock().expect("switch").countdown = Some(rng.below(400));
    let mut in_progress = None;
    let mut crashed = false;
    for round in 0..80 {
        let offset = rng.below((pages - 2) as u64) as usize * PAGE_BYTES;
        let patch = contents(seed as usize + round, OVERWRITE_BYTES);
        let mut next = committed.clone();
        next[offset..offset + OVERWRITE_BYTES].copy_from_slice(&patch);
        if fs.write(file, offset as u64, &patch).is_err() {
            crashed = true;
            break;
        }
        in_progress = Some(next);
        if fs.flush().is_err() {
            crashed = true;
            break;
        }
        committed = in_progress.take().expect("just set");
    }
    drop(fs);
    array
        .lock()
        .cut_power(seed.wrapping_mul(flashpipe_base::random::GOLDEN_GAMMA));
    let mut fs = Filesystem::mount_read_only(Box::new(raw_over(&array)))
        .unwrap_or_else(|error| panic!("seed {seed}: mount after the cut: {error}"));
    let records_replayed = fs.metadata_log_fill().log_record_count;
    let refused_for_chains = fs.refused_log_record().is_some();
    let report = fs.check().expect("fsck");
    assert!(report.is_clean(), "seed {seed}: {report:?}");
    let found = read_large(&mut fs, committed.len());
    assert!(
        found == committed || in_progress.as_ref() == Some(&found),
        "seed {seed}: the file is neither the last flush's nor the one in progress"
    );
    drop(fs);
    let (mut fs, mut bytes, recovery_cut) = cut_the_recovery_commit(&array, &mut rng, found, seed);
    overwrite_at_named(&mut fs, &mut bytes, 12 + POINTERS_PER_CHAIN_PAGE + 3);
    fs.unmount().expect("unmount");
    let mut fs = Filesystem::mount(Box::new(raw_over(&array))).expect("clean remount");
    let again = read_large(&mut fs, bytes.len());
    assert!(
        again == bytes,
        "seed {seed}: after recovery and a clean remount"
    );
    ChainCut {
        crashed,
        recovery_cut,
        records_replayed,
        refused_for_chains,
    }
}

/// Overwrites 16 KiB of `large` from page `page` and flushes (no counting).
fn overwrite_at_named(fs: &mut Filesystem, bytes: &mut [u8], page: usize) {
    let file = fs.open("large").expect("open");
    let patch = contents(page, OVERWRITE_BYTES);
    let offset = page * PAGE_BYTES;
    bytes[offset..offset + OVERWRITE_BYTES].copy_from_slice(&patch);
    fs.write(file, offset as u64, &patch).expect("overwrite");
    fs.flush().expect("flush");
}

#[test]
fn power_cuts_in_log_commits_that_rewrite_single_chain_pages_lose_no_flush() {
    let cuts = flashpipe_testkit::seeds::run_seeds(40, chain_cut_seed);
    let crashed = cuts.iter().filter(|cut| cut.crashed).count();
    let replayed = cuts.iter().filter(|cut| cut.records_replayed > 0).count();
    let refused = cuts.iter().filter(|cut| cut.refused_for_chains).count();
    let recovery_cuts = cuts.iter().filter(|cut| cut.recovery_cut).count();
    let refused_then_cut = cuts
        .iter()
        .filter(|cut| cut.refused_for_chains && cut.recovery_cut)
        .count();
    eprintln!(
        "chain cuts: {} seeds, {crashed} cut inside the run, {replayed} mounts replayed a log, \
         {refused} refused a whole record for its chain pages; {recovery_cuts} recovery \
         commits cut, {refused_then_cut} of them after a refused record",
        cuts.len()
    );
    assert!(cuts.len() < 20 || (crashed > cuts.len() / 2 && replayed > 0));
}
