//! `flashpipe info STORE.toml`: a store's summary, as `qemu-img info` gives an image's
//! (`flashpipe_store::info` gathers it; this prints it, as text or `--json`).
//!
//! Read-only: the store is locked shared and mounted read-only, so it runs beside `ls`,
//! `get` and other readers, and waits for (`--wait`) or names a writer. When `flashpipe
//! serve` holds the store, the space and file counts come from the server and the rest
//! from the store file and the members' labels; the format version, the metadata log and
//! the flash wear need the store opened here and are shown as unknown.
//!
//! A missing or unreadable member (or one that does not mount) still gives the rows
//! that could be made, then the error and a non-zero exit.

use flashpipe_client::TransportExt;
use flashpipe_store::info::{
    describe_members, gather_store_info, FilesystemInfo, MemberInfo, StoreInfo,
};
use flashpipe_store::units::HumanBytes;
use serde_json::json;

use super::{CliResult, StoreArgs};
use crate::session::LiveServer;

/// `flashpipe info`.
#[derive(Debug, clap::Args)]
pub struct InfoArgs {
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Runs `info`.
pub fn run_info(arguments: InfoArgs) -> CliResult {
    let arguments = arguments.store;
    if let Some(server) = LiveServer::find(&arguments.store)? {
        return info_through_server(server, &arguments);
    }
    if arguments.verbose {
        eprintln!(
            "flashpipe: {} opened in this process (no server holds it)",
            arguments.store.display()
        );
    }
    let gathered = gather_store_info(&arguments.store, arguments.lock_wait())?;
    print_info(&gathered.info, None, arguments.json)?;
    match gathered.problem {
        Some(problem) => Err(problem.into()),
        None => Ok(()),
    }
}

/// The summary while a server holds the store: its space and counts from the server.
fn info_through_server(mut server: LiveServer, arguments: &StoreArgs) -> CliResult {
    if arguments.verbose {
        eprintln!("flashpipe: {}", server.describe());
    }
    let mut info = describe_members(&arguments.store)?;
    let stats = server.client.stats()?;
    info.filesystem = Some(FilesystemInfo::from_stats(&stats));
    print_info(&info, Some(server.pid()), arguments.json)
}

fn print_info(info: &StoreInfo, server_pid: Option<u32>, as_json: bool) -> CliResult {
    if as_json {
        let mut value = serde_json::to_value(info)?;
        value["server_pid"] = json!(server_pid);
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    println!(
        "store file:      {} (store file version {})",
        info.store_file.display(),
        info.store_file_version
    );
    let identity = info
        .identity
        .map(|identity| identity.to_string())
        .unwrap_or_else(|| "none recorded (given at the next read-write open)".to_string());
    println!("identity:        {identity}");
    println!(
        "geometry:        {} blocks, {} stripe unit, {} member(s), queue depth {}",
        HumanBytes(u64::from(info.block_size_bytes)),
        HumanBytes(info.stripe_unit_bytes),
        info.members.len(),
        info.queue_depth
    );
    if let Some(filesystem) = &info.filesystem {
        print_filesystem(info, filesystem);
    }
    if let Some(pid) = server_pid {
        println!("served by:       `flashpipe serve` (pid {pid}); the format version, metadata log and flash wear need the store opened here: stop the server to see them");
    }
    println!("members:");
    for member in &info.members {
        print_member(member);
    }
    Ok(())
}

fn print_filesystem(info: &StoreInfo, filesystem: &FilesystemInfo) {
    let format = filesystem
        .format_version
        .map(|version| format!("format version {version}, "))
        .unwrap_or_default();
    println!(
        "file system:     {format}commit {}, {} file(s)",
        filesystem.commit_sequence, filesystem.file_count
    );
    if let (Some(found), Some(recorded)) = (&filesystem.identity, info.identity) {
        if *found != recorded.to_string() {
            println!("                 its super block names store {found}: NOT this store file's identity");
        }
    }
    println!(
        "space:           {} total, {} used, {} free ({} kept for the next commit)",
        HumanBytes(filesystem.total_bytes),
        HumanBytes(filesystem.used_bytes),
        HumanBytes(filesystem.free_bytes),
        HumanBytes(filesystem.reserved_bytes)
    );
    if let Some(flash) = &filesystem.flash_aware {
        println!(
            "flash-aware:     {} pages handed out, {} commit-ring records, {} erases, {} pages moved by collection (over the store's life, at its last commit)",
            flash.pages_allocated, flash.ring_records, flash.erases, flash.pages_moved
        );
    }
    if let Some(log) = &filesystem.metadata_log {
        let percent = if log.region_blocks == 0 {
            0.0
        } else {
            100.0 * log.used_blocks as f64 / log.region_blocks as f64
        };
        println!(
            "metadata log:    {} of {} blocks ({percent:.0} %), {} commit(s) since the checkpoint",
            log.used_blocks, log.region_blocks, log.records
        );
    }
}

fn print_member(member: &MemberInfo) {
    let size = member
        .size_bytes
        .map(|bytes| HumanBytes(bytes).to_string())
        .unwrap_or_else(|| "?".to_string());
    let on_disk = member
        .allocated_bytes
        .map(|bytes| format!(", {} on disk", HumanBytes(bytes)))
        .unwrap_or_default();
    println!(
        "  {}  {:<12} {}  {size}{on_disk}, label {}",
        member.index,
        member.kind,
        member.location,
        member.label.text()
    );
    if let Some(problem) = &member.problem {
        println!("     PROBLEM: {problem}");
    }
    if let Some(flash) = &member.flash {
        println!(
            "     flash {}: {} raw, {} exported, over-provisioning {:.0} %",
            flash.preset,
            HumanBytes(flash.raw_bytes),
            HumanBytes(flash.exported_bytes),
            flash.over_provisioning * 100.0
        );
        println!(
            "     wear: erases min {} / mean {:.2} / max {} (good blocks), {} bad of {} blocks",
            flash.erase_count_min,
            flash.erase_count_mean,
            flash.erase_count_max,
            flash.bad_blocks,
            flash.block_count
        );
    }
}
