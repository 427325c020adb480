//! Fuzzes the DiskSim trace parser: no panic, and every request accepted within the limits.
#![no_main]

use flashpipe_flash::workload::{check_trace_request, parse_disksim};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(requests) = parse_disksim(text, "fuzz") {
        for request in &requests {
            assert!(check_trace_request(request).is_ok(), "accepted {request:?}");
        }
    }
});
