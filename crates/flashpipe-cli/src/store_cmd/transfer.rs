//! Moving whole files between the local file system and a store: `put` (files and
//! folders), `get` and `cat`, pipelined through the engine with progress bars.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use flashpipe_device::Clock;
use flashpipe_engine::units::HumanBytes;
use flashpipe_engine::EngineClient;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

/// Bytes per write or read command in transfers.
const TRANSFER_CHUNK_BYTES: usize = 1 << 20;
/// Commands in flight per transfer.
const TRANSFER_IN_FLIGHT: usize = 8;

/// A local file to store and the name it gets.
#[derive(Debug, Clone)]
pub struct PutSource {
    /// Where it is.
    pub path: PathBuf,
    /// Its name in the store.
    pub name: String,
    /// Its size when planned.
    pub size_bytes: u64,
}

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
}

/// Lists the files to store, with their names, checking everything first: every path
/// exists and is readable, every name is valid, no two sources share a name.
pub fn plan_put(
    paths: &[PathBuf],
    name: Option<&str>,
) -> Result<Vec<PutSource>, Box<dyn std::error::Error>> {
    let mut sources = Vec::new();
    for path in paths {
        let metadata =
            std::fs::metadata(path).map_err(|error| format!("{}: {error}", path.display()))?;
        if metadata.is_dir() {
            collect_folder(path, path, name, &mut sources)?;
        } else {
            let file_name = match (name, paths.len()) {
                (Some(name), 1) => name.to_string(),
                (Some(_), _) => {
                    return Err("--as names one file; with several paths give none".into())
                }
                (None, _) => local_file_name(path)?,
            };
            sources.push(PutSource {
                path: path.clone(),
                name: file_name,
                size_bytes: metadata.len(),
            });
        }
    }
    check_names(&sources)?;
    Ok(sources)
}

fn local_file_name(path: &Path) -> Result<String, Box<dyn std::error::Error>> {
    path.file_name()
        .and_then(|name| name.to_str())
        .map(str::to_string)
        .ok_or_else(|| {
            format!(
                "{}: the file name is not UTF-8; give one with --as",
                path.display()
            )
            .into()
        })
}

fn collect_folder(
    root: &Path,
    folder: &Path,
    prefix: Option<&str>,
    sources: &mut Vec<PutSource>,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut entries: Vec<_> = std::fs::read_dir(folder)
        .map_err(|error| format!("{}: {error}", folder.display()))?
        .collect::<Result<_, _>>()
        .map_err(|error| format!("{}: {error}", folder.display()))?;
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let path = entry.path();
        let metadata =
            std::fs::metadata(&path).map_err(|error| format!("{}: {error}", path.display()))?;
        if metadata.is_dir() {
            collect_folder(root, &path, prefix, sources)?;
            continue;
        }
        let relative = path.strip_prefix(root).expect("entries lie under the root");
        let parts: Option<Vec<&str>> = relative.iter().map(|part| part.to_str()).collect();
        let relative_name = parts
            .ok_or_else(|| format!("{}: a path component is not UTF-8", path.display()))?
            .join(":");
        let name = match prefix {
            Some(prefix) => format!("{prefix}:{relative_name}"),
            None => relative_name,
        };
        sources.push(PutSource {
            path,
            name,
            size_bytes: metadata.len(),
        });
    }
    Ok(())
}

fn check_names(sources: &[PutSource]) -> Result<(), Box<dyn std::error::Error>> {
    let mut seen = std::collections::HashSet::new();
    for source in sources {
        if let Some(reason) = flashpipe_fs::name_problem(&source.name) {
            return Err(format!(
                "{}: name {:?} is not valid in a store: {reason}",
                source.path.display(),
                source.name
            )
            .into());
        }
        if !seen.insert(source.name.as_str()) {
            return Err(format!("two sources would both be named {:?}", source.name).into());
        }
    }
    Ok(())
}

fn progress_bar(total_bytes: u64) -> ProgressBar {
    let bar = ProgressBar::new(total_bytes);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec} {msg}")
            .expect("the template is valid"),
    );
    bar
}

