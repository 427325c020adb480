//! The file system's crash property on emulated flash through the FTL (issue #5, "Done
//! when"): per seed, a small array under [`PowerCutFlash`], `Ftl::format`,
//! `Filesystem::format`, random file operations (create, write at offsets, truncate,
//! rename, delete, read, flush) checked against an in-memory model, and a power cut at a
//! random device call: programs, erases and reads in flight in the array are completed,
//! torn or lost (`PowerCutFlash::cut_power`). For about a fifth of the seeds power fails
//! again during the FTL's recovery, at one of its erases or checkpoint programs, and the
//! mount starts over. Then `Ftl::mount`, `Filesystem::mount`,
//! fsck must be clean and the files must equal the model at the last completed flush (or
//! at the flush in progress at the cut), as `flashpipe-fs/tests/crash.rs` requires of
//! its simulated disks. Finally the file system must keep working: write, flush, a clean
//! remount of the FTL and the file system, the new file read back.
//!
//! About one seed in four runs on hostile flash ([`FlashMode::BadBlocksAndBitErrors`]):
//! factory bad blocks, programs and erases that fail (grown bad blocks) and a raised raw
//! bit-error rate that the ECC still corrects; a failing seed prints which mode it ran.
//!
//! `FLASHPIPE_SEEDS=n` runs n seeds (default 300); `FLASHPIPE_SEED=n` replays one.

mod support;

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, Once, PoisonError};

use flashpipe_device::{Clock, SplitMix64};
use flashpipe_flash::{Ack, CommandKind, FlashAddress, FlashConfig, FlashRequest, SubmitError};
use flashpipe_fs::{Filesystem, FormatOptions};
use flashpipe_ftl::{FlashBackend, Ftl, FtlOptions, PowerCutFlash, PowerCutReport};
use flashpipe_testkit::fs_workload::{
    check_clean, check_files_after_remount, check_recovered, write_after_recovery, FsWorkload,
    Model, WorkloadShape,
};
use flashpipe_testkit::seeds::run_seeds;
use support::{assert_cut_inside_operations, DeviceSlot, PowerFailing};

/// The array, kept by the test while FTLs over it come and go (or die mid-mount).
type SharedArray = Arc<Mutex<PowerCutFlash>>;

fn lock_array(array: &SharedArray) -> MutexGuard<'_, PowerCutFlash> {
    array.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The panic payload that stops an FTL whose power failed during its mount.
struct PowerLostDuringMount;

/// Keeps the default panic message for real failures only.
fn silence_power_loss_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<PowerLostDuringMount>() {
                default_hook(info);
            }
        }));
    });
}

/// The raw interface of the shared array for one FTL. With a countdown armed (counting
/// programs and erases: the mount's writes), the request that finds it at zero cuts power (`PowerCutFlash::cut_power`) and unwinds out
/// of the FTL with [`PowerLostDuringMount`], as a host losing power stops mid-recovery.
struct DyingFlash {
    array: SharedArray,
    config: FlashConfig,
    countdown: Arc<Mutex<Option<u64>>>,
    seed: u64,
}

impl DyingFlash {
    fn new(array: &SharedArray, countdown: Option<u64>, seed: u64) -> DyingFlash {
        let config = lock_array(array).array().config().clone();
        DyingFlash {
            array: Arc::clone(array),
            config,
            countdown: Arc::new(Mutex::new(countdown)),
            seed,
        }
    }

    fn count_request(&self) {
        let mut countdown = self
            .countdown
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match countdown.as_mut() {
            Some(0) => {
                *countdown = None;
                drop(countdown);
                lock_array(&self.array).cut_power(self.seed);
                std::panic::panic_any(PowerLostDuringMount);
            }
            Some(left) => *left -= 1,
            None => {}
        }
    }
}

