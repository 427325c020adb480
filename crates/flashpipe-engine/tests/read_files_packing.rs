//! Batched whole-file reads ([`Command::ReadFiles`]) pack their files into as few engine pool
//! buffers as the blocks need, take at most [`READ_FILES_MAX_BUFFERS`] of them, and answer
//! the files past that limit [`EngineError::BatchBuffersFull`], untouched, so a later
//! command reads them; every file read is byte for byte what was written.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use flashpipe_device::{DeviceErrorKind, Operation, RamDisk, Request};
use flashpipe_engine::command::READ_FILES_MAX_BUFFERS;
use flashpipe_engine::{Command, Engine, EngineConfig, EngineError, ReadData, Reply};
use flashpipe_fs::Filesystem;
use flashpipe_testkit::formatted::format_fs;
use flashpipe_testkit::hooked::{Hooked, Hooks};

mod common;

use common::{check_packed, read_pool_config};

fn ram_filesystem(block_size_bytes: u32) -> Filesystem {
    let disk = RamDisk::new("ram0", 4096, 16384, 32).unwrap();
    format_fs(Box::new(disk), block_size_bytes)
}

fn pattern(length: usize, seed: u64) -> Vec<u8> {
    (0..length as u64)
        .map(|index| (index.wrapping_mul(0x9e37_79b9) ^ seed.wrapping_mul(31)) as u8)
        .collect()
}

fn write_file(client: &mut flashpipe_engine::EngineClient, name: &str, data: &[u8]) {
    client
        .write_stream(name, &mut &data[..], 1 << 16, 4, &mut |_| {})
        .unwrap();
}

fn read_files(
    client: &mut flashpipe_engine::EngineClient,
    names: &[String],
) -> Vec<Result<ReadData, EngineError>> {
    match client.call(Command::ReadFiles {
        names: names.to_vec(),
    }) {
        Ok(Reply::Files(files)) => files,
        other => panic!("read files answered {other:?}"),
    }
}

/// Tiny files on 16 KiB blocks with 16 KiB reads: three blocks fit a pool buffer, so a batch
/// of 64 files would need 22 buffers; it takes the limit, the rest come back left out, and
/// batches of what was left out read everything.
#[test]
fn a_batch_takes_at_most_its_buffer_limit_and_leaves_the_rest_out() {
    let engine = Engine::start(ram_filesystem(16384), read_pool_config(32, 16384));
    let mut client = engine.client(8);
    let names: Vec<String> = (0..64).map(|index| format!("tiny-{index:02}")).collect();
    for (index, name) in names.iter().enumerate() {
        write_file(&mut client, name, &pattern(100 + index, index as u64));
    }
    client.call(Command::Flush).unwrap();
    let mut unread = names.clone();
    let mut rounds = 0;
    while !unread.is_empty() {
        rounds += 1;
        assert!(rounds <= 64, "left-out files never got read");
        let batch = read_files(&mut client, &unread);
        let mut slots = BTreeSet::new();
        let mut left_out = Vec::new();
        for (name, entry) in unread.iter().zip(&batch) {
            match entry {
                Ok(data) => {
                    let index: usize = name["tiny-".len()..].parse().unwrap();
                    assert_eq!(
                        data.bytes(),
                        &pattern(100 + index, index as u64)[..],
                        "{name}"
                    );
                    slots.insert(data.pool_slot().expect("pooled"));
                }
                Err(EngineError::BatchBuffersFull { limit }) => {
                    assert_eq!(*limit, READ_FILES_MAX_BUFFERS);
                    left_out.push(name.clone());
                }
                Err(other) => panic!("{name}: {other}"),
            }
        }
        assert!(!slots.is_empty(), "a batch reads at least one file");
        assert!(
            slots.len() <= READ_FILES_MAX_BUFFERS,
            "{} buffers",
            slots.len()
        );
        if rounds == 1 {
            assert!(
                !left_out.is_empty(),
                "64 scattered spans fit the buffer limit"
            );
        }
        drop(batch);
        unread = left_out;
    }
    assert!(rounds > 1);
    engine.shutdown().unwrap();
}

/// Files that do not touch on the device (a spacer file written between each two) still
/// share pool buffers: each comes in its own device request into its place in a shared
/// buffer.
#[test]
fn files_apart_on_the_device_share_pool_buffers() {
    let engine = Engine::start(ram_filesystem(4096), EngineConfig::default());
    let mut client = engine.client(8);
    let mut names = Vec::new();
    for index in 0..40 {
        let name = format!("apart-{index:02}");
        write_file(&mut client, &name, &pattern(3000, index));
        write_file(
            &mut client,
            &format!("spacer-{index:02}"),
            &pattern(5000, 99),
        );
        names.push(name);
    }
    let batch = read_files(&mut client, &names);
    let expected = |index: usize, _: &str| pattern(3000, index as u64);
    check_packed(&names, &batch, expected, 10, "files apart");
    drop(batch);
    engine.shutdown().unwrap();
}

/// Counts the read requests a device is given.
struct CountingReads {
    reads: Arc<AtomicUsize>,
}

impl Hooks for CountingReads {
    fn before_submit(&mut self, request: &Request) -> Result<(), DeviceErrorKind> {
        if let Operation::Read { .. } = request.operation {
            self.reads.fetch_add(1, Ordering::AcqRel);
        }
        Ok(())
    }
}

/// Small files written one after another on FS blocks larger than the device's blocks
/// (16 KiB over 4 KiB) touch in FS blocks, so a batch reads them in a few device requests,
/// not one per file.
#[test]
fn adjacent_files_on_blocks_larger_than_the_device_s_share_requests() {
    let reads = Arc::new(AtomicUsize::new(0));
    let disk = Hooked::new(
        RamDisk::new("ram0", 4096, 16384, 32).unwrap(),
        CountingReads {
            reads: Arc::clone(&reads),
        },
    );
    let filesystem = format_fs(Box::new(disk), 16384);
    let engine = Engine::start(filesystem, EngineConfig::default());
    let mut client = engine.client(8);
    let names: Vec<String> = (0..100).map(|index| format!("small-{index:03}")).collect();
    for (index, name) in names.iter().enumerate() {
        write_file(&mut client, name, &pattern(2048, index as u64));
    }
    client.call(Command::Flush).unwrap();
    let reads_before = reads.load(Ordering::Acquire);
    let batch = read_files(&mut client, &names);
    let requests = reads.load(Ordering::Acquire) - reads_before;
    for (index, (name, entry)) in names.iter().zip(&batch).enumerate() {
        let data = entry
            .as_ref()
            .unwrap_or_else(|error| panic!("{name}: {error}"));
        assert_eq!(data.bytes(), &pattern(2048, index as u64)[..], "{name}");
    }
    assert!(
        requests * 10 <= names.len(),
        "{} adjacent files took {requests} device requests",
        names.len()
    );
    drop(batch);
    engine.shutdown().unwrap();
}
