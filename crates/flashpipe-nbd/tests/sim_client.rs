//! The NBD client inside the deterministic simulation (issue #15): a file system striped
//! over simulated NBD disk nodes whose links delay, drop and reset, and refuse
//! reconnects, runs the testkit's random file-system workload (every read checked
//! against the model); then it is remounted over fresh connections and must hold the
//! model exactly, fsck clean. A member whose node stays down fails with errors naming
//! it; the same seed gives the same history; a flush after a reconnect reports the
//! writes no flush had covered; a node that restarts (losing what it had not flushed)
//! under a file system leaves it at its last flush, or at the flush that failed.
//!
//! `FLASHPIPE_SEEDS=N` runs seeds 0..N of the campaign (default 6); `FLASHPIPE_SEED=S`
//! replays one.

use flashpipe_array::{CompletionOrder, StripedDevice};
use flashpipe_device::{run_one, BlockDevice, IoBuf, Operation, SplitMix64};
use flashpipe_fs::{Filesystem, FormatOptions};
use flashpipe_nbd::client::{
    ReconnectDurability, SimLinkConfig, SimNbdDevice, SimNbdDeviceConfig, SimNetwork,
    SimNetworkCounters, SimNodeConfig,
};
use flashpipe_testkit::fs_workload::{check_clean, contents, describe, FsWorkload, WorkloadShape};
use flashpipe_testkit::seeds::run_seeds;

const FS_BLOCK_BYTES: u32 = 4096;

/// A seeded layout: nodes, their links, and how the client talks to them.
struct Layout {
    members: usize,
    device_block_bytes: u32,
    stripe_unit_bytes: u64,
    device_config: SimNbdDeviceConfig,
}

fn faulty_link(rng: &mut SplitMix64) -> SimLinkConfig {
    SimLinkConfig {
        delay_ns_min: 10_000,
        delay_ns_max: 10_000 + rng.below(200_000),
        service_ns_max: rng.below(100_000),
        sever_probability: [0.0, 0.005, 0.01, 0.02][rng.below(4) as usize],
        silent_loss_probability: [0.0, 0.002, 0.005][rng.below(3) as usize],
        garble_probability: [0.0, 0.005][rng.below(2) as usize],
        close_probability: [0.0, 0.005, 0.01][rng.below(3) as usize],
        refuse_probability: [0.0, 0.3, 0.5][rng.below(3) as usize],
    }
}

/// A seeded network; with `faulty` its links misbehave, else they only delay.
fn build(seed: u64, rng: &mut SplitMix64, faulty: bool) -> (SimNetwork, Layout) {
    let network = SimNetwork::new(seed);
    let members = 2 + rng.below(3) as usize;
    let fs_blocks: u64 = 480;
    let node_bytes = (fs_blocks / members as u64 + 1) * u64::from(FS_BLOCK_BYTES);
    for member in 0..members {
        let config = SimNodeConfig {
            name: format!("node{member}"),
            size_bytes: node_bytes,
            structured_replies: rng.chance(0.5),
            maximum_payload_bytes: [4096, 16384, 1 << 20][rng.below(3) as usize],
            link: if faulty {
                faulty_link(rng)
            } else {
                SimLinkConfig::reliable()
            },
        };
        network.add_node(config).expect("node");
    }
    let device_block_bytes = if rng.chance(0.5) { 512 } else { 4096 };
    let mut device_config = SimNbdDeviceConfig::new(0, device_block_bytes);
    device_config.reconnect_attempts = 12;
    // Far above a round trip (at most about 0.5 ms here), far below the default 30 s.
    device_config.reply_timeout_ms = 20;
    device_config.write_with_fua = rng.chance(0.3);
    // The nodes' RAM disks keep what they acknowledged across resets.
    device_config.reconnect_durability = ReconnectDurability::TrustServer;
    let layout = Layout {
        members,
        device_block_bytes,
        stripe_unit_bytes: u64::from(FS_BLOCK_BYTES) << rng.below(2),
        device_config,
    };
    (network, layout)
}

