//! The hard bound on how long a host write waits for garbage collection (issue #5,
//! Build 2; docs/ftl.md, "Bound on host waits"): sustained 4 KiB page writes, uniform
//! random and hot/cold, at 7 % and 20 % over-provisioning under both victim policies,
//! with the FTL panicking on any host page that waits past the bound; the bound must be
//! reached neither in the statistics nor by the longest wait observed.

mod support;

use flashpipe_device::{run_batch, IoBuf, Operation, SplitMix64};
use flashpipe_flash::{FlashArray, FlashOptions};
use flashpipe_ftl::{FlashBackend, Ftl, FtlOptions, VictimPolicy};

/// Which logical page the next write goes to.
#[derive(Debug, Clone, Copy)]
enum Workload {
    Uniform,
    /// `hot_share` of the writes go to the first `hot_fraction` of the pages.
    HotCold {
        hot_share: f64,
        hot_fraction: f64,
    },
}

fn next_page(workload: Workload, generator: &mut SplitMix64, pages: u64) -> u64 {
    match workload {
        Workload::Uniform => generator.below(pages),
        Workload::HotCold {
            hot_share,
            hot_fraction,
        } => generator.hot_cold_below(pages, hot_share, hot_fraction),
    }
}

/// A timing-only array (2 channels x 2 ways, 48 blocks of 32 4 KiB pages per chip).
fn paced_ftl(over_provisioning: f64, policy: VictimPolicy, queue_depth: u32) -> Ftl {
    let config = support::small_config(48, 32);
    let array = FlashArray::new(config, FlashOptions::timing_only(5)).expect("array");
    let options = FtlOptions {
        name: "ftl-paced".to_string(),
        over_provisioning,
        victim_policy: policy,
        checkpoint_interval_pages: 2048,
        queue_depth,
        check_host_write_wait_bound: true,
        ..FtlOptions::default()
    };
    Ftl::format(Box::new(array) as Box<dyn FlashBackend>, options).expect("format")
}

/// Fills the device, then writes `device_writes` x its size in batches of `queue_depth`
/// single pages, and checks the waits against the bound.
fn check(over_provisioning: f64, policy: VictimPolicy, workload: Workload, device_writes: u64) {
    let queue_depth = 16;
    let mut ftl = paced_ftl(over_provisioning, policy, queue_depth);
    let pages = ftl.info().block_count;
    let page_bytes = ftl.info().block_size_bytes as usize;
    for first in (0..pages).step_by(8) {
        let count = 8.min(pages - first);
        let buffer = IoBuf::zeroed(count as usize * page_bytes);
        run_batch(
            &mut ftl,
            vec![Operation::Write {
                first_block: first,
                buffer,
            }],
        )
        .expect("fill");
    }
    let mut generator = SplitMix64::new(17);
    let mut written = 0;
    while written < pages * device_writes {
        let operations = (0..queue_depth)
            .map(|_| Operation::Write {
                first_block: next_page(workload, &mut generator, pages),
                buffer: IoBuf::zeroed(page_bytes),
            })
            .collect();
        run_batch(&mut ftl, operations).expect("write");
        written += u64::from(queue_depth);
    }
    let stats = ftl.stats();
    let bound_ns = ftl.host_write_wait_bound_ns().expect("pacing is on");
    let case = format!(
        "{over_provisioning} {policy:?} {workload:?}: K {}, bound {bound_ns} ns, {stats:?}",
        ftl.gc_migrations_per_host_page_max()
    );
    eprintln!(
        "{over_provisioning} {policy:?} {workload:?}: K {}, bound {bound_ns} ns, longest wait \
         {} ns, holds {}, stalls {}, WA {:.2}",
        ftl.gc_migrations_per_host_page_max(),
        stats.host_write_wait_ns_max,
        stats.gc_pacing_holds,
        stats.host_write_stalls,
        stats.write_amplification()
    );
    assert!(stats.gc_victims > pages / 32, "collection ran: {case}");
    assert!(stats.gc_pacing_holds > 0, "pacing held host pages: {case}");
    assert_eq!(stats.host_write_wait_bound_exceeded, 0, "{case}");
    assert!(stats.host_write_wait_ns_max <= bound_ns, "{case}");
    assert_eq!(stats.gc_pacing_rate_capped, 0, "{case}");
    ftl.check_invariants().expect("invariants");
}

#[test]
fn uniform_random_writes_at_7_percent_never_wait_past_the_bound() {
    check(0.07, VictimPolicy::Greedy, Workload::Uniform, 4);
}

#[test]
fn hot_cold_writes_never_wait_past_the_bound_under_either_policy() {
    let hot_cold = Workload::HotCold {
        hot_share: 0.8,
        hot_fraction: 0.2,
    };
    check(0.07, VictimPolicy::CostBenefit, hot_cold, 3);
    check(0.20, VictimPolicy::Greedy, hot_cold, 3);
}

#[test]
fn pacing_off_has_no_bound() {
    let config = support::small_config(16, 16);
    let array = FlashArray::new(config, FlashOptions::default()).expect("array");
    let options = FtlOptions {
        gc_migrations_per_host_page_max: Some(0),
        ..FtlOptions::default()
    };
    let ftl = Ftl::format(Box::new(array) as Box<dyn FlashBackend>, options).expect("format");
    assert_eq!(ftl.host_write_wait_bound_ns(), None);
    assert_eq!(ftl.gc_migrations_per_host_page_max(), 0);
}
