//! Fuzzes the one size grammar (`64KiB`, `1.5GB`, `4K`: `flashpipe-units`, which store files,
//! size flags and kernel options all use) and hexadecimal: no panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = flashpipe_store::units::parse_size_bytes(text);
    let _ = flashpipe_kernels::options::decode_hex(text);
});