/// Stores every source (replacing files of the same name).
pub fn put_files(
    client: &mut EngineClient,
    clock: &dyn Clock,
    sources: &[PutSource],
) -> Result<TransferReport, Box<dyn std::error::Error>> {
    let total_bytes: u64 = sources.iter().map(|source| source.size_bytes).sum();
    let bar = progress_bar(total_bytes);
    let started_ns = clock.now_ns();
    let mut done_bytes = 0;
    for source in sources {
        bar.set_message(source.name.clone());
        let mut file = File::open(&source.path)
            .map_err(|error| format!("{}: {error}", source.path.display()))?;
        let written = client
            .write_stream(
                &source.name,
                &mut file,
                TRANSFER_CHUNK_BYTES,
                TRANSFER_IN_FLIGHT,
                &mut |bytes| bar.set_position(done_bytes + bytes),
            )
            .map_err(|error| format!("{}: {error}", source.path.display()))?;
        done_bytes += written;
    }
    bar.finish_and_clear();
    Ok(TransferReport {
        file_count: sources.len(),
        total_bytes: done_bytes,
        seconds: seconds_since(clock, started_ns),
    })
}

/// Fetches `name` into `destination` (a file, an existing folder, or `-` for standard
/// output). A file destination is written under a temporary name and renamed when
/// complete, so a failure leaves no partial file.
pub fn get_file(
    client: &mut EngineClient,
    clock: &dyn Clock,
    name: &str,
    destination: &Path,
) -> Result<TransferReport, Box<dyn std::error::Error>> {
    let started_ns = clock.now_ns();
    if destination == Path::new("-") {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        let total_bytes = client.read_stream(
            name,
            &mut |chunk| out.write_all(chunk),
            TRANSFER_CHUNK_BYTES as u64,
            TRANSFER_IN_FLIGHT,
            &mut |_| {},
        )?;
        out.flush()?;
        return Ok(TransferReport {
            file_count: 1,
            total_bytes,
            seconds: seconds_since(clock, started_ns),
        });
    }
    let target = if destination.is_dir() {
        destination.join(name)
    } else {
        destination.to_path_buf()
    };
    let partial = target.with_extension("flashpipe-partial");
    let mut file =
        File::create(&partial).map_err(|error| format!("{}: {error}", partial.display()))?;
    let bar = progress_bar(0);
    let result = client.read_stream(
        name,
        &mut |chunk| file.write_all(chunk),
        TRANSFER_CHUNK_BYTES as u64,
        TRANSFER_IN_FLIGHT,
        &mut |bytes| bar.set_position(bytes),
    );
    bar.finish_and_clear();
    let total_bytes = match result
        .map_err(Box::<dyn std::error::Error>::from)
        .and_then(|bytes| file.sync_all().map(|()| bytes).map_err(Into::into))
    {
        Ok(bytes) => bytes,
        Err(error) => {
            let _ = std::fs::remove_file(&partial);
            return Err(error);
        }
    };
    std::fs::rename(&partial, &target).map_err(|error| format!("{}: {error}", target.display()))?;
    Ok(TransferReport {
        file_count: 1,
        total_bytes,
        seconds: seconds_since(clock, started_ns),
    })
}

fn seconds_since(clock: &dyn Clock, started_ns: u64) -> f64 {
    clock.now_ns().saturating_sub(started_ns) as f64 / 1e9
}

/// Prints what a transfer did.
pub fn print_transfer_report(verb: &str, report: &TransferReport, as_json: bool) {
    let bytes_per_second = report.total_bytes as f64 / report.seconds.max(1e-9);
    if as_json {
        println!(
            "{}",
            json!({"files": report.file_count, "bytes": report.total_bytes, "seconds": report.seconds,
                   "bytes_per_second": bytes_per_second})
        );
    } else {
        println!(
            "{verb} {} file(s), {} in {:.3} s ({}/s)",
            report.file_count,
            HumanBytes(report.total_bytes),
            report.seconds,
            HumanBytes(bytes_per_second as u64)
        );
    }
}
