//! The engine's write path: writes in flight together, batches overlapping, whole blocks
//! sent from the client's buffer without a copy, failures failing only their own writes.
//!
//! - a seeded model test: random writes (block-aligned multi-block ones with and without a
//!   partial last block, and writes at any offset, overlapping each other) from several
//!   clients through a [`SteppedEngine`] over a simulated disk whose jitter reorders
//!   completions, against an in-memory model, read back after every round and after a
//!   remount (fsck clean), on every write path;
//! - a write arriving while others are in the device queue is issued at once (batches
//!   overlap), where the batched path drains first;
//! - the client's buffer goes to the device as views and comes back, the same buffer, in
//!   `Reply::Written`; partial edge blocks keep the bytes around them;
//! - a device that fails some writes mid-batch: each failed write is answered with the
//!   error and changes nothing, the others land, and no block is leaked (free count back
//!   to where it started once the files are deleted; fsck clean after a remount).
//!
//! `FLASHPIPE_SEEDS=n` runs n seeds (default 12); `FLASHPIPE_SEED=n` replays one.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use flashpipe_device::{
    BlockDevice, Completion, DeviceError, DeviceErrorKind, IoBuf, Operation, Request, SplitMix64,
    TransferDirection,
};
use flashpipe_engine::{
    Command, EngineClient, EngineConfig, EngineError, Reply, SteppedEngine, WritePath,
};
use flashpipe_fs::Filesystem;
use flashpipe_testkit::hooked::{Hooked, Hooks, Served};
use flashpipe_testkit::seeds::run_seeds;

mod common;

use common::{
    apply, bytes_for, check_after_remount, format, new_world, run_and_collect, write_test_config,
    BLOCK_BYTES, MAX_READ_BYTES,
};

const FILE_NAMES: [&str; 4] = ["a", "b", "c", "d"];
const LARGEST_FILE_BYTES: u64 = 96 * BLOCK_BYTES;

fn engine_config(write_path: WritePath) -> EngineConfig {
    write_test_config(write_path, 128, 16)
}

/// A random write inside the largest file size: half of them block-aligned runs of whole
/// blocks (some with a partial last block), the rest at any offset and length.
fn draw_write(rng: &mut SplitMix64) -> (u64, usize) {
    if rng.below(2) == 0 {
        let first = rng.below(LARGEST_FILE_BYTES / BLOCK_BYTES - 1);
        let blocks = 1 + rng.below(24.min(LARGEST_FILE_BYTES / BLOCK_BYTES - first - 1));
        let tail = if rng.below(3) == 0 {
            rng.below(BLOCK_BYTES)
        } else {
            0
        };
        (first * BLOCK_BYTES, (blocks * BLOCK_BYTES + tail) as usize)
    } else {
        let offset = rng.below(LARGEST_FILE_BYTES - 1);
        let length = 1 + rng.below((LARGEST_FILE_BYTES - offset).min(3 * BLOCK_BYTES));
        (offset, length as usize)
    }
}

/// Submits `command` without blocking and steps the engine until it is answered.
fn call(engine: &mut SteppedEngine, client: &mut EngineClient, command: Command) -> Reply {
    let ticket = client.try_submit(command).expect("submit");
    engine.run_until_idle().expect("engine");
    let (answered, result) = client.try_next_completion().expect("answered");
    assert_eq!(answered, ticket);
    result.expect("command succeeds")
}

fn read_whole(engine: &mut SteppedEngine, client: &mut EngineClient, name: &str) -> Vec<u8> {
    let Reply::Stat(stat) = call(
        engine,
        client,
        Command::Stat {
            name: name.to_string(),
        },
    ) else {
        panic!("stat answers a stat")
    };
    let mut contents = Vec::new();
    while (contents.len() as u64) < stat.size_bytes {
        let length_bytes = MAX_READ_BYTES.min(stat.size_bytes - contents.len() as u64);
        let command = Command::Read {
            name: name.to_string(),
            offset_bytes: contents.len() as u64,
            length_bytes,
        };
        let Reply::Data(data) = call(engine, client, command) else {
            panic!("a read answers data")
        };
        contents.extend_from_slice(data.bytes());
    }
    contents
}

