//! One owner per store: advisory `flock` locks on the store file and on every device file
//! or flash image (with its `.meta`) a store names, taken before a device is opened and
//! held until the store is closed ([`StoreLock`] releases them when dropped).
//!
//! A command that may change the store takes exclusive locks; a read-only command
//! (`ls`, `stat`, `cat`, `get`, `df`, `fsck` without repair) takes shared ones, so readers
//! run together and a writer runs alone. A second opener either fails at once with an
//! error naming the holder, or waits ([`LockWait::Wait`], the CLI's `--wait`).
//!
//! The holder is found in `/proc/locks`, which lists every `flock` lock with the process
//! that took it and the locked file's device and inode: it names shared holders as well
//! as the exclusive one, needs no sidecar file (so a reader writes nothing) and never goes
//! stale when a holder is killed, because the kernel drops a dead process's locks. The
//! holder's command line comes from `/proc/<pid>/cmdline`. Where either is unreadable the
//! message says the holder is unknown. Locks are taken in one order (store file first,
//! then devices sorted by path), so two waiting openers cannot deadlock each other.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// Whether an opener may change the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Readers: many at once, no writer meanwhile.
    Shared,
    /// A writer (or mkfs): alone.
    Exclusive,
}

impl LockMode {
    fn describe(self) -> &'static str {
        match self {
            LockMode::Shared => "shared",
            LockMode::Exclusive => "exclusive",
        }
    }

    fn operation(self) -> libc::c_int {
        match self {
            LockMode::Shared => libc::LOCK_SH,
            LockMode::Exclusive => libc::LOCK_EX,
        }
    }
}

/// What to do when another process holds a conflicting lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LockWait {
    /// Fail at once, naming the holder.
    #[default]
    Fail,
    /// Wait until the holder is done (telling the user once who is being waited for).
    Wait,
}

/// Why a store cannot be locked.
#[derive(Debug, thiserror::Error)]
pub enum StoreLockError {
    /// Another process holds a conflicting lock.
    #[error(
        "{path} is in use by {holder}; try again when it is done, or give --wait to wait for it"
    )]
    Held {
        /// The locked file (the store file or one of its devices).
        path: PathBuf,
        /// Who holds it: "pid N (command line)", or why that is unknown.
        holder: String,
    },
    /// The file to lock cannot be opened or locked.
    #[error("cannot lock {path} ({mode} lock): {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The lock asked for.
        mode: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// Locks held on a store's files; dropping it releases them.
#[derive(Debug)]
pub struct StoreLock {
    mode: LockMode,
    held: Vec<(PathBuf, File)>,
}

impl StoreLock {
    /// A lock holding nothing yet.
    pub fn new(mode: LockMode) -> StoreLock {
        StoreLock {
            mode,
            held: Vec::new(),
        }
    }

    /// The lock's mode.
    pub fn mode(&self) -> LockMode {
        self.mode
    }

    /// The files locked, in the order they were locked.
    pub fn paths(&self) -> Vec<&Path> {
        self.held.iter().map(|(path, _)| path.as_path()).collect()
    }

    /// Locks every existing file of `paths` (missing ones are skipped: mkfs creates them)
    /// in the given order, waiting or failing per `wait`. A file already locked by this
    /// guard is not locked twice.
    pub fn lock_all(&mut self, paths: &[PathBuf], wait: LockWait) -> Result<(), StoreLockError> {
        for path in paths {
            if self.held.iter().any(|(held, _)| held == path) || !path.exists() {
                continue;
            }
            let file = lock_file(path, self.mode, wait)?;
            self.held.push((path.clone(), file));
        }
        Ok(())
    }
}

impl Drop for StoreLock {
    /// Releases the locks in the reverse of the order they were taken (devices first, the
    /// store file last), so an opener that gets the store file finds the devices free.
    fn drop(&mut self) {
        while let Some((_, file)) = self.held.pop() {
            drop(file);
        }
    }
}

/// Times a lock found held is tried again when `/proc/locks` lists no holder (the holder
/// was releasing it at that moment).
const RELEASE_RACE_RETRIES: usize = 100;

/// Opens `path` and takes a `flock` lock of `mode` on it.
fn lock_file(path: &Path, mode: LockMode, wait: LockWait) -> Result<File, StoreLockError> {
    let io_error = |source| StoreLockError::Io {
        path: path.to_path_buf(),
        mode: mode.describe(),
        source,
    };
    let file = File::open(path).map_err(io_error)?;
    let mut holder = None;
    for _ in 0..RELEASE_RACE_RETRIES {
        if try_flock(&file, mode.operation() | libc::LOCK_NB).map_err(io_error)? {
            return Ok(file);
        }
        holder = describe_holder(&file);
        if holder.is_some() {
            break;
        }
        std::thread::yield_now();
    }
    let holder = holder.unwrap_or_else(|| {
        "another process (not listed in /proc/locks: another namespace?)".to_string()
    });
    if wait == LockWait::Fail {
        return Err(StoreLockError::Held {
            path: path.to_path_buf(),
            holder,
        });
    }
    eprintln!("waiting for {} (in use by {holder})", path.display());
    while !try_flock(&file, mode.operation()).map_err(io_error)? {}
    Ok(file)
}

