//! Tests of the striped device at its API: the conformance suite over RAM and simulated
//! members, where bytes land on the members, delivery order, member failures, flush,
//! and construction errors.

use flashpipe_array::{CompletionOrder, StripedDevice};
use flashpipe_device::conformance;
use flashpipe_device::sim::{FaultConfig, SimDisk, SimDiskConfig, SimWorld};
use flashpipe_device::{
    run_one, BlockDevice, Completion, DeviceErrorKind, IoBuf, Operation, RamDisk, Request,
    TransferDirection,
};

const BLOCK_SIZE_BYTES: u32 = 512;

type Members = Vec<Box<dyn BlockDevice>>;

fn ram_members(count: usize, block_count: u64, queue_depth: u32) -> Vec<Box<dyn BlockDevice>> {
    (0..count)
        .map(|index| {
            let name = format!("ram{index}");
            Box::new(RamDisk::new(&name, BLOCK_SIZE_BYTES, block_count, queue_depth).unwrap())
                as Box<dyn BlockDevice>
        })
        .collect()
}

fn sim_member(world: &SimWorld, name: &str, latency_ns: u64, faults: FaultConfig) -> SimDisk {
    world
        .add_disk(SimDiskConfig {
            latency_ns,
            latency_jitter_ns: 0,
            queue_depth: 8,
            faults,
            ..SimDiskConfig::default_for_tests(name, BLOCK_SIZE_BYTES, 2048)
        })
        .unwrap()
}

#[test]
fn striped_ram_disks_pass_the_conformance_suite() {
    // (members, stripe unit in blocks, member queue depth, order)
    let cases = [
        (1, 1, 64, CompletionOrder::Submission),
        (2, 1, 4, CompletionOrder::AsCompleted),
        (2, 8, 64, CompletionOrder::Submission),
        (3, 2, 2, CompletionOrder::Submission),
        (3, 4, 16, CompletionOrder::AsCompleted),
        (4, 3, 1, CompletionOrder::AsCompleted),
        (4, 16, 8, CompletionOrder::Submission),
    ];
    for (member_count, unit_blocks, member_queue_depth, order) in cases {
        conformance::check_all(&mut |queue_depth| {
            let members = ram_members(member_count, 4096 / member_count as u64, member_queue_depth);
            let stripe_unit_bytes = unit_blocks * u64::from(BLOCK_SIZE_BYTES);
            Box::new(
                StripedDevice::new("stripe0", members, stripe_unit_bytes, order, queue_depth)
                    .unwrap(),
            )
        });
    }
}

#[test]
fn striped_sim_disks_of_one_world_pass_the_conformance_suite() {
    for order in [CompletionOrder::Submission, CompletionOrder::AsCompleted] {
        conformance::check_all(&mut |queue_depth| {
            let world = SimWorld::new(u64::from(queue_depth));
            let members: Vec<Box<dyn BlockDevice>> = [("a", 10_000), ("b", 50_000), ("c", 3_000)]
                .into_iter()
                .map(|(name, latency_ns)| {
                    let disk = world
                        .add_disk(SimDiskConfig {
                            latency_ns,
                            queue_depth: 4,
                            ..SimDiskConfig::default_for_tests(name, BLOCK_SIZE_BYTES, 1500)
                        })
                        .unwrap();
                    Box::new(disk) as Box<dyn BlockDevice>
                })
                .collect();
            Box::new(StripedDevice::new("stripe0", members, 2048, order, queue_depth).unwrap())
        });
    }
}

fn block_pattern(block: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; BLOCK_SIZE_BYTES as usize];
    for (index, byte) in bytes.iter_mut().enumerate() {
        *byte = (block as usize * 31 + index) as u8;
    }
    bytes
}

fn read_member_block(member: &mut dyn BlockDevice, block: u64) -> Vec<u8> {
    let completion = run_one(
        member,
        Operation::Read {
            first_block: block,
            buffer: IoBuf::zeroed(BLOCK_SIZE_BYTES as usize),
        },
    )
    .unwrap();
    completion.buffer.unwrap().to_vec()
}

#[test]
fn blocks_land_on_the_member_and_offset_of_their_stripe_unit() {
    // 3 members of 10 blocks, stripe unit 2 blocks: capacity 3 x 10 = 30 blocks.
    // (stripe block, member, member block)
    let expected_placement = [
        (0, 0, 0),
        (1, 0, 1),
        (2, 1, 0),
        (3, 1, 1),
        (4, 2, 0),
        (5, 2, 1),
        (6, 0, 2),
        (7, 0, 3),
        (8, 1, 2),
        (17, 2, 5),
        (29, 2, 9),
    ];
    let members = ram_members(3, 10, 2);
    let mut striped =
        StripedDevice::new("stripe0", members, 1024, CompletionOrder::Submission, 4).unwrap();
    assert_eq!(striped.info().block_count, 30);
    let whole_device: Vec<u8> = (0..30).flat_map(block_pattern).collect();
    // One request crossing every stripe boundary, starting off a boundary, then the rest.
    for (first_block, block_count) in [(1, 28), (0, 1), (29, 1)] {
        let start = first_block as usize * BLOCK_SIZE_BYTES as usize;
        let end = start + block_count as usize * BLOCK_SIZE_BYTES as usize;
        let buffer = IoBuf::from_slice(&whole_device[start..end]);
        run_one(
            &mut striped,
            Operation::Write {
                first_block,
                buffer,
            },
        )
        .unwrap();
    }
    let mut members = striped.into_members();
    for (stripe_block, member, member_block) in expected_placement {
        assert_eq!(
            read_member_block(&mut *members[member], member_block),
            block_pattern(stripe_block),
            "stripe block {stripe_block} must be member {member} block {member_block}"
        );
    }
}

