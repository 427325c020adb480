//! Reads and writes in flight together in the engine.
//!
//! - a seeded model test: rounds of interleaved writes (aligned and unaligned, some
//!   reading old edge blocks first), single reads at random offsets and whole-file batched
//!   reads (`ReadFiles`) from several clients, submitted together to a [`SteppedEngine`]
//!   over a simulated disk whose jitter reorders completions. Commands are served in
//!   arrival order, so a model updated in submission order predicts every read's bytes
//!   exactly (read-your-writes for each client, and nothing of a later write shows
//!   early); final contents checked after a remount (fsck clean);
//! - a read of a file without a write in flight goes to the device while another file's
//!   writes are still in flight there, and a write of another file goes to the device
//!   while reads are in flight (the two streams overlap instead of alternating), where
//!   `WritePath::OverlappedAfterReads` (kept for comparison) never overlaps them.
//!
//! The model test runs on both of those write paths.
//!
//! `FLASHPIPE_SEEDS=n` runs n seeds (default 12); `FLASHPIPE_SEED=n` replays one.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use flashpipe_device::{BlockDevice, Completion, IoBuf, Operation, Request, SplitMix64};
use flashpipe_engine::{Command, EngineClient, EngineConfig, Reply, SteppedEngine, WritePath};
use flashpipe_testkit::hooked::{Hooked, Hooks, Served};
use flashpipe_testkit::seeds::run_seeds;

mod common;

use common::{
    apply, bytes_for, check_after_remount, format, new_world, run_and_collect, write_test_config,
    BLOCK_BYTES,
};

const FILE_NAMES: [&str; 5] = ["a", "b", "c", "d", "e"];
const LARGEST_FILE_BYTES: u64 = 12 * BLOCK_BYTES;
const CLIENT_COUNT: usize = 4;
/// Most names in one drawn `ReadFiles`: each file takes at most one of the batch's four
/// pool buffers then, so none is left out.
const READ_FILES_MOST_NAMES: u64 = 3;

fn engine_config(write_path: WritePath) -> EngineConfig {
    write_test_config(write_path, 256, 64)
}

/// A random write inside the largest file size: whole aligned blocks half of the time,
/// otherwise any offset and length (a partial edge block over data is read first).
fn draw_write(rng: &mut SplitMix64) -> (u64, usize) {
    let block_count = LARGEST_FILE_BYTES / BLOCK_BYTES;
    if rng.below(2) == 0 {
        let first = rng.below(block_count);
        let blocks = 1 + rng.below(block_count - first);
        (first * BLOCK_BYTES, (blocks * BLOCK_BYTES) as usize)
    } else {
        let offset = rng.below(LARGEST_FILE_BYTES - 1);
        let length = 1 + rng.below((LARGEST_FILE_BYTES - offset).min(2 * BLOCK_BYTES));
        (offset, length as usize)
    }
}

/// What a submitted command must be answered with.
enum Expected {
    Written,
    Data(Vec<u8>),
    Files(Vec<Vec<u8>>),
}

/// Draws one command for a client and what the model says it returns.
fn draw_command(
    rng: &mut SplitMix64,
    model: &mut BTreeMap<&'static str, Vec<u8>>,
) -> (Command, Expected) {
    let name = FILE_NAMES[rng.below(FILE_NAMES.len() as u64) as usize];
    let size_bytes = model[name].len() as u64;
    match rng.below(5) {
        0 | 1 => {
            let (offset, length) = draw_write(rng);
            let bytes = bytes_for(rng, length);
            apply(model.get_mut(name).expect("model file"), offset, &bytes);
            let command = Command::Write {
                name: name.to_string(),
                offset_bytes: offset,
                data: IoBuf::from_slice(&bytes),
            };
            (command, Expected::Written)
        }
        2 | 3 if size_bytes > 0 => {
            let offset = rng.below(size_bytes);
            let length = 1 + rng.below(size_bytes - offset);
            let expected = model[name][offset as usize..(offset + length) as usize].to_vec();
            let command = Command::Read {
                name: name.to_string(),
                offset_bytes: offset,
                length_bytes: length,
            };
            (command, Expected::Data(expected))
        }
        _ => {
            let count = 1 + rng.below(READ_FILES_MOST_NAMES) as usize;
            let names: Vec<&str> = (0..count)
                .map(|_| FILE_NAMES[rng.below(FILE_NAMES.len() as u64) as usize])
                .collect();
            let expected = names.iter().map(|name| model[name].clone()).collect();
            let command = Command::ReadFiles {
                names: names.iter().map(|name| name.to_string()).collect(),
            };
            (command, Expected::Files(expected))
        }
    }
}

