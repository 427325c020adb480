//! 1 KiB reads through the engine's hand-off alone, one at a time (default hand-off, RAM
//! disk): the "read 1 KiB" row of `flashpipe bench engine` without the rest of the
//! benchmark, to compare two builds side by side (docs/benchmarks.md, "One stack (the rest
//! of the redesign)"). Prints the fastest of five rounds' mean per read.
//!
//! `cargo run --release -p flashpipe-engine --example engine_reads [READS]`

use std::time::Instant;

use flashpipe_device::{IoBuf, RamDisk};
use flashpipe_engine::{Command, Engine, EngineConfig, Reply};
use flashpipe_fs::{Filesystem, FormatOptions};

const ROUNDS: u64 = 5;
const READ_BYTES: usize = 1024;

fn main() {
    let reads: u64 = match std::env::args().nth(1) {
        None => 200_000,
        Some(text) => text.parse().expect("READS is a whole number"),
    };
    let disk = RamDisk::new("ram0", 4096, 16_384, 32).expect("a 64 MiB RAM disk");
    let options = FormatOptions {
        fs_block_size_bytes: 4096,
        store_identity: None,
    };
    let filesystem = Filesystem::format(Box::new(disk), &options).expect("mkfs");
    let engine = Engine::start(filesystem, EngineConfig::default());
    let mut client = engine.client(8);
    let name = "file".to_string();
    client
        .call(Command::Create { name: name.clone() })
        .expect("create");
    client
        .call(Command::Write {
            name: name.clone(),
            offset_bytes: 0,
            data: IoBuf::zeroed(READ_BYTES),
        })
        .expect("write");
    let per_round = (reads / ROUNDS).max(1);
    let mut fastest_us = f64::MAX;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for _ in 0..per_round {
            let read = Command::Read {
                name: name.clone(),
                offset_bytes: 0,
                length_bytes: READ_BYTES as u64,
            };
            match client.call(read).expect("read") {
                Reply::Data(data) => assert_eq!(data.bytes().len(), READ_BYTES),
                _ => panic!("a read answered with something other than data"),
            }
        }
        fastest_us = fastest_us.min(started.elapsed().as_secs_f64() * 1e6 / per_round as f64);
    }
    println!("{fastest_us:.3} us per read");
    drop(client);
    engine.shutdown().expect("shutdown");
}
