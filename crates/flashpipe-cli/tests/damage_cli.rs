//! Damage through the `flashpipe` binary (issue 10, items 3 and 6): one flipped byte in
//! the newest super block slot makes every command refuse with a message naming the
//! damage and the commit it could fall back to, and no command (ls, stat, cat, get, df,
//! fsck) changes a byte of the image; `fsck --repair` falls back and lists what is
//! lost. One damaged block of the metadata log (format version 3) costs only the commit
//! it records: fsck names its file, repair keeps the commit before. (A damaged name
//! table block, which costs only names, is checked in `flashpipe-fs/tests/damage.rs`:
//! stores made by these few commands keep their names in the log.)

mod common;

use std::path::{Path, PathBuf};

use common::{file_names, flashpipe, fresh_folder, mkfs, succeed, text};

const BLOCK_SIZE: usize = 16384;
const SMALL_FILE_COUNT: usize = 43;

/// A one-device store holding 43 files put in one command (commit 2) and "extra" put
/// after them (commit 3, in super block slot 1).
fn make_store(folder: &Path) -> (PathBuf, PathBuf) {
    let store = folder.join("s.toml");
    mkfs(
        &store,
        "a.img",
        &["--size", "16MiB", "--block-size", "16KiB"],
    );
    let source = folder.join("files");
    std::fs::create_dir_all(&source).unwrap();
    for index in 1..=SMALL_FILE_COUNT {
        std::fs::write(source.join(format!("f{index}")), format!("file {index}\n")).unwrap();
    }
    let paths: Vec<PathBuf> = (1..=SMALL_FILE_COUNT)
        .map(|index| source.join(format!("f{index}")))
        .collect();
    let mut put = vec!["put", text(&store)];
    put.extend(paths.iter().map(|path| text(path)));
    succeed(&put);
    std::fs::write(folder.join("extra"), b"the newest file\n").unwrap();
    succeed(&["put", text(&store), text(&folder.join("extra"))]);
    (store, folder.join("a.img"))
}

fn flip_byte(image: &Path, offset: usize) {
    let mut bytes = std::fs::read(image).unwrap();
    bytes[offset] ^= 0xff;
    std::fs::write(image, bytes).unwrap();
}

/// Runs a command expected to fail; returns its standard output and error together.
/// Asserts that `image` still holds `before`: `what` wrote nothing.
fn assert_image_unchanged(image: &Path, before: &[u8], what: &str) {
    assert!(
        std::fs::read(image).unwrap() == before,
        "{what} changed the image"
    );
}

/// `fsck --repair` says `says` and names the file "extra", which is gone after it; the
/// other files stay and fsck then finds the store clean.
fn repair_drops_the_extra_file(store: &Path, says: &str) {
    let repaired = succeed(&["fsck", "--repair", text(store)]);
    assert!(
        repaired.contains(says) && repaired.contains("\"extra\""),
        "{repaired}"
    );
    let names = file_names(store);
    assert_eq!(names.len(), SMALL_FILE_COUNT, "{names:?}");
    assert!(!names.contains(&"extra".to_string()));
    assert!(succeed(&["fsck", text(store)]).contains("clean"));
}

fn fails(arguments: &[&str]) -> String {
    let output = flashpipe(arguments);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "flashpipe {arguments:?} should fail: {stdout}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    format!("{stdout}{stderr}")
}

#[test]
fn a_flipped_byte_in_the_newest_slot_changes_nothing_until_repair_falls_back() {
    let folder = fresh_folder("damaged-newest-slot");
    let (store, image) = make_store(&folder);
    assert_eq!(file_names(&store).len(), SMALL_FILE_COUNT + 1);
    flip_byte(&image, BLOCK_SIZE + 200);
    let before = std::fs::read(&image).unwrap();
    let fetched = folder.join("fetched");
    let store_text = text(&store);
    let refused: [&[&str]; 5] = [
        &["ls", store_text],
        &["stat", store_text, "f1"],
        &["cat", store_text, "f1"],
        &["get", store_text, "f1", text(&fetched)],
        &["df", store_text],
    ];
    for arguments in refused {
        let message = fails(arguments);
        for expected in ["slot 1 is damaged", "commit 2", "fsck --repair"] {
            assert!(
                message.contains(expected),
                "flashpipe {arguments:?}: {message} lacks {expected:?}"
            );
        }
        assert_image_unchanged(&image, &before, &format!("flashpipe {arguments:?}"));
    }
    assert!(!fetched.exists(), "get left a file behind");
    let checked = fails(&["fsck", store_text]);
    assert!(
        checked.contains("falls back to commit 2") && checked.contains("\"extra\""),
        "{checked}"
    );
    assert_image_unchanged(&image, &before, "fsck");

    repair_drops_the_extra_file(&store, "dropped commit 3");
    assert_eq!(succeed(&["cat", store_text, "f7"]), "file 7\n");
}

/// The block of the metadata log (format version 3) that starts the record of commit
/// `sequence`: it starts with the `LOGR` kind and carries that commit sequence.
fn log_block(image: &[u8], sequence: u64) -> usize {
    (2..image.len() / BLOCK_SIZE)
        .find(|&block| {
            let start = block * BLOCK_SIZE;
            image[start..start + 4] == *b"LOGR"
                && image[start + 8..start + 16] == sequence.to_le_bytes()
        })
        .expect("a log block")
}

#[test]
fn a_damaged_log_record_costs_its_commit_and_repair_keeps_the_one_before() {
    let folder = fresh_folder("damaged-log-record");
    let (store, image) = make_store(&folder);
    let block = log_block(&std::fs::read(&image).unwrap(), 3);
    flip_byte(&image, block * BLOCK_SIZE + 60);
    let before = std::fs::read(&image).unwrap();
    let message = fails(&["ls", text(&store)]);
    assert!(
        message.contains("metadata log") && message.contains("fsck --repair"),
        "{message}"
    );
    assert_image_unchanged(&image, &before, "ls");
    let checked = fails(&["fsck", text(&store)]);
    assert!(
        checked.contains("commit 3") && checked.contains("\"extra\""),
        "fsck names the lost commit and its file: {checked}"
    );
    assert_image_unchanged(&image, &before, "fsck");
    repair_drops_the_extra_file(&store, "rolled");
    assert_eq!(succeed(&["cat", text(&store), "f7"]), "file 7\n");
}

#[test]
fn with_both_slots_damaged_repair_refuses_instead_of_emptying_the_store() {
    let folder = fresh_folder("damaged-both-slots");
    let (store, image) = make_store(&folder);
    flip_byte(&image, 64);
    flip_byte(&image, BLOCK_SIZE + 64);
    let before = std::fs::read(&image).unwrap();
    let message = fails(&["fsck", "--repair", text(&store)]);
    assert!(
        message.contains("no commit can be found") && !message.contains("fixed"),
        "{message}"
    );
    fails(&["ls", text(&store)]);
    assert_image_unchanged(&image, &before, "ls");
}