/// Takes the lock; `Ok(false)` when a non-blocking attempt finds it held (or a blocking
/// one is interrupted by a signal, so the caller retries).
fn try_flock(file: &File, operation: libc::c_int) -> Result<bool, std::io::Error> {
    // SAFETY: flock on a descriptor this function's caller owns; no memory is shared.
    let status = unsafe { libc::flock(file.as_raw_fd(), operation) };
    if status == 0 {
        return Ok(true);
    }
    let error = std::io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EWOULDBLOCK) | Some(libc::EINTR) => Ok(false),
        _ => Err(error),
    }
}

/// "pid N (command line)" of a process holding a lock on `file`, from `/proc/locks`;
/// `None` when none is listed.
fn describe_holder(file: &File) -> Option<String> {
    let metadata = file.metadata().ok()?;
    let own_pid = std::process::id();
    let holders = std::fs::read_to_string("/proc/locks")
        .map(|text| lock_holders(&text, metadata.dev(), metadata.ino()))
        .unwrap_or_default();
    let other = holders.iter().copied().find(|&pid| pid != own_pid);
    match other {
        Some(pid) => Some(match process_command_line(pid) {
            Some(command) => format!("pid {pid} ({command})"),
            None => format!("pid {pid}"),
        }),
        None if holders.contains(&own_pid) => {
            Some("this process (the store is opened twice)".to_string())
        }
        None => None,
    }
}

/// The pids holding a `FLOCK` lock on the file of device `dev` and inode `ino`, from the
/// text of `/proc/locks` (lines `1: FLOCK  ADVISORY  WRITE 1234 fe:00:5334013 0 EOF`;
/// waiters, marked `->`, are skipped).
pub fn lock_holders(proc_locks: &str, dev: u64, ino: u64) -> Vec<u32> {
    let wanted = format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev));
    proc_locks
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.get(1) != Some(&"FLOCK") || fields.get(5) != Some(&wanted.as_str()) {
                return None;
            }
            fields.get(4)?.parse().ok()
        })
        .collect()
}

/// A process's command line, its arguments joined by spaces.
fn process_command_line(pid: u32) -> Option<String> {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let arguments: Vec<String> = bytes
        .split(|&byte| byte == 0)
        .filter(|argument| !argument.is_empty())
        .map(|argument| String::from_utf8_lossy(argument).into_owned())
        .collect();
    (!arguments.is_empty()).then(|| arguments.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_locks_lines_name_their_holders() {
        let text = "1: FLOCK  ADVISORY  WRITE 10795 fe:00:5334013 0 EOF\n\
                    2: FLOCK  ADVISORY  READ 200 fe:00:5334013 0 EOF\n\
                    3: -> FLOCK  ADVISORY  WRITE 300 fe:00:5334013 0 EOF\n\
                    4: POSIX  ADVISORY  WRITE 400 fe:00:5334013 0 EOF\n\
                    5: FLOCK  ADVISORY  WRITE 500 fe:00:99 0 EOF\n";
        let dev = libc::makedev(0xfe, 0);
        assert_eq!(lock_holders(text, dev, 5334013), vec![10795, 200]);
        assert!(lock_holders(text, dev, 1).is_empty());
    }

    #[test]
    fn a_second_exclusive_lock_is_refused_naming_this_process() {
        let path = std::env::temp_dir().join(format!("flashpipe-lock-{}", std::process::id()));
        let paths = vec![path.clone()];
        std::fs::write(&path, b"store").unwrap();
        let mut first = StoreLock::new(LockMode::Exclusive);
        first.lock_all(&paths, LockWait::Fail).unwrap();
        let mut second = StoreLock::new(LockMode::Shared);
        let error = second
            .lock_all(&paths, LockWait::Fail)
            .unwrap_err()
            .to_string();
        assert!(error.contains("this process"), "{error}");
        drop(first);
        second.lock_all(&paths, LockWait::Fail).unwrap();
        let mut third = StoreLock::new(LockMode::Shared);
        third.lock_all(&paths, LockWait::Fail).unwrap();
        std::fs::remove_file(&path).unwrap();
    }
}
