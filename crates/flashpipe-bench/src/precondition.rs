//! `flashpipe ftl precondition`: fills a preset's FTL to a share of its logical capacity
//! and brings it to a steady state, directly or the slow way, and prints what
//! it built and how long it took. The array keeps no page contents (timing only).
//! `--json` prints one object instead of the text; `--plot FILE.png` draws the live pages
//! per data block and the pages written (host, collection) as two panels.

use std::time::Instant;

use clap::{Args, ValueEnum};
use flashpipe_flash::{FlashArray, FlashConfig, FlashOptions};
use flashpipe_ftl::{
    precondition, FlashBackend, Ftl, FtlOptions, PreconditionMethod, PreconditionOptions,
};

use serde::Serialize;

use crate::error::invalid_input;
use crate::ftl::RunArgs;
use crate::plot::{draw_panels, Chart, ChartKind, Series};
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
    /// Share of the usable pages held back from the host.
    #[arg(long, default_value_t = 0.1)]
    over_provisioning: f64,
    /// Erase blocks per plane instead of the preset's (a smaller device).
    #[arg(long)]
    blocks_per_plane: Option<u32>,
    // The seed (of the array and of the overwrites), `--json`, and `--plot`: the live
    // pages per data block and the pages written (host, collection) as two panels.
    #[command(flatten)]
    run: RunArgs,
}

/// What `--json` prints: the text's figures, named.
#[derive(Debug, Serialize)]
struct PreconditionJson {
    preset: String,
    raw_capacity_gib: f64,
    logical_pages: u64,
    method: &'static str,
    fill: f64,
    passes: f64,
    seed: u64,
    over_provisioning: f64,
    filled_pages: u64,
    host_pages_written: u64,
    gc_pages_copied: u64,
    gc_victims: u64,
    write_amplification: f64,
    data_blocks: u32,
    pages_per_block: u32,
    live_pages_per_block_mean: f64,
    live_pages_per_block_p10: u32,
    live_pages_per_block_p50: u32,
    live_pages_per_block_p90: u32,
    free_blocks: u32,
    array_block_table_agrees: bool,
    format_wall_ms: f64,
    precondition_wall_ms: f64,
}

/// Runs `flashpipe ftl precondition`.
pub fn run(arguments: PreconditionArgs) -> BenchResult {
    arguments.run.check_plot()?;
    let config = preset_config(&arguments.preset, arguments.blocks_per_plane)?;
    let capacity_gib = config.total_pages() as f64 * f64::from(config.geometry.page_data_bytes)
        / f64::from(1u32 << 30);
    let format_started = Instant::now();
    let array = FlashArray::new(config, FlashOptions::timing_only(arguments.run.seed))?;
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
            seed: arguments.run.seed,
        },
    )?;
    let summary = &report.valid_pages;
    let json = PreconditionJson {
        preset: arguments.preset.clone(),
        raw_capacity_gib: capacity_gib,
        logical_pages: ftl.info().block_count,
        method: match report.method {
            PreconditionMethod::Slow => "slow",
            PreconditionMethod::Direct => "direct",
        },
        fill: arguments.fill,
        passes: arguments.passes,
        seed: arguments.run.seed,
        over_provisioning: arguments.over_provisioning,
        filled_pages: report.filled_pages,
        host_pages_written: report.host_pages_written,
        gc_pages_copied: report.gc_pages_copied,
        gc_victims: report.gc_runs,
        write_amplification: report.write_amplification,
        data_blocks: summary.data_blocks,
        pages_per_block: summary.pages_per_block,
        live_pages_per_block_mean: summary.valid_pages_mean,
        live_pages_per_block_p10: summary.valid_pages_p10,
        live_pages_per_block_p50: summary.valid_pages_p50,
        live_pages_per_block_p90: summary.valid_pages_p90,
        free_blocks: summary.free_blocks,
        array_block_table_agrees: report.array_block_table_agrees,
        format_wall_ms: format_ms,
        precondition_wall_ms: report.wall_time_ms,
    };
    arguments
        .run
        .draw(|path| Ok(draw_panels(path, &charts(&json), 2)?))?;
    if arguments.run.json {
        println!("{}", serde_json::to_string(&json)?);
        return Ok(());
    }
    print_text(&json);
    Ok(())
}

