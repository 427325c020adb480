//! Kernel runs through a server never open a host path a client names.
//!
//! The options listed in `flashpipe_kernels::host_paths` name host paths. A client's
//! run naming one is refused with `HostPathOption` (the message names the option and
//! what to do instead), except a file option whose value is a plain relative name when
//! the server has a `--kernel-data` folder: the name is then resolved inside that
//! folder (no absolute path, no `..`, no symbolic link leading out of it). A sort spills
//! into the server's spill folder: `--spill-dir`, or by default a private folder (mode
//! 0700, a fresh name) the server makes at start and removes at stop; folders of killed
//! servers (this user's, their process gone) are removed at the next start.

use std::path::{Component, Path, PathBuf};

use flashpipe_kernels::host_paths::{host_path_options, HostPathUse};
use flashpipe_protocol::{ErrorCode, RemoteError, RunKernelRequest};

/// How the names of servers' private spill folders begin (then the server's pid).
const SPILL_FOLDER_PREFIX: &str = "flashpipe-spill-";

/// The server's folders for kernel runs.
pub(crate) struct KernelPaths {
    spill_dir: PathBuf,
    /// True while the server holds a spill folder it made (and removes at stop).
    spill_dir_owned: std::sync::atomic::AtomicBool,
    /// The kernel data folder, resolved (no symbolic links), when configured.
    kernel_data_dir: Option<PathBuf>,
}

/// Why the server's folders for kernel runs could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum KernelPathsError {
    /// A configured folder is missing or not a folder.
    #[error("{option} {path}: {reason}; give an existing folder")]
    BadFolder {
        /// The option.
        option: &'static str,
        /// The folder.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The private spill folder could not be made.
    #[error(
        "cannot make the server's private spill folder {path}: {source}; give one with --spill-dir"
    )]
    SpillFolder {
        /// The folder.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}

impl KernelPaths {
    /// Checks the configured folders, or makes the private spill folder.
    pub(crate) fn new(
        spill_dir: Option<&Path>,
        kernel_data_dir: Option<&Path>,
    ) -> Result<KernelPaths, KernelPathsError> {
        let kernel_data_dir = kernel_data_dir
            .map(|path| existing_folder("--kernel-data", path))
            .transpose()?;
        let (spill_dir, spill_dir_owned) = match spill_dir {
            Some(path) => (existing_folder("--spill-dir", path)?, false),
            None => (make_private_folder()?, true),
        };
        Ok(KernelPaths {
            spill_dir,
            spill_dir_owned: std::sync::atomic::AtomicBool::new(spill_dir_owned),
            kernel_data_dir,
        })
    }

    /// Removes the spill folder when the server made it (once).
    pub(crate) fn remove_owned(&self) {
        if self
            .spill_dir_owned
            .swap(false, std::sync::atomic::Ordering::AcqRel)
        {
            if let Err(error) = std::fs::remove_dir_all(&self.spill_dir) {
                tracing::warn!(folder = %self.spill_dir.display(), %error, "cannot remove the server's spill folder");
            }
        }
    }

    /// `run` with its options as the server runs them: host path options from the
    /// client refused or resolved in the kernel data folder, the spill folder the
    /// server's.
    pub(crate) fn server_side(
        &self,
        mut run: RunKernelRequest,
    ) -> Result<RunKernelRequest, RemoteError> {
        let mut options = Vec::with_capacity(run.options.len() + 1);
        for argument in &run.options {
            let Some((key, value)) = argument.split_once('=') else {
                options.push(argument.clone());
                continue;
            };
            let Some(listed) = host_path_options(&run.kernel).find(|listed| listed.key == key)
            else {
                options.push(argument.clone());
                continue;
            };
            match listed.path_use {
                HostPathUse::SpillFolder => return Err(refused(format!(
                    "option {key}= names a folder on the server's host, which a client may not do; leave it out: through a server the kernel spills into the server's own folder (flashpipe serve --spill-dir)"
                ))),
                HostPathUse::InputFile => {
                    let resolved = self.kernel_data_file(key, value)?;
                    options.push(format!("{key}={}", resolved.display()));
                }
            }
        }
        for listed in host_path_options(&run.kernel) {
            if listed.path_use == HostPathUse::SpillFolder {
                options.push(format!("{}={}", listed.key, self.spill_dir.display()));
            }
        }
        run.options = options;
        Ok(run)
    }

    /// The file named `name` inside the kernel data folder, or the refusal.
    fn kernel_data_file(&self, key: &str, name: &str) -> Result<PathBuf, RemoteError> {
        let Some(folder) = &self.kernel_data_dir else {
            return Err(refused(format!(
                "option {key}= names a file on the server's host, and this server reads such files only from its kernel data folder, which it does not have: start the server with --kernel-data DIR and name the file relative to it, or stop the server and run the kernel in process"
            )));
        };
        let relative = Path::new(name);
        let plain = !name.is_empty()
            && relative
                .components()
                .all(|component| matches!(component, Component::Normal(_)));
        if !plain {
            return Err(refused(format!(
                "option {key}={name}: through a server the file is named relative to the server's kernel data folder; an absolute path, '..' or an empty name is refused"
            )));
        }
        let joined = folder.join(relative);
        let resolved = joined.canonicalize().map_err(|error| {
            RemoteError::new(
                ErrorCode::BadKernelRun,
                format!("option {key}={name}: not found in the server's kernel data folder ({error}); put the file there first"),
            )
        })?;
        if !resolved.starts_with(folder) {
            return Err(refused(format!(
                "option {key}={name} leads out of the server's kernel data folder (a symbolic link); name a file inside it"
            )));
        }
        Ok(resolved)
    }
}

impl Drop for KernelPaths {
    /// A server that never reached its stop still removes the folder it made.
    fn drop(&mut self) {
        self.remove_owned();
    }
}

fn refused(message: String) -> RemoteError {
    RemoteError::new(ErrorCode::HostPathOption, message)
}

fn existing_folder(option: &'static str, path: &Path) -> Result<PathBuf, KernelPathsError> {
    let bad = |reason: String| KernelPathsError::BadFolder {
        option,
        path: path.to_path_buf(),
        reason,
    };
    let resolved = path
        .canonicalize()
        .map_err(|error| bad(error.to_string()))?;
    if !resolved.is_dir() {
        return Err(bad("not a folder".to_string()));
    }
    Ok(resolved)
}

/// Makes a fresh folder of mode 0700 under the system temporary folder (a name taken
/// already, even by another user's squatter, is never reused: creation must make it).
fn make_private_folder() -> Result<PathBuf, KernelPathsError> {
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::temp_dir();
    remove_stale_spill_folders(&base);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.subsec_nanos())
        .unwrap_or(0);
    let mut last_error = None;
    for attempt in 0..16u32 {
        let path = base.join(format!(
            "{SPILL_FOLDER_PREFIX}{}-{nanos:08x}-{attempt}",
            std::process::id()
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(path),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                last_error = Some((path, error));
            }
            Err(source) => return Err(KernelPathsError::SpillFolder { path, source }),
        }
    }
    let (path, source) = last_error.expect("every attempt found its name taken");
    Err(KernelPathsError::SpillFolder { path, source })
}

