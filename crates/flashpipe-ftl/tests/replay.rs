//! Trace replay through the FTL (`flashpipe_ftl::replay`): a closed-form case (one die,
//! arrivals spaced wider than the service time, so every latency is the preset's read or
//! program time plus transfers, computed here by hand), a random-write trace that fills a
//! small device several times over (no failed write, garbage collection visible),
//! the open loop's latency from arrival behind an outstanding bound, unwritten reads, and
//! determinism (same seed and trace, same report).

use flashpipe_flash::workload::{AccessKind, TraceRequest};
use flashpipe_flash::FlashConfig;
use flashpipe_ftl::replay::{FtlReplay, ReplayLoop, ReplayOptions, ReplayReport, UnwrittenReads};
use flashpipe_ftl::FtlOptions;

/// minFlash timing on a small, error-free device: `channels` x `ways` dies, typical
/// programs only, no bad blocks, no bit errors.
fn small_config(channels: u32, ways: u32, blocks_per_plane: u32) -> FlashConfig {
    let mut config = FlashConfig::preset("minflash").unwrap();
    config.geometry.channels = channels;
    config.geometry.ways = ways;
    config.geometry.blocks_per_plane = blocks_per_plane;
    config.geometry.pages_per_block = 32;
    config.timing.program_slow_fraction = 0.0;
    let reliability = &mut config.reliability;
    reliability.base_rber = 0.0;
    reliability.wear_rber_at_rated = 0.0;
    reliability.retention_rber_per_hour = 0.0;
    reliability.read_disturb_rber_per_read = 0.0;
    reliability.factory_bad_block_fraction = 0.0;
    reliability.grown_bad_probability_at_rated = 0.0;
    config
}

fn replay_options() -> FtlOptions {
    FtlOptions {
        checkpoint_interval_pages: 0,
        ..FtlOptions::default()
    }
}

fn replay(config: FlashConfig, requests: &[TraceRequest], options: ReplayOptions) -> ReplayReport {
    let mut replay = FtlReplay::format(config, 7, replay_options()).unwrap();
    replay.run(requests, &options).unwrap()
}

fn request(arrival_ns: u64, kind: AccessKind, page: u64, pages: u64) -> TraceRequest {
    TraceRequest {
        arrival_ns,
        kind,
        offset_bytes: page * 8192,
        length_bytes: pages * 8192,
    }
}

/// One die; writes of one page each 10 ms apart, then reads of the same pages: nothing
/// ever queues, so each latency is the closed form of one page.
#[test]
fn one_die_without_queueing_matches_the_closed_form() {
    let config = small_config(1, 1, 64);
    let timing = config.timing.clone();
    let page_bytes = u64::from(config.geometry.page_data_bytes);
    // The host link moves the page's data bytes at its rate (8192 B at 1.35 GB/s: 6068.1 ns).
    let link_ns = (page_bytes * 1_000_000_000) as f64 / timing.host_link_bytes_per_second as f64;
    // Read: command, array read, transfer over the bus, ECC decode, host link, software.
    let read_ns = (timing.command_address_ns
        + timing.array_read_ns
        + timing.page_transfer_ns
        + timing.ecc_decode_ns
        + timing.host_software_read_ns) as f64
        + link_ns;
    // Program: host link, software, ECC encode, command, transfer, typical program.
    let write_ns = (timing.host_software_write_ns
        + timing.ecc_encode_ns
        + timing.command_address_ns
        + timing.page_transfer_ns
        + timing.program_ns_by_page_type[0]) as f64
        + link_ns;
    assert!(
        (read_ns / 1000.0 - 128.07).abs() < 0.01,
        "minFlash Table I read"
    );
    assert!(
        (write_ns / 1000.0 - 476.17).abs() < 0.01,
        "minFlash Table I write"
    );
    let spacing_ns = 10_000_000;
    let mut requests = Vec::new();
    for page in 0..8 {
        requests.push(request(page * spacing_ns, AccessKind::Write, page, 1));
    }
    for page in 0..8 {
        requests.push(request((8 + page) * spacing_ns, AccessKind::Read, page, 1));
    }
    let report = replay(config, &requests, ReplayOptions::default());
    assert_eq!((report.reads.count, report.writes.count), (8, 8));
    assert_eq!(report.failed_writes(), 0);
    assert_eq!(report.unwritten_read_requests, 0);
    for (kind, latencies, expected_ns) in [
        ("read", &report.latencies_ns.reads, read_ns),
        ("write", &report.latencies_ns.writes, write_ns),
    ] {
        for (latency_ns, _) in latencies.iter() {
            assert!(
                (latency_ns as f64 - expected_ns).abs() <= 1.0,
                "{kind}: {latency_ns} ns against the closed form {expected_ns:.1} ns"
            );
        }
    }
    assert_eq!(report.collection.gc_victims, 0);
}

