//! The handshake deadline: one thread per server closes every connection that has not
//! finished its handshake by its due time, counted from its accept. The deadline is
//! absolute, so a client that trickles one byte at a time holds its connection no longer
//! than a silent one. The protocol says when a handshake is done
//! ([`super::Admitted::handshake_done`]); until then the connection's entry carries its
//! due time.

use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Inner;

/// Longest sleep between looks at the stop flag (a stop also wakes the thread at once).
const TICK: Duration = Duration::from_millis(100);

/// Where a connection's handshake stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HandshakeClock {
    /// In the handshake, to finish by this time.
    Due(Instant),
    /// Finished (or the server sets no deadline).
    Done,
    /// Closed for lateness.
    Late,
}

impl HandshakeClock {
    /// The clock of a connection accepted now under `deadline`.
    pub(super) fn start(deadline: Option<Duration>) -> HandshakeClock {
        deadline.map_or(HandshakeClock::Done, |deadline| {
            HandshakeClock::Due(Instant::now() + deadline)
        })
    }
}

/// Marks connection `id`'s handshake done; false when its deadline passed already (it
/// is being closed) or it is gone.
pub(super) fn handshake_done(inner: &Inner, id: u64) -> bool {
    let mut connections = inner.connections();
    let Some(open) = connections.get_mut(&id) else {
        return false;
    };
    if open.handshake == HandshakeClock::Late {
        return false;
    }
    open.handshake = HandshakeClock::Done;
    true
}

/// Runs until the server stops: closes each connection still in its handshake at its
/// due time, after the protocol's `handshake_expired` hook. The hooks (which may write a
/// refusal) run with the connection table unlocked, so a slow peer stalls neither the
/// accept loop nor other connections' handshakes.
pub(super) fn close_late_handshakes(inner: &Inner) {
    let mut connections = inner.connections();
    while !inner.stopping.load(Ordering::SeqCst) {
        let now = Instant::now();
        let mut next_due: Option<Instant> = None;
        let mut late = Vec::new();
        for (id, open) in connections.iter_mut() {
            match open.handshake {
                HandshakeClock::Due(due) if due <= now => {
                    open.handshake = HandshakeClock::Late;
                    // A connection whose handle cannot be cloned is shut without its hook.
                    match open.reading.try_clone() {
                        Ok(handle) => late.push((*id, handle)),
                        Err(_) => drop(open.reading.shutdown(Shutdown::Both)),
                    }
                }
                HandshakeClock::Due(due) => {
                    next_due = Some(next_due.map_or(due, |next| next.min(due)));
                }
                HandshakeClock::Done | HandshakeClock::Late => {}
            }
        }
        if !late.is_empty() {
            drop(connections);
            for (id, handle) in late {
                inner.protocol.handshake_expired(&handle, id);
                // A connection its client closed already refuses the shutdown.
                let _ = handle.shutdown(Shutdown::Both);
            }
            connections = inner.connections();
            continue;
        }
        let wait = next_due
            .map_or(TICK, |due| due.saturating_duration_since(now))
            .min(TICK);
        connections = inner
            .connections_changed
            .wait_timeout(connections, wait)
            .unwrap_or_else(|poison| poison.into_inner())
            .0;
    }
}
