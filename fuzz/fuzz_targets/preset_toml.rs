//! Fuzzes the flash preset parser: no panic, and every preset accepted within the limits
//! (its tables are small enough to allocate).
#![no_main]

use flashpipe_flash::config::{FlashConfig, MAX_TOTAL_BLOCKS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(config) = FlashConfig::from_toml(text, "fuzz.toml") {
        assert!(config.total_blocks() <= MAX_TOTAL_BLOCKS);
        let _ = config.host_spare_bytes();
        let _ = config.to_toml();
    }
});
