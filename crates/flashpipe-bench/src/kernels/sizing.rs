//! Sizing (RAD Table II): for each kernel's measured in-memory throughput, the flash matrix of a
//! preset that would feed it. Columns = the kernel's I/O width over the 1-byte package bus (RAD:
//! 16 for DES, 8 for Sobel); rows = enough packages per column that the slower of reading and
//! writing keeps up (writing only for kernels that write a stream back). Per-package rates come
//! from the preset's timing (page / (array time + page transfer)), the analytic form of
//! `flashpipe sim repro rad-table2`.

use flashpipe_flash::FlashConfig;
use serde::Serialize;

use super::KernelRow;

use crate::column_table::{fixed, ColumnTable};
use crate::BenchResult;

/// One kernel's sizing on one preset.
#[derive(Debug, Clone, Serialize)]
pub struct SizingRow {
    /// Kernel.
    pub kernel: String,
    /// Preset.
    pub preset: String,
    /// Measured in-memory throughput, all cores.
    pub kernel_bytes_per_second: f64,
    /// Package read rate.
    pub package_read_bytes_per_second: f64,
    /// Package write rate.
    pub package_write_bytes_per_second: f64,
    /// Rows (packages per column).
    pub rows: u64,
    /// Columns.
    pub columns: u32,
    /// Matrix read bandwidth.
    pub matrix_read_bytes_per_second: f64,
    /// Matrix write bandwidth.
    pub matrix_write_bytes_per_second: f64,
}

fn package_rates(config: &FlashConfig) -> (f64, f64) {
    let page = f64::from(config.geometry.page_data_bytes);
    let timing = &config.timing;
    let transfer = timing.page_transfer_ns as f64;
    let read = page / ((timing.array_read_ns as f64 + transfer) / 1e9);
    let program = timing.program_ns_by_page_type.iter().sum::<u64>() as f64
        / timing.program_ns_by_page_type.len().max(1) as f64;
    let write = page / ((program + transfer) / 1e9);
    (read, write)
}

/// Sizes every measured kernel on the `rad` and `tlc` presets.
pub fn sizing_rows(rows: &[KernelRow]) -> BenchResult<Vec<SizingRow>> {
    let mut sizing = Vec::new();
    for preset in ["rad", "tlc"] {
        let config = FlashConfig::preset(preset)?;
        let (read, write) = package_rates(&config);
        for row in rows {
            let columns = if row.kernel.starts_with("des") || row.kernel.starts_with("aes") {
                16
            } else {
                8
            };
            let writes_back = row.writes_results_back;
            let per_column = row.kernel_in_memory_bytes_per_second / f64::from(columns);
            let limiting = if writes_back { read.min(write) } else { read };
            let packages = (per_column / limiting).ceil().max(1.0) as u64;
            sizing.push(SizingRow {
                kernel: row.kernel.clone(),
                preset: preset.to_string(),
                kernel_bytes_per_second: row.kernel_in_memory_bytes_per_second,
                package_read_bytes_per_second: read,
                package_write_bytes_per_second: write,
                rows: packages,
                columns,
                matrix_read_bytes_per_second: read * packages as f64 * f64::from(columns),
                matrix_write_bytes_per_second: write * packages as f64 * f64::from(columns),
            });
        }
    }
    Ok(sizing)
}

/// Prints the table.
pub fn print_sizing(rows: &[SizingRow]) {
    const MIB: f64 = 1048576.0;
    println!("\nsizing (RAD Table II): flash matrix that feeds each kernel's in-memory rate");
    ColumnTable::new(" ", rows)
        .left("kernel", 30, |row| row.kernel.clone())
        .left("preset", 6, |row| row.preset.clone())
        .right("kernel MiB/s", 12, |row| {
            fixed(row.kernel_bytes_per_second / MIB, 1)
        })
        .right("rows x cols", 13, |row| {
            format!("{} x {}", row.rows, row.columns)
        })
        .right("pkgs", 7, |row| {
            (row.rows * u64::from(row.columns)).to_string()
        })
        .right("read MiB/s", 12, |row| {
            fixed(row.matrix_read_bytes_per_second / MIB, 1)
        })
        .right("write MiB/s", 12, |row| {
            fixed(row.matrix_write_bytes_per_second / MIB, 1)
        })
        .print();
}
