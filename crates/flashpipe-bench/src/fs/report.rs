//! The report of `flashpipe bench fs`: the machine, the three parts, the thesis's
//! figures (HWFS ch. 4, quoted as printed there) and every issue #13 target evaluated
//! from the measurements with the figures it was judged on, printed as tables or
//! serialized as JSON.

use std::path::Path;
use std::process::Command;

use serde::Serialize;

use super::efficiency::EfficiencyResult;
use super::large_file::LargeFileResult;
use super::small_files::SmallFilesResult;
use super::Settings;
use crate::verdict::Verdict;

mod targets;
use targets::{
    device_targets, efficiency_targets, floor_targets, large_file_targets, per_file_targets,
    small_file_targets,
};

mod tables;
use tables::{format_ratio, print_efficiency, print_large_file, print_small_files};

/// Files at least this large must reach the higher efficiency target.
const LARGE_EFFICIENCY_MIN_FILE_BYTES: u64 = 10 << 20;
/// The efficiency required of files of at least [`LARGE_EFFICIENCY_MIN_FILE_BYTES`].
const LARGE_EFFICIENCY_REQUIRED_RATIO: f64 = 0.95;
/// The file size of the lower efficiency target.
const MEDIUM_EFFICIENCY_FILE_BYTES: u64 = 1 << 20;
/// The most a RAM disk's file system time may be over one memcpy plus one CRC32C pass of
/// the same bytes, files of [`MEDIUM_EFFICIENCY_FILE_BYTES`] and more.
const FLOOR_REQUIRED_RATIO: f64 = 1.25;
/// The thesis's efficiency where the raw transfer is a device's (file device, paced
/// flash), files of 100 KiB and more.
const DEVICE_EFFICIENCY_REQUIRED_RATIO: f64 = 0.95;
/// The efficiency required at [`MEDIUM_EFFICIENCY_FILE_BYTES`].
const MEDIUM_EFFICIENCY_REQUIRED_RATIO: f64 = 0.80;
/// File sizes whose time per file must be at most tmpfs's (issue #13).
const PER_FILE_TARGET_SIZES_BYTES: [u64; 4] = [1 << 10, 10 << 10, 100 << 10, 1 << 20];
/// flashpipe's time per file over tmpfs's: the target.
const PER_FILE_REQUIRED_TIME_RATIO: f64 = 1.0;
/// flashpipe's time per file over tmpfs's: the goal.
const PER_FILE_GOAL_TIME_RATIO: f64 = 0.5;
/// Large file over fio raw, sequential write throughput.
const SEQUENTIAL_WRITE_REQUIRED_RATIO: f64 = 0.95;
/// Large file over fio raw, sequential read throughput.
const SEQUENTIAL_READ_REQUIRED_RATIO: f64 = 0.97;
/// Large file over fio raw, 4 KiB random reads at QD32, IOPS.
const RANDOM_QD32_REQUIRED_RATIO: f64 = 0.95;
/// Large file, 4 KiB random reads at QD1: flashpipe's mean latency over fio's, at most.
const RANDOM_QD1_LATENCY_REQUIRED_RATIO: f64 = 1.10;
/// Small files over ordinary files, files per second, each phase.
const SMALL_FILES_REQUIRED_RATIO: f64 = 1.0;

/// The machine the run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// CPU model (`model name` of /proc/cpuinfo).
    pub cpu_model: String,
    /// CPUs available to this process.
    pub cpu_count: usize,
    /// Kernel release.
    pub kernel: String,
    /// Type of the file system holding the benchmark's folder (`df -T`).
    pub folder_file_system: String,
    /// The benchmark's folder.
    pub folder: String,
    /// 1-minute load average when the run started.
    pub load_average_1_min: Option<f64>,
}

impl Machine {
    /// Describes this machine and the folder's file system.
    pub fn describe(folder: &Path) -> Machine {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|line| line.starts_with("model name"))
                    .and_then(|line| line.split(':').nth(1))
                    .map(|model| model.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".to_string());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|text| text.trim().to_string())
            .unwrap_or_else(|_| "unknown".to_string());
        let load_average_1_min = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|text| text.split_whitespace().next()?.parse().ok());
        Machine {
            cpu_model,
            cpu_count: std::thread::available_parallelism().map_or(1, usize::from),
            kernel,
            folder_file_system: folder_file_system(folder),
            folder: folder.display().to_string(),
            load_average_1_min,
        }
    }
}

