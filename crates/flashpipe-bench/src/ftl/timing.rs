//! The speed of the simulated stack (timing only against data in memory) and the bound on
//! how long a host write waits for collection against the longest wait observed.

use super::{
    categories, experiment_chart, experiment_ftl, experiment_options, fill, microseconds, percent,
    plot_if_asked, print_rows, steady_state_stats, wait_bound, write_pages, ExperimentArgs,
    Workload, WorkloadMaker,
};
use crate::plot::{ChartKind, Series};
use crate::progress::Progress;
use crate::table::Align;
use crate::BenchResult;
use flashpipe_bench_harness::column_table::{fixed, ColumnTable};
use flashpipe_device::{BlockDevice, SplitMix64};
use flashpipe_flash::StorageMode;
use flashpipe_ftl::{FtlOptions, VictimPolicy};
use serde::Serialize;
use std::time::Instant;

#[derive(Debug, Serialize)]
struct SpeedRow {
    storage: &'static str,
    host_operations: u64,
    wall_seconds: f64,
    host_operations_per_wall_second: f64,
    virtual_seconds: f64,
}

pub(super) fn run_speed(arguments: &ExperimentArgs) -> BenchResult {
    let progress = Progress::spinner("speed");
    let mut rows = Vec::new();
    for (name, storage) in [
        ("timing only", StorageMode::TimingOnly),
        ("data in memory", StorageMode::Memory),
    ] {
        progress.set_message(format!("speed: measuring the FTL with {name}"));
        let options = experiment_options(0.10, VictimPolicy::Greedy);
        let mut ftl = experiment_ftl(arguments, storage, options)?;
        let clock = ftl.clock();
        let started_virtual_ns = clock.now_ns();
        let started = Instant::now();
        let mut generator = SplitMix64::new(arguments.run.seed);
        fill(&mut ftl)?;
        let pages = ftl.info().block_count;
        let total = pages * u64::from(arguments.device_writes);
        write_pages(&mut ftl, &Workload::Uniform, &mut generator, total)?;
        let wall_seconds = started.elapsed().as_secs_f64();
        let operations = pages + total;
        rows.push(SpeedRow {
            storage: name,
            host_operations: operations,
            wall_seconds,
            host_operations_per_wall_second: operations as f64 / wall_seconds,
            virtual_seconds: (clock.now_ns() - started_virtual_ns) as f64 / 1e9,
        });
    }
    progress.finish();
    plot_if_asked(arguments, || {
        experiment_chart(
            "Speed of the simulated FTL stack (wall clock of this machine)".to_string(),
            (
                "where the simulated flash keeps page data",
                "host 4 KiB writes per wall-clock second",
            ),
            categories(&["timing only (no data)", "data in memory"]),
            vec![Series::new(
                "simulated host writes per wall-clock second",
                rows.iter()
                    .enumerate()
                    .map(|(index, row)| (index as f64, row.host_operations_per_wall_second)),
            )],
        )
    })?;
    print_rows(arguments, &rows, |rows| {
        ColumnTable::new(" ", rows)
            .caption("storage          host 4 KiB writes   wall s   ops per wall s   virtual s")
            .left("storage", 16, |row| row.storage.to_string())
            .right("host 4 KiB writes", 17, |row| {
                row.host_operations.to_string()
            })
            .right("wall s", 8, |row| fixed(row.wall_seconds, 2))
            .right("ops per wall s", 16, |row| {
                fixed(row.host_operations_per_wall_second, 0)
            })
            .right("virtual s", 11, |row| fixed(row.virtual_seconds, 2))
    })
}

#[derive(Debug, Serialize)]
struct GcWaitRow {
    workload: &'static str,
    over_provisioning: f64,
    pacing: &'static str,
    migrations_per_host_page_max: u32,
    host_write_wait_bound_us: Option<f64>,
    host_write_wait_us_max: f64,
    host_write_wait_us_mean: f64,
    host_pages_held: u64,
    host_write_wait_bound_exceeded: u64,
    write_amplification: f64,
    virtual_seconds: f64,
}

