//! `flashpipe mount`: a store as a file system any program can use, through FUSE.
//!
//! The mount speaks the command set (`flashpipe_api::Transport`) and nothing else, so the
//! same code serves a store opened in this process (the engine's client) and a store held by
//! `flashpipe serve` (the server's client); the CLI opens the way and hands it here.
//! Directories are the `:` levels of the store's flat names (`a:b:c` is `a/b/c`), an empty
//! directory is kept by a marker file (`a:b:.flashpipe-dir`), and the store's all-or-nothing
//! commit happens at `fsync`, at `close` and at unmount (docs/mount.md states the rules).
//!
//! Why `fuser`: it is the maintained pure-Rust FUSE crate (the kernel protocol written in
//! Rust, mounting through `fusermount3` or `mount(2)` as root), so the build needs no
//! libfuse headers or C toolchain, and nothing here is `unsafe` but two plain libc calls
//! (`getuid`, and `umount2` for a lazy detach); libfuse3's bindings would add a C library
//! to the build for the same kernel protocol.
//!
//! Layer rule: an interface. It names only `flashpipe-api` (the command set) below it,
//! never the engine, the store crates or the client library; the CLI names it.

mod committer;
mod fs;
#[cfg(test)]
mod instant_store;
mod state;
mod tree;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use flashpipe_api::{CodedError, StreamPayloads, Transport};

pub use tree::{DIRECTORY_MARKER, SEPARATOR};

/// A line on standard error that may not fail: a background mount's standard error is
/// /dev/null, a foreground one's may be a pipe closed meanwhile.
pub(crate) fn say(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "flashpipe mount: {message}");
}

/// A way to a store the mount can use: a command-set transport whose payloads it can fill
/// and read, whose errors have codes and words, and which can move to the mount's thread
/// (with the write buffers it gives back, kept for later writes).
pub trait MountTransport:
    Transport<P: StreamPayloads<Write: Send, Read: Send>, Error: CodedError + std::fmt::Display>
    + Send
    + 'static
{
}

impl<T> MountTransport for T
where
    T: Transport + Send + 'static,
    T::P: StreamPayloads<Write: Send, Read: Send>,
    T::Error: std::fmt::Display,
{
}

/// How to mount.
#[derive(Debug, Clone)]
pub struct MountOptions {
    /// The empty directory to mount on.
    pub mount_point: PathBuf,
    /// What `mount` and `df` name as the source (the store file).
    pub source_name: String,
    /// Let other users than the mount's owner in (FUSE's `allow_other`); the caller has
    /// checked the store's access rule.
    pub allow_other: bool,
    /// With `allow_other`: whether others may write (else they may only read).
    pub others_may_write: bool,
    /// Whether other clients may change the store meanwhile (a served store): then each
    /// directory listing reads the store's names again.
    pub shared_store: bool,
    /// Whether file times from the store are wall-clock times (false on emulated flash,
    /// whose clock is virtual: files then show the mount's start).
    pub wall_clock_times: bool,
    /// Most bytes of writes this client may have in flight (the transport's limit).
    pub max_bytes_in_flight: u64,
    /// How long after a close the mount may wait before committing (milliseconds; closes
    /// within it share one commit); 0: each close commits before it returns.
    pub commit_delay_ms: u64,
    /// Mount read-only (FUSE's `ro`): the kernel refuses every change with `EROFS` before
    /// it reaches the mount, so no write is ever accepted and then lost.
    pub read_only: bool,
    /// Descriptors opened for reading only bypass the kernel's page cache too (FUSE's
    /// direct I/O): each read goes to the mount, whose bytes the kernel copies straight into
    /// the reader's buffer. Large reads are faster (one copy and no cached pages to fill);
    /// small reads are slower (a request each, no kernel read-ahead). Descriptors opened for
    /// writing only always bypass it; those opened for reading and writing never do.
    pub direct_reads: bool,
}

/// Threads serving FUSE requests (each with its own descriptor of the session).
const SERVING_THREADS: usize = 2;

/// The longest `commit_delay_ms` a mount accepts (a minute).
pub const MAX_COMMIT_DELAY_MS: u64 = 60_000;