/// One seed of the model test on one write path.
fn model_seed(seed: u64, write_path: WritePath) {
    let world = new_world(seed);
    let disk = world.open_disk(0).expect("open disk");
    let mut engine = SteppedEngine::new(format(Box::new(disk)), engine_config(write_path));
    let mut clients: Vec<EngineClient> = (0..3).map(|_| engine.client(64)).collect();
    let mut rng = SplitMix64::new(seed ^ 0x0057_1235);
    let mut model: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
    for name in FILE_NAMES {
        call(
            &mut engine,
            &mut clients[0],
            Command::Create {
                name: name.to_string(),
            },
        );
        model.insert(name, Vec::new());
    }
    for round in 0..12 {
        let mut submitted = Vec::new();
        for _ in 0..1 + rng.below(40) {
            let client = rng.below(clients.len() as u64) as usize;
            let name = FILE_NAMES[rng.below(FILE_NAMES.len() as u64) as usize];
            let (offset, length) = draw_write(&mut rng);
            let bytes = bytes_for(&mut rng, length);
            apply(model.get_mut(name).expect("model file"), offset, &bytes);
            let data = IoBuf::from_slice(&bytes);
            let address = data.as_ptr() as usize;
            let ticket = clients[client]
                .try_submit(Command::Write {
                    name: name.to_string(),
                    offset_bytes: offset,
                    data,
                })
                .unwrap_or_else(|error| panic!("seed {seed}: submit: {error}"));
            submitted.push((client, ticket, address, bytes));
        }
        if round % 4 == 3 {
            clients[0].try_submit(Command::Flush).expect("submit flush");
        }
        let mut replies = run_and_collect(&mut engine, &mut clients);
        for (client, ticket, address, bytes) in submitted {
            let reply = replies.remove(&(client, ticket));
            let Some(Ok(Reply::Written { buffer })) = reply else {
                panic!("seed {seed} {write_path:?}: a write answered {reply:?}");
            };
            assert_eq!(
                buffer.as_ptr() as usize,
                address,
                "seed {seed}: the client's own buffer comes back"
            );
            assert!(buffer[..] == bytes[..], "seed {seed}: the buffer is intact");
        }
        for name in FILE_NAMES {
            let found = read_whole(&mut engine, &mut clients[1], name);
            assert!(
                found == model[name],
                "seed {seed} {write_path:?} round {round}: file {name} differs from the model"
            );
        }
    }
    check_after_remount(seed, engine, &model);
}

#[test]
fn random_overlapping_writes_match_a_model_on_every_write_path() {
    for write_path in [
        WritePath::Overlapped,
        WritePath::OverlappedAfterReads,
        WritePath::OverlappedCopying,
        WritePath::Batched,
    ] {
        run_seeds(12, |seed| model_seed(seed, write_path));
    }
}

/// The hooks of a device that records, for each write request whose buffer starts with
/// `marker`, how many requests were in flight when it was submitted, and once `armed`,
/// runs `on_first_completion` when it first reaps a completion.
struct Probe {
    marker: u8,
    in_flight_at_marked_submit: Arc<Mutex<Vec<usize>>>,
    armed: Arc<AtomicBool>,
    on_first_completion: Option<Box<dyn FnOnce() + Send>>,
}

impl Hooks for Probe {
    fn serve(&mut self, device: &mut dyn BlockDevice, request: Request) -> Served {
        if let Operation::Write { buffer, .. } = &request.operation {
            if buffer[0] == self.marker {
                let in_flight = device.in_flight();
                self.in_flight_at_marked_submit
                    .lock()
                    .expect("probe lock")
                    .push(in_flight);
            }
        }
        device.submit(request).map(|()| None)
    }

    fn reaped(&mut self, completions: &mut [Completion]) {
        if !completions.is_empty() && self.armed.load(Ordering::SeqCst) {
            if let Some(action) = self.on_first_completion.take() {
                action();
            }
        }
    }
}

