//! The `minflash-rack` preset's bus overhead and inter-controller links (minFlash V.A,
//! V.B): what they cost a lone request, what they take from a busy bus or link, and how
//! their fields are checked and written.

use flashpipe_flash::workload::{self, AccessKind, AccessPattern, SyntheticJob};
use flashpipe_flash::{
    FlashAddress, FlashArray, FlashCommand, FlashConfig, FlashOptions, FlashRequest,
};

fn rack(devices: u32) -> FlashConfig {
    let mut config = FlashConfig::preset("minflash-rack").expect("the minflash-rack preset");
    config.geometry.devices = devices;
    config.timing.program_slow_fraction = 0.0;
    config
}

fn array(config: FlashConfig, hosts: u32) -> FlashArray {
    let options = FlashOptions {
        host_count: hosts,
        host_queue_depth: 128,
        ..FlashOptions::timing_only(3)
    };
    FlashArray::new(config, options).expect("an array")
}

/// Latency (ns) of one page read of `device` by host 0 on an idle array.
fn lone_read_ns(config: FlashConfig, device: u32) -> u64 {
    let mut array = array(config, 1);
    array.precondition_full().expect("preconditioned");
    let address = FlashAddress {
        device,
        bus: 0,
        chip: 0,
        block: 1,
        page: 0,
    };
    array
        .submit(FlashRequest {
            tag: 1,
            host: 0,
            command: FlashCommand::ReadPage { address },
        })
        .expect("room for the read");
    let mut acks = Vec::new();
    array.run_until_idle(&mut acks);
    assert_eq!(acks.len(), 1);
    acks[0].completed_ns - acks[0].submitted_ns
}

/// Total read bandwidth (GB/s) of two 16 MiB random requests in flight per host.
fn bandwidth(config: FlashConfig, hosts: u32) -> (f64, FlashArray) {
    let devices = config.geometry.devices;
    let mut array = array(config, hosts);
    array.precondition_full().expect("preconditioned");
    let job = SyntheticJob {
        pattern: AccessPattern::Random,
        kind: AccessKind::Read,
        request_bytes: 16 << 20,
        queue_depth: 2,
        hosts,
        requests_per_host: 4,
        devices,
        seed: 3,
    };
    let report = workload::run_job(&mut array, &job);
    (report.bytes as f64 / report.elapsed_ns as f64, array)
}

#[test]
fn the_rack_adds_its_fields_to_minflash_and_nothing_else() {
    let plain = FlashConfig::preset("minflash").unwrap();
    let rack = rack(1);
    assert_eq!(rack.name, "minflash-rack");
    assert_eq!(rack.timing.bus_overhead_ns_per_page, 10_600);
    assert_eq!(rack.timing.link_bytes_per_second, 1_000_000_000);
    let mut stripped = rack.clone();
    stripped.name = plain.name.clone();
    stripped.timing.bus_overhead_ns_per_page = 0;
    stripped.timing.link_bytes_per_second = 0;
    stripped.timing.program_slow_fraction = plain.timing.program_slow_fraction;
    assert_eq!(stripped, plain);
    // Fields at 0 are left out, so configurations without them write the bytes they did.
    assert!(!plain.to_toml().contains("bus_overhead_ns_per_page"));
    assert!(!plain.to_toml().contains("\nlink_bytes_per_second"));
    let text = rack.to_toml();
    assert_eq!(FlashConfig::from_toml(&text, "rack").unwrap(), rack);
}

#[test]
fn a_link_rate_above_the_limit_is_refused_with_its_field() {
    let text = rack(1).to_toml().replace(
        "link_bytes_per_second = 1000000000",
        "link_bytes_per_second = 2000000000000",
    );
    let error = FlashConfig::from_toml(&text, "rack.toml").unwrap_err();
    assert!(
        error.to_string().contains("link_bytes_per_second"),
        "{error}"
    );
}

#[test]
fn a_lone_local_read_does_not_feel_the_bus_overhead() {
    let plain = lone_read_ns(
        {
            let mut config = FlashConfig::preset("minflash").unwrap();
            config.timing.program_slow_fraction = 0.0;
            config
        },
        0,
    );
    assert_eq!(lone_read_ns(rack(1), 0), plain);
    assert_eq!(plain, 128_069, "Table I: 128 us");
}

#[test]
fn a_remote_read_pays_the_hops_and_the_link_rate_once() {
    let local_ns = lone_read_ns(rack(4), 0);
    let page_on_link_ns = 8_192;
    let page_on_host_link_ns = (8_192u64 * 1_000_000_000).div_ceil(1_350_000_000);
    for hops in 1..=3u64 {
        let expected = local_ns + 2 * 500 * hops + page_on_link_ns - page_on_host_link_ns;
        assert_eq!(lone_read_ns(rack(4), hops as u32), expected, "{hops} hops");
    }
}

#[test]
fn the_bus_overhead_holds_one_device_near_its_measured_peak() {
    let (rack_gbps, _) = bandwidth(rack(1), 4);
    assert!((1.15..=1.21).contains(&rack_gbps), "{rack_gbps} GB/s");
    let mut ideal = rack(1);
    ideal.timing.bus_overhead_ns_per_page = 0;
    let (ideal_gbps, _) = bandwidth(ideal, 4);
    assert!(ideal_gbps > 1.4, "{ideal_gbps} GB/s without the overhead");
}

#[test]
fn hosts_sharing_a_device_finish_together() {
    let (_, array) = bandwidth(rack(1), 4);
    let last: Vec<u64> = (0..4).map(|host| array.last_ack_ns(host)).collect();
    let (first, latest) = (last.iter().min().unwrap(), last.iter().max().unwrap());
    assert!(*first > 0);
    assert!(
        (latest - first) * 50 < *latest,
        "hosts finished at {last:?}"
    );
    assert_eq!(array.last_ack_ns(7), 0, "an unknown host has no acks");
}

#[test]
fn the_middle_link_bounds_random_traffic_across_four_devices() {
    let (linked_gbps, _) = bandwidth(rack(4), 4);
    let mut unlinked = rack(4);
    unlinked.timing.link_bytes_per_second = 0;
    let (free_gbps, _) = bandwidth(unlinked, 4);
    // A quarter of all data crosses the middle link towards hosts 0 and 1.
    assert!(linked_gbps <= 4.0 * 1.0 + 1e-9, "{linked_gbps} GB/s");
    assert!(
        free_gbps > linked_gbps * 1.1,
        "{free_gbps} against {linked_gbps} GB/s"
    );
}
