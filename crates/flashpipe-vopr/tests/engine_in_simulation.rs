//! The engine inside the deterministic simulation: a [`SteppedEngine`] and several
//! clients on one thread over a simulated disk (`flashpipe_device::sim`), so a run is a
//! function of its seed.
//!
//! The campaign: per seed, rounds of random commands from three clients (create, write at
//! offsets, truncate, delete, rename over, read, read whole files, flush) are submitted
//! together and the engine is
//! stepped until idle; the engine serves commands in arrival order, so a model updated in
//! submission order predicts every reply. Power fails after a random number of device
//! requests; the engine stops, the disk restarts, the file system is mounted again, fsck
//! must be clean and the files must be those of the last acknowledged flush (or of the
//! flush the crash interrupted). Then a new engine goes on over the remounted file system,
//! for three crashes per seed. A second test checks that reads from several clients are
//! in flight on the device together.
//!
//! The commands are drawn by the VOPR campaign's workload ([`flashpipe_vopr::workload`]),
//! so both runs draw the same commands from the same seed.
//!
//! `FLASHPIPE_SEEDS=n` runs n seeds (default 60); `FLASHPIPE_SEED=n` replays one.

use std::collections::HashMap;

use flashpipe_device::sim::{SimDiskConfig, SimWorld};
use flashpipe_device::SplitMix64;
use flashpipe_engine::{Command, EngineClient, EngineError, Reply, StepOutcome, SteppedEngine};
use flashpipe_fs::{Filesystem, FormatOptions};
use flashpipe_testkit::formatted::format_fs;
use flashpipe_testkit::fs_workload::{check_clean, contents, describe, Model};
use flashpipe_testkit::seeds::run_seeds;
use flashpipe_vopr::workload::{draw_command, Expected, BLOCK_BYTES};

const CLIENT_COUNT: usize = 3;
const CLIENT_OUTSTANDING_LIMIT: usize = 16;
const CRASHES_PER_SEED: usize = 3;
const ROUNDS_BEFORE_A_FORCED_CRASH: usize = 40;

use flashpipe_vopr::campaign::ENGINE_CONFIG;

fn new_world(seed: u64) -> SimWorld {
    let world = SimWorld::new(seed);
    let mut config = SimDiskConfig::default_for_tests("sim0", BLOCK_BYTES as u32, 4096);
    config.latency_jitter_ns = 40_000;
    config.parallelism = 4;
    world.add_disk(config).expect("disk");
    world
}

fn mount(world: &SimWorld, seed: u64, when: &str) -> Filesystem {
    let disk = world.open_disk(0).expect("open disk");
    let mut fs = Filesystem::mount(Box::new(disk))
        .unwrap_or_else(|error| panic!("seed {seed}: mount {when}: {error}"));
    check_clean(&mut fs, seed, when);
    fs
}

/// One submitted command, in submission order.
struct Submitted {
    client: usize,
    ticket: u64,
    what: String,
    expected: Expected,
}

/// How the checks of one round ended.
struct RoundEnd {
    /// The first command that failed (or was never answered) has been seen: power failed.
    crashed: bool,
    /// The flush the crash interrupted, if the first failed command was a flush.
    interrupted_flush: Option<Model>,
}

