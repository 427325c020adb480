//! Fuzzes the store-file parser: no panic, and every store file accepted within the limits.
#![no_main]

use std::path::Path;

use flashpipe_store::store_config::{StoreConfig, MAX_DEVICES, MAX_QUEUE_DEPTH};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(config) = StoreConfig::parse(text, Path::new("fuzz.toml")) {
        assert!((1..=MAX_QUEUE_DEPTH).contains(&config.queue_depth));
        assert!((1..=MAX_DEVICES).contains(&config.devices.len()));
        let _ = config.to_toml();
    }
});
