//! SIGINT and SIGTERM ask the server to stop: a thread (signal-hook's iterator, which
//! turns the asynchronous signal into an ordinary read on a self-pipe) calls the server's
//! stop handle on the first one; a second one ends the process at once with status 130,
//! leaving the store at its last commit (the file system is crash-safe).
//!
//! The handlers are installed before the store is opened, so a signal that arrives while
//! the server is starting is not lost: it is served as soon as the thread runs.

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};

/// Exit status after a second stop signal (128 + SIGINT, the shell's convention).
pub const FORCED_EXIT_STATUS: i32 = 130;

/// The installed handlers, before the thread that serves them starts.
pub struct StopSignals {
    signals: Signals,
}

/// The thread serving the handlers; [`StopSignalThread::close`] ends it.
pub struct StopSignalThread {
    handle: Handle,
    thread: std::thread::JoinHandle<()>,
}

/// A human name for a stop signal.
pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

impl StopSignals {
    /// Installs handlers for SIGINT and SIGTERM (signals arriving from now on are kept).
    pub fn install() -> std::io::Result<StopSignals> {
        Ok(StopSignals {
            signals: Signals::new([SIGINT, SIGTERM])?,
        })
    }

    /// Starts the thread: `stop` runs on the first signal (with its number), a second
    /// signal exits the process with [`FORCED_EXIT_STATUS`].
    pub fn serve(mut self, stop: impl FnOnce(i32) + Send + 'static) -> StopSignalThread {
        let handle = self.signals.handle();
        let thread = std::thread::Builder::new()
            .name("flashpipe-signals".to_string())
            .spawn(move || {
                let mut stop = Some(stop);
                for signal in self.signals.forever() {
                    match stop.take() {
                        Some(stop) => stop(signal),
                        None => {
                            tracing::warn!(
                                signal = signal_name(signal),
                                "second stop signal: exiting now without a clean unmount; the store keeps its last commit"
                            );
                            std::process::exit(FORCED_EXIT_STATUS);
                        }
                    }
                }
            })
            .expect("spawning the signal thread");
        StopSignalThread { handle, thread }
    }
}

impl StopSignalThread {
    /// Unregisters the handlers' iterator and joins the thread.
    pub fn close(self) {
        self.handle.close();
        if self.thread.join().is_err() {
            tracing::error!("the signal thread panicked");
        }
    }
}

/// Ignores SIGPIPE for the rest of the process (the CLI restores its default action for
/// `flashpipe ls | head`): a server writing to a client, an NBD peer or a standard output
/// that went away gets `EPIPE` on that one write and keeps serving everyone else.
pub fn ignore_closed_pipes() {
    // SAFETY: setting a signal's disposition to SIG_IGN has no preconditions; the
    // disposition is process-wide, so it holds for threads already running too.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}
