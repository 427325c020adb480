//! The commands that change names in the store: `rm`, `mv` and `cp`, each one commit
//! (a bad name changes nothing).

use flashpipe_api::TransportExt;
use flashpipe_store::units::HumanBytes;
use serde_json::json;

use super::names::{resolve_names, FolderRule};
use super::{open_session, CliResult, CopyMethodArg, CpArgs, MvArgs, RmArgs, StoreAccess};
use crate::error_kind::{ErrorKind, Failure};
use crate::session::{rename_file, with_transport, SessionError, SessionResult, StoreTransport};

/// Runs `rm`: resolves every name, pattern and (with -r) prefix first (each stands for
/// at least one file, none is named twice), then deletes them all in one commit; a bad
/// name deletes nothing.
pub fn run_rm(arguments: RmArgs) -> CliResult {
    if arguments.names.is_empty() {
        return Err(Failure::new(ErrorKind::Usage, "rm needs at least one file name").into());
    }
    refuse_repeated_names(&arguments.names)?;
    let folders = if arguments.recursive {
        FolderRule::Expand
    } else {
        FolderRule::Refuse
    };
    let mut session = open_session(&arguments.store, StoreAccess::ReadWrite)?;
    let result = with_transport!(session, |store| {
        resolve_names(store, &arguments.names, folders)
            .map_err(|error| Failure::context(&*error, format!("{error}; nothing removed")).into())
            .and_then(|names| remove_all(store, &names).map(|()| names))
    });
    let removed = session.finish(result)?;
    if arguments.store.json {
        println!("{}", json!({"removed": removed}));
    } else {
        eprintln!("removed {} file(s)", removed.len());
    }
    Ok(())
}

/// `rm x y x` is refused whole: with every command atomic, deleting x and y and then
/// failing on the second x (Unix `rm`'s way) would be a partial command.
fn refuse_repeated_names(names: &[String]) -> CliResult {
    let mut seen = std::collections::HashSet::new();
    match names.iter().find(|name| !seen.insert(name.as_str())) {
        Some(name) => Err(Failure::invalid_input(format!(
            "{name:?} is named more than once; nothing removed"
        ))
        .into()),
        None => Ok(()),
    }
}

fn remove_all<T: StoreTransport>(client: &mut T, names: &[String]) -> CliResult {
    for name in names {
        client
            .stat(name)
            .session()
            .map_err(|error| Failure::context(&error, format!("{error}; nothing removed")))?;
    }
    for name in names {
        client.delete(name).session()?;
    }
    client.flush().session()?;
    Ok(())
}

/// Runs `mv` (replacing the target only with `--force`, in the same commit).
pub fn run_mv(arguments: MvArgs) -> CliResult {
    let mut session = open_session(&arguments.store, StoreAccess::ReadWrite)?;
    let result = with_transport!(session, |store| {
        rename_file(store, &arguments.from, &arguments.to, arguments.force)
            .and_then(|()| store.flush().session())
            .map_err(|error| refuse_hint(error, arguments.force))
    });
    session.finish(result)?;
    if arguments.store.json {
        println!("{}", json!({"from": arguments.from, "to": arguments.to}));
    } else {
        eprintln!("renamed {} to {}", arguments.from, arguments.to);
    }
    Ok(())
}

/// A store error, with the `--force` hint when the target exists.
fn refuse_hint(error: SessionError, forced: bool) -> Box<dyn std::error::Error> {
    if error.is_exists() && !forced {
        return Failure::new(
            ErrorKind::Exists,
            format!("{error}; give --force to replace it"),
        )
        .into();
    }
    error.into()
}

/// Runs `cp`: copies one file inside the store, sharing its blocks (or as `--by` says).
/// With `--force` an existing target is replaced: the copy is made under a temporary
/// name and renamed over it in the same commit.
pub fn run_cp(arguments: CpArgs) -> CliResult {
    let mut session = open_session(&arguments.store, StoreAccess::ReadWrite)?;
    let clock = session.clock();
    let started_ns = clock.now_ns();
    let result = with_transport!(session, |store| copy_file(store, &arguments));
    let elapsed_ns = clock.now_ns().saturating_sub(started_ns);
    let report = session.finish(result)?;
    if arguments.store.json {
        println!(
            "{}",
            json!({"from": arguments.from, "to": arguments.to,
                   "blocks_by_reference": report.blocks_by_reference,
                   "bytes_by_bytes": report.bytes_by_bytes,
                   "elapsed_ns": elapsed_ns})
        );
    } else {
        let clock_name = if clock.is_virtual() {
            "simulated device time"
        } else {
            "wall time"
        };
        eprintln!(
            "copied {} to {}: {} blocks by reference ({}), {} by bytes, {:.3} ms of {clock_name}",
            arguments.from,
            arguments.to,
            report.blocks_by_reference,
            if arguments.by == CopyMethodArg::Remap {
                "remapped by the device"
            } else {
                "shared with the source"
            },
            HumanBytes(report.bytes_by_bytes),
            elapsed_ns as f64 / 1e6
        );
    }
    Ok(())
}

fn copy_file<T: StoreTransport>(
    client: &mut T,
    arguments: &CpArgs,
) -> Result<flashpipe_fs::CopyReport, Box<dyn std::error::Error>> {
    let target = if arguments.force {
        format!(".flashpipe-cp-{}", std::process::id())
    } else {
        arguments.to.clone()
    };
    let report = client
        .copy(&arguments.from, &target, arguments.by.method())
        .session()
        .map_err(|error| refuse_hint(error, arguments.force))?;
    if arguments.force {
        if let Err(error) = rename_file(client, &target, &arguments.to, true) {
            let _ = client.delete(&target);
            return Err(error.into());
        }
    }
    client.flush().session()?;
    Ok(report)
}
