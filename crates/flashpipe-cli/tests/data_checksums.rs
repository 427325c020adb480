//! Data checksums through the binary: a data block of a stored file overwritten in the
//! device image with random bytes makes `get` and `cat` fail with a message naming the
//! file and the offset (no wrong bytes written out), plain `fsck` stays clean (the
//! metadata is intact) and `fsck --data` reports the damaged block.

mod common;

use std::path::Path;

use common::{check_fails, flashpipe, fresh_folder, mkfs, succeed, text};

const BLOCK_SIZE: usize = 4096;

/// Deterministic bytes that do not repeat a block (SplitMix64).
fn pattern(length: usize, seed: u64) -> Vec<u8> {
    let mut random = flashpipe_base::SplitMix64::new(seed);
    (0..length).map(|_| random.next_u64() as u8).collect()
}

/// Overwrites, in the image at `image`, the block that holds `block` with random bytes;
/// returns its byte offset in the image.
fn damage_block_holding(image: &Path, block: &[u8]) -> usize {
    let mut bytes = std::fs::read(image).unwrap();
    let offset = bytes
        .chunks_exact(BLOCK_SIZE)
        .position(|candidate| candidate == block)
        .expect("the file's block is in the image")
        * BLOCK_SIZE;
    bytes[offset..offset + BLOCK_SIZE].copy_from_slice(&pattern(BLOCK_SIZE, 99));
    std::fs::write(image, &bytes).unwrap();
    offset
}

#[test]
fn a_damaged_data_block_fails_get_and_cat_and_fsck_data_reports_it() {
    let folder = fresh_folder("data-checksums");
    let store = folder.join("s.toml");
    mkfs(&store, "a.img", &["--size", "8MiB", "--block-size", "4KiB"]);
    let contents = pattern(5 * BLOCK_SIZE + 123, 7);
    let source = folder.join("victim.bin");
    std::fs::write(&source, &contents).unwrap();
    std::fs::write(folder.join("bystander.txt"), b"still fine\n").unwrap();
    succeed(&["put", text(&store), text(&source)]);
    succeed(&["put", text(&store), text(&folder.join("bystander.txt"))]);
    succeed(&["fsck", "--data", text(&store)]);

    damage_block_holding(
        &folder.join("a.img"),
        &contents[2 * BLOCK_SIZE..3 * BLOCK_SIZE],
    );

    let fetched = folder.join("fetched.bin");
    check_fails(
        &["get", text(&store), "victim.bin", text(&fetched)],
        "victim.bin",
    );
    check_fails(
        &["get", text(&store), "victim.bin", text(&fetched)],
        "offset 8192",
    );
    check_fails(&["cat", text(&store), "victim.bin"], "victim.bin");
    check_fails(&["cat", text(&store), "victim.bin"], "checksum");
    assert_eq!(
        succeed(&["cat", text(&store), "bystander.txt"]),
        "still fine\n"
    );

    succeed(&["fsck", text(&store)]);
    let output = flashpipe(&["fsck", "--data", text(&store)]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "fsck --data passed: {stdout}");
    assert!(
        stdout.contains("data block")
            && stdout.contains("\"victim.bin\"")
            && stdout.contains("offset 8192"),
        "{stdout}"
    );
    assert!(stderr.contains("1 finding"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
