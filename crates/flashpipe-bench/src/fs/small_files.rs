//! Part 3: many small files (2 KiB each) created, written, read and deleted through the
//! engine on a store of two device files, beside the same on the folder's own file
//! system (ext4 on the machine measured), files per second for each phase.
//!
//! Phases and what ends them: create (then `Flush` / `syncfs`), write 2 KiB into each
//! (then `Flush` / `syncfs`), read each whole file back and check it (page cache dropped
//! first for the ordinary files), delete (then `Flush` / `syncfs`). Engine commands are
//! pipelined, 32 outstanding; the ordinary files are handled one after another with
//! `open`/`write`/`read`/`close`/`unlink`, as a program would.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use flashpipe_device::IoBuf;
use flashpipe_engine::{Command, EngineClient, Reply};
use serde::Serialize;

use super::reference::drop_page_cache;
use super::store::{self, StoreShape};
use super::{BenchFsError, Settings, MIB};
use crate::pattern::DataPattern;

/// Bytes per small file.
pub const SMALL_FILE_BYTES: usize = 2048;
/// Commands outstanding.
const COMMANDS_IN_FLIGHT: usize = 32;
/// Device files of the store.
const DEVICE_COUNT: u32 = 2;

/// One phase on both systems.
#[derive(Debug, Clone, Serialize)]
pub struct SmallFilePhase {
    /// create, write, read or delete.
    pub phase: String,
    /// Through the engine.
    pub flashpipe_files_per_s: f64,
    /// On the folder's own file system.
    pub ordinary_files_per_s: f64,
    /// flashpipe over ordinary.
    pub files_per_s_ratio: f64,
}

/// Everything part 3 measured.
#[derive(Debug, Clone, Serialize)]
pub struct SmallFilesResult {
    /// Files per phase.
    pub file_count: u64,
    /// Bytes per file.
    pub file_size_bytes: usize,
    /// FS block size of the store.
    pub fs_block_size_bytes: u32,
    /// What happened to the page cache before the ordinary reads.
    pub page_cache: String,
    /// One entry per phase.
    pub phases: Vec<SmallFilePhase>,
}

/// Runs part 3 in `folder`.
pub fn run(settings: &Settings, folder: &Path) -> Result<SmallFilesResult, BenchFsError> {
    let count = settings.small_file_count;
    let pattern = DataPattern::new();
    let payload = count * u64::from(settings.fs_block_size_bytes) * 3;
    let shape = StoreShape::files(
        folder,
        "small",
        DEVICE_COUNT,
        store::device_bytes_each(payload, DEVICE_COUNT, 64 * MIB),
        256 * 1024,
        settings.fs_block_size_bytes,
    );
    let fresh = shape.format(folder)?;
    let device_files = fresh.device_files.clone();
    let engine = store::start_engine(fresh.filesystem);
    let flashpipe = engine_phases(&mut engine.client(64), count, &pattern)?;
    drop(engine.shutdown()?);
    for path in &device_files {
        let _ = std::fs::remove_file(path);
    }
    let ordinary_folder = folder.join("ordinary-small-files");
    std::fs::create_dir(&ordinary_folder).map_err(BenchFsError::io(format!(
        "creating {}",
        ordinary_folder.display()
    )))?;
    let (ordinary, page_cache) = ordinary_phases(settings, &ordinary_folder, count, &pattern)?;
    let _ = std::fs::remove_dir_all(&ordinary_folder);
    let phases = ["create", "write", "read", "delete"]
        .iter()
        .zip(flashpipe.iter().zip(ordinary))
        .map(|(phase, (&ours, theirs))| SmallFilePhase {
            phase: phase.to_string(),
            flashpipe_files_per_s: count as f64 / ours,
            ordinary_files_per_s: count as f64 / theirs,
            files_per_s_ratio: theirs / ours,
        })
        .collect();
    Ok(SmallFilesResult {
        file_count: count,
        file_size_bytes: SMALL_FILE_BYTES,
        fs_block_size_bytes: settings.fs_block_size_bytes,
        page_cache,
        phases,
    })
}

fn small_file_name(index: u64) -> String {
    format!("small-{index:07}")
}

