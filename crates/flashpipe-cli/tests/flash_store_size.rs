//! Emulated flash without surprises: every preset `flashpipe sim presets` lists makes a
//! store that keeps a file (mkfs, put, get, each in a process of its own); mkfs says in
//! one line how the store's size follows from the preset; `--size` is honoured (the
//! store uses that much, the array grows past its default to hold it) and a size larger
//! than the preset can hold is refused naming both sizes, creating nothing; devices whose
//! contents end with mkfs (`ram:SIZE`, `flash:PRESET` without an image) are refused,
//! naming what to write instead.

mod common;

use common::{check_fails, command_line, flashpipe, succeed_bytes};
use flashpipe_testkit::scratch::ScratchFolder;

fn mkfs_stderr(arguments: &[&str]) -> String {
    let output = flashpipe(arguments);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "flashpipe {arguments:?}: {stderr}");
    stderr
}

fn df_total_bytes(store: &str) -> u64 {
    let output = succeed_bytes(&["df", "--json", store]);
    let report: serde_json::Value = serde_json::from_slice(&output).expect("df JSON");
    report["total_bytes"]
        .as_u64()
        .unwrap_or_else(|| panic!("total_bytes in {report}"))
}

#[test]
fn every_listed_preset_makes_a_store_that_keeps_a_file() {
    let listing = String::from_utf8(succeed_bytes(&["sim", "presets", "--json"])).unwrap();
    let presets: serde_json::Value = serde_json::from_str(&listing).expect("presets JSON");
    let names: Vec<String> = presets
        .as_array()
        .expect("a list of presets")
        .iter()
        .map(|preset| preset["name"].as_str().expect("a name").to_string())
        .collect();
    assert!(names.iter().any(|name| name == "rad"), "{listing}");
    let folder = ScratchFolder::new("presets");
    let contents: Vec<u8> = (0..300_000u32)
        .map(|index| (index * 7 % 251) as u8)
        .collect();
    let local = folder.join("x.bin");
    std::fs::write(&local, &contents).unwrap();
    for name in &names {
        let store = folder.join(&format!("{name}.toml"));
        let device = format!("flash:{name}:{name}.img");
        let stderr = mkfs_stderr(&["mkfs", "--devices", &device, &store]);
        assert!(
            stderr.contains(&format!("the {name} preset has")),
            "{stderr}"
        );
        succeed_bytes(&["put", &store, &local]);
        let fetched = folder.join(&format!("{name}.out"));
        succeed_bytes(&["get", &store, "x.bin", &fetched]);
        assert!(
            std::fs::read(&fetched).unwrap() == contents,
            "preset {name}"
        );
    }
}

#[test]
fn mkfs_says_how_the_store_size_follows_from_the_preset() {
    let folder = ScratchFolder::new("explained");
    let store = folder.join("f.toml");
    let stderr = mkfs_stderr(&["mkfs", "--devices", "flash:minflash:f.img", &store]);
    let note = stderr
        .lines()
        .find(|line| line.contains("flash:minflash:f.img:"))
        .unwrap_or_else(|| panic!("no capacity line in {stderr}"));
    for fragment in [
        "the minflash preset has 512 GiB of raw pages",
        "the emulation uses 8 GiB",
        "page map in memory",
        "10% over-provisioning",
        "the store uses all of it",
    ] {
        assert!(note.contains(fragment), "{note:?} lacks {fragment:?}");
    }
}

#[test]
fn mkfs_size_on_flash_is_what_the_store_uses() {
    let folder = ScratchFolder::new("size");
    let small = folder.join("small.toml");
    let stderr = mkfs_stderr(&command_line(
        "mkfs --devices flash:minflash:small.img --size 1GiB {}",
        &[&small],
    ));
    assert!(
        stderr.contains("the store uses 1 GiB of it (--size)"),
        "{stderr}"
    );
    assert_eq!(df_total_bytes(&small), 1 << 30);
    // Larger than the default 8 GiB raw: the array grows to hold it.
    let large = folder.join("large.toml");
    mkfs_stderr(&command_line(
        "mkfs --devices flash:minflash:large.img --size 12GiB {}",
        &[&large],
    ));
    assert_eq!(df_total_bytes(&large), 12 << 30);
    let recorded = std::fs::read_to_string(&large).unwrap();
    assert!(recorded.contains("blocks_per_plane"), "{recorded}");
}

#[test]
fn a_size_larger_than_the_preset_holds_is_refused_with_both_sizes() {
    let folder = ScratchFolder::new("too-large");
    let store = folder.join("s.toml");
    let before = folder.listing();
    check_fails(
        &command_line("mkfs --devices flash:rad:r.img --size 1GiB {}", &[&store]),
        "--size 1 GiB is larger than a rad device can hold: at most",
    );
    assert_eq!(folder.listing(), before, "nothing is created");
    check_fails(
        &command_line(
            "mkfs --devices flash:minflash:m.img --size 12KiB {}",
            &[&store],
        ),
        "whole number",
    );
}

#[test]
fn devices_that_end_with_mkfs_are_refused_naming_what_to_write() {
    let folder = ScratchFolder::new("transient");
    let store = folder.join("s.toml");
    let before = folder.listing();
    check_fails(
        &["mkfs", "--devices", "ram:64MiB", &store],
        "use a file device of that size: --devices dev0.img --size 64MiB",
    );
    check_fails(
        &["mkfs", "--devices", "flash:rad", &store],
        "--devices flash:rad:rad.img",
    );
    assert_eq!(folder.listing(), before);
}
