//! `flashpipe mount STORE DIR`: the store as a file system through FUSE (the
//! `flashpipe-mount` crate), reached as every store command reaches it (a
//! [`StoreSession`]: through its server when one runs, else opened here).
//!
//! The mount point is checked before the store is opened (missing, not a directory, not
//! empty, a mount point already: refused, nothing opened or changed). `--allow-other` is
//! refused unless the store's files let other users read them already (the store's access
//! rule, docs/security.md). Without `--foreground` the command starts itself again in the
//! foreground as a child in its own process group, relays its errors until the mount is up,
//! and returns; the child then writes nothing more (its output goes to /dev/null).
//!
//! `umount DIR`, `fusermount3 -u DIR`, SIGTERM or SIGINT unmount: every change is then
//! committed and the store closed (or the server's client disconnected). A store in the
//! flash-aware layout opened here then gets one more line: what this mount did to its
//! flash (`flash_counters`, text or `--json`). docs/mount.md is the user's guide.

use std::io::{BufRead, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use flashpipe_mount::{check_mount_point, DeviceCheck, MountError, MountOptions, MountTransport};
use flashpipe_net::StopSignals;
use flashpipe_store::flash_activity::FlashActivityHandle;
use flashpipe_store::store::device_files;
use flashpipe_store::store_lock::LockWait;
use flashpipe_store::{StoreAccess, StoreConfig};

use crate::error_kind::{ErrorKind, Failure};
use crate::nbd_cmd::flash_counters::{flash_aware_counters, write_json_line};
use crate::session::{SessionParts, SessionRequest, StoreSession, StoreTransport};
use crate::store_cmd::CliResult;

/// Set (to `1`) in the foreground child that a background `mount` starts: the child says
/// `ready` on standard output once mounted, then lets go of its output.
const READY_VARIABLE: &str = "FLASHPIPE_MOUNT_READY_PIPE";

/// The line a foreground child writes when its mount is up.
const READY_LINE: &str = "ready";

/// `flashpipe mount`.
#[derive(Debug, clap::Args)]
pub struct MountArgs {
    /// The store file written by `flashpipe mkfs`.
    pub store: PathBuf,
    /// The empty directory to mount the store on.
    pub directory: PathBuf,
    /// Let other local users use the mount (FUSE's allow_other): refused unless the store's
    /// files already let others read them (then others may read; write too when the files
    /// let others write). Non-root users need `user_allow_other` in /etc/fuse.conf.
    #[arg(long)]
    pub allow_other: bool,
    /// Stay in the foreground until unmounted (messages on standard error); without it the
    /// command returns once the mount is up and the mount runs in the background.
    #[arg(long)]
    pub foreground: bool,
    /// Wait for another command using the store to finish instead of failing.
    #[arg(long)]
    pub wait: bool,
    /// Say on standard error how the mount reaches the store (a server, or opened here).
    #[arg(short, long)]
    pub verbose: bool,
    /// Milliseconds a close may leave its commit waiting, so that closes in that time share
    /// one commit (0: each close commits before it returns; at most 60000). fsync always
    /// commits before it returns.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_COMMIT_DELAY_MS)]
    pub commit_delay_ms: u64,
    /// Mount read-only: every change is refused (`EROFS`). Opened here, the store is held
    /// under the shared lock its readers take (beside other readers, never a writer). A
    /// store served read-only (`flashpipe serve --read-only`) is always mounted read-only.
    #[arg(long)]
    pub read_only: bool,
    /// Files opened for reading only bypass the kernel's page cache (FUSE direct I/O): large
    /// reads faster, reads smaller than 128 KiB slower (one request each); files opened for
    /// writing only always do (docs/mount.md, "Speed").
    #[arg(long)]
    pub direct_reads: bool,
    /// At the unmount of a store in the flash-aware layout opened here, print what the
    /// mount did to its flash as one JSON object on standard error (`flash_counters`)
    /// instead of a text line.
    #[arg(long)]
    pub json: bool,
}

/// The default of `--commit-delay-ms`.
const DEFAULT_COMMIT_DELAY_MS: u64 = 100;

/// Runs `flashpipe mount`.
pub fn run(arguments: MountArgs) -> CliResult {
    if arguments.commit_delay_ms > flashpipe_mount::MAX_COMMIT_DELAY_MS {
        return Err(Failure::new(
            ErrorKind::Usage,
            format!(
                "--commit-delay-ms {} is too long; give at most {} (a minute), or 0 to commit at each close",
                arguments.commit_delay_ms,
                flashpipe_mount::MAX_COMMIT_DELAY_MS
            ),
        )
        .into());
    }
    check_mount_point(&arguments.directory).map_err(mount_failure)?;
    let others_may_write = if arguments.allow_other {
        others_access(&arguments.store)?
    } else {
        false
    };
    if !arguments.foreground {
        return run_in_background(&arguments);
    }
    let tell_parent = std::env::var(READY_VARIABLE).as_deref() == Ok("1");
    // a message to a standard error closed meanwhile must not end the mount uncommitted
    flashpipe_net::ignore_closed_pipes();
    let signals = StopSignals::install()?;
    let session = StoreSession::open(&SessionRequest {
        store_file: &arguments.store,
        access: StoreAccess::read_only_if(arguments.read_only),
        wait: if arguments.wait {
            LockWait::Wait
        } else {
            LockWait::Fail
        },
        verbose: arguments.verbose,
    })?;
    let mut options = MountOptions {
        mount_point: arguments.directory.clone(),
        source_name: arguments.store.display().to_string(),
        allow_other: arguments.allow_other,
        others_may_write,
        shared_store: false,
        wall_clock_times: !session.clock_is_virtual(),
        max_bytes_in_flight: u64::MAX,
        commit_delay_ms: arguments.commit_delay_ms,
        read_only: arguments.read_only,
        direct_reads: arguments.direct_reads,
    };
    let serve = Serve {
        arguments: &arguments,
        signals,
        tell_parent,
    };
    match session.into_parts() {
        SessionParts::InProcess { store, client } => {
            // the images are examined before each change of names and commit, as a server does
            let flash_activity = store.flash_activity();
            let store = Arc::new(store);
            let watched = Arc::clone(&store);
            let device_check: DeviceCheck = Box::new(move || {
                watched
                    .check_devices()
                    .map_err(|finding| finding.to_string())
            });
            let (client, result) = serve.run(client, &options, Some(device_check));
            drop(client);
            let finished = match Arc::try_unwrap(store) {
                Ok(store) => store.finish(result),
                Err(_) => Err(Failure::new(
                    ErrorKind::Internal,
                    "the mount still held the store when it ended; the store keeps its last commit",
                )
                .into()),
            };
            if let (Ok(()), Some(activity)) = (&finished, flash_activity) {
                report_flash_activity(&arguments, &activity);
            }
            finished
        }
        SessionParts::Served { client } => {
            options.shared_store = true;
            options.read_only |= client.server_info().read_only;
            options.max_bytes_in_flight = StoreTransport::max_bytes_in_flight(&client);
            serve.run(client, &options, None).1
        }
    }
}

/// What serving a mount needs besides the transport.
struct Serve<'a> {
    arguments: &'a MountArgs,
    signals: StopSignals,
    tell_parent: bool,
}

