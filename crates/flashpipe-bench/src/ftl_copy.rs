//! `flashpipe ftl copy`: copying a large file by reference against by bytes on the same
//! store (issue #5, Experiments; the memory-copy thesis, seed 002, ch. 3): the file system
//! on the FTL on the minflash preset, in the model's virtual time. The source is written
//! and flushed, then copied once by reference and once by bytes, each followed by a flush
//! (the copy is durable when the command returns); both copies are read back and their
//! CRC32C compared with the source's. Target: by reference at least 1000x less time.
//! `--plot FILE.png` draws both copies' virtual time and flash pages programmed.

use std::time::Instant;

use clap::Args;
use flashpipe_device::{BlockDevice, Clock};
use flashpipe_flash::config::MAX_BLOCKS_PER_PLANE;
use flashpipe_flash::{FlashArray, FlashConfig, FlashOptions, StorageMode};
use flashpipe_fs::{CopyMethod, Filesystem, FormatOptions};
use flashpipe_ftl::mount::exported_logical_pages;
use flashpipe_ftl::{FlashBackend, Ftl, FtlOptions, SharedFtl};
use flashpipe_store::units::{parse_size_bytes, HumanBytes};
use serde::Serialize;

use crate::error::invalid_input;
use crate::ftl::RunArgs;
use crate::plot::{draw_panels, Chart, ChartKind, Series};
use crate::progress::Progress;
use crate::BenchResult;
use flashpipe_bench_harness::column_table::{fixed, ColumnTable};
use flashpipe_bench_harness::output::print_json_or_text;

/// Bytes per write or read call while filling and verifying.
const CHUNK_BYTES: u64 = 8 << 20;

/// Over-provisioning of the experiment's FTL.
const OVER_PROVISIONING: f64 = 0.1;

/// `flashpipe ftl copy`.
#[derive(Debug, Args)]
pub struct FtlCopyArgs {
    /// Size of the file copied (e.g. 1GiB, 64MiB).
    #[arg(long, default_value = "1GiB")]
    size: String,
    /// File-system block size (a multiple of the preset's page).
    #[arg(long, default_value = "16KiB")]
    block_size: String,
    /// Flash preset (minflash, minflash-rack, rad, tlc); its erase blocks per chip are sized to fit.
    #[arg(long, default_value = "minflash")]
    preset: String,
    // The seed of the flash model, `--json`, and `--plot`: the two copies' virtual time
    // and pages programmed.
    #[command(flatten)]
    run: RunArgs,
}

/// One way of copying, measured.
#[derive(Debug, Serialize)]
struct CopyMeasurement {
    method: &'static str,
    virtual_ns: u64,
    wall_ns: u64,
    blocks_by_reference: u64,
    bytes_by_bytes: u64,
    flash_pages_programmed: u64,
    pages_copied_by_reference: u64,
    copy_matches_source: bool,
}

/// The whole experiment's result.
#[derive(Debug, Serialize)]
struct CopyExperiment {
    preset: String,
    file_size_bytes: u64,
    fs_block_size_bytes: u64,
    flash_blocks_per_chip: u32,
    write_virtual_ns: u64,
    by_reference: CopyMeasurement,
    by_bytes: CopyMeasurement,
    virtual_time_ratio: f64,
    wall_time_ratio: f64,
    target_ratio: f64,
    target_met: bool,
}

