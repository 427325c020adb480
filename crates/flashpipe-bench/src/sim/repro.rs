//! `flashpipe sim repro ...`: the RAD and minFlash figures and tables, our simulated
//! numbers beside the paper's (docs/reproductions.md discusses each difference).

mod charts;
mod rad_fig4_ftl;

use clap::{Args, ValueEnum};
use flashpipe_cluster::arbiter::jain_index;
use flashpipe_flash::workload::{self, AccessKind, AccessPattern, SyntheticJob};
use flashpipe_flash::{FlashAddress, FlashCommand, FlashConfig, FlashRequest};
use serde::Serialize;

use super::timing_array;

use crate::error::internal;
use crate::progress::Progress;
use crate::table::{Align, Table};
use crate::BenchResult;

/// Options of `sim repro`.
#[derive(Debug, Args)]
pub struct ReproArgs {
    /// Which figure or table.
    #[arg(value_enum)]
    which: Reproduction,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also draw the figure (ours as lines or bars, the paper's points as named diamonds)
    /// into this PNG; one panel per figure and unit (`all`: a grid of panels).
    #[arg(long, value_name = "PATH.png")]
    plot: Option<String>,
}

/// The reproductions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Reproduction {
    /// RAD Fig. 4(a)/(b): N x 1 read and write bandwidth, N = 1..32, 512-sector requests.
    RadFig4,
    /// RAD Fig. 4(a) through the host FTL in steady state: 1 x 1 read and
    /// write bandwidth and write amplification per over-provisioning share.
    RadFig4Ftl,
    /// RAD Table II: flash matrix sizing for DES and Sobel.
    RadTable2,
    /// minFlash Table I: latency of one 8 KiB read and write.
    MinflashTable1,
    /// minFlash Fig. 5: bandwidth vs transfer size, sequential and random reads.
    MinflashFig5,
    /// minFlash Fig. 6: 1-4 devices, 1-4 hosts, random 16 MiB reads.
    MinflashFig6,
    /// minFlash Fig. 7: read latency vs hops.
    MinflashFig7,
    /// Every reproduction in turn.
    All,
}

/// One line of a reproduction: our number and, where the paper gives one, theirs.
#[derive(Debug, Clone, Serialize)]
struct Row {
    figure: &'static str,
    point: String,
    ours: f64,
    paper: Option<f64>,
    unit: &'static str,
    /// The curve this row belongs to in a plot, and its x value.
    #[serde(skip_serializing_if = "Option::is_none")]
    series: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    x: Option<f64>,
    /// The name of its place on the plot's x axis (a category, or the x value written out).
    #[serde(skip)]
    category: Option<String>,
}

impl Row {
    fn new(
        figure: &'static str,
        point: String,
        ours: f64,
        paper: Option<f64>,
        unit: &'static str,
    ) -> Row {
        Row {
            figure,
            point,
            ours,
            paper,
            unit,
            series: None,
            x: None,
            category: None,
        }
    }

    /// Places the row on curve `series` at `x` for `--plot`, the tick named `category`.
    fn at(mut self, series: &'static str, x: f64, category: impl Into<String>) -> Row {
        self.series = Some(series);
        self.x = Some(x);
        self.category = Some(category.into());
        self
    }

    /// Places the row in bar chart series `series`, in category `category`, for `--plot`.
    fn bar(mut self, series: &'static str, category: &str) -> Row {
        self.series = Some(series);
        self.category = Some(category.to_string());
        self
    }
}

const MEBIBYTE: f64 = 1_048_576.0;

