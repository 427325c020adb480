//! Test helpers shared by the integration tests: a RAM disk that several owners can hold
//! at once (so a test can damage the image under a file system and mount it again), and
//! block-level peek and poke.

#![allow(dead_code)]

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use flashpipe_device::{
    run_one, BlockDevice, Clock, Completion, DeviceError, DeviceInfo, IoBuf, Operation, RamDisk,
    Rejected, Request,
};
use flashpipe_fs::layout::{
    checksum_with_field_zeroed, open_metadata_block, read_u64, seal_metadata_block, write_u32,
    MetadataHeader, MetadataKind, METADATA_HEADER_BYTES,
};
use flashpipe_fs::{fsck, FileId, Filesystem, Structure};

/// A RAM disk behind a mutex; clones share the image.
#[derive(Clone)]
pub struct SharedDisk {
    inner: Arc<Mutex<RamDisk>>,
    info: DeviceInfo,
}

impl SharedDisk {
    /// A zero-filled shared RAM disk.
    pub fn new(block_size_bytes: u32, block_count: u64) -> SharedDisk {
        let disk = RamDisk::new("shared0", block_size_bytes, block_count, 64).expect("RAM disk");
        let info = disk.info().clone();
        SharedDisk {
            inner: Arc::new(Mutex::new(disk)),
            info,
        }
    }

    /// A boxed handle on the same image.
    pub fn boxed(&self) -> Box<dyn BlockDevice> {
        Box::new(self.clone())
    }

    /// Reads `length` bytes at `byte_offset` (device-block aligned).
    pub fn peek(&self, byte_offset: u64, length: usize) -> Vec<u8> {
        let mut handle = self.clone();
        let block = byte_offset / u64::from(self.info.block_size_bytes);
        let completion = run_one(
            &mut handle,
            Operation::Read {
                first_block: block,
                buffer: IoBuf::zeroed(length),
            },
        )
        .expect("peek");
        completion.buffer.expect("buffer").to_vec()
    }

    /// Writes `bytes` at `byte_offset` (device-block aligned, whole blocks).
    pub fn poke(&self, byte_offset: u64, bytes: &[u8]) {
        let mut handle = self.clone();
        let block = byte_offset / u64::from(self.info.block_size_bytes);
        run_one(
            &mut handle,
            Operation::Write {
                first_block: block,
                buffer: IoBuf::from_slice(bytes),
            },
        )
        .expect("poke");
    }

    /// A copy of the whole image on a new, independent shared disk of `block_count`
    /// blocks (the copy is cut or zero-padded to fit).
    pub fn copy_to(&self, block_count: u64) -> SharedDisk {
        let copy = SharedDisk::new(self.info.block_size_bytes, block_count);
        let blocks = block_count.min(self.info.block_count);
        let bytes = self.peek(0, (blocks * u64::from(self.info.block_size_bytes)) as usize);
        copy.poke(0, &bytes);
        copy
    }

    /// Every byte of the image.
    pub fn image(&self) -> Vec<u8> {
        self.peek(
            0,
            (self.info.block_count * u64::from(self.info.block_size_bytes)) as usize,
        )
    }
}

/// A shared disk of 4096 blocks of 4 KiB and the file system formatted on it with 4 KiB
/// blocks (the opening of the attribute and shared-block tests).
pub fn formatted_4k() -> (SharedDisk, Filesystem) {
    let shared = SharedDisk::new(4096, 4096);
    let fs = flashpipe_testkit::formatted::format_fs(shared.boxed(), 4096);
    (shared, fs)
}

/// Creates `name` holding `pattern(length, seed)` (not flushed).
pub fn write_new(fs: &mut Filesystem, name: &str, length: usize, seed: u64) -> FileId {
    let file = fs.create(name).unwrap();
    fs.write(file, 0, &pattern(length, seed)).unwrap();
    file
}

/// The whole content of `file`.
pub fn read_file(fs: &mut Filesystem, file: FileId) -> Vec<u8> {
    let size = fs.stat(file).expect("stat").size_bytes;
    if size == 0 {
        return Vec::new();
    }
    fs.read(file, 0, size).expect("read").to_vec()
}

/// The whole content of the file `name`.
pub fn read_named(fs: &mut Filesystem, name: &str) -> Vec<u8> {
    let file = fs.open(name).expect("open");
    read_file(fs, file)
}