impl FlashBackend for DyingFlash {
    fn config(&self) -> &FlashConfig {
        &self.config
    }
    fn host_spare_bytes(&self) -> usize {
        lock_array(&self.array).host_spare_bytes()
    }
    fn keeps_data(&self) -> bool {
        lock_array(&self.array).keeps_data()
    }
    fn clock(&self) -> Arc<dyn Clock> {
        lock_array(&self.array).clock()
    }
    fn now_ns(&self) -> u64 {
        lock_array(&self.array).now_ns()
    }
    fn submit(&mut self, request: FlashRequest) -> Result<(), SubmitError> {
        if request.command.kind() != CommandKind::Read {
            self.count_request();
        }
        lock_array(&self.array).submit(request)
    }
    fn poll_acks(&mut self, acks: &mut Vec<Ack>) -> usize {
        lock_array(&self.array).poll_acks(acks)
    }
    fn wait_acks(&mut self, acks: &mut Vec<Ack>) -> usize {
        lock_array(&self.array).wait_acks(acks)
    }
    fn factory_bad_without_data(&self, address: FlashAddress) -> bool {
        lock_array(&self.array).factory_bad_without_data(address)
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

flashpipe_testkit::tally! {
    /// What a campaign exercised, printed at its end.
    struct Tally {
        runs: u64, hostile_flash_runs: u64, crashed_in_operation: u64, crashed_in_flush: u64,
        recovered_flush_in_progress: u64, power_cut: PowerCuts, power_cuts_during_mount: u64,
        operations_replayed: u64, unreadable_pages_at_mount: u64, gc_victims: u64,
        checkpoints_written: u64, grown_bad_blocks: u64, programs_reissued: u64,
    }
}

flashpipe_testkit::tally! {
    /// The power cuts' reports, added up.
    struct PowerCuts {
        programs_completed: u32, programs_torn: u32, programs_lost: u32,
        erases_interrupted: u32, reads_dropped: u32,
    }
}

impl From<PowerCutReport> for PowerCuts {
    fn from(report: PowerCutReport) -> PowerCuts {
        PowerCuts {
            programs_completed: report.programs_completed,
            programs_torn: report.programs_torn,
            programs_lost: report.programs_lost,
            erases_interrupted: report.erases_interrupted,
            reads_dropped: report.reads_dropped,
        }
    }
}

/// FTL options drawn for a seed: over-provisioning, policy and checkpoint interval vary.
fn options_for(rng: &mut SplitMix64) -> FtlOptions {
    FtlOptions {
        name: "ftl-fs-crash".to_string(),
        over_provisioning: 0.07 + rng.below(24) as f64 / 100.0,
        victim_policy: support::drawn_victim_policy(rng),
        checkpoint_interval_pages: 30 + rng.below(300),
        static_wear_leveling_spread: if rng.chance(0.5) { Some(4) } else { None },
        queue_depth: [4, 16, 64][rng.below(3) as usize],
        check_after_collection: rng.chance(0.25),
        check_host_write_wait_bound: true,
        ..FtlOptions::default()
    }
}

/// Mounts the FTL over `array`; with `countdown`, power fails again after that many raw
/// programs and erases of the mount (true in the result when it did, and the mount was repeated).
fn mount_after_cut(
    array: &SharedArray,
    options: &FtlOptions,
    countdown: Option<u64>,
    seed: u64,
) -> (Ftl, flashpipe_ftl::MountReport, bool) {
    let dying = DyingFlash::new(array, countdown, seed.wrapping_mul(0x2545_F491_4F6C_DD1D));
    let armed = Arc::clone(&dying.countdown);
    let attempt = std::panic::catch_unwind(AssertUnwindSafe(|| {
        Ftl::mount(Box::new(dying) as Box<dyn FlashBackend>, options.clone())
    }));
    match attempt {
        Ok(Ok((ftl, report))) => {
            *armed.lock().unwrap_or_else(PoisonError::into_inner) = None;
            (ftl, report, false)
        }
        Ok(Err(error)) => panic!("seed {seed}: FTL mount after the cut: {error}"),
        Err(payload) if payload.is::<PowerLostDuringMount>() => {
            let (ftl, report, _) = mount_after_cut(array, options, None, seed);
            (ftl, report, true)
        }
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

/// Takes the FTL back from the crashed device, cuts power, mounts the FTL again (for
/// some seeds losing power once more during that mount).
fn power_cycle(
    shared: &DeviceSlot<Ftl>,
    array: &SharedArray,
    options: &FtlOptions,
    seed: u64,
    countdown_in_mount: Option<u64>,
) -> (Ftl, Tally) {
    let ftl = shared
        .lock()
        .expect("FTL lock")
        .take()
        .expect("the FTL is still in place");
    let stats = ftl.stats();
    drop(ftl.into_backend());
    let power_cut =
        lock_array(array).cut_power(seed.wrapping_mul(flashpipe_base::random::GOLDEN_GAMMA));
    let (ftl, report, cut_in_mount) = mount_after_cut(array, options, countdown_in_mount, seed);
    if let Err(problem) = ftl.check_invariants() {
        panic!("seed {seed}: FTL invariants after mount: {problem}");
    }
    let tally = Tally {
        power_cut: PowerCuts::from(power_cut),
        power_cuts_during_mount: u64::from(cut_in_mount),
        operations_replayed: report.operations_replayed,
        unreadable_pages_at_mount: report.unreadable_pages,
        gc_victims: stats.gc_victims,
        checkpoints_written: stats.checkpoints_written,
        grown_bad_blocks: stats.grown_bad_blocks,
        programs_reissued: stats.programs_reissued,
        ..Tally::default()
    };
    (ftl, tally)
}

fn mount_and_check_clean(ftl: Ftl, seed: u64, when: &str) -> (Filesystem, DeviceSlot<Ftl>) {
    let (device, shared, _switch) = PowerFailing::new(ftl);
    let mut fs = Filesystem::mount(Box::new(device))
        .unwrap_or_else(|error| panic!("seed {seed}: file-system mount {when}: {error}"));
    check_clean(&mut fs, seed, when);
    (fs, shared)
}

/// After recovery the file system keeps working: a new file written and flushed
/// survives a clean unmount and mount of both the file system and the FTL.
fn check_keeps_working(
    fs: Filesystem,
    shared: DeviceSlot<Ftl>,
    options: &FtlOptions,
    expected: &Model,
    seed: u64,
) {
    let expected = write_after_recovery(fs, expected, 5000, seed);
    let ftl = shared.lock().expect("FTL lock").take().expect("the FTL");
    let backend = ftl.unmount();
    let (ftl, _) = Ftl::mount(backend, options.clone())
        .unwrap_or_else(|error| panic!("seed {seed}: clean FTL remount: {error}"));
    let (mut fs, _shared) = mount_and_check_clean(ftl, seed, "after a clean remount");
    check_files_after_remount(&mut fs, &expected, seed);
}

/// The flash a seed runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FlashMode {
    /// No bad blocks, no failing programs or erases, the preset's error rate.
    Healthy,
    /// Factory bad blocks, failing programs and erases, a raised raw bit-error rate.
    BadBlocksAndBitErrors,
}

/// One seed in four runs on hostile flash, chosen from the seed alone.
fn flash_mode_of(seed: u64) -> FlashMode {
    if SplitMix64::new(seed ^ 0xBAD_B10C).below(4) == 0 {
        FlashMode::BadBlocksAndBitErrors
    } else {
        FlashMode::Healthy
    }
}

/// Over-provisioning at least this large on hostile flash.
const HOSTILE_OVER_PROVISIONING: f64 = 0.2;

/// Factory bad blocks, grown bad blocks at any wear, and a raw bit-error rate raised
/// well above the preset's but still within what the ECC corrects.
fn make_hostile(config: &mut FlashConfig) {
    config.reliability.factory_bad_block_fraction = 0.06;
    config.reliability.grown_bad_probability_at_rated = 0.001;
    config.reliability.grown_bad_exponent = 0.0;
    config.reliability.base_rber = 5e-5;
}

/// Runs one seed and names its flash mode when it fails.
fn run_seed(seed: u64) -> Tally {
    let mode = flash_mode_of(seed);
    match std::panic::catch_unwind(AssertUnwindSafe(|| run_seed_in_mode(seed, mode))) {
        Ok(tally) => tally,
        Err(payload) => {
            eprintln!("seed {seed} ran on flash mode {mode:?}");
            std::panic::resume_unwind(payload)
        }
    }
}

/// One seeded run: format, random operations until the power cut, recover, check.
fn run_seed_in_mode(seed: u64, mode: FlashMode) -> Tally {
    let mut rng = SplitMix64::new(seed ^ 0x0F75_C4A5_4000_0000);
    let page_bytes = if rng.chance(0.75) { 512 } else { 2048 };
    let blocks_per_chip = if page_bytes == 512 { 24 } else { 10 };
    let mut config = support::sized_config(blocks_per_chip, 16, page_bytes);
    if mode == FlashMode::BadBlocksAndBitErrors {
        make_hostile(&mut config);
    }
    let array: SharedArray = Arc::new(Mutex::new(PowerCutFlash::new(support::small_array(
        config, seed,
    ))));
    let mut options = options_for(&mut rng);
    if mode == FlashMode::BadBlocksAndBitErrors {
        // Retired blocks come out of the spare area: at 7 % over-provisioning a few grown
        // bad blocks leave garbage collection nothing to reclaim (the FTL then fails host
        // writes with "wait for free space that garbage collection cannot make").
        options.over_provisioning = options.over_provisioning.max(HOSTILE_OVER_PROVISIONING);
    }
    let countdown_in_mount = rng.chance(0.3).then(|| rng.below(40));
    let ftl = Ftl::format(
        Box::new(DyingFlash::new(&array, None, seed)) as Box<dyn FlashBackend>,
        options.clone(),
    )
    .unwrap_or_else(|error| panic!("seed {seed}: FTL format: {error}"));
    let window = if rng.chance(0.8) { 500 } else { 3000 };
    let countdown = rng.below(window);
    let (device, shared, switch) = PowerFailing::new(ftl);
    let fs = Filesystem::format(
        Box::new(device),
        &FormatOptions {
            fs_block_size_bytes: 4096,
            store_identity: None,
        },
    )
    .unwrap_or_else(|error| panic!("seed {seed}: mkfs: {error}"));
    switch.lock().expect("switch lock").countdown = Some(countdown);
    let shape = WorkloadShape {
        write_offset_blocks_max: 16,
        long_write_blocks_max: 24,
        truncate_blocks_max: 20,
        ..WorkloadShape::new(4096)
    };
    let mut run = FsWorkload::new(seed, rng, fs, shape);
    let crashed = run.run(200);
    drop(run.fs);
    let (ftl, mut tally) = power_cycle(&shared, &array, &options, seed, countdown_in_mount);
    let (mut fs, shared) = mount_and_check_clean(ftl, seed, "after the cut");
    let (found, matches_commit) = check_recovered(
        &mut fs,
        &run.committed,
        run.in_progress.as_ref(),
        seed,
        "after the cut",
    );
    check_keeps_working(fs, shared, &options, &found, seed);
    tally.runs = 1;
    tally.hostile_flash_runs = u64::from(mode == FlashMode::BadBlocksAndBitErrors);
    tally.crashed_in_operation = u64::from(crashed);
    tally.crashed_in_flush = u64::from(crashed && run.in_progress.is_some());
    tally.recovered_flush_in_progress = u64::from(!matches_commit);
    tally
}

#[test]
fn file_system_on_the_ftl_recovers_the_last_flush_after_any_power_cut() {
    silence_power_loss_panics();
    let total: Tally = run_seeds(300, run_seed).into_iter().sum();
    eprintln!("file-system crash campaign over the FTL: {total:#?}");
    assert_cut_inside_operations(total.runs, total.crashed_in_operation);
    assert!(
        total.runs < 20 || (total.hostile_flash_runs > 0 && total.grown_bad_blocks > 0),
        "the campaign ran on hostile flash and grew bad blocks: {total:?}"
    );
}
