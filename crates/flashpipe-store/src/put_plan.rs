//! Which local files a put stores, and under which names, all checked before anything is
//! written: every path exists and is readable, every name is valid in a store
//! (`flashpipe_fs::new_name_problem`), no two sources share a name, and special files (FIFOs,
//! devices, sockets) are refused unless asked for.
//!
//! A file keeps its own name (or the one given); a folder's files are named
//! `PREFIX:relative:path` with `:` for each `/`, PREFIX being the folder's own name (as
//! `cp -r` keeps it) or the one given; a folder's entries are taken in name order.

use std::path::{Path, PathBuf};

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

/// Why a put cannot be planned.
#[derive(Debug, thiserror::Error)]
pub enum PutPlanError {
    /// A local path cannot be read.
    #[error("{path}: {source}")]
    Local {
        /// The path as given.
        path: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A path or name that cannot be stored as given (the message says why and what to
    /// give instead).
    #[error("{0}")]
    Refused(String),
}

impl PutPlanError {
    fn local(path: &Path, source: std::io::Error) -> PutPlanError {
        PutPlanError::Local {
            path: path.display().to_string(),
            source,
        }
    }
}

/// Lists the files to store, with their names, checking everything first: every path
/// exists and is readable, every name is valid, no two sources share a name, and no
/// source is a special file (FIFO, device, socket).
pub fn plan_put(
    paths: &[PathBuf],
    name: Option<&str>,
) -> Result<Vec<PutSource>, Box<dyn std::error::Error>> {
    plan_put_with_special(paths, name, false)
}

/// [`plan_put`], reading special files (FIFOs, devices, sockets) too when
/// `include_special` is set (`put --special`): reading one may block until a writer comes
/// or never end, so they are refused unless asked for.
pub fn plan_put_with_special(
    paths: &[PathBuf],
    name: Option<&str>,
    include_special: bool,
) -> Result<Vec<PutSource>, Box<dyn std::error::Error>> {
    let mut sources = Vec::new();
    for path in paths {
        let metadata = std::fs::metadata(path).map_err(|error| PutPlanError::local(path, error))?;
        if metadata.is_dir() {
            let prefix = match name {
                Some(name) => name.to_string(),
                None => folder_name(path)?,
            };
            collect_folder(path, path, &prefix, include_special, &mut sources)?;
        } else {
            check_not_special(path, &metadata, include_special)?;
            let file_name = match (name, paths.len()) {
                (Some(name), 1) => name.to_string(),
                (Some(_), _) => {
                    return Err(PutPlanError::Refused(
                        "--as names one file; with several paths give none".to_string(),
                    )
                    .into())
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

/// The name a folder gives its files' prefix: its own name (`photos/` -> `photos`,
/// `.` -> the current folder's name), as `cp -r` keeps it.
fn folder_name(path: &Path) -> Result<String, Box<dyn std::error::Error>> {
    let absolute = std::fs::canonicalize(path).map_err(|error| PutPlanError::local(path, error))?;
    match absolute.file_name() {
        Some(_) => local_file_name(&absolute),
        None => Err(PutPlanError::Refused(format!(
            "{}: the root folder has no name to use as a prefix; give one with --as",
            path.display()
        ))
        .into()),
    }
}

fn local_file_name(path: &Path) -> Result<String, Box<dyn std::error::Error>> {
    path.file_name()
        .and_then(|name| name.to_str())
        .map(str::to_string)
        .ok_or_else(|| {
            PutPlanError::Refused(format!(
                "{}: the file name is not UTF-8; give one with --as",
                path.display()
            ))
            .into()
        })
}

/// Refuses a special file unless `include_special`.
fn check_not_special(
    path: &Path,
    metadata: &std::fs::Metadata,
    include_special: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    use std::os::unix::fs::FileTypeExt;
    let file_type = metadata.file_type();
    let kind = if file_type.is_fifo() {
        "a FIFO (named pipe)"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        return Ok(());
    };
    if include_special {
        return Ok(());
    }
    Err(PutPlanError::Refused(format!(
        "{} is {kind}, not a regular file: reading it may block or never end; give --special to store what it yields",
        path.display()
    ))
    .into())
}

fn collect_folder(
    root: &Path,
    folder: &Path,
    prefix: &str,
    include_special: bool,
    sources: &mut Vec<PutSource>,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut entries: Vec<_> = std::fs::read_dir(folder)
        .map_err(|error| PutPlanError::local(folder, error))?
        .collect::<Result<_, _>>()
        .map_err(|error| PutPlanError::local(folder, error))?;
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let path = entry.path();
        let metadata =
            std::fs::metadata(&path).map_err(|error| PutPlanError::local(&path, error))?;
        if metadata.is_dir() {
            collect_folder(root, &path, prefix, include_special, sources)?;
            continue;
        }
        check_not_special(&path, &metadata, include_special)?;
        let relative = path.strip_prefix(root).expect("entries lie under the root");
        let parts: Option<Vec<&str>> = relative.iter().map(|part| part.to_str()).collect();
        let relative_name = parts
            .ok_or_else(|| {
                PutPlanError::Refused(format!("{}: a path component is not UTF-8", path.display()))
            })?
            .join(":");
        let name = format!("{prefix}:{relative_name}");
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
        if let Some(reason) = flashpipe_fs::new_name_problem(&source.name) {
            return Err(PutPlanError::Refused(format!(
                "{}: name {:?} is not valid in a store: {reason}",
                source.path.display(),
                source.name
            ))
            .into());
        }
        if !seen.insert(source.name.as_str()) {
            return Err(PutPlanError::Refused(format!(
                "two sources would both be named {:?}",
                source.name
            ))
            .into());
        }
    }
    Ok(())
}
