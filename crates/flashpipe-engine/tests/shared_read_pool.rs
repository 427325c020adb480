//! An engine whose read pool lives in shared memory (`PoolMemory::Shared`): its answers'
//! bytes are visible, without a copy, at `slot * buffer_size_bytes + window_start` of a
//! second mapping of the pool's memfd, as a client process would map it.

use flashpipe_device::{IoBuf, RamDisk, SplitMix64};
use flashpipe_engine::{Command, Engine, EngineClient, EngineConfig, PoolMemory, ReadData, Reply};
use flashpipe_fs::Filesystem;
use flashpipe_shm::{MapAccess, SharedMapping};
use flashpipe_testkit::formatted::format_fs;

fn ram_filesystem() -> Filesystem {
    let disk = RamDisk::new("ram0", 4096, 8192, 32).unwrap();
    format_fs(Box::new(disk), 4096)
}

fn drawn_bytes(length_bytes: usize, seed: u64) -> Vec<u8> {
    let mut generator = SplitMix64::new(seed);
    (0..length_bytes)
        .map(|_| generator.next_u64() as u8)
        .collect()
}

fn read(client: &mut EngineClient, name: &str, offset_bytes: u64, length_bytes: u64) -> ReadData {
    match client
        .call(Command::Read {
            name: name.to_string(),
            offset_bytes,
            length_bytes,
        })
        .unwrap()
    {
        Reply::Data(data) => data,
        other => panic!("read answered {other:?}"),
    }
}

#[test]
fn reads_of_a_shared_pool_are_seen_in_a_second_mapping() {
    let config = EngineConfig {
        read_buffer_count: 4,
        max_read_bytes: 64 * 1024,
        read_pool_memory: PoolMemory::Shared,
        ..EngineConfig::default()
    };
    let engine = Engine::start(ram_filesystem(), config);
    assert!(engine.shared_read_pool_refusal().is_none());
    let pool = engine.read_pool();
    let memory = pool
        .shared_memory()
        .expect("the read pool is in shared memory");
    let region_bytes = memory.size_bytes();
    assert_eq!(
        region_bytes,
        pool.buffer_count() as usize * pool.buffer_size_bytes()
    );
    let fd = memory.as_fd().try_clone_to_owned().unwrap();
    let mapping = SharedMapping::map(fd, region_bytes, MapAccess::ReadOnly).unwrap();

    let mut client = engine.client(8);
    let contents = drawn_bytes(100_000, 14);
    client
        .call(Command::Create {
            name: "shared".to_string(),
        })
        .unwrap();
    client
        .call(Command::Write {
            name: "shared".to_string(),
            offset_bytes: 0,
            data: IoBuf::from_slice(&contents),
        })
        .unwrap();
    // Unaligned starts and lengths, so windows start inside their buffers; all held at
    // once, so they occupy different slots.
    let windows = [(0u64, 4096u64), (5, 10_000), (30_001, 65_536), (99_999, 1)];
    let held: Vec<ReadData> = windows
        .iter()
        .map(|&(offset, length)| read(&mut client, "shared", offset, length))
        .collect();
    for (data, &(offset, length)) in held.iter().zip(&windows) {
        let (pool_id, slot) = data.pool_slot().expect("engine reads are pooled");
        assert_eq!(pool_id, pool.pool_id());
        let start = slot as usize * pool.buffer_size_bytes() + data.window_start();
        let seen = mapping.bytes(start, data.len()).unwrap();
        let expected = &contents[offset as usize..(offset + length) as usize];
        assert_eq!(seen, expected, "read of {length} bytes at {offset}");
        assert_eq!(data.bytes(), expected);
    }
    drop(held);
    drop(client);
    engine.shutdown().unwrap();
}

#[test]
fn a_heap_pool_has_no_shared_memory() {
    let engine = Engine::start(ram_filesystem(), EngineConfig::default());
    assert_eq!(EngineConfig::default().read_pool_memory, PoolMemory::Heap);
    assert!(engine.read_pool().shared_memory().is_none());
    assert!(engine.shared_read_pool_refusal().is_none());
    engine.shutdown().unwrap();
}