fn check_reply(seed: u64, what: &str, reply: Option<Reply>, expected: Expected) {
    match (reply, expected) {
        (Some(Reply::Written { .. }), Expected::Written) => {}
        (Some(Reply::Data(data)), Expected::Data(bytes)) => {
            assert!(
                data.bytes() == &bytes[..],
                "seed {seed}: {what} read stale or wrong bytes"
            );
        }
        (Some(Reply::Files(files)), Expected::Files(expected)) => {
            assert_eq!(files.len(), expected.len(), "seed {seed}: {what}");
            for (index, (file, bytes)) in files.into_iter().zip(expected).enumerate() {
                let data = file
                    .unwrap_or_else(|error| panic!("seed {seed}: {what} file {index}: {error}"));
                assert!(
                    data.bytes() == &bytes[..],
                    "seed {seed}: {what} file {index} read stale or wrong bytes"
                );
            }
        }
        (reply, _) => panic!("seed {seed}: {what} answered {reply:?}"),
    }
}

fn model_seed(seed: u64, write_path: WritePath) {
    let world = new_world(seed);
    let disk = world.open_disk(0).expect("open disk");
    let mut filesystem = format(Box::new(disk));
    let mut model: BTreeMap<&'static str, Vec<u8>> = BTreeMap::new();
    for name in FILE_NAMES {
        filesystem.create(name).expect("create");
        model.insert(name, Vec::new());
    }
    filesystem.flush().expect("flush");
    let mut engine = SteppedEngine::new(filesystem, engine_config(write_path));
    let mut clients: Vec<EngineClient> = (0..CLIENT_COUNT).map(|_| engine.client(64)).collect();
    let mut rng = SplitMix64::new(seed ^ 0x0e71_a9ed);
    for round in 0..10 {
        let mut submitted = Vec::new();
        for _ in 0..1 + rng.below(48) {
            let client = rng.below(CLIENT_COUNT as u64) as usize;
            let (command, expected) = draw_command(&mut rng, &mut model);
            let ticket = clients[client]
                .try_submit(command)
                .unwrap_or_else(|error| panic!("seed {seed}: submit: {error}"));
            submitted.push((client, ticket, expected));
        }
        if round % 3 == 2 {
            clients[0].try_submit(Command::Flush).expect("submit flush");
        }
        let mut replies = run_and_collect(&mut engine, &mut clients);
        for (number, (client, ticket, expected)) in submitted.into_iter().enumerate() {
            let reply = replies
                .remove(&(client, ticket))
                .map(|result| result.unwrap_or_else(|error| panic!("seed {seed}: {error}")));
            let what = format!("{write_path:?} round {round} command {number} (client {client})");
            check_reply(seed, &what, reply, expected);
        }
    }
    check_after_remount(seed, engine, &model);
}

#[test]
fn interleaved_reads_and_writes_from_several_clients_match_a_model() {
    for write_path in [WritePath::Overlapped, WritePath::OverlappedAfterReads] {
        run_seeds(12, |seed| model_seed(seed, write_path));
    }
}

/// What the probe saw: for each request submitted, whether it was a write, and how many
/// read and write requests were in flight then.
#[derive(Default)]
struct Seen {
    reads_submitted_beside_writes: usize,
    writes_submitted_beside_reads: usize,
}

/// The hooks of a device that counts the read and write requests in flight (by tag) and
/// records, at each submission, whether the other kind was in flight.
#[derive(Default)]
struct Probe {
    kinds_by_tag: HashMap<u64, (bool, usize)>,
    reads_in_flight: usize,
    writes_in_flight: usize,
    seen: Arc<Mutex<Seen>>,
}

