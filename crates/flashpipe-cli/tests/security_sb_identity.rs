//! The store identity in the file system's super block (format version 4), through the
//! real binary: a store file edited to name another store's flash image (a device kind
//! without member labels) is refused by every command, naming both identities, and
//! `fsck` reports it as a finding and refuses to repair, leaving the other store's file
//! system as it was (the flash images are 8 GiB sparse files, so the test compares the
//! file system, not the image's bytes); a store made before identities
//! (store file version 1, format version 3 image, no member label) opens read-only
//! unchanged and gets the identity in its store file and its super block at its first
//! `put`.

mod common;

use std::path::Path;

use common::{
    check_fails, downgrade_to_version_1, flashpipe, folder_with_store, fresh_folder, mkfs, succeed,
    text,
};

/// CRC32C (Castagnoli), as the super block's checksum uses.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// The identity line of a store file, when it has one.
fn identity_of(store: &Path) -> Option<String> {
    std::fs::read_to_string(store)
        .expect("store file")
        .lines()
        .find_map(|line| line.strip_prefix("identity = \""))
        .map(|rest| rest.trim_end_matches('"').to_string())
}

/// `bytes` as the hyphenated UUID text of a store file.
fn uuid_text(bytes: &[u8]) -> String {
    let mut text = String::new();
    for (index, byte) in bytes.iter().enumerate() {
        if matches!(index, 4 | 6 | 8 | 10) {
            text.push('-');
        }
        text.push_str(&format!("{byte:02x}"));
    }
    text
}

/// The two super block slots of a one-file store's image: (offset, 512 bytes) each.
fn super_block_slots(image: &[u8]) -> [(usize, Vec<u8>); 2] {
    let block_size = u32::from_le_bytes(image[16..20].try_into().unwrap()) as usize;
    [0, block_size].map(|offset| (offset, image[offset..offset + 512].to_vec()))
}

/// The slot of the newest commit (the larger commit sequence at 32..40).
fn newest_slot(image: &[u8]) -> Vec<u8> {
    let [(_, first), (_, second)] = super_block_slots(image);
    let sequence = |slot: &[u8]| u64::from_le_bytes(slot[32..40].try_into().unwrap());
    if sequence(&first) >= sequence(&second) {
        first
    } else {
        second
    }
}

#[test]
fn a_store_file_naming_another_flash_stores_image_is_refused_naming_both() {
    let folder = fresh_folder("sb-identity-flash");
    let (ours, theirs) = (folder.join("ours.toml"), folder.join("theirs.toml"));
    succeed(&["mkfs", "--devices", "flash:minflash:ours.img", text(&ours)]);
    mkfs(&theirs, "flash:minflash:theirs.img", &[]);
    let data = folder.join("d.txt");
    std::fs::write(&data, b"theirs").expect("data");
    succeed(&["put", text(&theirs), text(&data)]);
    let our_identity = identity_of(&ours).expect("an identity");
    let their_identity = identity_of(&theirs).expect("an identity");
    assert_ne!(our_identity, their_identity);

    let edited = std::fs::read_to_string(&ours)
        .expect("store file")
        .replace("ours.img", "theirs.img");
    assert!(edited.contains("theirs.img"), "{edited}");
    std::fs::write(&ours, &edited).expect("edited store file");
    let their_check = succeed(&["fsck", text(&theirs)]);
    assert!(their_check.contains("clean: 1 file(s)"), "{their_check}");

    for arguments in [
        vec!["ls", text(&ours)],
        vec!["put", text(&ours), text(&data)],
        vec!["df", text(&ours)],
    ] {
        check_fails(&arguments, "another store");
        let output = flashpipe(&arguments);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&our_identity) && stderr.contains(&their_identity),
            "{arguments:?} names both identities: {stderr}"
        );
    }
    for repair in [false, true] {
        let mut arguments = vec!["fsck", text(&ours)];
        if repair {
            arguments.push("--repair");
        }
        let output = flashpipe(&arguments);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(!output.status.success(), "{arguments:?}: {stdout}");
        assert!(
            stdout.contains("finding: super block")
                && stdout.contains(&our_identity)
                && stdout.contains(&their_identity),
            "{arguments:?} reports the mismatch as a finding: {stdout}"
        );
        if repair {
            assert!(stdout.contains("repair refused"), "{stdout}");
        }
    }
    assert_eq!(
        succeed(&["fsck", text(&theirs)]),
        their_check,
        "the other store's file system is as it was: same files, same commit"
    );
    assert_eq!(succeed(&["cat", text(&theirs), "d.txt"]), "theirs");
    assert_eq!(std::fs::read_to_string(&ours).expect("store file"), edited);
}

#[test]
fn a_store_made_before_identities_opens_read_only_unchanged_and_gets_them_at_its_first_put() {
    let (folder, store) = folder_with_store("sb-identity-old", "64MiB");
    let image_path = folder.join("a.img");
    let size = 64usize << 20;
    let mut image = std::fs::read(&image_path).expect("image");
    assert_eq!(image.len(), size + 4096, "a labelled member");
    image.truncate(size);
    for (offset, mut slot) in super_block_slots(&image) {
        assert_eq!(&slot[0..8], b"FLASHPFS");
        assert_eq!(slot[8], 6, "mkfs writes format version 6");
        assert_eq!(
            uuid_text(&slot[136..152]),
            identity_of(&store).expect("an identity"),
            "mkfs writes the store file's identity into the super block"
        );
        slot[8] = 3;
        slot[136..152].fill(0);
        slot[12..16].fill(0);
        let checksum = crc32c(&slot);
        slot[12..16].copy_from_slice(&checksum.to_le_bytes());
        image[offset..offset + 512].copy_from_slice(&slot);
    }
    std::fs::write(&image_path, &image).expect("a version-3 image without label");
    let version_1 = downgrade_to_version_1(&store);

    for arguments in [vec!["ls", text(&store)], vec!["fsck", text(&store)]] {
        succeed(&arguments);
    }
    assert_eq!(
        std::fs::read_to_string(&store).expect("store file"),
        version_1,
        "read-only opens leave the store file"
    );
    assert!(
        std::fs::read(&image_path).expect("image") == image,
        "read-only opens leave the image"
    );

    let data = folder.join("d.txt");
    std::fs::write(&data, b"data").expect("data");
    let output = flashpipe(&["put", text(&store), text(&data)]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("super block"),
        "the upgrade is noted: {stderr}"
    );
    let identity = identity_of(&store).expect("the store file has an identity now");
    let image = std::fs::read(&image_path).expect("image");
    let newest = newest_slot(&image);
    assert_eq!(newest[8], 6, "the first commit writes format version 6");
    assert_eq!(
        uuid_text(&newest[136..152]),
        identity,
        "the super block carries the store file's identity"
    );
    let listing = succeed(&["ls", text(&store)]);
    assert!(listing.contains("d.txt"), "{listing}");
    succeed(&["fsck", text(&store)]);
}
