//! The program/erase spread with and without static wear leveling.

use super::{
    categories, experiment_chart, experiment_ftl, experiment_options, plot_if_asked, print_rows,
    steady_state_stats, ExperimentArgs, Workload,
};
use crate::plot::Series;
use crate::progress::Progress;
use crate::BenchResult;
use flashpipe_bench_harness::column_table::{fixed, ColumnTable};
use flashpipe_flash::StorageMode;
use flashpipe_ftl::{FtlOptions, VictimPolicy};
use serde::Serialize;

#[derive(Debug, Serialize)]
struct WearRow {
    static_wear_leveling_spread: Option<u32>,
    device_writes: u32,
    erase_count_min: u32,
    erase_count_mean: f64,
    erase_count_max: u32,
    static_moves: u64,
    write_amplification: f64,
}

pub(super) fn run_wear(arguments: &ExperimentArgs) -> BenchResult {
    let progress = Progress::spinner("wear");
    let mut rows = Vec::new();
    for spread in [None, Some(16)] {
        progress.set_message(match spread {
            None => "wear: without static wear leveling".to_string(),
            Some(spread) => format!("wear: static wear leveling, spread {spread}"),
        });
        let options = FtlOptions {
            static_wear_leveling_spread: spread,
            ..experiment_options(0.10, VictimPolicy::Greedy)
        };
        let mut ftl = experiment_ftl(arguments, StorageMode::TimingOnly, options)?;
        let workload = Workload::zipf(ftl.info().block_count, 0.99);
        steady_state_stats(arguments, &mut ftl, &workload)?;
        let stats = ftl.stats();
        rows.push(WearRow {
            static_wear_leveling_spread: spread,
            device_writes: arguments.device_writes,
            erase_count_min: stats.erase_count_min,
            erase_count_mean: stats.erase_count_mean,
            erase_count_max: stats.erase_count_max,
            static_moves: stats.static_wear_leveling_moves,
            write_amplification: stats.write_amplification(),
        });
    }
    progress.finish();
    plot_if_asked(arguments, || {
        experiment_chart(
            format!(
                "FTL program/erase spread, zipf(0.99) writes, {} device writes",
                arguments.device_writes
            ),
            (
                "erase count over all blocks",
                "program/erase cycles per block",
            ),
            categories(&["least worn block", "mean", "most worn block"]),
            rows.iter()
                .map(|row| {
                    let name = row
                        .static_wear_leveling_spread
                        .map_or("static wear leveling off".to_string(), |spread| {
                            format!("static wear leveling on (spread > {spread})")
                        });
                    Series::new(
                        name,
                        [
                            (0.0, f64::from(row.erase_count_min)),
                            (1.0, row.erase_count_mean),
                            (2.0, f64::from(row.erase_count_max)),
                        ],
                    )
                })
                .collect(),
        )
    })?;
    let caption = format!(
        "static leveling   P/E min   mean    max   moves   WA   (zipf 0.99, {} device writes)",
        arguments.device_writes
    );
    print_rows(arguments, &rows, |rows| {
        ColumnTable::new(" ", rows)
            .caption(&caption)
            .left("static leveling", 16, |row| {
                row.static_wear_leveling_spread
                    .map_or("off".to_string(), |spread| format!("spread > {spread}"))
            })
            .right("P/E min", 7, |row| row.erase_count_min.to_string())
            .right("mean", 7, |row| fixed(row.erase_count_mean, 1))
            .right("max", 6, |row| row.erase_count_max.to_string())
            .right("moves", 7, |row| row.static_moves.to_string())
            .right("WA", 5, |row| fixed(row.write_amplification, 2))
    })
}