/// Streams 16 whole-block writes, and a 17th arrives when the first of their completions
/// is reaped: returns how many requests were in flight when the 17th's request went to
/// the device, and checks that every write landed.
fn late_write_in_flight_count(write_path: WritePath) -> usize {
    const MARKER: u8 = 0xA5;
    const WRITE_BYTES: usize = 8 * BLOCK_BYTES as usize;
    let world = new_world(7);
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let armed = Arc::new(AtomicBool::new(false));
    let late_client: Arc<Mutex<Option<EngineClient>>> = Arc::new(Mutex::new(None));
    let late_for_probe = Arc::clone(&late_client);
    let probe = Probe {
        marker: MARKER,
        in_flight_at_marked_submit: Arc::clone(&recorded),
        armed: Arc::clone(&armed),
        on_first_completion: Some(Box::new(move || {
            let mut late = late_for_probe.lock().expect("lock");
            late.as_mut()
                .expect("the late client is there")
                .try_submit(Command::Write {
                    name: "f".to_string(),
                    offset_bytes: 16 * WRITE_BYTES as u64,
                    data: IoBuf::from_slice(&[MARKER; WRITE_BYTES]),
                })
                .expect("late submit");
        })),
    };
    let disk = world.open_disk(0).expect("open disk");
    let mut filesystem = format(Box::new(Hooked::new(disk, probe)));
    filesystem.create("f").expect("create");
    filesystem.flush().expect("flush");
    let mut engine = SteppedEngine::new(filesystem, engine_config(write_path));
    let mut client = engine.client(32);
    *late_client.lock().expect("lock") = Some(engine.client(4));
    for index in 0..16u8 {
        client
            .try_submit(Command::Write {
                name: "f".to_string(),
                offset_bytes: u64::from(index) * WRITE_BYTES as u64,
                data: IoBuf::from_slice(&[index; WRITE_BYTES]),
            })
            .expect("submit");
    }
    armed.store(true, Ordering::SeqCst);
    engine.run_until_idle().expect("engine");
    for _ in 0..16 {
        let (_, result) = client.try_next_completion().expect("answered");
        assert!(matches!(result, Ok(Reply::Written { .. })), "{result:?}");
    }
    let contents = read_whole(&mut engine, &mut client, "f");
    assert_eq!(contents.len(), 17 * WRITE_BYTES);
    for (index, chunk) in contents.chunks(WRITE_BYTES).enumerate() {
        let expected = if index == 16 { MARKER } else { index as u8 };
        assert!(chunk.iter().all(|&byte| byte == expected), "write {index}");
    }
    let recorded = recorded.lock().expect("lock").clone();
    assert_eq!(recorded.len(), 1, "the late write is one request");
    recorded[0]
}

#[test]
fn a_write_arriving_while_others_are_in_the_device_queue_joins_them() {
    let overlapped = late_write_in_flight_count(WritePath::Overlapped);
    assert!(
        overlapped > 0,
        "the late write is issued while earlier writes are in the device queue"
    );
    let batched = late_write_in_flight_count(WritePath::Batched);
    assert_eq!(
        batched, 0,
        "the batched path drains the device before the next batch"
    );
}

/// The hooks of a device that fails each write request with probability
/// `failure_per_mille` / 1000 (seeded) while `armed`: the request is accepted and
/// completes with `InjectedFault`, leaving the disk unchanged, as a failing drive would
/// mid-batch.
struct FailingWrites {
    rng: SplitMix64,
    failure_per_mille: u64,
    armed: Arc<AtomicBool>,
    failures: Arc<AtomicUsize>,
}

impl Hooks for FailingWrites {
    fn serve(&mut self, device: &mut dyn BlockDevice, request: Request) -> Served {
        if device.in_flight() >= device.info().queue_depth as usize {
            return Err(device.info().queue_full(request));
        }
        let fails = matches!(request.operation, Operation::Write { .. })
            && self.armed.load(Ordering::SeqCst)
            && self.rng.below(1000) < self.failure_per_mille;
        if !fails {
            return device.submit(request).map(|()| None);
        }
        self.failures.fetch_add(1, Ordering::SeqCst);
        let tag = request.tag;
        let Operation::Write {
            first_block,
            buffer,
        } = &request.operation
        else {
            unreachable!("only writes fail")
        };
        let info = device.info();
        let kind = DeviceErrorKind::InjectedFault {
            direction: TransferDirection::Write,
            first_block: *first_block,
            end_block: first_block + (buffer.len() / info.block_size_bytes as usize) as u64,
        };
        let error = DeviceError::new(&info.name, kind);
        Ok(Some(Completion {
            tag,
            status: Err(error),
            buffer: request.into_buffer(),
        }))
    }
}

