//! The flash-aware layout's crash property (docs/design/29-flash-aware.md): per seed, a
//! small array under [`PowerCutFlash`], `RawPageDevice` over it with no FTL,
//! `Filesystem::format_flash_aware`, random file operations checked against a model, and
//! a power cut at a random device call (programs and erases in flight completed, torn or
//! lost). Then a new `RawPageDevice` over the same array, `Filesystem::mount`: fsck clean,
//! the files those of the last completed flush (or of the flush in progress at the cut;
//! one step in ten copies by sharing blocks, which collection then moves with every
//! pointer naming them),
//! and the file system still working through a clean remount. One seed in four runs on
//! flash with factory bad blocks; half the seeds first fill the small device with a
//! ballast file and run 400 operations without a cut, so the file system's collection
//! moves pages before the cut. Where a checkpoint has room for its log region (format
//! version 9) the flushes are log records with no ring record: cuts land between a
//! commit's data pages and its record (the operation's writes done, no flush yet), inside
//! the record (its program lost or torn: the mount is at the commit before) and after it
//! (the record complete, its flush not acknowledged: the mount finds it by reading the
//! region forward), and mounts replay 0 to 16 records (all counted in the tally). A log
//! commit programs its changed chain pages and its record in one step, so a cut can
//! leave the record whole and a chain page it wrote torn or lost: the mount refuses that
//! record (counted: `record_refused_for_chain_pages`) and is at the commit before. One seed in four runs on a
//! device of 64 erase blocks instead of 28, so that two erase blocks are open for data at
//! once and pages rotate over them (`flash_pages::open_erase_block_count`).
//!
//! `FLASHPIPE_SEEDS=n` runs n seeds (default 200); `FLASHPIPE_SEED=n` replays one.

mod support;

use std::sync::MutexGuard;

use flashpipe_device::SplitMix64;
use flashpipe_fs::{Filesystem, FormatOptions};
use flashpipe_ftl::{PowerCutFlash, RawPageDevice, SharedFlash};
use flashpipe_testkit::fs_workload::{
    check_clean, check_files_after_remount, check_recovered, write_after_recovery, FsWorkload,
    WorkloadShape,
};
use flashpipe_testkit::seeds::run_seeds;
use support::{assert_cut_inside_operations, PowerFailing};

const PAGES_PER_BLOCK: u32 = 16;
const PAGE_BYTES: u32 = 4096;

/// The array, kept by the test while raw devices over it come and go.
type SharedArray = SharedFlash<PowerCutFlash>;

fn lock_array(array: &SharedArray) -> MutexGuard<'_, Box<PowerCutFlash>> {
    array.lock()
}

fn raw_over(array: &SharedArray) -> RawPageDevice {
    RawPageDevice::new(Box::new(array.clone()), "raw").expect("raw pages")
}

fn options() -> FormatOptions {
    FormatOptions {
        fs_block_size_bytes: PAGE_BYTES,
        store_identity: None,
    }
}

flashpipe_testkit::tally! {
    /// What a campaign exercised, printed at its end.
    struct Tally {
        runs: u64, factory_bad_runs: u64, crashed_in_operation: u64, crashed_in_flush: u64,
        recovered_flush_in_progress: u64, programs_torn: u64, erases_interrupted: u64,
        pages_moved_by_collection: u64, erase_blocks_erased: u64,
        cut_in_flush_with_log_room: u64, mounts_replaying_log: u64, log_records_replayed: u64,
        cut_before_record_with_log_room: u64, log_commit_cut_record_lost: u64,
        log_commit_cut_record_kept: u64, record_refused_for_chain_pages: u64,
    }
}

/// After recovery the file system keeps working: a new file survives a clean remount.
fn check_keeps_working(
    fs: Filesystem,
    array: &SharedArray,
    found: &flashpipe_testkit::fs_workload::Model,
    seed: u64,
) {
    let expected = write_after_recovery(fs, found, 9000, seed);
    let mut fs = Filesystem::mount(Box::new(raw_over(array)))
        .unwrap_or_else(|error| panic!("seed {seed}: clean remount: {error}"));
    check_files_after_remount(&mut fs, &expected, seed);
}

/// The file that fills a prefilled seed's device to a little above where collection
/// starts.
const BALLAST: &str = "ballast";

fn write_ballast(fs: &mut Filesystem, seed: u64) -> Vec<u8> {
    let free_pages = fs.flash_space().expect("flash-aware").free_pages;
    let pages = free_pages.saturating_sub(100) as usize;
    let bytes: Vec<u8> = (0..pages * PAGE_BYTES as usize)
        .map(|index| (index as u64).wrapping_mul(seed | 1) as u8)
        .collect();
    let file = fs.create(BALLAST).expect("create the ballast");
    fs.write(file, 0, &bytes).expect("write the ballast");
    fs.flush().expect("flush the ballast");
    bytes
}

