//! `flashpipe ftl emulate`: the FTL over a flash preset paced against the wall clock
//! ([`flashpipe_device::PacedDevice`], issue #16), driven at a fixed queue depth for a
//! number of seconds; prints the latency measured from outside (wall clock, submit to
//! completion) beside the model's own mean latency, the preset's closed form where one is
//! known, and how far behind real time the model released its completions.

use std::collections::HashMap;
use std::time::Instant;

use clap::{Args, ValueEnum};
use flashpipe_device::{
    paced::DEFAULT_LAG_WARNING_NS, BlockDevice, IoBuf, Operation, PacedDevice, Request, SplitMix64,
};
use flashpipe_flash::{FlashArray, FlashConfig, FlashOptions, StorageMode};
use flashpipe_ftl::{
    precondition, FlashBackend, Ftl, FtlOptions, PreconditionMethod, PreconditionOptions,
};

use crate::BenchResult;

/// QD1 single-page read on the minflash preset in closed form (docs/reproductions.md).
const MINFLASH_QD1_READ_US_CLOSED_FORM: f64 = 128.07;

/// What the emulated host does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PatternArgument {
    /// Uniform random single-page reads of preconditioned pages.
    Randread,
    /// Uniform random single-page writes.
    Randwrite,
}

/// Arguments of `flashpipe ftl emulate`.
#[derive(Debug, Args)]
pub struct EmulateArgs {
    /// Flash preset (or a TOML file).
    #[arg(long, default_value = "minflash")]
    preset: String,
    /// Wall-clock seconds to run.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Requests kept in flight.
    #[arg(long, default_value_t = 1)]
    qd: u32,
    /// Access pattern.
    #[arg(long, value_enum, default_value_t = PatternArgument::Randread)]
    pattern: PatternArgument,
    /// Erase blocks per plane (fewer than the preset's: a smaller device that
    /// preconditions fast; timing per request is the preset's either way).
    #[arg(long, default_value_t = 64)]
    blocks_per_plane: u32,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Runs `flashpipe ftl emulate`.
pub fn run(arguments: EmulateArgs) -> BenchResult {
    if !(arguments.seconds > 0.0 && arguments.seconds <= 3600.0) {
        return Err(format!("--seconds {} is outside (0, 3600]", arguments.seconds).into());
    }
    if !(1..=64).contains(&arguments.qd) {
        return Err(format!("--qd {} is outside 1..=64", arguments.qd).into());
    }
    let mut config = FlashConfig::preset_or_file(&arguments.preset)?;
    let preset_blocks = config.geometry.blocks_per_plane;
    if !(8..=preset_blocks).contains(&arguments.blocks_per_plane) {
        return Err(format!(
            "--blocks-per-plane {} is not within 8..={preset_blocks}",
            arguments.blocks_per_plane
        )
        .into());
    }
    config.geometry.blocks_per_plane = arguments.blocks_per_plane;
    let array = FlashArray::new(
        config,
        FlashOptions {
            seed: arguments.seed,
            storage: StorageMode::TimingOnly,
            ..FlashOptions::default()
        },
    )?;
    let options = FtlOptions {
        checkpoint_interval_pages: 0,
        queue_depth: arguments.qd.max(2),
        ..FtlOptions::default()
    };
    let mut ftl = Ftl::format(Box::new(array) as Box<dyn FlashBackend>, options)?;
    let filled_pages = precondition(
        &mut ftl,
        &PreconditionOptions {
            fill_share: 0.9,
            overwrite_passes: 0.5,
            method: PreconditionMethod::Direct,
            seed: arguments.seed,
        },
    )?
    .filled_pages;
    let stats_before = ftl.stats();
    let mut device = PacedDevice::new(ftl, DEFAULT_LAG_WARNING_NS);
    let latencies_us = drive(&mut device, &arguments, filled_pages)?;
    let lag = device.lag_report();
    let ftl = device.into_inner();
    let model = ftl.stats().since(&stats_before);
    print_results(&arguments, &latencies_us, &model, &lag);
    Ok(())
}

/// Keeps `qd` requests in flight for the wall-clock time asked; each request's latency
/// from submit to completion, in microseconds.
fn drive(
    device: &mut PacedDevice<Ftl>,
    arguments: &EmulateArgs,
    filled_pages: u64,
) -> BenchResult<Vec<f64>> {
    let page_bytes = device.info().block_size_bytes as usize;
    let mut generator = SplitMix64::new(arguments.seed ^ 0xE4A1);
    let mut submitted_at: HashMap<u64, Instant> = HashMap::new();
    let mut latencies_us = Vec::new();
    let mut completions = Vec::new();
    let mut next_tag = 0u64;
    let started = Instant::now();
    let mut submitting = true;
    while submitting || !submitted_at.is_empty() {
        submitting = started.elapsed().as_secs_f64() < arguments.seconds;
        while submitting && (submitted_at.len() as u32) < arguments.qd {
            let page = generator.below(filled_pages);
            let buffer = IoBuf::zeroed(page_bytes);
            let operation = match arguments.pattern {
                PatternArgument::Randread => Operation::Read {
                    first_block: page,
                    buffer,
                },
                PatternArgument::Randwrite => Operation::Write {
                    first_block: page,
                    buffer,
                },
            };
            submitted_at.insert(next_tag, Instant::now());
            device
                .submit(Request {
                    tag: next_tag,
                    operation,
                })
                .map_err(|rejected| rejected.error)?;
            next_tag += 1;
        }
        if submitted_at.is_empty() {
            break;
        }
        completions.clear();
        device.wait_completions(&mut completions)?;
        let now = Instant::now();
        for completion in completions.drain(..) {
            completion.status?;
            let submitted = submitted_at
                .remove(&completion.tag)
                .ok_or("a completion with an unknown tag")?;
            latencies_us.push(now.duration_since(submitted).as_secs_f64() * 1e6);
        }
    }
    Ok(latencies_us)
}

fn print_results(
    arguments: &EmulateArgs,
    latencies_us: &[f64],
    model: &flashpipe_ftl::FtlStats,
    lag: &flashpipe_device::LagReport,
) {
    let mut sorted = latencies_us.to_vec();
    sorted.sort_by(f64::total_cmp);
    let percentile = |share: f64| -> f64 {
        if sorted.is_empty() {
            return 0.0;
        }
        sorted[((sorted.len() - 1) as f64 * share).round() as usize]
    };
    let mean_us = sorted.iter().sum::<f64>() / sorted.len().max(1) as f64;
    let (model_requests, model_total_ns) = match arguments.pattern {
        PatternArgument::Randread => (model.host_reads, model.host_read_latency_ns_total),
        PatternArgument::Randwrite => (model.host_mutations, model.host_mutation_latency_ns_total),
    };
    let model_mean_us = model_total_ns as f64 / model_requests.max(1) as f64 / 1e3;
    println!(
        "emulated {} ({} blocks per plane), pattern {:?}, queue depth {}, {:.1} s, seed {}",
        arguments.preset,
        arguments.blocks_per_plane,
        arguments.pattern,
        arguments.qd,
        arguments.seconds,
        arguments.seed
    );
    println!(
        "requests {}, {:.0} per second (wall clock)",
        sorted.len(),
        sorted.len() as f64 / arguments.seconds
    );
    println!(
        "latency measured from outside: mean {mean_us:.2} us, p50 {:.2} us, p99 {:.2} us, max {:.2} us",
        percentile(0.5),
        percentile(0.99),
        percentile(1.0)
    );
    println!("latency in the model (virtual): mean {model_mean_us:.2} us");
    if arguments.preset == "minflash"
        && arguments.qd == 1
        && arguments.pattern == PatternArgument::Randread
    {
        println!(
            "closed form (docs/reproductions.md, QD1 8 KiB read): {MINFLASH_QD1_READ_US_CLOSED_FORM} us"
        );
    }
    println!(
        "release lag behind modeled time: mean {:.2} us, p99 {:.2} us, max {:.2} us; \
         {} of {} releases lagged more than {} us{}",
        lag.lag_ns_mean / 1e3,
        lag.lag_ns_p99 as f64 / 1e3,
        lag.lag_ns_max as f64 / 1e3,
        lag.warnings,
        lag.released,
        lag.lag_warning_ns / 1000,
        if lag.warnings > 0 {
            " (warning: the model or the machine did not keep up)"
        } else {
            ""
        }
    );
}
