//! The one fio driver and the one parser of fio's JSON report.
//!
//! [`find`] looks fio up on `PATH` and never installs it: a missing fio is
//! [`FioError::NotInstalled`], whose message names `scripts/install-test-packages` (the
//! one place packages are installed). [`run`] runs it with the caller's arguments and
//! hands back its standard output. [`parse_report`] reads the first job's read or write
//! section: every field it reports must be present (a missing one is
//! [`FioError::MissingField`], never a silent 0), and where the 99th percentile comes
//! from is the caller's explicit [`LatencySource`]: `lat_ns` (submission to completion,
//! what `bench device` and `bench fs` compare with the device layer's own latency) or
//! `clat_ns` (completion latency, what `bench net` reports).

use std::process::Command;

use serde_json::Value;

/// Why fio could not be found, run or read.
#[derive(Debug, thiserror::Error)]
pub enum FioError {
    /// fio is not on `PATH` (or does not run).
    #[error("fio is not on PATH or does not run; install it with scripts/install-test-packages (or your package manager)")]
    NotInstalled,
    /// fio could not be started.
    #[error("cannot start fio: {detail}")]
    CannotStart {
        /// The operating system's words.
        detail: String,
    },
    /// fio ran and failed.
    #[error("fio {arguments} failed: {stderr}")]
    Failed {
        /// The command line given.
        arguments: String,
        /// fio's standard error, trimmed.
        stderr: String,
    },
    /// No JSON object in fio's output.
    #[error("fio printed no JSON report")]
    NoReport,
    /// The JSON does not parse.
    #[error("fio's JSON report does not parse: {detail}")]
    Unparsable {
        /// The parser's words.
        detail: String,
    },
    /// A field the figures need is missing or not a number.
    #[error("fio's JSON report lacks {field}; run a fio that reports it (fio 3.x with --output-format=json)")]
    MissingField {
        /// The JSON pointer inside the job's section, such as `/clat_ns/percentile/99.000000`.
        field: String,
    },
}

/// Which side of the first job a figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The `read` section.
    Read,
    /// The `write` section.
    Write,
}

impl Direction {
    /// `Read` when `is_read`, `Write` otherwise.
    pub fn of_read(is_read: bool) -> Direction {
        if is_read {
            Direction::Read
        } else {
            Direction::Write
        }
    }

    fn section(self) -> &'static str {
        match self {
            Direction::Read => "read",
            Direction::Write => "write",
        }
    }
}

/// Which of fio's latencies the 99th percentile is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatencySource {
    /// `lat_ns`: submission to completion (needs `--lat_percentiles=1`).
    Total,
    /// `clat_ns`: completion latency (fio's default percentiles).
    Completion,
}

impl LatencySource {
    fn p99_pointer(self) -> &'static str {
        match self {
            LatencySource::Total => "/lat_ns/percentile/99.000000",
            LatencySource::Completion => "/clat_ns/percentile/99.000000",
        }
    }
}

/// What one job's side measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FioFigures {
    /// Bytes per second (`bw_bytes`).
    pub bytes_per_second: f64,
    /// Requests per second (`iops`).
    pub iops: f64,
    /// Mean latency, submission to completion (`lat_ns/mean`), in microseconds.
    pub latency_us_mean: f64,
    /// 99th percentile latency from the chosen [`LatencySource`], in microseconds.
    pub latency_us_p99: f64,
    /// Requests completed (`total_ios`).
    pub requests: u64,
}

/// fio, found and working.
#[derive(Debug, Clone)]
pub struct Fio {
    /// `fio --version`.
    pub version: String,
}

/// Finds fio on `PATH`; never installs it.
pub fn find() -> Result<Fio, FioError> {
    let output = Command::new("fio")
        .arg("--version")
        .output()
        .map_err(|_| FioError::NotInstalled)?;
    if !output.status.success() {
        return Err(FioError::NotInstalled);
    }
    Ok(Fio {
        version: String::from_utf8_lossy(&output.stdout).trim().to_string(),
    })
}

