//! A read into a caller's destination (`CommandSender::submit_read_into`): the file's
//! bytes land in the destination with no pool buffer taken, checksums verified there;
//! a read off a block or needing more room than the destination has is refused and
//! touches nothing.

use crossbeam_channel::bounded;
use flashpipe_device::{IoBuf, RamDisk};
use flashpipe_engine::{Command, Engine, EngineConfig, EngineError, ReadInto, Reply};
use flashpipe_testkit::formatted::format_fs;

const BLOCK_BYTES: u64 = 8192;

fn pattern(length: usize) -> Vec<u8> {
    (0..length).map(|index| (index * 13 % 251) as u8).collect()
}

/// An engine on a RAM disk of 8 KiB blocks holding `f` of `length` bytes.
fn engine_with_file(length: usize) -> Engine {
    let disk = RamDisk::new("ram0", 4096, 8192, 32).unwrap();
    let engine = Engine::start(
        format_fs(Box::new(disk), BLOCK_BYTES as u32),
        EngineConfig::default(),
    );
    let mut client = engine.client(4);
    client.call(Command::Create { name: "f".into() }).unwrap();
    let data = IoBuf::from_slice(&pattern(length));
    client
        .call(Command::Write {
            name: "f".into(),
            offset_bytes: 0,
            data,
        })
        .unwrap();
    engine
}

/// Reads `length` at `offset` of `f` into a fresh destination of `room` bytes filled
/// with 0xEE; the answer and the destination's bytes (the data's own buffer when read).
fn read_into(
    engine: &Engine,
    offset: u64,
    length: u64,
    room: usize,
) -> Result<Vec<u8>, EngineError> {
    let sender = engine.command_sender();
    assert_eq!(sender.block_bytes(), BLOCK_BYTES);
    let (answers_to, answers) = bounded(1);
    let mut destination = IoBuf::zeroed(room);
    destination.fill(0xEE);
    let read = ReadInto {
        name: "f".into(),
        offset_bytes: offset,
        length_bytes: length,
    };
    sender
        .submit_read_into(7, read, destination, &answers_to)
        .unwrap();
    let (ticket, result) = answers.recv().unwrap();
    assert_eq!(ticket, 7);
    match result? {
        Reply::Data(data) => {
            assert!(!data.is_pooled() && data.window_start() == 0);
            assert_eq!(data.len() as u64, length);
            Ok(data.bytes().to_vec())
        }
        other => panic!("a {} reply", other.name()),
    }
}

#[test]
fn a_read_into_a_destination_lands_the_files_bytes_and_takes_no_pool_buffer() {
    let length = 300_000;
    let engine = engine_with_file(length);
    let pool = engine.read_pool();
    let expected = pattern(length);
    let bytes = read_into(&engine, 2 * BLOCK_BYTES, 100_000, 106_496).unwrap();
    assert_eq!(bytes, expected[16384..116_384]);
    let tail = length as u64 - 32 * BLOCK_BYTES;
    let bytes = read_into(&engine, 32 * BLOCK_BYTES, tail, 8192 * 5).unwrap();
    assert_eq!(bytes, expected[32 * 8192..]);
    assert_eq!(pool.free_count(), pool.buffer_count() as usize);
}

#[test]
fn a_read_off_a_block_or_too_large_for_its_destination_is_refused() {
    let engine = engine_with_file(100_000);
    let unaligned = read_into(&engine, 4096, 4096, 8192).unwrap_err();
    assert!(matches!(
        unaligned,
        EngineError::ReadIntoUnaligned {
            block_bytes: 8192,
            ..
        }
    ));
    assert!(unaligned.to_string().contains("multiple of the block size"));
    let small = read_into(&engine, 0, 10_000, 12_288).unwrap_err();
    assert!(matches!(
        small,
        EngineError::DestinationTooSmall {
            span_bytes: 16384,
            destination_bytes: 12_288
        }
    ));
    let past_end = read_into(&engine, 0, 200_000, 204_800).unwrap_err();
    assert!(past_end.to_string().contains("past"), "{past_end}");
}
