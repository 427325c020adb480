//! Write amplification against over-provisioning beside the closed-form estimate, and the
//! collection policies (greedy, cost-benefit) on skewed workloads.

use super::{
    categories, experiment_chart, experiment_ftl, experiment_options, microseconds, percent,
    plot_if_asked, print_rows, steady_state_stats, wait_bound, ExperimentArgs, Workload,
    WorkloadMaker,
};
use crate::plot::{ChartKind, Series};
use crate::progress::Progress;
use crate::table::Align;
use crate::BenchResult;
use flashpipe_bench_harness::column_table::{fixed, ColumnTable};
use flashpipe_flash::StorageMode;
use flashpipe_ftl::{Ftl, VictimPolicy};
use serde::Serialize;

/// The principal branch of Lambert's W for x in [-1/e, 0], by Halley's iteration.
fn lambert_w0(x: f64) -> f64 {
    let mut w = if x < -0.25 { -0.5 } else { x };
    for _ in 0..100 {
        let exponential = w.exp();
        let value = w * exponential - x;
        let step = value / (exponential * (w + 1.0) - (w + 2.0) * value / (2.0 * w + 2.0));
        w -= step;
        if step.abs() < 1e-14 {
            break;
        }
    }
    w
}

/// Closed-form write amplification of uniform random writes with physical/logical ratio
/// `alpha` (Hu et al. 2009, Desnoyers 2012: exact for FIFO cleaning, the large-block
/// limit of greedy).
fn closed_form_write_amplification(alpha: f64) -> f64 {
    alpha / (alpha + lambert_w0(-alpha * (-alpha).exp()))
}

#[derive(Debug, Serialize)]
struct WriteAmplificationRow {
    over_provisioning: f64,
    logical_pages: u64,
    physical_data_pages: u64,
    physical_over_logical: f64,
    write_amplification: f64,
    write_amplification_closed_form: f64,
    gc_pages_copied: u64,
    gc_busy_seconds_virtual: f64,
    host_write_wait_us_max: f64,
    host_write_wait_bound_us: Option<f64>,
}

/// Pages that can hold data in steady state: good blocks less the checkpoint and log
/// blocks and the free blocks garbage collection keeps.
fn physical_data_pages(ftl: &Ftl) -> u64 {
    let config = ftl.backend().config();
    let stats = ftl.stats();
    let good_blocks = config.total_blocks() - u64::from(stats.retired_blocks);
    let checkpoint_blocks = (ftl.info().block_count * 8).div_ceil(u64::from(
        config.geometry.page_data_bytes * config.geometry.pages_per_block,
    )) + 1;
    let held_back = 2 * checkpoint_blocks + 2 + u64::from(ftl.free_block_target());
    (good_blocks - held_back) * u64::from(config.geometry.pages_per_block)
}

pub(super) fn run_write_amplification(arguments: &ExperimentArgs) -> BenchResult {
    let progress = Progress::spinner("write amplification");
    let mut rows = Vec::new();
    for over_provisioning in [0.07, 0.10, 0.15, 0.20, 0.28, 0.35, 0.50] {
        progress.set_message(format!(
            "write amplification, {:.0}% over-provisioned",
            over_provisioning * 100.0
        ));
        let options = experiment_options(over_provisioning, VictimPolicy::Greedy);
        let mut ftl = experiment_ftl(arguments, StorageMode::TimingOnly, options)?;
        let stats = steady_state_stats(arguments, &mut ftl, &Workload::Uniform)?;
        let logical = ftl.info().block_count;
        let physical = physical_data_pages(&ftl);
        let alpha = physical as f64 / logical as f64;
        rows.push(WriteAmplificationRow {
            over_provisioning,
            logical_pages: logical,
            physical_data_pages: physical,
            physical_over_logical: alpha,
            write_amplification: stats.write_amplification(),
            write_amplification_closed_form: closed_form_write_amplification(alpha),
            gc_pages_copied: stats.gc_pages_copied,
            gc_busy_seconds_virtual: stats.gc_busy_ns as f64 / 1e9,
            host_write_wait_us_max: ftl.stats().host_write_wait_ns_max as f64 / 1e3,
            host_write_wait_bound_us: ftl
                .host_write_wait_bound_ns()
                .map(|bound_ns| bound_ns as f64 / 1e3),
        });
    }
    progress.finish();
    plot_if_asked(arguments, || {
        experiment_chart(
            "FTL write amplification vs over-provisioning (uniform random page writes, greedy GC)"
                .to_string(),
            (
                "over-provisioning (% of the logical space)",
                "write amplification (flash page writes / host page writes)",
            ),
            ChartKind::Lines,
            vec![
                Series::new(
                    "measured (simulated FTL)",
                    rows.iter()
                        .map(|row| (row.over_provisioning * 100.0, row.write_amplification)),
                ),
                Series::new(
                    "closed form (uniform writes, greedy)",
                    rows.iter().map(|row| {
                        (
                            row.over_provisioning * 100.0,
                            row.write_amplification_closed_form,
                        )
                    }),
                ),
            ],
        )
    })?;
    print_rows(arguments, &rows, |rows| {
        ColumnTable::new("  ", rows)
            .right("over-prov", 9, |row| percent(row.over_provisioning))
            .right("physical/logical", 16, |row| {
                fixed(row.physical_over_logical, 3)
            })
            .right("WA measured", 11, |row| fixed(row.write_amplification, 2))
            .right("WA closed form", 14, |row| {
                fixed(row.write_amplification_closed_form, 2)
            })
            .right("GC copied", 9, |row| row.gc_pages_copied.to_string())
            .right("max host wait", 13, |row| {
                microseconds(row.host_write_wait_us_max)
            })
            .right("wait bound", 10, |row| {
                format!("{:>7} us", wait_bound(row.host_write_wait_bound_us))
            })
    })
}

