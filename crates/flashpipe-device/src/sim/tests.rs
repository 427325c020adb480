//! Tests of the simulated disk: the conformance suite, timing, crashes, faults and
//! determinism.

use std::collections::BTreeMap;

use super::*;
use crate::buffer::IoBuf;
use crate::conformance;
use crate::random::SplitMix64;
use crate::request::Operation;

const BLOCK_SIZE_BYTES: u32 = 512;

fn seed_count() -> u64 {
    std::env::var("FLASHPIPE_SEEDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(200)
}

fn exact_timing_config(latency_ns: u64, bandwidth: u64, parallelism: u32) -> SimDiskConfig {
    SimDiskConfig {
        latency_ns,
        latency_jitter_ns: 0,
        bandwidth_bytes_per_second: bandwidth,
        parallelism,
        ..SimDiskConfig::default_for_tests("timed", BLOCK_SIZE_BYTES, 4096)
    }
}

/// A disk of [`exact_timing_config`] added to `world`.
fn exact_disk(world: &SimWorld, latency_ns: u64, bandwidth: u64, parallelism: u32) -> SimDisk {
    world
        .add_disk(exact_timing_config(latency_ns, bandwidth, parallelism))
        .unwrap()
}

fn reap_all(disk: &mut dyn BlockDevice) -> Vec<(Completion, u64)> {
    let clock = disk.clock();
    let mut reaped = Vec::new();
    let mut completions = Vec::new();
    while disk.in_flight() > 0 {
        disk.wait_completions(&mut completions).unwrap();
        reaped.extend(
            completions
                .drain(..)
                .map(|completion| (completion, clock.now_ns())),
        );
    }
    reaped
}

fn run_ok(disk: &mut dyn BlockDevice, request: Request) -> Completion {
    disk.submit(request).unwrap();
    let (completion, _) = reap_all(disk).pop().unwrap();
    completion.status.as_ref().unwrap();
    completion
}

fn read_blocks(disk: &mut dyn BlockDevice, first_block: u64, block_count: u64) -> Vec<u8> {
    let buffer = IoBuf::zeroed((block_count * u64::from(BLOCK_SIZE_BYTES)) as usize);
    let completion = run_ok(disk, Request::read(0, first_block, buffer));
    completion.buffer.unwrap().to_vec()
}

#[test]
fn sim_disk_passes_the_conformance_suite() {
    conformance::check_all(&mut |queue_depth| {
        let world = SimWorld::new(u64::from(queue_depth));
        let config = SimDiskConfig {
            queue_depth,
            ..SimDiskConfig::default_for_tests("sim0", BLOCK_SIZE_BYTES, 4096)
        };
        Box::new(world.add_disk(config).unwrap())
    });
}

#[test]
fn sim_disk_with_one_slot_and_no_jitter_passes_the_conformance_suite() {
    conformance::check_all(&mut |queue_depth| {
        let world = SimWorld::new(7);
        let config = SimDiskConfig {
            queue_depth,
            ..exact_timing_config(1_000, 1_000_000_000, 1)
        };
        Box::new(world.add_disk(config).unwrap())
    });
}

#[test]
fn a_lone_request_takes_latency_plus_size_over_bandwidth() {
    // (latency ns, bandwidth B/s, size bytes, expected completion ns)
    let cases = [
        (50_000, 1_000_000_000, 4096, 54_096),
        (0, 512_000_000, 512, 1_000),
        (10_000, 2_000_000_000, 1 << 20, 10_000 + 524_288),
        (7, 3, 512, 7 + 170_666_666_667),
    ];
    for (latency_ns, bandwidth, size_bytes, expected_ns) in cases {
        for write in [false, true] {
            let world = SimWorld::new(1);
            let mut disk = exact_disk(&world, latency_ns, bandwidth, 4);
            let buffer = IoBuf::zeroed(size_bytes);
            let request = if write {
                Request::write(1, 0, buffer)
            } else {
                Request::read(1, 0, buffer)
            };
            run_ok(&mut disk, request);
            assert_eq!(
                world.now_ns(),
                expected_ns,
                "latency {latency_ns} bandwidth {bandwidth} size {size_bytes} write {write}"
            );
        }
    }
}

#[test]
fn parallelism_lets_that_many_requests_overlap() {
    // Flushes take the latency only: with P slots, 4 flushes finish in ceil(4 / P) waves.
    for (parallelism, expected_ns) in [
        (1, vec![100, 200, 300, 400]),
        (2, vec![100, 100, 200, 200]),
        (4, vec![100, 100, 100, 100]),
        (8, vec![100, 100, 100, 100]),
    ] {
        let world = SimWorld::new(2);
        let mut disk = exact_disk(&world, 100, 1_000_000_000, parallelism);
        for tag in 0..4 {
            disk.submit(Request::flush(tag)).unwrap();
        }
        let times: Vec<u64> = reap_all(&mut disk).iter().map(|(_, time)| *time).collect();
        assert_eq!(times, expected_ns, "parallelism {parallelism}");
    }
}

#[test]
fn transfers_share_the_bandwidth_while_latencies_overlap() {
    let world = SimWorld::new(3);
    let mut disk = exact_disk(&world, 1_000, 512_000_000, 4);
    for tag in 0..3 {
        disk.submit(Request::read(tag, 0, IoBuf::zeroed(512)))
            .unwrap();
    }
    let times: Vec<u64> = reap_all(&mut disk).iter().map(|(_, time)| *time).collect();
    assert_eq!(times, vec![2_000, 3_000, 4_000]);
}

#[test]
fn waiting_on_one_disk_delivers_other_disks_completions_in_time_order() {
    let world = SimWorld::new(4);
    let mut slow = world
        .add_disk(SimDiskConfig {
            name: "slow".to_string(),
            ..exact_timing_config(1_000_000, 1_000_000_000, 1)
        })
        .unwrap();
    let mut fast = world
        .add_disk(SimDiskConfig {
            name: "fast".to_string(),
            ..exact_timing_config(1_000, 1_000_000_000, 1)
        })
        .unwrap();
    slow.submit(Request::flush(1)).unwrap();
    fast.submit(Request::flush(2)).unwrap();
    let mut completions = Vec::new();
    slow.wait_completions(&mut completions).unwrap();
    assert_eq!(world.now_ns(), 1_000_000);
    assert_eq!(fast.poll_completions(&mut completions), 1);
    assert_eq!(
        completions.iter().map(|c| c.tag).collect::<Vec<_>>(),
        vec![1, 2]
    );
    let error = fast.wait_completions(&mut completions).unwrap_err();
    assert_eq!(error.kind, DeviceErrorKind::NothingInFlight);
    assert_eq!(&*error.device, "fast");
}

#[test]
fn stepping_the_world_runs_one_event_at_a_time() {
    let world = SimWorld::new(14);
    let mut first = exact_disk(&world, 300, 1_000_000_000, 1);
    let mut second = exact_disk(&world, 100, 1_000_000_000, 1);
    first.submit(Request::flush(1)).unwrap();
    second.submit(Request::flush(2)).unwrap();
    let mut completions = Vec::new();
    assert!(world.run_next_event());
    assert_eq!(world.now_ns(), 100);
    assert_eq!(first.poll_completions(&mut completions), 0);
    assert_eq!(second.poll_completions(&mut completions), 1);
    assert!(world.run_next_event());
    assert_eq!(world.now_ns(), 300);
    assert_eq!(first.poll_completions(&mut completions), 1);
    assert!(!world.run_next_event());
}

#[test]
fn poll_does_not_advance_virtual_time() {
    let world = SimWorld::new(5);
    let mut disk = exact_disk(&world, 1_000, 1_000_000_000, 1);
    disk.submit(Request::flush(1)).unwrap();
    let mut completions = Vec::new();
    assert_eq!(disk.poll_completions(&mut completions), 0);
    assert_eq!(world.now_ns(), 0);
    assert_eq!(disk.in_flight(), 1);
    assert_eq!(disk.wait_completions(&mut completions).unwrap(), 1);
    assert_eq!(disk.in_flight(), 0);
}

#[test]
fn bad_settings_are_refused_with_the_disk_name() {
    let base = SimDiskConfig::default_for_tests("badsim", BLOCK_SIZE_BYTES, 64);
    let breakages: [fn(&mut SimDiskConfig); 7] = [
        |config| config.block_size_bytes = 1000,
        |config| config.block_count = 0,
        |config| config.queue_depth = 0,
        |config| config.parallelism = 0,
        |config| config.bandwidth_bytes_per_second = 0,
        |config| config.faults.read_failure_probability = 1.5,
        |config| config.faults.write_failure_probability = f64::NAN,
    ];
    let cases = breakages.map(|breakage| {
        let mut config = base.clone();
        breakage(&mut config);
        config
    });
    let world = SimWorld::new(6);
    for config in cases {
        let error = world.add_disk(config.clone()).unwrap_err();
        assert_eq!(&*error.device, "badsim", "{config:?}");
        assert!(
            matches!(error.kind, DeviceErrorKind::Open { .. }),
            "{error}"
        );
    }
    assert_eq!(world.disk_count(), 0, "a refused disk is not added");
    assert!(world.open_disk(0).is_err());
}

#[test]
fn injected_failures_report_injected_faults_naming_the_disk() {
    // (read failure probability, write failure probability, operation is a write)
    for (read_probability, write_probability, write) in [(1.0, 0.0, false), (0.0, 1.0, true)] {
        let world = SimWorld::new(8);
        let config = SimDiskConfig {
            faults: FaultConfig {
                read_failure_probability: read_probability,
                write_failure_probability: write_probability,
            },
            ..SimDiskConfig::default_for_tests("faulty", BLOCK_SIZE_BYTES, 64)
        };
        let mut disk = world.add_disk(config).unwrap();
        let buffer = IoBuf::from_slice(&[0xEE; 1024]);
        let request = if write {
            Request::write(9, 3, buffer)
        } else {
            Request::read(9, 3, buffer)
        };
        disk.submit(request).unwrap();
        let (completion, _) = reap_all(&mut disk).pop().unwrap();
        let error = completion.status.unwrap_err();
        assert_eq!(&*error.device, "faulty");
        assert!(
            matches!(
                error.kind,
                DeviceErrorKind::InjectedFault {
                    first_block: 3,
                    end_block: 5,
                    ..
                }
            ),
            "{error}"
        );
        assert!(completion.buffer.unwrap().iter().all(|&byte| byte == 0xEE));
        world.crash_now();
        world.restart();
        let mut reopened = world.open_disk(0).unwrap();
        reopened.submit(Request::flush(1)).unwrap();
        reap_all(&mut reopened);
        assert!(world.durable_block(0, 3).iter().all(|&byte| byte == 0));
    }
}

#[test]
fn failed_writes_leave_the_data_unchanged() {
    let world = SimWorld::new(9);
    let mut faulty = world
        .add_disk(SimDiskConfig {
            faults: FaultConfig {
                write_failure_probability: 0.5,
                ..FaultConfig::default()
            },
            ..SimDiskConfig::default_for_tests("half", BLOCK_SIZE_BYTES, 64)
        })
        .unwrap();
    let (mut failures, mut successes) = (0, 0);
    for round in 1..=64u8 {
        let before = read_blocks(&mut faulty, 0, 1);
        faulty
            .submit(Request::write(1, 0, IoBuf::from_slice(&[round; 512])))
            .unwrap();
        let (completion, _) = reap_all(&mut faulty).pop().unwrap();
        let after = read_blocks(&mut faulty, 0, 1);
        if completion.status.is_ok() {
            successes += 1;
            assert!(after.iter().all(|&byte| byte == round));
        } else {
            failures += 1;
            assert_eq!(before, after);
        }
    }
    assert!(failures > 0 && successes > 0, "{failures} {successes}");
}

/// A block's contents encoding who wrote it, so that a read-back names its writer.
fn stamp(writer: u64, block: u64) -> [u8; 16] {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&(writer + 1).to_le_bytes());
    bytes[8..].copy_from_slice(&block.to_le_bytes());
    bytes
}

