//! `flashpipe ftl emulate`: the FTL over a flash preset paced against the wall clock
//! ([`flashpipe_device::PacedDevice`]), driven at a fixed queue depth for a
//! number of seconds; prints the latency measured from outside (wall clock, submit to
//! completion) beside the model's own mean latency, the preset's closed form where one is
//! known, and how far behind real time the model released its completions. `--json`
//! prints one object instead; `--plot FILE.png` draws the latency CDF measured from
//! outside.

use std::collections::HashMap;
use std::time::Instant;

use clap::{Args, ValueEnum};
use flashpipe_device::{
    paced::DEFAULT_LAG_WARNING_NS, BlockDevice, IoBuf, Operation, PacedDevice, Request, SplitMix64,
};
use flashpipe_flash::{FlashArray, FlashOptions};
use flashpipe_ftl::{
    precondition, FlashBackend, Ftl, FtlOptions, PreconditionMethod, PreconditionOptions,
};

use serde::Serialize;

use crate::error::{internal, invalid_input};
use crate::ftl::RunArgs;
use crate::plot::{draw_chart, Chart, ChartKind, Series};
use crate::precondition::preset_config;
use crate::BenchResult;
use flashpipe_bench_harness::option_range::check_within;
use std::ops::Bound;

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
    // The seed, `--json` (one object), and `--plot`: the latency CDF measured from outside.
    #[command(flatten)]
    run: RunArgs,
}

/// What `--json` prints: the text's figures, named.
#[derive(Debug, Serialize)]
struct EmulateJson {
    preset: String,
    blocks_per_plane: u32,
    pattern: &'static str,
    queue_depth: u32,
    seconds: f64,
    seed: u64,
    requests: u64,
    requests_per_second: f64,
    latency_us_mean: f64,
    latency_us_p50: f64,
    latency_us_p99: f64,
    latency_us_max: f64,
    model_latency_us_mean: f64,
    closed_form_latency_us: Option<f64>,
    release_lag_us_mean: f64,
    release_lag_us_p99: f64,
    release_lag_us_max: f64,
    releases: u64,
    releases_lagged: u64,
    lag_warning_us: u64,
    kept_up: bool,
}

/// Runs `flashpipe ftl emulate`.
pub fn run(arguments: EmulateArgs) -> BenchResult {
    let seconds_range = (Bound::Excluded(0.0), Bound::Included(3600.0));
    check_within("--seconds", arguments.seconds, seconds_range).map_err(invalid_input)?;
    check_within("--qd", arguments.qd, 1..=64).map_err(invalid_input)?;
    arguments.run.check_plot()?;
    let config = preset_config(&arguments.preset, Some(arguments.blocks_per_plane))?;
    let array = FlashArray::new(config, FlashOptions::timing_only(arguments.run.seed))?;
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
            seed: arguments.run.seed,
        },
    )?
    .filled_pages;
    let stats_before = ftl.stats();
    let mut device = PacedDevice::new(ftl, DEFAULT_LAG_WARNING_NS);
    let latencies_us = drive(&mut device, &arguments, filled_pages)?;
    let lag = device.lag_report();
    let ftl = device.into_inner();
    let model = ftl.stats().since(&stats_before);
    let mut sorted_us = latencies_us;
    sorted_us.sort_by(f64::total_cmp);
    let json = summarize(&arguments, &sorted_us, &model, &lag);
    arguments
        .run
        .draw(|path| Ok(draw_chart(path, &latency_chart(&json, &sorted_us))?))?;
    if arguments.run.json {
        println!("{}", serde_json::to_string(&json)?);
    } else {
        print_results(&json);
    }
    Ok(())
}

fn pattern_name(pattern: PatternArgument) -> &'static str {
    match pattern {
        PatternArgument::Randread => "randread",
        PatternArgument::Randwrite => "randwrite",
    }
}

/// Keeps `qd` requests in flight for the wall-clock time asked; each request's latency
/// from submit to completion, in microseconds.
fn drive(
    device: &mut PacedDevice<Ftl>,
    arguments: &EmulateArgs,
    filled_pages: u64,
) -> BenchResult<Vec<f64>> {
    let page_bytes = device.info().block_size_bytes as usize;
    let mut generator = SplitMix64::new(arguments.run.seed ^ 0xE4A1);
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
                .ok_or_else(|| internal("a completion with an unknown tag"))?;
            latencies_us.push(now.duration_since(submitted).as_secs_f64() * 1e6);
        }
    }
    Ok(latencies_us)
}

