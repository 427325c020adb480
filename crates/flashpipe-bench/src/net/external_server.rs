//! `qemu-nbd` and `nbdkit` as `bench net` runs them: one process per listener (each takes
//! one), loopback TCP on a free port and a Unix socket, standard error logged in the
//! scratch folder so that a server that will not start is reported with its own words.

use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::served_disk::ServedDisk;
use super::{program_exists, unix_uri, RunningServer, Stop};
use crate::error::{io_with, BenchError, BenchErrorKind};
use crate::BenchResult;

/// Rounds of 50 ms to wait for an external server to accept connections.
const SERVER_READY_ROUNDS: u32 = 200;
/// Bytes of a failed server's log quoted in the error.
const LOG_TAIL_BYTES: usize = 600;

/// Starts `name` (qemu-nbd or nbdkit) serving `disk` on TCP and on `socket`; `None` when
/// the program is not installed. On failure every process started is ended.
pub(super) fn start(
    name: &str,
    disk: &ServedDisk,
    folder: &Path,
    socket: &Path,
) -> BenchResult<Option<RunningServer>> {
    if !program_exists(name) {
        return Ok(None);
    }
    let port = free_tcp_port()?;
    let address = format!("127.0.0.1:{port}");
    let mut children = Vec::new();
    let started = start_listener(name, disk, folder, Listener::Tcp(port), &mut children)
        .and_then(|()| {
            wait_until_ready(name, &mut children[0], &address, &mut || {
                TcpStream::connect(&address).is_ok()
            })
        })
        .and_then(|()| start_listener(name, disk, folder, Listener::Unix(socket), &mut children))
        .and_then(|()| {
            wait_until_ready(
                name,
                &mut children[1],
                &socket.display().to_string(),
                &mut || UnixStream::connect(socket).is_ok(),
            )
        });
    let server = RunningServer {
        tcp_uri: format!("nbd://{address}/disk"),
        unix_uri: unix_uri(socket),
        stop: Stop::Children(children.into_iter().map(|(child, _)| child).collect()),
    };
    match started {
        Ok(()) => Ok(Some(server)),
        Err(error) => {
            server.stop();
            Err(error)
        }
    }
}

/// Where one process listens.
#[derive(Clone, Copy)]
enum Listener<'a> {
    Tcp(u16),
    Unix(&'a Path),
}

/// A started process and its log.
type LoggedChild = (Child, PathBuf);

fn free_tcp_port() -> BenchResult<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

fn start_listener(
    name: &str,
    disk: &ServedDisk,
    folder: &Path,
    listener: Listener<'_>,
    children: &mut Vec<LoggedChild>,
) -> BenchResult {
    let transport = match listener {
        Listener::Tcp(_) => "tcp",
        Listener::Unix(_) => "unix",
    };
    let log_path = folder.join(format!("{name}-{}-{transport}.log", disk.kind().name()));
    let log = std::fs::File::create(&log_path)
        .map_err(io_with(format!("creating {}", log_path.display())))?;
    let mut command = Command::new(name);
    if name == "qemu-nbd" {
        command.args(["-f", "raw", "-x", "disk", "-t", "-e", "64"]);
        match listener {
            Listener::Unix(socket) => command.arg("-k").arg(socket),
            Listener::Tcp(port) => command.args(["-b", "127.0.0.1", "-p", &port.to_string()]),
        };
        disk.qemu_nbd_arguments(&mut command, folder)?;
    } else {
        command.args(["-f", "--exit-with-parent", "-e", "disk"]);
        match listener {
            Listener::Unix(socket) => command.arg("-U").arg(socket),
            Listener::Tcp(port) => command.args(["-i", "127.0.0.1", "-p", &port.to_string()]),
        };
        command.args(disk.nbdkit_plugin_arguments());
    }
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(io_with(format!("starting {name}")))?;
    children.push((child, log_path));
    Ok(())
}

/// Waits until `connects` succeeds; an error, quoting the log, when the process ended
/// first or never accepted.
fn wait_until_ready(
    name: &str,
    (child, log_path): &mut LoggedChild,
    place: &str,
    connects: &mut dyn FnMut() -> bool,
) -> BenchResult {
    for _ in 0..SERVER_READY_ROUNDS {
        if connects() {
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            return Err(BenchError::new(
                BenchErrorKind::Io(std::io::ErrorKind::ConnectionRefused),
                format!(
                    "{name} ended ({status}) before accepting connections on {place}: {}",
                    log_tail(log_path)
                ),
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(BenchError::new(
        BenchErrorKind::Io(std::io::ErrorKind::TimedOut),
        format!(
            "{name} never accepted connections on {place}: {}",
            log_tail(log_path)
        ),
    )
    .into())
}

/// The last bytes of a log, on one line.
fn log_tail(log_path: &Path) -> String {
    let text = std::fs::read_to_string(log_path).unwrap_or_default();
    let text = text.trim();
    if text.is_empty() {
        return "it printed nothing".to_string();
    }
    let start = text
        .char_indices()
        .map(|(index, _)| index)
        .find(|&index| text.len() - index <= LOG_TAIL_BYTES)
        .unwrap_or(0);
    text[start..].replace('\n', " | ")
}