/// Pipelines `make_command(index)` for every file, 32 outstanding, handing each reply
/// to `on_reply`; returns seconds including a final flush when `flush_after`.
fn pipeline(
    client: &mut EngineClient,
    count: u64,
    flush_after: bool,
    make_command: &mut dyn FnMut(u64) -> Command,
    on_reply: &mut dyn FnMut(u64, Reply) -> Result<(), BenchFsError>,
) -> Result<f64, BenchFsError> {
    let started = Instant::now();
    let mut index_by_ticket = std::collections::HashMap::new();
    let mut next = 0;
    while next < count || client.outstanding() > 0 {
        while next < count && client.outstanding() < COMMANDS_IN_FLIGHT {
            let ticket = client.submit(make_command(next))?;
            index_by_ticket.insert(ticket, next);
            next += 1;
        }
        let (ticket, result) = client.next_completion()?;
        let index = index_by_ticket
            .remove(&ticket)
            .expect("a command submitted here");
        on_reply(index, result?)?;
    }
    if flush_after {
        client.call(Command::Flush)?;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Seconds of each phase through the engine: create, write, read, delete.
pub(crate) fn engine_phases(
    client: &mut EngineClient,
    count: u64,
    pattern: &DataPattern,
) -> Result<[f64; 4], BenchFsError> {
    let mut ignore = |_, _| Ok(());
    let create = pipeline(
        client,
        count,
        true,
        &mut |index| Command::Create {
            name: small_file_name(index),
        },
        &mut ignore,
    )?;
    let mut make_write = |index: u64| {
        let mut buffer = IoBuf::zeroed(SMALL_FILE_BYTES);
        pattern.fill(index * MIB, &mut buffer);
        Command::Write {
            name: small_file_name(index),
            offset_bytes: 0,
            data: buffer,
        }
    };
    let write = pipeline(client, count, true, &mut make_write, &mut ignore)?;
    let read = pipeline(
        client,
        count,
        false,
        &mut |index| Command::Read {
            name: small_file_name(index),
            offset_bytes: 0,
            length_bytes: SMALL_FILE_BYTES as u64,
        },
        &mut |index, reply| match reply {
            Reply::Data(data) => Ok(pattern.check(index * MIB, data.bytes())?),
            other => unreachable!("a read completed with {other:?}"),
        },
    )?;
    let delete = pipeline(
        client,
        count,
        true,
        &mut |index| Command::Delete {
            name: small_file_name(index),
        },
        &mut ignore,
    )?;
    Ok([create, write, read, delete])
}

/// `syncfs` of the file system holding `folder`.
fn sync_file_system(folder: &Path) -> Result<(), BenchFsError> {
    let handle =
        File::open(folder).map_err(BenchFsError::io(format!("opening {}", folder.display())))?;
    // SAFETY: syncfs takes a valid open descriptor, which `handle` holds until dropped.
    let status = unsafe { libc::syncfs(handle.as_raw_fd()) };
    match status {
        0 => Ok(()),
        _ => Err(BenchFsError::Io {
            what: format!("syncfs of {}", folder.display()),
            source: std::io::Error::last_os_error(),
        }),
    }
}

/// Seconds of each phase on ordinary files, and what happened to the page cache.
fn ordinary_phases(
    settings: &Settings,
    folder: &Path,
    count: u64,
    pattern: &DataPattern,
) -> Result<([f64; 4], String), BenchFsError> {
    let path = |index: u64| -> PathBuf { folder.join(small_file_name(index)) };
    let io = |what: &str, path: &Path| BenchFsError::io(format!("{what} {}", path.display()));
    let timed = |phase: &mut dyn FnMut(u64) -> Result<(), BenchFsError>, sync: bool| {
        let started = Instant::now();
        for index in 0..count {
            phase(index)?;
        }
        if sync {
            sync_file_system(folder)?;
        }
        Ok::<f64, BenchFsError>(started.elapsed().as_secs_f64())
    };
    let create = timed(
        &mut |index| {
            let path = path(index);
            File::create(&path).map(drop).map_err(io("creating", &path))
        },
        true,
    )?;
    let mut buffer = vec![0u8; SMALL_FILE_BYTES];
    let write = timed(
        &mut |index| {
            let path = path(index);
            pattern.fill(index * MIB, &mut buffer);
            let mut file = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(io("opening", &path))?;
            file.write_all(&buffer).map_err(io("writing", &path))
        },
        true,
    )?;
    let page_cache = drop_page_cache(settings.drop_page_cache);
    let read = timed(
        &mut |index| {
            let path = path(index);
            let mut file = File::open(&path).map_err(io("opening", &path))?;
            file.read_exact(&mut buffer).map_err(io("reading", &path))?;
            Ok(pattern.check(index * MIB, &buffer)?)
        },
        false,
    )?;
    let delete = timed(
        &mut |index| {
            let path = path(index);
            std::fs::remove_file(&path).map_err(io("deleting", &path))
        },
        true,
    )?;
    Ok(([create, write, read, delete], page_cache))
}