/// Unmounts `fs` and mounts its image on `shared` again, read-write; the check finds it
/// clean.
pub fn remount_clean(fs: Filesystem, shared: &SharedDisk) -> Filesystem {
    drop(fs.unmount().unwrap());
    let mut fs = Filesystem::mount(shared.boxed()).unwrap();
    assert!(fs.check().unwrap().is_clean());
    fs
}

/// Mounts `shared` read-only for `look`, then runs fsck without repairs: fsck finds the
/// image clean and neither of them writes a byte of it.
pub fn read_only_and_fsck_write_nothing(shared: &SharedDisk, look: impl FnOnce(&mut Filesystem)) {
    let image_before = shared.image();
    let mut read_only = Filesystem::mount_read_only(shared.boxed()).unwrap();
    look(&mut read_only);
    drop(read_only.unmount().unwrap());
    assert!(fsck(&mut *shared.boxed(), false).unwrap().is_clean());
    assert!(
        shared.image() == image_before,
        "read-only mounts and fsck write nothing"
    );
}

impl BlockDevice for SharedDisk {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.inner.lock().expect("lock").clock()
    }

    fn submit(&mut self, request: Request) -> Result<(), Rejected> {
        self.inner.lock().expect("lock").submit(request)
    }

    fn poll_completions(&mut self, completions: &mut Vec<Completion>) -> usize {
        self.inner
            .lock()
            .expect("lock")
            .poll_completions(completions)
    }

    fn wait_completions(
        &mut self,
        completions: &mut Vec<Completion>,
    ) -> Result<usize, DeviceError> {
        self.inner
            .lock()
            .expect("lock")
            .wait_completions(completions)
    }

    fn in_flight(&self) -> usize {
        self.inner.lock().expect("lock").in_flight()
    }
}

/// Deterministic test bytes.
pub fn pattern(length: usize, seed: u64) -> Vec<u8> {
    let mut generator = flashpipe_device::SplitMix64::new(seed);
    (0..length).map(|_| generator.next_u64() as u8).collect()
}

/// The FS block size of the images whose super blocks [`rewrite_super_block`] changes.
const SUPER_BLOCK_SLOT_BYTES: u64 = 4096;

/// Rewrites the super block in `slot` (0 or 1) of an image with 4 KiB FS blocks, when
/// there is one: `change` edits its bytes, then its checksum is sealed again. Returns
/// whether there was one.
pub fn rewrite_super_block(shared: &SharedDisk, slot: u64, change: impl FnOnce(&mut [u8])) -> bool {
    let offset = slot * SUPER_BLOCK_SLOT_BYTES;
    let mut bytes = shared.peek(offset, SUPER_BLOCK_SLOT_BYTES as usize);
    if &bytes[0..8] != b"FLASHPFS" {
        return false;
    }
    change(&mut bytes);
    let checksum = checksum_with_field_zeroed(&bytes[..512], 12);
    write_u32(&mut bytes, 12, checksum);
    shared.poke(offset, &bytes);
    true
}

/// Rewrites both super block slots (those there are) as format version `version`, `change`
/// editing each first (fields that version does not have, zeroed).
pub fn downgrade_super_blocks(shared: &SharedDisk, version: u32, change: impl Fn(&mut [u8])) {
    for slot in 0..2 {
        rewrite_super_block(shared, slot, |bytes| {
            change(bytes);
            write_u32(bytes, 8, version);
        });
    }
}

/// The newest super block slot's bytes (4 KiB FS blocks): the one `fs` committed last.
pub fn newest_super_block(shared: &SharedDisk, fs: &Filesystem) -> Vec<u8> {
    let slot = fs.stats().commit_sequence % 2;
    shared.peek(
        slot * SUPER_BLOCK_SLOT_BYTES,
        SUPER_BLOCK_SLOT_BYTES as usize,
    )
}

