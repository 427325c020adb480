//! Fuzzes the size parsers (`64KiB`, `1.5GB`, kernel `4K`) and hexadecimal: no panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = flashpipe_engine::units::parse_size_bytes(text);
    let _ = flashpipe_kernels::options::parse_size(text);
    let _ = flashpipe_kernels::options::decode_hex(text);
});
