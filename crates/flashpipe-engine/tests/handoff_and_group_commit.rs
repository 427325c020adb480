//! The engine's hand-off modes and group commit at its API boundary: many client threads
//! with many commands outstanding get every reply, each client's changes in order, under
//! every hand-off mode; flushes queued together are served by one commit (counted
//! deterministically by a stepped engine) and every answered flush is durable: power
//! fails right after the last answer and the remounted file system holds every file.
//! A seeded crash campaign under every grouping: power fails after a random number of
//! device requests, and every change queued before an answered flush must be durable.
//! `FLASHPIPE_SEEDS=n` runs n seeds (default 25); `FLASHPIPE_SEED=n` replays one.

use flashpipe_device::sim::{SimDiskConfig, SimWorld};
use flashpipe_device::{IoBuf, SplitMix64};
use flashpipe_engine::{
    Command, Engine, EngineClient, EngineConfig, EngineError, FlushGrouping, Handoff, Reply,
    SteppedEngine,
};
use flashpipe_fs::Filesystem;
use flashpipe_testkit::formatted::format_fs;
use flashpipe_testkit::seeds::run_seeds;

const BLOCK_BYTES: u32 = 4096;

const HANDOFFS: [Handoff; 3] = [
    Handoff::Park,
    Handoff::SpinThenPark { spin_us: 1 },
    Handoff::DEFAULT,
];

const GROUPINGS: [FlushGrouping; 3] = [
    FlushGrouping::OnePerFlush,
    FlushGrouping::UntilNextChange,
    FlushGrouping::UntilIdle,
];

fn new_world(seed: u64) -> SimWorld {
    let world = SimWorld::new(seed);
    let mut config = SimDiskConfig::default_for_tests("sim0", BLOCK_BYTES, 8192);
    config.latency_jitter_ns = 20_000;
    config.parallelism = 8;
    world.add_disk(config).expect("a simulated disk");
    world
}

fn format(world: &SimWorld) -> Filesystem {
    let disk = world.open_disk(0).expect("open the simulated disk");
    format_fs(Box::new(disk), BLOCK_BYTES)
}

/// Power fails now; the disk restarts and the file system is mounted again and checked.
fn crash_and_remount(world: &SimWorld, what: &str) -> Filesystem {
    world.crash_now();
    world.restart();
    let disk = world.open_disk(0).expect("reopen the simulated disk");
    let mut filesystem = Filesystem::mount(Box::new(disk))
        .unwrap_or_else(|error| panic!("{what}: mount after the crash: {error}"));
    let report = filesystem.check().expect("fsck runs");
    assert!(report.is_clean(), "{what}: fsck: {:#?}", report.findings);
    filesystem
}

fn file_bytes(client_index: usize, file_index: usize) -> Vec<u8> {
    let mut generator = SplitMix64::new((client_index * 1000 + file_index) as u64);
    let length = 1 + generator.below(3 * u64::from(BLOCK_BYTES)) as usize;
    (0..length).map(|_| generator.next_u64() as u8).collect()
}

fn file_name(client_index: usize, file_index: usize) -> String {
    format!("c{client_index}-f{file_index}")
}

fn assert_files_durable(
    filesystem: &mut Filesystem,
    client_count: usize,
    file_count: usize,
    what: &str,
) {
    for client_index in 0..client_count {
        for file_index in 0..file_count {
            let name = file_name(client_index, file_index);
            let expected = file_bytes(client_index, file_index);
            let file = filesystem
                .open(&name)
                .unwrap_or_else(|error| panic!("{what}: {name} lost: {error}"));
            let mut found = IoBuf::zeroed(expected.len());
            filesystem
                .read_into(file, 0, &mut found)
                .unwrap_or_else(|error| panic!("{what}: read {name}: {error}"));
            assert!(
                found[..] == expected[..],
                "{what}: {name} holds other bytes"
            );
        }
    }
}

fn create_write_flush(name: &str, bytes: &[u8]) -> Vec<Command> {
    vec![
        Command::Create {
            name: name.to_string(),
        },
        Command::Write {
            name: name.to_string(),
            offset_bytes: 0,
            data: IoBuf::from_slice(bytes),
        },
        Command::Flush,
    ]
}