#[derive(Debug, Serialize)]
struct PolicyRow {
    workload: &'static str,
    policy: &'static str,
    write_amplification: f64,
    gc_pages_copied: u64,
    gc_victims: u64,
}

pub(super) fn run_hot_cold(arguments: &ExperimentArgs) -> BenchResult {
    let mut rows = Vec::new();
    let workloads: [(&'static str, WorkloadMaker); 3] = [
        ("uniform", |_| Workload::Uniform),
        ("80/20", |_| Workload::HotCold {
            hot_share: 0.8,
            hot_fraction: 0.2,
        }),
        ("zipf(0.99)", |pages| Workload::zipf(pages, 0.99)),
    ];
    let progress = Progress::spinner("hot and cold data");
    for (name, make_workload) in workloads {
        for (policy_name, policy) in [
            ("greedy", VictimPolicy::Greedy),
            ("cost-benefit", VictimPolicy::CostBenefit),
        ] {
            progress.set_message(format!(
                "hot and cold data: {name} writes, {policy_name} GC"
            ));
            let options = experiment_options(0.10, policy);
            let mut ftl = experiment_ftl(arguments, StorageMode::TimingOnly, options)?;
            let workload = make_workload(ftl.info().block_count);
            let stats = steady_state_stats(arguments, &mut ftl, &workload)?;
            rows.push(PolicyRow {
                workload: name,
                policy: policy_name,
                write_amplification: stats.write_amplification(),
                gc_pages_copied: stats.gc_pages_copied,
                gc_victims: stats.gc_victims,
            });
        }
    }
    let by_policy = |policy: &str| {
        Series::new(
            format!("{policy} victim choice"),
            rows.iter()
                .filter(|row| row.policy == policy)
                .enumerate()
                .map(|(index, row)| (index as f64, row.write_amplification)),
        )
    };
    progress.finish();
    plot_if_asked(arguments, || {
        experiment_chart(
            "FTL garbage collection policies on skewed workloads (over-provisioning 10%)"
                .to_string(),
            (
                "workload (share of writes to the hot pages)",
                "write amplification (flash / host page writes)",
            ),
            categories(&["uniform", "80/20", "zipf(0.99)"]),
            vec![by_policy("greedy"), by_policy("cost-benefit")],
        )
    })?;
    print_rows(arguments, &rows, |rows| {
        ColumnTable::new(" ", rows)
            .caption(
                "workload     policy        WA     GC copied  victims   (over-provisioning 10%)",
            )
            .left("workload", 12, |row| row.workload.to_string())
            .left("policy", 12, |row| row.policy.to_string())
            .right("WA", 5, |row| fixed(row.write_amplification, 2))
            .column_after("  ", "GC copied", 10, Align::Right, |row| {
                row.gc_pages_copied.to_string()
            })
            .column_after("  ", "victims", 7, Align::Right, |row| {
                row.gc_victims.to_string()
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_form_matches_known_points() {
        for (alpha, expected) in [(1.07, 7.82), (1.5, 1.72), (2.0, 1.255)] {
            let value = closed_form_write_amplification(alpha);
            assert!((value - expected).abs() < 0.02, "alpha {alpha}: {value}");
        }
        assert!((lambert_w0(-0.2) - (-0.259_171)).abs() < 1e-5);
    }
}
