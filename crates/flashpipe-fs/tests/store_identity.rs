//! The store identity in the super block (format version 4, docs/format.md, "Super
//! block"): written by mkfs, read by a mount, kept by log commits, checkpoints and
//! `fsck --repair`; given to a version-3 image by its first read-write commit; a
//! read-only mount of an older image changes nothing; every refusal of
//! `set_store_identity` changes nothing.

mod support;

use flashpipe_fs::layout::{read_u32, FORMAT_VERSION};
use flashpipe_fs::{fsck, Filesystem, FormatError, FormatOptions, StoreIdentityError, Structure};
use support::{pattern, SharedDisk};

const BLOCK_SIZE: u64 = 4096;
const DISK_BLOCKS: u64 = 2048;
const IDENTITY: [u8; 16] = [
    0x6b, 0x1e, 0x35, 0x0c, 0x9d, 0x22, 0x4f, 0x71, 0x83, 0x10, 0x5a, 0xee, 0x04, 0x2b, 0x99, 0xc7,
];
const OTHER_IDENTITY: [u8; 16] = [0x42; 16];

fn format(shared: &SharedDisk, store_identity: Option<[u8; 16]>) -> Filesystem {
    Filesystem::format(
        shared.boxed(),
        &FormatOptions {
            fs_block_size_bytes: BLOCK_SIZE as u32,
            store_identity,
        },
    )
    .expect("format")
}

fn slot_bytes(shared: &SharedDisk, slot: u64) -> Vec<u8> {
    shared.peek(slot * BLOCK_SIZE, BLOCK_SIZE as usize)
}

/// The whole image, read 64 blocks at a time.
fn whole_image(shared: &SharedDisk) -> Vec<u8> {
    (0..DISK_BLOCKS / 64)
        .flat_map(|chunk| shared.peek(chunk * 64 * BLOCK_SIZE, 64 * BLOCK_SIZE as usize))
        .collect()
}

fn newest_slot(fs: &Filesystem) -> u64 {
    fs.stats().commit_sequence % 2
}

/// The version and identity bytes of the super block the last commit wrote.
fn newest_version_and_identity(shared: &SharedDisk, fs: &Filesystem) -> (u32, Vec<u8>) {
    let bytes = slot_bytes(shared, newest_slot(fs));
    (read_u32(&bytes, 8), bytes[136..152].to_vec())
}

/// Rewrites both super block slots as format version 3 (identity bytes zero, as a
/// version-3 image has them: they are reserved there).
fn downgrade_to_version_3(shared: &SharedDisk) {
    support::downgrade_super_blocks(shared, 3, |bytes| bytes[136..152].fill(0));
}

#[test]
fn mkfs_writes_the_identity_and_every_kind_of_commit_keeps_it() {
    let shared = SharedDisk::new(BLOCK_SIZE as u32, DISK_BLOCKS);
    let mut fs = format(&shared, Some(IDENTITY));
    assert_eq!(fs.store_identity(), Some(IDENTITY));
    assert_eq!(
        newest_version_and_identity(&shared, &fs),
        (FORMAT_VERSION, IDENTITY.to_vec())
    );

    let file = fs.create("a").unwrap();
    fs.write(file, 0, &pattern(3 * BLOCK_SIZE as usize, 1))
        .unwrap();
    fs.flush().unwrap();
    assert!(fs.metadata_log_fill().log_record_count > 0, "a log commit");
    assert_eq!(
        newest_version_and_identity(&shared, &fs),
        (FORMAT_VERSION, IDENTITY.to_vec())
    );
    fs.create("b").unwrap();
    fs.flush_checkpoint().unwrap();
    assert_eq!(fs.metadata_log_fill().log_record_count, 0, "a checkpoint");
    assert_eq!(
        newest_version_and_identity(&shared, &fs),
        (FORMAT_VERSION, IDENTITY.to_vec())
    );
    drop(fs.unmount().unwrap());

    let fs = Filesystem::mount(shared.boxed()).unwrap();
    assert_eq!(fs.store_identity(), Some(IDENTITY));
    drop(fs);
    let fs = Filesystem::mount_read_only(shared.boxed()).unwrap();
    assert_eq!(fs.store_identity(), Some(IDENTITY));
    drop(fs);
    let report = fsck(&mut *shared.boxed(), false).unwrap();
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.store_identity, Some(IDENTITY));
}

