//! Garbage collection, wear leveling, bad blocks, uncorrectable reads and copy by
//! reference, each checked against plain data models.

mod support;

use flashpipe_device::{run_one, DeviceErrorKind, IoBuf, Operation, SplitMix64};
use flashpipe_flash::{FlashArray, FlashConfig, FlashOptions};
use flashpipe_ftl::{FlashBackend, Ftl, FtlOptions, SharedFlash, VictimPolicy};

fn page_of(value: u64, page_bytes: usize) -> IoBuf {
    let mut buffer = IoBuf::zeroed(page_bytes);
    for chunk in buffer.chunks_mut(8) {
        chunk.copy_from_slice(&value.to_le_bytes());
    }
    buffer
}

fn write(ftl: &mut Ftl, logical: u64, value: u64) {
    let page_bytes = ftl.info().block_size_bytes as usize;
    run_one(
        ftl,
        Operation::Write {
            first_block: logical,
            buffer: page_of(value, page_bytes),
        },
    )
    .expect("write");
}

fn read(ftl: &mut Ftl, logical: u64) -> Result<u64, DeviceErrorKind> {
    let page_bytes = ftl.info().block_size_bytes as usize;
    let completion = run_one(
        ftl,
        Operation::Read {
            first_block: logical,
            buffer: IoBuf::zeroed(page_bytes),
        },
    )
    .map_err(|error| error.kind)?;
    let buffer = completion.buffer.expect("buffer");
    let value = u64::from_le_bytes(buffer[..8].try_into().expect("8 bytes"));
    assert!(
        buffer
            .chunks(8)
            .all(|chunk| chunk == value.to_le_bytes().as_slice()),
        "logical {logical}: a page mixing data was returned as good"
    );
    Ok(value)
}

fn options(policy: VictimPolicy) -> FtlOptions {
    FtlOptions {
        victim_policy: policy,
        check_after_collection: true,
        ..support::test_options(16)
    }
}

fn ftl_on(config: FlashConfig, seed: u64, options: FtlOptions) -> Ftl {
    let array = support::small_array(config, seed);
    Ftl::format(Box::new(array) as Box<dyn FlashBackend>, options).expect("format")
}

/// Random overwrites (skewed to a hot tenth) with the map checked after every
/// collection, then every page read back.
fn overwrite_and_verify(ftl: &mut Ftl, writes: u64, seed: u64) -> Vec<u64> {
    let logical = ftl.info().block_count;
    let mut model = vec![0u64; logical as usize];
    let mut generator = SplitMix64::new(seed);
    for serial in 1..=writes {
        let page = if generator.chance(0.8) {
            generator.below(logical / 10)
        } else {
            generator.below(logical)
        };
        write(ftl, page, serial);
        model[page as usize] = serial;
    }
    for (page, &value) in model.iter().enumerate() {
        assert_eq!(read(ftl, page as u64), Ok(value), "logical {page}");
    }
    model
}

#[test]
fn collection_never_loses_or_duplicates_a_live_page_under_either_policy() {
    for policy in [VictimPolicy::Greedy, VictimPolicy::CostBenefit] {
        let mut ftl = ftl_on(support::sized_config(16, 16, 512), 3, options(policy));
        overwrite_and_verify(&mut ftl, 3000, 5);
        ftl.check_invariants().expect("invariants");
        let stats = ftl.stats();
        assert!(stats.gc_victims > 10, "{policy:?}: {stats:?}");
        assert!(stats.write_amplification() > 1.0, "{policy:?}: {stats:?}");
        assert!(stats.gc_busy_ns > 0, "{policy:?}: {stats:?}");
    }
}

fn timing_only_ftl(spread: Option<u32>) -> Ftl {
    let array = FlashArray::new(
        support::sized_config(16, 16, 512),
        FlashOptions::timing_only(9),
    )
    .expect("array");
    let options = FtlOptions {
        static_wear_leveling_spread: spread,
        checkpoint_interval_pages: 0,
        ..support::test_options(16)
    };
    Ftl::format(Box::new(array) as Box<dyn FlashBackend>, options).expect("format")
}

fn skewed_writes(ftl: &mut Ftl, writes: u64) {
    let logical = ftl.info().block_count;
    let page_bytes = ftl.info().block_size_bytes as usize;
    let mut generator = SplitMix64::new(1);
    for page in 0..logical {
        run_one(
            ftl,
            Operation::Write {
                first_block: page,
                buffer: IoBuf::zeroed(page_bytes),
            },
        )
        .expect("fill");
    }
    for _ in 0..writes {
        let page = generator.below(logical / 20);
        run_one(
            ftl,
            Operation::Write {
                first_block: page,
                buffer: IoBuf::zeroed(page_bytes),
            },
        )
        .expect("write");
    }
}

#[test]
fn static_wear_leveling_bounds_the_erase_count_spread() {
    let mut without = timing_only_ftl(None);
    skewed_writes(&mut without, 30_000);
    let mut with = timing_only_ftl(Some(8));
    skewed_writes(&mut with, 30_000);
    let (without, with) = (without.stats(), with.stats());
    let spread = |stats: &flashpipe_ftl::FtlStats| stats.erase_count_max - stats.erase_count_min;
    assert!(with.static_wear_leveling_moves > 0, "{with:?}");
    assert!(
        spread(&with) < spread(&without),
        "with {with:?}\nwithout {without:?}"
    );
    assert!(spread(&with) <= 8 + 10, "{with:?}");
}

