//! The benchmark's report: results side by side with their references, the targets
//! with met / NOT MET, a human table and a JSON form (every ratio in a `*ratio*` field).

use serde::Serialize;

use super::measure::{Figures, Pattern, Workload};
use crate::column_table::{fixed, fixed_or, ColumnTable};
use crate::table::Table;
use crate::verdict::Verdict;

/// Everything one run measured.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Folder of the files.
    pub directory: String,
    /// Working set of each file.
    pub size_bytes_per_file: u64,
    /// Time per workload.
    pub runtime_seconds: f64,
    /// The file engine the device layer used.
    pub engine_in_use: String,
    /// Whether the files were opened with `O_DIRECT`.
    pub direct_io: bool,
    /// Why the automatic engine fell back, if it did.
    pub fallback_reason: Option<String>,
    /// fio's version, when it ran.
    pub fio_version: Option<String>,
    /// Why fio did not run (or stopped), when it did not.
    pub fio_unavailable_reason: Option<String>,
    /// One file, device layer beside fio.
    pub single_file: Vec<WorkloadResult>,
    /// This machine's best single-copy `memcpy` bandwidth in the run (peak).
    pub memcpy_gb_per_s: Option<f64>,
    /// RAM disk stripes and the 2-file stripe, sequential throughput.
    pub stripes: Vec<StripeResult>,
    /// The targets and whether they were met.
    pub targets: Vec<Target>,
}

/// One workload on one file.
#[derive(Debug, Serialize)]
pub struct WorkloadResult {
    /// Human name of the workload.
    pub label: String,
    /// The workload.
    pub workload: Workload,
    /// Through the device layer.
    pub layer: Figures,
    /// fio on the same file.
    pub fio: Option<Figures>,
    /// Layer MB/s over fio MB/s.
    pub throughput_ratio_to_fio: Option<f64>,
    /// Layer IOPS over fio IOPS.
    pub iops_ratio_to_fio: Option<f64>,
    /// Layer mean latency over fio mean latency (lower is better).
    pub latency_mean_ratio_to_fio: Option<f64>,
    /// Layer p99 latency over fio p99 latency (lower is better).
    pub latency_p99_ratio_to_fio: Option<f64>,
    /// io_uring_enter calls per request through the layer (profiling).
    pub layer_io_uring_enters_per_request: Option<f64>,
}

impl WorkloadResult {
    /// Pairs the layer's figures with fio's and works out the ratios.
    pub fn new(
        workload: Workload,
        layer: Figures,
        fio: Option<Figures>,
        layer_io_uring_enters_per_request: Option<f64>,
    ) -> WorkloadResult {
        let ratio = |pick: fn(&Figures) -> f64| fio.as_ref().map(|fio| pick(&layer) / pick(fio));
        WorkloadResult {
            label: workload.label(),
            workload,
            layer,
            fio,
            throughput_ratio_to_fio: ratio(|figures| figures.mb_per_s),
            iops_ratio_to_fio: ratio(|figures| figures.iops),
            latency_mean_ratio_to_fio: ratio(|figures| figures.latency_us_mean),
            latency_p99_ratio_to_fio: ratio(|figures| figures.latency_us_p99),
            layer_io_uring_enters_per_request,
        }
    }
}

/// Sequential throughput of one stripe.
#[derive(Debug, Serialize)]
pub struct StripeResult {
    /// What is striped, e.g. `RAM x4` or `2 files`.
    pub device: String,
    /// Number of members.
    pub member_count: u32,
    /// Sequential read or write.
    pub pattern: Pattern,
    /// Throughput in GB/s.
    pub gb_per_s: f64,
    /// Throughput over the sustained `memcpy` bandwidth measured right before and after
    /// it, for as long (RAM stripes; the 0.6x target).
    pub throughput_ratio_to_memcpy: Option<f64>,
    /// That sustained `memcpy` bandwidth.
    pub memcpy_sustained_gb_per_s: Option<f64>,
    /// Throughput over `memcpy` in request-sized pieces measured around it (the same
    /// copies a RAM disk does, without the device layer): the layer's own overhead.
    pub throughput_ratio_to_request_sized_memcpy: Option<f64>,
    /// That request-sized `memcpy` bandwidth.
    pub request_sized_memcpy_gb_per_s: Option<f64>,
    /// Throughput over the best single `memcpy` of the run.
    pub throughput_ratio_to_peak_memcpy: Option<f64>,
    /// The full figures.
    pub figures: Figures,
    /// True for RAM stripes (which carry the 0.6x memcpy target).
    pub in_memory: bool,
}