/// Runs fio with `arguments` and returns its standard output (its JSON report).
pub fn run(arguments: &[String]) -> Result<String, FioError> {
    let output = Command::new("fio")
        .args(arguments)
        .output()
        .map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound => FioError::NotInstalled,
            _ => FioError::CannotStart {
                detail: error.to_string(),
            },
        })?;
    if !output.status.success() {
        return Err(FioError::Failed {
            arguments: arguments.join(" "),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Reads the first job's `direction` section of fio's JSON report (text before the first
/// `{`, such as warnings, is skipped), the p99 from `p99_source`.
pub fn parse_report(
    text: &str,
    direction: Direction,
    p99_source: LatencySource,
) -> Result<FioFigures, FioError> {
    let start = text.find('{').ok_or(FioError::NoReport)?;
    let report: Value =
        serde_json::from_str(&text[start..]).map_err(|error| FioError::Unparsable {
            detail: error.to_string(),
        })?;
    let section = &report["jobs"][0][direction.section()];
    let number = |pointer: &str| {
        section
            .pointer(pointer)
            .and_then(Value::as_f64)
            .ok_or_else(|| FioError::MissingField {
                field: format!("/jobs/0/{}{pointer}", direction.section()),
            })
    };
    let requests = number("/total_ios")?;
    Ok(FioFigures {
        bytes_per_second: number("/bw_bytes")?,
        iops: number("/iops")?,
        latency_us_mean: number("/lat_ns/mean")? / 1e3,
        latency_us_p99: number(p99_source.p99_pointer())? / 1e3,
        requests: requests as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = r#"fio: some warning
{"jobs":[{"read":{"bw_bytes":2000000,"iops":500.0,"total_ios":1500,
  "lat_ns":{"mean":2000.0,"percentile":{"99.000000":8000}},
  "clat_ns":{"mean":1500.0,"percentile":{"99.000000":6000}}},"write":{}}]}"#;

    #[test]
    fn a_report_is_read_with_the_chosen_p99() {
        let total = parse_report(REPORT, Direction::Read, LatencySource::Total).unwrap();
        assert_eq!(total.bytes_per_second, 2_000_000.0);
        assert_eq!(total.iops, 500.0);
        assert_eq!(total.latency_us_mean, 2.0);
        assert_eq!(total.latency_us_p99, 8.0);
        assert_eq!(total.requests, 1500);
        let completion = parse_report(REPORT, Direction::Read, LatencySource::Completion).unwrap();
        assert_eq!(completion.latency_us_p99, 6.0);
        assert_eq!(completion.latency_us_mean, 2.0);
    }

    #[test]
    fn a_report_missing_a_field_is_an_error_never_zero() {
        let error = parse_report(REPORT, Direction::Write, LatencySource::Total).unwrap_err();
        assert!(
            matches!(&error, FioError::MissingField { field } if field == "/jobs/0/write/total_ios"),
            "{error}"
        );
        let no_clat = REPORT.replace("\"clat_ns\"", "\"other\"");
        let error = parse_report(&no_clat, Direction::Read, LatencySource::Completion).unwrap_err();
        assert!(
            error.to_string().contains("lacks /jobs/0/read/clat_ns"),
            "{error}"
        );
        let no_bandwidth = REPORT.replace("\"bw_bytes\":2000000,", "");
        let error = parse_report(&no_bandwidth, Direction::Read, LatencySource::Total).unwrap_err();
        assert!(error.to_string().contains("bw_bytes"), "{error}");
        let text_bandwidth = REPORT.replace("2000000", "\"fast\"");
        assert!(parse_report(&text_bandwidth, Direction::Read, LatencySource::Total).is_err());
    }

    #[test]
    fn no_json_or_broken_json_is_explained() {
        let error = parse_report("no json", Direction::Read, LatencySource::Total).unwrap_err();
        assert!(error.to_string().contains("no JSON"), "{error}");
        let error = parse_report("{broken", Direction::Read, LatencySource::Total).unwrap_err();
        assert!(error.to_string().contains("does not parse"), "{error}");
    }

    #[test]
    fn a_missing_fio_names_the_installer() {
        assert!(FioError::NotInstalled
            .to_string()
            .contains("scripts/install-test-packages"));
    }
}
