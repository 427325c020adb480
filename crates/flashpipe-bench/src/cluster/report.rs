//! `bench cluster`'s rows and how they print: one table per part (real, model and paper
//! side by side, with the CPU note), or one JSON object.

use serde::Serialize;
use serde_json::json;

use super::cpu_busy::CPU_BOUND_BUSY_FRACTION;
use super::{BenchClusterArgs, ClusterPart, NODES, REFLEX_REMOTE_US};
use flashpipe_bench_harness::column_table::{fixed, fixed_or, ColumnTable};

/// One measured point.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterRow {
    /// The part.
    pub part: &'static str,
    /// The point, named as `sim repro` names the model's.
    pub point: String,
    /// What this machine did (p50 for latency).
    pub real: f64,
    /// The unit of `real`, `model` and `paper`.
    pub unit: &'static str,
    /// p99 latency (fig7).
    pub p99: Option<f64>,
    /// p50 increment over the row with one hop fewer (fig7).
    pub increment: Option<f64>,
    /// The local read plus ReFlex's published remote cost (fig7, 1 hop and more).
    pub anchor: Option<f64>,
    /// Share of N times the one-host, one-device rate (fig6c).
    pub of_ideal_percent: Option<f64>,
    /// The virtual-time model's figure, in `unit`.
    pub model: Option<f64>,
    /// The paper's figure, in `unit`.
    pub paper: Option<f64>,
    /// Reads the point counts.
    pub samples: u64,
    /// Host threads of the point.
    pub hosts: u32,
    /// Set when the machine's CPUs bound the figure.
    pub note: Option<String>,
}

impl ClusterRow {
    /// Decimals its figures are printed with: Jain's index needs more than a rate, whose
    /// target (0.99) two decimals would not show.
    fn decimals(&self) -> usize {
        if self.unit == "index" {
            4
        } else {
            2
        }
    }

    /// A row of `part` at `point` with `hosts` host threads.
    pub fn new(
        part: ClusterPart,
        point: String,
        real: f64,
        unit: &'static str,
        hosts: u32,
    ) -> ClusterRow {
        ClusterRow {
            part: part.name(),
            point,
            real,
            unit,
            p99: None,
            increment: None,
            anchor: None,
            of_ideal_percent: None,
            model: None,
            paper: None,
            samples: 0,
            hosts,
            note: None,
        }
    }

    /// Takes the model's and the paper's figures from `model` (`sim repro`'s points; their
    /// bandwidths are in GB/s, shown here in MB/s).
    pub fn attach_model(&mut self, model: &[(String, f64, Option<f64>)]) {
        let scale = if self.unit == "MB/s" { 1000.0 } else { 1.0 };
        if let Some((_, ours, paper)) = model.iter().find(|(point, _, _)| *point == self.point) {
            self.model = Some(ours * scale);
            self.paper = paper.map(|paper| paper * scale);
        }
    }

    /// Notes that the figure is bound by the CPUs: when the machine's CPUs were busier
    /// than [`CPU_BOUND_BUSY_FRACTION`] over the row's part (`busy`), or, where that
    /// could not be read, when there are fewer CPUs than busy-polling nodes and hosts.
    pub fn cpu_note(&mut self, cpus: usize, busy: Option<f64>) {
        let wanted = NODES as usize + self.hosts as usize;
        let hosts = format!(
            "{NODES} node processes and {} host thread{}",
            self.hosts,
            if self.hosts == 1 { "" } else { "s" }
        );
        self.note = match busy {
            Some(busy) if busy >= CPU_BOUND_BUSY_FRACTION => Some(format!(
                "CPU-bound: the machine's {cpus} CPUs {:.0}% busy (all processes) for {hosts}",
                busy * 100.0
            )),
            Some(_) => None,
            None if cpus < wanted => Some(format!("CPU-bound: {cpus} CPUs for {hosts}")),
            None => None,
        };
    }
}

/// Prints `rows` as tables, or as JSON under `--json`.
pub fn print_report(rows: &[ClusterRow], cpus: usize, arguments: &BenchClusterArgs) {
    if arguments.json {
        let parts: Vec<&str> = arguments.parts.iter().map(|part| part.name()).collect();
        let object = json!({
            "command": "bench cluster",
            "cpus": cpus,
            "nodes": NODES,
            "preset": arguments.preset,
            "seconds": arguments.seconds,
            "depth": arguments.depth,
            "parts": parts,
            "link": arguments.link.name(),
            "reflex_remote_us": REFLEX_REMOTE_US,
            "rows": rows,
        });
        println!("{object}");
        return;
    }
    println!(
        "bench cluster: {NODES} node processes in a line on loopback, links and hosts over {} ({} preset, paced to wall time, key on), hosts as threads of this process; {cpus} CPUs; {} s per row",
        arguments.link.name(),
        arguments.preset,
        arguments.seconds
    );
    if !arguments.beside_the_paper() {
        println!(
            "(the model's and the paper's columns are for the {} device only, so they are left out)",
            super::PRESET
        );
    }
    for part in ClusterPart::IN_ORDER {
        let part_rows: Vec<&ClusterRow> =
            rows.iter().filter(|row| row.part == part.name()).collect();
        if part_rows.is_empty() {
            continue;
        }
        println!();
        println!("{}", part_caption(part));
        let table = ColumnTable::new("  ", part_rows.iter().copied())
            .left("point", 26, |row: &ClusterRow| row.point.clone())
            .right("real", 9, |row| fixed(row.real, row.decimals()));
        let table = match part {
            ClusterPart::Fig7 => table
                .right("p99", 9, |row| fixed_or(row.p99, 2, "-"))
                .right("per hop", 9, |row| fixed_or(row.increment, 2, "-"))
                .right("reflex", 9, |row| fixed_or(row.anchor, 2, "-")),
            ClusterPart::Fig6c => {
                table.right("% ideal", 7, |row| fixed_or(row.of_ideal_percent, 1, "-"))
            }
            ClusterPart::Nbd => table.right("p99", 9, |row| fixed_or(row.p99, 2, "-")),
            ClusterPart::Fig6a | ClusterPart::Fig6b => table,
        };
        table
            .right("model", 9, |row| fixed_or(row.model, row.decimals(), "-"))
            .right("paper", 9, |row| fixed_or(row.paper, row.decimals(), "-"))
            .left("unit", 5, |row| row.unit.to_string())
            .right("reads", 7, |row| row.samples.to_string())
            .left("note", 4, |row| row.note.clone().unwrap_or_default())
            .print();
    }
}

fn part_caption(part: ClusterPart) -> &'static str {
    match part {
        ClusterPart::Fig7 => {
            "Fig. 7: 8 KiB page read latency at queue depth 1, host 0 to device 0..3 (real = p50)"
        }
        ClusterPart::Nbd => "Beside Fig. 7: the same read at queue depth 1 through one NBD hop (emulated minflash under the host FTL, flashpipe nbd serve on loopback; real = p50)",
        ClusterPart::Fig6a => "Fig. 6a: host 0 reading random pages of devices 0..N",
        ClusterPart::Fig6b => "Fig. 6b: hosts 0..N all reading random pages of device 0",
        ClusterPart::Fig6c => "Fig. 6c: hosts 0..N reading random pages of devices 0..N",
    }
}
