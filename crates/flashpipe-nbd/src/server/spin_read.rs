//! A connection's reader that polls its socket for a spin window before it blocks.
//!
//! At queue depth 1 a client sends its next request a few microseconds after it reads a
//! reply. A reader blocked in `recv` then costs a wake: on a 2-vCPU virtual machine the
//! server's idle vCPU halts, and the client's send has to wake it (an inter-processor
//! interrupt through the hypervisor, tens of microseconds; docs/design/27-nbd-qd1.md).
//! With a spin window ([`ServerConfig::spin`](super::ServerConfig), `--spin-us`) the
//! reader polls the socket for readability without blocking (`poll` with a zero timeout,
//! which takes no socket lock, so a packet arriving meanwhile is not pushed to the
//! socket's backlog) through the one wait strategy ([`flashpipe_base::Waiter`]: polls,
//! then a yield every few polls), then reads; it blocks in `recv` only when the window
//! passed with nothing. So its vCPU is awake when the request lands. A window of 0 (the
//! default) reads straight away, one blocking `recv`, as before: an idle server burns
//! nothing.
//!
//! A spinner pays only where a core would otherwise be idle. So readers spin only while
//! the server has at most as many connections in transmission as [`SpinSlots`] has slots
//! (half the machine's cores, at least one: one on 2 vCPUs), and at most that many spin
//! at once; otherwise they block at once, as with no window. Four readers spinning on
//! two vCPUs took the cores from the clients and from the readers with work (4 KiB QD1
//! over 4 connections fell to 0.6-0.75x of spinning none; docs/design/27-nbd-qd1.md).
//!
//! Everything a blocking read means is kept: end of stream (the client left, or the
//! server's graceful stop shut the read side) and an error make the socket readable, so
//! the window ends and the read reports them as it would have; the read after the window
//! keeps the socket's own timeouts.

use std::io::Read;
use std::os::unix::io::RawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use flashpipe_base::{WaitPolicy, Waiter};

use super::NbdStream;

/// How many readers may spin at once, server-wide.
#[derive(Debug)]
pub struct SpinSlots {
    taken: AtomicUsize,
    /// Connections in transmission (each holds a [`SpinningReader`]).
    connections: AtomicUsize,
    limit: usize,
}

impl SpinSlots {
    /// `limit` slots (at least one).
    pub fn new(limit: usize) -> SpinSlots {
        SpinSlots {
            taken: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            limit: limit.max(1),
        }
    }

    /// Half this machine's cores, at least one.
    pub fn for_this_machine() -> SpinSlots {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        SpinSlots::new(cores / 2)
    }

    /// Slots in all.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// A slot, held until the guard drops; `None` when every slot is taken or more
    /// connections are in transmission than there are slots.
    fn try_take(&self) -> Option<SpinSlot<'_>> {
        if self.connections.load(Ordering::Acquire) > self.limit {
            return None;
        }
        self.taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |taken| {
                (taken < self.limit).then_some(taken + 1)
            })
            .ok()
            .map(|_| SpinSlot { slots: self })
    }
}

/// A reader's permission to spin, given back on drop.
struct SpinSlot<'a> {
    slots: &'a SpinSlots,
}

impl Drop for SpinSlot<'_> {
    fn drop(&mut self) {
        self.slots.taken.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Reads a connection's stream, spinning on its socket first when the policy asks and
/// a slot is free.
pub struct SpinningReader<'a> {
    stream: &'a mut Box<dyn NbdStream>,
    waiter: Waiter,
    slots: Arc<SpinSlots>,
}

impl<'a> SpinningReader<'a> {
    /// A reader of `stream` that polls for `spin` before blocking, while it holds one
    /// of `slots`; it counts as a connection in transmission until dropped.
    pub fn new(
        stream: &'a mut Box<dyn NbdStream>,
        spin: WaitPolicy,
        slots: Arc<SpinSlots>,
    ) -> SpinningReader<'a> {
        slots.connections.fetch_add(1, Ordering::AcqRel);
        SpinningReader {
            stream,
            waiter: Waiter::new(spin),
            slots,
        }
    }
}

impl Drop for SpinningReader<'_> {
    fn drop(&mut self) {
        self.slots.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Read for SpinningReader<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        if !self.waiter.policy().parks_at_once() && !buffer.is_empty() {
            if let Some(_slot) = self.slots.try_take() {
                let socket = self.stream.raw_fd();
                // The park is the blocking read below.
                self.waiter
                    .wait(|| readable_now(socket).then_some(()), || ());
            }
        }
        self.stream.read(buffer)
    }
}