fn open_stack(network: &SimNetwork, layout: &Layout) -> Box<dyn BlockDevice> {
    let members: Vec<Box<dyn BlockDevice>> = (0..layout.members)
        .map(|node| {
            let config = SimNbdDeviceConfig {
                node,
                ..layout.device_config
            };
            Box::new(SimNbdDevice::open(network, config).expect("open")) as Box<dyn BlockDevice>
        })
        .collect();
    Box::new(
        StripedDevice::new(
            "stripe",
            members,
            layout.stripe_unit_bytes,
            CompletionOrder::AsCompleted,
            64,
        )
        .expect("stripe"),
    )
}

/// A file system of [`FS_BLOCK_BYTES`] blocks made on the stripe of `layout`.
fn format_stack(network: &SimNetwork, layout: &Layout, seed: u64) -> Filesystem {
    let options = FormatOptions {
        fs_block_size_bytes: FS_BLOCK_BYTES,
        store_identity: None,
    };
    Filesystem::format(open_stack(network, layout), &options)
        .unwrap_or_else(|error| panic!("seed {seed}: mkfs: {error}"))
}

/// One seed: workload under faults, then a remount that must hold the model.
fn run_seed(seed: u64) -> (SimNetworkCounters, u64) {
    let mut rng = SplitMix64::new(seed);
    let (network, layout) = build(seed, &mut rng, true);
    assert!(layout.device_block_bytes <= FS_BLOCK_BYTES);
    let fs = format_stack(&network, &layout, seed);
    let mut run = FsWorkload::new(seed, rng, fs, WorkloadShape::new(u64::from(FS_BLOCK_BYTES)));
    let ended_early = run.run(100);
    assert!(!ended_early, "seed {seed}: a device error ended the run");
    run.fs
        .flush()
        .unwrap_or_else(|error| panic!("seed {seed}: last flush: {error}"));
    let model = run.model.clone();
    drop(run);

    let mut fs = Filesystem::mount(open_stack(&network, &layout))
        .unwrap_or_else(|error| panic!("seed {seed}: remount: {error}"));
    check_clean(&mut fs, seed, "after the remount");
    let found = contents(&mut fs, seed);
    assert!(
        found == model,
        "seed {seed}: after the remount the files are {:?}, the model {:?}",
        describe(&found),
        describe(&model)
    );
    (network.counters(), network.history_fingerprint())
}

#[test]
fn a_file_system_striped_over_faulty_simulated_nbd_nodes_keeps_every_acknowledged_write() {
    let results = run_seeds(6, run_seed);
    let total = |count: fn(&SimNetworkCounters) -> u64| -> u64 {
        results.iter().map(|(counters, _)| count(counters)).sum()
    };
    let resets = total(|counters| counters.connections_reset);
    let reconnects = total(|counters| counters.reconnects);
    let partitioned = total(|counters| counters.connections_partitioned);
    let garbled = total(|counters| counters.replies_garbled);
    let refused = total(|counters| counters.attempts_refused);
    let served = total(|counters| counters.requests_served);
    eprintln!(
        "{} seeds: {served} requests served, {resets} connections reset, {partitioned} partitioned, {garbled} replies garbled, {refused} attempts refused, {reconnects} reconnects",
        results.len()
    );
    if results.len() >= 4 {
        assert!(
            resets > 0 && partitioned > 0 && reconnects > 0,
            "the faults never fired"
        );
        assert!(
            served > 100 * results.len() as u64,
            "too little I/O: {served}"
        );
    }
}

#[test]
fn the_same_seed_gives_the_same_history() {
    let first = run_seed(3);
    let second = run_seed(3);
    assert_eq!(first, second);
    let other = run_seed(4);
    assert_ne!(first.1, other.1, "two seeds gave the same history");
}

/// A network of `seed` with one reliable node, and a device of 4 KiB blocks over it.
fn one_reliable_node(seed: u64) -> (SimNetwork, SimNbdDevice) {
    let network = SimNetwork::new(seed);
    reliable_node(&network, "node0");
    let device = SimNbdDevice::open(&network, SimNbdDeviceConfig::new(0, 4096)).expect("open");
    (network, device)
}

