//! Collection with the flash's copy-back command (docs/ftl.md, "Copy-back"): on a small
//! rad-like timing-only array the same overwrite workload runs with and without it; with
//! it, pages move inside their die, the bus carries fewer page transfers, the run takes
//! less virtual time and every invariant holds after each collection. A data-keeping
//! backend keeps read and program (the spare record's checksum needs the page data).

mod support;

use flashpipe_device::{run_batch, IoBuf, Operation, SplitMix64};
use flashpipe_flash::{FlashArray, FlashConfig, FlashOptions, FlashStats};
use flashpipe_ftl::{FlashBackend, Ftl, FtlOptions, FtlStats};

/// `rad` cut to 1 channel x 2 ways of 64 blocks of 16 pages, copy-back as asked.
fn rad_like(copy_back: bool) -> FlashConfig {
    let mut config = FlashConfig::preset("rad").expect("preset");
    config.geometry.ways = 2;
    config.geometry.blocks_per_plane = 64;
    config.geometry.pages_per_block = 16;
    config.reliability.factory_bad_block_fraction = 0.0;
    config.reliability.grown_bad_probability_at_rated = 0.0;
    config.timing.copy_back = copy_back;
    config
}

fn options() -> FtlOptions {
    FtlOptions {
        check_after_collection: true,
        checkpoint_interval_pages: 0,
        ..support::test_options(8)
    }
}

/// Fills the device, then overwrites random pages `writes` times in batches of 8; returns
/// the FTL's statistics, the flash's, and the virtual time taken.
fn run(backend: Box<dyn FlashBackend>, writes: u64) -> (FtlStats, FlashStats, u64) {
    let mut ftl = Ftl::format(backend, options()).expect("format");
    let logical = ftl.info().block_count;
    let page_bytes = ftl.info().block_size_bytes as usize;
    let write = |page| Operation::Write {
        first_block: page,
        buffer: IoBuf::zeroed(page_bytes),
    };
    for first in (0..logical).step_by(8) {
        let batch = (first..logical.min(first + 8)).map(write).collect();
        run_batch(&mut ftl, batch).expect("fill");
    }
    let mut generator = SplitMix64::new(4);
    for _ in 0..writes / 8 {
        let batch = (0..8).map(|_| write(generator.below(logical))).collect();
        run_batch(&mut ftl, batch).expect("write");
    }
    ftl.check_invariants().expect("invariants");
    let stats = ftl.stats();
    let now_ns = ftl.backend().now_ns();
    let array = ftl
        .into_backend()
        .into_any()
        .downcast::<FlashArray>()
        .expect("a flash array");
    (stats, array.stats(), now_ns)
}

fn timing_only(copy_back: bool) -> Box<dyn FlashBackend> {
    let array = FlashArray::new(rad_like(copy_back), FlashOptions::timing_only(6)).expect("array");
    Box::new(array)
}

fn bus_busy_ns(stats: &FlashStats) -> f64 {
    stats.channel_utilization.iter().sum::<f64>() * stats.elapsed_ns as f64
}

#[test]
fn collection_moves_pages_by_copy_back_where_the_flash_offers_it() {
    let writes = 6000;
    let (with, with_flash, with_ns) = run(timing_only(true), writes);
    let (without, without_flash, without_ns) = run(timing_only(false), writes);
    assert_eq!(with.host_pages_written, without.host_pages_written);
    assert_eq!(without.gc_copy_backs, 0, "{without:?}");
    assert!(with.gc_copy_backs > 0, "{with:?}");
    assert!(with.gc_copy_backs <= with.gc_pages_copied, "{with:?}");
    assert!(
        bus_busy_ns(&with_flash) < bus_busy_ns(&without_flash),
        "bus {} ns with copy-back, {} ns without",
        bus_busy_ns(&with_flash),
        bus_busy_ns(&without_flash)
    );
    assert!(
        with_ns < without_ns,
        "{with_ns} ns with, {without_ns} without"
    );
}

#[test]
fn a_data_keeping_backend_moves_pages_by_read_and_program() {
    let array = support::small_array(rad_like(true), 8);
    let (stats, _, _) = run(Box::new(array), 2000);
    assert!(stats.gc_pages_copied > 0, "{stats:?}");
    assert_eq!(stats.gc_copy_backs, 0, "{stats:?}");
}

/// Copy-backs in flight at a power cut: each destination ends as a program's page would,
/// completed (the source's data and the new spare), torn (unreadable) or absent (erased).
#[test]
fn a_power_cut_leaves_copy_backs_in_flight_completed_torn_or_absent() {
    use flashpipe_flash::{AckStatus, FlashAddress, FlashCommand, FlashRequest};
    use flashpipe_ftl::PowerCutFlash;

    let at = |block, page| FlashAddress {
        device: 0,
        bus: 0,
        chip: 0,
        block,
        page,
    };
    let pages = 8;
    let page_bytes = 4096;
    let mut array = support::small_array(rad_like(true), 11);
    for page in 0..pages {
        let command = FlashCommand::WritePage {
            address: at(1, page),
            data: vec![page as u8 + 1; page_bytes],
            spare: vec![7; 4],
        };
        array
            .submit(FlashRequest {
                tag: u64::from(page),
                host: 0,
                command,
            })
            .expect("submit");
    }
    let mut acks = Vec::new();
    array.run_until_idle(&mut acks);
    assert!(acks.iter().all(|ack| ack.status.is_ok()));
    let mut flash = PowerCutFlash::new(array);
    for page in 0..pages {
        let command = FlashCommand::CopyBack {
            from: at(1, page),
            to: at(2, page),
            spare: vec![9; 4],
        };
        let request = FlashRequest {
            tag: 100 + u64::from(page),
            host: 0,
            command,
        };
        flash.submit(request).expect("submit");
    }
    let report = flash.cut_power(3);
    assert_eq!(
        report.programs_completed + report.programs_torn + report.programs_lost,
        pages
    );
    let mut outcomes = [0u32; 3];
    for page in 0..pages {
        let request = FlashRequest {
            tag: 200 + u64::from(page),
            host: 0,
            command: FlashCommand::ReadPage {
                address: at(2, page),
            },
        };
        flash.submit(request).expect("submit");
        let mut acks = Vec::new();
        while acks.is_empty() {
            flash.wait_acks(&mut acks);
        }
        let ack = acks.pop().expect("an ack");
        let data = ack.data.expect("data");
        if ack.status == AckStatus::Uncorrectable {
            outcomes[1] += 1;
        } else if data.iter().all(|&byte| byte == 0xFF) {
            outcomes[2] += 1;
        } else {
            assert_eq!(data, vec![page as u8 + 1; page_bytes], "page {page}");
            assert_eq!(&ack.spare.expect("spare")[..4], &[9; 4]);
            outcomes[0] += 1;
        }
    }
    assert_eq!(
        outcomes,
        [
            report.programs_completed,
            report.programs_torn,
            report.programs_lost
        ]
    );
}