/// Whether a read of `socket` would not block now: bytes, end of stream or an error
/// (also when `poll` itself fails, so that the read reports it). A signal reads as not
/// yet.
fn readable_now(socket: RawFd) -> bool {
    let mut entry = libc::pollfd {
        fd: socket,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `entry` is one valid `pollfd` for the call's duration and the count is 1;
    // `socket` is the open descriptor of the stream the reader borrows mutably.
    let ready = unsafe { libc::poll(&mut entry, 1, 0) };
    if ready < 0 {
        return std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted;
    }
    ready > 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::Shutdown;
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    fn one_slot() -> Arc<SpinSlots> {
        Arc::new(SpinSlots::new(1))
    }

    fn pair() -> (Box<dyn NbdStream>, UnixStream) {
        let (server, client) = UnixStream::pair().expect("a socket pair");
        (Box::new(server), client)
    }

    /// What a reader with a window of `window_us` reads when the client sends `payload`
    /// `delay_ms` after the read starts.
    fn read_sent_after(delay_ms: u64, window_us: u32, payload: &'static [u8]) -> Vec<u8> {
        let (mut server, mut client) = pair();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(delay_ms));
            client.write_all(payload).expect("send");
            client
        });
        let mut reader =
            SpinningReader::new(&mut server, WaitPolicy::spin_us(window_us), one_slot());
        let mut bytes = [0u8; 16];
        let read = reader.read(&mut bytes).expect("read");
        drop(sender.join());
        bytes[..read].to_vec()
    }

    #[test]
    fn bytes_sent_during_the_window_are_read_without_blocking() {
        assert_eq!(read_sent_after(2, 10_000, b"request"), b"request");
    }

    #[test]
    fn after_an_empty_window_the_read_blocks_until_bytes_come() {
        assert_eq!(read_sent_after(30, 100, b"late"), b"late");
    }

    #[test]
    fn the_client_leaving_reads_as_end_of_stream_with_or_without_a_window() {
        for spin_us in [0, 10_000] {
            let (mut server, client) = pair();
            client.shutdown(Shutdown::Write).expect("shutdown");
            let mut reader =
                SpinningReader::new(&mut server, WaitPolicy::spin_us(spin_us), one_slot());
            let mut bytes = [0u8; 16];
            assert_eq!(reader.read(&mut bytes).expect("read"), 0, "spin {spin_us}");
        }
    }

    #[test]
    fn a_read_side_shut_by_the_server_ends_a_spinning_read() {
        let (mut server, _client) = pair();
        let closer = server.try_clone_stream().expect("clone");
        let stopper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(2));
            closer.shutdown_stream(Shutdown::Read).expect("shutdown");
        });
        let mut reader = SpinningReader::new(&mut server, WaitPolicy::spin_us(10_000), one_slot());
        let mut bytes = [0u8; 16];
        assert_eq!(reader.read(&mut bytes).expect("read"), 0);
        stopper.join().expect("stopper");
    }

    #[test]
    fn slots_bound_the_spinners_and_come_back_when_dropped() {
        let slots = SpinSlots::new(2);
        let first = slots.try_take().expect("a first slot");
        let second = slots.try_take().expect("a second slot");
        assert!(slots.try_take().is_none(), "a third spinner is refused");
        drop(first);
        assert!(
            slots.try_take().is_some(),
            "a slot given back is taken again"
        );
        drop(second);
        assert_eq!(SpinSlots::new(0).limit(), 1, "at least one slot");
        assert!(SpinSlots::for_this_machine().limit() >= 1);
    }

    #[test]
    fn more_connections_than_slots_spin_none() {
        let slots = Arc::new(SpinSlots::new(1));
        let (mut first, _first_client) = pair();
        let (mut second, _second_client) = pair();
        let one = SpinningReader::new(&mut first, WaitPolicy::spin_us(100), Arc::clone(&slots));
        assert!(
            slots.try_take().is_some(),
            "one connection, one slot: it spins"
        );
        let two = SpinningReader::new(&mut second, WaitPolicy::spin_us(100), Arc::clone(&slots));
        assert!(
            slots.try_take().is_none(),
            "two connections, one slot: none spins"
        );
        drop(two);
        assert!(slots.try_take().is_some(), "back to one connection");
        drop(one);
    }

    #[test]
    fn a_reader_without_a_slot_blocks_and_still_reads() {
        let (mut server, mut client) = pair();
        let slots = one_slot();
        let _held = slots.try_take().expect("the only slot");
        client.write_all(b"queued").expect("send");
        let mut reader =
            SpinningReader::new(&mut server, WaitPolicy::spin_us(10_000), Arc::clone(&slots));
        let mut bytes = [0u8; 16];
        let read = reader.read(&mut bytes).expect("read");
        assert_eq!(&bytes[..read], b"queued");
    }
}
