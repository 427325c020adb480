//! `flashpipe bench cluster`: the minFlash cluster with real processes on this machine,
//! beside the virtual-time model (`sim repro minflash-fig6/7`, computed in this run) and
//! the paper's figures.
//!
//! Four `flashpipe cluster node` processes run in a line 0 - 1 - 2 - 3 (linked over
//! loopback TCP, or over shared-memory rings with `--link shm`),
//! each an emulated `minflash` device paced to wall time, with a generated key
//! ([`nodes`]); host `h` sits on node `h` and runs as a [`HostSession`] on a thread of this
//! process ([`load`]), reading random pages (never written, so each read returns zeros
//! after the device's full read time). Parts:
//!
//! - `fig7`: page read latency at queue depth 1 (p50 and p99) from host 0 to device 0, 1, 2
//!   and 3 (0 to 3 hops), each hop's increment over the row before, and ReFlex's published
//!   +21 us per remote access as an anchor;
//! - `fig6a`: host 0 reading devices 0..N (N = 1..4) at `--depth`: aggregate MB/s;
//! - `fig6b`: hosts 0..N (N = 1..4) all reading device 0: MB/s per host and Jain's index;
//! - `fig6c`: hosts 0..N reading devices 0..N (N = 1..4): aggregate MB/s and its share of
//!   N times the one-host, one-device rate of the same part;
//! - `nbd`: beside Fig. 7, the same 8 KiB read at queue depth 1 through one NBD hop: an
//!   emulated `minflash` device under the host FTL exported by a child `flashpipe nbd serve`
//!   and read by flashpipe's NBD client ([`nbd_hop`]).
//!
//! The nodes busy-poll; where the machine has fewer CPUs than nodes and hosts, the rates
//! are bounded by the CPUs, and the report says so beside the CPU count. Times and rates
//! are what this machine did; nothing here judges them.
//!
//! [`HostSession`]: flashpipe_cluster_host::session::HostSession

mod cpu_busy;
mod load;
mod nbd_hop;
mod nodes;
mod report;

use std::time::Duration;

use clap::Args;
use flashpipe_bench_harness::option_range::check_within;
use flashpipe_cluster::arbiter::jain_index;
use flashpipe_flash::FlashConfig;

use crate::error::invalid_input;
use crate::BenchResult;
use load::{run_hosts, wait_for_links, HostJob, HostTally};
pub use nodes::preset_in_description;
use nodes::{ClusterNodes, NODES, PRESET};
use report::{print_report, ClusterRow};

/// Least and most seconds of each measured row.
const SECONDS_RANGE: std::ops::RangeInclusive<f64> = 0.05..=600.0;
/// Most reads in flight per host (the node holds 64 per host).
const MOST_DEPTH: usize = 64;
/// ReFlex's published cost of one remote access, in microseconds.
pub const REFLEX_REMOTE_US: f64 = 21.0;

/// The parts of `bench cluster`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClusterPart {
    /// Page read latency over 0 to 3 hops (Fig. 7).
    Fig7,
    /// One host, 1 to 4 devices: aggregate bandwidth (Fig. 6a).
    Fig6a,
    /// 1 to 4 hosts on one device: bandwidth per host and Jain's index (Fig. 6b).
    Fig6b,
    /// Hosts = devices = 1 to 4: aggregate bandwidth and share of ideal (Fig. 6c).
    Fig6c,
    /// The same page read through one NBD hop (beside Fig. 7).
    Nbd,
}

impl ClusterPart {
    /// Every part, in the order it runs and is reported.
    pub const IN_ORDER: [ClusterPart; 5] = [
        ClusterPart::Fig7,
        ClusterPart::Nbd,
        ClusterPart::Fig6a,
        ClusterPart::Fig6b,
        ClusterPart::Fig6c,
    ];

    /// The part's name as `--parts` spells it.
    pub fn name(self) -> &'static str {
        match self {
            ClusterPart::Fig7 => "fig7",
            ClusterPart::Fig6a => "fig6a",
            ClusterPart::Fig6b => "fig6b",
            ClusterPart::Fig6c => "fig6c",
            ClusterPart::Nbd => "nbd",
        }
    }
}

/// How the measured nodes' links and hosts are carried (`--link`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClusterLink {
    /// TCP on loopback.
    Tcp,
    /// Shared-memory rings set up over each node's Unix socket.
    Shm,
}

impl ClusterLink {
    /// The link kind as the description and `--link` spell it.
    pub fn name(self) -> &'static str {
        match self {
            ClusterLink::Tcp => "tcp",
            ClusterLink::Shm => "shm",
        }
    }
}