/// One client thread: appends `rounds` chunks to its own file, 4 commands outstanding
/// per round (write, stat, read, stat), and checks every reply against its order.
fn append_and_check(client: &mut EngineClient, client_index: usize, rounds: u64) {
    const CHUNK_BYTES: u64 = 1000;
    let name = format!("appender-{client_index}");
    client
        .call(Command::Create { name: name.clone() })
        .expect("create");
    let mut completions = Vec::new();
    for round in 0..rounds {
        let chunk = vec![(client_index as u64 * 31 + round) as u8; CHUNK_BYTES as usize];
        let tickets = client
            .submit_all(vec![
                Command::Write {
                    name: name.clone(),
                    offset_bytes: round * CHUNK_BYTES,
                    data: IoBuf::from_slice(&chunk),
                },
                Command::Stat { name: name.clone() },
                Command::Read {
                    name: name.clone(),
                    offset_bytes: round * CHUNK_BYTES,
                    length_bytes: CHUNK_BYTES,
                },
                Command::Stat { name: name.clone() },
            ])
            .expect("submit a round");
        completions.clear();
        while completions.len() < tickets.len() {
            client
                .wait_completions(&mut completions)
                .expect("completions");
        }
        completions.sort_by_key(|(ticket, _)| *ticket);
        let mut replies = completions.drain(..).map(|(_, result)| result);
        let mut next = || replies.next().expect("four replies").expect("no error");
        assert!(matches!(next(), Reply::Written { .. }), "write answered");
        let Reply::Stat(stat) = next() else {
            panic!("stat answered something else")
        };
        assert_eq!(
            stat.size_bytes,
            (round + 1) * CHUNK_BYTES,
            "client {client_index} round {round}: the stat follows the write"
        );
        let Reply::Data(data) = next() else {
            panic!("read answered something else")
        };
        assert!(
            data.bytes() == chunk.as_slice(),
            "client {client_index} round {round}"
        );
        let Reply::Stat(stat) = next() else {
            panic!("stat answered something else")
        };
        assert_eq!(stat.size_bytes, (round + 1) * CHUNK_BYTES);
    }
}

#[test]
fn many_client_threads_with_commands_outstanding_get_every_reply_in_order_in_every_mode() {
    for handoff in HANDOFFS {
        for grouping in GROUPINGS {
            let world = new_world(5);
            let config = EngineConfig {
                handoff,
                flush_grouping: grouping,
                ..EngineConfig::default()
            };
            let engine = Engine::start(format(&world), config);
            let threads: Vec<_> = (0..4)
                .map(|client_index| {
                    let mut client = engine.client(8);
                    std::thread::spawn(move || {
                        append_and_check(&mut client, client_index, 40);
                        client.reply_waits()
                    })
                })
                .collect();
            let mut replies_waited_for = 0;
            for thread in threads {
                replies_waited_for += thread.join().expect("client thread").total();
            }
            assert!(replies_waited_for > 0, "{handoff:?}: clients waited");
            let counters = engine.counters();
            engine.shutdown().expect("shutdown");
            assert!(counters.inbox_waits.total() > 0, "{handoff:?} {counters:?}");
        }
    }
}

/// Submits create, write, flush for each client and file, `interleave` says in which
/// order: every client's file `f` before any client's file `f + 1` (true), or each
/// client's three commands for all its files before the next client's (false).
fn submit_files(
    clients: &mut [EngineClient],
    file_count: usize,
    changes_first: bool,
) -> Vec<(usize, u64)> {
    let mut submitted = Vec::new();
    for file_index in 0..file_count {
        if changes_first {
            for (client_index, client) in clients.iter_mut().enumerate() {
                let name = file_name(client_index, file_index);
                let commands = create_write_flush(&name, &file_bytes(client_index, file_index));
                for command in commands.into_iter().take(2) {
                    submitted.push((client_index, client.try_submit(command).expect("submit")));
                }
            }
            for (client_index, client) in clients.iter_mut().enumerate() {
                submitted.push((
                    client_index,
                    client.try_submit(Command::Flush).expect("flush"),
                ));
            }
        } else {
            for (client_index, client) in clients.iter_mut().enumerate() {
                let name = file_name(client_index, file_index);
                for command in create_write_flush(&name, &file_bytes(client_index, file_index)) {
                    submitted.push((client_index, client.try_submit(command).expect("submit")));
                }
            }
        }
    }
    submitted
}

fn commit_sequence(filesystem: &Filesystem) -> u64 {
    filesystem.stats().commit_sequence
}