fn failing_device_seed(seed: u64) {
    let world = new_world(seed);
    let armed = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(AtomicUsize::new(0));
    let hooks = FailingWrites {
        rng: SplitMix64::new(seed ^ 0xFA11),
        failure_per_mille: 150,
        armed: Arc::clone(&armed),
        failures: Arc::clone(&failures),
    };
    let disk = world.open_disk(0).expect("open disk");
    let mut filesystem = format(Box::new(Hooked::new(disk, hooks)));
    filesystem.flush().expect("flush");
    let free_blocks_at_start = filesystem.stats().free_blocks;
    let mut engine = SteppedEngine::new(filesystem, engine_config(WritePath::Overlapped));
    let mut client = engine.client(64);
    let mut rng = SplitMix64::new(seed);
    let mut model: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
    for name in FILE_NAMES {
        let create = Command::Create {
            name: name.to_string(),
        };
        call(&mut engine, &mut client, create);
        model.insert(name, Vec::new());
    }
    let (mut failed_writes, mut landed_writes) = (0, 0);
    for round in 0..10 {
        // Each write of a round has a slot of 24 blocks of its own, so no write of a round
        // touches another's block, and (after the flush that ends each round) none
        // overwrites a block in place.
        let mut submitted = Vec::new();
        for slot in 0..16u64 {
            if rng.below(3) == 0 {
                continue;
            }
            let name = FILE_NAMES[(slot % 4) as usize];
            let slot_start = slot / 4 * 24 * BLOCK_BYTES;
            let offset = slot_start + rng.below(2) * rng.below(4 * BLOCK_BYTES);
            let length = 1 + rng.below(slot_start + 24 * BLOCK_BYTES - offset - 1);
            let bytes = bytes_for(&mut rng, length as usize);
            let ticket = client
                .try_submit(Command::Write {
                    name: name.to_string(),
                    offset_bytes: offset,
                    data: IoBuf::from_slice(&bytes),
                })
                .expect("submit");
            submitted.push((ticket, name, offset, bytes));
        }
        armed.store(true, Ordering::SeqCst);
        engine.run_until_idle().expect("engine");
        armed.store(false, Ordering::SeqCst);
        let mut replies = BTreeMap::new();
        while let Some((ticket, result)) = client.try_next_completion() {
            replies.insert(ticket, result);
        }
        for (ticket, name, offset, bytes) in submitted {
            match replies.remove(&ticket) {
                Some(Ok(Reply::Written { .. })) => {
                    landed_writes += 1;
                    apply(model.get_mut(name).expect("model file"), offset, &bytes);
                }
                Some(Err(EngineError::FileIo(error))) => {
                    failed_writes += 1;
                    assert!(
                        error.to_string().contains("sim0"),
                        "seed {seed}: the error names the device: {error}"
                    );
                }
                other => panic!("seed {seed}: a write answered {other:?}"),
            }
        }
        for name in FILE_NAMES {
            let found = read_whole(&mut engine, &mut client, name);
            assert!(
                found == model[name],
                "seed {seed} round {round}: {name} differs from the model"
            );
        }
        call(&mut engine, &mut client, Command::Flush);
    }
    assert!(
        failed_writes > 0 && landed_writes > 0,
        "seed {seed}: {failed_writes} writes failed, {landed_writes} landed ({} requests failed)",
        failures.load(Ordering::SeqCst)
    );
    let filesystem = engine.shutdown().expect("shutdown");
    let mut remounted = Filesystem::mount(filesystem.unmount().expect("unmount")).expect("mount");
    let report = remounted.check().expect("fsck");
    assert!(report.is_clean(), "seed {seed}: {:#?}", report.findings);
    for name in FILE_NAMES {
        let file = remounted.open(name).expect("open");
        let size = remounted.stat(file).expect("stat").size_bytes;
        assert!(remounted.read(file, 0, size).expect("read")[..] == model[name][..]);
        remounted.delete(name).expect("delete");
    }
    remounted.flush().expect("flush");
    remounted.flush().expect("flush again");
    assert_eq!(
        remounted.stats().free_blocks,
        free_blocks_at_start,
        "seed {seed}: every block is free again: none leaked by a failed write"
    );
}

#[test]
fn a_device_failing_writes_mid_batch_fails_them_alone_and_leaks_no_block() {
    run_seeds(12, failing_device_seed);
}
