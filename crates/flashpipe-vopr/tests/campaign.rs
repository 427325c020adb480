//! The VOPR campaign: the stepped engine over a file system striped across simulated NBD
//! disk nodes, under crashes, node restarts, partitions, outages, slow and failing nodes,
//! in one seeded world.
//!
//! - 5 seeds by default (`FLASHPIPE_SEEDS=N` for more); `FLASHPIPE_LONG=1` runs 1,000
//!   from a random base seed it prints; `FLASHPIPE_SEED=S` replays seed `S`.
//! - The same seed gives the same fingerprint twice.
//! - A planted bug (a device that acknowledges flushes without flushing) is found within
//!   50 seeds.
//! - The seeds that once found real bugs run every time.

mod common;

use flashpipe_testkit::seeds::{long_mode, replayed_seed, run_seeds_long};
use flashpipe_vopr::{Campaign, CampaignConfig, CampaignReport, PlantedBug};

/// Whether `FLASHPIPE_VOPR_TRACE=1` asks for each round to be printed.
fn trace() -> bool {
    std::env::var("FLASHPIPE_VOPR_TRACE").is_ok_and(|value| value == "1")
}

fn run_or_panic(campaign: &Campaign, seed: u64) -> CampaignReport {
    common::report_or_panic(campaign.run(seed))
}

#[test]
fn acknowledged_writes_survive_every_fault_the_seeds_draw() {
    let campaign = Campaign::new(CampaignConfig {
        trace: trace(),
        ..CampaignConfig::default()
    });
    let reports = run_seeds_long(5, 1_000, |seed| run_or_panic(&campaign, seed));
    let total = |field: fn(&CampaignReport) -> u64| reports.iter().map(field).sum::<u64>();
    eprintln!(
        "vopr: {} seeds, {} crashes recovered ({} found a flush in progress), {} commands answered, {} failed under faults, {} flushes acknowledged, {} faults struck",
        reports.len(),
        total(|report| report.crashes),
        total(|report| report.interrupted_flushes_found),
        total(|report| report.commands_answered),
        total(|report| report.commands_failed),
        total(|report| report.flushes_acknowledged),
        total(|report| report.faults_struck),
    );
    assert!(total(|report| report.commands_answered) > 0);
    assert!(
        total(|report| report.crashes) >= reports.len() as u64,
        "every seed ends with a crash and a recovery"
    );
    if reports.len() >= 5 && !long_mode() && replayed_seed().is_none() {
        assert!(
            total(|report| report.faults_struck) > 0,
            "the fault plans struck nothing"
        );
        assert!(
            total(|report| report.network.requests_served) > 1_000,
            "too little I/O reached the nodes"
        );
    }
}

/// Seeds that once found a bug, run in every suite so it cannot come back.
/// - 2361: a write over blocks written since the last flush failed on one stripe member
///   and the next flush was acknowledged, committing a block whose checksum no longer
///   matched (now the mount turns unusable and that flush fails).
const SEEDS_THAT_FOUND_BUGS: &[u64] = &[2361];

#[test]
fn the_seeds_that_once_found_bugs_pass() {
    let campaign = Campaign::new(CampaignConfig {
        trace: trace(),
        ..CampaignConfig::default()
    });
    for &seed in SEEDS_THAT_FOUND_BUGS {
        run_or_panic(&campaign, seed);
    }
}

#[test]
fn the_same_seed_gives_the_same_fingerprint_twice() {
    let campaign = Campaign::new(CampaignConfig {
        trace: trace(),
        ..CampaignConfig::default()
    });
    common::assert_same_seed_same_history(
        |seed| run_or_panic(&campaign, seed),
        |report| report.fingerprint,
        replayed_seed().unwrap_or(3),
    );
}

#[test]
fn a_planted_bug_is_found_within_50_seeds() {
    let campaign = Campaign::new(CampaignConfig {
        planted_bug: Some(PlantedBug::FlushAcknowledgedUnflushed),
        ..CampaignConfig::default()
    });
    common::assert_found_within_50_seeds(
        |seed| campaign.run(seed),
        |failure| failure.seed,
        "flushes acknowledged unflushed",
    );
}