pub(crate) fn folder_file_system(folder: &Path) -> String {
    let output = Command::new("df")
        .args(["--output=fstype"])
        .arg(folder)
        .output();
    output
        .ok()
        .filter(|output| output.status.success())
        .and_then(|output| {
            String::from_utf8_lossy(&output.stdout)
                .lines()
                .nth(1)
                .map(|line| line.trim().to_string())
        })
        .unwrap_or_else(|| "unknown (df -T failed)".to_string())
}

/// Which side of the required ratio passes (the harness's one bound; JSON `at_least`).
pub use crate::verdict::Bound;

/// A measured ratio with the figures it comes from, or why it is missing.
type Measurement = Result<(f64, String), String>;

/// One target of issue #13, evaluated.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// What is compared.
    pub name: String,
    /// The measured ratio, when both sides were measured.
    pub measured_ratio: Option<f64>,
    /// Whether the measured ratio must be at least or at most the required one.
    pub bound: Bound,
    /// The ratio required.
    pub required_ratio: f64,
    /// The ratio aimed for beyond the requirement, if any.
    pub goal_ratio: Option<f64>,
    /// Met, not met, or not evaluated (None).
    pub met: Option<bool>,
    /// The goal reached, when there is one and the ratio was measured.
    pub goal_met: Option<bool>,
    /// The figures the ratio comes from, or why it was not measured.
    pub figures: String,
}

impl Target {
    fn evaluate(
        name: String,
        bound: Bound,
        required_ratio: f64,
        goal_ratio: Option<f64>,
        measurement: Measurement,
    ) -> Target {
        let (measured_ratio, figures) = match measurement {
            Ok((ratio, figures)) => (Some(ratio), figures),
            Err(reason) => (None, reason),
        };
        Target {
            name,
            measured_ratio,
            bound,
            required_ratio,
            goal_ratio,
            met: measured_ratio.map(|ratio| bound.passes(ratio, required_ratio)),
            goal_met: goal_ratio
                .and_then(|goal| measured_ratio.map(|ratio| bound.passes(ratio, goal))),
            figures,
        }
    }

    fn verdict(&self) -> &'static str {
        match (self.met, self.goal_met) {
            (Some(true), Some(true)) => "met, goal met",
            (met, _) => Verdict::of_optional(met).label(),
        }
    }

    fn requirement(&self) -> String {
        let symbol = self.bound.symbol();
        match self.goal_ratio {
            Some(goal) => format!(
                "need {symbol} {:.2}, goal {symbol} {goal:.2}",
                self.required_ratio
            ),
            None => format!("need {symbol} {:.2}", self.required_ratio),
        }
    }
}