/// Turns the version-3 checkpoint (with an empty log) of `super_block` into the
/// version-1/2 layout: the map stops listing the log region, whose blocks go back to the
/// (single-block) free list, and the super block's log fields become reserved zeros.
pub fn drop_log_region(fs: &Filesystem, shared: &SharedDisk, super_block: &mut [u8]) {
    let block_size = u64::from(fs.stats().fs_block_size_bytes);
    let region_blocks = read_u64(super_block, 112) as usize;
    assert_eq!(
        read_u64(super_block, 120),
        0,
        "a checkpoint with an empty log"
    );
    let block_of = |wanted: Structure| {
        let found: Vec<u64> = fs
            .metadata_blocks()
            .into_iter()
            .filter(|entry| entry.0 == wanted)
            .map(|entry| entry.1)
            .collect();
        assert_eq!(found.len(), 1, "{wanted} fits one block in this test");
        found[0]
    };
    let map_block = block_of(Structure::CheckpointMap);
    let mut map = shared.peek(map_block * block_size, block_size as usize);
    let map_header = open_metadata_block(&map, MetadataKind::Map, u64::MAX).unwrap();
    let listed = map_header.entry_count as usize;
    let region: Vec<u64> = (listed - region_blocks..listed)
        .map(|index| read_u64(&map, METADATA_HEADER_BYTES + 8 * index))
        .collect();
    map[METADATA_HEADER_BYTES + 8 * (listed - region_blocks)..].fill(0);
    let map_header = MetadataHeader {
        entry_count: (listed - region_blocks) as u32,
        payload_bytes: 8 * (listed - region_blocks) as u32,
        ..map_header
    };
    seal_metadata_block(&mut map, &map_header);
    shared.poke(map_block * block_size, &map);

    let free_block = block_of(Structure::FreeList);
    let mut free = shared.peek(free_block * block_size, block_size as usize);
    let free_header = open_metadata_block(&free, MetadataKind::FreeList, u64::MAX).unwrap();
    let mut blocks: Vec<u64> = (0..free_header.entry_count as usize)
        .flat_map(|index| {
            let offset = METADATA_HEADER_BYTES + 16 * index;
            let first = read_u64(&free, offset);
            first..first + read_u64(&free, offset + 8)
        })
        .chain(region)
        .collect();
    blocks.sort_unstable();
    let mut extents: Vec<(u64, u64)> = Vec::new();
    for block in blocks.iter().copied() {
        match extents.last_mut() {
            Some(last) if last.0 + last.1 == block => last.1 += 1,
            _ => extents.push((block, 1)),
        }
    }
    free[METADATA_HEADER_BYTES..].fill(0);
    for (index, &(first, count)) in extents.iter().enumerate() {
        let offset = METADATA_HEADER_BYTES + 16 * index;
        free[offset..offset + 8].copy_from_slice(&first.to_le_bytes());
        free[offset + 8..offset + 16].copy_from_slice(&count.to_le_bytes());
    }
    let free_header = MetadataHeader {
        entry_count: extents.len() as u32,
        payload_bytes: 16 * extents.len() as u32,
        ..free_header
    };
    seal_metadata_block(&mut free, &free_header);
    shared.poke(free_block * block_size, &free);
    super_block[56..64].copy_from_slice(&(blocks.len() as u64).to_le_bytes());
    super_block[104..112].copy_from_slice(&(extents.len() as u64).to_le_bytes());
    super_block[112..136].fill(0);
}

/// The blocks of `structure` in the file system's metadata.
pub fn blocks_of(fs: &Filesystem, structure: Structure) -> Vec<u64> {
    fs.metadata_blocks()
        .into_iter()
        .filter(|entry| entry.0 == structure)
        .map(|entry| entry.1)
        .collect()
}

/// A file system of `fs_block_bytes` blocks formatted on a fresh shared RAM disk (4096
/// blocks of 512 bytes) with `hooks` seeing every request.
pub fn format_hooked<H: flashpipe_testkit::hooked::Hooks + 'static>(
    hooks: H,
    fs_block_bytes: u32,
) -> Filesystem {
    let disk = flashpipe_testkit::hooked::Hooked::new(SharedDisk::new(512, 4096), hooks);
    flashpipe_testkit::formatted::format_fs(Box::new(disk), fs_block_bytes)
}

/// [`format_hooked`] with hooks made around a new switch (off), returned beside the file
/// system: the test turns the hooks' failures on and off with it.
pub fn format_switched<H: flashpipe_testkit::hooked::Hooks + 'static>(
    hooks_of: impl FnOnce(Arc<AtomicBool>) -> H,
    fs_block_bytes: u32,
) -> (Filesystem, Arc<AtomicBool>) {
    let switch = Arc::new(AtomicBool::new(false));
    let fs = format_hooked(hooks_of(Arc::clone(&switch)), fs_block_bytes);
    (fs, switch)
}