fn stamped_buffer(writer: u64, first_block: u64, block_count: u64) -> IoBuf {
    let mut buffer = IoBuf::zeroed((block_count * u64::from(BLOCK_SIZE_BYTES)) as usize);
    for (index, chunk) in buffer.chunks_mut(BLOCK_SIZE_BYTES as usize).enumerate() {
        chunk[..16].copy_from_slice(&stamp(writer, first_block + index as u64));
    }
    buffer
}

fn writer_of(contents: &[u8]) -> Option<u64> {
    let writer = u64::from_le_bytes(contents[..8].try_into().unwrap());
    writer.checked_sub(1)
}

const CRASH_DISK_BLOCKS: u64 = 48;

/// What the crash test's model knows about each block.
#[derive(Clone, Copy, Default)]
struct ModelBlock {
    durable_writer: Option<u64>,
    newest_writer: Option<u64>,
}

/// Runs rounds of non-overlapping multi-block writes, some followed by a flush, then a
/// final round cut by a crash; checks the image after restart against the model.
/// Returns the number of writes that were torn (some blocks survived, some reverted).
fn check_crash_once(seed: u64) -> usize {
    let world = SimWorld::new(seed);
    let mut generator = SplitMix64::new(seed ^ 0xC4A5);
    let mut disk = world
        .add_disk(SimDiskConfig::default_for_tests(
            "crashy",
            BLOCK_SIZE_BYTES,
            CRASH_DISK_BLOCKS,
        ))
        .unwrap();
    let mut model = vec![ModelBlock::default(); CRASH_DISK_BLOCKS as usize];
    let mut next_writer = 0;
    let rounds = 1 + generator.below(4);
    let mut last_round_writes = Vec::new();
    for round in 0..=rounds {
        let final_round = round == rounds;
        let writes = plan_writes(&mut generator, &mut next_writer);
        if final_round {
            world.crash_after_requests(1 + generator.below(writes.len() as u64));
        }
        let mut reached_the_disk = Vec::new();
        for &(writer, first_block, block_count) in &writes {
            if !world.is_crashed() {
                reached_the_disk.push((writer, first_block, block_count));
            }
            let buffer = stamped_buffer(writer, first_block, block_count);
            disk.submit(Request::write(writer, first_block, buffer))
                .unwrap();
        }
        let reaped = reap_all(&mut disk);
        for (completion, _) in &reaped {
            let write = writes
                .iter()
                .find(|write| write.0 == completion.tag)
                .unwrap();
            match (&completion.status, final_round) {
                (Ok(()), false) => {
                    for block in write.1..write.1 + write.2 {
                        model[block as usize].newest_writer = Some(write.0);
                    }
                }
                (Err(error), true) => assert!(is_crash(error), "{error}"),
                (status, _) => panic!("seed {seed}: unexpected status {status:?}"),
            }
        }
        if final_round {
            last_round_writes = reached_the_disk;
        } else if generator.chance(0.5) {
            run_ok(&mut disk, Request::flush(u64::MAX));
            for block in &mut model {
                block.durable_writer = block.newest_writer;
            }
        }
    }
    assert!(world.is_crashed());
    check_image_after_crash(&world, &model, &last_round_writes, seed)
}