/// Checks every reply against its expectation, in submission order, up to the first
/// command that failed or was never answered; updates `committed` at each flush.
fn check_round(
    submitted: Vec<Submitted>,
    mut replies: HashMap<(usize, u64), Result<Reply, EngineError>>,
    committed: &mut Model,
    world: &SimWorld,
    seed: u64,
) -> RoundEnd {
    for command in submitted {
        let reply = replies.remove(&(command.client, command.ticket));
        let reply = match reply {
            Some(Ok(reply)) => reply,
            failed => {
                assert!(
                    world.is_crashed(),
                    "seed {seed}: {} failed without a crash: {:?}",
                    command.what,
                    failed.map(|result| result.err())
                );
                let interrupted_flush = match command.expected {
                    Expected::Flushed(model) => Some(model),
                    _ => None,
                };
                return RoundEnd {
                    crashed: true,
                    interrupted_flush,
                };
            }
        };
        match (command.expected, reply) {
            (Expected::Done, Reply::Done) | (Expected::Written, Reply::Written { .. }) => {}
            (Expected::Data(expected), Reply::Data(data)) => assert!(
                data.bytes() == expected.as_slice(),
                "seed {seed}: {} returned other bytes than the model",
                command.what
            ),
            (Expected::Files(expected), Reply::Files(files)) => {
                assert_eq!(files.len(), expected.len(), "seed {seed}: {}", command.what);
                for (found, expected) in files.into_iter().zip(expected) {
                    let Ok(found) = found else {
                        assert!(
                            world.is_crashed(),
                            "seed {seed}: {} failed a file without a crash: {:?}",
                            command.what,
                            found.err()
                        );
                        return RoundEnd {
                            crashed: true,
                            interrupted_flush: None,
                        };
                    };
                    assert!(
                        found.bytes() == expected.as_slice(),
                        "seed {seed}: {} returned other bytes than the model",
                        command.what
                    );
                }
            }
            (Expected::Flushed(model), Reply::Done) => *committed = model,
            (_, reply) => panic!("seed {seed}: {} replied {reply:?}", command.what),
        }
    }
    RoundEnd {
        crashed: false,
        interrupted_flush: None,
    }
}

/// Every reply that has arrived, by (client, ticket).
fn collect_replies(
    clients: &mut [EngineClient],
) -> HashMap<(usize, u64), Result<Reply, EngineError>> {
    let mut replies = HashMap::new();
    for (index, client) in clients.iter_mut().enumerate() {
        while let Some((ticket, result)) = client.try_next_completion() {
            replies.insert((index, ticket), result);
        }
    }
    replies
}

flashpipe_testkit::tally! {
    /// What a campaign went through.
    struct Tally {
        crashes: u64, crashes_forced_after_the_last_round: u64, crashes_in_a_flush: u64,
        interrupted_flushes_found_durable: u64, commands_answered: u64,
    }
}

/// Rounds of commands until power fails (forced after a while); returns the files of the
/// last acknowledged flush and the flush the crash interrupted.
fn run_until_crash(
    fs: Filesystem,
    start: Model,
    world: &SimWorld,
    rng: &mut SplitMix64,
    seed: u64,
    tally: &mut Tally,
) -> (Model, Option<Model>) {
    let mut engine = SteppedEngine::new(fs, ENGINE_CONFIG);
    let mut clients: Vec<EngineClient> = (0..CLIENT_COUNT)
        .map(|_| engine.client(CLIENT_OUTSTANDING_LIMIT))
        .collect();
    let mut model = start.clone();
    let mut committed = start;
    world.crash_after_requests(rng.below(400));
    for _ in 0..ROUNDS_BEFORE_A_FORCED_CRASH {
        let mut submitted = Vec::new();
        for _ in 0..1 + rng.below(12) {
            let client = rng.below(CLIENT_COUNT as u64) as usize;
            let (command, what, expected) = draw_command(rng, &mut model);
            let ticket = clients[client]
                .try_submit(command)
                .unwrap_or_else(|error| panic!("seed {seed}: submit {what}: {error}"));
            submitted.push(Submitted {
                client,
                ticket,
                what,
                expected,
            });
        }
        let engine_stopped = engine.run_until_idle().is_err();
        let replies = collect_replies(&mut clients);
        tally.commands_answered += replies.len() as u64;
        let end = check_round(submitted, replies, &mut committed, world, seed);
        if end.crashed || engine_stopped {
            tally.crashes_in_a_flush += u64::from(end.interrupted_flush.is_some());
            return (committed, end.interrupted_flush);
        }
    }
    world.crash_now();
    tally.crashes_forced_after_the_last_round += 1;
    (committed, None)
}