/// Runs a reproduction and prints it.
pub fn run(arguments: ReproArgs) -> BenchResult {
    if let Some(path) = &arguments.plot {
        crate::plot::check_plot_path(path)?;
    }
    let all = [
        Reproduction::RadFig4,
        Reproduction::RadFig4Ftl,
        Reproduction::RadTable2,
        Reproduction::MinflashTable1,
        Reproduction::MinflashFig5,
        Reproduction::MinflashFig6,
        Reproduction::MinflashFig7,
    ];
    let chosen: Vec<Reproduction> = if arguments.which == Reproduction::All {
        all.to_vec()
    } else {
        vec![arguments.which]
    };
    let mut rows = Vec::new();
    let mut charts = Vec::new();
    let progress = Progress::spinner("sim repro");
    for which in chosen {
        let name = which
            .to_possible_value()
            .map_or_else(String::new, |value| value.get_name().to_string());
        progress.set_message(format!("sim repro: reproducing {name}"));
        let figure_rows = match which {
            Reproduction::RadFig4 => rad_fig4(arguments.seed)?,
            Reproduction::RadFig4Ftl => rad_fig4_ftl::rad_fig4_ftl(arguments.seed)?,
            Reproduction::RadTable2 => rad_table2(arguments.seed)?,
            Reproduction::MinflashTable1 => minflash_table1(arguments.seed)?,
            Reproduction::MinflashFig5 => minflash_fig5(arguments.seed)?,
            Reproduction::MinflashFig6 => minflash_fig6(arguments.seed)?,
            Reproduction::MinflashFig7 => minflash_fig7(arguments.seed)?,
            Reproduction::All => Vec::new(),
        };
        charts.extend(charts::figure_charts(which, &figure_rows));
        rows.extend(figure_rows);
    }
    progress.finish();
    if let Some(path) = &arguments.plot {
        crate::plot::draw_panels(path, &charts, 2)?;
    }
    if arguments.json {
        say!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print_table(&rows);
    }
    Ok(())
}

fn print_table(rows: &[Row]) {
    let mut table = Table::new(" ")
        .left("figure", 16)
        .left("point", 44)
        .right("ours", 12)
        .right("paper", 12)
        .right("diff", 8)
        .column_after("  ", "unit", 0, Align::Left);
    for row in rows {
        let (paper, difference) = match row.paper {
            Some(paper) if paper != 0.0 => (
                format!("{paper:.2}"),
                format!("{:+.0}%", (row.ours - paper) / paper * 100.0),
            ),
            Some(paper) => (format!("{paper:.2}"), String::new()),
            None => ("-".to_string(), String::new()),
        };
        table.row(vec![
            row.figure.to_string(),
            row.point.to_string(),
            format!("{:.2}", row.ours),
            paper,
            difference,
            row.unit.to_string(),
        ]);
    }
    table.print();
}

/// The RAD N x 1 model: N packages, each on its own 1-byte path to the FPGA.
fn rad_config(rows: u32) -> BenchResult<FlashConfig> {
    let mut config = FlashConfig::preset("rad")?;
    config.geometry.channels = rows;
    config.geometry.ways = 1;
    config.reliability.grown_bad_probability_at_rated = 0.0;
    Ok(config)
}

/// Bandwidth (MiB/s) of the N x 1 model for 512-sector sequential requests, one at a time.
fn rad_bandwidth(rows: u32, kind: AccessKind, seed: u64) -> BenchResult<f64> {
    let mut array = timing_array(rad_config(rows)?, 1, 4096, seed)?;
    let job = SyntheticJob::sequential_one_at_a_time(kind, 512 * 512, 16, seed);
    let report = workload::run_job(&mut array, &job);
    Ok(report.bytes as f64 / (report.elapsed_ns as f64 / 1e9) / MEBIBYTE)
}

fn rad_fig4(seed: u64) -> BenchResult<Vec<Row>> {
    const PAPER_READ_1X1: f64 = 24.61;
    const PAPER_WRITE_1X1: f64 = 7.54;
    let mut rows = Vec::new();
    for n in [1, 2, 4, 8, 16, 32] {
        let read = rad_bandwidth(n, AccessKind::Read, seed)?;
        let write = rad_bandwidth(n, AccessKind::Write, seed)?;
        let (paper_read, paper_write) = (
            PAPER_READ_1X1 * f64::from(n),
            PAPER_WRITE_1X1 * f64::from(n),
        );
        let figure = if n == 1 {
            "RAD Fig.4(a)"
        } else {
            "RAD Fig.4(b)"
        };
        rows.push(
            Row::new(
                figure,
                format!("{n}x1 read, 512-sector requests"),
                read,
                Some(paper_read),
                "MiB/s",
            )
            .at("read", f64::from(n), n.to_string()),
        );
        rows.push(
            Row::new(
                figure,
                format!("{n}x1 write, 512-sector requests"),
                write,
                Some(paper_write),
                "MiB/s",
            )
            .at("write", f64::from(n), n.to_string()),
        );
    }
    Ok(rows)
}

/// The smallest N whose N x 1 write bandwidth reaches `required` MiB/s.
fn rows_needed(required: f64, write_bandwidth: &dyn Fn(u32) -> f64) -> u32 {
    (1..=256)
        .find(|&n| write_bandwidth(n) >= required)
        .unwrap_or(256)
}

