//! `Engine::register_read_pool`: on a file device (io_uring, `O_DIRECT`) the engine's reads
//! then land in registered (fixed) buffers, views of its pool buffers, and every byte still
//! arrives where it belongs, with reads in flight together and commands queued before the
//! registration served first; on a device without registered buffers it is accepted and
//! changes nothing.

use flashpipe_device::file::{FileDevice, FileDeviceConfig, FileEngine};
use flashpipe_device::{IoBuf, RamDisk};
use flashpipe_engine::{Command, Engine, EngineConfig, Reply};
use flashpipe_testkit::formatted::format_fs;
use flashpipe_testkit::scratch::ScratchFolder;

const BLOCK_BYTES: u32 = 4096;
const FILE_BYTES: usize = 3 << 20;

fn pattern(length: usize) -> Vec<u8> {
    (0..length).map(|index| (index * 13 % 251) as u8).collect()
}

/// An engine on one 64 MiB device file in `folder`, io_uring with `O_DIRECT`.
fn engine_on_file(folder: &ScratchFolder) -> Engine {
    let device = FileDevice::open(FileDeviceConfig {
        path: folder.path().join("device.img"),
        block_size_bytes: BLOCK_BYTES,
        queue_depth: 32,
        create_size_bytes: Some(64 << 20),
        preallocate: false,
        engine: FileEngine::IoUring,
        direct_io: true,
        read_only: false,
    })
    .unwrap();
    Engine::start(
        format_fs(Box::new(device), BLOCK_BYTES),
        EngineConfig::default(),
    )
}

/// Creates `f` and writes the pattern, then registers the pool with the write queued
/// before it, then reads back spans of every shape 16 at a time and checks each.
fn check_reads_after_registering(engine: &Engine) {
    let expected = pattern(FILE_BYTES);
    let mut client = engine.client(32);
    client.call(Command::Create { name: "f".into() }).unwrap();
    client
        .submit(Command::Write {
            name: "f".into(),
            offset_bytes: 0,
            data: IoBuf::from_slice(&expected),
        })
        .unwrap();
    engine.register_read_pool().unwrap();
    engine.register_read_pool().unwrap();
    assert!(client.next_completion().unwrap().1.is_ok(), "the write");
    let spans: Vec<(u64, u64)> = (0..48u64)
        .map(|index| match index % 4 {
            0 => (index * 61 * 4096 % (FILE_BYTES as u64 - 4096), 4096),
            1 => (index * 7919 % 2_000_000, 10_000),
            2 => (index * 4096, 300_000),
            _ => (0, 1 << 20),
        })
        .collect();
    for batch in spans.chunks(16) {
        let tickets: Vec<_> = batch
            .iter()
            .map(|&(offset_bytes, length_bytes)| {
                let read = Command::Read {
                    name: "f".into(),
                    offset_bytes,
                    length_bytes,
                };
                (client.submit(read).unwrap(), offset_bytes, length_bytes)
            })
            .collect();
        for _ in &tickets {
            let (ticket, result) = client.next_completion().unwrap();
            let &(_, offset, length) = tickets.iter().find(|(t, _, _)| *t == ticket).unwrap();
            let Reply::Data(data) = result.unwrap() else {
                panic!("a read answered with something other than data");
            };
            let range = offset as usize..(offset + length) as usize;
            assert!(
                data.bytes() == &expected[range],
                "bytes at {offset}+{length}"
            );
        }
    }
}

#[test]
fn reads_on_a_registered_pool_return_the_file_s_bytes() {
    let folder = ScratchFolder::new("engine-registered-read-pool");
    let engine = engine_on_file(&folder);
    check_reads_after_registering(&engine);
    engine.shutdown().unwrap();
}

#[test]
fn a_device_without_registered_buffers_accepts_the_registration() {
    let disk = RamDisk::new("ram0", BLOCK_BYTES, 16_384, 32).unwrap();
    let engine = Engine::start(
        format_fs(Box::new(disk), BLOCK_BYTES),
        EngineConfig::default(),
    );
    check_reads_after_registering(&engine);
    engine.shutdown().unwrap();
}
