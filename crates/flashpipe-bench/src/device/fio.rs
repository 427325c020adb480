//! Running fio as the reference: finding (or installing) it, running one workload on
//! the same file with `ioengine=io_uring`, and reading its JSON report.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use super::measure::{Figures, Workload};

/// fio, found and working.
#[derive(Debug, Clone)]
pub struct Fio {
    /// `fio --version`.
    pub version: String,
}

/// Finds fio on the path; if missing, tries `apt-get install -y fio` (after
/// `apt-get update` when the first try fails). Returns why not when it cannot.
pub fn find_or_install() -> Result<Fio, String> {
    if let Some(fio) = find() {
        return Ok(fio);
    }
    crate::progress::note("flashpipe: fio not found on PATH; trying apt-get install -y fio");
    let installed = apt_get(&["install", "-y", "fio"])
        || (apt_get(&["update"]) && apt_get(&["install", "-y", "fio"]));
    match (installed, find()) {
        (_, Some(fio)) => Ok(fio),
        (false, None) => Err("fio is not on PATH and apt-get could not install it".to_string()),
        (true, None) => Err("apt-get installed fio but it does not run".to_string()),
    }
}

fn find() -> Option<Fio> {
    let output = Command::new("fio").arg("--version").output().ok()?;
    output.status.success().then(|| Fio {
        version: String::from_utf8_lossy(&output.stdout).trim().to_string(),
    })
}

fn apt_get(arguments: &[&str]) -> bool {
    Command::new("apt-get")
        .args(arguments)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
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
    let output = Command::new("fio")
        .args(arguments)
        .output()
        .map_err(|error| format!("cannot start fio: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "fio {} failed: {}",
            arguments.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
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

/// Reads fio's JSON report (the first job's read or write section).
pub fn parse_report(text: &str, is_read: bool) -> Result<Figures, String> {
    let start = text
        .find('{')
        .ok_or_else(|| "fio printed no JSON report".to_string())?;
    let report: Value = serde_json::from_str(&text[start..])
        .map_err(|error| format!("fio's JSON report does not parse: {error}"))?;
    let section = &report["jobs"][0][if is_read { "read" } else { "write" }];
    let number = |pointer: &str| {
        section
            .pointer(pointer)
            .and_then(Value::as_f64)
            .ok_or_else(|| format!("fio's JSON report lacks {pointer}"))
    };
    Ok(Figures {
        mb_per_s: number("/bw_bytes")? / 1e6,
        iops: number("/iops")?,
        latency_us_mean: number("/lat_ns/mean")? / 1e3,
        latency_us_p99: number("/lat_ns/percentile/99.000000")? / 1e3,
        requests: number("/total_ios")? as u64,
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
        assert!(error.contains("lacks /bw_bytes"), "{error}");
        assert!(parse_report("no json", true)
            .unwrap_err()
            .contains("no JSON"));
        assert!(parse_report("{broken", true)
            .unwrap_err()
            .contains("does not parse"));
    }
}