fn print_text(json: &PreconditionJson) {
    println!(
        "preset {} ({:.1} GiB raw, {} logical pages), method {}, fill {}, passes {}, seed {}",
        json.preset,
        json.raw_capacity_gib,
        json.logical_pages,
        json.method,
        json.fill,
        json.passes,
        json.seed
    );
    println!(
        "filled pages {}, host pages written {}, pages copied by collection {}, victims {}, \
         write amplification {:.3}",
        json.filled_pages,
        json.host_pages_written,
        json.gc_pages_copied,
        json.gc_victims,
        json.write_amplification
    );
    println!(
        "data blocks {}, live pages per block of {}: mean {:.2}, p10 {}, p50 {}, p90 {}; \
         free blocks {}",
        json.data_blocks,
        json.pages_per_block,
        json.live_pages_per_block_mean,
        json.live_pages_per_block_p10,
        json.live_pages_per_block_p50,
        json.live_pages_per_block_p90,
        json.free_blocks
    );
    println!(
        "array block table records the programs and erases: {}",
        json.array_block_table_agrees
    );
    println!(
        "format {:.0} ms, precondition {:.0} ms (wall clock)",
        json.format_wall_ms, json.precondition_wall_ms
    );
}

/// The two panels of `--plot`: live pages per data block, and the pages written.
fn charts(json: &PreconditionJson) -> Vec<Chart> {
    let live = Chart {
        title: format!(
            "Live pages per data block after preconditioning ({} blocks)",
            json.data_blocks
        ),
        x_label: "statistic over the data blocks".to_string(),
        y_label: format!("live pages (of {} per block)", json.pages_per_block),
        kind: ChartKind::GroupedBars {
            categories: ["p10", "p50", "mean", "p90"].map(String::from).to_vec(),
        },
        series: vec![Series::new(
            format!(
                "{}, fill {}, passes {}, seed {}",
                json.preset, json.fill, json.passes, json.seed
            ),
            [
                f64::from(json.live_pages_per_block_p10),
                f64::from(json.live_pages_per_block_p50),
                json.live_pages_per_block_mean,
                f64::from(json.live_pages_per_block_p90),
            ]
            .into_iter()
            .enumerate()
            .map(|(index, value)| (index as f64, value)),
        )],
        reference_points: Vec::new(),
        reference_name: String::new(),
    };
    let written = Chart {
        title: format!(
            "Pages programmed while preconditioning (write amplification {:.3})",
            json.write_amplification
        ),
        x_label: "who wrote them".to_string(),
        y_label: "flash pages".to_string(),
        kind: ChartKind::GroupedBars {
            categories: ["host", "garbage collection"].map(String::from).to_vec(),
        },
        series: vec![Series::new(
            format!("method {}", json.method),
            [
                (0.0, json.host_pages_written as f64),
                (1.0, json.gc_pages_copied as f64),
            ],
        )],
        reference_points: Vec::new(),
        reference_name: String::new(),
    };
    vec![live, written]
}

/// The preset named (or the TOML file), with `--blocks-per-plane` when given: at least 8
/// and at most the preset's (a smaller device that fills and preconditions fast; the timing
/// per request stays the preset's).
pub(crate) fn preset_config(
    preset: &str,
    blocks_per_plane: Option<u32>,
) -> BenchResult<FlashConfig> {
    let mut config = FlashConfig::preset_or_file(preset)?;
    if let Some(blocks) = blocks_per_plane {
        let preset_blocks = config.geometry.blocks_per_plane;
        if !(8..=preset_blocks).contains(&blocks) {
            return Err(invalid_input(format!(
                "--blocks-per-plane {blocks}: must be within 8..={preset_blocks} (the preset's)"
            ))
            .into());
        }
        config.geometry.blocks_per_plane = blocks;
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::record::record_chart;

    #[test]
    fn the_plot_shows_live_pages_and_who_wrote_the_pages() {
        let json = PreconditionJson {
            preset: "minflash".to_string(),
            raw_capacity_gib: 2.0,
            logical_pages: 1000,
            method: "direct",
            fill: 0.9,
            passes: 2.0,
            seed: 1,
            over_provisioning: 0.1,
            filled_pages: 900,
            host_pages_written: 2713,
            gc_pages_copied: 1900,
            gc_victims: 20,
            write_amplification: 1.7,
            data_blocks: 40,
            pages_per_block: 256,
            live_pages_per_block_mean: 180.0,
            live_pages_per_block_p10: 145,
            live_pages_per_block_p50: 178,
            live_pages_per_block_p90: 228,
            free_blocks: 5,
            array_block_table_agrees: true,
            format_wall_ms: 1.0,
            precondition_wall_ms: 2.0,
        };
        let charts = charts(&json);
        assert_eq!(charts.len(), 2);
        let live = record_chart(&charts[0]).unwrap();
        for text in ["p10", "p50", "mean", "p90", "live pages (of 256 per block)"] {
            assert_eq!(live.texts_equal(text).len(), 1, "{text}: {:?}", live.texts);
        }
        let written = record_chart(&charts[1]).unwrap();
        assert_eq!(written.texts_equal("garbage collection").len(), 1);
        assert_eq!(written.texts_equal("2713").len(), 1, "the host bar's value");
    }
}
