//! Tests of the flash array at its API: rules, ECC, bad blocks, timing against closed
//! forms, scheduler priorities, determinism, persistence, presets, and the pre-FTL
//! block device against the device layer's conformance suite.

mod common;

use common::{address, array_of, config_of, only_ack, page_of, small_config};
use flashpipe_flash::{
    Ack, AckStatus, FlashAddress, FlashArray, FlashCommand, FlashConfig, FlashOptions,
    FlashRequest, RuleViolation, StorageMode, StripedFlashDevice,
};

/// Submits one command and runs it to its ack.
fn run(array: &mut FlashArray, command: FlashCommand) -> Ack {
    only_ack(array, 7, command)
}

fn write(array: &mut FlashArray, at: FlashAddress, byte: u8) -> AckStatus {
    run(
        array,
        FlashCommand::WritePage {
            address: at,
            data: page_of(byte),
            spare: vec![byte; 4],
        },
    )
    .status
}

fn read(array: &mut FlashArray, at: FlashAddress) -> Ack {
    run(array, FlashCommand::ReadPage { address: at })
}

/// Submits a read of `at` as host 0, tag `tag`, without running the array.
fn submit_read(array: &mut FlashArray, tag: u64, at: FlashAddress) {
    array
        .submit(FlashRequest {
            tag,
            host: 0,
            command: FlashCommand::ReadPage { address: at },
        })
        .unwrap();
}

#[test]
fn each_rule_violation_is_acknowledged_as_such() {
    let mut array = array_of(small_config(), StorageMode::Memory, 1);
    assert!(write(&mut array, address(0, 0, 1, 0), 1).is_ok());
    let cases: Vec<(FlashCommand, RuleViolation)> = vec![
        (
            FlashCommand::WritePage {
                address: address(0, 0, 1, 0),
                data: page_of(2),
                spare: vec![],
            },
            RuleViolation::NotErased { block: 1, page: 0 },
        ),
        (
            FlashCommand::WritePage {
                address: address(0, 0, 1, 3),
                data: page_of(2),
                spare: vec![],
            },
            RuleViolation::OutOfOrder {
                expected_page: 1,
                page: 3,
            },
        ),
        (
            FlashCommand::ReadPage {
                address: address(2, 0, 0, 0),
            },
            RuleViolation::AddressOutOfRange {
                field: "bus",
                value: 2,
                limit: 2,
            },
        ),
        (
            FlashCommand::EraseBlock {
                address: address(0, 0, 8, 0),
            },
            RuleViolation::AddressOutOfRange {
                field: "block",
                value: 8,
                limit: 8,
            },
        ),
        (
            FlashCommand::ReadPage {
                address: address(0, 0, 0, 8),
            },
            RuleViolation::AddressOutOfRange {
                field: "page",
                value: 8,
                limit: 8,
            },
        ),
        (
            FlashCommand::WritePage {
                address: address(0, 0, 1, 1),
                data: vec![0; 100],
                spare: vec![],
            },
            RuleViolation::WrongLength {
                field: "data",
                length: 100,
                expected: 4096,
            },
        ),
    ];
    for (command, violation) in cases {
        let ack = run(&mut array, command.clone());
        assert_eq!(
            ack.status,
            AckStatus::RuleViolation(violation),
            "{command:?}"
        );
    }
    let state = array.block_state(address(0, 0, 1, 0)).unwrap();
    assert_eq!(state.next_page, 1, "violations change nothing");
}

#[test]
fn erase_allows_rewriting_and_counts_cycles() {
    let mut array = array_of(small_config(), StorageMode::Memory, 2);
    let at = address(1, 1, 2, 0);
    assert!(write(&mut array, at, 5).is_ok());
    assert_eq!(read(&mut array, at).data.unwrap(), page_of(5));
    assert!(run(&mut array, FlashCommand::EraseBlock { address: at })
        .status
        .is_ok());
    assert_eq!(
        read(&mut array, at).data.unwrap(),
        vec![0xFF; 4096],
        "erased pages read 0xFF"
    );
    assert!(write(&mut array, at, 6).is_ok());
    let ack = read(&mut array, at);
    assert_eq!(ack.data.unwrap(), page_of(6));
    assert_eq!(&ack.spare.unwrap()[..5], &[6, 6, 6, 6, 0xFF]);
    assert_eq!(array.block_state(at).unwrap().pe_cycles, 1);
}

