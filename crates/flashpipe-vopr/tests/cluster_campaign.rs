//! The cluster campaign: the minFlash cluster (routers, links, devices, hosts) in one
//! seeded world under link drops, partitions, node crashes and restarts, outages and
//! slow nodes.
//!
//! - 200 seeds by default (`FLASHPIPE_SEEDS=N` for more); `FLASHPIPE_LONG=1` runs 5,000
//!   from a random base seed it prints; `FLASHPIPE_SEED=S` replays seed `S`.
//! - The same seed gives the same history twice.
//! - The same with tags, hold queues and tokens far smaller than the node process's
//!   (no fairness phase): 40 seeds, 1,000 in long mode.
//! - Each planted bug (a node that drops the failures of a link going down, one that
//!   acknowledges a program it dropped, one that loses a credit frame) is found within
//!   50 seeds.

mod common;

use flashpipe_testkit::seeds::{long_mode, replayed_seed, run_seeds_long};
use flashpipe_vopr::cluster::NodeLimits;
use flashpipe_vopr::{ClusterBug, ClusterCampaign, ClusterConfig, ClusterReport};

fn run_or_panic(campaign: &ClusterCampaign, seed: u64) -> ClusterReport {
    common::report_or_panic(campaign.run(seed))
}

#[test]
fn every_request_is_answered_once_and_acknowledged_pages_read_back_under_faults() {
    let campaign = ClusterCampaign::new(ClusterConfig::default());
    let reports = run_seeds_long(200, 5_000, |seed| run_or_panic(&campaign, seed));
    let total = |field: fn(&ClusterReport) -> u64| reports.iter().map(field).sum::<u64>();
    let least_jain = reports
        .iter()
        .filter_map(|report| report.jain)
        .fold(1.0f64, f64::min);
    eprintln!(
        "cluster vopr: {} seeds, {} requests answered ({} carried out, {} refused as due, {} failed by faults, {} of them Busy), {} reads checked, {} faults struck, {} links severed, {} node crashes ({} programs torn, {} lost), least Jain's index {least_jain:.4}",
        reports.len(),
        total(|report| report.host_counts.answered),
        total(|report| report.host_counts.carried_out),
        total(|report| report.host_counts.refused_as_due),
        total(|report| report.host_counts.failed_by_faults),
        total(|report| report.host_counts.busy),
        total(|report| report.host_counts.reads_checked),
        total(|report| report.net.faults_struck),
        total(|report| report.net.links_severed),
        total(|report| report.net.crashes),
        total(|report| report.cuts.programs_torn),
        total(|report| report.cuts.programs_lost),
    );
    for report in &reports {
        assert_eq!(report.host_counts.issued, report.host_counts.answered);
    }
    if reports.len() >= 50 && !long_mode() && replayed_seed().is_none() {
        for (count, missing) in [
            (total(|report| report.net.crashes), "no node ever crashed"),
            (
                total(|report| report.net.links_severed),
                "no link ever went down",
            ),
            (
                total(|report| report.host_counts.refused_as_due),
                "no illegal request was refused",
            ),
            (
                total(|report| report.host_counts.reads_checked),
                "no read was checked",
            ),
        ] {
            assert!(count > 0, "{missing}");
        }
        assert!(
            reports.iter().any(|report| report.jain.is_some()),
            "no fairness phase ran"
        );
    }
}

/// Tags, hold queues and tokens far smaller than the node process's, so requests wait for
/// tags, hosts are answered Busy and links wait for tokens, under the same faults and
/// checks but fairness (with 4 tags per output, hosts behind links are held back by the
/// links' tags, not by the arbiters: docs/design/25-cluster-sim.md).
#[test]
fn scarce_tags_tokens_and_queues_hold_under_faults_too() {
    let campaign = ClusterCampaign::new(ClusterConfig {
        limits: NodeLimits {
            tags: 4,
            queue_limit: 2,
            link_window: 2,
            credit_batch: 2,
            stage_frames: 64,
        },
        fairness: false,
        ..ClusterConfig::default()
    });
    let reports = run_seeds_long(40, 1_000, |seed| run_or_panic(&campaign, seed));
    let busy: u64 = reports.iter().map(|report| report.host_counts.busy).sum();
    eprintln!(
        "cluster vopr, scarce limits: {} seeds, {busy} requests answered Busy",
        reports.len()
    );
    if reports.len() >= 50 && replayed_seed().is_none() {
        assert!(busy > 0, "no request was answered Busy");
    }
}

#[test]
fn the_same_seed_gives_the_same_history_twice() {
    let campaign = ClusterCampaign::new(ClusterConfig::default());
    common::assert_same_seed_same_history(
        |seed| run_or_panic(&campaign, seed),
        |report| report.fingerprint,
        replayed_seed().unwrap_or(7),
    );
}

fn found_within_50_seeds(bug: ClusterBug, name: &str) {
    let campaign = ClusterCampaign::new(ClusterConfig {
        planted_bug: Some(bug),
        ..ClusterConfig::default()
    });
    common::assert_found_within_50_seeds(|seed| campaign.run(seed), |failure| failure.seed, name);
}

#[test]
fn a_node_dropping_the_failures_of_a_link_going_down_is_found() {
    found_within_50_seeds(
        ClusterBug::LinkDownUnanswered,
        "failures of a link going down dropped",
    );
}

#[test]
fn a_node_acknowledging_a_program_it_dropped_is_found() {
    found_within_50_seeds(
        ClusterBug::ProgramAckedUndone,
        "a program acknowledged, never done",
    );
}

#[test]
fn a_node_losing_a_credit_frame_is_found() {
    found_within_50_seeds(ClusterBug::CreditDropped, "a credit frame lost");
}

#[test]
fn limits_of_zero_are_refused_before_anything_runs() {
    let campaign = ClusterCampaign::new(ClusterConfig {
        limits: NodeLimits {
            link_window: 0,
            ..NodeLimits::NODE_PROCESS
        },
        ..ClusterConfig::default()
    });
    let failure = campaign
        .run(3)
        .expect_err("a window of 0 tokens is refused");
    assert_eq!(failure.phase, "setup");
    assert!(failure.finding.contains("link_window is 0"), "{failure}");
}
