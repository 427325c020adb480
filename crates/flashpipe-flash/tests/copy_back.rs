//! The copy-back command (docs/flash-model.md, "Copy-back"): its timing on an idle die
//! against the closed form, each rule refused with its status, a preset without it
//! refusing it, data moved with the new spare, and a file-backed copy-back kept by the
//! journal across a death.

mod common;

use common::{array_of, config_of, only_ack, page_of, scratch, small_config};
use flashpipe_flash::{
    Ack, AckStatus, CommandKind, CopyBackRefusal, FlashAddress, FlashArray, FlashCommand,
    FlashConfig, RuleViolation, StorageMode,
};

fn array_with(config: FlashConfig, storage: StorageMode) -> FlashArray {
    array_of(config, storage, 3)
}

/// Page `page` of `block` on chip `chip` of bus 1.
fn address(chip: u32, block: u32, page: u32) -> FlashAddress {
    common::address(1, chip, block, page)
}

fn run(array: &mut FlashArray, command: FlashCommand) -> Ack {
    only_ack(array, 9, command)
}

fn write(array: &mut FlashArray, at: FlashAddress, byte: u8) {
    let ack = run(
        array,
        FlashCommand::WritePage {
            address: at,
            data: page_of(byte),
            spare: vec![byte; 4],
        },
    );
    assert!(ack.status.is_ok());
}

fn copy_back(array: &mut FlashArray, from: FlashAddress, to: FlashAddress) -> Ack {
    run(
        array,
        FlashCommand::CopyBack {
            from,
            to,
            spare: vec![0xC5; 4],
        },
    )
}

fn refusal(ack: &Ack) -> Option<CopyBackRefusal> {
    match &ack.status {
        AckStatus::RuleViolation(RuleViolation::CopyBackRefused { refusal }) => Some(*refusal),
        _ => None,
    }
}

#[test]
fn the_presets_offer_copy_back_only_where_their_source_does() {
    for name in flashpipe_flash::config::PRESET_NAMES {
        let config = FlashConfig::preset(name).unwrap();
        assert_eq!(config.timing.copy_back, name == "rad", "preset {name}");
    }
}

/// One copy-back on an idle die of `rad`: the spare over the host link, the command and
/// spare on the bus, then tR and tPROG in the die; the page itself never crosses the bus.
#[test]
fn one_copy_back_on_an_idle_die_takes_the_closed_form() {
    let config = small_config();
    let timing = config.timing.clone();
    let raw_page_bytes = config.raw_page_bytes() as u64;
    let mut array = array_with(config, StorageMode::TimingOnly);
    write(&mut array, address(0, 1, 0), 0x11);
    let ack = copy_back(&mut array, address(0, 1, 0), address(0, 2, 0));
    assert_eq!(ack.status, AckStatus::CLEAN);
    assert_eq!(ack.kind, CommandKind::Write);
    let spare_bytes = 4u64;
    let expected_ns = (spare_bytes * 1_000_000_000).div_ceil(timing.host_link_bytes_per_second)
        + timing.command_address_ns
        + (timing.page_transfer_ns * spare_bytes).div_ceil(raw_page_bytes)
        + timing.array_read_ns
        + timing.program_ns_by_page_type[0]
        + timing.host_software_write_ns;
    assert_eq!(ack.completed_ns - ack.submitted_ns, expected_ns);
    let stats = array.stats();
    assert!(
        stats.channel_utilization[1] * (stats.elapsed_ns as f64)
            < (timing.page_transfer_ns * 3 / 2 + timing.bus_overhead_ns_per_page) as f64,
        "only the first program's page crossed the bus"
    );
}

