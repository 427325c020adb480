//! `flashpipe bench device`: raw device-layer throughput and latency beside fio.

use std::path::PathBuf;

/// Options of `flashpipe bench device`.
#[derive(Debug, clap::Args)]
pub struct BenchDeviceArgs {
    /// Folder for the benchmark's files.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Options of `flashpipe demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Folder for the demo's files.
    #[arg(long, default_value = "demo-store")]
    pub dir: PathBuf,
}

/// Runs the benchmark.
pub fn run(_arguments: BenchDeviceArgs) -> Result<(), Box<dyn std::error::Error>> {
    Err("bench device is being written (issue #2)".into())
}

/// Runs the demo.
pub fn run_demo(_arguments: DemoArgs) -> Result<(), Box<dyn std::error::Error>> {
    Err("the demo is being written (issue #2)".into())
}