/// Up to six non-overlapping writes of 1..=6 blocks.
fn plan_writes(generator: &mut SplitMix64, next_writer: &mut u64) -> Vec<(u64, u64, u64)> {
    let mut writes: Vec<(u64, u64, u64)> = Vec::new();
    for _ in 0..6 {
        let block_count = 1 + generator.below(6);
        let first_block = generator.below(CRASH_DISK_BLOCKS - block_count + 1);
        let overlaps = writes.iter().any(|&(_, other_first, other_count)| {
            first_block < other_first + other_count && other_first < first_block + block_count
        });
        if !overlaps {
            writes.push((*next_writer, first_block, block_count));
            *next_writer += 1;
        }
    }
    writes
}

fn check_image_after_crash(
    world: &SimWorld,
    model: &[ModelBlock],
    last_round_writes: &[(u64, u64, u64)],
    seed: u64,
) -> usize {
    world.restart();
    let mut disk = world.open_disk(0).unwrap();
    let image = read_blocks(&mut disk, 0, CRASH_DISK_BLOCKS);
    let mut survived_per_write: BTreeMap<u64, (usize, usize)> = BTreeMap::new();
    for (block, contents) in image.chunks(BLOCK_SIZE_BYTES as usize).enumerate() {
        let found = writer_of(contents);
        let unfinished = last_round_writes
            .iter()
            .find(|write| (write.1..write.1 + write.2).contains(&(block as u64)));
        let expected = &model[block];
        let newest = unfinished.map(|write| write.0).or(expected.newest_writer);
        if let Some(writer) = found {
            assert_eq!(&contents[..16], &stamp(writer, block as u64), "seed {seed}");
        }
        assert!(
            found == expected.durable_writer || found == newest,
            "seed {seed} block {block}: found writer {found:?}, durable {:?}, newest {newest:?}",
            expected.durable_writer
        );
        if newest == expected.durable_writer {
            assert_eq!(found, expected.durable_writer, "seed {seed} block {block}");
        }
        if let Some(write) = unfinished {
            let counts = survived_per_write.entry(write.0).or_default();
            if found == Some(write.0) {
                counts.0 += 1;
            } else {
                counts.1 += 1;
            }
        }
    }
    survived_per_write
        .values()
        .filter(|&&(survived, reverted)| survived > 0 && reverted > 0)
        .count()
}