/// `flashpipe bench cluster`.
#[derive(Debug, Args)]
pub struct BenchClusterArgs {
    /// Parts to run: fig7 (latency over hops), fig6a (one host, N devices), fig6b (N hosts,
    /// one device), fig6c (N hosts, N devices), nbd (a page read through one NBD hop).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "fig7,nbd,fig6a,fig6b,fig6c"
    )]
    pub parts: Vec<ClusterPart>,
    /// Seconds of each measured row (0.05 to 600).
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Reads in flight per host in the bandwidth parts (1 to 64).
    #[arg(long, default_value_t = 32)]
    pub depth: usize,
    /// Seed of the page addresses and of the model.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How links and host connections are carried: tcp (loopback TCP) or shm
    /// (shared-memory rings between the processes).
    #[arg(long, value_enum, default_value = "tcp")]
    pub link: ClusterLink,
    /// The nodes' device: a shipped preset or a preset file (`flashpipe sim presets`). The
    /// model's and the paper's columns are given for `minflash` only; another device, e.g.
    /// one with fewer buses so that the device and not the CPUs bounds Fig. 6b, is measured
    /// alone.
    #[arg(long, default_value = PRESET)]
    pub preset: String,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
}

impl BenchClusterArgs {
    /// Whether the rows are set beside the model and the paper (the `minflash` device).
    pub fn beside_the_paper(&self) -> bool {
        self.preset == PRESET
    }
}

/// Runs `flashpipe bench cluster`.
pub fn run(arguments: BenchClusterArgs) -> BenchResult {
    check_within("--seconds", arguments.seconds, SECONDS_RANGE)
        .map_err(|error| invalid_input(error.to_string()))?;
    check_within("--depth", arguments.depth, 1..=MOST_DEPTH)
        .map_err(|error| invalid_input(error.to_string()))?;
    if arguments.parts.is_empty() {
        return Err(invalid_input("--parts: name at least one part").into());
    }
    let config = FlashConfig::preset_or_file(&arguments.preset)
        .map_err(|error| invalid_input(format!("--preset: {error}")))?;
    let model = crate::sim::minflash_model_points(arguments.seed)?;
    let scratch = crate::scratch::Scratch::new(&std::env::temp_dir(), "cluster")?;
    let preset = preset_in_description(&arguments.preset)?;
    let nodes = ClusterNodes::start(scratch.path(), arguments.link, &preset)?;
    let loaded = flashpipe_cluster_host::loaded::load_description(nodes.description())
        .map_err(|error| invalid_input(format!("the generated description: {error}")))?;
    wait_for_links(&loaded, NODES, NODES)?;
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let mut rows = Vec::new();
    let measure = Measure {
        loaded: &loaded,
        geometry: &config.geometry,
        duration: Duration::from_secs_f64(arguments.seconds),
        depth: arguments.depth,
        seed: arguments.seed,
        scratch: scratch.path(),
    };
    for part in ClusterPart::IN_ORDER {
        if !arguments.parts.contains(&part) {
            continue;
        }
        let before = cpu_busy::CpuTimes::now();
        let mut part_rows = match part {
            ClusterPart::Fig7 => measure.fig7()?,
            ClusterPart::Fig6a => measure.fig6a()?,
            ClusterPart::Fig6b => measure.fig6b()?,
            ClusterPart::Fig6c => measure.fig6c()?,
            ClusterPart::Nbd => measure.nbd()?,
        };
        let busy = before.zip(cpu_busy::CpuTimes::now());
        let busy = busy.and_then(|(before, after)| before.busy_fraction_until(&after));
        for row in &mut part_rows {
            if arguments.beside_the_paper() {
                row.attach_model(&model);
            }
            row.cpu_note(cpus, busy);
        }
        rows.extend(part_rows);
    }
    drop(nodes);
    print_report(&rows, cpus, &arguments);
    Ok(())
}

/// What every measured row shares.
struct Measure<'a> {
    loaded: &'a flashpipe_cluster_host::loaded::LoadedDescription,
    geometry: &'a flashpipe_flash::FlashGeometry,
    duration: Duration,
    depth: usize,
    seed: u64,
    scratch: &'a std::path::Path,
}

