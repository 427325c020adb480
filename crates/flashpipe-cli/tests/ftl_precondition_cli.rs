//! `flashpipe ftl precondition` and `flashpipe ftl emulate` end to end on a small minflash
//! (16 blocks per plane): both methods print what they built, bad options are refused
//! with a message and a non-zero exit, and the paced emulation prints its measured
//! latency, the closed form and its lag report (no wall-clock figure is asserted).

mod common;

use common::{check_fails, command_line, flashpipe_ftl, succeed_ftl};

#[test]
fn precondition_builds_the_steady_state_both_ways() {
    for method in ["direct", "slow"] {
        let stdout = String::from_utf8(succeed_ftl(&command_line(
            "precondition --preset minflash --fill 0.9 --passes 0.5 --seed 3 \
             --blocks-per-plane 16 --method {}",
            &[method],
        )))
        .expect("UTF-8 output");
        assert!(stdout.contains("data blocks"), "{method}: {stdout}");
        assert!(stdout.contains("write amplification"), "{method}: {stdout}");
    }
}

#[test]
fn precondition_refuses_a_fill_share_past_one() {
    check_fails(
        &command_line("ftl precondition --fill 1.5 --blocks-per-plane 16", &[]),
        "fill_share",
    );
}

#[test]
fn emulate_prints_latency_beside_the_closed_form_and_the_lag() {
    let stdout = String::from_utf8(succeed_ftl(&command_line(
        "emulate --preset minflash --seconds 0.2 --qd 1 --pattern randread --blocks-per-plane 16",
        &[],
    )))
    .expect("UTF-8 output");
    assert!(stdout.contains("latency measured from outside"), "{stdout}");
    assert!(stdout.contains("closed form"), "{stdout}");
    assert!(stdout.contains("release lag"), "{stdout}");
    let refused = flashpipe_ftl(&["emulate", "--qd", "0"]);
    assert!(!refused.status.success());
}