fn reliable_node(network: &SimNetwork, name: &str) -> usize {
    network
        .add_node(SimNodeConfig {
            name: name.to_string(),
            size_bytes: 1 << 20,
            structured_replies: true,
            maximum_payload_bytes: 1 << 20,
            link: SimLinkConfig::reliable(),
        })
        .expect("node")
}

fn write_block(device: &mut dyn BlockDevice, block: u64, byte: u8) -> Result<(), String> {
    let buffer = IoBuf::from_slice(&[byte; 4096]);
    let operation = Operation::Write {
        first_block: block,
        buffer,
    };
    let completion = run_one(device, operation).map_err(|error| error.to_string())?;
    completion.status.map_err(|error| error.to_string())
}

fn read_block(device: &mut dyn BlockDevice, block: u64) -> Result<Vec<u8>, String> {
    let operation = Operation::Read {
        first_block: block,
        buffer: IoBuf::zeroed(4096),
    };
    let completion = run_one(device, operation).map_err(|error| error.to_string())?;
    completion.status.map_err(|error| error.to_string())?;
    Ok(completion
        .buffer
        .expect("a read hands its buffer back")
        .as_slice()
        .to_vec())
}

fn flush(device: &mut dyn BlockDevice) -> Result<(), String> {
    let completion = run_one(device, Operation::Flush).map_err(|error| error.to_string())?;
    completion.status.map_err(|error| error.to_string())
}

#[test]
fn a_member_whose_reconnects_run_out_fails_with_errors_naming_it() {
    let network = SimNetwork::new(7);
    for index in 0..3 {
        reliable_node(&network, &format!("node{index}"));
    }
    let mut config = SimNbdDeviceConfig::new(1, 4096);
    config.reconnect_attempts = 3;
    let mut device = SimNbdDevice::open(&network, config).expect("open");
    write_block(&mut device, 5, 0xab).expect("write");
    flush(&mut device).expect("flush");
    network.take_down(1);
    let error = read_block(&mut device, 5).expect_err("the node is down");
    assert!(error.contains("nbd+sim://node1/"), "{error}");
    assert!(
        error.contains("reconnecting failed (3 attempts at most)"),
        "{error}"
    );
    assert!(error.contains("the disk node is down"), "{error}");
    let later = write_block(&mut device, 6, 1).expect_err("the device failed for good");
    assert!(later.contains("nbd+sim://node1/"), "{later}");
    assert_eq!(device.counters().connections_lost, 1);
    assert_eq!(device.counters().reconnects, 0);
    assert!(device.failure().is_some());

    // Through a striped file system: the error names the member.
    network.bring_up(1);
    let members: Vec<Box<dyn BlockDevice>> = (0..3)
        .map(|node| {
            let config = SimNbdDeviceConfig {
                reconnect_attempts: 2,
                ..SimNbdDeviceConfig::new(node, 4096)
            };
            Box::new(SimNbdDevice::open(&network, config).expect("open")) as Box<dyn BlockDevice>
        })
        .collect();
    let striped = StripedDevice::new("stripe", members, 4096, CompletionOrder::AsCompleted, 32)
        .expect("stripe");
    let mut fs = Filesystem::format(
        Box::new(striped),
        &FormatOptions {
            fs_block_size_bytes: 4096,
            store_identity: None,
        },
    )
    .expect("mkfs");
    let file = fs.create("kept").expect("create");
    fs.write(file, 0, &[7u8; 64 << 10]).expect("write");
    fs.flush().expect("flush");
    network.take_down(2);
    let outcome = fs
        .write(file, 0, &[9u8; 64 << 10])
        .map_err(|error| error.to_string())
        .and_then(|()| fs.flush().map_err(|error| error.to_string()));
    let error = outcome.expect_err("a member is gone");
    assert!(error.contains("nbd+sim://node2/"), "{error}");
}