/// Examines the store's device images before a change of names or a commit (the engine in
/// process: `RunningStore::check_devices`); `Err` says what changed, and from then on such
/// requests fail with `EIO` (a server does this check itself).
pub type DeviceCheck = Box<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Why a mount failed.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// The mount point does not exist.
    #[error("mount point {} does not exist; create an empty directory there first (mkdir)", path.display())]
    MissingMountPoint {
        /// The path.
        path: PathBuf,
    },
    /// The mount point is not a directory.
    #[error("mount point {} is not a directory; mount on an empty directory", path.display())]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// The mount point holds files.
    #[error("mount point {} is not empty; mount on an empty directory (nothing of it would be visible while mounted)", path.display())]
    NotEmpty {
        /// The path.
        path: PathBuf,
    },
    /// Something is mounted there already.
    #[error("{} is a mount point already (another file system, or this store mounted before); unmount it first (umount {})", path.display(), path.display())]
    AlreadyMounted {
        /// The path.
        path: PathBuf,
    },
    /// The mount point could not be examined.
    #[error("cannot examine the mount point {}: {source}", path.display())]
    Examine {
        /// The path.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The store could not be read before mounting.
    #[error("reading the store before mounting: {0}")]
    Store(String),
    /// FUSE refused the mount.
    #[error("mounting on {} failed: {source}; FUSE needs /dev/fuse and fusermount3 (Debian package fuse3)", path.display())]
    Mount {
        /// The mount point.
        path: PathBuf,
        /// What FUSE said.
        source: std::io::Error,
    },
    /// The FUSE session ended with an error.
    #[error("serving the mount on {} failed: {source}", path.display())]
    Serve {
        /// The mount point.
        path: PathBuf,
        /// What FUSE said.
        source: std::io::Error,
    },
    /// A device image of the store changed under the mount (deleted, or shrank): changes
    /// were refused from then on, and the store is closed without a last commit.
    #[error("a device image of the store changed while it was mounted: {finding}")]
    DeviceChanged {
        /// What the check found.
        finding: String,
    },
    /// The last commit at unmount failed.
    #[error("committing at unmount failed ({}); the store keeps its last commit (the reason is above)", std::io::Error::from_raw_os_error(*errno))]
    FinalCommit {
        /// The errno the commit failed with.
        errno: i32,
    },
}