fn run_seed(seed: u64) -> Tally {
    let mut rng = SplitMix64::new(seed ^ 0xF1A5_4A3E_0000_0000);
    let factory_bad = rng.below(4) == 0;
    let blocks_per_plane = if rng.below(4) == 0 { 16 } else { 7 };
    let mut config = support::sized_config(blocks_per_plane, PAGES_PER_BLOCK, PAGE_BYTES);
    if factory_bad {
        config.reliability.factory_bad_block_fraction = 0.06;
    }
    let array: SharedArray = SharedFlash::from_box(Box::new(PowerCutFlash::new(
        support::small_array(config, seed),
    )));
    let (device, _, switch) = PowerFailing::new(raw_over(&array));
    let fs =
        Filesystem::format_flash_aware(Box::new(device), &options(), u64::from(PAGES_PER_BLOCK))
            .unwrap_or_else(|error| panic!("seed {seed}: mkfs: {error}"));
    let window = if rng.chance(0.8) { 400 } else { 2500 };
    let armed_at = rng.below(window);
    let prefill_steps = if rng.chance(0.5) { 400 } else { 0 };
    let shape = WorkloadShape {
        write_offset_blocks_max: 12,
        long_write_blocks_max: 20,
        truncate_blocks_max: 16,
        share_copy_percent: 10,
        ..WorkloadShape::new(u64::from(PAGE_BYTES))
    };
    let mut fs = fs;
    let ballast = (prefill_steps > 0).then(|| write_ballast(&mut fs, seed));
    let mut run = FsWorkload::new(seed, rng, fs, shape);
    if let Some(bytes) = ballast {
        run.model.insert(BALLAST.to_string(), bytes.clone());
        run.committed.insert(BALLAST.to_string(), bytes);
    }
    assert!(
        !run.run(prefill_steps),
        "seed {seed}: no power cut before the countdown"
    );
    switch.lock().expect("switch lock").countdown = Some(armed_at);
    let crashed = run.run(200);
    let space = run.fs.flash_space().expect("flash-aware");
    let fill_before = run.fs.metadata_log_fill();
    let sequence_before = run.fs.stats().commit_sequence;
    drop(run.fs);
    let cut = lock_array(&array).cut_power(seed.wrapping_mul(flashpipe_base::random::GOLDEN_GAMMA));
    let mut fs = Filesystem::mount(Box::new(raw_over(&array)))
        .unwrap_or_else(|error| panic!("seed {seed}: mount after the cut: {error}"));
    let replayed = fs.metadata_log_fill().log_record_count;
    let refused_for_chains = fs.refused_log_record().is_some();
    let sequence_after = fs.stats().commit_sequence;
    check_clean(&mut fs, seed, "after the cut");
    let (found, matches_commit) = check_recovered(
        &mut fs,
        &run.committed,
        run.in_progress.as_ref(),
        seed,
        "after the cut",
    );
    check_keeps_working(fs, &array, &found, seed);
    let log_room = fill_before.log_block_count < fill_before.region_block_count;
    let in_flush = crashed && run.in_progress.is_some();
    let log_commit_cut = in_flush && log_room;
    Tally {
        runs: 1,
        factory_bad_runs: u64::from(factory_bad),
        crashed_in_operation: u64::from(crashed),
        crashed_in_flush: u64::from(crashed && run.in_progress.is_some()),
        recovered_flush_in_progress: u64::from(!matches_commit),
        programs_torn: u64::from(cut.programs_torn),
        erases_interrupted: u64::from(cut.erases_interrupted),
        pages_moved_by_collection: space.moved_pages,
        erase_blocks_erased: space.erased_blocks,
        cut_in_flush_with_log_room: u64::from(log_commit_cut),
        mounts_replaying_log: u64::from(replayed > 0),
        log_records_replayed: replayed,
        cut_before_record_with_log_room: u64::from(crashed && !in_flush && log_room),
        log_commit_cut_record_lost: u64::from(log_commit_cut && sequence_after == sequence_before),
        log_commit_cut_record_kept: u64::from(log_commit_cut && sequence_after > sequence_before),
        record_refused_for_chain_pages: u64::from(refused_for_chains),
    }
}

#[test]
fn the_flash_aware_layout_recovers_the_last_flush_after_any_power_cut() {
    let total: Tally = run_seeds(200, run_seed).into_iter().sum();
    eprintln!("flash-aware crash campaign: {total:#?}");
    assert_cut_inside_operations(total.runs, total.crashed_in_operation);
    assert!(
        total.runs < 20 || total.pages_moved_by_collection > 0,
        "the campaign ran the file system's collection: {total:?}"
    );
    assert!(
        total.runs < 20 || (total.mounts_replaying_log > 0 && total.cut_in_flush_with_log_room > 0),
        "the campaign cut log commits and replayed logs: {total:?}"
    );
    assert!(
        total.runs < 200
            || (total.cut_before_record_with_log_room > 0
                && total.log_commit_cut_record_lost > 0
                && total.log_commit_cut_record_kept > 0),
        "the campaign cut before, inside and after log records: {total:?}"
    );
}
