//! Shared blocks through the real binary: `cp --by reference` on a store of plain files
//! shares the source's blocks (no byte moves, no device support), `df` counts them once
//! and says how many are shared, `stat`, `ls -l` and `--json` give each file's shared
//! bytes, `rm` of either copy leaves the other whole and gives the space back only with
//! the last one, `fsck` stays clean; a `cp` killed with SIGKILL at random moments leaves
//! a clean store holding the copy whole or not at all; a version-4 store is read without
//! a write and upgraded by its first read-write command; a reference count changed in the
//! image is an fsck finding (every command refuses the store) that `fsck --repair` fixes
//! from the block pointers, both files whole.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{
    check_fails, command_line, file_store, flashpipe, folder_with_store, fresh_folder, succeed,
    text,
};
use flashpipe_fs::layout::{checksum_with_field_zeroed, read_u32, read_u64, write_u32};
use serde_json::Value;

const FILE_BYTES: usize = 3_000_017;

fn original() -> Vec<u8> {
    (0..FILE_BYTES as u32)
        .map(|index| (index.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// Writes [`original`] to the local file `name` in `folder` and puts it into `store`.
fn put_original(folder: &Path, store: &Path, name: &str) {
    let local = folder.join(name);
    std::fs::write(&local, original()).unwrap();
    succeed(&["put", text(store), text(&local)]);
}

fn json(arguments: &[&str]) -> Value {
    serde_json::from_str(&succeed(arguments)).expect("JSON output")
}

fn df(store: &Path) -> Value {
    json(&["df", text(store), "--json"])
}

fn fetch(store: &Path, name: &str, folder: &Path) -> Vec<u8> {
    let fetched = folder.join("fetched.bin");
    let _ = std::fs::remove_file(&fetched);
    succeed(&["get", text(store), name, text(&fetched)]);
    std::fs::read(&fetched).unwrap()
}

fn assert_clean(store: &Path) {
    let fsck = json(&["fsck", text(store), "--json"]);
    assert_eq!(fsck["clean"], true, "{fsck}");
}

#[test]
fn a_copy_by_reference_shares_blocks_counted_once_on_a_file_store() {
    let (folder, store) = folder_with_store("shared-cp", "64MiB");
    put_original(&folder, &store, "big.bin");
    let before = df(&store);
    assert_eq!(before["shared_bytes"], 0, "{before}");

    let report = json(&command_line(
        "cp {} big.bin big-copy --by reference --json",
        &[text(&store)],
    ));
    assert_eq!(report["bytes_by_bytes"], 0, "{report}");
    let block_bytes = before["block_size_bytes"].as_u64().unwrap();
    let data_blocks = (FILE_BYTES as u64).div_ceil(block_bytes);
    assert_eq!(report["blocks_by_reference"], data_blocks, "{report}");

    let after = df(&store);
    let used_before = before["used_bytes"].as_u64().unwrap();
    let used_after = after["used_bytes"].as_u64().unwrap();
    assert!(
        used_after < used_before + 8 * block_bytes,
        "the copy's data is counted once: {before} then {after}"
    );
    assert_eq!(after["shared_bytes"], data_blocks * block_bytes, "{after}");
    assert_eq!(after["saved_bytes"], data_blocks * block_bytes, "{after}");
    let text_df = succeed(&["df", text(&store)]);
    assert!(
        text_df.contains("in shared blocks, counted once"),
        "{text_df}"
    );

    let listing = json(&["ls", text(&store), "--json"]);
    for file in listing.as_array().unwrap() {
        assert_eq!(file["shared_bytes"], FILE_BYTES as u64, "{file}");
    }
    let stat = succeed(&["stat", text(&store), "big-copy"]);
    assert!(
        stat.contains(&format!("{FILE_BYTES} bytes in shared blocks")),
        "{stat}"
    );
    let long = succeed(&["ls", "-l", text(&store)]);
    assert_eq!(
        long.matches(&format!(" {FILE_BYTES} ")).count(),
        4,
        "size and shared bytes of both files: {long}"
    );
    assert_clean(&store);

    for (removed, kept) in [("big-copy", "big.bin"), ("big.bin", "big-copy")] {
        if removed == "big.bin" {
            succeed(&command_line(
                "cp {} big.bin big-copy --by reference",
                &[text(&store)],
            ));
            assert_eq!(df(&store)["shared_bytes"], data_blocks * block_bytes);
        }
        succeed(&["rm", text(&store), removed]);
        let after_rm = df(&store);
        assert_eq!(after_rm["shared_bytes"], 0, "{after_rm}");
        assert!(
            after_rm["used_bytes"].as_u64().unwrap() >= used_before - 8 * block_bytes,
            "the kept file still holds the data: {after_rm}"
        );
        assert!(fetch(&store, kept, &folder) == original());
        assert_clean(&store);
    }
    succeed(&["cp", text(&store), "big-copy", "again"]);
    succeed(&["rm", text(&store), "again"]);
    assert!(fetch(&store, "big-copy", &folder) == original());
    succeed(&["rm", text(&store), "big-copy"]);
    let empty = df(&store);
    assert!(
        empty["used_bytes"].as_u64().unwrap() < 64 * block_bytes,
        "the last copy gone, the space is back: {empty}"
    );
    assert_clean(&store);
    check_fails(
        &["cp", text(&store), "missing", "x", "--by", "reference"],
        "no such file",
    );
    check_fails(
        &["cp", text(&store), "missing", "x", "--by", "remap"],
        "no such file",
    );
}

#[test]
fn removing_the_source_keeps_the_copy_and_a_write_unshares_one_side() {
    let (folder, store) = folder_with_store("shared-rm", "64MiB");
    put_original(&folder, &store, "a.bin");
    succeed(&["cp", text(&store), "a.bin", "b.bin", "--by", "reference"]);
    std::fs::write(folder.join("small.bin"), b"replacement").unwrap();
    succeed(&command_line(
        "put {} {} --as b.bin --force",
        &[text(&store), text(&folder.join("small.bin"))],
    ));
    assert!(fetch(&store, "a.bin", &folder) == original());
    assert_eq!(fetch(&store, "b.bin", &folder), b"replacement");
    assert_eq!(df(&store)["shared_bytes"], 0);
    assert_clean(&store);
}

#[test]
fn a_copy_killed_at_random_moments_leaves_a_clean_store_with_the_copy_whole_or_absent() {
    let (folder, store) = folder_with_store("shared-kill", "64MiB");
    put_original(&folder, &store, "big.bin");
    let (mut landed, mut copies_found) = (0, 0);
    for attempt in 0..12u64 {
        let name = format!("copy-{attempt}");
        let mut child = Command::new(env!("CARGO_BIN_EXE_flashpipe"))
            .args(["cp", text(&store), "big.bin", &name, "--by", "reference"])
            .spawn()
            .expect("spawn cp");
        std::thread::sleep(Duration::from_micros(attempt * attempt * 1500));
        let finished = child.try_wait().expect("poll").is_some();
        child.kill().ok();
        child.wait().expect("reap");
        landed += u64::from(!finished);
        assert_clean(&store);
        let names: Vec<String> = json(&["ls", text(&store), "--json"])
            .as_array()
            .unwrap()
            .iter()
            .map(|file| file["name"].as_str().unwrap().to_string())
            .collect();
        if names.contains(&name) {
            copies_found += 1;
            assert!(fetch(&store, &name, &folder) == original(), "{name}");
            succeed(&["rm", text(&store), &name]);
        }
        assert!(
            !names.iter().any(|found| found.contains("flashpipe")),
            "no temporary left behind: {names:?}"
        );
    }
    eprintln!("kills that landed while cp ran: {landed} of 12; copies found whole: {copies_found}");
    assert!(fetch(&store, "big.bin", &folder) == original());
    assert_eq!(df(&store)["shared_bytes"], 0);
}

/// Rewrites every super block slot of the file device `image` (FS blocks of
/// `block_bytes`) as format version 4; the slots must hold no shared table.
fn downgrade_to_version_4(image: &Path, block_bytes: u64) {
    let mut bytes = std::fs::read(image).unwrap();
    for slot in 0..2usize {
        let start = slot * block_bytes as usize;
        let super_block = &mut bytes[start..start + 512];
        if &super_block[0..8] != b"FLASHPFS" {
            continue;
        }
        assert_eq!(read_u64(super_block, 152), 0, "no shared table");
        assert!(super_block[152..].iter().all(|&byte| byte == 0));
        write_u32(super_block, 8, 4);
        let checksum = checksum_with_field_zeroed(super_block, 12);
        write_u32(super_block, 12, checksum);
    }
    std::fs::write(image, bytes).unwrap();
}

fn newest_version(image: &Path, block_bytes: u64) -> u32 {
    let bytes = std::fs::read(image).unwrap();
    let slot = |index: usize| {
        let start = index * block_bytes as usize;
        let super_block = &bytes[start..start + 512];
        (read_u64(super_block, 32), read_u32(super_block, 8))
    };
    slot(0).max(slot(1)).1
}

/// A fresh folder named `test` holding a 32 MiB store on the one image `a.img`; returns the
/// folder, the store file, the image and the store's block size.
fn store_on_one_image(test: &str) -> (common::TestFolder, PathBuf, PathBuf, u64) {
    let folder = fresh_folder(test);
    let store = file_store(&folder, "32MiB");
    let image = folder.join("a.img");
    let block_bytes = df(&store)["block_size_bytes"].as_u64().unwrap();
    (folder, store, image, block_bytes)
}

#[test]
fn a_version_4_store_is_read_unchanged_and_upgraded_by_its_first_change() {
    let (folder, store, image, block_bytes) = store_on_one_image("shared-v4");
    downgrade_to_version_4(&image, block_bytes);
    assert_eq!(newest_version(&image, block_bytes), 4);
    let image_before = std::fs::read(&image).unwrap();
    for command in [vec!["ls"], vec!["df"], vec!["fsck"]] {
        let mut arguments = command.clone();
        arguments.push(text(&store));
        let output = flashpipe(&arguments);
        assert!(output.status.success(), "{arguments:?}");
    }
    assert!(
        std::fs::read(&image).unwrap() == image_before,
        "read-only commands write nothing to a version-4 store"
    );
    put_original(&folder, &store, "f.bin");
    succeed(&["cp", text(&store), "f.bin", "g.bin", "--by", "reference"]);
    // the first change writes the current version (6: file attributes came after shares)
    assert_eq!(newest_version(&image, block_bytes), 6);
    assert_clean(&store);
    assert!(fetch(&store, "g.bin", &folder) == original());
}

/// The newest super block slot of `image` (the larger commit sequence).
fn newest_slot(image: &[u8], block_bytes: u64) -> &[u8] {
    let slot = |index: usize| &image[index * block_bytes as usize..][..512];
    if read_u64(slot(0), 32) >= read_u64(slot(1), 32) {
        slot(0)
    } else {
        slot(1)
    }
}

#[test]
fn fsck_finds_a_wrong_reference_count_and_repair_rewrites_it_from_the_pointers() {
    let (folder, store, image_path, block_bytes) = store_on_one_image("shared-fsck");
    put_original(&folder, &store, "f.bin");
    downgrade_to_version_4(&image_path, block_bytes);
    succeed(&["cp", text(&store), "f.bin", "g.bin", "--by", "reference"]);

    let mut image = std::fs::read(&image_path).unwrap();
    let newest = newest_slot(&image, block_bytes).to_vec();
    assert_eq!(
        read_u32(&newest, 8),
        6,
        "the upgrade's checkpoint (the current version)"
    );
    assert_eq!(read_u64(&newest, 152), 1, "one shared table block");
    let map = &image[(read_u64(&newest, 64) * block_bytes) as usize..][..block_bytes as usize];
    let tables_before = read_u64(&newest, 80) + read_u64(&newest, 88) + read_u64(&newest, 96);
    let table_block = read_u64(map, 40 + 8 * tables_before as usize);
    let start = (table_block * block_bytes) as usize;
    let table = &mut image[start..start + block_bytes as usize];
    assert_eq!(&table[0..4], b"SHRD");
    assert_eq!(read_u32(table, 40 + 12), 2, "each block referenced twice");
    write_u32(table, 40 + 12, 5);
    write_u32(table, 4, 0);
    let checksum = checksum_with_field_zeroed(table, 4);
    write_u32(table, 4, checksum);
    std::fs::write(&image_path, &image).unwrap();

    let output = flashpipe(&["fsck", text(&store)]);
    let report = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{report}");
    assert!(
        report.contains("shared table") && report.contains("the shared table says 5"),
        "{report}"
    );
    check_fails(&["ls", text(&store)], "fsck");
    succeed(&["fsck", text(&store), "--repair"]);
    assert_clean(&store);
    for name in ["f.bin", "g.bin"] {
        assert!(fetch(&store, name, &folder) == original(), "{name}");
    }
    let data_blocks = (FILE_BYTES as u64).div_ceil(block_bytes);
    assert_eq!(df(&store)["shared_bytes"], data_blocks * block_bytes);
}