/// Which way a bound goes (the harness's one bound; this report's JSON spells it
/// `at-least` / `at-most`).
pub use crate::verdict::Bound;

/// A performance target, evaluated.
#[derive(Debug, Serialize)]
pub struct Target {
    /// What is compared.
    pub name: String,
    /// The measured ratio, if it could be measured.
    pub measured_ratio: Option<f64>,
    /// The bound.
    pub bound_ratio: f64,
    /// Which way the bound goes.
    #[serde(serialize_with = "crate::verdict::serialize_bound_kebab")]
    pub bound: Bound,
    /// "met", "NOT MET" or "n/a".
    pub status: &'static str,
}

impl Target {
    fn new(name: String, measured_ratio: Option<f64>, bound: Bound, bound_ratio: f64) -> Target {
        let status = Verdict::judge(measured_ratio, bound, bound_ratio).label();
        Target {
            name,
            measured_ratio,
            bound_ratio,
            bound,
            status,
        }
    }
}

/// The issue #2 targets for the results at hand.
pub fn evaluate_targets(single_file: &[WorkloadResult], stripes: &[StripeResult]) -> Vec<Target> {
    let mut targets = Vec::new();
    for result in single_file {
        let workload = &result.workload;
        let name = |what: &str| format!("{}: {what}", result.label);
        match (workload.pattern, workload.queue_depth) {
            (Pattern::SequentialRead, _) => targets.push(Target::new(
                name("MB/s vs fio"),
                result.throughput_ratio_to_fio,
                Bound::AtLeast,
                0.97,
            )),
            (Pattern::SequentialWrite, _) => targets.push(Target::new(
                name("MB/s vs fio"),
                result.throughput_ratio_to_fio,
                Bound::AtLeast,
                0.95,
            )),
            (Pattern::RandomRead, 32) => targets.push(Target::new(
                name("IOPS vs fio"),
                result.iops_ratio_to_fio,
                Bound::AtLeast,
                0.95,
            )),
            (Pattern::RandomRead | Pattern::RandomWrite, 1) => targets.push(Target::new(
                name("mean latency vs fio"),
                result.latency_mean_ratio_to_fio,
                Bound::AtMost,
                1.10,
            )),
            _ => {}
        }
    }
    for stripe in stripes.iter().filter(|stripe| stripe.in_memory) {
        targets.push(Target::new(
            format!(
                "{} {}: GB/s vs memcpy",
                stripe.device,
                stripe.pattern.short_name()
            ),
            stripe.throughput_ratio_to_memcpy,
            Bound::AtLeast,
            0.6,
        ));
    }
    targets
}

fn ratio_text(ratio: Option<f64>) -> String {
    fixed_or(ratio, 3, "n/a")
}

/// The human-readable report.
pub fn render_table(report: &Report) -> String {
    let mut text = String::new();
    let fio_line = match (&report.fio_version, &report.fio_unavailable_reason) {
        (Some(version), None) => version.clone(),
        (Some(version), Some(reason)) => format!("{version}; {reason}; later ratios are n/a"),
        (None, reason) => format!(
            "unavailable ({}); fio columns and ratios are n/a",
            reason.as_deref().unwrap_or("not run")
        ),
    };
    text += &format!(
        "flashpipe bench device: {} per file in {}, {:.1} s per workload\n\
         engine: {}, direct I/O: {}{}\nfio: {fio_line}\n\n",
        human_bytes(report.size_bytes_per_file),
        report.directory,
        report.runtime_seconds,
        report.engine_in_use,
        if report.direct_io {
            "yes"
        } else {
            "no (buffered)"
        },
        report
            .fallback_reason
            .as_ref()
            .map(|reason| format!(" (fallback: {reason})"))
            .unwrap_or_default(),
    );
    text += &single_file_table(&report.single_file).render();
    if !report.stripes.is_empty() {
        text += &format!(
            "\nmemcpy peak (best single copy): {}\n",
            report
                .memcpy_gb_per_s
                .map_or_else(|| "n/a".to_string(), |value| format!("{value:.2} GB/s")),
        );
        text += &stripes_table(&report.stripes).render();
    }
    text += "\ntargets\n";
    for target in &report.targets {
        let bound = match target.bound {
            Bound::AtLeast => ">=",
            Bound::AtMost => "<=",
        };
        text += &format!(
            "  {:<8} {:<48} {} (needs {bound} {:.2})\n",
            target.status,
            target.name,
            ratio_text(target.measured_ratio),
            target.bound_ratio
        );
    }
    text
}