impl Measure<'_> {
    fn nbd(&self) -> BenchResult<Vec<ClusterRow>> {
        let latencies = nbd_hop::nbd_read_latencies_us(
            self.scratch,
            self.geometry.page_data_bytes,
            self.duration,
            self.seed,
        )?;
        let mut row = ClusterRow::new(
            ClusterPart::Nbd,
            "8 KiB read through one NBD hop".to_string(),
            percentile(&latencies, 0.50),
            "us",
            1,
        );
        row.p99 = Some(percentile(&latencies, 0.99));
        row.samples = latencies.len() as u64;
        Ok(vec![row])
    }

    fn job(&self, host: u32, devices: Vec<u32>, depth: usize) -> HostJob {
        HostJob {
            host,
            devices,
            depth,
            duration: self.duration,
            seed: self.seed,
        }
    }

    fn run(&self, jobs: &[HostJob]) -> BenchResult<Vec<HostTally>> {
        run_hosts(self.loaded, self.geometry, jobs)
    }

    fn megabytes_per_second(&self, tally: &HostTally) -> f64 {
        if tally.elapsed_seconds <= 0.0 {
            return 0.0;
        }
        tally.pages as f64 * f64::from(self.geometry.page_data_bytes) / tally.elapsed_seconds / 1e6
    }

    fn fig7(&self) -> BenchResult<Vec<ClusterRow>> {
        let mut rows: Vec<ClusterRow> = Vec::new();
        let mut previous_p50 = None;
        let mut local_p50 = 0.0;
        for hops in 0..NODES {
            let tally = &self.run(&[self.job(0, vec![hops], 1)])?[0];
            let p50 = percentile(&tally.latencies_us, 0.50);
            let p99 = percentile(&tally.latencies_us, 0.99);
            if hops == 0 {
                local_p50 = p50;
            }
            let mut row = ClusterRow::new(
                ClusterPart::Fig7,
                format!("8 KiB read over {hops} hops"),
                p50,
                "us",
                1,
            );
            row.p99 = Some(p99);
            row.increment = previous_p50.map(|before| p50 - before);
            row.anchor = (hops > 0).then_some(local_p50 + REFLEX_REMOTE_US);
            row.samples = tally.pages;
            previous_p50 = Some(p50);
            rows.push(row);
        }
        Ok(rows)
    }

    fn fig6a(&self) -> BenchResult<Vec<ClusterRow>> {
        let mut rows = Vec::new();
        for devices in 1..=NODES {
            let tally = &self.run(&[self.job(0, (0..devices).collect(), self.depth)])?[0];
            let mut row = ClusterRow::new(
                ClusterPart::Fig6a,
                format!("1 host, {devices} devices"),
                self.megabytes_per_second(tally),
                "MB/s",
                1,
            );
            row.samples = tally.pages;
            rows.push(row);
        }
        Ok(rows)
    }

    fn fig6b(&self) -> BenchResult<Vec<ClusterRow>> {
        let mut rows = Vec::new();
        for hosts in 1..=NODES {
            let jobs: Vec<HostJob> = (0..hosts)
                .map(|host| self.job(host, vec![0], self.depth))
                .collect();
            let tallies = self.run(&jobs)?;
            let per_host: Vec<f64> = tallies
                .iter()
                .map(|tally| self.megabytes_per_second(tally))
                .collect();
            let mut total = ClusterRow::new(
                ClusterPart::Fig6b,
                format!("{hosts} hosts, 1 device, total"),
                per_host.iter().sum(),
                "MB/s",
                hosts,
            );
            total.samples = tallies.iter().map(|tally| tally.pages).sum();
            rows.push(total);
            if hosts > 1 {
                for (host, (rate, tally)) in per_host.iter().zip(&tallies).enumerate() {
                    let mut row = ClusterRow::new(
                        ClusterPart::Fig6b,
                        format!("{hosts} hosts, 1 device, host {host}"),
                        *rate,
                        "MB/s",
                        hosts,
                    );
                    row.samples = tally.pages;
                    rows.push(row);
                }
                rows.push(ClusterRow::new(
                    ClusterPart::Fig6b,
                    format!("{hosts} hosts, 1 device, Jain's index"),
                    jain_index(&per_host),
                    "index",
                    hosts,
                ));
            }
        }
        Ok(rows)
    }

    fn fig6c(&self) -> BenchResult<Vec<ClusterRow>> {
        let mut rows = Vec::new();
        let mut one_device = None;
        for n in 1..=NODES {
            let jobs: Vec<HostJob> = (0..n)
                .map(|host| self.job(host, (0..n).collect(), self.depth))
                .collect();
            let tallies = self.run(&jobs)?;
            let total: f64 = tallies
                .iter()
                .map(|tally| self.megabytes_per_second(tally))
                .sum();
            let base = *one_device.get_or_insert(total);
            let mut row = ClusterRow::new(
                ClusterPart::Fig6c,
                format!("{n} hosts, {n} devices, total"),
                total,
                "MB/s",
                n,
            );
            row.of_ideal_percent = (base > 0.0).then(|| 100.0 * total / (f64::from(n) * base));
            row.samples = tallies.iter().map(|tally| tally.pages).sum();
            rows.push(row);
        }
        Ok(rows)
    }
}

/// The `fraction` quantile of `values` (nearest rank); 0 for none.
fn percentile(values: &[f64], fraction: f64) -> f64 {
    assert!((0.0..=1.0).contains(&fraction), "a quantile is a fraction");
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((fraction * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 0.5), 50.0);
        assert_eq!(percentile(&values, 0.99), 99.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
