//! Tests of the workloads: trace parsers (good lines, malformed lines with their line
//! numbers), the striping, and synthetic jobs against closed-form bandwidths.

use flashpipe_flash::workload::{
    self, AccessKind, AccessPattern, Striping, SyntheticJob, TraceRequest,
};
use flashpipe_flash::{FlashArray, FlashConfig, FlashOptions, StorageMode};

fn timing_array(config: FlashConfig) -> FlashArray {
    FlashArray::new(
        config,
        FlashOptions {
            seed: 1,
            storage: StorageMode::TimingOnly,
            host_count: 2,
            host_queue_depth: 256,
        },
    )
    .unwrap()
}

const BLKPARSE: &str = "\
  8,0    3        1     0.000000000   697  Q   R 2048 + 8 [dd]
  8,0    3        2     0.000001000   697  G   R 2048 + 8 [dd]
  8,0    3        3     0.000500000   697  Q  WS 4096 + 16 [jbd2]
  8,0    3        4     0.000600000   697  C   R 2048 + 8 [0]

CPU3 (8,0):
 Reads Queued:           1,        4KiB\t Writes Queued:           1,        8KiB
Total (8,0):
";

#[test]
fn blkparse_queue_events_become_requests() {
    let requests = workload::parse_blkparse(BLKPARSE, "trace.txt").unwrap();
    assert_eq!(
        requests,
        vec![
            TraceRequest {
                arrival_ns: 0,
                kind: AccessKind::Read,
                offset_bytes: 2048 * 512,
                length_bytes: 8 * 512,
            },
            TraceRequest {
                arrival_ns: 500_000,
                kind: AccessKind::Write,
                offset_bytes: 4096 * 512,
                length_bytes: 16 * 512,
            },
        ]
    );
}

fn check_trace_error(
    result: Result<Vec<TraceRequest>, workload::TraceError>,
    line: usize,
    words: &str,
) {
    let error = result.unwrap_err();
    assert_eq!(error.line, line, "{error}");
    assert!(error.to_string().contains(words), "{error}");
    assert!(
        error.to_string().starts_with(&format!("t.txt:{line}:")),
        "{error}"
    );
}

#[test]
fn malformed_blkparse_lines_name_their_line() {
    let good = "  8,0 0 1 0.1 5 Q R 8 + 8 [x]\n";
    for (text, line, words) in [
        (format!("{good}garbage here\n"), 2, "not a blkparse event"),
        (
            format!("{good}{good}  8,0 0 1 zero 5 Q R 8 + 8 [x]\n"),
            3,
            "field `time` \"zero\": not a number",
        ),
        (
            "  8,0 0 1 0.1 5 Q R 8 8 [x]\n".to_string(),
            1,
            "sector + count",
        ),
        (
            format!("{good}  8,0 0 1 0.2 5 Q W x + 8 [x]\n"),
            2,
            "field `sector` \"x\"",
        ),
        ("  8,0 0 1 0.2 5 Q\n".to_string(), 1, "at least 7 fields"),
    ] {
        check_trace_error(workload::parse_blkparse(&text, "t.txt"), line, words);
    }
}

#[test]
fn disksim_traces_parse_and_malformed_lines_name_their_line() {
    let requests = workload::parse_disksim("0.5 0 100 8 1\n\n2.0 0 200 16 0\n", "t.txt").unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].arrival_ns, 500_000);
    assert_eq!(requests[0].kind, AccessKind::Read);
    assert_eq!(requests[1].kind, AccessKind::Write);
    assert_eq!(requests[1].length_bytes, 16 * 512);
    for (text, line, words) in [
        ("0.5 0 100 8 1\n0.6 0 100 8\n", 2, "expected 5 fields"),
        (
            "x 0 100 8 1\n",
            1,
            "field `arrival time` \"x\": not a number",
        ),
        ("0.5 0 100 8 1\n1 0 -5 8 1\n", 2, "field `block` \"-5\""),
        ("-1 0 100 8 1\n", 1, "not a finite non-negative number"),
    ] {
        check_trace_error(workload::parse_disksim(text, "t.txt"), line, words);
    }
}

#[test]
fn striping_spreads_consecutive_pages_over_channels_then_ways() {
    let array = timing_array(FlashConfig::preset("minflash").unwrap());
    let striping = Striping::new(&array, 1);
    let first = striping.address(0);
    let second = striping.address(1);
    let ninth = striping.address(8);
    let next_page = striping.address(64);
    assert_eq!((first.bus, first.chip, first.page), (0, 0, 0));
    assert_eq!((second.bus, second.chip), (1, 0));
    assert_eq!((ninth.bus, ninth.chip), (0, 1));
    assert_eq!((next_page.bus, next_page.chip, next_page.page), (0, 0, 1));
}

/// RAD 1x1 with zero controller delays: one page takes tR + transfer to read and
/// transfer + tPROG to write, so 512-sector requests run at page / period.
#[test]
fn one_package_bandwidth_matches_the_closed_form() {
    let mut config = FlashConfig::preset("rad").unwrap();
    config.reliability.grown_bad_probability_at_rated = 0.0;
    for (kind, period_ns) in [
        (AccessKind::Read, 125_000.0),
        (AccessKind::Write, 300_000.0),
    ] {
        let mut array = timing_array(config.clone());
        let job = SyntheticJob {
            pattern: AccessPattern::Sequential,
            kind,
            request_bytes: 512 * 512,
            queue_depth: 1,
            hosts: 1,
            requests_per_host: 4,
            devices: 1,
            seed: 1,
        };
        let report = workload::run_job(&mut array, &job);
        assert_eq!(report.page_operations, 4 * 64);
        assert_eq!(report.failed_page_operations, 0);
        let expected = 4096.0 / (period_ns / 1e9) / 1e6;
        let relative = (report.megabytes_per_second - expected).abs() / expected;
        assert!(
            relative < 0.01,
            "{kind:?}: {} vs {expected}",
            report.megabytes_per_second
        );
    }
}

#[test]
fn hosts_sharing_a_device_get_fair_shares() {
    let mut config = FlashConfig::preset("minflash").unwrap();
    config.timing.controller_queue_depth = 16;
    let mut array = timing_array(config);
    let job = SyntheticJob {
        pattern: AccessPattern::Random,
        kind: AccessKind::Read,
        request_bytes: 8192,
        queue_depth: 64,
        hosts: 2,
        requests_per_host: 2000,
        devices: 1,
        seed: 3,
    };
    let report = workload::run_job(&mut array, &job);
    assert_eq!(report.requests, 4000);
    assert!(report.array.host_link_utilization.len() == 2);
    let links = &report.array.host_link_utilization;
    assert!(
        (links[0] - links[1]).abs() < 0.1 * links[0].max(links[1]),
        "{links:?}"
    );
}

#[test]
fn trace_replay_runs_in_open_loop() {
    let mut array = timing_array(FlashConfig::preset("minflash").unwrap());
    let requests = workload::parse_disksim("0 0 0 16 1\n10 0 16 16 1\n", "t").unwrap();
    let report = workload::replay(&mut array, requests, 8);
    assert_eq!(report.requests, 2);
    assert!(
        report.elapsed_ns >= 10_000_000,
        "the second request arrives at 10 ms"
    );
}
