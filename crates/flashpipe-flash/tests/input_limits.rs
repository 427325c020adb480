//! Property tests of the flash model's parsers against their documented limits
//! (docs/flash-model.md, "Limits"): blkparse and DiskSim trace lines, preset TOML and
//! synthetic job options never panic on arbitrary input, and whatever they accept lies within
//! the limits. Crashes found by the cargo-fuzz targets (`fuzz/`) are kept here as regression
//! cases.

use flashpipe_flash::config::{
    FlashConfig, MAX_BLOCKS_PER_PLANE, MAX_CHANNELS, MAX_CONTROLLER_QUEUE_DEPTH, MAX_DEVICES,
    MAX_DIES, MAX_OPERATION_NS, MAX_PAGES_PER_BLOCK, MAX_PAGE_DATA_BYTES, MAX_PLANES,
    MAX_TOTAL_BLOCKS, MAX_WAYS,
};
use flashpipe_flash::workload::{
    check_trace_request, parse_blkparse, parse_disksim, parse_trace, AccessKind, AccessPattern,
    SyntheticJob, TraceFormat, TraceOptions, TraceTimeUnit, MAX_JOB_PAGE_OPERATIONS,
    MAX_REQUEST_BYTES,
};
use proptest::prelude::*;

const MINFLASH: &str = include_str!("../presets/minflash.toml");

/// Numbers as traces write them, and the hostile ones.
fn number_token() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|value| value.to_string()),
        any::<i64>().prop_map(|value| value.to_string()),
        any::<f64>().prop_map(|value| value.to_string()),
        (0u64..1_000_000).prop_map(|value| value.to_string()),
        Just("inf".to_string()),
        Just("-inf".to_string()),
        Just("NaN".to_string()),
        Just("1e300".to_string()),
        Just("18446744073709551616".to_string()),
        "[0-9a-z.+-]{0,24}",
    ]
}

fn blkparse_line() -> impl Strategy<Value = String> {
    (
        number_token(),
        prop::sample::select(vec!["Q", "C", "D"]),
        prop::sample::select(vec!["R", "W", "RS", "WS", "N"]),
        number_token(),
        prop::sample::select(vec!["+", "-"]),
        number_token(),
    )
        .prop_map(|(time, action, rwbs, sector, plus, count)| {
            format!(
                "  8,0    1        1 {time}  4242  {action}   {rwbs} {sector} {plus} {count} [fio]"
            )
        })
}

fn disksim_line() -> impl Strategy<Value = String> {
    prop::collection::vec(number_token(), 0..7).prop_map(|fields| fields.join(" "))
}

fn assert_within_limits(requests: &[flashpipe_flash::workload::TraceRequest]) {
    for request in requests {
        assert!(check_trace_request(request).is_ok(), "accepted {request:?}");
        assert!(request.length_bytes <= MAX_REQUEST_BYTES);
    }
}

/// A parse that failed, or whose requests lie within the limits.
fn assert_refused_or_within_limits<E>(
    parsed: Result<Vec<flashpipe_flash::workload::TraceRequest>, E>,
) {
    if let Ok(requests) = parsed {
        assert_within_limits(&requests);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn blkparse_lines_never_panic_and_stay_within_limits(
        lines in prop::collection::vec(blkparse_line(), 1..6)
    ) {
        assert_refused_or_within_limits(parse_blkparse(&lines.join("\n"), "fuzz"));
    }

    #[test]
    fn disksim_lines_never_panic_and_stay_within_limits(
        lines in prop::collection::vec(disksim_line(), 1..6)
    ) {
        assert_refused_or_within_limits(parse_disksim(&lines.join("\n"), "fuzz"));
    }

    #[test]
    fn arbitrary_text_never_panics_either_parser(text in "\\PC{0,200}") {
        assert_refused_or_within_limits(parse_blkparse(&text, "fuzz"));
        assert_refused_or_within_limits(parse_disksim(&text, "fuzz"));
    }

    #[test]
    fn every_format_and_option_never_panics_and_stays_within_limits(
        lines in prop::collection::vec(disksim_line(), 1..6),
        format in prop::sample::select(vec![
            TraceFormat::Blkparse,
            TraceFormat::Disksim,
            TraceFormat::AsciiNanoseconds,
        ]),
        time_unit in prop::sample::select(vec![
            TraceTimeUnit::Milliseconds,
            TraceTimeUnit::Microseconds,
            TraceTimeUnit::Nanoseconds,
        ]),
        sort in any::<bool>(),
        allow_implausible in any::<bool>(),
    ) {
        let options = TraceOptions { time_unit, sort, allow_implausible };
        if let Ok(trace) = parse_trace(&lines.join("\n"), "fuzz", format, &options) {
            assert_within_limits(&trace.requests);
            assert_eq!(trace.lines.len(), trace.requests.len());
            assert!(trace
                .requests
                .windows(2)
                .all(|pair| pair[0].arrival_ns <= pair[1].arrival_ns));
        }
    }
}

/// Every `key = value` line of the minflash preset.
fn preset_keys() -> Vec<String> {
    MINFLASH
        .lines()
        .filter_map(|line| line.split_once('=').map(|(key, _)| key.trim().to_string()))
        .filter(|key| !key.starts_with('#'))
        .collect()
}

/// A TOML value of any kind a preset field could be given.
fn toml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|value| value.to_string()),
        (0i64..100_000).prop_map(|value| value.to_string()),
        any::<f64>().prop_map(|value| format!("{value:?}")),
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("-inf".to_string()),
        Just("[]".to_string()),
        prop::collection::vec(any::<i64>(), 0..12).prop_map(|values| format!("{values:?}")),
        "\"[a-z]{0,8}\"",
        Just("true".to_string()),
    ]
}

