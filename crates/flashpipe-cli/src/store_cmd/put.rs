//! `flashpipe put`: files, folders or standard input into the store, one transaction
//! (the transfer itself is `transfer`'s).

use std::path::PathBuf;

use flashpipe_store::put_plan::plan_put_with_special;

use super::{open_session, put_stdin, transfer, CliResult, StoreAccess, StoreArgs};
use crate::session::with_transport;

/// `flashpipe put`.
#[derive(Debug, clap::Args)]
pub struct PutArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Files or folders to store. A folder keeps its own name as the prefix of its files'
    /// names, with `:` between folder names (`photos/sub/x.txt` -> `photos:sub:x.txt`).
    /// `-` alone reads standard input to its end into the file named by --as
    /// (`tar c dir | flashpipe put s.toml - --as dir.tar`; `-` where a path goes, as tar
    /// and cat read it, and the name from --as, as for any one file put): streamed in bounded memory,
    /// committed at end of file, nothing kept if the command is killed or the input
    /// fails (a command before the pipe that fails part-way is not seen: what it wrote
    /// is stored; `set -o pipefail` makes the shell report it); a local file named `-`
    /// is `./-`.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Name in the store: the file's name for one file (needed for `-`, standard
    /// input), the prefix replacing a folder's name (`NAME:sub:x.txt`) for folders.
    #[arg(long = "as")]
    pub name: Option<String>,
    /// Replace files that exist in the store already; the old file stays whole until the
    /// new one is committed (without it an existing name is refused and nothing changes).
    #[arg(long)]
    pub force: bool,
    /// Also store special files (FIFOs, devices, sockets) given as paths, reading what
    /// they yield; without it they are refused (reading one may block or never end).
    #[arg(long)]
    pub special: bool,
}

/// Runs `put`: every file in one transaction (see `transfer`).
pub fn run_put(arguments: PutArgs) -> CliResult {
    let started = std::time::Instant::now();
    let from_standard_input = put_stdin::names_standard_input(&arguments.paths);
    let (sources, mut standard_input) = if from_standard_input {
        let source = put_stdin::plan_standard_input(&arguments.paths, arguments.name.as_deref())?;
        put_stdin::note_when_typed();
        let input = put_stdin::read_ahead(std::io::stdin().lock())?;
        (vec![source], Some(input))
    } else {
        let sources = plan_put_with_special(
            &arguments.paths,
            arguments.name.as_deref(),
            arguments.special,
        )?;
        (sources, None)
    };
    let mut session = open_session(&arguments.store, StoreAccess::ReadWrite)?;
    let clock = session.clock();
    let input = match &mut standard_input {
        Some(reader) => transfer::PutInput::Stream {
            reader,
            label: "standard input",
        },
        None => transfer::PutInput::Files,
    };
    let result = with_transport!(session, |store| transfer::put_files_atomically(
        store,
        &*clock,
        &sources,
        input,
        arguments.force,
    ));
    let mut report = session.finish(result)?;
    report.wall_seconds = started.elapsed().as_secs_f64();
    transfer::print_transfer_report("stored", &report, arguments.store.json);
    Ok(())
}