/// A small device (4 dies x 24 blocks x 32 pages) written over three times by random
/// one-page writes: every write completes, collection runs and amplifies writes.
#[test]
fn random_writes_fill_the_device_with_no_failure_and_visible_collection() {
    let config = small_config(2, 2, 24);
    let mut replay = FtlReplay::format(config, 3, replay_options()).unwrap();
    let logical_pages = replay.ftl().info().block_count;
    let mut generator = flashpipe_device::SplitMix64::new(11);
    let requests: Vec<TraceRequest> = (0..3 * logical_pages)
        .map(|index| {
            request(
                index * 200_000,
                AccessKind::Write,
                generator.below(logical_pages),
                1,
            )
        })
        .collect();
    let report = replay.run(&requests, &ReplayOptions::default()).unwrap();
    assert_eq!(report.writes.count, requests.len() as u64);
    assert_eq!(report.failed_writes(), 0, "{report:?}");
    assert!(report.collection.gc_victims > 0, "{:?}", report.collection);
    assert!(report.collection.erases > 0);
    assert!(report.collection.write_amplification > 1.0);
    assert!(report.die_utilization.iter().all(|&share| share > 0.0));
}

/// Ten one-page reads arriving together behind a bound of one outstanding request:
/// the k-th waits for the k-1 before it, and its latency counts that wait.
#[test]
fn open_loop_latency_runs_from_arrival_behind_the_bound() {
    let config = small_config(1, 1, 16);
    let mut requests = vec![request(0, AccessKind::Write, 0, 1)];
    requests.extend((0..10).map(|_| request(10_000_000, AccessKind::Read, 0, 1)));
    let options = ReplayOptions {
        replay_loop: ReplayLoop::Open {
            max_outstanding: Some(1),
        },
        ..ReplayOptions::default()
    };
    let report = replay(config.clone(), &requests, options);
    assert_eq!(report.outstanding_max, 1);
    assert_eq!(report.outstanding_bound_hits, 9);
    let reads = sorted_values(&report.latencies_ns.reads);
    let first = reads[0];
    for (rank, &latency_ns) in reads.iter().enumerate() {
        let expected = first * (rank as u64 + 1);
        assert!(
            latency_ns.abs_diff(expected) <= 10 * (rank as u64 + 1),
            "read {rank}: {latency_ns} ns, expected about {expected}"
        );
    }
    let closed = ReplayOptions {
        replay_loop: ReplayLoop::Closed { queue_depth: 1 },
        ..ReplayOptions::default()
    };
    let report = replay(config, &requests, closed);
    let reads = sorted_values(&report.latencies_ns.reads);
    assert!(
        reads
            .iter()
            .all(|&latency| latency.abs_diff(reads[0]) <= 10),
        "closed loop: latency from issue, all alike: {reads:?}"
    );
}

/// Reads of never-written pages are counted; preconditioning writes them first and the
/// reads then go to flash.
#[test]
fn unwritten_reads_are_counted_or_preconditioned() {
    let config = small_config(1, 2, 16);
    let requests: Vec<TraceRequest> = (0..4)
        .map(|index| request(index * 1_000_000, AccessKind::Read, index * 3, 2))
        .collect();
    let zero = replay(config.clone(), &requests, ReplayOptions::default());
    assert_eq!(zero.unwritten_read_requests, 4);
    assert_eq!(zero.unwritten_read_pages, 8);
    assert_eq!(
        zero.zero_filled_reads, 4,
        "answered with zeros, flash untouched"
    );
    assert_eq!(
        zero.reads.count, 0,
        "zero-filled reads stay out of the read latency figures"
    );
    assert_eq!(zero.all.count, 0);
    let options = ReplayOptions {
        unwritten_reads: UnwrittenReads::Precondition,
        ..ReplayOptions::default()
    };
    let preconditioned = replay(config, &requests, options);
    assert_eq!(preconditioned.unwritten_read_requests, 0);
    assert_eq!(preconditioned.precondition_pages_written, 8);
    assert!(preconditioned.reads.latency_us_p50 > 100.0);
    assert_eq!(
        preconditioned.collection.host_pages_written, 0,
        "outside the measurement"
    );
}