#[test]
fn fsck_repair_keeps_the_identity() {
    let shared = SharedDisk::new(BLOCK_SIZE as u32, DISK_BLOCKS);
    let mut fs = format(&shared, Some(IDENTITY));
    let file = fs.create("kept").unwrap();
    fs.write(file, 0, &pattern(BLOCK_SIZE as usize, 2)).unwrap();
    fs.flush_checkpoint().unwrap();
    let free_list = fs
        .metadata_blocks()
        .into_iter()
        .find(|&(structure, _)| structure == Structure::FreeList)
        .map(|(_, block)| block)
        .expect("a free list block");
    drop(fs.unmount().unwrap());
    let mut block = shared.peek(free_list * BLOCK_SIZE, BLOCK_SIZE as usize);
    block[100] ^= 0x01;
    shared.poke(free_list * BLOCK_SIZE, &block);

    let report = fsck(&mut *shared.boxed(), true).unwrap();
    assert!(!report.repaired.is_empty(), "{report}");
    let fs = Filesystem::mount(shared.boxed()).unwrap();
    assert_eq!(fs.store_identity(), Some(IDENTITY));
    for slot in 0..2 {
        let bytes = slot_bytes(&shared, slot);
        assert_eq!(read_u32(&bytes, 8), FORMAT_VERSION, "slot {slot}");
        assert_eq!(&bytes[136..152], &IDENTITY, "slot {slot}");
    }
}

#[test]
fn a_version_3_image_mounts_and_its_first_commit_writes_version_4_with_the_identity() {
    let shared = SharedDisk::new(BLOCK_SIZE as u32, DISK_BLOCKS);
    let mut fs = format(&shared, None);
    let file = fs.create("old").unwrap();
    fs.write(file, 0, &pattern(2 * BLOCK_SIZE as usize, 3))
        .unwrap();
    fs.flush().unwrap();
    drop(fs.unmount().unwrap());
    downgrade_to_version_3(&shared);
    let image_before = whole_image(&shared);

    let mut read_only = Filesystem::mount_read_only(shared.boxed()).unwrap();
    assert_eq!(read_only.store_identity(), None);
    assert!(matches!(
        read_only.set_store_identity(IDENTITY),
        Err(StoreIdentityError::ReadOnly)
    ));
    let old = read_only.open("old").unwrap();
    assert_eq!(
        read_only.read(old, 0, 2 * BLOCK_SIZE).unwrap()[..],
        pattern(2 * BLOCK_SIZE as usize, 3)[..]
    );
    drop(read_only.unmount().unwrap());
    assert!(
        whole_image(&shared) == image_before,
        "a read-only mount of an older image writes nothing"
    );

    let mut fs = Filesystem::mount(shared.boxed()).unwrap();
    assert_eq!(fs.store_identity(), None);
    assert!(matches!(
        fs.set_store_identity([0; 16]),
        Err(StoreIdentityError::Zero)
    ));
    fs.set_store_identity(IDENTITY).unwrap();
    fs.set_store_identity(IDENTITY)
        .expect("the same identity again changes nothing");
    assert!(matches!(
        fs.set_store_identity(OTHER_IDENTITY),
        Err(StoreIdentityError::Different { .. })
    ));
    assert_eq!(fs.store_identity(), Some(IDENTITY));
    fs.flush().unwrap();
    assert_eq!(
        newest_version_and_identity(&shared, &fs),
        (FORMAT_VERSION, IDENTITY.to_vec()),
        "the next commit writes the current version with the identity"
    );
    fs.write(fs.open("old").unwrap(), 0, b"new").unwrap();
    fs.flush().unwrap();
    assert_eq!(
        newest_version_and_identity(&shared, &fs),
        (FORMAT_VERSION, IDENTITY.to_vec())
    );
    drop(fs.unmount().unwrap());

    let mut fs = Filesystem::mount(shared.boxed()).unwrap();
    assert_eq!(fs.store_identity(), Some(IDENTITY));
    assert!(fs.check().unwrap().is_clean());
    let old = fs.open("old").unwrap();
    assert_eq!(&fs.read(old, 0, 3).unwrap()[..], b"new");
    let error = fs.set_store_identity(OTHER_IDENTITY).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("6b1e350c-9d22-4f71-8310-5aee042b99c7")
            && message.contains("42424242-4242-4242-4242-424242424242"),
        "the refusal names both identities: {message}"
    );
}

#[test]
fn mkfs_refuses_an_all_zero_identity() {
    let shared = SharedDisk::new(BLOCK_SIZE as u32, DISK_BLOCKS);
    let result = Filesystem::format(
        shared.boxed(),
        &FormatOptions {
            fs_block_size_bytes: BLOCK_SIZE as u32,
            store_identity: Some([0; 16]),
        },
    );
    assert!(matches!(result, Err(FormatError::ZeroStoreIdentity)));
    assert!(
        shared
            .peek(0, 2 * BLOCK_SIZE as usize)
            .iter()
            .all(|&byte| byte == 0),
        "nothing written"
    );
}
