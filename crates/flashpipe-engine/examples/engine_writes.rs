//! Whole-file writes through the engine, as `flashpipe bench fs --parts efficiency` times
//! them (Create, the bytes in Write commands of at most 1 MiB with 32 outstanding, Flush),
//! on one RAM disk, over and over: the driver to profile the write path under `perf`
//! without the rest of the benchmark (docs/design/27-write-floor.md). Each file is deleted
//! after its round so the disk never fills. Prints the fastest and the median time per file,
//! and the median of each phase (the Create's round trip, the writes until the last is
//! answered, the Flush's round trip with its commit).
//!
//! `cargo run --release -p flashpipe-engine --example engine_writes [FILE_BYTES [BLOCK_BYTES [FILES]]]`
//! (defaults: 1048576 4096 2000)

use std::time::{Duration, Instant};

use flashpipe_device::{IoBuf, RamDisk};
use flashpipe_engine::{Command, Engine, EngineClient, EngineConfig, Reply};
use flashpipe_fs::{Filesystem, FormatOptions};

/// Bytes per Write command (the benchmark's).
const COMMAND_BYTES: usize = 1 << 20;
/// Write commands outstanding (the benchmark's).
const COMMANDS_IN_FLIGHT: usize = 32;
/// RAM disk size.
const DISK_BYTES: u64 = 256 << 20;

fn argument(index: usize, default: u64, what: &str) -> u64 {
    match std::env::args().nth(index) {
        None => default,
        Some(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("{what} is a whole number, not {text}")),
    }
}

fn main() {
    let file_bytes = argument(1, 1 << 20, "FILE_BYTES") as usize;
    let block_bytes = argument(2, 4096, "BLOCK_BYTES") as u32;
    let files = argument(3, 2000, "FILES");
    let keep = std::env::args().nth(4).as_deref() == Some("keep");
    assert!(
        (file_bytes as u64) * 2 < DISK_BYTES,
        "FILE_BYTES must be under half the 256 MiB disk"
    );
    let disk = RamDisk::new("ram0", block_bytes, DISK_BYTES / u64::from(block_bytes), 32)
        .expect("a 256 MiB RAM disk");
    let options = FormatOptions {
        fs_block_size_bytes: block_bytes,
        store_identity: None,
    };
    let filesystem = Filesystem::format(Box::new(disk), &options).expect("mkfs");
    let engine = Engine::start(filesystem, EngineConfig::default());
    let mut client = engine.client(64);
    let mut buffers = file_buffers(file_bytes);
    let mut times: Vec<Phases> = Vec::with_capacity(files as usize);
    for round in 0..files {
        let name = format!("file-{round}");
        times.push(write_file(&mut client, &name, &mut buffers));
        if !keep {
            client.call(Command::Delete { name }).expect("delete");
        }
    }
    drop(client);
    engine.shutdown().expect("engine shutdown");
    let mut totals: Vec<Duration> = times.iter().map(Phases::total).collect();
    totals.sort();
    let micros = |duration: Duration| duration.as_secs_f64() * 1e6;
    println!(
        "{files} files of {file_bytes} bytes on {block_bytes}-byte blocks: fastest {:.1} us, median {:.1} us",
        micros(totals[0]),
        micros(totals[totals.len() / 2])
    );
    let median = |phase: fn(&Phases) -> Duration| {
        let mut values: Vec<Duration> = times.iter().map(phase).collect();
        values.sort();
        micros(values[values.len() / 2])
    };
    println!(
        "medians: create {:.1} us, writes {:.1} us, flush {:.1} us",
        median(|phases| phases.create),
        median(|phases| phases.writes),
        median(|phases| phases.flush)
    );
}

/// The phases of one file's write.
struct Phases {
    create: Duration,
    writes: Duration,
    flush: Duration,
}

impl Phases {
    fn total(&self) -> Duration {
        self.create + self.writes + self.flush
    }
}

/// The file's bytes in buffers of at most 1 MiB, filled (so their pages are mapped);
/// reused by every file, as the engine hands each write's buffer back.
fn file_buffers(file_bytes: usize) -> Vec<IoBuf> {
    (0..file_bytes.div_ceil(COMMAND_BYTES))
        .map(|index| {
            let length = COMMAND_BYTES.min(file_bytes - index * COMMAND_BYTES);
            let mut buffer = IoBuf::zeroed(length);
            buffer.fill((index as u8).wrapping_mul(31) | 1);
            buffer
        })
        .collect()
}

/// Create + writes + flush of one file, timed from the first submit; the buffers come
/// back in `buffers` (in completion order: every file is written with the same bytes
/// per buffer length, which is all the profile needs).
fn write_file(client: &mut EngineClient, name: &str, buffers: &mut Vec<IoBuf>) -> Phases {
    let started = Instant::now();
    client
        .call(Command::Create {
            name: name.to_string(),
        })
        .expect("create");
    let created = Instant::now();
    let mut offset_bytes = 0;
    let mut returned = Vec::with_capacity(buffers.len());
    for data in buffers.drain(..) {
        if client.outstanding() >= COMMANDS_IN_FLIGHT {
            returned.push(expect_written(client));
        }
        let length = data.len() as u64;
        client
            .submit(Command::Write {
                name: name.to_string(),
                offset_bytes,
                data,
            })
            .expect("submit");
        offset_bytes += length;
    }
    while client.outstanding() > 0 {
        returned.push(expect_written(client));
    }
    let written = Instant::now();
    client.call(Command::Flush).expect("flush");
    let flushed = Instant::now();
    *buffers = returned;
    Phases {
        create: created - started,
        writes: written - created,
        flush: flushed - written,
    }
}

fn expect_written(client: &mut EngineClient) -> IoBuf {
    match client.next_completion().expect("a completion").1 {
        Ok(Reply::Written { buffer }) => buffer,
        Ok(_) => panic!("a write answered with something other than Written"),
        Err(error) => panic!("a write failed: {error}"),
    }
}
