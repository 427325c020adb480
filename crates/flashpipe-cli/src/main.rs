//! `flashpipe`: the command-line interface over every layer of the stack.
//!
//! Each store subcommand lives in a module of its own; the benchmarks and experiments
//! (`bench`, `ftl`, `sim`) live in the `flashpipe-bench` library, whose argument structs
//! this file names in its command tree. This file only parses the command line,
//! dispatches, and turns errors into a message on standard error and a non-zero exit.

mod bench;
mod cluster_cmd;
mod demo_cmd;
mod error_kind;
mod kernels_cmd;
mod mount_cmd;
mod nbd_cmd;
mod run_cmd;
mod serve_cmd;
mod session;
mod shell_cmd;
mod store_cmd;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

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
    /// The minFlash cluster: check a description, run a flash node, send a page request as a host.
    #[command(subcommand)]
    Cluster(cluster_cmd::ClusterCommand),
    /// The main job on an embedded default: a striped store, sample data in, read back, verified.
    Demo(demo_cmd::DemoArgs),
    /// Compute kernels: list them with their options, measure them, train language profiles.
    Kernels(kernels_cmd::KernelsArgs),
    /// Run a kernel next to the data: a pipeline inside the store's engine.
    Run(run_cmd::RunArgs),
    /// The NAND flash array model: presets, speed, synthetic jobs, trace replay, reproductions.
    #[command(subcommand)]
    Sim(SimCommandLine),
    /// Network Block Device: serve RAM disks, files and emulated flash to NBD clients.
    #[command(subcommand)]
    Nbd(nbd_cmd::NbdCommand),
    /// Create a store: its devices, its file system and its store file.
    Mkfs(store_cmd::MkfsArgs),
    /// Copy local files or folders into a store.
    Put(store_cmd::PutArgs),
    /// Copy files out of a store: one, a pattern's matches, or a prefix with -r.
    Get(store_cmd::GetArgs),
    /// Print files of a store to standard output (names or patterns).
    Cat(store_cmd::NamesArgs),
    /// List the files of a store (all, or those named, under a prefix, or matching a
    /// pattern); the summary line goes to standard error.
    Ls(store_cmd::LsArgs),
    /// Show facts about files of a store.
    Stat(store_cmd::NamesArgs),
    /// Delete files from a store (names, patterns, or prefixes with -r), in one commit.
    Rm(store_cmd::RmArgs),
    /// Rename a file of a store.
    Mv(store_cmd::MvArgs),
    /// Copy a file inside a store: by reference (its blocks shared, no data moved, counted
    /// once) on every store; `--by remap` asks the device (emulated flash) instead.
    Cp(store_cmd::CpArgs),
    /// Show a store's space and file count.
    Df(store_cmd::StoreArgs),
    /// Summarize a store: members, sizes, labels, format, identity, space, log, flash wear.
    Info(store_cmd::InfoArgs),
    /// Check a store's metadata, and repair what is safe with --repair.
    Fsck(store_cmd::FsckArgs),
    /// Mount a store as a file system (FUSE): directories are the `:` levels of its names.
    Mount(mount_cmd::MountArgs),
    /// Serve a store to many client processes on a Unix socket (foreground; SIGTERM stops it).
    Serve(Box<serve_cmd::ServeArgs>),
    /// The host flash translation layer: write amplification, GC policies, wear, speed.
    #[command(subcommand)]
    Ftl(flashpipe_bench::ftl::FtlCommand),
    /// Print shell completions (bash, zsh or fish) to standard output.
    Completions(shell_cmd::CompletionsArgs),
    /// Print the manual page as roff, or write one page per subcommand with --out DIR.
    Man(shell_cmd::ManArgs),
}

/// `flashpipe sim`: the model's commands, and `presets`.
#[derive(Debug, Subcommand)]
enum SimCommandLine {
    /// List the shipped flash presets (for --preset and `flash:PRESET:IMAGE`) with the
    /// sources of their numbers.
    Presets(PresetsArgs),
    #[command(flatten)]
    Model(flashpipe_bench::sim::SimCommand),
}

