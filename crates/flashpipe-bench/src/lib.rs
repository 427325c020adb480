//! flashpipe's benchmarks, experiments and paper reproductions, as a library.
//!
//! Everything here measures or reproduces; nothing here is part of the storage engine. It
//! lives in its own crate so that the command-line interface only parses arguments,
//! dispatches and prints, and so that the model crates (`flashpipe-flash`,
//! `flashpipe-ftl`) and the engine do not pull the chart drawing (`plotters`) in. The
//! product's demo (`flashpipe demo`) is not here: the CLI holds it (`demo_cmd`).
//!
//! - [`chart`]: `flashpipe bench chart`, a PNG of panels drawn from tab-separated panel
//!   files a script wrote (`scripts/bench-ycsb --plot`);
//! - [`cluster`]: `flashpipe bench cluster`, the minFlash cluster as real node processes and
//!   host sessions on loopback, beside the virtual-time model and the paper (Fig. 6, 7);
//! - [`device`]: `flashpipe bench device`, raw device-layer I/O beside fio and `memcpy`;
//! - [`engine`]: `flashpipe bench engine`, one command's cost through the engine's
//!   hand-off modes beside the file system called directly, and group commit;
//! - [`fs`]: `flashpipe bench fs`, the file system through its engine beside fio and ext4,
//!   the thesis's efficiency, small files;
//! - [`flash_speed`]: `flashpipe bench flash`, emulated flash at wall speed against the
//!   issue #13 targets (a put into a minflash store, the whole stack, the raw model);
//! - [`kernels`]: `flashpipe bench kernels`, kernels near the data beside
//!   read-then-compute, one thread and well-known tools (RAD's three-way comparison);
//! - [`net`]: `flashpipe bench net`, flashpipe's NBD server beside qemu-nbd and nbdkit,
//!   all driven by fio's nbd ioengine over loopback TCP and a Unix socket, on a RAM disk
//!   and on one file; and a store striped over loopback disk nodes beside RAM disks;
//! - [`ftl`], [`ftl_fs`], [`ftl_copy`]: `flashpipe ftl ...`, experiments with the host
//!   flash translation layer on the NAND model in virtual time;
//! - [`serve`]: `flashpipe bench serve`, a client process using an engine through
//!   `flashpipe serve` (data by reference in shared memory) beside the in-process engine;
//! - [`sim`]: `flashpipe sim ...`, the NAND model's speed, synthetic jobs, trace replay
//!   and the RAD and minFlash reproductions;
//! - [`pattern`], [`table`], [`column_table`], [`progress`], [`verdict`], [`fio`]: the
//!   measuring harness (`flashpipe-bench-harness`), re-exported at these paths: workload
//!   patterns, the text tables (built column by column or from column definitions), the phase spinner, the one target verdict and the one fio driver and parser;
//! - `child`: the child `flashpipe` processes benchmarks start (NBD server, disk nodes,
//!   cluster nodes), spawned to die with this process and awaited until ready;
//! - [`error`]: [`error::BenchError`], the one typed error every command fails with (its
//!   kind, not its words, decides the CLI's exit status);
//! - [`plot`]: the PNG charts the experiments and reproductions draw (the harness's, with
//!   the embedded DejaVu Sans font).
//!
//! Each command's argument struct derives `clap::Args`, so the CLI names it in its
//! command tree and calls the module's `run`; the numbers printed are the ones the
//! figures in docs/ were made from.

#![warn(missing_docs)]

pub mod chart;
mod child;
pub mod cluster;
pub mod device;
pub mod emulate;
pub mod engine;
pub mod error;
pub mod flash_speed;
pub mod fs;
pub mod ftl;
pub mod ftl_copy;
pub mod ftl_fs;
pub mod kernels;
pub mod mount;
pub mod net;
pub mod precondition;
pub mod scratch;
pub mod serve;
pub mod sim;

/// The harness's modules, at the paths the experiments have always used.
pub use flashpipe_bench_harness::{column_table, fio, pattern, plot, progress, table, verdict};

/// The result of every benchmark and experiment: any error, described for a person.
pub type BenchResult<T = ()> = Result<T, Box<dyn std::error::Error>>;
