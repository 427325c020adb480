//! Fuzzes kernel option parsing: the first line names the kernel, every further line is one
//! `key=value` argument; building never panics.
#![no_main]

use flashpipe_kernels::registry::build_kernel;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let mut lines = text.lines();
    let Some(kernel) = lines.next() else {
        return;
    };
    let arguments: Vec<String> = lines.map(str::to_string).collect();
    let _ = build_kernel(kernel, &arguments);
});