/// (group commits, file-system commits with changes) for one queued burst.
fn stepped_burst(grouping: FlushGrouping, changes_first: bool) -> (u64, u64) {
    const CLIENT_COUNT: usize = 3;
    const FILE_COUNT: usize = 2;
    let what = format!("{grouping:?}, changes first: {changes_first}");
    let world = new_world(9);
    let filesystem = format(&world);
    let sequence_before = commit_sequence(&filesystem);
    let config = EngineConfig {
        command_queue_capacity: 64,
        flush_grouping: grouping,
        ..EngineConfig::default()
    };
    let mut engine = SteppedEngine::new(filesystem, config);
    let mut clients: Vec<EngineClient> = (0..CLIENT_COUNT).map(|_| engine.client(16)).collect();
    let submitted = submit_files(&mut clients, FILE_COUNT, changes_first);
    engine
        .run_until_idle()
        .expect("the engine serves the burst");
    let mut answered = 0;
    for client in &mut clients {
        while let Some((_, result)) = client.try_next_completion() {
            result.unwrap_or_else(|error: EngineError| panic!("{what}: {error}"));
            answered += 1;
        }
    }
    assert_eq!(answered, submitted.len(), "{what}: every command answered");
    let group_commits = engine.group_commits();
    let filesystem = engine
        .shutdown_without_commit()
        .expect("stop without a commit");
    let commits = commit_sequence(&filesystem) - sequence_before;
    drop(filesystem);
    let mut remounted = crash_and_remount(&world, &what);
    assert_files_durable(&mut remounted, CLIENT_COUNT, FILE_COUNT, &what);
    (group_commits, commits)
}

#[test]
fn queued_flushes_share_one_commit_and_every_answered_flush_is_durable() {
    // Every client's changes to file f queued before their flushes: 2 bursts of 3 flushes.
    assert_eq!(stepped_burst(FlushGrouping::OnePerFlush, true), (0, 2));
    assert_eq!(stepped_burst(FlushGrouping::UntilNextChange, true), (2, 2));
    assert_eq!(stepped_burst(FlushGrouping::UntilIdle, true), (1, 1));
    // Create, write, flush per client and file: 6 flushes, each behind its own changes.
    assert_eq!(stepped_burst(FlushGrouping::OnePerFlush, false), (0, 6));
    assert_eq!(stepped_burst(FlushGrouping::UntilNextChange, false), (6, 6));
    assert_eq!(stepped_burst(FlushGrouping::UntilIdle, false), (1, 1));
}

