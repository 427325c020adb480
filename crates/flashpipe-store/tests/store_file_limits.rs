//! Property tests of the store file's parser and of human sizes against their documented
//! limits (docs/store-file.md, "Limits"): arbitrary store files and size texts never panic,
//! and every store file accepted lies within the limits.

use std::path::Path;

use flashpipe_store::store_config::{
    DeviceSpec, StoreConfig, MAX_DEVICES, MAX_FILE_DEVICE_SIZE_BYTES, MAX_QUEUE_DEPTH,
    MAX_RAM_DEVICE_SIZE_BYTES, MAX_STORE_SIZE_BYTES,
};
use flashpipe_store::units::parse_size_bytes;
use proptest::prelude::*;

/// A TOML value of any kind a store field could be given.
fn toml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|value| value.to_string()),
        (0i64..10).prop_map(|shift| (4096i64 << (shift * 2)).to_string()),
        any::<f64>().prop_map(|value| format!("{value:?}")),
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("[]".to_string()),
        "\"[a-z.]{0,8}\"",
        Just("\"minflash\"".to_string()),
    ]
}

fn device_table() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec!["file", "ram", "flash", "tape"]),
        prop::collection::vec(
            (
                prop::sample::select(vec![
                    "path",
                    "size_bytes",
                    "preset",
                    "blocks_per_plane",
                    "over_provisioning",
                    "checkpoint_interval_pages",
                    "seed",
                ]),
                toml_value(),
            ),
            0..4,
        ),
    )
        .prop_map(|(kind, fields)| {
            let mut text = format!("[[devices]]\nkind = \"{kind}\"\n");
            let mut seen = Vec::new();
            for (field, value) in fields {
                if !seen.contains(&field) {
                    seen.push(field);
                    text.push_str(&format!("{field} = {value}\n"));
                }
            }
            text
        })
}

fn store_text() -> impl Strategy<Value = String> {
    (
        toml_value(),
        toml_value(),
        toml_value(),
        toml_value(),
        prop::collection::vec(device_table(), 0..3),
    )
        .prop_map(|(version, block, stripe, depth, devices)| {
            format!(
                "store_file_version = {version}\nblock_size_bytes = {block}\nstripe_unit_bytes = {stripe}\nqueue_depth = {depth}\n{}",
                devices.concat()
            )
        })
}

fn assert_within_limits(config: &StoreConfig) {
    assert!((1..=MAX_QUEUE_DEPTH).contains(&config.queue_depth));
    assert!((1..=MAX_DEVICES).contains(&config.devices.len()));
    let mut total_bytes = 0u64;
    for device in &config.devices {
        match device {
            DeviceSpec::File { size_bytes, .. } => {
                assert!(*size_bytes <= MAX_FILE_DEVICE_SIZE_BYTES)
            }
            DeviceSpec::Ram { size_bytes } => assert!(*size_bytes <= MAX_RAM_DEVICE_SIZE_BYTES),
            DeviceSpec::Nbd { size_bytes, .. } => {
                assert!(*size_bytes <= MAX_FILE_DEVICE_SIZE_BYTES)
            }
            DeviceSpec::Flash(flash) => {
                assert!((0.0..0.95).contains(&flash.over_provisioning))
            }
            DeviceSpec::Cluster(cluster) => {
                assert!((0.0..0.95).contains(&cluster.over_provisioning))
            }
        }
        total_bytes += device.size_bytes().unwrap_or(0);
    }
    assert!(total_bytes <= MAX_STORE_SIZE_BYTES);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn store_files_never_panic_and_stay_within_limits(text in store_text()) {
        if let Ok(config) = StoreConfig::parse(&text, Path::new("fuzz.toml")) {
            assert_within_limits(&config);
        }
    }

    #[test]
    fn arbitrary_store_text_never_panics(text in "\\PC{0,300}") {
        if let Ok(config) = StoreConfig::parse(&text, Path::new("fuzz.toml")) {
            assert_within_limits(&config);
        }
    }

    #[test]
    fn sizes_never_panic(text in "[0-9. ]{0,24}[kKmMgGtTpPiIbB]{0,3}") {
        let _ = parse_size_bytes(&text);
    }

    #[test]
    fn integer_sizes_are_exact(count in any::<u64>(), unit in prop::sample::select(vec![("", 1u64), ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30)])) {
        let parsed = parse_size_bytes(&format!("{count}{}", unit.0));
        prop_assert_eq!(parsed.ok(), count.checked_mul(unit.1));
    }
}

/// Above 2^53 an integer size used to be rounded through `f64`; it is now exact.
#[test]
fn large_integer_sizes_are_not_rounded() {
    assert_eq!(
        parse_size_bytes("9007199254740993"),
        Ok(9_007_199_254_740_993)
    );
    assert!(parse_size_bytes("18446744073709551616").is_err());
    assert!(parse_size_bytes("17179869184GiB").is_err());
}