#[test]
fn crashes_keep_flushed_data_and_tear_unflushed_writes_block_by_block() {
    let torn_writes: usize = (0..seed_count()).map(check_crash_once).sum();
    assert!(torn_writes > 0, "some multi-block write must tear");
}

#[test]
fn crash_survival_probability_extremes_keep_all_or_nothing() {
    for (survival_probability, expected_byte) in [(1.0, 2u8), (0.0, 1u8)] {
        let world = SimWorld::new(10);
        world.set_crash_survival_probability(survival_probability);
        let mut disk = world
            .add_disk(SimDiskConfig::default_for_tests(
                "edge",
                BLOCK_SIZE_BYTES,
                8,
            ))
            .unwrap();
        run_ok(
            &mut disk,
            Request::write(1, 0, IoBuf::from_slice(&[1; 4096])),
        );
        run_ok(&mut disk, Request::flush(2));
        run_ok(
            &mut disk,
            Request::write(3, 0, IoBuf::from_slice(&[2; 2048])),
        );
        world.crash_after_requests(1);
        disk.submit(Request::write(4, 4, IoBuf::from_slice(&[2; 2048])))
            .unwrap();
        let (completion, _) = reap_all(&mut disk).pop().unwrap();
        assert!(is_crash(&completion.status.unwrap_err()));
        assert_eq!(completion.buffer.unwrap().len(), 2048, "buffer comes back");
        for block in 0..8 {
            assert!(world
                .durable_block(0, block)
                .iter()
                .all(|&b| b == expected_byte));
        }
        let decisions = &world.last_crash_decisions()[0];
        assert_eq!(decisions.len(), 8);
        assert!(decisions
            .iter()
            .all(|&(_, kept)| kept == (survival_probability == 1.0)));
    }
}