/// One seed: format, then three times: commands through the engine until power fails,
/// restart, remount, check the last flush survived, go on.
fn run_seed(seed: u64) -> Tally {
    let mut tally = Tally::default();
    let world = new_world(seed);
    let mut rng = SplitMix64::new(seed ^ 0x5733_9ED0);
    let disk = world.open_disk(0).expect("open disk");
    let mut fs = format_fs(Box::new(disk), BLOCK_BYTES as u32);
    let mut files = Model::new();
    for crash in 0..CRASHES_PER_SEED {
        let (committed, interrupted) =
            run_until_crash(fs, files, &world, &mut rng, seed, &mut tally);
        tally.crashes += 1;
        world.restart();
        let when = format!("after crash {crash}");
        fs = mount(&world, seed, &when);
        let found = contents(&mut fs, seed);
        assert!(
            found == committed || interrupted.as_ref() == Some(&found),
            "seed {seed}: {when} the files are {:?}; the last flush had {:?}; the interrupted one {:?}",
            describe(&found),
            describe(&committed),
            interrupted.as_ref().map(describe)
        );
        tally.interrupted_flushes_found_durable +=
            u64::from(found != committed && interrupted.is_some());
        files = found;
    }
    tally
}

#[test]
fn flushed_changes_from_several_clients_survive_crashes_inside_the_simulation() {
    let total: Tally = run_seeds(60, run_seed).into_iter().sum();
    eprintln!("engine in simulation: {total:?}");
    assert!(
        total.crashes < 20 || total.crashes > 2 * total.crashes_forced_after_the_last_round,
        "most crashes come from the random crash point, inside commands: {total:?}"
    );
}

/// The same seed gives the same run: replies and virtual time agree.
#[test]
fn a_seed_replays_exactly() {
    let run = |seed: u64| {
        let world = new_world(seed);
        let mut rng = SplitMix64::new(seed);
        let disk = world.open_disk(0).expect("open disk");
        let fs = Filesystem::format(Box::new(disk), &FormatOptions::default()).expect("format");
        let mut tally = Tally::default();
        let (committed, _) = run_until_crash(fs, Model::new(), &world, &mut rng, seed, &mut tally);
        (
            describe(&committed),
            world.now_ns(),
            tally.commands_answered,
        )
    };
    assert_eq!(run(11), run(11));
}

/// Reads from several clients are on the device together: 3 clients x 8 one-block reads
/// submitted before the engine steps, and the device holds more than one at a time.
#[test]
fn reads_from_several_clients_are_in_flight_together() {
    let world = new_world(5);
    let disk = world.open_disk(0).expect("open disk");
    let mut fs = format_fs(Box::new(disk), BLOCK_BYTES as u32);
    let data: Vec<u8> = (0..64 * BLOCK_BYTES)
        .map(|index| (index / 7) as u8)
        .collect();
    let file = fs.create("data").unwrap();
    fs.write(file, 0, &data).unwrap();
    fs.flush().unwrap();
    let mut engine = SteppedEngine::new(fs, ENGINE_CONFIG);
    let mut clients: Vec<EngineClient> = (0..CLIENT_COUNT).map(|_| engine.client(16)).collect();
    let mut expected = HashMap::new();
    for (index, client) in clients.iter_mut().enumerate() {
        for read in 0..8u64 {
            let block = (index as u64 * 8 + read) * 5 % 64;
            let ticket = client
                .try_submit(Command::Read {
                    name: "data".to_string(),
                    offset_bytes: block * BLOCK_BYTES,
                    length_bytes: BLOCK_BYTES,
                })
                .unwrap();
            expected.insert((index, ticket), block);
        }
    }
    let mut most_in_flight = 0;
    while engine.step().unwrap() == StepOutcome::Progressed {
        most_in_flight = most_in_flight.max(engine.device_requests_in_flight());
    }
    assert!(
        most_in_flight >= 8,
        "at most {most_in_flight} device requests were in flight together"
    );
    for ((index, ticket), result) in collect_replies(&mut clients) {
        let block = expected.remove(&(index, ticket)).expect("a submitted read");
        let Reply::Data(bytes) = result.unwrap() else {
            panic!("a read replies with data")
        };
        let start = (block * BLOCK_BYTES) as usize;
        assert_eq!(bytes.bytes(), &data[start..start + BLOCK_BYTES as usize]);
    }
    assert!(expected.is_empty(), "every read was answered");
    engine.shutdown().unwrap();
}
