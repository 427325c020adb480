//! The report of `flashpipe bench fs`: the machine, the three parts, the thesis's
//! figures (HWFS ch. 4, quoted as printed there) and every issue #3 target evaluated
//! from the measurements, printed as tables or serialized as JSON.

use std::path::Path;
use std::process::Command;

use flashpipe_store::units::HumanBytes;
use serde::Serialize;

use super::efficiency::{EfficiencyPoint, EfficiencyResult};
use super::large_file::{LargeFileResult, LargeFileRow};
use super::reference::Measured;
use super::small_files::SmallFilesResult;
use super::Settings;
use crate::table::{Align, Table};

/// Files at least this large must reach the efficiency target.
const EFFICIENCY_TARGET_MIN_FILE_BYTES: u64 = 100 << 10;

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

fn folder_file_system(folder: &Path) -> String {
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

/// One target of issue #3, evaluated.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// What is compared.
    pub name: String,
    /// The measured ratio, when both sides were measured.
    pub measured_ratio: Option<f64>,
    /// The ratio required ("at least").
    pub required_ratio: f64,
    /// Met, not met, or not evaluated (None).
    pub met: Option<bool>,
}

impl Target {
    fn new(name: &str, measured_ratio: Option<f64>, required_ratio: f64) -> Target {
        Target {
            name: name.to_string(),
            measured_ratio,
            required_ratio,
            met: measured_ratio.map(|ratio| ratio >= required_ratio),
        }
    }

