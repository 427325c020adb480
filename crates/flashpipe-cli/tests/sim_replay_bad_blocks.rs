//! `flashpipe sim replay --mode raw-striped` on a preset with factory bad blocks steps
//! over them as a raw-flash user would, and says how many it skipped: a write to the
//! first page of every block no longer fails a page operation.

use std::process::Command;

use flashpipe_testkit::cli_args::command_line;

#[test]
fn raw_striped_replay_skips_factory_bad_blocks_and_counts_them() {
    let folder = std::env::temp_dir().join(format!(
        "flashpipe-replay-bad-blocks-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&folder).unwrap();
    let trace = folder.join("first-pages.trace");
    // minflash: 8 channels x 8 ways, 256 pages per block, 8 KiB pages (16 sectors). A
    // write of page 0 of blocks 0..240 of every way, in order (time_ns device lba
    // sectors type, type 0 a write).
    let mut text = String::new();
    let mut time_ns = 0;
    for block in 0..240u64 {
        for way in 0..64u64 {
            time_ns += 1000;
            let page = block * 256 * 64 + way;
            text.push_str(&format!("{time_ns} 0 {} 16 0\n", page * 16));
        }
    }
    std::fs::write(&trace, text).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_flashpipe"))
        .args(command_line(
            "sim replay --format ascii-ns --mode raw-striped --blocks-per-plane 256 --json",
            &[],
        ))
        .arg(&trace)
        .output()
        .expect("run flashpipe");
    std::fs::remove_dir_all(&folder).unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let result = &report["result"];
    assert_eq!(result["failed_page_operations"], 0, "{report}");
    assert_eq!(result["page_operations"], 240 * 64, "{report}");
    let skipped = result["bad_blocks_skipped"].as_u64().expect("a count");
    assert!(skipped > 0, "minflash ships bad blocks: {report}");
}
