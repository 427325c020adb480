//! Moving whole files between the local file system and a store: `put` (files and
//! folders), `get` and `cat`, pipelined through the engine with progress bars.
//!
//! A put is one transaction: every file is written under a temporary name, then all are
//! renamed to their names (replacing existing files only with `--force`) and committed by
//! one flush at the end. A failure removes the temporaries and flushes nothing: in this
//! process the caller then closes the store without committing, so the store keeps
//! exactly its last commit; through a server (see `session`) the temporaries were visible
//! to other clients while the put ran, and are gone when it fails.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use flashpipe_device::Clock;
use flashpipe_store::put_plan::PutSource;
use flashpipe_store::units::HumanBytes;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::error_kind::{ErrorKind, Failure};
use crate::session::{
    drain, file_exists, read_file, rename_file, write_file, SessionResult, StoreTransport,
};
use flashpipe_api::TransportExt;

/// What a transfer moved and how fast.
#[derive(Debug, Clone, Default)]
pub struct TransferReport {
    /// Files moved.
    pub file_count: usize,
    /// Bytes moved.
    pub total_bytes: u64,
    /// Seconds on the store's clock: wall time on real devices, the model's virtual
    /// time on emulated flash (the simulator's own speed is not the device's).
    pub seconds: f64,
    /// Seconds of wall time: the transfer's, or the whole command's (opening, mounting
    /// and committing included) once the command sets it.
    pub wall_seconds: f64,
    /// Whether `seconds` is simulated (emulated flash) rather than wall time.
    pub device_time_is_simulated: bool,
}

/// Both clocks at the start of a transfer: the store's (real or simulated) and the wall.
struct TransferTimer {
    started_ns: u64,
    started: std::time::Instant,
}

impl TransferTimer {
    fn start(clock: &dyn Clock) -> TransferTimer {
        TransferTimer {
            started_ns: clock.now_ns(),
            started: std::time::Instant::now(),
        }
    }

    fn report(&self, clock: &dyn Clock, file_count: usize, total_bytes: u64) -> TransferReport {
        TransferReport {
            file_count,
            total_bytes,
            seconds: clock.now_ns().saturating_sub(self.started_ns) as f64 / 1e9,
            wall_seconds: self.started.elapsed().as_secs_f64(),
            device_time_is_simulated: clock.is_virtual(),
        }
    }
}

/// A byte progress bar on standard error; indicatif hides it when standard error is not
/// a terminal, so pipes and logs see nothing. `None`: the total is not known (standard
/// input), so only the bytes so far and the rate are shown.
fn progress_bar(total_bytes: Option<u64>) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(total_bytes, indicatif::ProgressDrawTarget::stderr());
    let template = if total_bytes.is_some() {
        "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} {msg}"
    } else {
        "{spinner} {bytes} {bytes_per_sec} {msg}"
    };
    bar.set_style(ProgressStyle::with_template(template).expect("the template is valid"));
    bar
}

/// Where a put's bytes come from: the local files its sources name, or one stream
/// (standard input) for its single source.
pub enum PutInput<'a> {
    /// Each source's `path`, opened in turn.
    Files,
    /// The stream, read to its end for the one source (`put STORE - --as NAME`).
    Stream {
        /// The bytes.
        reader: &'a mut dyn std::io::Read,
        /// What to call it in messages ("standard input").
        label: &'static str,
    },
}

/// Stores every source as one transaction (see the module's documentation): checks that
/// no target exists unless `replace` (`--force`), writes each source under a temporary
/// name, renames them all into place and flushes once. On failure the temporaries are
/// removed and nothing is flushed; the caller then closes the store without committing.
pub fn put_files_atomically<T: StoreTransport>(
    client: &mut T,
    clock: &dyn Clock,
    sources: &[PutSource],
    input: PutInput<'_>,
    replace: bool,
) -> Result<TransferReport, Box<dyn std::error::Error>> {
    let temporaries = temporary_names(sources.len());
    check_put_targets(client, sources, &temporaries, replace)?;
    let result = put_files(client, clock, sources, input, &temporaries).and_then(|report| {
        install_files(client, sources, &temporaries, replace)?;
        client.flush().session()?;
        Ok(report)
    });
    if result.is_err() {
        remove_temporaries(client, &temporaries);
    }
    result
}