fn rad_table2(seed: u64) -> BenchResult<Vec<Row>> {
    let write_1x1 = rad_bandwidth(1, AccessKind::Write, seed)?;
    let read_1x1 = rad_bandwidth(1, AccessKind::Read, seed)?;
    let mut rows = Vec::new();
    // (kernel, processing rate GB/s, I/O width bytes, paper rows, paper read GB/s, paper write GB/s)
    for (kernel, rate, width, paper_rows, paper_read, paper_write) in [
        ("DES", 1.14, 16u32, 10u32, 3.72, 1.18),
        ("Sobel", 1.04, 8u32, 18u32, 3.33, 1.04),
    ] {
        let columns = width; // W_HW / W_f with a 1-byte flash bus
        let required = rate * 1024.0 / f64::from(columns);
        let ours_rows = rows_needed(required, &|n| {
            rad_bandwidth(n, AccessKind::Write, seed).unwrap_or(0.0)
        });
        let paper_formula_rows = rows_needed(required, &|n| 7.54 * f64::from(n));
        let read = rad_bandwidth(ours_rows, AccessKind::Read, seed)? * f64::from(columns) / 1024.0;
        let write =
            rad_bandwidth(ours_rows, AccessKind::Write, seed)? * f64::from(columns) / 1024.0;
        rows.push(
            Row::new(
                "RAD Table II",
                format!("{kernel}: required N x 1 rate"),
                required,
                Some(required),
                "MiB/s",
            )
            .bar("our simulation", &format!("{kernel} required")),
        );
        rows.push(
            Row::new(
                "RAD Table II",
                format!("{kernel}: rows N (columns {columns}), our sim"),
                f64::from(ours_rows),
                Some(f64::from(paper_rows)),
                "rows",
            )
            .bar("from our simulated 1x1 write", kernel),
        );
        rows.push(
            Row::new(
                "RAD Table II",
                format!("{kernel}: rows N from paper's 1x1 write 7.54"),
                f64::from(paper_formula_rows),
                Some(f64::from(paper_rows)),
                "rows",
            )
            .bar("from the paper's 1x1 write (7.54 MiB/s)", kernel),
        );
        rows.push(
            Row::new(
                "RAD Table II",
                format!("{kernel}: matrix read bandwidth"),
                read,
                Some(paper_read),
                "GiB/s",
            )
            .bar("read", kernel),
        );
        rows.push(
            Row::new(
                "RAD Table II",
                format!("{kernel}: matrix write bandwidth"),
                write,
                Some(paper_write),
                "GiB/s",
            )
            .bar("write", kernel),
        );
    }
    rows.push(
        Row::new(
            "RAD Table II",
            "1x1 write used for sizing".to_string(),
            write_1x1,
            Some(7.54),
            "MiB/s",
        )
        .bar("our simulation", "1x1 write"),
    );
    rows.push(
        Row::new(
            "RAD Table II",
            "1x1 read".to_string(),
            read_1x1,
            Some(24.61),
            "MiB/s",
        )
        .bar("our simulation", "1x1 read"),
    );
    Ok(rows)
}

/// The minFlash figures' array: the `minflash-rack` preset (the board with its measured
/// bus overheads and its links) with `devices` boards in a line.
fn minflash_config(devices: u32) -> BenchResult<FlashConfig> {
    let mut config = FlashConfig::preset("minflash-rack")?;
    config.geometry.devices = devices;
    config.timing.program_slow_fraction = 0.0;
    Ok(config)
}

/// Latency (us) of one request on an idle array from `host` to `device`.
fn single_latency_us(
    command: FlashCommand,
    devices: u32,
    host: u32,
    seed: u64,
) -> BenchResult<f64> {
    let mut array = timing_array(minflash_config(devices)?, host + 1, 8, seed)?;
    array.submit(FlashRequest {
        tag: 1,
        host,
        command,
    })?;
    let mut acks = Vec::new();
    array.run_until_idle(&mut acks);
    let ack = acks
        .pop()
        .ok_or_else(|| internal("the array answered no request"))?;
    Ok((ack.completed_ns - ack.submitted_ns) as f64 / 1000.0)
}

fn page_address(device: u32) -> FlashAddress {
    FlashAddress {
        device,
        bus: 0,
        chip: 0,
        block: 1,
        page: 0,
    }
}

