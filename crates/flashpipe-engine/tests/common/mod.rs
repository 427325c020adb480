//! What the engine's tests share: a simulated disk whose jitter reorders completions,
//! formatting, drawn bytes and the in-memory model the write-path tests are checked
//! against; the read-pool configuration and the packing check of the batched-read tests.

#![allow(dead_code)] // each test file uses the helpers it needs

use flashpipe_device::sim::{SimDiskConfig, SimWorld};
use flashpipe_device::{BlockDevice, SplitMix64};
use std::collections::{BTreeMap, BTreeSet, HashMap};

use flashpipe_engine::{
    EngineClient, EngineConfig, EngineError, ReadData, Reply, SteppedEngine, Ticket, WritePath,
};
use flashpipe_fs::Filesystem;
use flashpipe_testkit::formatted::format_fs;

/// The FS and device block size of these tests.
pub const BLOCK_BYTES: u64 = 4096;
/// Blocks of the simulated disk.
pub const DISK_BLOCKS: u64 = 16384;
/// Largest read one command may ask for in these tests.
pub const MAX_READ_BYTES: u64 = 64 * 1024;

/// A world with one simulated disk: 60 us of jitter, 4 requests at once, 16 queued.
pub fn new_world(seed: u64) -> SimWorld {
    let world = SimWorld::new(seed);
    let mut config = SimDiskConfig::default_for_tests("sim0", BLOCK_BYTES as u32, DISK_BLOCKS);
    config.latency_jitter_ns = 60_000;
    config.parallelism = 4;
    config.queue_depth = 16;
    world.add_disk(config).expect("disk");
    world
}

/// `device` formatted with [`BLOCK_BYTES`] blocks.
pub fn format(device: Box<dyn BlockDevice>) -> Filesystem {
    format_fs(device, BLOCK_BYTES as u32)
}

/// `length` bytes drawn from `rng` (a pattern, so a misplaced block shows).
pub fn bytes_for(rng: &mut SplitMix64, length: usize) -> Vec<u8> {
    let fill = rng.next_u64();
    (0..length)
        .map(|index| (fill >> (index % 8 * 8)) as u8 ^ (index / 7) as u8)
        .collect()
}

/// The model after writing `bytes` at `offset`.
pub fn apply(model: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    let end = offset as usize + bytes.len();
    if model.len() < end {
        model.resize(end, 0);
    }
    model[offset as usize..end].copy_from_slice(bytes);
}

/// Stops `engine`, remounts its file system and checks it: fsck clean, and every file of
/// `model` holding exactly the model's bytes.
pub fn check_after_remount(seed: u64, engine: SteppedEngine, model: &BTreeMap<&str, Vec<u8>>) {
    let filesystem = engine.shutdown().expect("shutdown");
    let mut remounted = Filesystem::mount(filesystem.unmount().expect("unmount")).expect("mount");
    let report = remounted.check().expect("fsck");
    assert!(report.is_clean(), "seed {seed}: {:#?}", report.findings);
    for (name, expected) in model {
        let file = remounted.open(name).expect("open");
        let size = remounted.stat(file).expect("stat").size_bytes;
        let found = remounted.read(file, 0, size).expect("read");
        assert!(
            found[..] == expected[..],
            "seed {seed}: {name} after remount"
        );
    }
}

/// The default engine with a read pool of `buffer_count` buffers of `max_read_bytes`.
pub fn read_pool_config(buffer_count: u32, max_read_bytes: usize) -> EngineConfig {
    EngineConfig {
        read_buffer_count: buffer_count,
        max_read_bytes,
        ..EngineConfig::default()
    }
}

/// The write tests' engine: `write_path`, `command_queue_capacity` commands queued,
/// `read_buffer_count` pool buffers of [`MAX_READ_BYTES`], 8 reads in flight.
pub fn write_test_config(
    write_path: WritePath,
    command_queue_capacity: usize,
    read_buffer_count: u32,
) -> EngineConfig {
    EngineConfig {
        command_queue_capacity,
        reads_in_flight_limit: 8,
        write_path,
        ..read_pool_config(read_buffer_count, MAX_READ_BYTES as usize)
    }
}

/// Checks that each of a batch's files (answers in the order of `names`) holds
/// `expected(index, name)` and came in a pool buffer, and that at least
/// `files_per_buffer` files shared each buffer on average; `what` says which files.
pub fn check_packed<N: AsRef<str>>(
    names: &[N],
    batch: &[Result<ReadData, EngineError>],
    expected: impl Fn(usize, &str) -> Vec<u8>,
    files_per_buffer: usize,
    what: &str,
) {
    let mut slots = BTreeSet::new();
    for (index, (name, entry)) in names.iter().zip(batch).enumerate() {
        let name = name.as_ref();
        let data = entry
            .as_ref()
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        assert_eq!(data.bytes(), &expected(index, name)[..], "{name}");
        slots.insert(data.pool_slot().expect("pooled"));
    }
    assert!(
        slots.len() * files_per_buffer <= names.len(),
        "{} {what} came in {} buffers",
        names.len(),
        slots.len()
    );
}

/// Runs the engine until idle and takes every client's completions, by client index and
/// ticket.
pub fn run_and_collect(
    engine: &mut SteppedEngine,
    clients: &mut [EngineClient],
) -> HashMap<(usize, Ticket), Result<Reply, EngineError>> {
    engine.run_until_idle().expect("engine");
    let mut replies = HashMap::new();
    for (index, client) in clients.iter_mut().enumerate() {
        while let Some((ticket, result)) = client.try_next_completion() {
            replies.insert((index, ticket), result);
        }
    }
    replies
}