#[test]
fn flushes_from_many_client_threads_are_answered_and_durable_in_every_grouping() {
    const CLIENT_COUNT: usize = 4;
    const FILE_COUNT: usize = 6;
    for grouping in GROUPINGS {
        let what = format!("{grouping:?}");
        let world = new_world(13);
        let config = EngineConfig {
            flush_grouping: grouping,
            ..EngineConfig::default()
        };
        let engine = Engine::start(format(&world), config);
        let threads: Vec<_> = (0..CLIENT_COUNT)
            .map(|client_index| {
                let mut client = engine.client(4);
                std::thread::spawn(move || {
                    for file_index in 0..FILE_COUNT {
                        let name = file_name(client_index, file_index);
                        let bytes = file_bytes(client_index, file_index);
                        for command in create_write_flush(&name, &bytes) {
                            client.call(command).expect("create, write and flush");
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("client thread");
        }
        let filesystem = engine
            .shutdown_without_commit()
            .expect("stop without a commit");
        drop(filesystem);
        let mut remounted = crash_and_remount(&world, &what);
        assert_files_durable(&mut remounted, CLIENT_COUNT, FILE_COUNT, &what);
    }
}

#[test]
fn a_check_after_a_grouped_flush_sees_the_flushed_state() {
    let world = new_world(21);
    let config = EngineConfig {
        flush_grouping: FlushGrouping::UntilIdle,
        ..EngineConfig::default()
    };
    let mut engine = SteppedEngine::new(format(&world), config);
    let mut client = engine.client(8);
    for command in create_write_flush("checked", &file_bytes(0, 0)) {
        client.try_submit(command).expect("submit");
    }
    let check = client.try_submit(Command::Check).expect("submit check");
    engine.run_until_idle().expect("serve");
    let mut answered = Vec::new();
    while let Some(completion) = client.try_next_completion() {
        answered.push(completion);
    }
    let (_, report) = answered
        .into_iter()
        .find(|(ticket, _)| *ticket == check)
        .expect("the check answered");
    let Ok(Reply::Check(report)) = report else {
        panic!("check answered {report:?}")
    };
    assert!(report.is_clean(), "{:#?}", report.findings);
    assert_eq!(
        engine.group_commits(),
        1,
        "the check committed the flush first"
    );
}

/// One file of the crash campaign: where its create, write and the first flush after
/// them sit in the queue (the stepped engine serves in submission order).
struct CampaignFile {
    client_index: usize,
    file_index: usize,
    write_position: usize,
}

/// What a file may look like after the crash: its flush was answered, so exactly its
/// bytes; otherwise absent, empty (created, not written) or its bytes.
fn check_campaign_file(
    filesystem: &mut Filesystem,
    file: &CampaignFile,
    durable: bool,
    what: &str,
) {
    let name = file_name(file.client_index, file.file_index);
    let expected = file_bytes(file.client_index, file.file_index);
    let Ok(opened) = filesystem.open(&name) else {
        assert!(!durable, "{what}: {name} lost after its flush was answered");
        return;
    };
    let size_bytes = filesystem.stat(opened).expect("stat").size_bytes;
    if size_bytes == 0 && !durable {
        return;
    }
    assert_eq!(size_bytes, expected.len() as u64, "{what}: {name} size");
    let mut found = IoBuf::zeroed(expected.len());
    filesystem.read_into(opened, 0, &mut found).expect("read");
    assert!(
        found[..] == expected[..],
        "{what}: {name} holds other bytes"
    );
}

/// One seed: rounds in which each client queues create, write, flush for a new file
/// (clients in a random order) until power fails; then every file is checked.
/// Returns whether power failed inside the rounds and how many files had to survive.
fn crash_campaign_seed(seed: u64, grouping: FlushGrouping) -> (bool, usize) {
    const CLIENT_COUNT: usize = 3;
    const ROUND_LIMIT: usize = 40;
    let what = format!("seed {seed}, {grouping:?}");
    let world = new_world(seed);
    let mut rng = SplitMix64::new(seed ^ 0x6C0F_F1E5);
    let config = EngineConfig {
        flush_grouping: grouping,
        ..EngineConfig::default()
    };
    let mut engine = SteppedEngine::new(format(&world), config);
    let mut clients: Vec<EngineClient> = (0..CLIENT_COUNT).map(|_| engine.client(16)).collect();
    world.crash_after_requests(rng.below(250));
    let mut files = Vec::new();
    let mut flushes: Vec<(usize, u64, usize)> = Vec::new();
    let mut position = 0;
    let mut answered = std::collections::HashSet::new();
    for round in 0..ROUND_LIMIT {
        let mut order: Vec<usize> = (0..CLIENT_COUNT).collect();
        for index in (1..order.len()).rev() {
            order.swap(index, rng.below(index as u64 + 1) as usize);
        }
        for client_index in order {
            let name = file_name(client_index, round);
            let bytes = file_bytes(client_index, round);
            for command in create_write_flush(&name, &bytes) {
                let is_flush = matches!(command, Command::Flush);
                let ticket = clients[client_index].try_submit(command).expect("submit");
                if is_flush {
                    flushes.push((client_index, ticket, position));
                }
                position += 1;
            }
            files.push(CampaignFile {
                client_index,
                file_index: round,
                write_position: position - 2,
            });
        }
        let stopped = engine.run_until_idle().is_err();
        for (client_index, client) in clients.iter_mut().enumerate() {
            while let Some((ticket, result)) = client.try_next_completion() {
                if result.is_ok() {
                    answered.insert((client_index, ticket));
                }
            }
        }
        if stopped || world.is_crashed() {
            break;
        }
    }
    let durable_before = flushes
        .iter()
        .filter(|(client_index, ticket, _)| answered.contains(&(*client_index, *ticket)))
        .map(|(_, _, position)| *position)
        .max()
        .unwrap_or(0);
    let crashed = world.is_crashed();
    drop(engine);
    let mut remounted = crash_and_remount(&world, &what);
    let mut durable_files = 0;
    for file in &files {
        let durable = file.write_position < durable_before;
        durable_files += usize::from(durable);
        check_campaign_file(&mut remounted, file, durable, &what);
    }
    (crashed, durable_files)
}

#[test]
fn every_change_before_an_answered_flush_survives_power_failure_in_every_grouping() {
    for grouping in GROUPINGS {
        let crashes = run_seeds(25, |seed| crash_campaign_seed(seed, grouping));
        let inside = crashes.iter().filter(|(crashed, _)| *crashed).count();
        let durable_files: usize = crashes.iter().map(|(_, durable)| durable).sum();
        eprintln!(
            "{grouping:?}: {inside} of {} seeds crashed inside the rounds; {durable_files} files \
             had to survive",
            crashes.len()
        );
        assert!(
            durable_files > 0,
            "{grouping:?}: some flushes were answered before a crash"
        );
        assert!(
            crashes.len() < 10 || inside * 2 > crashes.len(),
            "{grouping:?}: most seeds crash inside the rounds ({inside} of {})",
            crashes.len()
        );
    }
}