fn minflash_table1(seed: u64) -> BenchResult<Vec<Row>> {
    let read = single_latency_us(
        FlashCommand::ReadPage {
            address: page_address(0),
        },
        1,
        0,
        seed,
    )?;
    let write = single_latency_us(
        FlashCommand::WritePage {
            address: page_address(0),
            data: Vec::new(),
            spare: Vec::new(),
        },
        1,
        0,
        seed,
    )?;
    let timing = minflash_config(1)?.timing;
    let rows = minflash_table1_rows(read, write, &timing);
    Ok(rows.into_iter().map(table1_bar).collect())
}

/// Places a Table I row in the bar chart: series "read" or "write", category its step.
fn table1_bar(row: Row) -> Row {
    let point = row.point.clone();
    let (operation, step) = point.split_once(": ").unwrap_or(("read", point.as_str()));
    let series = if operation == "write" {
        "write"
    } else {
        "read"
    };
    let step = step.split(" (").next().unwrap_or(step);
    row.bar(series, step)
}

fn minflash_table1_rows(read: f64, write: f64, timing: &flashpipe_flash::FlashTiming) -> Vec<Row> {
    let link_us = 8192.0 / timing.host_link_bytes_per_second as f64 * 1e6;
    let us = |ns: u64| ns as f64 / 1000.0;
    vec![
        Row::new(
            "minFlash Table I",
            "read: PHY commands".into(),
            us(timing.command_address_ns),
            Some(1.0),
            "us",
        ),
        Row::new(
            "minFlash Table I",
            "read: NAND".into(),
            us(timing.array_read_ns),
            Some(69.0),
            "us",
        ),
        Row::new(
            "minFlash Table I",
            "read: ECC".into(),
            us(timing.ecc_decode_ns),
            Some(4.0),
            "us",
        ),
        Row::new(
            "minFlash Table I",
            "read: data transfer".into(),
            us(timing.page_transfer_ns),
            Some(43.0),
            "us",
        ),
        Row::new(
            "minFlash Table I",
            "read: PCIe/software".into(),
            us(timing.host_software_read_ns) + link_us,
            Some(11.0),
            "us",
        ),
        Row::new(
            "minFlash Table I",
            "read: total (simulated)".into(),
            read,
            Some(128.0),
            "us",
        ),
        Row::new(
            "minFlash Table I",
            "write: NAND (typical)".into(),
            us(timing.program_ns_by_page_type[0]),
            Some(418.0),
            "us",
        ),
        Row::new(
            "minFlash Table I",
            "write: PCIe/software".into(),
            us(timing.host_software_write_ns) + link_us,
            Some(14.0),
            "us",
        ),
        Row::new(
            "minFlash Table I",
            "write: total (simulated)".into(),
            write,
            Some(476.0),
            "us",
        ),
    ]
}

/// Total read bandwidth (GB/s) of a closed-loop job, and each host's own: its bytes over
/// the time its last request took to complete (every host starts backlogged).
fn minflash_bandwidth(
    devices: u32,
    hosts: u32,
    pattern: AccessPattern,
    request_bytes: u64,
    queue_depth: u32,
    seed: u64,
) -> BenchResult<(f64, Vec<f64>)> {
    let mut array = timing_array(minflash_config(devices)?, hosts, 128, seed)?;
    array.precondition_full()?;
    let start_ns = array.now_ns();
    let requests_per_host = (64 * 1024 * 1024 / request_bytes).clamp(8, 2048);
    let job = SyntheticJob {
        pattern,
        kind: AccessKind::Read,
        request_bytes,
        queue_depth,
        hosts,
        requests_per_host,
        devices,
        seed,
    };
    let report = workload::run_job(&mut array, &job);
    let total = report.bytes as f64 / (report.elapsed_ns as f64 / 1e9) / 1e9;
    let host_bytes = report.bytes as f64 / f64::from(hosts);
    let per_host = (0..hosts)
        .map(|host| {
            let elapsed_ns = array.last_ack_ns(host).saturating_sub(start_ns).max(1);
            host_bytes / elapsed_ns as f64
        })
        .collect();
    Ok((total, per_host))
}