/// `flashpipe sim presets`.
#[derive(Debug, clap::Args)]
struct PresetsArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `flashpipe sim presets`: one line per preset, `NAME  SOURCE`.
fn list_presets(arguments: &PresetsArgs) -> store_cmd::CliResult {
    let listings = flashpipe_flash::config::preset_listings();
    if arguments.json {
        println!("{}", serde_json::to_string_pretty(&listings)?);
        return Ok(());
    }
    for listing in listings {
        println!("{:<10} {}", listing.name, listing.source);
    }
    Ok(())
}

/// Restores the default action of SIGPIPE (Rust ignores it), so a write to a closed pipe
/// (`flashpipe ls store.toml | head -2`) ends the process quietly as coreutils do,
/// instead of a "Broken pipe" panic.
fn die_quietly_on_closed_pipes() {
    // SAFETY: setting a signal's disposition to SIG_DFL at the start of main, before any
    // thread is spawned, has no preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Whether the command line asks for JSON (`--json` before any `--`): then errors are
/// printed as one JSON object on standard error too.
fn json_requested() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|argument| argument != "--")
        .any(|argument| argument == "--json")
}

/// Prints an error: one line of text, or with `--json` one object
/// `{"error": MESSAGE, "kind": KIND, "exit_status": STATUS}` on standard error; returns
/// the kind's exit status (error_kind.rs holds the table).
fn report_error(message: &str, kind: error_kind::ErrorKind, as_json: bool) -> ExitCode {
    if as_json {
        let object = serde_json::json!({
            "error": message,
            "kind": kind.name(),
            "exit_status": kind.exit_status(),
        });
        eprintln!("{object}");
    } else {
        eprintln!("flashpipe: error: {message}");
    }
    ExitCode::from(kind.exit_status())
}

/// A clap error's message without its `error: ` label and usage lines, on one line.
fn usage_error_text(error: &clap::Error) -> String {
    let rendered = error.render().to_string();
    let message = rendered.split("\n\nUsage:").next().unwrap_or(&rendered);
    let message = message.trim_start_matches("error: ");
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn main() -> ExitCode {
    die_quietly_on_closed_pipes();
    let as_json = json_requested();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) if as_json && error.use_stderr() => {
            return report_error(
                &usage_error_text(&error),
                error_kind::ErrorKind::Usage,
                true,
            );
        }
        Err(error) => error.exit(),
    };
    let result = match cli.command {
        Command::Bench(command) => bench::run(command),
        Command::Cluster(command) => cluster_cmd::run(command),
        Command::Demo(arguments) => demo_cmd::run(arguments),
        Command::Kernels(arguments) => kernels_cmd::run(arguments),
        Command::Run(arguments) => run_cmd::run(arguments),
        Command::Sim(SimCommandLine::Presets(arguments)) => list_presets(&arguments),
        Command::Sim(SimCommandLine::Model(command)) => flashpipe_bench::sim::run(command),
        Command::Nbd(command) => nbd_cmd::run(command),
        Command::Mkfs(arguments) => store_cmd::run_mkfs(arguments),
        Command::Put(arguments) => store_cmd::run_put(arguments),
        Command::Get(arguments) => store_cmd::run_get(arguments),
        Command::Cat(arguments) => store_cmd::run_cat(arguments),
        Command::Ls(arguments) => store_cmd::run_ls(arguments),
        Command::Stat(arguments) => store_cmd::run_stat(arguments),
        Command::Rm(arguments) => store_cmd::run_rm(arguments),
        Command::Mv(arguments) => store_cmd::run_mv(arguments),
        Command::Cp(arguments) => store_cmd::run_cp(arguments),
        Command::Df(arguments) => store_cmd::run_df(arguments),
        Command::Info(arguments) => store_cmd::run_info(arguments),
        Command::Fsck(arguments) => store_cmd::run_fsck(arguments),
        Command::Mount(arguments) => mount_cmd::run(arguments),
        Command::Serve(arguments) => serve_cmd::run(*arguments),
        Command::Ftl(command) => flashpipe_bench::ftl::run(command),
        Command::Completions(arguments) => shell_cmd::run_completions(arguments, Cli::command()),
        Command::Man(arguments) => shell_cmd::run_man(arguments, Cli::command()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if error.is::<run_cmd::NoMatch>() => ExitCode::from(1),
        Err(error) => report_error(&error.to_string(), error_kind::classify(&*error), as_json),
    }
}