/// The single-file workloads beside fio.
fn single_file_table(results: &[WorkloadResult]) -> Table {
    let fio = |result: &WorkloadResult, pick: fn(&Figures) -> f64, decimals: usize| {
        fixed_or(result.fio.as_ref().map(pick), decimals, "n/a")
    };
    ColumnTable::new(" ", results)
        .left("one file", 24, |result| result.label.clone())
        .right("MB/s", 9, |result| fixed(result.layer.mb_per_s, 1))
        .right("fio MB/s", 9, |result| fio(result, |fio| fio.mb_per_s, 1))
        .right("ratio", 6, |result| {
            ratio_text(result.throughput_ratio_to_fio)
        })
        .right_after("  ", "IOPS", 10, |result| fixed(result.layer.iops, 0))
        .right("fio IOPS", 10, |result| fio(result, |fio| fio.iops, 0))
        .right("ratio", 6, |result| ratio_text(result.iops_ratio_to_fio))
        .right_after("  ", "mean us", 8, |result| {
            fixed(result.layer.latency_us_mean, 1)
        })
        .right("fio mean", 8, |result| {
            fio(result, |fio| fio.latency_us_mean, 1)
        })
        .right("ratio", 6, |result| {
            ratio_text(result.latency_mean_ratio_to_fio)
        })
        .right_after("  ", "p99 us", 8, |result| {
            fixed(result.layer.latency_us_p99, 1)
        })
        .right("fio p99", 8, |result| {
            fio(result, |fio| fio.latency_us_p99, 1)
        })
        .table()
}

/// The stripes beside `memcpy`.
fn stripes_table(stripes: &[StripeResult]) -> Table {
    ColumnTable::new(" ", stripes)
        .left("stripes (1MiB QD32)", 24, |stripe| {
            format!("{} {}", stripe.device, stripe.pattern.short_name())
        })
        .right("GB/s", 8, |stripe| fixed(stripe.gb_per_s, 2))
        .right("memcpy GB/s", 12, |stripe| {
            fixed_or(stripe.memcpy_sustained_gb_per_s, 2, "n/a")
        })
        .right("ratio", 8, |stripe| {
            ratio_text(stripe.throughput_ratio_to_memcpy)
        })
        .right("1MiB-cp GB/s", 12, |stripe| {
            fixed_or(stripe.request_sized_memcpy_gb_per_s, 2, "n/a")
        })
        .right("ratio", 8, |stripe| {
            ratio_text(stripe.throughput_ratio_to_request_sized_memcpy)
        })
        .right("/peak", 8, |stripe| {
            ratio_text(stripe.throughput_ratio_to_peak_memcpy)
        })
        .table()
}

/// `268435456` -> `256 MiB`.
pub fn human_bytes(size_bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = size_bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(mb_per_s: f64, iops: f64, latency_us_mean: f64) -> Figures {
        Figures {
            mb_per_s,
            iops,
            latency_us_mean,
            latency_us_p99: latency_us_mean * 2.0,
            requests: 10,
        }
    }

    #[test]
    fn targets_follow_the_ratios() {
        use Pattern::{RandomRead, RandomWrite, SequentialRead, SequentialWrite};
        let fio = Some(figures(100.0, 1000.0, 10.0));
        let cases = [
            (SequentialRead, 32, [97.0, 1.0, 1.0], fio, "met"),
            (SequentialRead, 32, [96.0, 1.0, 1.0], fio, "NOT MET"),
            (SequentialWrite, 32, [95.0, 1.0, 1.0], fio, "met"),
            (RandomRead, 32, [1.0, 949.0, 1.0], fio, "NOT MET"),
            (RandomRead, 1, [1.0, 1.0, 11.0], fio, "met"),
            (RandomWrite, 1, [1.0, 1.0, 11.2], fio, "NOT MET"),
            (RandomRead, 1, [1.0, 1.0, 11.2], None, "n/a"),
        ];
        for (pattern, queue_depth, [mb_per_s, iops, latency_us_mean], fio, expected) in cases {
            let workload = Workload {
                pattern,
                request_size_bytes: 4096,
                queue_depth,
            };
            let layer = figures(mb_per_s, iops, latency_us_mean);
            let results = [WorkloadResult::new(workload, layer, fio, None)];
            let targets = evaluate_targets(&results, &[]);
            assert_eq!(targets.len(), 1, "{pattern:?} QD{queue_depth}");
            assert_eq!(targets[0].status, expected, "{}", targets[0].name);
        }
    }

    #[test]
    fn sizes_print_in_binary_units() {
        assert_eq!(human_bytes(256 << 20), "256 MiB");
        assert_eq!(human_bytes(1536), "1.50 KiB");
        assert_eq!(human_bytes(7), "7 B");
    }
}