/// The run's figures from the latencies (sorted) and the model's counters.
fn summarize(
    arguments: &EmulateArgs,
    sorted_us: &[f64],
    model: &flashpipe_ftl::FtlStats,
    lag: &flashpipe_device::LagReport,
) -> EmulateJson {
    let percentile = |share: f64| -> f64 {
        if sorted_us.is_empty() {
            return 0.0;
        }
        sorted_us[((sorted_us.len() - 1) as f64 * share).round() as usize]
    };
    let mean_us = sorted_us.iter().sum::<f64>() / sorted_us.len().max(1) as f64;
    let (model_requests, model_total_ns) = match arguments.pattern {
        PatternArgument::Randread => (model.host_reads, model.host_read_latency_ns_total),
        PatternArgument::Randwrite => (model.host_mutations, model.host_mutation_latency_ns_total),
    };
    let closed_form = arguments.preset == "minflash"
        && arguments.qd == 1
        && arguments.pattern == PatternArgument::Randread;
    EmulateJson {
        preset: arguments.preset.clone(),
        blocks_per_plane: arguments.blocks_per_plane,
        pattern: pattern_name(arguments.pattern),
        queue_depth: arguments.qd,
        seconds: arguments.seconds,
        seed: arguments.run.seed,
        requests: sorted_us.len() as u64,
        requests_per_second: sorted_us.len() as f64 / arguments.seconds,
        latency_us_mean: mean_us,
        latency_us_p50: percentile(0.5),
        latency_us_p99: percentile(0.99),
        latency_us_max: percentile(1.0),
        model_latency_us_mean: model_total_ns as f64 / model_requests.max(1) as f64 / 1e3,
        closed_form_latency_us: closed_form.then_some(MINFLASH_QD1_READ_US_CLOSED_FORM),
        release_lag_us_mean: lag.lag_ns_mean / 1e3,
        release_lag_us_p99: lag.lag_ns_p99 as f64 / 1e3,
        release_lag_us_max: lag.lag_ns_max as f64 / 1e3,
        releases: lag.released,
        releases_lagged: lag.warnings,
        lag_warning_us: lag.lag_warning_ns / 1000,
        kept_up: lag.warnings == 0,
    }
}

/// The CDF of the latencies measured from outside, at most 200 points, with the model's
/// mean (and the closed form, where known) as named points.
fn latency_chart(json: &EmulateJson, sorted_us: &[f64]) -> Chart {
    let count = sorted_us.len();
    let step = count.div_ceil(200).max(1);
    let mut points: Vec<(f64, f64)> = (step.saturating_sub(1)..count)
        .step_by(step)
        .map(|index| (sorted_us[index], (index + 1) as f64 / count as f64))
        .collect();
    if let (Some(&last), Some(&(_, share))) = (sorted_us.last(), points.last()) {
        if share < 1.0 {
            points.push((last, 1.0));
        }
    }
    let mut reference_points = vec![crate::plot::ReferencePoint {
        name: format!("model mean {:.1} us", json.model_latency_us_mean),
        x: json.model_latency_us_mean,
        y: 0.5,
        series_index: 0,
    }];
    if let Some(closed_form_us) = json.closed_form_latency_us {
        reference_points.push(crate::plot::ReferencePoint {
            name: format!("closed form {closed_form_us} us"),
            x: closed_form_us,
            y: 0.25,
            series_index: 0,
        });
    }
    Chart {
        title: format!(
            "Emulated {} {} at queue depth {}, wall clock, {} requests",
            json.preset, json.pattern, json.queue_depth, json.requests
        ),
        x_label: "latency from submit to completion (us, wall clock)".to_string(),
        y_label: "share of requests".to_string(),
        kind: ChartKind::Lines,
        series: vec![Series::new("measured from outside", points)],
        reference_points,
        reference_name: "the model's own figures (virtual time)".to_string(),
    }
}

fn print_results(json: &EmulateJson) {
    println!(
        "emulated {} ({} blocks per plane), pattern {}, queue depth {}, {:.1} s, seed {}",
        json.preset, json.blocks_per_plane, json.pattern, json.queue_depth, json.seconds, json.seed
    );
    println!(
        "requests {}, {:.0} per second (wall clock)",
        json.requests, json.requests_per_second
    );
    println!(
        "latency measured from outside: mean {:.2} us, p50 {:.2} us, p99 {:.2} us, max {:.2} us",
        json.latency_us_mean, json.latency_us_p50, json.latency_us_p99, json.latency_us_max
    );
    println!(
        "latency in the model (virtual): mean {:.2} us",
        json.model_latency_us_mean
    );
    if let Some(closed_form_us) = json.closed_form_latency_us {
        println!("closed form (docs/reproductions.md, QD1 8 KiB read): {closed_form_us} us");
    }
    println!(
        "release lag behind modeled time: mean {:.2} us, p99 {:.2} us, max {:.2} us; \
         {} of {} releases lagged more than {} us{}",
        json.release_lag_us_mean,
        json.release_lag_us_p99,
        json.release_lag_us_max,
        json.releases_lagged,
        json.releases,
        json.lag_warning_us,
        if json.kept_up {
            ""
        } else {
            " (warning: the model or the machine did not keep up)"
        }
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::record::record_chart;

    #[test]
    fn the_latency_plot_is_a_cdf_with_the_models_figures_marked() {
        let json = EmulateJson {
            preset: "minflash".to_string(),
            blocks_per_plane: 8,
            pattern: "randread",
            queue_depth: 1,
            seconds: 0.2,
            seed: 1,
            requests: 4,
            requests_per_second: 20.0,
            latency_us_mean: 140.0,
            latency_us_p50: 130.0,
            latency_us_p99: 190.0,
            latency_us_max: 190.0,
            model_latency_us_mean: 128.07,
            closed_form_latency_us: Some(128.07),
            release_lag_us_mean: 1.0,
            release_lag_us_p99: 2.0,
            release_lag_us_max: 3.0,
            releases: 4,
            releases_lagged: 0,
            lag_warning_us: 50,
            kept_up: true,
        };
        let chart = latency_chart(&json, &[128.5, 129.0, 130.0, 190.0]);
        let points = &chart.series[0].points;
        assert_eq!(points.first(), Some(&(128.5, 0.25)));
        assert_eq!(points.last(), Some(&(190.0, 1.0)));
        let recording = record_chart(&chart).unwrap();
        assert_eq!(recording.texts_starting("model mean 128.1").len(), 1);
        assert_eq!(recording.texts_starting("closed form").len(), 1);
        assert_eq!(recording.texts_equal("share of requests").len(), 1);
    }
}