/// Names to write under before the rename: short (so any final name's length works),
/// unique to this process.
fn temporary_names(count: usize) -> Vec<String> {
    let pid = std::process::id();
    (0..count)
        .map(|index| format!(".flashpipe-put-{pid}-{index}"))
        .collect()
}

/// Refuses, before anything is written, a target that exists (unless `replace`) and a
/// temporary name that is taken.
fn check_put_targets<T: StoreTransport>(
    client: &mut T,
    sources: &[PutSource],
    temporaries: &[String],
    replace: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let targets = sources.iter().filter(|_| !replace).map(|source| {
        (
            &source.name,
            format!(
                "{:?} exists in the store; give --force to replace it (the old file stays whole until the new one is committed)",
                source.name
            ),
        )
    });
    let taken = temporaries.iter().map(|temporary| {
        (
            temporary,
            format!("temporary name {temporary:?} is taken in the store; remove that file first"),
        )
    });
    for (name, refusal) in targets.chain(taken) {
        if file_exists(client, name)? {
            return Err(Failure::new(ErrorKind::Exists, refusal).into());
        }
    }
    Ok(())
}

/// Renames every temporary to its source's name (replacing with `replace`). When a rename
/// fails without `replace`, the files renamed before it are renamed back to their
/// temporaries (their names were free before this put), so that, through a server, no file
/// of a failed put stays under its name for other clients to see or a later flush to
/// commit; the caller then removes the temporaries.
fn install_files<T: StoreTransport>(
    client: &mut T,
    sources: &[PutSource],
    temporaries: &[String],
    replace: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    for (index, (source, temporary)) in sources.iter().zip(temporaries).enumerate() {
        let Err(error) = rename_file(client, temporary, &source.name, replace) else {
            continue;
        };
        if replace {
            return Err(Failure::context(&error, format!("{}: {error}", source.name)).into());
        }
        for (installed, temporary) in sources[..index].iter().zip(temporaries) {
            let _ = client.rename(&installed.name, temporary);
        }
        if error.is_exists() {
            return Err(Failure::new(
                ErrorKind::Exists,
                format!(
                    "{:?} exists in the store (put by another client of the server while this put ran); give --force to replace it; nothing of this put is kept",
                    source.name
                ),
            )
            .into());
        }
        return Err(Failure::context(
            &error,
            format!("{}: {error}; nothing of this put is kept", source.name),
        )
        .into());
    }
    Ok(())
}

/// Deletes whichever temporaries exist, best effort: in this process the store is closed
/// without a commit after a failure anyway; through a server this is what takes them out
/// of other clients' sight.
fn remove_temporaries<T: StoreTransport>(client: &mut T, temporaries: &[String]) {
    drain(client);
    for temporary in temporaries {
        let _ = client.delete(temporary);
    }
}

/// Writes every source into the store file of the same index in `names` (created, or
/// emptied if it exists), reading each from its path or, for a stream, the one source
/// from the stream (its size is not known ahead: memory stays bounded by the transfer's
/// commands in flight whatever its length).
fn put_files<T: StoreTransport>(
    client: &mut T,
    clock: &dyn Clock,
    sources: &[PutSource],
    mut input: PutInput<'_>,
    names: &[String],
) -> Result<TransferReport, Box<dyn std::error::Error>> {
    assert_eq!(sources.len(), names.len(), "one store name per source");
    let total_bytes = match input {
        PutInput::Files => Some(sources.iter().map(|source| source.size_bytes).sum()),
        PutInput::Stream { .. } => {
            assert_eq!(sources.len(), 1, "a stream is the one source of its put");
            None
        }
    };
    let bar = progress_bar(total_bytes);
    let timer = TransferTimer::start(clock);
    let mut done_bytes = 0;
    for (source, name) in sources.iter().zip(names) {
        bar.set_message(source.name.clone());
        let mut file;
        let (reader, label): (&mut dyn std::io::Read, String) = match &mut input {
            PutInput::Files => {
                file = File::open(&source.path).map_err(|error| {
                    Failure::context(&error, format!("{}: {error}", source.path.display()))
                })?;
                (&mut file, source.path.display().to_string())
            }
            PutInput::Stream { reader, label } => (&mut **reader, label.to_string()),
        };
        let written = write_file(client, name, reader, &mut |bytes| {
            bar.set_position(done_bytes + bytes)
        })
        .map_err(|error| Failure::context(&error, format!("{label}: {error}")))?;
        done_bytes += written;
    }
    bar.finish_and_clear();
    Ok(timer.report(clock, sources.len(), done_bytes))
}

