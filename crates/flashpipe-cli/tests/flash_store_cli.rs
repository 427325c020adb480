//! Runs the `flashpipe` store commands on emulated flash (issue #5, "same stack"): mkfs
//! with `--devices flash:minflash:PATH`, put, then get, cat, ls, stat and fsck, each in a
//! process of its own, so the flash image must carry everything between commands; and bad
//! flash devices refused with a clear message, a non-zero exit and no change.

mod common;

use std::path::Path;

use common::{check_fails_unchanged, succeed_bytes};
use flashpipe_testkit::presets::write_tiny_spare_preset;
use flashpipe_testkit::scratch::ScratchFolder;
use serde_json::Value;

fn sample(length: usize) -> Vec<u8> {
    (0..length)
        .map(|index| (index * 7 + index / 251) as u8)
        .collect()
}

fn make_flash_store(folder: &ScratchFolder) -> String {
    let store = folder.join("s.toml");
    succeed_bytes(&["mkfs", "--devices", "flash:minflash:flash0.img", &store]);
    store
}

#[test]
fn files_put_in_one_process_come_back_in_the_next() {
    let folder = ScratchFolder::new("round-trip");
    let store = make_flash_store(&folder);
    let store_text = std::fs::read_to_string(&store).unwrap();
    assert!(store_text.contains("kind = \"flash\""), "{store_text}");
    assert!(folder.path().join("flash0.img.meta").exists());
    let files = [
        ("big.bin", sample(2 << 20)),
        ("small.txt", b"hello flash\n".to_vec()),
    ];
    for (name, bytes) in &files {
        std::fs::write(folder.path().join(name), bytes).unwrap();
        succeed_bytes(&["put", &store, &folder.join(name)]);
    }
    let listing: Value = serde_json::from_slice(&succeed_bytes(&["ls", &store, "--json"])).unwrap();
    assert_eq!(listing.as_array().unwrap().len(), files.len(), "{listing}");
    for (name, bytes) in &files {
        let copy = folder.join(&format!("{name}.copy"));
        succeed_bytes(&["get", &store, name, &copy]);
        assert!(
            std::fs::read(&copy).unwrap() == *bytes,
            "{name} came back different"
        );
    }
    assert_eq!(
        succeed_bytes(&["cat", &store, "small.txt"]),
        b"hello flash\n"
    );
    succeed_bytes(&["stat", &store, "big.bin"]);
    let fsck: Value = serde_json::from_slice(&succeed_bytes(&["fsck", &store, "--json"])).unwrap();
    assert_eq!(fsck["clean"], Value::Bool(true), "{fsck}");
}

#[test]
fn bad_flash_devices_are_refused_and_change_nothing() {
    let folder = ScratchFolder::new("refused");
    let store = folder.join("s.toml");
    // rad's pages carry the FTL's compact record (20 host spare bytes); a preset with
    // less spare is refused.
    write_tiny_spare_preset(&folder.path().join("tiny-spare.toml"));
    let cases: [(&[&str], &str); 5] = [
        (
            &["--devices", "flash:nand9:f.img"],
            "unknown flash preset \"nand9\"",
        ),
        (
            &["--devices", "flash:minflash:f.img", "--block-size", "4KiB"],
            "not a multiple of the flash page",
        ),
        (
            &["--devices", "flash:tiny-spare.toml:f.img"],
            "host spare bytes; the FTL needs at least 20",
        ),
        (
            &["--devices", "flash:minflash:f.img,g.img", "--size", "1GiB"],
            "share one block size",
        ),
        (&["--devices", "flash:absent.toml:f.img"], "absent.toml"),
    ];
    for (arguments, expected_fragment) in cases {
        let mut command = vec!["mkfs"];
        command.extend_from_slice(arguments);
        command.push(&store);
        check_fails_unchanged(&folder, &command, expected_fragment);
    }
    let made = make_flash_store(&folder);
    std::fs::rename(
        folder.path().join("flash0.img"),
        folder.path().join("moved.img"),
    )
    .unwrap();
    check_fails_unchanged(&folder, &["ls", &made], "does not exist");
    std::fs::rename(
        folder.path().join("moved.img"),
        folder.path().join("flash0.img"),
    )
    .unwrap();
    let text = std::fs::read_to_string(&made).unwrap();
    let other = folder.join("other.toml");
    std::fs::write(
        &other,
        text.replace("seed = 1", "seed = 1\nblocks_per_plane = 8"),
    )
    .unwrap();
    check_fails_unchanged(&folder, &["ls", &other], "wrong image");
    std::fs::write(
        &other,
        text.replace("over_provisioning = 0.1", "over_provisioning = 2.0"),
    )
    .unwrap();
    check_fails_unchanged(&folder, &["ls", &other], "over_provisioning 2");
    succeed_bytes(&["fsck", &made]);
}

#[test]
fn a_flash_store_in_memory_is_refused_by_mkfs_naming_an_image_instead() {
    let folder = ScratchFolder::new("memory");
    let store = folder.join("m.toml");
    check_fails_unchanged(
        &folder,
        &["mkfs", "--devices", "flash:minflash", &store],
        "flash:minflash:minflash.img",
    );
}

#[test]
fn the_store_file_names_the_preset_by_path_too() {
    let folder = ScratchFolder::new("preset-file");
    let preset_text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../flashpipe-flash/presets/minflash.toml"),
    )
    .unwrap();
    std::fs::write(folder.path().join("mine.toml"), preset_text).unwrap();
    let store = folder.join("s.toml");
    succeed_bytes(&["mkfs", "--devices", "flash:mine.toml:f.img", &store]);
    std::fs::write(folder.path().join("x.txt"), b"x").unwrap();
    succeed_bytes(&["put", &store, &folder.join("x.txt")]);
    assert_eq!(succeed_bytes(&["cat", &store, "x.txt"]), b"x");
}