fn minflash_fig5(seed: u64) -> BenchResult<Vec<Row>> {
    let mut rows = Vec::new();
    for (name, pattern) in [
        ("sequential", AccessPattern::Sequential),
        ("random", AccessPattern::Random),
    ] {
        let mut size = 8192u64;
        while size <= 16 * 1024 * 1024 {
            let (bandwidth, _) = minflash_bandwidth(1, 1, pattern, size, 1, seed)?;
            let paper = (size == 16 * 1024 * 1024 && name == "sequential").then_some(1.2);
            rows.push(
                Row::new(
                    "minFlash Fig.5",
                    format!("{name} read, {} KiB requests", size / 1024),
                    bandwidth,
                    paper,
                    "GB/s",
                )
                .at(name, ((size / 8192) as f64).log2(), size_text(size)),
            );
            size *= 2;
        }
    }
    Ok(rows)
}

fn minflash_fig6(seed: u64) -> BenchResult<Vec<Row>> {
    let mut rows = Vec::new();
    let request = 16 * 1024 * 1024;
    for devices in 1..=4u32 {
        let (bandwidth, _) =
            minflash_bandwidth(devices, 1, AccessPattern::Random, request, 2, seed)?;
        let paper = match devices {
            1 => Some(1.2),
            4 => Some(1.32),
            _ => None,
        };
        rows.push(
            Row::new(
                "minFlash Fig.6(a)",
                format!("1 host, {devices} devices"),
                bandwidth,
                paper,
                "GB/s",
            )
            .at("1 host, N devices", f64::from(devices), devices.to_string()),
        );
    }
    for hosts in 1..=4u32 {
        let (bandwidth, per_host) =
            minflash_bandwidth(1, hosts, AccessPattern::Random, request, 2, seed)?;
        rows.push(
            Row::new(
                "minFlash Fig.6(b)",
                format!("{hosts} hosts, 1 device, total"),
                bandwidth,
                Some(1.2),
                "GB/s",
            )
            .at("N hosts, 1 device", f64::from(hosts), hosts.to_string()),
        );
        if hosts > 1 {
            for (host, share) in per_host.iter().enumerate() {
                rows.push(Row::new(
                    "minFlash Fig.6(b)",
                    format!("{hosts} hosts, 1 device, host {host}"),
                    *share,
                    Some(1.2 / f64::from(hosts)),
                    "GB/s",
                ));
            }
            rows.push(Row::new(
                "minFlash Fig.6(b)",
                format!("{hosts} hosts, 1 device, Jain's index"),
                jain_index(&per_host),
                Some(1.0),
                "index",
            ));
        }
    }
    for n in 1..=4u32 {
        let (bandwidth, _) = minflash_bandwidth(n, n, AccessPattern::Random, request, 2, seed)?;
        let paper = match n {
            1 => Some(1.2),
            2 => Some(0.92 * 2.0 * 1.2),
            4 => Some(3.8),
            _ => None,
        };
        rows.push(
            Row::new(
                "minFlash Fig.6(c)",
                format!("{n} hosts, {n} devices, total"),
                bandwidth,
                paper,
                "GB/s",
            )
            .at("N hosts, N devices", f64::from(n), n.to_string()),
        );
    }
    Ok(rows)
}

fn minflash_fig7(seed: u64) -> BenchResult<Vec<Row>> {
    let mut rows = Vec::new();
    for hops in 0..=3u32 {
        let latency = single_latency_us(
            FlashCommand::ReadPage {
                address: page_address(hops),
            },
            4,
            0,
            seed,
        )?;
        rows.push(
            Row::new(
                "minFlash Fig.7",
                format!("8 KiB read over {hops} hops"),
                latency,
                Some(128.0 + f64::from(hops)),
                "us",
            )
            .at("8 KiB read", f64::from(hops), hops.to_string()),
        );
    }
    Ok(rows)
}

/// `size_bytes` as the plot's tick names it: KiB below a MiB, MiB above.
fn size_text(size_bytes: u64) -> String {
    if size_bytes >= 1 << 20 {
        format!("{} MiB", size_bytes >> 20)
    } else {
        format!("{} KiB", size_bytes >> 10)
    }
}

/// The virtual-time model's minFlash Fig. 6 and Fig. 7 points for `bench cluster`: each
/// row's point name (as `sim repro` prints it), the model's figure and the paper's.
pub(crate) fn minflash_model_points(seed: u64) -> BenchResult<Vec<(String, f64, Option<f64>)>> {
    let mut rows = minflash_fig6(seed)?;
    rows.extend(minflash_fig7(seed)?);
    Ok(rows
        .into_iter()
        .map(|row| (row.point, row.ours, row.paper))
        .collect())
}