/// Runs `flashpipe ftl copy`.
pub fn run(arguments: FtlCopyArgs) -> BenchResult {
    arguments.run.check_plot()?;
    let size_bytes = parse_size_bytes(&arguments.size)?;
    let block_size_bytes = parse_size_bytes(&arguments.block_size)?;
    if size_bytes == 0 {
        return Err(invalid_input("--size must be at least one byte").into());
    }
    let block_size_bytes = u32::try_from(block_size_bytes).map_err(|_| {
        invalid_input(format!(
            "--block-size {} is too large",
            arguments.block_size
        ))
    })?;
    let config = sized_config(&arguments.preset, size_bytes)?;
    let blocks_per_chip = config.geometry.blocks_per_plane;
    let progress = Progress::spinner("copy: formatting the file system on the FTL");
    let (mut filesystem, ftl) =
        experiment_filesystem(config, arguments.run.seed, block_size_bytes)?;
    let clock = filesystem.clock();
    let write_started_ns = clock.now_ns();
    progress.set_message("copy: writing the source file");
    let source_crc = write_source(&mut filesystem, size_bytes)?;
    let write_virtual_ns = clock.now_ns() - write_started_ns;
    progress.set_message("copy: copying by reference");
    let by_reference = measure_copy(
        &mut filesystem,
        &ftl,
        &*clock,
        "copy-by-reference",
        CopyMethod::ReferenceOrFail,
        source_crc,
    )?;
    progress.set_message("copy: copying by bytes");
    let by_bytes = measure_copy(
        &mut filesystem,
        &ftl,
        &*clock,
        "copy-by-bytes",
        CopyMethod::Bytes,
        source_crc,
    )?;
    let virtual_time_ratio = by_bytes.virtual_ns as f64 / by_reference.virtual_ns.max(1) as f64;
    let experiment = CopyExperiment {
        preset: arguments.preset.clone(),
        file_size_bytes: size_bytes,
        fs_block_size_bytes: u64::from(block_size_bytes),
        flash_blocks_per_chip: blocks_per_chip,
        write_virtual_ns,
        wall_time_ratio: by_bytes.wall_ns as f64 / by_reference.wall_ns.max(1) as f64,
        virtual_time_ratio,
        target_ratio: 1000.0,
        target_met: virtual_time_ratio >= 1000.0
            && by_reference.copy_matches_source
            && by_bytes.copy_matches_source,
        by_reference,
        by_bytes,
    };
    progress.finish();
    arguments
        .run
        .draw(|path| Ok(draw_panels(path, &charts(&experiment), 2)?))?;
    Ok(print_json_or_text(
        arguments.run.json,
        &experiment,
        print_text,
    )?)
}

/// The two panels of `--plot`: virtual time and flash pages programmed, per method.
fn charts(experiment: &CopyExperiment) -> Vec<Chart> {
    let methods = ["by reference", "by bytes"].map(String::from).to_vec();
    let both = [&experiment.by_reference, &experiment.by_bytes];
    let size = HumanBytes(experiment.file_size_bytes);
    let time = Chart {
        title: format!(
            "Copy of a {size} file on {}: {:.0}x less time by reference",
            experiment.preset, experiment.virtual_time_ratio
        ),
        x_label: "how the file is copied".to_string(),
        y_label: "time to a durable copy (ms, virtual)".to_string(),
        kind: ChartKind::GroupedBars {
            categories: methods.clone(),
        },
        series: vec![Series::new(
            "copy and flush",
            both.iter()
                .enumerate()
                .map(|(index, row)| (index as f64, row.virtual_ns as f64 / 1e6)),
        )],
        reference_points: Vec::new(),
        reference_name: String::new(),
    };
    let pages = Chart {
        title: format!("Flash pages programmed by each copy of a {size} file"),
        x_label: "how the file is copied".to_string(),
        y_label: "flash pages programmed (data, collection, log, checkpoints)".to_string(),
        kind: ChartKind::GroupedBars {
            categories: methods,
        },
        series: vec![Series::new(
            "pages programmed",
            both.iter()
                .enumerate()
                .map(|(index, row)| (index as f64, row.flash_pages_programmed as f64)),
        )],
        reference_points: Vec::new(),
        reference_name: String::new(),
    };
    vec![time, pages]
}

/// The preset with its erase blocks per chip sized so that the FTL exports room for the
/// source, two copies and the file system's metadata. The first guess scales the bytes
/// needed by the over-provisioning and a margin; the FTL's own reserves (three blocks per
/// die, two checkpoints, the log) are whole blocks, a large share of a small array, so
/// the guess grows a block per chip at a time until the FTL's export holds what is needed
/// (a 512 MiB copy on minflash needs 18 blocks per chip where the guess gives 16).
fn sized_config(preset: &str, size_bytes: u64) -> BenchResult<FlashConfig> {
    let mut config = FlashConfig::preset(preset)?;
    let geometry = &config.geometry;
    let chips = u64::from(geometry.devices * geometry.channels * geometry.ways * geometry.dies);
    let block_bytes = u64::from(geometry.pages_per_block) * u64::from(geometry.page_data_bytes);
    let page_bytes = u64::from(geometry.page_data_bytes);
    let too_large = || {
        invalid_input(format!(
            "--size {} needs too large an array",
            HumanBytes(size_bytes)
        ))
    };
    let logical_bytes = size_bytes
        .checked_mul(3)
        .and_then(|bytes| bytes.checked_add(64 << 20))
        .ok_or_else(too_large)?;
    let physical_bytes = (logical_bytes as f64 / (1.0 - OVER_PROVISIONING) * 1.15) as u64;
    let mut blocks_per_chip = physical_bytes.div_ceil(chips * block_bytes).max(16);
    config.reliability.factory_bad_block_fraction = 0.0;
    config.reliability.grown_bad_probability_at_rated = 0.0;
    let needed_pages = logical_bytes.div_ceil(page_bytes);
    loop {
        config.geometry.blocks_per_plane = u32::try_from(blocks_per_chip)
            .ok()
            .filter(|&blocks| blocks <= MAX_BLOCKS_PER_PLANE)
            .ok_or_else(too_large)?;
        if exported_logical_pages(&config, OVER_PROVISIONING) >= needed_pages {
            return Ok(config);
        }
        blocks_per_chip += 1;
    }
}

