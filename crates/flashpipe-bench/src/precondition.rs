//! `flashpipe ftl precondition`: fills a preset's FTL to a share of its logical capacity
//! and brings it to a steady state, directly or the slow way (issue #16), and prints what
//! it built and how long it took. The array keeps no page contents (timing only).

use std::time::Instant;

use clap::{Args, ValueEnum};
use flashpipe_flash::{FlashArray, FlashConfig, FlashOptions, StorageMode};
use flashpipe_ftl::{
    precondition, FlashBackend, Ftl, FtlOptions, PreconditionMethod, PreconditionOptions,
};

use crate::BenchResult;

/// The method, as the command line names it.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum MethodArgument {
    /// Build the steady state with an in-memory model of the FTL's data path.
    Direct,
    /// Write every page through the FTL in virtual time.
    Slow,
}

/// Arguments of `flashpipe ftl precondition`.
#[derive(Debug, Args)]
pub struct PreconditionArgs {
    /// Flash preset (or a TOML file).
    #[arg(long, default_value = "minflash")]
    preset: String,
    /// Share of the logical capacity filled (0 < share <= 1).
    #[arg(long, default_value_t = 0.9)]
    fill: f64,
    /// Random overwrites after the fill, in multiples of the filled pages.
    #[arg(long, default_value_t = 2.0)]
    passes: f64,
    /// How the state is built.
    #[arg(long, value_enum, default_value_t = MethodArgument::Direct)]
    method: MethodArgument,
    /// Seed of the array and of the overwrites.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Share of the usable pages held back from the host.
    #[arg(long, default_value_t = 0.1)]
    over_provisioning: f64,
    /// Erase blocks per plane instead of the preset's (a smaller device).
    #[arg(long)]
    blocks_per_plane: Option<u32>,
}

/// Runs `flashpipe ftl precondition`.
pub fn run(arguments: PreconditionArgs) -> BenchResult {
    let mut config = FlashConfig::preset_or_file(&arguments.preset)?;
    if let Some(blocks) = arguments.blocks_per_plane {
        let preset_blocks = config.geometry.blocks_per_plane;
        if !(8..=preset_blocks).contains(&blocks) {
            return Err(
                format!("--blocks-per-plane {blocks} is not within 8..={preset_blocks}").into(),
            );
        }
        config.geometry.blocks_per_plane = blocks;
    }
    let capacity_gib = config.total_pages() as f64 * f64::from(config.geometry.page_data_bytes)
        / f64::from(1u32 << 30);
    let format_started = Instant::now();
    let array = FlashArray::new(
        config,
        FlashOptions {
            seed: arguments.seed,
            storage: StorageMode::TimingOnly,
            ..FlashOptions::default()
        },
    )?;
    let options = FtlOptions {
        name: "ftl".to_string(),
        over_provisioning: arguments.over_provisioning,
        checkpoint_interval_pages: 0,
        ..FtlOptions::default()
    };
    let mut ftl = Ftl::format(Box::new(array) as Box<dyn FlashBackend>, options)?;
    let format_ms = format_started.elapsed().as_secs_f64() * 1e3;
    let method = match arguments.method {
        MethodArgument::Direct => PreconditionMethod::Direct,
        MethodArgument::Slow => PreconditionMethod::Slow,
    };
    let report = precondition(
        &mut ftl,
        &PreconditionOptions {
            fill_share: arguments.fill,
            overwrite_passes: arguments.passes,
            method,
            seed: arguments.seed,
        },
    )?;
    let summary = &report.valid_pages;
    println!(
        "preset {} ({capacity_gib:.1} GiB raw, {} logical pages), method {:?}, fill {}, \
         passes {}, seed {}",
        arguments.preset,
        ftl.info().block_count,
        match report.method {
            PreconditionMethod::Slow => "slow",
            PreconditionMethod::Direct => "direct",
        },
        arguments.fill,
        arguments.passes,
        arguments.seed
    );
    println!(
        "filled pages {}, host pages written {}, pages copied by collection {}, victims {}, \
         write amplification {:.3}",
        report.filled_pages,
        report.host_pages_written,
        report.gc_pages_copied,
        report.gc_runs,
        report.write_amplification
    );
    println!(
        "data blocks {}, live pages per block of {}: mean {:.2}, p10 {}, p50 {}, p90 {}; \
         free blocks {}",
        summary.data_blocks,
        summary.pages_per_block,
        summary.valid_pages_mean,
        summary.valid_pages_p10,
        summary.valid_pages_p50,
        summary.valid_pages_p90,
        summary.free_blocks
    );
    println!(
        "array block table records the programs and erases: {}",
        report.array_block_table_agrees
    );
    println!(
        "format {format_ms:.0} ms, precondition {:.0} ms (wall clock)",
        report.wall_time_ms
    );
    Ok(())
}