/// A network seeded `seed` with one reliable node, `node0`, and a device configuration
/// for it that trusts the server with what it acknowledged before a reconnect.
fn one_trusted_node(seed: u64) -> (SimNetwork, SimNbdDeviceConfig) {
    let network = SimNetwork::new(seed);
    reliable_node(&network, "node0");
    let mut config = SimNbdDeviceConfig::new(0, 4096);
    config.reconnect_durability = ReconnectDurability::TrustServer;
    (network, config)
}

#[test]
fn a_request_lost_with_its_connection_is_reissued_and_reads_back() {
    let (network, config) = one_trusted_node(11);
    let mut device = SimNbdDevice::open(&network, config).expect("open");
    for block in 0..8 {
        device
            .submit(flashpipe_device::Request {
                tag: block,
                operation: Operation::Write {
                    first_block: block,
                    buffer: IoBuf::from_slice(&[block as u8 + 1; 4096]),
                },
            })
            .expect("submit");
    }
    // The node resets the connection with all eight in flight; it comes back at once.
    network.take_down(0);
    network.bring_up(0);
    let mut completions = Vec::new();
    while completions.len() < 8 {
        device.wait_completions(&mut completions).expect("wait");
    }
    assert!(completions
        .iter()
        .all(|completion| completion.status.is_ok()));
    assert_eq!(device.counters().reconnects, 1);
    assert_eq!(device.counters().requests_reissued, 8);
    for block in 0..8 {
        assert_eq!(
            read_block(&mut device, block).unwrap(),
            vec![block as u8 + 1; 4096]
        );
    }
}

#[test]
fn a_flush_after_a_reconnect_reports_writes_no_flush_covered() {
    let (network, mut device) = one_reliable_node(5);
    write_block(&mut device, 1, 1).expect("write");
    network.take_down(0);
    network.bring_up(0);
    // The reset is noticed on the next request, which is re-issued after the reconnect.
    write_block(&mut device, 2, 2).expect("write after the reset");
    let error = flush(&mut device).expect_err("one write was acknowledged but not flushed");
    assert!(
        error.contains("acknowledged 1 writes that no flush had covered"),
        "{error}"
    );
    assert!(error.contains("nbd+sim://node0/"), "{error}");
    flush(&mut device).expect("the next flush is clean");
}

#[test]
fn a_partitioned_connection_is_timed_out_and_its_requests_reissued() {
    let (network, mut config) = one_trusted_node(13);
    config.reply_timeout_ms = 100;
    let mut device = SimNbdDevice::open(&network, config).expect("open");
    write_block(&mut device, 3, 3).expect("write");
    network.partition(0);
    let started_ns = network.now_ns();
    write_block(&mut device, 4, 4).expect("the write goes through after the timeout");
    assert!(
        network.now_ns() - started_ns >= 100_000_000,
        "timed out too early"
    );
    assert_eq!(device.counters().connections_lost, 1);
    assert_eq!(device.counters().reconnects, 1);
    assert_eq!(read_block(&mut device, 3).unwrap(), vec![3; 4096]);
    assert_eq!(read_block(&mut device, 4).unwrap(), vec![4; 4096]);
}

#[test]
fn a_link_that_swallows_everything_ends_in_an_error_naming_the_member() {
    let network = SimNetwork::new(17);
    let mut link = SimLinkConfig::reliable();
    link.silent_loss_probability = 1.0;
    network
        .add_node(SimNodeConfig {
            name: "black-hole".to_string(),
            size_bytes: 1 << 20,
            structured_replies: false,
            maximum_payload_bytes: 1 << 20,
            link,
        })
        .expect("node");
    let mut config = SimNbdDeviceConfig::new(0, 4096);
    config.reconnect_attempts = 4;
    config.reply_timeout_ms = 10;
    let mut device = SimNbdDevice::open(&network, config).expect("open");
    let error = read_block(&mut device, 0).expect_err("nothing ever answers");
    assert!(error.contains("nbd+sim://black-hole/"), "{error}");
    assert!(
        error.contains("no reply from the server for 10 ms"),
        "{error}"
    );
    assert!(
        error.contains("lost 5 times in a row without a request completing"),
        "{error}"
    );
    assert_eq!(device.counters().reconnects, 4);
}