fn experiment_filesystem(
    config: FlashConfig,
    seed: u64,
    block_size_bytes: u32,
) -> BenchResult<(Filesystem, SharedFtl)> {
    let array = FlashArray::new(
        config,
        FlashOptions {
            seed,
            storage: StorageMode::Memory,
            ..FlashOptions::default()
        },
    )?;
    let ftl = Ftl::format(
        Box::new(array) as Box<dyn FlashBackend>,
        FtlOptions {
            name: "ftl".to_string(),
            over_provisioning: OVER_PROVISIONING,
            // As flash stores do: a periodic checkpoint of the whole map stalls sequential
            // writes (docs/reproductions.md, the file system on minflash).
            checkpoint_interval_pages: 0,
            ..FtlOptions::default()
        },
    )?;
    let ftl = SharedFtl::new(ftl);
    let filesystem = Filesystem::format(
        Box::new(ftl.clone()) as Box<dyn BlockDevice>,
        &FormatOptions {
            fs_block_size_bytes: block_size_bytes,
            store_identity: None,
        },
    )?;
    Ok((filesystem, ftl))
}

/// Deterministic, incompressible-looking bytes for chunk `index`.
fn chunk_bytes(index: u64, length: usize) -> Vec<u8> {
    let mut generator = flashpipe_device::SplitMix64::new(0xc09e ^ index);
    let mut bytes = Vec::with_capacity(length + 8);
    while bytes.len() < length {
        bytes.extend_from_slice(&generator.next_u64().to_le_bytes());
    }
    bytes.truncate(length);
    bytes
}

/// Writes the source file and flushes; returns its CRC32C.
fn write_source(filesystem: &mut Filesystem, size_bytes: u64) -> BenchResult<u32> {
    let file = filesystem.create("source")?;
    let mut crc = 0u32;
    let mut offset_bytes = 0;
    while offset_bytes < size_bytes {
        let length = CHUNK_BYTES.min(size_bytes - offset_bytes);
        let bytes = chunk_bytes(offset_bytes / CHUNK_BYTES, length as usize);
        crc = crc32c::crc32c_append(crc, &bytes);
        filesystem.write(file, offset_bytes, &bytes)?;
        offset_bytes += length;
    }
    filesystem.flush()?;
    Ok(crc)
}

fn file_crc(filesystem: &mut Filesystem, name: &str) -> BenchResult<u32> {
    let file = filesystem.open(name)?;
    let size_bytes = filesystem.stat(file)?.size_bytes;
    let mut crc = 0u32;
    let mut offset_bytes = 0;
    while offset_bytes < size_bytes {
        let length = CHUNK_BYTES.min(size_bytes - offset_bytes);
        let bytes = filesystem.read(file, offset_bytes, length)?;
        crc = crc32c::crc32c_append(crc, &bytes);
        offset_bytes += length;
    }
    Ok(crc)
}

/// Flash pages programmed (host data, collection, log and checkpoints) and logical pages
/// copied by reference so far.
fn ftl_counters(ftl: &SharedFtl) -> (u64, u64) {
    let stats = ftl.stats();
    let programmed = stats.host_pages_written
        + stats.gc_pages_copied
        + stats.log_pages_written
        + stats.checkpoint_pages_written;
    (programmed, stats.pages_copied_by_reference)
}