fn two_member_stripe(
    world: &SimWorld,
    order: CompletionOrder,
    faults: FaultConfig,
) -> StripedDevice {
    let slow = sim_member(world, "slow.img", 1_000_000, FaultConfig::default());
    let fast = sim_member(world, "b.img", 10_000, faults);
    let members: Vec<Box<dyn BlockDevice>> = vec![Box::new(slow), Box::new(fast)];
    StripedDevice::new("stripe0", members, u64::from(BLOCK_SIZE_BYTES), order, 8)
        .unwrap()
        .with_simulated_world(world.clone())
}

fn tags(completions: &[Completion]) -> Vec<u64> {
    completions
        .iter()
        .map(|completion| completion.tag)
        .collect()
}

/// A two-member stripe given tag 1 for the slow member (block 0), then tag 2 for the
/// fast one (block 1).
fn slow_then_fast_writes(world: &SimWorld, order: CompletionOrder) -> StripedDevice {
    let mut striped = two_member_stripe(world, order, FaultConfig::default());
    for tag in [1u8, 2] {
        let block = u64::from(tag - 1);
        let buffer = IoBuf::from_slice(&[tag; 512]);
        striped
            .submit(Request::write(u64::from(tag), block, buffer))
            .unwrap();
    }
    striped
}

#[test]
fn submission_order_holds_back_a_later_request_that_finished_first() {
    let world = SimWorld::new(1);
    let mut striped = slow_then_fast_writes(&world, CompletionOrder::Submission);
    let mut timer = sim_member(&world, "timer", 500_000, FaultConfig::default());
    timer.submit(Request::flush(0)).unwrap();
    timer.wait_completions(&mut Vec::new()).unwrap();
    assert_eq!(
        world.now_ns(),
        500_000,
        "the fast member's write is done by now"
    );
    let mut completions = Vec::new();
    assert_eq!(
        striped.poll_completions(&mut completions),
        0,
        "tag 2 waits for tag 1"
    );
    while striped.in_flight() > 0 {
        striped.wait_completions(&mut completions).unwrap();
    }
    assert_eq!(tags(&completions), vec![1, 2]);
    assert!(world.now_ns() >= 1_000_000);
}

#[test]
fn as_completed_order_delivers_the_fast_request_first() {
    let world = SimWorld::new(2);
    let mut striped = slow_then_fast_writes(&world, CompletionOrder::AsCompleted);
    let mut completions = Vec::new();
    striped.wait_completions(&mut completions).unwrap();
    assert_eq!(tags(&completions), vec![2]);
    assert!(world.now_ns() < 1_000_000);
    striped.wait_completions(&mut completions).unwrap();
    assert_eq!(tags(&completions), vec![2, 1]);
}

#[test]
fn a_member_failure_names_the_stripe_and_member_and_loses_no_buffer() {
    let world = SimWorld::new(3);
    let always_fail_writes = FaultConfig {
        write_failure_probability: 1.0,
        ..FaultConfig::default()
    };
    for order in [CompletionOrder::Submission, CompletionOrder::AsCompleted] {
        let mut striped = two_member_stripe(&world, order, always_fail_writes.clone());
        striped
            .submit(Request::write(7, 0, IoBuf::from_slice(&[9; 2048])))
            .unwrap();
        let mut completions = Vec::new();
        striped.wait_completions(&mut completions).unwrap();
        assert_eq!(striped.in_flight(), 0);
        striped
            .submit(Request::read(8, 0, IoBuf::zeroed(2048)))
            .unwrap();
        striped.wait_completions(&mut completions).unwrap();
        let [write, read] = <[Completion; 2]>::try_from(completions).unwrap();
        let error = write.status.unwrap_err();
        assert_eq!(&*error.device, "stripe0 member 1 (b.img)");
        assert!(
            matches!(
                error.kind,
                DeviceErrorKind::InjectedFault {
                    direction: TransferDirection::Write,
                    ..
                }
            ),
            "{error}"
        );
        assert_eq!(
            write.buffer.unwrap().len(),
            2048,
            "the caller's buffer comes back"
        );
        read.status.unwrap();
        let data = read.buffer.unwrap();
        assert!(
            data[..512].iter().all(|&byte| byte == 9),
            "slow member wrote"
        );
        assert!(
            data[512..1024].iter().all(|&byte| byte == 0),
            "failed member did not"
        );
        let members = striped.into_members();
        assert!(members.iter().all(|member| member.in_flight() == 0));
    }
}