impl Hooks for Probe {
    fn serve(&mut self, device: &mut dyn BlockDevice, request: Request) -> Served {
        let is_write = matches!(request.operation, Operation::Write { .. });
        let tag = request.tag;
        device.submit(request)?;
        let mut seen = self.seen.lock().expect("probe lock");
        if is_write && self.reads_in_flight > 0 {
            seen.writes_submitted_beside_reads += 1;
        }
        if !is_write && self.writes_in_flight > 0 {
            seen.reads_submitted_beside_writes += 1;
        }
        let entry = self.kinds_by_tag.entry(tag).or_insert((is_write, 0));
        if entry.1 == 0 {
            entry.0 = is_write;
        }
        assert_eq!(
            entry.0, is_write,
            "a tag in flight for a read and a write at once"
        );
        entry.1 += 1;
        if is_write {
            self.writes_in_flight += 1;
        } else {
            self.reads_in_flight += 1;
        }
        Ok(None)
    }

    fn reaped(&mut self, completions: &mut [Completion]) {
        for completion in completions {
            let Some((is_write, count)) = self.kinds_by_tag.get_mut(&completion.tag) else {
                panic!("a completion of a submitted tag");
            };
            *count -= 1;
            if *is_write {
                self.writes_in_flight -= 1;
            } else {
                self.reads_in_flight -= 1;
            }
        }
    }
}

/// A kernel's shape: one client reads input files while another writes result files.
/// Returns how many reads went to the device beside writes in flight, and how many writes
/// beside reads in flight.
fn kernel_shaped_overlap(write_path: WritePath) -> (usize, usize) {
    const FILE_BYTES: usize = 8 * BLOCK_BYTES as usize;
    let world = new_world(11);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let probe = Probe {
        seen: Arc::clone(&seen),
        ..Probe::default()
    };
    let disk = world.open_disk(0).expect("open disk");
    let mut filesystem = format(Box::new(Hooked::new(disk, probe)));
    for index in 0..8 {
        let input = filesystem.create(&format!("in{index}")).expect("create");
        filesystem
            .write(input, 0, &vec![index as u8; FILE_BYTES])
            .expect("write input");
        filesystem.create(&format!("out{index}")).expect("create");
    }
    filesystem.flush().expect("flush");
    let mut engine = SteppedEngine::new(filesystem, engine_config(write_path));
    let mut reader = engine.client(16);
    let mut writer = engine.client(16);
    for index in 0..8u8 {
        writer
            .try_submit(Command::Write {
                name: format!("out{index}"),
                offset_bytes: 0,
                data: IoBuf::from_slice(&vec![0x80 | index; FILE_BYTES]),
            })
            .expect("submit write");
        reader
            .try_submit(Command::Read {
                name: format!("in{index}"),
                offset_bytes: 0,
                length_bytes: FILE_BYTES as u64,
            })
            .expect("submit read");
    }
    engine.run_until_idle().expect("engine");
    for _ in 0..8 {
        let (_, reply) = reader.try_next_completion().expect("read answered");
        let Reply::Data(data) = reply.expect("read succeeds") else {
            panic!("a read answers data")
        };
        let first = data.bytes()[0];
        assert!(data.bytes().iter().all(|&byte| byte == first));
        let (_, reply) = writer.try_next_completion().expect("write answered");
        assert!(matches!(reply, Ok(Reply::Written { .. })));
    }
    let seen = seen.lock().expect("probe lock");
    (
        seen.reads_submitted_beside_writes,
        seen.writes_submitted_beside_reads,
    )
}

#[test]
fn reads_of_other_files_overlap_writes_in_flight() {
    let (reads_beside_writes, writes_beside_reads) = kernel_shaped_overlap(WritePath::Overlapped);
    assert!(
        reads_beside_writes > 0,
        "no read went to the device while writes were in flight"
    );
    assert!(
        writes_beside_reads > 0,
        "no write went to the device while reads were in flight"
    );
}

#[test]
fn the_alternating_write_path_never_overlaps_reads_and_writes() {
    assert_eq!(
        kernel_shaped_overlap(WritePath::OverlappedAfterReads),
        (0, 0)
    );
}