#[test]
fn factory_bad_blocks_are_never_used_and_failed_programs_and_erases_lose_nothing() {
    let mut config = support::sized_config(24, 16, 512);
    config.reliability.factory_bad_block_fraction = 0.08;
    config.reliability.grown_bad_probability_at_rated = 0.004;
    config.reliability.grown_bad_exponent = 0.0;
    let array = support::small_array(config, 21);
    let flash = SharedFlash::new(Box::new(array));
    let mut ftl = Ftl::format(
        Box::new(flash.clone()) as Box<dyn FlashBackend>,
        options(VictimPolicy::Greedy),
    )
    .expect("format");
    let model = overwrite_and_verify(&mut ftl, 2500, 8);
    let stats = ftl.stats();
    assert!(stats.grown_bad_blocks > 0, "{stats:?}");
    assert!(stats.programs_reissued > 0, "{stats:?}");
    assert!(stats.retired_blocks > 0, "{stats:?}");
    drop(ftl);
    let (mut ftl, _) = Ftl::mount(
        Box::new(flash) as Box<dyn FlashBackend>,
        options(VictimPolicy::Greedy),
    )
    .expect("mount");
    for (page, &value) in model.iter().enumerate() {
        assert_eq!(
            read(&mut ftl, page as u64),
            Ok(value),
            "logical {page} after remount"
        );
    }
}

#[test]
fn uncorrectable_reads_are_errors_naming_the_logical_block_never_wrong_data() {
    let mut config = support::sized_config(16, 16, 512);
    config.reliability.base_rber = 1.5e-3;
    let mut ftl = ftl_on(config, 4, options(VictimPolicy::Greedy));
    let logical = ftl.info().block_count.min(200);
    for page in 0..logical {
        write(&mut ftl, page, page + 1);
    }
    let mut errors = 0;
    for page in 0..logical {
        match read(&mut ftl, page) {
            Ok(value) => assert_eq!(value, page + 1),
            Err(kind) => {
                assert_eq!(kind, DeviceErrorKind::Uncorrectable { block: page });
                errors += 1;
            }
        }
    }
    assert!(errors > 0, "the error rate produces uncorrectable pages");
    assert!(ftl.stats().uncorrectable_reads > 0);
}

#[test]
fn copy_by_reference_shares_data_until_either_side_is_overwritten() {
    let array = support::small_array(support::sized_config(16, 16, 512), 2);
    let flash = SharedFlash::new(Box::new(array));
    let ftl_options = options(VictimPolicy::Greedy);
    let mut ftl = Ftl::format(
        Box::new(flash.clone()) as Box<dyn FlashBackend>,
        ftl_options.clone(),
    )
    .expect("format");
    for page in 0..40 {
        write(&mut ftl, page, 100 + page);
    }
    let programs_before = ftl.stats().host_pages_written;
    ftl.copy(0, 100, 10).expect("copy");
    assert_eq!(
        ftl.stats().host_pages_written,
        programs_before,
        "no data moved"
    );
    write(&mut ftl, 3, 7);
    write(&mut ftl, 105, 8);
    // Overlapping copies behave as memmove, forwards and backwards.
    ftl.copy(20, 22, 10).expect("forward overlap");
    ftl.copy(32, 30, 5).expect("backward overlap");
    let mut expected: Vec<u64> = (0..200)
        .map(|page| if page < 40 { 100 + page } else { 0 })
        .collect();
    for page in 0..10 {
        expected[100 + page] = 100 + page as u64;
    }
    expected[3] = 7;
    expected[105] = 8;
    let snapshot = expected.clone();
    expected.copy_within(20..30, 22);
    let snapshot_after_forward = expected.clone();
    expected.copy_within(32..37, 30);
    assert_ne!(snapshot, snapshot_after_forward);
    ftl.check_invariants().expect("invariants");
    let check = |ftl: &mut Ftl, expected: &[u64]| {
        for (page, &value) in expected.iter().enumerate() {
            assert_eq!(read(ftl, page as u64), Ok(value), "logical {page}");
        }
    };
    check(&mut ftl, &expected);
    let end = ftl.info().block_count;
    assert!(ftl.copy(0, end - 5, 10).is_err(), "past the end");
    drop(ftl);
    let (mut ftl, _) =
        Ftl::mount(Box::new(flash) as Box<dyn FlashBackend>, ftl_options).expect("mount");
    check(&mut ftl, &expected);
}

#[test]
fn bad_options_are_refused() {
    let array = support::small_array(support::sized_config(16, 16, 512), 2);
    let options = FtlOptions {
        over_provisioning: 1.5,
        ..FtlOptions::default()
    };
    assert!(Ftl::format(Box::new(array) as Box<dyn FlashBackend>, options).is_err());
    let mut config = support::sized_config(16, 16, 512);
    config.geometry.page_spare_bytes = 40;
    let array = support::small_array(config, 2);
    assert!(Ftl::format(
        Box::new(array) as Box<dyn FlashBackend>,
        FtlOptions::default()
    )
    .is_err());
}

#[test]
fn a_seed_determines_the_run_exactly() {
    let run = || {
        let mut ftl = ftl_on(
            support::sized_config(16, 16, 512),
            13,
            options(VictimPolicy::CostBenefit),
        );
        overwrite_and_verify(&mut ftl, 1500, 17);
        let clock = flashpipe_device::BlockDevice::clock(&ftl);
        (ftl.stats(), clock.now_ns())
    };
    let (first_stats, first_ns) = run();
    let (second_stats, second_ns) = run();
    assert_eq!(first_stats, second_stats);
    assert_eq!(first_ns, second_ns);
}
