//! Issue #14's targets for `flashpipe bench serve`, each judged from one store's rows and
//! printed as met or NOT MET with its figures; a target whose rows are missing (a client
//! refused data by reference) is NOT MET, never assumed.

use serde::Serialize;

use super::{StoreReport, SIDE_BY_REFERENCE, SIDE_COPYING, SIDE_IN_PROCESS, SIDE_TMPFS};
use crate::column_table::ColumnTable;

/// QD1 round trip from a client by reference over the in-process engine's, at most.
const MOST_QD1_OVER_IN_PROCESS_RATIO: f64 = 1.5;
/// 1 MiB reads by reference over the in-process engine's throughput, at least.
const LEAST_BY_REFERENCE_OVER_IN_PROCESS_RATIO: f64 = 0.9;
/// 1 MiB reads by reference over copying, at least.
const LEAST_BY_REFERENCE_OVER_COPYING_RATIO: f64 = 3.0;
/// 1 MiB reads by reference over `read()` from tmpfs, at least.
const LEAST_BY_REFERENCE_OVER_TMPFS_RATIO: f64 = 1.0;
/// 4 KiB random reads at depth from several client processes over the in-process
/// engine's, at least.
const LEAST_SMALL_READS_OVER_IN_PROCESS_RATIO: f64 = 0.9;
/// Jain's index at every client count, at least.
const LEAST_JAIN_FAIRNESS_RATIO: f64 = 0.95;
/// Aggregate throughput at every client count over one client's, at least ("holds").
const LEAST_AGGREGATE_OVER_ONE_CLIENT_RATIO: f64 = 0.9;

/// One target judged.
#[derive(Debug, Clone, Serialize)]
pub struct TargetRow {
    /// What is asked.
    pub target: String,
    /// The measured figure it was judged on.
    pub measured: String,
    /// Whether it is met.
    pub met: bool,
}

/// Judges every target from `report`'s rows.
pub(super) fn judge(report: &StoreReport) -> Vec<TargetRow> {
    let latency = |side: &str| {
        on_side(&report.latency, side, |row| {
            (row.side.as_str(), row.us_per_operation)
        })
    };
    let throughput = |side: &str| {
        on_side(&report.throughput, side, |row| {
            (row.side.as_str(), row.gib_per_second)
        })
    };
    let by_reference = throughput(SIDE_BY_REFERENCE);
    let mut targets = vec![
        at_most(
            "QD1 4 KiB round trip, client by reference / in-process",
            ratio(latency(SIDE_BY_REFERENCE), latency(SIDE_IN_PROCESS)),
            MOST_QD1_OVER_IN_PROCESS_RATIO,
        ),
        at_least(
            "1 MiB reads, client by reference / in-process",
            ratio(by_reference, throughput(SIDE_IN_PROCESS)),
            LEAST_BY_REFERENCE_OVER_IN_PROCESS_RATIO,
        ),
        at_least(
            "1 MiB reads, by reference / copying",
            ratio(by_reference, throughput(SIDE_COPYING)),
            LEAST_BY_REFERENCE_OVER_COPYING_RATIO,
        ),
        at_least(
            "1 MiB reads, by reference / read() from tmpfs",
            ratio(by_reference, throughput(SIDE_TMPFS)),
            LEAST_BY_REFERENCE_OVER_TMPFS_RATIO,
        ),
    ];
    let least = |figure: fn(&super::ConcurrencyRow) -> f64| {
        report.concurrency.iter().map(figure).reduce(f64::min)
    };
    targets.push(at_least(
        "4 KiB random reads, 32 in flight, 4 client processes / in-process",
        report
            .small_reads
            .get(1)
            .map(|row| row.over_in_process_ratio),
        LEAST_SMALL_READS_OVER_IN_PROCESS_RATIO,
    ));
    targets.push(at_least(
        "Jain's index, every client count",
        least(|row| row.jain_fairness_ratio),
        LEAST_JAIN_FAIRNESS_RATIO,
    ));
    targets.push(at_least(
        "aggregate throughput / one client's, every client count",
        least(|row| row.over_one_client_ratio),
        LEAST_AGGREGATE_OVER_ONE_CLIENT_RATIO,
    ));
    targets
}

/// The figure of the row of `rows` measured on `side`, if there is one; `side_and_figure`
/// reads both from a row.
fn on_side<R>(rows: &[R], side: &str, side_and_figure: fn(&R) -> (&str, f64)) -> Option<f64> {
    rows.iter()
        .map(side_and_figure)
        .find(|(row_side, _)| *row_side == side)
        .map(|(_, figure)| figure)
}

fn ratio(numerator: Option<f64>, denominator: Option<f64>) -> Option<f64> {
    Some(numerator? / denominator?)
}

fn at_most(target: &str, measured: Option<f64>, limit: f64) -> TargetRow {
    judged(format!("{target} <= {limit}"), measured, |value| {
        value <= limit
    })
}

fn at_least(target: &str, measured: Option<f64>, limit: f64) -> TargetRow {
    judged(format!("{target} >= {limit}"), measured, |value| {
        value >= limit
    })
}

fn judged(target: String, measured: Option<f64>, met: impl Fn(f64) -> bool) -> TargetRow {
    TargetRow {
        target,
        measured: measured.map_or("not measured".to_string(), |value| format!("{value:.3}")),
        met: measured.is_some_and(met),
    }
}

/// Prints the targets as a table.
pub(super) fn print(targets: &[TargetRow]) {
    ColumnTable::new("  ", targets)
        .indent("  ")
        .left("target", 62, |row| row.target.clone())
        .right("measured", 13, |row| row.measured.clone())
        .left("verdict", 0, |row| {
            crate::verdict::Verdict::of(row.met).label().to_string()
        })
        .print();
}
