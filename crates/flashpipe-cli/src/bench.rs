//! `flashpipe bench ...`: dispatch to each benchmark's module.

use clap::Subcommand;

use crate::bench_device;

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Raw device I/O through the device layer, side by side with fio.
    Device(bench_device::BenchDeviceArgs),
}

/// Runs one benchmark.
pub fn run(command: BenchCommand) -> Result<(), Box<dyn std::error::Error>> {
    match command {
        BenchCommand::Device(arguments) => bench_device::run(arguments),
    }
}