fn assert_config_within_limits(config: &FlashConfig) {
    let geometry = &config.geometry;
    assert!((1..=MAX_DEVICES).contains(&geometry.devices));
    assert!((1..=MAX_CHANNELS).contains(&geometry.channels));
    assert!((1..=MAX_WAYS).contains(&geometry.ways));
    assert!((1..=MAX_DIES).contains(&geometry.dies));
    assert!((1..=MAX_PLANES).contains(&geometry.planes));
    assert!((1..=MAX_BLOCKS_PER_PLANE).contains(&geometry.blocks_per_plane));
    assert!((1..=MAX_PAGES_PER_BLOCK).contains(&geometry.pages_per_block));
    assert!(geometry.page_data_bytes <= MAX_PAGE_DATA_BYTES);
    assert!(config.total_blocks() <= MAX_TOTAL_BLOCKS);
    assert!((1..=MAX_CONTROLLER_QUEUE_DEPTH).contains(&config.timing.controller_queue_depth));
    assert!(config.timing.erase_ns <= MAX_OPERATION_NS);
    assert!(config.timing.program_ns_max <= MAX_OPERATION_NS);
    assert!(config.timing.hop_ns <= MAX_OPERATION_NS);
    let _ = config.host_spare_bytes();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn presets_with_one_field_changed_never_panic(
        key_index in any::<prop::sample::Index>(),
        value in toml_value()
    ) {
        let keys = preset_keys();
        let key = &keys[key_index.index(keys.len())];
        let text: String = MINFLASH
            .lines()
            .map(|line| {
                if line.split_once('=').is_some_and(|(field, _)| field.trim() == key) {
                    format!("{key} = {value}\n")
                } else {
                    format!("{line}\n")
                }
            })
            .collect();
        match FlashConfig::from_toml(&text, "fuzz.toml") {
            Ok(config) => assert_config_within_limits(&config),
            Err(error) => prop_assert!(error.to_string().starts_with("fuzz.toml:") || error.to_string().contains("fuzz")),
        }
    }

    #[test]
    fn preset_arbitrary_text_never_panics(text in "\\PC{0,300}") {
        if let Ok(config) = FlashConfig::from_toml(&text, "fuzz.toml") {
            assert_config_within_limits(&config);
        }
    }

    #[test]
    fn accepted_jobs_stay_within_limits(
        request_bytes in any::<u64>(),
        queue_depth in any::<u32>(),
        hosts in any::<u32>(),
        requests_per_host in any::<u64>(),
        devices in any::<u32>(),
    ) {
        let config = FlashConfig::preset("minflash").unwrap();
        let job = SyntheticJob {
            pattern: AccessPattern::Random,
            kind: AccessKind::Read,
            request_bytes,
            queue_depth,
            hosts,
            requests_per_host,
            devices,
            seed: 1,
        };
        if job.check(&config).is_ok() {
            let pages = request_bytes.div_ceil(u64::from(config.geometry.page_data_bytes));
            prop_assert!(request_bytes <= MAX_REQUEST_BYTES);
            prop_assert!(pages < 1 << 20);
            prop_assert!(u128::from(hosts) * u128::from(requests_per_host) * u128::from(pages)
                <= u128::from(MAX_JOB_PAGE_OPERATIONS));
        }
    }
}

/// The error of the minflash preset (as `p.toml`) with `from` replaced by `to`.
fn edited_preset_error(from: &str, to: &str) -> String {
    let edited = MINFLASH.replace(from, to);
    FlashConfig::from_toml(&edited, "p.toml")
        .unwrap_err()
        .to_string()
}

/// The reproductions of issue #10, kept as regression cases.
#[test]
fn the_issue_reproductions_are_refused_with_field_line_and_limit() {
    let disksim = parse_disksim("0.0 0 0 2147483648 0\n", "t").unwrap_err();
    assert_eq!(disksim.line, 1);
    assert!(disksim.message.contains("size") && disksim.message.contains("limit"));
    for time in ["1e300", "inf", "-1", "NaN"] {
        let line = format!("8,0 1 1 {time} 1 Q R 0 + 8 [x]\n");
        let error = parse_blkparse(&line, "t").unwrap_err();
        assert!(error.message.contains("time"), "{error}");
    }
    let wrap = parse_blkparse("8,0 1 1 0.1 1 Q R 36028797018963968 + 8 [x]\n", "t").unwrap_err();
    assert!(wrap.message.contains("sector") && wrap.message.contains("limit"));
    let error = edited_preset_error("erase_ns = 3000000 ", "erase_ns = 9223372036854775807 ");
    assert!(
        error.contains("erase_ns") && error.contains("limit"),
        "{error}"
    );
    let error = edited_preset_error("channels = 8 ", "channels = 4000000000 ");
    assert!(
        error.contains("p.toml:6") && error.contains("channels"),
        "{error}"
    );
}

/// A job option of 2^40 request bytes is refused before any request is built.
#[test]
fn a_terabyte_request_is_refused_by_the_job_check() {
    let config = FlashConfig::preset("minflash").unwrap();
    let job = SyntheticJob {
        pattern: AccessPattern::Random,
        kind: AccessKind::Read,
        request_bytes: 1 << 40,
        queue_depth: 1,
        hosts: 1,
        requests_per_host: 1,
        devices: 1,
        seed: 1,
    };
    let error = job.check(&config).unwrap_err();
    assert_eq!(error.field, "request_bytes");
}
