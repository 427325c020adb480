//! Preconditioning (issue #16): the direct construction against the slow way on a small
//! timing-only array, seeded. Stated tolerances (in pages of a 32-page block): the mean
//! live pages per data block within 1.5, the 10th, 50th and 90th percentiles within 4;
//! the FTL's invariants hold after Direct; a following run of uniform random single-page
//! writes gives write amplification within 10 % of the same run after Slow. And the FTL
//! paced against the wall clock (`PacedDevice`) hands back no QD1 read sooner than the
//! latency the model gave it (no upper bound on wall time is asserted).

mod support;

use flashpipe_device::{run_batch, IoBuf, Operation, SplitMix64};
use flashpipe_flash::{FlashArray, FlashOptions, StorageMode};
use flashpipe_ftl::precondition::valid_page_summary;
use flashpipe_ftl::{
    precondition, FlashBackend, Ftl, FtlOptions, PreconditionError, PreconditionMethod,
    PreconditionOptions,
};

const PAGES_PER_BLOCK: u32 = 32;

fn fresh_ftl(seed: u64, storage: StorageMode) -> Ftl {
    let array = FlashArray::new(
        support::small_config(64, PAGES_PER_BLOCK),
        FlashOptions {
            seed,
            storage,
            ..FlashOptions::default()
        },
    )
    .expect("array");
    let options = FtlOptions {
        name: "ftl-precondition".to_string(),
        static_wear_leveling_spread: None,
        checkpoint_interval_pages: 0,
        queue_depth: 32,
        ..FtlOptions::default()
    };
    Ftl::format(Box::new(array) as Box<dyn FlashBackend>, options).expect("format")
}

fn options(method: PreconditionMethod, seed: u64) -> PreconditionOptions {
    PreconditionOptions {
        fill_share: 0.9,
        overwrite_passes: 2.0,
        method,
        seed,
    }
}

/// Uniform random single-page writes over the first `filled` pages; the write
/// amplification they cause.
fn random_write_amplification(ftl: &mut Ftl, filled: u64, count: u64, seed: u64) -> f64 {
    let before = ftl.stats();
    let mut generator = SplitMix64::new(seed ^ 0x5EED);
    let page_bytes = ftl.info().block_size_bytes as usize;
    for _ in 0..count / 16 {
        let mut chosen: Vec<u64> = Vec::new();
        while chosen.len() < 16 {
            let page = generator.below(filled);
            if !chosen.contains(&page) {
                chosen.push(page);
            }
        }
        let operations = chosen
            .into_iter()
            .map(|page| Operation::Write {
                first_block: page,
                buffer: IoBuf::zeroed(page_bytes),
            })
            .collect();
        run_batch(ftl, operations).expect("random writes");
    }
    ftl.stats().since(&before).write_amplification()
}

fn close(name: &str, direct: f64, slow: f64, tolerance: f64, seed: u64) {
    assert!(
        (direct - slow).abs() <= tolerance,
        "seed {seed}: {name} direct {direct} vs slow {slow} (tolerance {tolerance})"
    );
}

