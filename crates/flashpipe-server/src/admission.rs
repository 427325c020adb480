//! Who gets a place among a server's clients, and for how long a place may be held
//! without a handshake.
//!
//! Every accepted connection has an entry in one table, with the uid of the process
//! behind it (`SO_PEERCRED`), when it was accepted and whether it finished its hello.
//! A newcomer is admitted under two limits: the server's `max_clients` and one user's
//! share, `max_clients_per_uid`, so one local user cannot take every place. At either
//! limit the oldest connection that never finished its handshake (of the newcomer's own
//! user at the user's share; at the server's limit the newcomer's user's first, then
//! anyone's) is closed to make room;
//! only when there is none is the newcomer refused with a typed error frame. The
//! network runtime's handshake deadline (`flashpipe-net`, absolute from the accept)
//! closes each connection still without a handshake when the time limit passes, after
//! [`Admission::expire`] has written its refusal, so silent connections hold their
//! places for that long at most.
//!
//! An entry closed by eviction or at the deadline leaves the table at once (its place
//! is free for the newcomer); its connection thread, woken by the shut socket, then
//! finds its entry gone and releases nothing twice.

use std::collections::BTreeMap;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use flashpipe_protocol::{send_frame, ErrorCode, Frame, RemoteError};

/// How long the refusal of a late connection may take to write.
const REFUSAL_WRITE_LIMIT: Duration = Duration::from_millis(100);

/// One accepted connection's place.
struct Entry {
    uid: u32,
    accepted_at: Instant,
    handshaken: bool,
    /// A handle on the connection's socket, to shut it when the place is taken back.
    socket: UnixStream,
}

/// The table of places, shared by the accepting thread, the connections and the
/// runtime's deadline thread.
pub(crate) struct Admission {
    /// Entries by connection id; ids grow, so the first entry is the oldest.
    entries: Mutex<BTreeMap<u64, Entry>>,
    max_clients: usize,
    max_clients_per_uid: usize,
    handshake_timeout: Duration,
}

/// Why a connection's place was taken back.
#[derive(Clone, Copy)]
enum TakenBack {
    Evicted,
    TimedOut,
}

