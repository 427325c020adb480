//! The committer: a thread that commits, a short while after a close, what the close left
//! uncommitted, so that a program closing many files pays one commit for all of them (as a
//! journaling file system commits its journal every few seconds), not one each. `fsync`
//! still commits before it returns; unmount commits last.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::state::{now_ns, State};
use crate::MountTransport;

/// Shortest and longest time between two looks at the state.
const TICK_MS_MIN: u64 = 2;
const TICK_MS_MAX: u64 = 50;

/// A running committer; [`Committer::stop`] ends it.
pub struct Committer {
    stop: Sender<()>,
    thread: JoinHandle<()>,
}

impl Committer {
    /// Starts the committer over `state` when closes may leave their commit to it
    /// (`commit_delay_ms` > 0); `None` otherwise.
    pub fn start<T: MountTransport>(
        state: &Arc<Mutex<State<T>>>,
        commit_delay_ms: u64,
    ) -> std::io::Result<Option<Committer>> {
        if commit_delay_ms == 0 {
            return Ok(None);
        }
        let tick = Duration::from_millis((commit_delay_ms / 2).clamp(TICK_MS_MIN, TICK_MS_MAX));
        let (stop, stopped) = mpsc::channel::<()>();
        let state = Arc::clone(state);
        let thread = std::thread::Builder::new()
            .name("flashpipe-mount-commit".to_string())
            .spawn(move || loop {
                match stopped.recv_timeout(tick) {
                    Err(RecvTimeoutError::Timeout) => state
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .commit_if_due(now_ns()),
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                }
            })?;
        Ok(Some(Committer { stop, thread }))
    }

    /// Ends the committer and waits for it (the state's last commit is the caller's).
    pub fn stop(self) {
        let _ = self.stop.send(());
        if self.thread.join().is_err() {
            crate::say("the commit thread ended with a panic; the last commit follows");
        }
    }
}