#[test]
fn each_copy_back_rule_is_refused_with_its_status() {
    let mut config = config_of("rad", [2, 2, 8, 8]);
    config.geometry.planes = 2;
    let mut array = array_with(config, StorageMode::Memory);
    write(&mut array, address(0, 1, 0), 0x21);
    write(&mut array, address(0, 2, 0), 0x22);
    let other_chip = copy_back(&mut array, address(0, 1, 0), address(1, 3, 0));
    assert_eq!(refusal(&other_chip), Some(CopyBackRefusal::OtherPlane));
    let other_plane = copy_back(&mut array, address(0, 1, 0), address(0, 9, 0));
    assert_eq!(refusal(&other_plane), Some(CopyBackRefusal::OtherPlane));
    let erased_source = copy_back(&mut array, address(0, 1, 5), address(0, 3, 0));
    assert_eq!(
        refusal(&erased_source),
        Some(CopyBackRefusal::SourceNotProgrammed { block: 1, page: 5 })
    );
    let programmed_target = copy_back(&mut array, address(0, 1, 0), address(0, 2, 0));
    assert_eq!(
        programmed_target.status,
        AckStatus::RuleViolation(RuleViolation::NotErased { block: 2, page: 0 })
    );
    let skipped_page = copy_back(&mut array, address(0, 1, 0), address(0, 3, 2));
    assert_eq!(
        skipped_page.status,
        AckStatus::RuleViolation(RuleViolation::OutOfOrder {
            expected_page: 0,
            page: 2
        })
    );
    let long_spare = run(
        &mut array,
        FlashCommand::CopyBack {
            from: address(0, 1, 0),
            to: address(0, 3, 0),
            spare: vec![0; 4096],
        },
    );
    assert!(matches!(
        long_spare.status,
        AckStatus::RuleViolation(RuleViolation::WrongLength { field: "spare", .. })
    ));
    let out_of_range = copy_back(&mut array, address(0, 99, 0), address(0, 3, 0));
    assert!(matches!(
        out_of_range.status,
        AckStatus::RuleViolation(RuleViolation::AddressOutOfRange { .. })
    ));
    assert_eq!(
        array.block_state(address(0, 3, 0)).unwrap().next_page,
        0,
        "no refused copy-back programmed anything"
    );
}

#[test]
fn a_preset_without_copy_back_refuses_it() {
    let mut array = array_with(config_of("minflash", [2, 2, 8, 8]), StorageMode::Memory);
    let page_bytes = array.config().geometry.page_data_bytes as usize;
    let data: Vec<u8> = (0..page_bytes).map(|index| index as u8).collect();
    let ack = run(
        &mut array,
        FlashCommand::WritePage {
            address: address(0, 1, 0),
            data,
            spare: vec![1; 4],
        },
    );
    assert!(ack.status.is_ok());
    let ack = copy_back(&mut array, address(0, 1, 0), address(0, 2, 0));
    assert_eq!(refusal(&ack), Some(CopyBackRefusal::Unsupported));
    assert_eq!(array.block_state(address(0, 2, 0)).unwrap().next_page, 0);
}

#[test]
fn a_copy_back_moves_the_data_with_the_new_spare() {
    let mut array = array_with(small_config(), StorageMode::Memory);
    write(&mut array, address(0, 1, 0), 0x31);
    write(&mut array, address(0, 1, 1), 0x32);
    let ack = copy_back(&mut array, address(0, 1, 1), address(0, 4, 0));
    assert_eq!(ack.status, AckStatus::CLEAN);
    assert_eq!(ack.data, None, "a copy-back returns no page");
    let read = run(
        &mut array,
        FlashCommand::ReadPage {
            address: address(0, 4, 0),
        },
    );
    assert_eq!(read.data.unwrap(), page_of(0x32));
    let spare = read.spare.unwrap();
    assert_eq!(&spare[..4], &[0xC5; 4]);
    assert!(spare[4..].iter().all(|&byte| byte == 0xFF));
    assert_eq!(array.block_state(address(0, 4, 0)).unwrap().next_page, 1);
}

#[test]
fn a_file_backed_copy_back_survives_a_death_through_the_journal() {
    let directory = scratch("copy-back");
    let path = directory.join("array.img");
    let mut array = array_with(small_config(), StorageMode::File(path.clone()));
    write(&mut array, address(0, 1, 0), 0x41);
    array.sync().unwrap();
    assert_eq!(
        copy_back(&mut array, address(0, 1, 0), address(0, 5, 0)).status,
        AckStatus::CLEAN
    );
    std::mem::forget(array);
    let mut reopened = FlashArray::open(&path, 1, 8).unwrap();
    assert_eq!(reopened.block_state(address(0, 5, 0)).unwrap().next_page, 1);
    let read = run(
        &mut reopened,
        FlashCommand::ReadPage {
            address: address(0, 5, 0),
        },
    );
    assert_eq!(read.status, AckStatus::CLEAN);
    assert_eq!(read.data.unwrap(), page_of(0x41));
    assert_eq!(&read.spare.unwrap()[..4], &[0xC5; 4]);
    std::fs::remove_dir_all(&directory).unwrap();
}
