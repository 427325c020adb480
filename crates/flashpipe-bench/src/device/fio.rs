//! Running fio as the reference: finding it (never installing it: the harness's one
//! driver), running one workload on the same file with `ioengine=io_uring`, and reading its
//! JSON report with the harness's one parser (p99 from `lat_ns`, submission to completion,
//! as the device layer measures its own).

use std::path::Path;

use flashpipe_bench_harness::fio::{self, Direction, LatencySource};

use super::measure::{Figures, Workload};

/// fio, found and working.
#[derive(Debug, Clone)]
pub struct Fio {
    /// `fio --version`.
    pub version: String,
}

/// Finds fio on the path; never installs it. Returns why not when it cannot (the
/// message names scripts/install-test-packages).
pub fn find() -> Result<Fio, String> {
    fio::find()
        .map(|found| Fio {
            version: found.version,
        })
        .map_err(|error| error.to_string())
}

/// How fio should run one workload.
pub struct FioRun<'a> {
    /// The file (the same one the device layer uses).
    pub path: &'a Path,
    /// Bytes of the file to use.
    pub size_bytes: u64,
    /// The workload.
    pub workload: &'a Workload,
    /// Time to run, in milliseconds.
    pub runtime_ms: u64,
    /// `direct=1` when true.
    pub direct_io: bool,
}

impl Fio {
    /// Runs one workload and returns fio's figures.
    pub fn run(&self, run: &FioRun<'_>) -> Result<Figures, String> {
        let report = run_fio_command(&fio_arguments(run))?;
        parse_report(&report, run.workload.pattern.is_read())
    }
}

/// Runs fio with `arguments` and returns its standard output (its JSON report), or
/// what went wrong, with the command line.
pub fn run_fio_command(arguments: &[String]) -> Result<String, String> {
    fio::run(arguments).map_err(|error| error.to_string())
}

fn fio_arguments(run: &FioRun<'_>) -> Vec<String> {
    vec![
        "--name=flashpipe-reference".to_string(),
        format!("--filename={}", run.path.display()),
        format!("--size={}", run.size_bytes),
        format!("--bs={}", run.workload.request_size_bytes),
        format!("--rw={}", run.workload.pattern.fio_rw()),
        format!("--iodepth={}", run.workload.queue_depth),
        "--ioengine=io_uring".to_string(),
        format!("--direct={}", u8::from(run.direct_io)),
        "--time_based".to_string(),
        format!("--runtime={}ms", run.runtime_ms.max(1)),
        "--norandommap".to_string(),
        "--randrepeat=0".to_string(),
        "--lat_percentiles=1".to_string(),
        "--allow_file_create=0".to_string(),
        "--output-format=json".to_string(),
    ]
}

/// Reads fio's JSON report (the first job's read or write section; p99 from `lat_ns`).
pub fn parse_report(text: &str, is_read: bool) -> Result<Figures, String> {
    let figures = fio::parse_report(text, Direction::of_read(is_read), LatencySource::Total)
        .map_err(|error| error.to_string())?;
    Ok(Figures {
        mb_per_s: figures.bytes_per_second / 1e6,
        iops: figures.iops,
        latency_us_mean: figures.latency_us_mean,
        latency_us_p99: figures.latency_us_p99,
        requests: figures.requests,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_are_read_and_bad_ones_explained() {
        let report = r#"fio: some warning
{"jobs":[{"read":{"bw_bytes":2000000,"iops":500.0,"total_ios":1500,
  "lat_ns":{"mean":2000.0,"percentile":{"99.000000":8000}}},"write":{}}]}"#;
        let figures = parse_report(report, true).unwrap();
        assert_eq!(figures.mb_per_s, 2.0);
        assert_eq!(figures.iops, 500.0);
        assert_eq!(figures.latency_us_mean, 2.0);
        assert_eq!(figures.latency_us_p99, 8.0);
        assert_eq!(figures.requests, 1500);
        let error = parse_report(report, false).unwrap_err();
        assert!(error.contains("lacks /jobs/0/write/total_ios"), "{error}");
        assert!(parse_report("no json", true)
            .unwrap_err()
            .contains("no JSON"));
        assert!(parse_report("{broken", true)
            .unwrap_err()
            .contains("does not parse"));
    }
}