/// The same seed and trace give the same report, to the last latency.
#[test]
fn same_seed_and_trace_give_the_same_report() {
    let mut config = small_config(2, 2, 16);
    config.reliability.factory_bad_block_fraction = 0.05;
    config.timing.program_slow_fraction = 0.1;
    let mut generator = flashpipe_device::SplitMix64::new(5);
    let requests: Vec<TraceRequest> = (0..600)
        .map(|index| {
            let kind = match generator.below(10) {
                0..=5 => AccessKind::Read,
                6..=8 => AccessKind::Write,
                _ => AccessKind::Trim,
            };
            request(
                index * 50_000,
                kind,
                generator.below(1500),
                1 + generator.below(4),
            )
        })
        .collect();
    let first = replay(config.clone(), &requests, ReplayOptions::default());
    let second = replay(config, &requests, ReplayOptions::default());
    assert_eq!(first, second);
    assert_eq!(first.requests, 600);
    assert!(first.trims.count > 0);
}

/// Runs on one device follow each other: pages a first run wrote are not unwritten for
/// the next, and the next's statistics start after the first.
#[test]
fn consecutive_runs_share_the_device_and_its_written_pages() {
    let config = small_config(1, 2, 16);
    let mut replay = FtlReplay::format(config, 7, replay_options()).unwrap();
    let writes: Vec<TraceRequest> = (0..4)
        .map(|index| request(index * 1_000_000, AccessKind::Write, index * 2, 2))
        .collect();
    let reads: Vec<TraceRequest> = (0..4)
        .map(|index| request(index * 1_000_000, AccessKind::Read, index * 2, 2))
        .collect();
    let first = replay.run(&writes, &ReplayOptions::default()).unwrap();
    assert_eq!(first.collection.host_pages_written, 8);
    let second = replay.run(&reads, &ReplayOptions::default()).unwrap();
    assert_eq!(second.unwritten_read_requests, 0);
    assert_eq!(second.collection.host_pages_written, 0);
    assert!(second.reads.latency_us_p50 > 100.0);
}

/// `speed` divides the arrival times: twice as fast halves the span.
#[test]
fn speed_scales_arrival_times() {
    let config = small_config(1, 1, 16);
    let requests: Vec<TraceRequest> = (0..5)
        .map(|index| request(index * 10_000_000, AccessKind::Write, index, 1))
        .collect();
    for (speed, span_ns) in [(1.0, 40_000_000), (2.0, 20_000_000), (0.5, 80_000_000)] {
        let options = ReplayOptions {
            speed,
            ..ReplayOptions::default()
        };
        let report = replay(config.clone(), &requests, options);
        assert_eq!(report.trace_span_ns, span_ns, "speed {speed}");
        assert!(report.elapsed_ns > span_ns && report.elapsed_ns < span_ns + 1_000_000);
    }
    let refused = ReplayOptions {
        speed: 0.0,
        ..ReplayOptions::default()
    };
    let mut replay = FtlReplay::format(config, 7, replay_options()).unwrap();
    let error = replay.run(&requests, &refused).unwrap_err();
    assert!(error.to_string().contains("`speed`"), "{error}");
}

/// A replay from a preconditioned steady state: the filled pages read from flash, a short
/// burst of random overwrites meets garbage collection at once, and a second
/// preconditioning of a device already written is refused.
#[test]
fn a_replay_from_a_preconditioned_steady_state_collects_at_once() {
    let config = small_config(1, 2, 16);
    let mut replay = FtlReplay::format(config, 7, replay_options()).unwrap();
    let options = flashpipe_ftl::PreconditionOptions {
        fill_share: 0.9,
        overwrite_passes: 1.0,
        ..flashpipe_ftl::PreconditionOptions::default()
    };
    let filled = replay.precondition(&options).unwrap().filled_pages;
    assert!(filled > 0);
    let mut generator = flashpipe_device::SplitMix64::new(3);
    let requests: Vec<TraceRequest> = (0..filled)
        .map(|index| {
            let kind = if index % 4 == 0 {
                AccessKind::Read
            } else {
                AccessKind::Write
            };
            request(index * 1_000, kind, generator.below(filled), 1)
        })
        .collect();
    let report = replay
        .run(
            &requests,
            &ReplayOptions {
                replay_loop: ReplayLoop::Closed { queue_depth: 8 },
                ..ReplayOptions::default()
            },
        )
        .unwrap();
    assert_eq!(
        report.unwritten_read_requests, 0,
        "the filled pages are written"
    );
    assert_eq!(report.zero_filled_reads, 0);
    assert!(report.reads.latency_us_p50 > 10.0, "reads went to flash");
    assert!(
        report.collection.gc_pages_copied > 0 && report.collection.write_amplification > 1.0,
        "a steady state collects from the first overwrites: {:?}",
        report.collection
    );
    assert!(replay.precondition(&options).is_err());
}

/// Every value a histogram holds, ascending, each as often as it was recorded.
fn sorted_values(histogram: &flashpipe_base::LatencyHistogram) -> Vec<u64> {
    histogram
        .iter()
        .flat_map(|(value, count)| std::iter::repeat_n(value, count as usize))
        .collect()
}