#[test]
fn direct_agrees_with_slow_on_valid_pages_and_write_amplification() {
    flashpipe_testkit::seeds::run_seeds(2, |seed| {
        let mut slow_ftl = fresh_ftl(seed, StorageMode::TimingOnly);
        let slow = precondition(&mut slow_ftl, &options(PreconditionMethod::Slow, seed))
            .expect("slow precondition");
        let mut direct_ftl = fresh_ftl(seed, StorageMode::TimingOnly);
        let direct = precondition(&mut direct_ftl, &options(PreconditionMethod::Direct, seed))
            .expect("direct precondition");
        direct_ftl
            .check_invariants()
            .unwrap_or_else(|error| panic!("seed {seed}: invariants after direct: {error}"));
        eprintln!("seed {seed}\n slow   {slow:?}\n direct {direct:?}");
        assert!(
            direct.array_block_table_agrees,
            "seed {seed}: array told of the programs"
        );
        let (a, b) = (&direct.valid_pages, &slow.valid_pages);
        close("mean", a.valid_pages_mean, b.valid_pages_mean, 1.5, seed);
        for (name, x, y) in [
            ("p10", a.valid_pages_p10, b.valid_pages_p10),
            ("p50", a.valid_pages_p50, b.valid_pages_p50),
            ("p90", a.valid_pages_p90, b.valid_pages_p90),
        ] {
            close(name, f64::from(x), f64::from(y), 4.0, seed);
        }
        let filled = direct.filled_pages;
        let count = filled / 2;
        let wa_slow = random_write_amplification(&mut slow_ftl, filled, count, seed);
        let wa_direct = random_write_amplification(&mut direct_ftl, filled, count, seed);
        eprintln!(
            "seed {seed}: write amplification after slow {wa_slow}, after direct {wa_direct}"
        );
        close(
            "write amplification",
            wa_direct,
            wa_slow,
            0.1 * wa_slow,
            seed,
        );
        direct_ftl
            .check_invariants()
            .unwrap_or_else(|error| panic!("seed {seed}: invariants after writes: {error}"));
        let after = valid_page_summary(&direct_ftl);
        assert!(after.data_blocks > 0, "seed {seed}: data blocks remain");
    });
}

#[test]
fn direct_refuses_an_array_that_keeps_data_and_a_used_ftl() {
    let mut ftl = fresh_ftl(3, StorageMode::Memory);
    let refused = precondition(&mut ftl, &options(PreconditionMethod::Direct, 3));
    assert!(matches!(
        refused,
        Err(PreconditionError::ArrayKeepsData { .. })
    ));
    let mut ftl = fresh_ftl(3, StorageMode::TimingOnly);
    precondition(&mut ftl, &options(PreconditionMethod::Direct, 3)).expect("first");
    let refused = precondition(&mut ftl, &options(PreconditionMethod::Direct, 3));
    assert!(matches!(refused, Err(PreconditionError::NotFresh { .. })));
    let mut bad = options(PreconditionMethod::Slow, 3);
    bad.fill_share = 1.5;
    let mut ftl = fresh_ftl(3, StorageMode::TimingOnly);
    let refused = precondition(&mut ftl, &bad);
    assert!(matches!(
        refused,
        Err(PreconditionError::InvalidOption {
            field: "fill_share",
            ..
        })
    ));
}

#[test]
fn paced_reads_of_a_preconditioned_ftl_come_back_no_sooner_than_modeled() {
    use flashpipe_device::{BlockDevice, PacedDevice, Request};
    use std::time::Instant;
    let seed = 5;
    let mut ftl = fresh_ftl(seed, StorageMode::TimingOnly);
    let report = precondition(&mut ftl, &options(PreconditionMethod::Direct, seed))
        .expect("direct precondition");
    let page_bytes = ftl.info().block_size_bytes as usize;
    let mut device = PacedDevice::new(ftl, flashpipe_device::paced::DEFAULT_LAG_WARNING_NS);
    let mut generator = SplitMix64::new(seed);
    let mut completions = Vec::new();
    for tag in 0..20 {
        let before = device.inner().stats();
        let submitted = Instant::now();
        let request = Request {
            tag,
            operation: Operation::Read {
                first_block: generator.below(report.filled_pages),
                buffer: IoBuf::zeroed(page_bytes),
            },
        };
        device.submit(request).expect("submit");
        completions.clear();
        device.wait_completions(&mut completions).expect("wait");
        let waited_ns = submitted.elapsed().as_nanos() as u64;
        let modeled_ns = device
            .inner()
            .stats()
            .since(&before)
            .host_read_latency_ns_total;
        assert!(completions[0].status.is_ok(), "seed {seed}: read {tag}");
        assert!(modeled_ns > 0, "seed {seed}: read {tag} took modeled time");
        assert!(
            waited_ns >= modeled_ns,
            "seed {seed}: read {tag} came back after {waited_ns} ns, before its modeled {modeled_ns} ns"
        );
    }
    assert_eq!(device.lag_report().released, 20);
}