impl Admission {
    /// A table for `max_clients` places, at most `max_clients_per_uid` of them per user,
    /// each place without a handshake held for `handshake_timeout` at most.
    pub(crate) fn new(
        max_clients: usize,
        max_clients_per_uid: usize,
        handshake_timeout: Duration,
    ) -> Admission {
        assert!(max_clients >= 1 && max_clients_per_uid >= 1);
        Admission {
            entries: Mutex::new(BTreeMap::new()),
            max_clients,
            max_clients_per_uid,
            handshake_timeout,
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, Entry>> {
        self.entries
            .lock()
            .expect("no panic holding the admission table")
    }

    /// Gives connection `id` of user `uid` a place, closing the oldest connection without
    /// a handshake where that makes room; refuses with the limit's typed error otherwise.
    /// `clients_now` is set to the places held.
    pub(crate) fn admit(
        &self,
        id: u64,
        uid: u32,
        socket: UnixStream,
        clients_now: &AtomicUsize,
    ) -> Result<(), RemoteError> {
        let mut entries = self.lock();
        if entries.len() >= self.max_clients {
            // The newcomer's own user's silent connections go first, so a flood of
            // silent connections makes room from itself before it touches others'.
            let oldest_silent = oldest_without_handshake(&entries, |entry| entry.uid == uid)
                .or_else(|| oldest_without_handshake(&entries, |_| true));
            let Some(evicted) = oldest_silent else {
                let limit = self.max_clients;
                return Err(RemoteError::limit(
                    ErrorCode::TooManyClients,
                    format!("the server has {limit} clients, its limit; try again later"),
                    limit as u64,
                ));
            };
            take_back(&mut entries, evicted, TakenBack::Evicted);
        }
        let held_by_uid = entries.values().filter(|entry| entry.uid == uid).count();
        if held_by_uid >= self.max_clients_per_uid {
            let oldest_own = oldest_without_handshake(&entries, |entry| entry.uid == uid);
            let Some(evicted) = oldest_own else {
                let limit = self.max_clients_per_uid;
                return Err(RemoteError::limit(
                    ErrorCode::TooManyClientsForUser,
                    format!(
                        "user {uid} already holds {held_by_uid} of this server's connections, the most one user may hold (serve --max-clients-per-uid); close one of them or try again later"
                    ),
                    limit as u64,
                ));
            };
            take_back(&mut entries, evicted, TakenBack::Evicted);
        }
        let inserted = entries.insert(
            id,
            Entry {
                uid,
                accepted_at: Instant::now(),
                handshaken: false,
                socket,
            },
        );
        assert!(inserted.is_none(), "connection ids are never reused");
        clients_now.store(entries.len(), Ordering::Release);
        Ok(())
    }

    /// Notes that connection `id` finished its handshake (it is never closed as silent
    /// from now on); false when its place was already taken back.
    pub(crate) fn handshake_done(&self, id: u64) -> bool {
        match self.lock().get_mut(&id) {
            Some(entry) => {
                entry.handshaken = true;
                true
            }
            None => false,
        }
    }

    /// Gives back connection `id`'s place when it ends (nothing when it was taken back).
    pub(crate) fn release(&self, id: u64, clients_now: &AtomicUsize) {
        let mut entries = self.lock();
        entries.remove(&id);
        clients_now.store(entries.len(), Ordering::Release);
    }

    /// Connection `id` sent no hello within the handshake time limit (the runtime's
    /// deadline thread says so, then shuts it): writes it the typed refusal and frees
    /// its place at once.
    pub(crate) fn expire(&self, id: u64, clients_now: &AtomicUsize) {
        let mut entries = self.lock();
        let Some(late) = entries.get(&id) else {
            return;
        };
        if late.handshaken {
            return;
        }
        let limit_ms = self.handshake_timeout.as_millis() as u64;
        let error = RemoteError::limit(
            ErrorCode::HandshakeTimeout,
            format!(
                "no hello within {limit_ms} ms of connecting, the server's handshake time limit; connect again and send the hello at once"
            ),
            limit_ms,
        );
        let _ = late.socket.set_write_timeout(Some(REFUSAL_WRITE_LIMIT));
        let _ = send_frame(
            &late.socket,
            &Frame::Error {
                request_id: 0,
                error,
            },
        );
        take_back(&mut entries, id, TakenBack::TimedOut);
        clients_now.store(entries.len(), Ordering::Release);
    }
}

/// The oldest connection without a handshake among those `eligible` says.
fn oldest_without_handshake(
    entries: &BTreeMap<u64, Entry>,
    eligible: impl Fn(&Entry) -> bool,
) -> Option<u64> {
    entries
        .iter()
        .find(|(_, entry)| !entry.handshaken && eligible(entry))
        .map(|(id, _)| *id)
}

/// Removes connection `id` from the table and shuts its socket (its thread wakes, finds
/// its place gone and ends).
fn take_back(entries: &mut BTreeMap<u64, Entry>, id: u64, why: TakenBack) {
    let entry = entries
        .remove(&id)
        .expect("a connection taken back has a place");
    let held_ms = entry.accepted_at.elapsed().as_millis() as u64;
    match why {
        TakenBack::Evicted => tracing::warn!(
            connection = id,
            uid = entry.uid,
            held_ms,
            "closing a connection that never sent its hello, to make room for a newcomer"
        ),
        TakenBack::TimedOut => tracing::warn!(
            connection = id,
            uid = entry.uid,
            held_ms,
            "closing a connection that sent no hello within the handshake time limit"
        ),
    }
    let _ = entry.socket.shutdown(std::net::Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (UnixStream, UnixStream) {
        UnixStream::pair().expect("a socket pair")
    }

    #[test]
    fn a_user_at_its_share_is_refused_and_others_still_get_in() {
        let admission = Admission::new(4, 2, Duration::from_secs(60));
        let now = AtomicUsize::new(0);
        let mut keep = Vec::new();
        for id in 1..=2 {
            let (ours, theirs) = pair();
            admission
                .admit(id, 7, ours, &now)
                .expect("within the share");
            assert!(admission.handshake_done(id));
            keep.push(theirs);
        }
        let (ours, _theirs) = pair();
        let refused = admission
            .admit(3, 7, ours, &now)
            .expect_err("past the share");
        assert_eq!(refused.code, ErrorCode::TooManyClientsForUser);
        let (ours, _other) = pair();
        admission
            .admit(4, 8, ours, &now)
            .expect("another user gets in");
        assert_eq!(now.load(Ordering::Acquire), 3);
    }

    #[test]
    fn a_full_table_makes_room_by_closing_the_oldest_silent_connection() {
        let admission = Admission::new(2, 2, Duration::from_secs(60));
        let now = AtomicUsize::new(0);
        let (first, first_peer) = pair();
        admission.admit(1, 7, first, &now).expect("room");
        let (second, _second_peer) = pair();
        admission.admit(2, 8, second, &now).expect("room");
        let (third, _third_peer) = pair();
        admission
            .admit(3, 9, third, &now)
            .expect("the oldest silent one makes room");
        assert!(!admission.handshake_done(1), "the first was taken back");
        let mut byte = [0u8; 1];
        let read =
            std::io::Read::read(&mut &first_peer, &mut byte).expect("a shut socket reads its end");
        assert_eq!(read, 0);
        assert!(admission.handshake_done(2) && admission.handshake_done(3));
        let (fourth, _fourth_peer) = pair();
        let refused = admission
            .admit(4, 10, fourth, &now)
            .expect_err("no silent one left");
        assert_eq!(refused.code, ErrorCode::TooManyClients);
        admission.release(1, &now);
        assert_eq!(
            now.load(Ordering::Acquire),
            2,
            "releasing a taken-back place frees nothing twice"
        );
    }
}