/// The thesis's efficiency tables (HWFS Tables 4.1-4.3) and what its text states about
/// Fig. 4.3-4.5, whose values appear only in plots.
#[derive(Debug, Clone, Serialize)]
pub struct ThesisEfficiency {
    /// HWFS block sizes of the tables' columns, bytes.
    pub block_sizes_bytes: [u32; 3],
    /// File-size labels of the tables' rows, as printed.
    pub file_sizes: [&'static str; 6],
    /// Table 4.1 (one RAM disk): read times in microseconds, per row and column.
    pub table_4_1_read_us: [[f64; 3]; 6],
    /// Table 4.1: write times in microseconds.
    pub table_4_1_write_us: [[f64; 3]; 6],
    /// Table 4.3 (two RAM disks): read times in microseconds.
    pub table_4_3_read_us: [[f64; 3]; 6],
    /// Table 4.3: write times in microseconds.
    pub table_4_3_write_us: [[f64; 3]; 6],
    /// Table 4.2 (1 KB file, 64 B blocks): operation, total, HWFS, RAMs, microseconds.
    pub table_4_2_us: [(&'static str, f64, f64, f64); 3],
    /// What the text says about the efficiency figures.
    pub statements: [&'static str; 4],
}

/// Row file sizes of Tables 4.1 and 4.3 in bytes (the thesis writes KB/MB; read here as
/// binary units to line up with our sizes).
const THESIS_FILE_SIZES_BYTES: [u64; 6] =
    [1 << 10, 10 << 10, 100 << 10, 1 << 20, 10 << 20, 100 << 20];

impl ThesisEfficiency {
    /// The thesis's figures, as printed (ms converted to µs).
    pub fn new() -> ThesisEfficiency {
        ThesisEfficiency {
            block_sizes_bytes: [64, 512, 1024],
            file_sizes: ["1 KB", "10 KB", "100 KB", "1 MB", "10 MB", "100 MB"],
            table_4_1_read_us: [
                [9.28, 12.54, 19.62],
                [73.59, 45.8, 51.28],
                [709.84, 380.97, 366.32],
                [7180.0, 3760.0, 3550.0],
                [71800.0, 37440.0, 35350.0],
                [717930.0, 374330.0, 353320.0],
            ],
            table_4_1_write_us: [
                [9.4, 28.3, 51.77],
                [52.3, 59.55, 83.02],
                [483.0, 391.56, 396.65],
                [4900.0, 3570.0, 3540.0],
                [48970.0, 35480.0, 34820.0],
                [489650.0, 354530.0, 347690.0],
            ],
            table_4_3_read_us: [
                [8.4, 10.69, 17.05],
                [66.17, 34.47, 40.48],
                [636.63, 274.35, 274.45],
                [6400.0, 2750.0, 2690.0],
                [64300.0, 27470.0, 26700.0],
                [643280.0, 274680.0, 267840.0],
            ],
            table_4_3_write_us: [
                [13.08, 21.87, 36.86],
                [78.33, 50.85, 62.87],
                [734.69, 344.09, 321.7],
                [7400.0, 3370.0, 3020.0],
                [74700.0, 33540.0, 29860.0],
                [746800.0, 335300.0, 298380.0],
            ],
            table_4_2_us: [
                ("write", 9.29, 5.54, 3.75),
                ("read", 9.16, 4.32, 4.84),
                ("delete", 5.27, 2.66, 2.61),
            ],
            statements: [
                "Fig. 4.3 (simulation, ideal disk, 64/512/1024 B blocks): for small files (1 KB to 10 KB) the efficiency is below 80%; it increases to 95% for 100 KB files and saturates for larger files.",
                "Fig. 4.4 (one RAM disk): the HWFS stalls until block requests to and from memory are satisfied, so the efficiency dips compared with the simulation (no values given in the text).",
                "Fig. 4.5 (two RAM disks): split transactions improve on the single-disk efficiency; efficiency increases with the block size for the same file size (no values given in the text).",
                "Efficiency = raw block transfer time / filesystem block transfer time, raw block transfer time = file size x clock cycle time / bytes per clock cycle (HWFS 4.2.1.1).",
            ],
        }
    }

    /// The thesis's read and write times (µs) with 1024 B blocks for `disk_count` RAM
    /// disks and a file of `file_size_bytes`, when the tables have that row.
    pub fn time_us_1024_byte_blocks(
        disk_count: u32,
        file_size_bytes: u64,
    ) -> (Option<f64>, Option<f64>) {
        let thesis = ThesisEfficiency::new();
        let Some(row) = THESIS_FILE_SIZES_BYTES
            .iter()
            .position(|&size| size == file_size_bytes)
        else {
            return (None, None);
        };
        let (read, write) = match disk_count {
            1 => (thesis.table_4_1_read_us, thesis.table_4_1_write_us),
            2 => (thesis.table_4_3_read_us, thesis.table_4_3_write_us),
            _ => return (None, None),
        };
        (Some(read[row][2]), Some(write[row][2]))
    }
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The machine.
    pub machine: Machine,
    /// A tiny run (figures not meaningful).
    pub quick: bool,
    /// fio's version, when it ran.
    pub fio_version: Option<String>,
    /// Why fio did not run.
    pub fio_unavailable_reason: Option<String>,
    /// Part 1.
    pub large_file: Option<LargeFileResult>,
    /// Part 2.
    pub efficiency: Option<EfficiencyResult>,
    /// Part 3.
    pub small_files: Option<SmallFilesResult>,
    /// Every target, evaluated.
    pub targets: Vec<Target>,
}

impl Report {
    /// Assembles the report and evaluates the targets.
    pub fn new(
        settings: &Settings,
        machine: Machine,
        fio_version: Option<String>,
        fio_unavailable_reason: Option<String>,
        large_file: Option<LargeFileResult>,
        efficiency: Option<EfficiencyResult>,
        small_files: Option<SmallFilesResult>,
    ) -> Report {
        let fio_missing = fio_unavailable_reason
            .as_deref()
            .map_or("fio not run".to_string(), |reason| {
                format!("fio not run: {reason}")
            });
        let mut targets = large_file_targets(large_file.as_ref(), &fio_missing);
        targets.extend(per_file_targets(efficiency.as_ref()));
        targets.extend(efficiency_targets(efficiency.as_ref()));
        targets.extend(floor_targets(efficiency.as_ref()));
        targets.extend(device_targets(efficiency.as_ref()));
        targets.extend(small_file_targets(
            small_files.as_ref(),
            &machine.folder_file_system,
        ));
        Report {
            machine,
            quick: settings.quick,
            fio_version,
            fio_unavailable_reason,
            large_file,
            efficiency,
            small_files,
            targets,
        }
    }

    /// Prints the human tables.
    pub fn print_tables(&self) {
        self.print_header();
        if let Some(large_file) = &self.large_file {
            print_large_file(large_file);
        }
        if let Some(efficiency) = &self.efficiency {
            print_efficiency(efficiency);
        }
        if let Some(small_files) = &self.small_files {
            print_small_files(small_files);
        }
        println!("\nTargets:");
        for target in &self.targets {
            println!(
                "  {:<54} {:>8} ({}): {}  [{}]",
                target.name,
                format_ratio(target.measured_ratio),
                target.requirement(),
                target.verdict(),
                target.figures
            );
        }
    }

    fn print_header(&self) {
        let machine = &self.machine;
        println!(
            "flashpipe bench fs{}",
            if self.quick {
                " --quick (tiny run: figures not meaningful)"
            } else {
                ""
            }
        );
        println!(
            "machine: {} x{}, kernel {}, folder {} on {}, load {}",
            machine.cpu_model,
            machine.cpu_count,
            machine.kernel,
            machine.folder,
            machine.folder_file_system,
            machine
                .load_average_1_min
                .map_or("?".to_string(), |load| format!("{load:.2}"))
        );
        match (&self.fio_version, &self.fio_unavailable_reason) {
            (Some(version), _) => println!("fio: {version}"),
            (None, Some(reason)) => println!("fio: not run: {reason}"),
            (None, None) => println!("fio: not run"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(ratio: f64) -> Measurement {
        Ok((ratio, "figures".to_string()))
    }

    #[test]
    fn bounds_judge_both_ways_and_goals_apart() {
        let time = |ratio| {
            Target::evaluate(
                "time".to_string(),
                Bound::AtMost,
                1.0,
                Some(0.5),
                measured(ratio),
            )
        };
        assert_eq!(
            (time(0.4).met, time(0.4).goal_met),
            (Some(true), Some(true))
        );
        assert_eq!(
            (time(0.8).met, time(0.8).goal_met),
            (Some(true), Some(false))
        );
        assert_eq!(time(1.2).met, Some(false));
        assert_eq!(time(0.8).verdict(), "met");
        assert_eq!(time(0.4).verdict(), "met, goal met");
        let rate =
            |ratio| Target::evaluate("rate".into(), Bound::AtLeast, 0.95, None, measured(ratio));
        assert_eq!(rate(0.95).met, Some(true));
        assert_eq!(rate(0.9).verdict(), "NOT MET");
        assert_eq!(rate(0.9).goal_met, None);
        assert_eq!(rate(0.9).requirement(), "need >= 0.95");
        assert_eq!(time(0.9).requirement(), "need <= 1.00, goal <= 0.50");
    }

    #[test]
    fn a_target_not_measured_says_why_and_is_not_judged() {
        let target = Target::evaluate(
            "x".into(),
            Bound::AtLeast,
            1.0,
            Some(2.0),
            Err("part not run".into()),
        );
        assert_eq!((target.met, target.goal_met), (None, None));
        assert_eq!(target.figures, "part not run");
        assert_eq!(target.verdict(), "n/a");
    }

    #[test]
    fn every_target_is_listed_when_no_part_ran() {
        let mut targets = large_file_targets(None, "fio not run");
        targets.extend(per_file_targets(None));
        targets.extend(efficiency_targets(None));
        targets.extend(floor_targets(None));
        targets.extend(device_targets(None));
        targets.extend(small_file_targets(None, "ext4"));
        assert_eq!(targets.len(), 26);
        assert!(targets
            .iter()
            .all(|target| target.met.is_none() && target.figures.contains("not run")));
    }
}