/// Writes file `name` of the store to standard output.
pub fn cat_file<T: StoreTransport>(
    client: &mut T,
    clock: &dyn Clock,
    name: &str,
) -> Result<TransferReport, Box<dyn std::error::Error>> {
    let timer = TransferTimer::start(clock);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let total_bytes = read_file(client, name, &mut |chunk| out.write_all(chunk), &mut |_| {})?;
    out.flush()?;
    Ok(timer.report(clock, 1, total_bytes))
}

/// One file to fetch: its store name, its size and the local file to write.
#[derive(Debug, Clone)]
pub struct GetTarget {
    /// The file in the store.
    pub name: String,
    /// Its size in the store.
    pub size_bytes: u64,
    /// The local file written (its folders are created).
    pub path: PathBuf,
}

/// What `get` does with a destination that is a special file (a character or block
/// device, a FIFO, a socket).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecialDestination {
    /// Write into it as `cp` does: opened for writing, never truncated nor replaced.
    WriteInto,
    /// Refuse it (`--no-special`).
    Refuse,
}

/// Fetches every target, one progress bar over their total size. A regular file (or a
/// new one) is written under a temporary name and renamed when complete, so a failure
/// leaves no partial file (files fetched before the failure stay); a special file is
/// written into, or refused, as `special` says.
pub fn get_files<T: StoreTransport>(
    client: &mut T,
    clock: &dyn Clock,
    targets: &[GetTarget],
    special: SpecialDestination,
) -> Result<TransferReport, Box<dyn std::error::Error>> {
    let total_bytes: u64 = targets.iter().map(|target| target.size_bytes).sum();
    let bar = progress_bar(Some(total_bytes));
    let timer = TransferTimer::start(clock);
    let mut done_bytes = 0;
    let mut result = Ok(());
    for target in targets {
        bar.set_message(target.name.clone());
        match fetch_one(client, target, special, &bar, done_bytes) {
            Ok(bytes) => done_bytes += bytes,
            Err(error) => {
                result = Err(error);
                break;
            }
        }
    }
    bar.finish_and_clear();
    result.map(|()| timer.report(clock, targets.len(), done_bytes))
}

fn fetch_one<T: StoreTransport>(
    client: &mut T,
    target: &GetTarget,
    special: SpecialDestination,
    bar: &ProgressBar,
    done_bytes: u64,
) -> Result<u64, Box<dyn std::error::Error>> {
    if let Some(kind) = special_file_kind(&target.path) {
        return write_into_special(client, target, kind, special, bar, done_bytes);
    }
    if let Some(parent) = target
        .path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        std::fs::create_dir_all(parent)
            .map_err(|error| Failure::context(&error, format!("{}: {error}", parent.display())))?;
    }
    let mut partial_name = target.path.file_name().unwrap_or_default().to_os_string();
    partial_name.push(".flashpipe-partial");
    let partial = target.path.with_file_name(partial_name);
    let mut file = File::create(&partial)
        .map_err(|error| Failure::context(&error, format!("{}: {error}", partial.display())))?;
    let result = read_file(
        client,
        &target.name,
        &mut |chunk| file.write_all(chunk),
        &mut |bytes| bar.set_position(done_bytes + bytes),
    );
    let fetched = result
        .map_err(Box::<dyn std::error::Error>::from)
        .and_then(|bytes| file.sync_all().map(|()| bytes).map_err(Into::into));
    let bytes = match fetched {
        Ok(bytes) => bytes,
        Err(error) => {
            let _ = std::fs::remove_file(&partial);
            return Err(error);
        }
    };
    std::fs::rename(&partial, &target.path)
        .map_err(|error| Failure::context(&error, format!("{}: {error}", target.path.display())))?;
    Ok(bytes)
}