impl MountError {
    /// The operating-system error inside, where there is one (for the CLI's error kinds).
    pub fn io_error(&self) -> Option<&std::io::Error> {
        match self {
            MountError::Examine { source, .. }
            | MountError::Mount { source, .. }
            | MountError::Serve { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Refuses a mount point that is missing, not a directory, not empty, or a mount point
/// already; checked before the store is opened, so a refusal changes nothing.
pub fn check_mount_point(path: &Path) -> Result<(), MountError> {
    let examine = |source| MountError::Examine {
        path: path.to_path_buf(),
        source,
    };
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(MountError::MissingMountPoint {
                path: path.to_path_buf(),
            })
        }
        Err(error) => return Err(examine(error)),
    };
    if !metadata.is_dir() {
        return Err(MountError::NotADirectory {
            path: path.to_path_buf(),
        });
    }
    let absolute = std::fs::canonicalize(path).map_err(examine)?;
    if let Some(parent) = absolute.parent() {
        use std::os::unix::fs::MetadataExt;
        let parent_metadata = std::fs::metadata(parent).map_err(examine)?;
        if parent_metadata.dev() != metadata.dev() {
            return Err(MountError::AlreadyMounted {
                path: path.to_path_buf(),
            });
        }
    }
    let mut entries = std::fs::read_dir(path).map_err(examine)?;
    if entries.next().is_some() {
        return Err(MountError::NotEmpty {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// Unmounts a running mount from another thread (a signal's); the mount's `run` then
/// commits and returns.
pub struct Unmounter {
    inner: fuser::SessionUnmounter,
    mount_point: PathBuf,
}

impl Unmounter {
    /// Detaches the mount (lazily, as `umount -l`: programs still using it keep it until
    /// they let go). `fuser` unmounts as root with a plain `umount(2)`, which refuses a
    /// mount in use (`EBUSY`: a file still open, or held for a moment by a process between
    /// its fork and exec); the mount is then detached lazily here.
    pub fn unmount(&mut self) -> std::io::Result<()> {
        match self.inner.unmount() {
            Err(error) if error.raw_os_error() == Some(libc::EBUSY) => {
                detach_lazily(&self.mount_point)
            }
            other => other,
        }
    }
}

/// `umount2(MNT_DETACH)` of `mount_point`, else `fusermount3 -u -z` (a user other than
/// root may not call the first).
fn detach_lazily(mount_point: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(mount_point.as_os_str().as_bytes())
        .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidInput, error))?;
    // SAFETY: umount2 reads the NUL-terminated path, which lives across the call.
    if unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } == 0 {
        return Ok(());
    }
    let status = std::process::Command::new("fusermount3")
        .arg("-u")
        .arg("-z")
        .arg("--")
        .arg(mount_point)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(libc::EBUSY))
    }
}

/// A store mounted and ready, not yet served.
pub struct Mounted<T: MountTransport> {
    session: fuser::Session<fs::MountFs<T>>,
    read_ahead: Option<u32>,
    state: Arc<Mutex<state::State<T>>>,
    mount_point: PathBuf,
    /// The mount point as an absolute path with no links, resolved before mounting (for a
    /// lazy detach; the mount point itself when it could not be resolved).
    detach_path: PathBuf,
    hidden: Vec<String>,
}

/// What a mount's end gives back: the transport (for the caller to close its session) and
/// how serving ended.
pub struct MountEnd<T> {
    /// The way to the store, every change committed when `result` is `Ok`.
    pub transport: T,
    /// How the mount ended.
    pub result: Result<(), MountError>,
}

/// Mounts the store reached by `transport` on `options.mount_point`, examining its device
/// images with `device_check` before each change of names and each commit; on failure the
/// transport comes back with the error.
#[allow(clippy::result_large_err)]
pub fn mount<T: MountTransport>(
    transport: T,
    options: &MountOptions,
    device_check: Option<DeviceCheck>,
) -> Result<Mounted<T>, (T, MountError)> {
    let state = match state::State::load(
        transport,
        options.wall_clock_times,
        options.max_bytes_in_flight,
    ) {
        Ok(mut state) => {
            state.device_check = device_check;
            state.commit_delay_ns = options.commit_delay_ms.min(MAX_COMMIT_DELAY_MS) * 1_000_000;
            // another client of a served store sees a write once it is sent
            state.stage_small_writes = !options.shared_store;
            state
        }
        Err((transport, message)) => return Err((transport, MountError::Store(message))),
    };
    let hidden = state.tree.hidden().to_vec();
    let state = Arc::new(Mutex::new(state));
    let filesystem = fs::MountFs::new(Arc::clone(&state), options);
    let mut mount_options = vec![
        fuser::MountOption::FSName(options.source_name.clone()),
        fuser::MountOption::Subtype("flashpipe".to_string()),
        fuser::MountOption::DefaultPermissions,
        fuser::MountOption::NoDev,
        fuser::MountOption::NoSuid,
        if options.read_only {
            fuser::MountOption::RO
        } else {
            fuser::MountOption::RW
        },
    ];
    if options.allow_other {
        mount_options.push(fuser::MountOption::CUSTOM("allow_other".to_string()));
    }
    let mut config = fuser::Config::default();
    config.mount_options = mount_options;
    // one thread reads the next request from the kernel (a copy of up to 1 MiB) and answers
    // a read (another copy) while the other is in the state's lock
    config.n_threads = Some(SERVING_THREADS);
    config.clone_fd = true;
    config.acl = if options.allow_other {
        fuser::SessionACL::All
    } else {
        fuser::SessionACL::Owner
    };
    let canonical_mount_point = std::fs::canonicalize(&options.mount_point).ok();
    match fuser::Session::new(filesystem, &options.mount_point, &config) {
        Ok(session) => Ok(Mounted {
            read_ahead: raise_read_ahead(canonical_mount_point.as_deref()),
            session,
            state,
            mount_point: options.mount_point.clone(),
            detach_path: canonical_mount_point
                .clone()
                .unwrap_or_else(|| options.mount_point.clone()),
            hidden,
        }),
        Err(source) => {
            let error = MountError::Mount {
                path: options.mount_point.clone(),
                source,
            };
            Err((take_transport(state), error))
        }
    }
}

/// Read-ahead asked of the kernel for the mount (FUSE's `max_readahead`, in KiB).
pub(crate) const READ_AHEAD_KIB: u32 = 1024;

/// Raises the read-ahead of the mount's own backing device (`/sys/class/bdi/MAJOR:MINOR`,
/// made for this mount and gone with it) to [`READ_AHEAD_KIB`]: the kernel caps FUSE's
/// `max_readahead` at that device's setting, 128 KiB by default, so files are otherwise read
/// in 128 KiB requests. Only root may write it; the KiB in force are returned either way
/// (`None` when they cannot be read).
fn raise_read_ahead(canonical_mount_point: Option<&Path>) -> Option<u32> {
    // the device number from the mount table: a stat of the mount point (or a path
    // resolved through it) would wait for the file system, which serves no request before
    // its session runs
    let device = mount_device(canonical_mount_point?)?;
    let setting = PathBuf::from(format!("/sys/class/bdi/{device}/read_ahead_kb"));
    let _ = std::fs::write(&setting, READ_AHEAD_KIB.to_string());
    std::fs::read_to_string(&setting).ok()?.trim().parse().ok()
}

/// `MAJOR:MINOR` of the file system mounted last on `mount_point` (an absolute path with
/// no links, resolved before mounting), from /proc/self/mountinfo (its third field; the
/// fifth is the mount point, with space, tab, newline and backslash as octal escapes).
fn mount_device(mount_point: &Path) -> Option<String> {
    let escaped = mount_point
        .to_str()?
        .replace('\\', "\\134")
        .replace(' ', "\\040")
        .replace('\t', "\\011")
        .replace('\n', "\\012");
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    table.lines().rev().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        (fields.get(4) == Some(&escaped.as_str()))
            .then(|| fields.get(2).map(|device| device.to_string()))
            .flatten()
    })
}

