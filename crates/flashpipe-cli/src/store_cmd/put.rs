//! `flashpipe put`: files, folders or standard input into the store, one transaction
//! (the transfer itself is `transfer`'s).

use flashpipe_store::put_plan::plan_put_with_special;

use super::{open_session, put_stdin, transfer, CliResult, PutArgs, StoreAccess};
use crate::session::with_transport;

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