#[test]
fn a_node_restart_loses_unflushed_writes_and_the_next_flush_says_so() {
    let (network, mut device) = one_reliable_node(19);
    write_block(&mut device, 1, 1).expect("write");
    flush(&mut device).expect("flush");
    write_block(&mut device, 1, 2).expect("an acknowledged write no flush covers");
    network.restart_node(0);
    assert_eq!(network.counters().blocks_reverted, 8);
    // Read through the reconnect: the node lost the unflushed write.
    assert_eq!(read_block(&mut device, 1).unwrap(), vec![1; 4096]);
    let error = flush(&mut device).expect_err("the lost write is reported");
    assert!(error.contains("nbd+sim://node0/"), "{error}");
    assert!(
        error.contains("acknowledged 1 writes that no flush had covered"),
        "{error}"
    );
    flush(&mut device).expect("reported once");
}

/// One seed: the workload, a node restart at a drawn step, a flush, a remount: the
/// files are those of the last completed flush, or of the flush that failed.
fn run_restart_seed(seed: u64) -> bool {
    let mut rng = SplitMix64::new(seed ^ 0x0005_eed0_f4e5_7a47);
    // Reliable links: with the default durability any reset would make a flush report
    // possibly lost writes; here only the restart does.
    let (network, mut layout) = build(seed, &mut rng, false);
    layout.device_config.reconnect_durability = ReconnectDurability::ReportUnflushedWrites;
    let fs = format_stack(&network, &layout, seed);
    let steps_before = 1 + rng.below(60) as usize;
    let victim = rng.below(layout.members as u64) as usize;
    let mut run = FsWorkload::new(seed, rng, fs, WorkloadShape::new(u64::from(FS_BLOCK_BYTES)));
    let ended_early = run.run(steps_before);
    assert!(!ended_early, "seed {seed}: a device error ended the run");
    network.restart_node(victim);
    let flushed = run.fs.flush();
    let victim_name = format!("nbd+sim://node{victim}/");
    if let Err(error) = &flushed {
        let text = error.to_string();
        assert!(text.contains(&victim_name), "seed {seed}: {text}");
    }
    let (committed, target) = (run.committed.clone(), run.model.clone());
    drop(run);
    let mut fs = Filesystem::mount(open_stack(&network, &layout))
        .unwrap_or_else(|error| panic!("seed {seed}: remount: {error}"));
    check_clean(&mut fs, seed, "after the remount");
    let found = contents(&mut fs, seed);
    if flushed.is_ok() {
        assert!(found == target, "seed {seed}: a clean flush lost files");
    } else {
        assert!(
            found == committed || found == target,
            "seed {seed}: after the restart the files are {:?}; the last flush had {:?}; the failed flush {:?}",
            describe(&found),
            describe(&committed),
            describe(&target)
        );
    }
    flushed.is_err()
}

#[test]
fn a_node_restart_under_a_file_system_keeps_the_last_flush() {
    let failed_flushes = run_seeds(6, run_restart_seed)
        .into_iter()
        .filter(|&failed| failed)
        .count();
    eprintln!("flushes failed after a node restart: {failed_flushes}");
}

#[test]
fn a_device_dropped_while_reconnecting_leaves_the_node_to_the_next() {
    let (network, mut first) = one_reliable_node(23);
    first
        .submit(flashpipe_device::Request {
            tag: 1,
            operation: Operation::Flush,
        })
        .expect("submit");
    network.restart_node(0);
    // Run until the reset is seen and an attempt is scheduled, then drop the device.
    let mut completions = Vec::new();
    while first.counters().connections_lost == 0 {
        assert!(network.run_next_event(), "the reset never came");
        first.poll_completions(&mut completions);
    }
    drop(first);
    let mut second = SimNbdDevice::open(&network, SimNbdDeviceConfig::new(0, 4096)).expect("open");
    write_block(&mut second, 0, 9).expect("write");
    assert_eq!(read_block(&mut second, 0).unwrap(), vec![9; 4096]);
    assert_eq!(second.counters().connections_lost, 0);
}