    fn verdict(&self) -> &'static str {
        match self.met {
            Some(true) => "met",
            Some(false) => "NOT MET",
            None => "n/a (not measured)",
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
        let mut targets = Vec::new();
        if let Some(large_file) = &large_file {
            targets.extend(large_file_targets(large_file));
        }
        if let Some(efficiency) = &efficiency {
            targets.push(efficiency_target(&efficiency.points));
        }
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
        println!("\nTargets (issue #3):");
        for target in &self.targets {
            println!(
                "  {:<58} {:>8} (need >= {:.2}): {}",
                target.name,
                format_ratio(target.measured_ratio),
                target.required_ratio,
                target.verdict()
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

fn large_file_targets(large_file: &LargeFileResult) -> Vec<Target> {
    let to_fio = |prefix: &str| {
        large_file
            .row(prefix)
            .and_then(|row| row.throughput_ratio_to_fio_raw)
    };
    let to_syscalls = |prefix: &str| {
        large_file
            .row(prefix)
            .and_then(|row| row.throughput_ratio_to_ordinary_file_syscalls)
    };
    let to_ordinary_fio = |prefix: &str| {
        large_file
            .row(prefix)
            .and_then(|row| row.throughput_ratio_to_ordinary_file_fio)
    };
    vec![
        Target::new(
            "sequential read vs fio raw (io_uring, direct)",
            to_fio("seq-read"),
            0.95,
        ),
        Target::new(
            "sequential write vs fio raw (io_uring, direct)",
            to_fio("seq-write"),
            0.90,
        ),
        Target::new(
            "random 4 KiB read IOPS at QD32 vs fio raw",
            to_fio("rand-read 4KiB QD32"),
            0.90,
        ),
        Target::new(
            "beat buffered ext4: sequential read vs read()",
            to_syscalls("seq-read"),
            1.0,
        ),
        Target::new(
            "beat buffered ext4: sequential read vs fio psync",
            to_ordinary_fio("seq-read"),
            1.0,
        ),
        Target::new(
            "beat buffered ext4: random read QD1 vs pread()",
            to_syscalls("rand-read 4KiB QD1"),
            1.0,
        ),
        Target::new(
            "beat buffered ext4: random read QD32 vs fio io_uring",
            to_ordinary_fio("rand-read 4KiB QD32"),
            1.0,
        ),
    ]
}

fn efficiency_target(points: &[EfficiencyPoint]) -> Target {
    let lowest = points
        .iter()
        .filter(|point| point.file_size_bytes >= EFFICIENCY_TARGET_MIN_FILE_BYTES)
        .flat_map(|point| [point.read_efficiency_ratio, point.write_efficiency_ratio])
        .reduce(f64::min);
    Target::new(
        "lowest efficiency, files >= 100 KiB, RAM disks",
        lowest,
        0.95,
    )
}

fn format_ratio(ratio: Option<f64>) -> String {
    ratio.map_or("n/a".to_string(), |ratio| format!("{ratio:.3}"))
}

fn format_measured(measured: Option<&Measured>, random: bool) -> String {
    match measured {
        None => "n/a".to_string(),
        Some(measured) if random => format!("{:.0} IOPS", measured.iops),
        Some(measured) => format!("{:.0} MB/s", measured.mb_per_s),
    }
}

fn print_large_file(large_file: &LargeFileResult) {
    println!(
        "\n1. Large file: {} on {} device files (stripe {}, FS block {}); ordinary file {}; page cache {}",
        HumanBytes(large_file.size_bytes),
        large_file.device_files.len(),
        HumanBytes(large_file.stripe_unit_bytes),
        HumanBytes(u64::from(large_file.fs_block_size_bytes)),
        large_file.ordinary_file,
        large_file.page_cache,
    );
    let mut table = Table::new(" ")
        .indent("  ")
        .left("workload", 22)
        .right("flashpipe", 12)
        .right("fio raw", 12)
        .right("ratio", 8)
        .right("ord. syscalls", 14)
        .right("ratio", 8)
        .right("ord. fio", 14)
        .right("ratio", 8)
        .column_after("  ", "ordinary-file fio job", 0, Align::Left);
    for row in &large_file.rows {
        table.row(large_file_cells(row));
    }
    table.print();
    for note in &large_file.notes {
        println!("  note: {note}");
    }
}

fn large_file_cells(row: &LargeFileRow) -> Vec<String> {
    let random = row.workload.starts_with("rand");
    vec![
        row.workload.to_string(),
        format_measured(Some(&row.flashpipe), random),
        format_measured(row.fio_raw_direct.as_ref(), random),
        format_ratio(row.throughput_ratio_to_fio_raw),
        format_measured(row.ordinary_file_syscalls.as_ref(), random),
        format_ratio(row.throughput_ratio_to_ordinary_file_syscalls),
        format_measured(row.ordinary_file_fio.as_ref(), random),
        format_ratio(row.throughput_ratio_to_ordinary_file_fio),
        row.ordinary_file_fio_job
            .as_deref()
            .unwrap_or("-")
            .to_string(),
    ]
}

fn print_efficiency(efficiency: &EfficiencyResult) {
    println!(
        "\n2. Efficiency on RAM disks (HWFS 4.2.1.1): {}",
        efficiency.method
    );
    println!("  times per file in µs; eff = raw / total; 'direct' = the file system called on the calling thread, no engine");
    let mut table = Table::new(" ")
        .indent("  ")
        .right("disks", 5)
        .right("FS block", 8)
        .right("file", 8)
        .column_after(" | ", "write", 9, Align::Right)
        .right("raw", 8)
        .right("eff", 6)
        .column_after(" | ", "read", 9, Align::Right)
        .right("raw", 8)
        .right("eff", 6)
        .column_after(" | ", "dir.write", 9, Align::Right)
        .right("eff", 6)
        .column_after(" | ", "dir.read", 9, Align::Right)
        .right("eff", 6)
        .column_after(" | ", "thesis wr", 9, Align::Right)
        .right("thesis rd", 9);
    for point in &efficiency.points {
        table.row(efficiency_cells(point));
    }
    table.print();
    println!("  thesis wr/rd: HWFS with 1024 B blocks at 100 MHz (Table 4.1: one RAM disk, Table 4.3: two).");
    for statement in &efficiency.thesis.statements {
        println!("  thesis: {statement}");
    }
}

fn efficiency_cells(point: &EfficiencyPoint) -> Vec<String> {
    let percent = |ratio: f64| format!("{:.1}%", ratio * 100.0);
    let thesis = |us: Option<f64>| us.map_or("-".to_string(), |us| format!("{us}"));
    let micros = |us: f64| format!("{us:.1}");
    vec![
        point.disk_count.to_string(),
        HumanBytes(u64::from(point.fs_block_size_bytes)).to_string(),
        HumanBytes(point.file_size_bytes).to_string(),
        micros(point.write_total_us),
        micros(point.write_raw_us),
        percent(point.write_efficiency_ratio),
        micros(point.read_total_us),
        micros(point.read_raw_us),
        percent(point.read_efficiency_ratio),
        micros(point.write_direct_total_us),
        percent(point.write_direct_efficiency_ratio),
        micros(point.read_direct_total_us),
        percent(point.read_direct_efficiency_ratio),
        thesis(point.thesis_write_us_1024_byte_blocks),
        thesis(point.thesis_read_us_1024_byte_blocks),
    ]
}

fn print_small_files(small_files: &SmallFilesResult) {
    println!(
        "\n3. Small files: {} files of {} B (FS block {}); ordinary-file page cache {}",
        small_files.file_count,
        small_files.file_size_bytes,
        HumanBytes(u64::from(small_files.fs_block_size_bytes)),
        small_files.page_cache
    );
    let mut table = Table::new(" ")
        .indent("  ")
        .left("phase", 8)
        .right("flashpipe files/s", 16)
        .right("ordinary files/s", 18)
        .right("ratio", 8);
    for phase in &small_files.phases {
        table.row(vec![
            phase.phase.to_string(),
            format!("{:.0}", phase.flashpipe_files_per_s),
            format!("{:.0}", phase.ordinary_files_per_s),
            format!("{:.3}", phase.files_per_s_ratio),
        ]);
    }
    table.print();
}
