//! `flashpipe bench ...`: dispatch to each benchmark of the `flashpipe-bench` crate.

use clap::Subcommand;

use flashpipe_bench::engine as bench_engine;
use flashpipe_bench::{
    device as bench_device, flash_speed as bench_flash, fs as bench_fs, kernels as bench_kernels,
    serve as bench_serve,
};

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Raw device I/O through the device layer, side by side with fio.
    Device(bench_device::BenchDeviceArgs),
    /// The file system through its engine beside fio and ext4; the thesis's efficiency; small files.
    Fs(bench_fs::BenchFsArgs),
    /// One command's cost through the engine per hand-off mode beside direct calls; group commit.
    Engine(bench_engine::BenchEngineArgs),
    /// Kernels near the data beside read-then-compute, one thread, and well-known tools (RAD).
    Kernels(bench_kernels::BenchKernelsArgs),
    /// flashpipe's NBD server beside qemu-nbd and nbdkit (RAM disk, same file); a store over disk nodes.
    Net(flashpipe_bench::net::BenchNetArgs),
    /// A store mounted through FUSE beside the CLI on the same store and bindfs over tmpfs.
    Mount(flashpipe_bench::mount::BenchMountArgs),
    /// The minFlash cluster as node processes on loopback beside the model and the paper (Fig. 6, 7).
    Cluster(flashpipe_bench::cluster::BenchClusterArgs),
    /// Emulated flash at wall speed: a put into a minflash store, the whole stack and the raw model against their targets.
    Flash(bench_flash::BenchFlashArgs),
    /// A client process using an engine through `flashpipe serve` (by reference, copying) beside the in-process engine.
    Serve(bench_serve::BenchServeArgs),
    /// Draw a PNG of panels from tab-separated panel files a script wrote (e.g. scripts/bench-ycsb --plot).
    Chart(flashpipe_bench::chart::BenchChartArgs),
    /// One client of `bench serve`, run by it as a child process.
    #[command(hide = true)]
    ServeClient(bench_serve::BenchServeClientArgs),
}

/// Runs one benchmark.
pub fn run(command: BenchCommand) -> flashpipe_bench::BenchResult {
    match command {
        BenchCommand::Device(arguments) => bench_device::run(arguments),
        BenchCommand::Fs(arguments) => bench_fs::run(arguments),
        BenchCommand::Engine(arguments) => bench_engine::run(arguments),
        BenchCommand::Kernels(arguments) => bench_kernels::run(arguments),
        BenchCommand::Flash(arguments) => bench_flash::run(arguments),
        BenchCommand::Net(arguments) => flashpipe_bench::net::run(arguments),
        BenchCommand::Cluster(arguments) => flashpipe_bench::cluster::run(arguments),
        BenchCommand::Mount(arguments) => flashpipe_bench::mount::run(arguments),
        BenchCommand::Serve(arguments) => bench_serve::run(arguments),
        BenchCommand::Chart(arguments) => flashpipe_bench::chart::run(arguments),
        BenchCommand::ServeClient(arguments) => bench_serve::run_client_role(arguments),
    }
}