#[test]
fn worn_blocks_get_corrected_errors_and_eventually_uncorrectable_reads() {
    let mut config = small_config();
    config.reliability.base_rber = 2.0e-4;
    config.reliability.wear_rber_at_rated = 1.0e-3;
    let mut array = array_of(config, StorageMode::Memory, 3);
    let at = address(0, 1, 3, 0);
    assert!(write(&mut array, at, 9).is_ok());
    let mut corrected_total = 0;
    for _ in 0..20 {
        let ack = read(&mut array, at);
        match ack.status {
            AckStatus::Ok { corrected_bits, .. } => {
                corrected_total += corrected_bits;
                assert_eq!(ack.data.unwrap(), page_of(9), "the ECC restores the data");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(corrected_total > 0, "errors were injected and corrected");
    array.set_block_pe_cycles(at, 400_000);
    let uncorrectable = (0..10)
        .filter(|_| read(&mut array, at).status == AckStatus::Uncorrectable)
        .count();
    assert!(uncorrectable > 0, "heavy wear exceeds the code");
}

#[test]
fn factory_bad_blocks_are_marked_in_the_spare_area_and_refuse_programs() {
    let mut config = small_config();
    config.reliability.factory_bad_block_fraction = 0.5;
    let mut array = array_of(config, StorageMode::Memory, 4);
    let bad = (1..8)
        .map(|block| address(0, 0, block, 0))
        .find(|&at| array.is_factory_bad(at))
        .expect("half the blocks are bad");
    assert!(
        !array.is_factory_bad(address(0, 0, 0, 0)),
        "block 0 ships good"
    );
    assert_eq!(read(&mut array, bad).spare.unwrap()[0], 0x00);
    assert_eq!(write(&mut array, bad, 1), AckStatus::BadBlock);
    assert_eq!(
        run(&mut array, FlashCommand::EraseBlock { address: bad }).status,
        AckStatus::BadBlock
    );
}

#[test]
fn blocks_grow_bad_with_wear() {
    let mut config = small_config();
    config.reliability.grown_bad_probability_at_rated = 1.0;
    let mut array = array_of(config, StorageMode::Memory, 5);
    let at = address(1, 0, 4, 0);
    array.set_block_pe_cycles(at, 200_000);
    assert_eq!(
        run(&mut array, FlashCommand::EraseBlock { address: at }).status,
        AckStatus::BadBlock
    );
    assert!(array.block_state(at).unwrap().grown_bad);
    assert_eq!(write(&mut array, at, 1), AckStatus::BadBlock);
}

/// One chip, zero controller overheads, `pages` sequential reads queued at once: the
/// completion times of consecutive pages are `period_ns` apart.
fn check_read_period(cache_read: bool, command_ns: u64, array_read_ns: u64, transfer_ns: u64) {
    let mut config = small_config();
    config.geometry.channels = 1;
    config.geometry.ways = 1;
    let timing = &mut config.timing;
    timing.cache_read = cache_read;
    timing.command_address_ns = command_ns;
    timing.array_read_ns = array_read_ns;
    timing.page_transfer_ns = transfer_ns;
    let mut array = array_of(config, StorageMode::TimingOnly, 6);
    for page in 0..8 {
        submit_read(&mut array, page, address(0, 0, 0, page as u32));
    }
    let mut acks = Vec::new();
    array.run_until_idle(&mut acks);
    acks.sort_by_key(|ack| ack.completed_ns);
    let link_ns = (4096u64 * 1_000_000_000).div_ceil(100_000_000_000);
    assert_eq!(
        acks[0].completed_ns,
        command_ns + array_read_ns + transfer_ns + link_ns
    );
    let period_ns = if cache_read {
        (command_ns + array_read_ns).max(command_ns + transfer_ns)
    } else {
        command_ns + array_read_ns + transfer_ns
    };
    for pair in acks.windows(2).skip(1) {
        assert_eq!(
            pair[1].completed_ns - pair[0].completed_ns,
            period_ns,
            "cache {cache_read}, tR {array_read_ns}, transfer {transfer_ns}"
        );
    }
}

#[test]
fn one_chip_sequential_reads_match_the_closed_form() {
    check_read_period(false, 0, 25_000, 100_000);
    check_read_period(false, 1_000, 69_000, 43_000);
    check_read_period(true, 0, 25_000, 100_000);
    check_read_period(true, 0, 69_000, 43_000);
}

#[test]
fn command_bursts_go_before_data_transfers() {
    let mut config = small_config();
    config.geometry.channels = 1;
    let timing = &mut config.timing;
    timing.command_address_ns = 1_000;
    timing.array_read_ns = 10_000;
    timing.page_transfer_ns = 50_000;
    let mut array = array_of(config, StorageMode::TimingOnly, 7);
    let submit = |array: &mut FlashArray, tag: u64, chip: u32, page: u32| {
        submit_read(array, tag, address(0, chip, 0, page));
    };
    submit(&mut array, 1, 0, 0); // cmd 0-1, tR 1-11, data 11-61
    array.run_until(5_000);
    submit(&mut array, 2, 1, 0); // cmd 5-6, tR 6-16, then waits for the bus
    array.run_until(20_000);
    submit(&mut array, 3, 0, 1); // chip 0's register is busy until 61
    let mut acks = Vec::new();
    array.run_until_idle(&mut acks);
    let completed = |tag: u64| acks.iter().find(|ack| ack.tag == tag).unwrap().completed_ns;
    // At 61 us the short command of tag 3 goes first (61-62), then tag 2's data (62-112).
    assert_eq!(completed(2), 112_000 + 41);
    // Tag 3: tR 62-72, then waits for the bus until 112: data 112-162.
    assert_eq!(completed(3), 162_000 + 41);
}

#[test]
fn older_requests_win_the_bus() {
    let mut config = config_of("rad", [1, 2, 8, 8]);
    let timing = &mut config.timing;
    timing.command_address_ns = 1_000;
    timing.array_read_ns = 10_000;
    timing.page_transfer_ns = 50_000;
    let mut array = array_of(config, StorageMode::TimingOnly, 8);
    for (tag, chip, page, at_ns) in [(1, 0, 0, 0), (2, 1, 0, 2_000), (3, 0, 1, 3_000)] {
        array.run_until(at_ns);
        submit_read(&mut array, tag, address(0, chip, 0, page));
    }
    let mut acks = Vec::new();
    array.run_until_idle(&mut acks);
    let mut order: Vec<(u64, u64)> = acks.iter().map(|ack| (ack.completed_ns, ack.tag)).collect();
    order.sort_unstable();
    let tags: Vec<u64> = order.into_iter().map(|(_, tag)| tag).collect();
    assert_eq!(tags, vec![1, 2, 3], "tag 2 (older) transfers before tag 3");
}

fn random_reads_fingerprint(seed: u64) -> Vec<(u64, u64, String)> {
    let mut config = FlashConfig::preset("minflash").unwrap();
    config.geometry.blocks_per_plane = 16;
    config.reliability.base_rber = 1.0e-5;
    let mut array = array_of(config, StorageMode::Memory, seed);
    let mut acks = Vec::new();
    let data = vec![0x5A; 8192];
    for tag in 0..64u64 {
        let at = address((tag % 8) as u32, (tag / 8) as u32, 1, 0);
        array
            .submit(FlashRequest {
                tag,
                host: 0,
                command: FlashCommand::WritePage {
                    address: at,
                    data: data.clone(),
                    spare: vec![],
                },
            })
            .unwrap();
    }
    array.run_until_idle(&mut acks);
    for tag in 0..200u64 {
        let at = address((tag * 7 % 8) as u32, (tag * 3 % 8) as u32, 1, 0);
        if array
            .submit(FlashRequest {
                tag,
                host: 0,
                command: FlashCommand::ReadPage { address: at },
            })
            .is_err()
        {
            array.wait_acks(&mut acks);
        }
    }
    array.run_until_idle(&mut acks);
    acks.iter()
        .map(|ack| (ack.tag, ack.completed_ns, format!("{:?}", ack.status)))
        .collect()
}

#[test]
fn runs_are_deterministic_for_a_seed() {
    let first = random_reads_fingerprint(11);
    assert_eq!(first, random_reads_fingerprint(11));
    assert_ne!(first, random_reads_fingerprint(12), "the seed matters");
}

#[test]
fn file_storage_survives_reopen() {
    let directory = std::env::temp_dir().join(format!("flashpipe-flash-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let path = directory.join("array.img");
    let at = address(1, 0, 2, 0);
    {
        let mut array = array_of(small_config(), StorageMode::File(path.clone()), 9);
        assert!(run(&mut array, FlashCommand::EraseBlock { address: at })
            .status
            .is_ok());
        assert!(write(&mut array, at, 0x33).is_ok());
        array.sync().unwrap();
    }
    let mut reopened = FlashArray::open(&path, 1, 8).unwrap();
    assert_eq!(reopened.block_state(at).unwrap().next_page, 1);
    assert_eq!(reopened.block_state(at).unwrap().pe_cycles, 1);
    let ack = read(&mut reopened, at);
    assert_eq!(ack.data.unwrap(), page_of(0x33));
    assert_eq!(
        write(&mut reopened, at, 1),
        AckStatus::RuleViolation(RuleViolation::NotErased { block: 2, page: 0 }),
        "the write pointer survived"
    );
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn queue_depth_bounds_tags() {
    let mut array = FlashArray::new(
        small_config(),
        FlashOptions {
            host_queue_depth: 2,
            ..FlashOptions::default()
        },
    )
    .unwrap();
    for tag in 0..2 {
        array
            .submit(FlashRequest {
                tag,
                host: 0,
                command: FlashCommand::ReadPage {
                    address: address(0, 0, 0, 0),
                },
            })
            .unwrap();
    }
    let refused = array.submit(FlashRequest {
        tag: 9,
        host: 0,
        command: FlashCommand::ReadPage {
            address: address(0, 0, 0, 0),
        },
    });
    assert!(matches!(
        refused,
        Err(flashpipe_flash::SubmitError::QueueFull { queue_depth: 2, .. })
    ));
}

fn check_malformed(text: &str, expected_line: usize, expected_words: &str) {
    let error = FlashConfig::from_toml(text, "bad.toml").unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("bad.toml:{expected_line}:"))
            && message.contains(expected_words),
        "{message}"
    );
}

#[test]
fn malformed_presets_name_their_line() {
    let good = include_str!("../presets/rad.toml");
    let cases = [
        ("ways = 1 ", "ways = \"one\"", 7, "invalid type"),
        (
            "pages_per_block = 64",
            "pages_per_block = 0",
            11,
            "pages_per_block",
        ),
        (
            "page_spare_bytes = 224",
            "page_spare_bytes = 100",
            13,
            "parity",
        ),
        ("erase_ns = 1500000", "erase_ns = [1", 23, ""),
        ("hop_ns = 0", "hop_ns = 0\nbogus = 1", 31, "unknown field"),
        ("base_rber = 1.0e-9", "base_rber = 2.0", 36, "base_rber"),
    ];
    for (line, replacement, line_number, fragment) in cases {
        check_malformed(&good.replace(line, replacement), line_number, fragment);
    }
    for name in flashpipe_flash::config::PRESET_NAMES {
        FlashConfig::preset(name).unwrap();
    }
}

#[test]
fn striped_block_device_passes_the_conformance_suite() {
    flashpipe_device::conformance::check_all(&mut |queue_depth| {
        let mut config = small_config();
        config.timing.controller_queue_depth = 16;
        let array = array_of(config, StorageMode::Memory, 10);
        Box::new(StripedFlashDevice::new(array, "flash0", queue_depth).unwrap())
    });
}

#[test]
fn striped_block_device_data_survives_flush_and_reopen() {
    use flashpipe_device::{run_one, BlockDevice, IoBuf, Operation};
    let write = |first_block: u64, bytes: &[u8]| Operation::Write {
        first_block,
        buffer: IoBuf::from_slice(bytes),
    };
    let directory =
        std::env::temp_dir().join(format!("flashpipe-flash-adapter-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let path = directory.join("array.img");
    let pattern: Vec<u8> = (0..3 * 4096).map(|index| (index % 251) as u8).collect();
    {
        let array = array_of(small_config(), StorageMode::File(path.clone()), 12);
        let mut device = StripedFlashDevice::new(array, "flash0", 4).unwrap();
        run_one(&mut device, write(5, &pattern))
            .unwrap()
            .status
            .unwrap();
        run_one(&mut device, write(6, &pattern[..4096]))
            .unwrap()
            .status
            .unwrap();
        run_one(&mut device, Operation::Flush)
            .unwrap()
            .status
            .unwrap();
    }
    let array = FlashArray::open(&path, 1, 64).unwrap();
    let mut device = StripedFlashDevice::new(array, "flash0", 4).unwrap();
    assert!(device.clock().now_ns() > 0, "virtual time was kept");
    let read = Operation::Read {
        first_block: 5,
        buffer: IoBuf::zeroed(3 * 4096),
    };
    let completion = run_one(&mut device, read).unwrap();
    completion.status.unwrap();
    let data = completion.buffer.unwrap();
    assert_eq!(&data[..4096], &pattern[..4096]);
    assert_eq!(
        &data[4096..8192],
        &pattern[..4096],
        "the overwrite of block 6 survived"
    );
    assert_eq!(&data[8192..], &pattern[8192..]);
    std::fs::remove_dir_all(&directory).unwrap();
}
