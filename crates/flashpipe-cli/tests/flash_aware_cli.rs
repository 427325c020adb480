//! `flashpipe mkfs --layout flash-aware` (docs/design/29-flash-aware.md): the file system
//! straight on the pages of one emulated flash device, no FTL. Put, get, ls, rm, fsck and
//! info, each in a process of its own (every command mounts and cleanly unmounts the
//! layout); and the refusals (a device that is not flash, two devices, another block
//! size, an unknown layout) with a clear message, a non-zero exit and no file made.

mod common;

use common::{check_fails, check_fails_unchanged, succeed_bytes};
use flashpipe_testkit::scratch::ScratchFolder;
use serde_json::Value;

fn sample(length: usize, seed: usize) -> Vec<u8> {
    (0..length)
        .map(|index| (index * 7 + index / 251 + seed) as u8)
        .collect()
}

fn make_store(folder: &ScratchFolder) -> String {
    let store = folder.join("s.toml");
    succeed_bytes(&[
        "mkfs",
        "--devices",
        "flash:minflash:fa.img",
        "--layout",
        "flash-aware",
        "--flash-blocks-per-plane",
        "8",
        &store,
    ]);
    store
}

#[test]
fn files_round_trip_through_the_flash_aware_layout() {
    let folder = ScratchFolder::new("flash-aware");
    let store = make_store(&folder);
    let text = std::fs::read_to_string(&store).unwrap();
    assert!(text.contains("layout = \"flash-aware\""), "{text}");
    assert!(text.contains("block_size_bytes = 8192"), "{text}");
    let big = folder.path().join("big.bin");
    let small = folder.path().join("small.txt");
    std::fs::write(&small, b"hello raw flash\n").unwrap();
    for round in 0..3 {
        std::fs::write(&big, sample(1 << 20, round)).unwrap();
        succeed_bytes(&["put", "--force", &store, &folder.join("big.bin")]);
    }
    succeed_bytes(&["put", &store, &folder.join("small.txt")]);
    let copy = folder.join("big.copy");
    succeed_bytes(&["get", &store, "big.bin", &copy]);
    assert!(std::fs::read(&copy).unwrap() == sample(1 << 20, 2));
    succeed_bytes(&["rm", &store, "small.txt"]);
    let listing: Value = serde_json::from_slice(&succeed_bytes(&["ls", &store, "--json"])).unwrap();
    assert_eq!(listing.as_array().unwrap().len(), 1, "{listing}");
    let fsck: Value = serde_json::from_slice(&succeed_bytes(&["fsck", &store, "--json"])).unwrap();
    assert_eq!(fsck["clean"], Value::Bool(true), "{fsck}");
    let info = String::from_utf8(succeed_bytes(&["info", &store])).unwrap();
    assert!(info.contains("format version 9"), "{info}");
}

#[test]
fn mkfs_refuses_what_the_layout_cannot_hold_and_makes_nothing() {
    let folder = ScratchFolder::new("flash-aware-refused");
    let store = folder.join("s.toml");
    let cases: [(&[&str], &str); 4] = [
        (
            &["--devices", "d0.img", "--size", "64MiB"],
            "is not flash: give one flash:PRESET:IMAGE device",
        ),
        (
            &["--devices", "flash:minflash:a.img,flash:minflash:b.img"],
            "exactly one flash:PRESET:IMAGE device, not 2",
        ),
        (
            &["--devices", "flash:minflash:a.img", "--block-size", "16KiB"],
            "the block is one flash page of 8 KiB",
        ),
        (&["--devices", "ram:64MiB"], "is not flash"),
    ];
    for (devices, expected) in cases {
        let mut arguments = vec!["mkfs"];
        arguments.extend_from_slice(devices);
        arguments.extend_from_slice(&["--layout", "flash-aware", &store]);
        check_fails_unchanged(&folder, &arguments, expected);
    }
    check_fails(
        &[
            "mkfs",
            "--devices",
            "flash:minflash:a.img",
            "--layout",
            "raw",
            &store,
        ],
        "the layouts are ftl",
    );
}