impl Serve<'_> {
    /// Mounts, serves until unmounted, commits; gives the transport back for the session
    /// to be closed.
    fn run<T: MountTransport>(
        self,
        transport: T,
        options: &MountOptions,
        device_check: Option<DeviceCheck>,
    ) -> (T, CliResult) {
        let mut mounted = match flashpipe_mount::mount(transport, options, device_check) {
            Ok(mounted) => mounted,
            Err((transport, error)) => return (transport, Err(mount_failure(error))),
        };
        let hidden = mounted.hidden_names();
        if !hidden.is_empty() {
            let shown: Vec<&str> = hidden.iter().take(5).map(String::as_str).collect();
            say(&format!(
                "note: {} store name(s) cannot be paths and are not shown in the mount (an empty `:` component, `.`, `..`, or a file named as a directory), such as {}; rename them with `flashpipe mv`",
                hidden.len(),
                shown.join(", ")
            ));
        }
        if self.arguments.verbose {
            match mounted.read_ahead_kib() {
                Some(kib) if kib < 1024 => say(&format!(
                    "the kernel reads ahead {kib} KiB at a time on this mount (root raises it to 1024 KiB, which reads large files faster)"
                )),
                Some(kib) => say(&format!("the kernel reads ahead {kib} KiB at a time on this mount")),
                None => {}
            }
        }
        let mut unmounter = mounted.unmounter();
        let directory = self.arguments.directory.clone();
        let signal_thread = self.signals.serve(move |signal| {
            say(&format!(
                "{}: unmounting {} and committing",
                flashpipe_net::signal_name(signal),
                directory.display()
            ));
            if let Err(error) = unmounter.unmount() {
                say(&format!(
                    "unmounting {} failed: {error}; unmount it with `fusermount3 -u {}`",
                    directory.display(),
                    directory.display()
                ));
            }
        });
        if self.tell_parent {
            let_go_of_output();
        } else {
            say(&format!(
                "{} mounted on {}{} (pid {}); `umount {}`, `fusermount3 -u {}` or SIGTERM unmounts and commits",
                self.arguments.store.display(),
                self.arguments.directory.display(),
                if options.read_only { " read-only" } else { "" },
                std::process::id(),
                self.arguments.directory.display(),
                self.arguments.directory.display()
            ));
        }
        let end = mounted.run();
        signal_thread.close();
        (end.transport, end.result.map_err(mount_failure))
    }
}

