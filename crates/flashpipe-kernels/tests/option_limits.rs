//! Property tests of kernel options against their documented limits (docs/kernels.md,
//! "Limits"): arbitrary `key=value` arguments for every kernel, sizes and hexadecimal never
//! panic, and the values accepted lie within the limits.

use flashpipe_kernels::options::{decode_hex, KernelOptions, OptionSpec};
use flashpipe_kernels::registry::KERNELS;
use proptest::prelude::*;

/// Values of the kinds kernel options take, and hostile ones.
fn option_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|value| value.to_string()),
        (0u64..5000).prop_map(|value| value.to_string()),
        (
            0u64..100_000,
            prop::sample::select(vec!["K", "M", "G", "k"])
        )
            .prop_map(|(value, unit)| format!("{value}{unit}")),
        "[0-9a-fA-F]{0,40}",
        "\\PC{0,40}",
        Just(String::new()),
        Just("99999999999999999999".to_string()),
        Just("a{1000}{1000}".to_string()),
        Just(".".to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn every_kernel_builds_or_refuses_without_panicking(
        kernel_index in any::<prop::sample::Index>(),
        choices in prop::collection::vec((any::<prop::sample::Index>(), option_value()), 0..4),
        unknown_key in "[a-z_]{1,8}",
    ) {
        let spec = &KERNELS[kernel_index.index(KERNELS.len())];
        let arguments: Vec<String> = choices
            .iter()
            .map(|(key_index, value)| {
                let key = if spec.options.is_empty() {
                    unknown_key.as_str()
                } else {
                    spec.options[key_index.index(spec.options.len())].key
                };
                format!("{key}={value}")
            })
            .collect();
        let _ = spec.build(&arguments);
    }

    #[test]
    fn accepted_integers_lie_within_their_range(
        value in option_value(),
        minimum in 0u64..1000,
        span in 0u64..1_000_000,
    ) {
        const SPECS: &[OptionSpec] = &[OptionSpec::required("n", "a number")];
        if let Ok(options) = KernelOptions::parse("test", SPECS, &[format!("n={value}")]) {
            if let Ok(parsed) = options.integer("n", minimum, minimum + span) {
                prop_assert!((minimum..=minimum + span).contains(&parsed));
            }
        }
    }

    #[test]
    fn sizes_and_hex_never_panic(text in "\\PC{0,30}") {
        let _ = flashpipe_units::parse_size_bytes(&text);
        let _ = decode_hex(&text);
    }
}

/// An option value beyond 4 KiB is refused with the limit before any kernel sees it.
#[test]
fn an_option_value_of_five_kilobytes_is_refused() {
    let arguments = vec![format!("pattern={}", "a".repeat(5000))];
    let error = flashpipe_kernels::registry::build_kernel("grep", &arguments)
        .err()
        .expect("refused")
        .to_string();
    assert!(error.contains("4096"), "{error}");
}

/// An index block of record x block_records beyond 1 GiB is refused instead of allocated.
#[test]
fn a_terabyte_index_block_is_refused() {
    let arguments = vec!["record=1M".to_string(), "block_records=1M".to_string()];
    let error = flashpipe_kernels::registry::build_kernel("search-index", &arguments)
        .err()
        .expect("refused")
        .to_string();
    assert!(error.contains("1073741824"), "{error}");
}
