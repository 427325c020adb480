//! Fuzzes the language-profile file decoder (the `profiles` option of `langid`): no panic.
#![no_main]

use flashpipe_kernels::langid::profile_file::decode_profile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let _ = decode_profile(bytes);
});