/// The transport out of the state once the file system has let go of it.
fn take_transport<T: MountTransport>(state: Arc<Mutex<state::State<T>>>) -> T {
    let state = match Arc::try_unwrap(state) {
        Ok(state) => state,
        Err(_) => panic!("the file system let go of the state when its session ended"),
    };
    state
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .transport
}

impl<T: MountTransport> Mounted<T> {
    /// A handle that unmounts from another thread.
    pub fn unmounter(&mut self) -> Unmounter {
        Unmounter {
            mount_point: self.detach_path.clone(),
            inner: self.session.unmount_callable(),
        }
    }

    /// The kernel's read-ahead for the mount, in KiB (raised to 1024 when run as root;
    /// 128 otherwise), when it could be read.
    pub fn read_ahead_kib(&self) -> Option<u32> {
        self.read_ahead
    }

    /// Store names the mount does not show (an empty `:` component, `.`, `..`, a file whose
    /// name is also a directory's).
    pub fn hidden_names(&self) -> &[String] {
        &self.hidden
    }

    /// Serves requests until the mount is unmounted (`umount`, `fusermount3 -u`, or the
    /// [`Unmounter`]), then commits every change and gives the transport back.
    pub fn run(self) -> MountEnd<T> {
        let Mounted {
            session,
            state,
            mount_point,
            ..
        } = self;
        let delay_ms = state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .commit_delay_ns
            / 1_000_000;
        let committer = match committer::Committer::start(&state, delay_ms) {
            Ok(committer) => committer,
            Err(error) => {
                say(&format!(
                    "cannot start the commit thread ({error}); each close commits before it returns"
                ));
                state
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .commit_delay_ns = 0;
                None
            }
        };
        if committer.is_none() {
            // no thread to send staged writes within their age bound
            state
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .stage_small_writes = false;
        }
        let served = session.run();
        if let Some(committer) = committer {
            committer.stop();
        }
        let (committed, device_changed) = {
            let mut state = state
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            (state.commit(None), state.device_changed.clone())
        };
        let transport = take_transport(state);
        let result = match (served, committed, device_changed) {
            (_, _, Some(finding)) => Err(MountError::DeviceChanged { finding }),
            (_, Err(errno), None) => Err(MountError::FinalCommit { errno }),
            (Err(source), Ok(()), None) => Err(MountError::Serve {
                path: mount_point,
                source,
            }),
            (Ok(()), Ok(()), None) => Ok(()),
        };
        MountEnd { transport, result }
    }
}