fn measure_copy(
    filesystem: &mut Filesystem,
    ftl: &SharedFtl,
    clock: &dyn Clock,
    destination: &str,
    method: CopyMethod,
    source_crc: u32,
) -> BenchResult<CopyMeasurement> {
    let (programmed_before, referenced_before) = ftl_counters(ftl);
    let wall_started = Instant::now();
    let virtual_started_ns = clock.now_ns();
    let report = filesystem.copy_file("source", destination, method)?;
    filesystem.flush()?;
    let virtual_ns = clock.now_ns() - virtual_started_ns;
    let wall_ns = wall_started.elapsed().as_nanos() as u64;
    let (programmed_after, referenced_after) = ftl_counters(ftl);
    Ok(CopyMeasurement {
        method: match method {
            CopyMethod::Bytes => "bytes",
            _ => "reference",
        },
        virtual_ns,
        wall_ns,
        blocks_by_reference: report.blocks_by_reference,
        bytes_by_bytes: report.bytes_by_bytes,
        flash_pages_programmed: programmed_after - programmed_before,
        pages_copied_by_reference: referenced_after - referenced_before,
        copy_matches_source: file_crc(filesystem, destination)? == source_crc,
    })
}

fn print_text(experiment: &CopyExperiment) {
    println!(
        "copy of a {} file on the {} preset ({} erase blocks per chip), {} FS blocks",
        HumanBytes(experiment.file_size_bytes),
        experiment.preset,
        experiment.flash_blocks_per_chip,
        HumanBytes(experiment.fs_block_size_bytes)
    );
    println!(
        "source written and flushed in {:.3} s (virtual)",
        experiment.write_virtual_ns as f64 / 1e9
    );
    ColumnTable::new(" ", [&experiment.by_reference, &experiment.by_bytes])
        .left("method", 10, |row| row.method.to_string())
        .right("virtual ms", 14, |row| {
            fixed(row.virtual_ns as f64 / 1e6, 3)
        })
        .right("wall ms", 12, |row| fixed(row.wall_ns as f64 / 1e6, 1))
        .right("blocks ref", 12, |row| row.blocks_by_reference.to_string())
        .right("bytes", 12, |row| {
            HumanBytes(row.bytes_by_bytes).to_string()
        })
        .right("pages prog.", 14, |row| {
            row.flash_pages_programmed.to_string()
        })
        .right("matches", 8, |row| row.copy_matches_source.to_string())
        .print();
    println!(
        "by bytes / by reference: {:.0}x virtual time, {:.0}x wall time; target >= {:.0}x virtual: {}",
        experiment.virtual_time_ratio,
        experiment.wall_time_ratio,
        experiment.target_ratio,
        crate::verdict::Verdict::of(experiment.target_met)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::record::record_chart;

    fn measurement(method: &'static str, virtual_ns: u64, pages: u64) -> CopyMeasurement {
        CopyMeasurement {
            method,
            virtual_ns,
            wall_ns: 1,
            blocks_by_reference: 0,
            bytes_by_bytes: 0,
            flash_pages_programmed: pages,
            pages_copied_by_reference: 0,
            copy_matches_source: true,
        }
    }

    #[test]
    fn the_plot_shows_time_and_pages_of_both_copies() {
        let experiment = CopyExperiment {
            preset: "minflash".to_string(),
            file_size_bytes: 4 << 20,
            fs_block_size_bytes: 16 << 10,
            flash_blocks_per_chip: 16,
            write_virtual_ns: 1,
            by_reference: measurement("reference", 2_000_000, 12),
            by_bytes: measurement("bytes", 2_345_000_000, 613),
            virtual_time_ratio: 1000.0,
            wall_time_ratio: 10.0,
            target_ratio: 1000.0,
            target_met: true,
        };
        let charts = charts(&experiment);
        assert_eq!(charts.len(), 2);
        let time = record_chart(&charts[0]).unwrap();
        assert_eq!(time.texts_equal("by reference").len(), 1);
        assert_eq!(time.texts_equal("by bytes").len(), 1);
        assert_eq!(time.texts_equal("2345").len(), 1, "the by-bytes bar's ms");
        let pages = record_chart(&charts[1]).unwrap();
        assert_eq!(pages.texts_equal("613").len(), 1);
        assert_eq!(pages.texts_equal("12.0").len(), 1);
    }
}