/// The stop line of a store in the flash-aware layout: what this mount did to its flash.
fn report_flash_activity(arguments: &MountArgs, activity: &FlashActivityHandle) {
    let activity = flashpipe_store::flash_activity::snapshot(activity);
    let (object, text) = flash_aware_counters(&arguments.store.display().to_string(), &activity);
    if arguments.json {
        write_json_line(&object);
    } else {
        say(&text);
    }
}

/// A line on standard error that may not fail (a background mount's goes nowhere).
fn say(message: &str) {
    let _ = writeln!(std::io::stderr(), "flashpipe mount: {message}");
}

/// In a background mount's child: errors from now on go nowhere (the parent that relayed
/// them returns), then `ready` tells the parent the mount is up.
fn let_go_of_output() {
    let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") else {
        return;
    };
    use std::os::fd::AsRawFd;
    // SAFETY: dup2 onto the process's own standard error, with a descriptor it owns.
    unsafe { libc::dup2(null.as_raw_fd(), libc::STDERR_FILENO) };
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "{READY_LINE}");
    let _ = stdout.flush();
    // SAFETY: as above, onto standard output, after the ready line is written.
    unsafe { libc::dup2(null.as_raw_fd(), libc::STDOUT_FILENO) };
}

/// Starts the mount again in the foreground as a child in its own process group, relays
/// what it says until the mount is up, and returns; when the child fails first, its
/// message and exit status are this command's.
fn run_in_background(arguments: &MountArgs) -> CliResult {
    let program = std::env::current_exe().map_err(|error| {
        format!("cannot find the flashpipe program to start the mount: {error}")
    })?;
    let mut command = std::process::Command::new(program);
    command
        .arg("mount")
        .arg(&arguments.store)
        .arg(&arguments.directory);
    command
        .arg("--foreground")
        .arg("--commit-delay-ms")
        .arg(arguments.commit_delay_ms.to_string());
    for (given, flag) in [
        (arguments.allow_other, "--allow-other"),
        (arguments.wait, "--wait"),
        (arguments.verbose, "--verbose"),
        (arguments.read_only, "--read-only"),
        (arguments.direct_reads, "--direct-reads"),
        (arguments.json, "--json"),
    ] {
        if given {
            command.arg(flag);
        }
    }
    command
        .env(READY_VARIABLE, "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0);
    let mut child = command
        .spawn()
        .map_err(|error| format!("cannot start the mount process: {error}"))?;
    let mut line = String::new();
    if let Some(stdout) = child.stdout.take() {
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
    }
    if line.trim_end() == READY_LINE {
        println!(
            "{} mounted on {} (pid {}); `umount {}` or `fusermount3 -u {}` unmounts and commits",
            arguments.store.display(),
            arguments.directory.display(),
            child.id(),
            arguments.directory.display(),
            arguments.directory.display()
        );
        return Ok(());
    }
    let mut said = Vec::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ = stderr.read_to_end(&mut said);
    }
    let status = child
        .wait()
        .map_err(|error| format!("waiting for the mount process: {error}"))?;
    let _ = std::io::stderr().write_all(&said);
    std::process::exit(status.code().unwrap_or(1).clamp(1, 255));
}

/// With `--allow-other`: whether the store's files let other users read them (refused
/// otherwise) and write them (then others may write through the mount too).
fn others_access(store: &Path) -> Result<bool, Box<dyn std::error::Error>> {
    let config = StoreConfig::load(store)?;
    let mut files = device_files(&config, store);
    files.push(store.to_path_buf());
    let mut others_write = true;
    for file in files {
        let Ok(metadata) = std::fs::metadata(&file) else {
            continue;
        };
        if !metadata.is_file() {
            continue;
        }
        let mode = metadata.permissions().mode();
        if mode & 0o004 == 0 {
            return Err(Failure::new(
                ErrorKind::Permission,
                format!(
                    "--allow-other would let other users use the mount, but the store's file {} (mode {:03o}) lets no one else read it; widen the store's files first (chmod o+r) or mount without --allow-other",
                    file.display(),
                    mode & 0o777
                ),
            )
            .into());
        }
        others_write &= mode & 0o002 != 0;
    }
    Ok(others_write)
}

/// A mount error with its kind.
fn mount_failure(error: MountError) -> Box<dyn std::error::Error> {
    let kind = match &error {
        MountError::MissingMountPoint { .. } => ErrorKind::NotFound,
        MountError::NotADirectory { .. } | MountError::NotEmpty { .. } => ErrorKind::InvalidInput,
        MountError::AlreadyMounted { .. } => ErrorKind::Exists,
        MountError::Mount { source, .. }
            if source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            ErrorKind::Permission
        }
        MountError::FinalCommit { errno } if *errno == libc::ENOSPC => ErrorKind::NoSpace,
        _ => ErrorKind::Io,
    };
    Failure::new(kind, error.to_string()).into()
}