#[test]
fn a_flush_covers_only_writes_completed_before_it_was_submitted() {
    let world = SimWorld::new(11);
    world.set_crash_survival_probability(0.0);
    let mut disk = exact_disk(&world, 1_000, 1_000_000_000, 4);
    run_ok(
        &mut disk,
        Request::write(1, 0, IoBuf::from_slice(&[1; 512])),
    );
    disk.submit(Request::write(2, 1, IoBuf::from_slice(&[2; 512])))
        .unwrap();
    disk.submit(Request::flush(3)).unwrap();
    assert_eq!(reap_all(&mut disk).len(), 2);
    world.crash_now();
    assert_eq!(
        world.durable_block(0, 0)[0],
        1,
        "completed before the flush"
    );
    assert_eq!(
        world.durable_block(0, 1)[0],
        0,
        "in flight when the flush came"
    );
}

#[test]
fn handles_from_before_a_crash_stay_dead_and_new_ones_see_the_durable_image() {
    let world = SimWorld::new(12);
    let mut old = world
        .add_disk(SimDiskConfig::default_for_tests(
            "remount",
            BLOCK_SIZE_BYTES,
            8,
        ))
        .unwrap();
    run_ok(&mut old, Request::write(1, 2, IoBuf::from_slice(&[7; 512])));
    run_ok(&mut old, Request::flush(2));
    world.crash_now();
    old.submit(Request::read(3, 2, IoBuf::zeroed(512))).unwrap();
    let (completion, _) = reap_all(&mut old).pop().unwrap();
    assert!(is_crash(&completion.status.unwrap_err()));
    let mut reopened_during_crash = world.open_disk(0).unwrap();
    world.restart();
    assert!(!world.is_crashed());
    old.submit(Request::flush(4)).unwrap();
    let (completion, _) = reap_all(&mut old).pop().unwrap();
    assert!(is_crash(&completion.status.unwrap_err()));
    assert!(read_blocks(&mut reopened_during_crash, 2, 1)
        .iter()
        .all(|&b| b == 7));
    let mut fresh = world.open_disk(0).unwrap();
    assert!(read_blocks(&mut fresh, 2, 1).iter().all(|&b| b == 7));
}