/// What special file `path` is (following symbolic links, as `cp` does), or `None` for
/// a regular file, a folder or nothing at all.
fn special_file_kind(path: &Path) -> Option<&'static str> {
    let file_type = std::fs::metadata(path).ok()?.file_type();
    if file_type.is_char_device() {
        Some("a character device")
    } else if file_type.is_block_device() {
        Some("a block device")
    } else if file_type.is_fifo() {
        Some("a FIFO")
    } else if file_type.is_socket() {
        Some("a socket")
    } else {
        None
    }
}

/// Writes a store file into the special file at `target.path` as `cp` does (opened for
/// writing, never created, truncated nor renamed over), or refuses it.
fn write_into_special<T: StoreTransport>(
    client: &mut T,
    target: &GetTarget,
    kind: &'static str,
    special: SpecialDestination,
    bar: &ProgressBar,
    done_bytes: u64,
) -> Result<u64, Box<dyn std::error::Error>> {
    let path = target.path.display();
    if special == SpecialDestination::Refuse {
        return Err(Failure::invalid_input(format!(
            "{path} is {kind}, and --no-special refuses writing into special files; give a regular file's path, or leave out --no-special to write into it as cp does"
        ))
        .into());
    }
    if kind == "a socket" {
        return Err(Failure::invalid_input(format!(
            "{path} is a socket, which cannot be opened for writing; give a file's path, or `-` for standard output"
        ))
        .into());
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(&target.path)
        .map_err(|error| {
            Failure::context(
                &error,
                format!("{path} ({kind}): cannot open it for writing: {error}"),
            )
        })?;
    let bytes = read_file(
        client,
        &target.name,
        &mut |chunk| file.write_all(chunk),
        &mut |bytes| bar.set_position(done_bytes + bytes),
    )
    .map_err(|error| Failure::context(&error, format!("{path} ({kind}): {error}")))?;
    if kind == "a block device" {
        file.sync_all().map_err(|error| {
            Failure::context(&error, format!("{path} ({kind}): cannot flush it: {error}"))
        })?;
    }
    Ok(bytes)
}

/// Prints what a transfer did (on standard error unless `--json`: a summary, not data): with the device's time labelled as simulated, and the
/// wall time beside it, when the store is on emulated flash.
pub fn print_transfer_report(verb: &str, report: &TransferReport, as_json: bool) {
    let per_second = |seconds: f64| report.total_bytes as f64 / seconds.max(1e-9);
    if as_json {
        println!(
            "{}",
            json!({"files": report.file_count, "bytes": report.total_bytes,
                   "seconds": report.seconds, "bytes_per_second": per_second(report.seconds),
                   "device_time_is_simulated": report.device_time_is_simulated,
                   "wall_seconds": report.wall_seconds,
                   "wall_bytes_per_second": per_second(report.wall_seconds)})
        );
        return;
    }
    let wall = format!(
        "{:.3} s wall for the whole command ({}/s)",
        report.wall_seconds,
        HumanBytes(per_second(report.wall_seconds) as u64)
    );
    let device = if report.device_time_is_simulated {
        format!(
            "; {:.3} s of simulated device time ({}/s)",
            report.seconds,
            HumanBytes(per_second(report.seconds) as u64)
        )
    } else {
        String::new()
    };
    eprintln!(
        "{verb} {} file(s), {} in {wall}{device}",
        report.file_count,
        HumanBytes(report.total_bytes),
    );
}