fn gc_wait_row(
    arguments: &ExperimentArgs,
    (workload_name, make_workload): (&'static str, WorkloadMaker),
    over_provisioning: f64,
    paced: bool,
) -> BenchResult<GcWaitRow> {
    let options = FtlOptions {
        gc_migrations_per_host_page_max: if paced { None } else { Some(0) },
        ..experiment_options(over_provisioning, VictimPolicy::Greedy)
    };
    let mut ftl = experiment_ftl(arguments, StorageMode::TimingOnly, options)?;
    let workload = make_workload(ftl.info().block_count);
    let clock = ftl.clock();
    let started_ns = clock.now_ns();
    let stats = steady_state_stats(arguments, &mut ftl, &workload)?;
    let whole_run = ftl.stats();
    Ok(GcWaitRow {
        workload: workload_name,
        over_provisioning,
        pacing: if paced { "on" } else { "off" },
        migrations_per_host_page_max: ftl.gc_migrations_per_host_page_max(),
        host_write_wait_bound_us: ftl
            .host_write_wait_bound_ns()
            .map(|bound_ns| bound_ns as f64 / 1e3),
        host_write_wait_us_max: whole_run.host_write_wait_ns_max as f64 / 1e3,
        host_write_wait_us_mean: whole_run.host_write_wait_ns_total as f64
            / 1e3
            / whole_run.host_write_stalls.max(1) as f64,
        host_pages_held: whole_run.host_write_stalls,
        host_write_wait_bound_exceeded: whole_run.host_write_wait_bound_exceeded,
        write_amplification: stats.write_amplification(),
        virtual_seconds: (clock.now_ns() - started_ns) as f64 / 1e9,
    })
}

pub(super) fn run_gc_wait(arguments: &ExperimentArgs) -> BenchResult {
    let uniform: (&'static str, WorkloadMaker) = ("uniform", |_| Workload::Uniform);
    let hot_cold: (&'static str, WorkloadMaker) = ("80/20", |_| Workload::HotCold {
        hot_share: 0.8,
        hot_fraction: 0.2,
    });
    let progress = Progress::spinner("GC waits");
    let mut rows = Vec::new();
    for (workload, over_provisioning) in [
        (uniform, 0.07),
        (uniform, 0.20),
        (uniform, 0.50),
        (hot_cold, 0.07),
        (hot_cold, 0.20),
    ] {
        for paced in [false, true] {
            progress.set_message(format!(
                "GC waits, {} writes, {:.0}% over-provisioned, {}",
                workload.0,
                over_provisioning * 100.0,
                if paced { "paced" } else { "unpaced" }
            ));
            rows.push(gc_wait_row(arguments, workload, over_provisioning, paced)?);
        }
    }
    let uniform_rows = |pacing: &'static str| {
        rows.iter()
            .filter(move |row| row.workload == "uniform" && row.pacing == pacing)
    };
    let longest_wait_ms = |pacing: &'static str| {
        uniform_rows(pacing).map(|row| {
            (
                row.over_provisioning * 100.0,
                row.host_write_wait_us_max / 1e3,
            )
        })
    };
    progress.finish();
    plot_if_asked(arguments, || {
        experiment_chart(
            "FTL host write waits for garbage collection (uniform writes, greedy GC)".to_string(),
            (
                "over-provisioning (% of the logical space)",
                "longest host write wait (ms, virtual time)",
            ),
            ChartKind::Lines,
            vec![
                Series::new("longest wait, pacing off", longest_wait_ms("off")),
                Series::new("longest wait, pacing on", longest_wait_ms("on")),
                Series::new(
                    "bound with pacing on",
                    uniform_rows("on").filter_map(|row| {
                        let bound_us = row.host_write_wait_bound_us?;
                        Some((row.over_provisioning * 100.0, bound_us / 1e3))
                    }),
                ),
            ],
        )
    })?;
    print_rows(arguments, &rows, |rows| {
        ColumnTable::new(" ", rows)
            .caption("workload  over-prov  pacing   K   wait bound   longest wait   mean wait   pages held  over bound    WA   virtual s   (greedy)")
            .left("workload", 8, |row| row.workload.to_string())
            .right("over-prov", 10, |row| percent(row.over_provisioning))
            .column_after("  ", "pacing", 6, Align::Left, |row| row.pacing.to_string())
            .right("K", 3, |row| row.migrations_per_host_page_max.to_string())
            .right("wait bound", 13, |row| {
                format!("{:>10} us", wait_bound(row.host_write_wait_bound_us))
            })
            .right("longest wait", 14, |row| microseconds(row.host_write_wait_us_max))
            .right("mean wait", 11, |row| microseconds(row.host_write_wait_us_mean))
            .right("pages held", 12, |row| row.host_pages_held.to_string())
            .right("over bound", 11, |row| {
                row.host_write_wait_bound_exceeded.to_string()
            })
            .right("WA", 5, |row| fixed(row.write_amplification, 2))
            .right("virtual s", 11, |row| fixed(row.virtual_seconds, 2))
    })
}