/// A seeded workload of mixed requests; returns the completion trace.
fn trace_workload(seed: u64) -> Vec<(u64, bool, u64)> {
    let world = SimWorld::new(seed);
    let mut generator = SplitMix64::new(99);
    let mut disks: Vec<SimDisk> = (0..2)
        .map(|index| {
            let config = SimDiskConfig {
                faults: FaultConfig {
                    read_failure_probability: 0.1,
                    write_failure_probability: 0.1,
                },
                ..SimDiskConfig::default_for_tests(&format!("det{index}"), 512, 256)
            };
            world.add_disk(config).unwrap()
        })
        .collect();
    let mut trace = Vec::new();
    let mut completions = Vec::new();
    for tag in 0..400u64 {
        let disk = &mut disks[generator.below(2) as usize];
        let first_block = generator.below(240);
        let buffer = IoBuf::zeroed(512 * (1 + generator.below(16)) as usize);
        let request = match generator.below(4) {
            0 => Request::flush(tag),
            1 => Request::read(tag, first_block, buffer),
            _ => Request::write(tag, first_block, buffer),
        };
        if let Err(rejected) = disk.submit(request) {
            disk.wait_completions(&mut completions).unwrap();
            disk.submit(rejected.request).unwrap();
        }
        if generator.chance(0.3) && disk.in_flight() > 0 {
            disk.wait_completions(&mut completions).unwrap();
        }
        trace.extend(
            completions
                .drain(..)
                .map(|c| (c.tag, c.status.is_ok(), world.now_ns())),
        );
    }
    for disk in &mut disks {
        for (completion, time) in reap_all(disk) {
            trace.push((completion.tag, completion.status.is_ok(), time));
        }
    }
    trace
}

#[test]
fn the_same_seed_gives_the_same_trace_and_another_seed_another() {
    let first = trace_workload(42);
    assert_eq!(first.len(), 400);
    assert_eq!(first, trace_workload(42));
    assert_ne!(first, trace_workload(43));
}

#[test]
fn dropping_a_handle_with_requests_in_flight_leaves_the_world_consistent() {
    let world = SimWorld::new(13);
    let mut disk = world
        .add_disk(SimDiskConfig::default_for_tests("dropped", 512, 16))
        .unwrap();
    disk.submit(Request::write(1, 0, IoBuf::from_slice(&[3; 512])))
        .unwrap();
    drop(disk);
    let mut other = world.open_disk(0).unwrap();
    other.submit(Request::flush(2)).unwrap();
    assert_eq!(reap_all(&mut other).len(), 1);
    other
        .submit(Request {
            tag: 3,
            operation: Operation::Flush,
        })
        .unwrap();
    assert_eq!(reap_all(&mut other).len(), 1);
}

#[test]
fn two_disk_sets_joined_in_one_world_run_in_time_order_on_its_clock() {
    let mut world = flashpipe_sim::World::new(5);
    let fast = SimWorld::join(&mut world);
    let slow = SimWorld::join(&mut world);
    let mut fast_disk = fast
        .add_disk(exact_timing_config(1_000, 1_000_000_000, 1))
        .unwrap();
    let mut slow_disk = slow
        .add_disk(exact_timing_config(9_000, 1_000_000_000, 1))
        .unwrap();
    slow_disk
        .submit(Request::write(
            1,
            0,
            IoBuf::zeroed(BLOCK_SIZE_BYTES as usize),
        ))
        .unwrap();
    fast_disk.submit(Request::flush(2)).unwrap();
    let mut completions = Vec::new();
    let mut seen = Vec::new();
    while world.step() {
        for disk in [&mut fast_disk, &mut slow_disk] {
            if disk.poll_completions(&mut completions) > 0 {
                seen.extend(completions.drain(..).map(|c| (c.tag, world.now_ns())));
            }
        }
    }
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0],
        (2, 1_000),
        "the flush of the fast disk comes first"
    );
    assert_eq!(seen[1].0, 1);
    assert!(seen[1].1 > 9_000);
    assert_eq!(fast.now_ns(), world.now_ns(), "one clock");
    assert_eq!(world.component_count(), 2);
}
