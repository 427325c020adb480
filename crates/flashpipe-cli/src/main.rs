//! `flashpipe`: the command-line interface over every layer of the stack.
//!
//! Each subcommand lives in a module of its own; this file only parses the command line,
//! dispatches, and turns errors into a message on standard error and a non-zero exit.

mod bench;
mod bench_device;
mod bench_fs;
mod kernels_cmd;
mod sim;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// flashpipe: a near-data storage engine.
#[derive(Debug, Parser)]
#[command(name = "flashpipe", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Benchmarks, each side by side with a reference in the same run.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// The main job on an embedded default: a small raw device benchmark for now.
    Demo(bench_device::DemoArgs),
    /// Compute kernels: list them with their options, measure them, train language profiles.
    Kernels(kernels_cmd::KernelsArgs),
    /// The NAND flash array model: speed, synthetic jobs, trace replay, reproductions.
    #[command(subcommand)]
    Sim(sim::SimCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(command) => bench::run(command),
        Command::Demo(arguments) => bench_device::run_demo(arguments),
        Command::Kernels(arguments) => kernels_cmd::run(arguments),
        Command::Sim(command) => sim::run(command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("flashpipe: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
