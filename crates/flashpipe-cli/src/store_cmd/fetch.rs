//! `flashpipe get` and `flashpipe cat`: store files to local files, folders or standard
//! output, every local name checked before anything is fetched.

use std::path::Path;

use flashpipe_api::TransportExt;
use flashpipe_device::Clock;
use flashpipe_store::glob;

use super::names::{local_components, resolve_names, FolderRule};
use super::{open_session, transfer, CliResult, GetArgs, NamesArgs, StoreAccess};
use crate::error_kind::{ErrorKind, Failure};
use crate::session::{with_transport, SessionResult, StoreTransport};

/// Runs `get`: one file, the files matching a pattern, or with -r every file under a
/// prefix (see [`GetArgs`] for where each lands).
pub fn run_get(arguments: GetArgs) -> CliResult {
    let started = std::time::Instant::now();
    let mut session = open_session(&arguments.store, StoreAccess::ReadOnly)?;
    let clock = session.clock();
    let to_stdout = arguments.destination == Path::new("-");
    let result = with_transport!(session, |store| get(store, &*clock, &arguments));
    let mut report = session.finish(result)?;
    report.wall_seconds = started.elapsed().as_secs_f64();
    if !to_stdout {
        transfer::print_transfer_report("fetched", &report, arguments.store.json);
    }
    Ok(())
}

/// Fetches what `get` names, to its files or standard output.
fn get<T: StoreTransport>(
    store: &mut T,
    clock: &dyn Clock,
    arguments: &GetArgs,
) -> Result<transfer::TransferReport, Box<dyn std::error::Error>> {
    let targets = plan_get(store, arguments)?;
    if arguments.destination == Path::new("-") {
        let mut total = transfer::TransferReport::default();
        for target in &targets {
            let report = transfer::cat_file(store, clock, &target.name)?;
            total.total_bytes += report.total_bytes;
        }
        return Ok(total);
    }
    let special = if arguments.no_special {
        transfer::SpecialDestination::Refuse
    } else {
        transfer::SpecialDestination::WriteInto
    };
    transfer::get_files(store, clock, &targets, special)
}

/// A destination written with a trailing `/` names a folder: refuses it, saying so, when it
/// is not an existing one (instead of the operating system's "Not a directory").
fn refuse_missing_folder(destination: &Path) -> Result<(), Box<dyn std::error::Error>> {
    use std::os::unix::ffi::OsStrExt;
    if !destination.as_os_str().as_bytes().ends_with(b"/") || destination.is_dir() {
        return Ok(());
    }
    let bytes = destination.as_os_str().as_bytes();
    let without_slash = Path::new(std::ffi::OsStr::from_bytes(
        &bytes[..bytes.len() - bytes.iter().rev().take_while(|&&byte| byte == b'/').count()],
    ));
    let what = if without_slash.exists() {
        "exists but is not a folder"
    } else {
        "does not exist"
    };
    Err(Failure::not_found(format!(
        "{}: the trailing / names a folder, and it {what}; create it first (mkdir -p), or drop the / to name a file",
        destination.display()
    ))
    .into())
}

/// The local file of every store file `get` fetches, every local name checked first.
fn plan_get<T: StoreTransport>(
    client: &mut T,
    arguments: &GetArgs,
) -> Result<Vec<transfer::GetTarget>, Box<dyn std::error::Error>> {
    let folders = if arguments.recursive {
        FolderRule::Expand
    } else {
        FolderRule::Refuse
    };
    let names = resolve_names(client, std::slice::from_ref(&arguments.name), folders)?;
    let destination = &arguments.destination;
    let several = arguments.recursive || glob::is_pattern(&arguments.name);
    if several && destination != Path::new("-") && !arguments.recursive && !destination.is_dir() {
        return Err(Failure::invalid_input(format!(
            "{}: a pattern fetches into an existing folder; this is not one",
            destination.display()
        ))
        .into());
    }
    refuse_missing_folder(destination)?;
    let mut targets = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for name in names {
        let path = if arguments.recursive {
            local_components(&name)?
                .iter()
                .fold(destination.clone(), |path, part| path.join(part))
        } else if several || destination.is_dir() {
            let components = local_components(&name)?;
            destination.join(components.last().expect("a name has a component"))
        } else {
            destination.clone()
        };
        if destination != Path::new("-") && !seen.insert(path.clone()) {
            return Err(Failure::invalid_input(format!(
                "two files would both be written to {}; use -r to keep their folders",
                path.display()
            ))
            .into());
        }
        let size_bytes = client.stat(&name).session()?.size_bytes;
        targets.push(transfer::GetTarget {
            name,
            size_bytes,
            path,
        });
    }
    Ok(targets)
}

/// Runs `cat`: every named file (or pattern's matches) to standard output, in order.
pub fn run_cat(arguments: NamesArgs) -> CliResult {
    if arguments.store.json {
        return Err(Failure::new(ErrorKind::Usage, "cat writes the files' raw bytes; --json does not apply (use `stat --json` for facts about them)").into());
    }
    if arguments.names.is_empty() {
        return Err(Failure::new(ErrorKind::Usage, "cat needs at least one file name").into());
    }
    let mut session = open_session(&arguments.store, StoreAccess::ReadOnly)?;
    let clock = session.clock();
    let result = with_transport!(session, |store| {
        resolve_names(store, &arguments.names, FolderRule::Refuse).and_then(|names| {
            names
                .iter()
                .try_for_each(|name| transfer::cat_file(store, &*clock, name).map(|_| ()))
        })
    });
    session.finish(result)
}
