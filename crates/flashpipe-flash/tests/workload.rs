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

#[test]
fn the_replay_striping_steps_over_bad_blocks_and_keeps_every_way_equally_long() {
    let mut config = FlashConfig::preset("minflash").unwrap();
    config.geometry.blocks_per_plane = 256;
    let array = timing_array(config);
    let every_block = Striping::new(&array, 1);
    let striping = Striping::skipping_bad_blocks(&array, 1);
    let skipped = striping.bad_blocks_skipped();
    assert!(skipped > 0, "minflash ships about 0.2% bad blocks");
    assert_eq!(every_block.bad_blocks_skipped(), 0);
    assert!(striping.page_count() < every_block.page_count());
    let pages_per_block = 256;
    let ways = 64;
    let mut bad_seen = 0;
    for stripe in 0..striping.page_count() / (pages_per_block * ways) {
        for way in 0..ways {
            let logical = stripe * pages_per_block * ways + way;
            let address = striping.address(logical);
            assert!(
                !array.is_factory_bad(address),
                "page {logical} maps to a bad block"
            );
            let plain = every_block.address(logical);
            bad_seen += u64::from(array.is_factory_bad(plain));
        }
    }
    assert!(bad_seen > 0 && bad_seen <= skipped);
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
        let job = SyntheticJob::sequential_one_at_a_time(kind, 512 * 512, 4, 1);
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

fn parse(
    text: &str,
    format: workload::TraceFormat,
    options: workload::TraceOptions,
) -> Result<workload::ParsedTrace, workload::TraceError> {
    workload::parse_trace(text, "t.txt", format, &options)
}

fn check_parse_error(
    result: Result<workload::ParsedTrace, workload::TraceError>,
    line: usize,
    words: &str,
) {
    check_trace_error(result.map(|trace| trace.requests), line, words);
}

/// `text` parsed as `format` with the default options.
fn parse_with_defaults(text: &str, format: workload::TraceFormat) -> workload::ParsedTrace {
    parse(text, format, workload::TraceOptions::default()).unwrap()
}

/// [`check_parse_error`] of `text` parsed as `format` with the default options.
fn check_default_parse_error(text: &str, format: workload::TraceFormat, line: usize, words: &str) {
    check_parse_error(
        parse(text, format, workload::TraceOptions::default()),
        line,
        words,
    );
}

#[test]
fn comment_lines_are_skipped_and_counted_in_every_format() {
    use workload::TraceFormat::*;
    for (format, text) in [
        (
            Disksim,
            "# arrival device block size flags\n0.5 0 100 8 1\n  # indented\n1.5 0 108 8 0\n",
        ),
        (
            AsciiNanoseconds,
            "# MQSim\n500000 0 100 8 1\n1500000 0 108 8 0\n",
        ),
        (
            Blkparse,
            "# blkparse -i sda\n  8,0 0 1 0.1 5 Q R 100 + 8 [x]\n  8,0 0 2 0.2 5 Q W 108 + 8 [x]\n",
        ),
    ] {
        let trace = parse(text, format, workload::TraceOptions::default()).unwrap();
        assert_eq!(trace.requests.len(), 2, "{format:?}");
        assert!(trace.comment_lines >= 1, "{format:?}");
        assert_eq!(trace.requests[0].offset_bytes, 100 * 512);
        assert_eq!(trace.requests[1].kind, AccessKind::Write);
    }
}

#[test]
fn disksim_time_units_scale_arrivals() {
    use workload::TraceTimeUnit::*;
    for (unit, expected_ns) in [
        (Milliseconds, 2_000_000),
        (Microseconds, 2_000),
        (Nanoseconds, 2),
    ] {
        let options = workload::TraceOptions {
            time_unit: unit,
            allow_implausible: true,
            ..workload::TraceOptions::default()
        };
        let trace = parse(
            "0 0 0 8 1\n2 0 8 8 1\n",
            workload::TraceFormat::Disksim,
            options,
        )
        .unwrap();
        assert_eq!(trace.requests[1].arrival_ns, expected_ns, "{unit:?}");
    }
}

#[test]
fn arrivals_going_backwards_are_refused_with_their_line_or_sorted() {
    let text = "1.0 0 0 8 1\n3.0 0 8 8 1\n2.0 0 16 8 0\n4.0 0 24 8 1\n";
    check_default_parse_error(
        text,
        workload::TraceFormat::Disksim,
        3,
        "goes backwards (line 2 arrived at 3000000 ns)",
    );
    let sorted = workload::TraceOptions {
        sort: true,
        ..workload::TraceOptions::default()
    };
    let trace = parse(text, workload::TraceFormat::Disksim, sorted).unwrap();
    assert_eq!(trace.out_of_order_requests, 1);
    let arrivals: Vec<u64> = trace
        .requests
        .iter()
        .map(|request| request.arrival_ns)
        .collect();
    assert_eq!(arrivals, vec![1_000_000, 2_000_000, 3_000_000, 4_000_000]);
    assert_eq!(trace.lines, vec![1, 3, 2, 4]);
}

#[test]
fn implausible_time_spans_are_refused_unless_allowed() {
    // Nanosecond times read as milliseconds: 2,000,000 ms apart is 33 minutes a request.
    let nanoseconds_as_milliseconds: String = (0..100)
        .map(|index| format!("{} 0 {} 8 1\n", index * 2_000_000, index * 8))
        .collect();
    check_default_parse_error(
        &nanoseconds_as_milliseconds,
        workload::TraceFormat::Disksim,
        100,
        "above the plausible 86400 s",
    );
    // Millisecond times read as nanoseconds: 1 ns apart.
    check_default_parse_error(
        "0 0 0 8 1\n1 0 8 8 1\n2 0 16 8 1\n",
        workload::TraceFormat::AsciiNanoseconds,
        3,
        "below the plausible 10 ns",
    );
    let allowed = workload::TraceOptions {
        allow_implausible: true,
        ..workload::TraceOptions::default()
    };
    assert!(parse(
        &nanoseconds_as_milliseconds,
        workload::TraceFormat::Disksim,
        allowed
    )
    .is_ok());
}

#[test]
fn ascii_nanosecond_lines_are_checked_field_by_field() {
    let trace = parse_with_defaults(
        "4851300 1 524288 16 0\n4864300 1 524304 16 1\n",
        workload::TraceFormat::AsciiNanoseconds,
    );
    assert_eq!(
        trace.requests[0],
        TraceRequest {
            arrival_ns: 4_851_300,
            kind: AccessKind::Write,
            offset_bytes: 524_288 * 512,
            length_bytes: 16 * 512,
        }
    );
    assert_eq!(trace.requests[1].kind, AccessKind::Read);
    for (text, line, words) in [
        (
            "0 0 0 8 1\n10 0 8 8 2\n",
            2,
            "field `type` \"2\": must be 0 (write) or 1 (read)",
        ),
        ("0 0 0 8 1\n1.5 0 8 8 1\n", 2, "field `time_ns` \"1.5\""),
        (
            "0 0 0 8\n",
            1,
            "expected 5 fields (time_ns device lba size_sectors type)",
        ),
        (
            "0 0 0 1048576 1\n",
            1,
            "field `size_sectors` 1048576: above the limit",
        ),
    ] {
        check_default_parse_error(text, workload::TraceFormat::AsciiNanoseconds, line, words);
    }
}

#[test]
fn blkparse_discards_become_trims() {
    let trace = parse_with_defaults(
        "  8,0 0 1 0.1 5 Q D 100 + 8 [fstrim]\n  8,0 0 2 0.2 5 Q WS 108 + 8 [x]\n",
        workload::TraceFormat::Blkparse,
    );
    assert_eq!(trace.requests[0].kind, AccessKind::Trim);
    assert_eq!(trace.requests[0].arrival_ns, 0);
    assert_eq!(trace.requests[1].arrival_ns, 100_000_000);
}