/// Removes the private spill folders of servers that were killed (their process is
/// gone): only folders (not links) named `flashpipe-spill-PID-...` owned by this user.
fn remove_stale_spill_folders(base: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    // SAFETY: geteuid(2) has no preconditions and touches no memory.
    let own_uid = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix(SPILL_FOLDER_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(metadata) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        let alive = Path::new(&format!("/proc/{pid}")).exists();
        if alive || !metadata.is_dir() || metadata.uid() != own_uid {
            continue;
        }
        match std::fs::remove_dir_all(entry.path()) {
            Ok(()) => {
                tracing::info!(folder = %entry.path().display(), "removed the spill folder of a server that was killed")
            }
            Err(error) => {
                tracing::warn!(folder = %entry.path().display(), %error, "cannot remove the spill folder of a server that was killed")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(kernel: &str, options: &[&str]) -> RunKernelRequest {
        RunKernelRequest {
            kernel: kernel.to_string(),
            options: options.iter().map(|option| option.to_string()).collect(),
            inputs: vec!["in".to_string()],
            output: None,
            replace_outputs: false,
            reader_count: 0,
            worker_count: 0,
        }
    }

    #[test]
    fn host_paths_are_refused_or_resolved_inside_the_kernel_data_folder() {
        let data =
            std::env::temp_dir().join(format!("flashpipe-kernel-data-{}", std::process::id()));
        std::fs::create_dir_all(&data).expect("a data folder");
        std::fs::write(data.join("q.f32"), [0u8; 8]).expect("a query file");
        let paths = KernelPaths::new(None, Some(&data)).expect("folders");
        let refused = paths
            .server_side(run("sort", &["temp_dir=/etc"]))
            .expect_err("refused");
        assert_eq!(refused.code, ErrorCode::HostPathOption);
        assert!(refused.message.contains("temp_dir="));
        let sorted = paths.server_side(run("sort", &[])).expect("a sort");
        assert!(sorted
            .options
            .iter()
            .any(|option| option.starts_with("temp_dir=") && option.contains("flashpipe-spill-")));
        for name in ["/etc/passwd", "../x", "a/../../x", ""] {
            let argument = format!("queries={name}");
            let refused = paths
                .server_side(run("knn", &[&argument]))
                .expect_err("refused");
            assert_eq!(refused.code, ErrorCode::HostPathOption, "{name}");
        }
        let resolved = paths
            .server_side(run("knn", &["queries=q.f32", "dimensions=2"]))
            .expect("resolved");
        assert!(
            resolved.options[0].ends_with("/q.f32") && resolved.options[0].starts_with("queries=/")
        );
        let spill = paths.spill_dir.clone();
        assert!(spill.is_dir());
        paths.remove_owned();
        assert!(!spill.exists(), "the private spill folder is removed");
        let no_data = KernelPaths::new(Some(&data), None).expect("folders");
        let refused = no_data
            .server_side(run("langid", &["profiles=p"]))
            .expect_err("refused");
        assert!(refused.message.contains("--kernel-data"));
        no_data.remove_owned();
        assert!(
            data.is_dir(),
            "a configured spill folder is the user's: kept"
        );
        let _ = std::fs::remove_dir_all(&data);
    }
}
