//! `flashpipe ftl copy --size 512MiB` fits: the array is sized with the FTL's reserves
//! counted (three blocks per die, checkpoints, log), which on a small array are a large
//! share of it; before, the second copy ran out of space.

use std::process::Command;

use flashpipe_testkit::tools::stdout_of;

#[test]
fn a_512_mib_copy_fits_the_array_sized_for_it() {
    let stdout = stdout_of(
        Command::new(env!("CARGO_BIN_EXE_flashpipe"))
            .args(["ftl", "copy", "--size", "512MiB", "--json"]),
        "flashpipe ftl copy",
    );
    let report: serde_json::Value = serde_json::from_slice(&stdout).expect("JSON");
    assert_eq!(report["file_size_bytes"], 512u64 << 20, "{report}");
    assert_eq!(
        report["by_reference"]["copy_matches_source"], true,
        "{report}"
    );
    assert_eq!(report["by_bytes"]["copy_matches_source"], true, "{report}");
    assert_eq!(
        report["by_bytes"]["bytes_by_bytes"],
        512u64 << 20,
        "{report}"
    );
}
