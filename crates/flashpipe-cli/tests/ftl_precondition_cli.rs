//! `flashpipe ftl precondition` and `flashpipe ftl emulate` end to end on a small minflash
//! (16 blocks per plane): both methods print what they built, bad options are refused
//! with a message and a non-zero exit, and the paced emulation prints its measured
//! latency, the closed form and its lag report (no wall-clock figure is asserted).

mod common;

use common::flashpipe_ftl;

#[test]
fn precondition_builds_the_steady_state_both_ways() {
    for method in ["direct", "slow"] {
        let output = flashpipe_ftl(&[
            "precondition",
            "--preset",
            "minflash",
            "--fill",
            "0.9",
            "--passes",
            "0.5",
            "--method",
            method,
            "--seed",
            "3",
            "--blocks-per-plane",
            "16",
        ]);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{method}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(stdout.contains("data blocks"), "{method}: {stdout}");
        assert!(stdout.contains("write amplification"), "{method}: {stdout}");
    }
}

#[test]
fn precondition_refuses_a_fill_share_past_one() {
    let output = flashpipe_ftl(&["precondition", "--fill", "1.5", "--blocks-per-plane", "16"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("fill_share"), "{stderr}");
}

#[test]
fn emulate_prints_latency_beside_the_closed_form_and_the_lag() {
    let output = flashpipe_ftl(&[
        "emulate",
        "--preset",
        "minflash",
        "--seconds",
        "0.2",
        "--qd",
        "1",
        "--pattern",
        "randread",
        "--blocks-per-plane",
        "16",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("latency measured from outside"), "{stdout}");
    assert!(stdout.contains("closed form"), "{stdout}");
    assert!(stdout.contains("release lag"), "{stdout}");
    let refused = flashpipe_ftl(&["emulate", "--qd", "0"]);
    assert!(!refused.status.success());
}