#[test]
fn flush_reaches_every_member_and_makes_their_data_durable() {
    let world = SimWorld::new(4);
    world.set_crash_survival_probability(0.0);
    let mut striped =
        two_member_stripe(&world, CompletionOrder::Submission, FaultConfig::default());
    run_one(
        &mut striped,
        Operation::Write {
            first_block: 0,
            buffer: IoBuf::from_slice(&[5; 2048]),
        },
    )
    .unwrap();
    run_one(&mut striped, Operation::Flush).unwrap();
    run_one(
        &mut striped,
        Operation::Write {
            first_block: 4,
            buffer: IoBuf::from_slice(&[6; 1024]),
        },
    )
    .unwrap();
    world.crash_now();
    for (disk_index, block, byte) in [
        (0, 0, 5),
        (0, 1, 5),
        (1, 0, 5),
        (1, 1, 5),
        (0, 2, 0),
        (1, 2, 0),
    ] {
        assert!(
            world
                .durable_block(disk_index, block)
                .iter()
                .all(|&b| b == byte),
            "disk {disk_index} block {block}"
        );
    }
}

#[test]
fn a_crash_fails_the_striped_request_with_the_member_named() {
    let world = SimWorld::new(5);
    let mut striped =
        two_member_stripe(&world, CompletionOrder::Submission, FaultConfig::default());
    world.crash_after_requests(1);
    striped
        .submit(Request::write(1, 0, IoBuf::from_slice(&[1; 1024])))
        .unwrap();
    let mut completions = Vec::new();
    striped.wait_completions(&mut completions).unwrap();
    let error = completions.pop().unwrap().status.unwrap_err();
    assert_eq!(error.kind, DeviceErrorKind::Crashed);
    assert!(error.device.starts_with("stripe0 member "), "{error}");
}

#[test]
fn queue_depth_bounds_parent_requests_and_member_queues_fill_up() {
    let members = ram_members(2, 64, 1);
    let mut striped =
        StripedDevice::new("stripe0", members, 512, CompletionOrder::Submission, 3).unwrap();
    for tag in 0..3 {
        striped
            .submit(Request::write(tag, 0, IoBuf::zeroed(4096)))
            .unwrap();
    }
    let rejected = striped.submit(Request::flush(3)).unwrap_err();
    assert!(matches!(
        rejected.error.kind,
        DeviceErrorKind::QueueFull { queue_depth: 3 }
    ));
    let mut completions = Vec::new();
    while striped.in_flight() > 0 {
        striped.wait_completions(&mut completions).unwrap();
    }
    assert_eq!(tags(&completions), vec![0, 1, 2]);
}

#[test]
fn bad_stripes_are_refused_with_clear_errors() {
    let mixed: Vec<Box<dyn BlockDevice>> = vec![
        Box::new(RamDisk::new("a", 512, 64, 4).unwrap()),
        Box::new(RamDisk::new("b", 4096, 64, 4).unwrap()),
    ];
    // (members, stripe unit bytes, queue depth, words the error must contain)
    let cases: Vec<(Members, u64, u32, &str)> = vec![
        (Vec::new(), 4096, 8, "at least one member"),
        (mixed, 4096, 8, "member 1 (b) has 4096-byte blocks"),
        (ram_members(2, 64, 4), 0, 8, "positive multiple"),
        (ram_members(2, 64, 4), 768, 8, "positive multiple"),
        (
            ram_members(2, 4, 4),
            4096,
            8,
            "less than one 8-block stripe unit",
        ),
        (ram_members(2, 64, 4), 4096, 0, "queue depth 0"),
    ];
    for (members, stripe_unit_bytes, queue_depth, words) in cases {
        let error = StripedDevice::new(
            "stripe9",
            members,
            stripe_unit_bytes,
            CompletionOrder::Submission,
            queue_depth,
        )
        .err()
        .unwrap();
        assert_eq!(&*error.device, "stripe9");
        assert!(error.to_string().contains(words), "{error} lacks {words:?}");
    }
}

#[test]
fn dropping_a_busy_stripe_reaps_its_pieces_first() {
    let world = SimWorld::new(6);
    let mut striped =
        two_member_stripe(&world, CompletionOrder::Submission, FaultConfig::default());
    striped
        .submit(Request::write(1, 0, IoBuf::from_slice(&[4; 4096])))
        .unwrap();
    striped
        .submit(Request::read(2, 0, IoBuf::zeroed(4096)))
        .unwrap();
    drop(striped);
    assert!(
        world.now_ns() >= 1_000_000,
        "the drop waited for the slow member"
    );
    assert!(!world.run_next_event(), "nothing left running");
}
