//! `flashpipe fsck`: checks a store's metadata (and with `--data` every data block),
//! directly or through the server that holds it, and repairs what is safe with `--repair`.

use super::*;
use flashpipe_client::TransportExt;

/// `flashpipe fsck`.
#[derive(Debug, clap::Args)]
pub struct FsckArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Fix what can be fixed safely (leaked blocks, counts, stale super block, orphans).
    #[arg(long)]
    pub repair: bool,
    /// Also read every data block and verify its checksum; each damaged block is a
    /// finding naming the file and the offset (never repaired).
    #[arg(long)]
    pub data: bool,
}

/// Runs `fsck` on the unmounted store; exits non-zero when the store is not clean
/// (after repair, when anything unrepairable remains).
pub fn run_fsck(arguments: FsckArgs) -> CliResult {
    let store_path = &arguments.store.store;
    if let Ok(config) = StoreConfig::load(store_path) {
        for warning in permissions::open_to_others(&config, store_path) {
            eprintln!("fsck: warning: {warning}");
        }
    }
    if let Some(server) = LiveServer::find(store_path)? {
        return fsck_through_server(server, &arguments);
    }
    let config = StoreConfig::load(store_path)?;
    let creation = if arguments.repair {
        DeviceCreation::MustExist
    } else {
        DeviceCreation::ReadOnly
    };
    let OpenedStoreDevice {
        mut device,
        notes,
        lock,
        ..
    } = open_store_device_waiting(&config, store_path, creation, arguments.store.lock_wait())?;
    print_notes(&notes);
    let options = flashpipe_fs::FsckOptions {
        repair: arguments.repair,
        verify_data: arguments.data,
    };
    let progress = flashpipe_bench::progress::Progress::spinner(format!(
        "fsck: checking {}{}",
        store_path.display(),
        if arguments.data { " and its data" } else { "" }
    ));
    let report = flashpipe_store::super_block_identity::fsck_store_device(
        &mut *device,
        options,
        store_path,
        config.identity,
    );
    progress.finish();
    drop(device);
    drop(lock);
    let report = report?;
    let unrepaired =
        report.findings.len() > report.repaired.len() || report.repair_refused.is_some();
    let clean = report.is_clean() || (arguments.repair && !unrepaired);
    if arguments.store.json {
        let findings: Vec<_> = report
            .findings
            .iter()
            .map(|finding| {
                json!({"structure": finding.structure.to_string(), "block": finding.block,
                                   "problem": finding.problem, "repairable": finding.repairable})
            })
            .collect();
        println!(
            "{}",
            json!({"clean": report.is_clean(), "findings": findings, "repaired": report.repaired,
                   "repair_refused": report.repair_refused, "file_count": report.file_count,
                   "commit_sequence": report.commit_sequence})
        );
    } else {
        print_fsck_report(&report);
    }
    verdict(clean, report.findings.len(), store_path)
}

/// `fsck` while a server holds the store: the server checks the durable image (the state
/// of the last flush); `--repair` and `--data` need the store unmounted and are refused
/// naming the server.
fn fsck_through_server(mut server: LiveServer, arguments: &FsckArgs) -> CliResult {
    let store_path = &arguments.store.store;
    if arguments.repair {
        return Err(server.refusal(store_path, "fsck --repair"));
    }
    if arguments.data {
        return Err(server.refusal(store_path, "fsck --data (reading every data block)"));
    }
    if arguments.store.verbose {
        eprintln!("flashpipe: {}", server.describe());
    }
    let summary = server.client.check()?;
    if arguments.store.json {
        println!(
            "{}",
            json!({"clean": summary.clean, "findings": summary.findings,
                   "file_count": summary.file_count, "commit_sequence": summary.commit_sequence,
                   "server_pid": server.pid()})
        );
    } else {
        for finding in &summary.findings {
            println!("finding: {finding}");
        }
        if summary.clean {
            println!(
                "clean: {} file(s), commit {} (checked by the server, pid {})",
                summary.file_count,
                summary.commit_sequence.unwrap_or(0),
                server.pid()
            );
        }
    }
    verdict(summary.clean, summary.findings.len(), store_path)
}

/// A check's outcome as the command's: a success when clean, else a failure of kind
/// `Corrupt` counting the findings.
fn verdict(clean: bool, finding_count: usize, store_path: &Path) -> CliResult {
    if clean {
        return Ok(());
    }
    Err(Failure::new(
        ErrorKind::Corrupt,
        format!("{finding_count} finding(s) in {}", store_path.display()),
    )
    .into())
}

fn print_fsck_report(report: &flashpipe_fs::FsckReport) {
    for finding in &report.findings {
        println!("finding: {finding}");
    }
    for repair in &report.repaired {
        println!("repaired: {repair}");
    }
    if let Some(reason) = &report.repair_refused {
        println!("repair refused: {reason}");
    }
    if report.is_clean() {
        println!(
            "clean: {} file(s), commit {}",
            report.file_count,
            report.commit_sequence.unwrap_or(0)
        );
    }
}
