//! Shared test helpers: small flash geometries and FTLs over them.

#![allow(dead_code)]

use flashpipe_device::{run_one, IoBuf, Operation, SplitMix64};
use flashpipe_flash::{FlashArray, FlashConfig, FlashOptions};
use flashpipe_ftl::{FlashBackend, Ftl, FtlOptions, SharedFlash, VictimPolicy};

/// A victim policy drawn at even odds.
pub fn drawn_victim_policy(rng: &mut SplitMix64) -> VictimPolicy {
    if rng.chance(0.5) {
        VictimPolicy::Greedy
    } else {
        VictimPolicy::CostBenefit
    }
}

/// A small array: 2 channels x 2 ways, `blocks` blocks per chip of `pages` 4 KiB pages.
pub fn small_config(blocks: u32, pages: u32) -> FlashConfig {
    sized_config(blocks, pages, 4096)
}

/// Like [`small_config`] with `page_bytes` per page (512 keeps the ECC cheap).
pub fn sized_config(blocks: u32, pages: u32, page_bytes: u32) -> FlashConfig {
    let mut config = FlashConfig::preset("minflash").expect("preset");
    config.name = "small".to_string();
    config.geometry.channels = 2;
    config.geometry.ways = 2;
    config.geometry.blocks_per_plane = blocks;
    config.geometry.pages_per_block = pages;
    config.geometry.page_data_bytes = page_bytes;
    config.geometry.page_spare_bytes = page_bytes / 16 + 40;
    config.reliability.factory_bad_block_fraction = 0.0;
    config.reliability.grown_bad_probability_at_rated = 0.0;
    config
}

/// A fresh array keeping data, seeded.
pub fn small_array(config: FlashConfig, seed: u64) -> FlashArray {
    FlashArray::new(
        config,
        FlashOptions {
            seed,
            ..FlashOptions::default()
        },
    )
    .expect("array")
}

/// Options for tests: a frequent checkpoint so recovery paths run.
pub fn test_options(queue_depth: u32) -> FtlOptions {
    FtlOptions {
        name: "ftl-test".to_string(),
        over_provisioning: 0.15,
        checkpoint_interval_pages: 200,
        queue_depth,
        ..FtlOptions::default()
    }
}

/// A formatted FTL over a fresh small array.
pub fn small_ftl(queue_depth: u32) -> Ftl {
    let array = small_array(small_config(32, 16), 7);
    Ftl::format(
        Box::new(array) as Box<dyn FlashBackend>,
        test_options(queue_depth),
    )
    .expect("format")
}

/// An FTL formatted over a shared small array (`blocks` blocks per chip of 32 pages,
/// seeded), queue depth 32: the shared flash (to mount again from), the options and the
/// FTL.
pub fn ftl_on_shared_flash(blocks: u32, seed: u64) -> (SharedFlash, FtlOptions, Ftl) {
    let flash = SharedFlash::new(Box::new(small_array(small_config(blocks, 32), seed)));
    let options = test_options(32);
    let ftl = Ftl::format(
        Box::new(flash.clone()) as Box<dyn FlashBackend>,
        options.clone(),
    )
    .expect("format the FTL");
    (flash, options, ftl)
}

/// Writes one page of `byte` at logical page `logical`, checking that the write succeeded.
pub fn fill_page(ftl: &mut Ftl, logical: u64, byte: u8) {
    let page_bytes = ftl.info().block_size_bytes as usize;
    run_one(
        ftl,
        Operation::Write {
            first_block: logical,
            buffer: IoBuf::from_slice(&vec![byte; page_bytes]),
        },
    )
    .expect("write")
    .status
    .expect("written");
}

/// Reads `bytes` from logical page `first_block` on, checking that the read succeeded.
pub fn read_pages(ftl: &mut Ftl, first_block: u64, bytes: usize) -> IoBuf {
    run_one(
        ftl,
        Operation::Read {
            first_block,
            buffer: IoBuf::zeroed(bytes),
        },
    )
    .expect("read")
    .buffer
    .expect("buffer")
}
