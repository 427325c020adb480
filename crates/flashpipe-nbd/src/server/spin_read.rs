//! A connection's reader that polls its socket for a window before it blocks.
//!
//! At queue depth 1 a client sends its next request a few microseconds after it reads a
//! reply. A reader blocked in `recv` then costs a wake: on a 2-vCPU virtual machine the
//! server's idle vCPU halts, and the client's send has to wake it (an inter-processor
//! interrupt through the hypervisor, tens of microseconds; docs/design/27-nbd-qd1.md).
//! With a reader window ([`ReaderWindow`], `ServerConfig::reader_window`,
//! `--reader-window-us`) the reader polls the socket for readability without blocking
//! (`poll` with a zero timeout, which takes no socket lock, so a packet arriving meanwhile
//! is not pushed to the socket's backlog) through the one wait strategy
//! ([`flashpipe_base::Waiter`]: polls, then a yield every few polls), then reads; it blocks
//! in `recv` only when the window passed with nothing. So its vCPU is awake when the
//! request lands. A window of 0 reads straight away, one blocking `recv`. The reader spins
//! only while its waits fit the window: after a window that passed empty it reads with
//! timed blocking reads until one wait ends within the window (as KVM's halt polling
//! does), so a client whose requests come further apart than the window (1 MiB replies
//! every ~500 us, a paused client) costs no spinning. Nor does a TCP reader spin while its
//! client sends from the reader's own CPU (`client_on_this_cpu`).
//!
//! The window is apart from the hand-off spin (`ServerConfig::spin`, `--spin-us`: the
//! device workers and reply writers polling their queues): the window saves the wake a
//! queue-depth-1 request costs, where spinning the hand-offs too costs the deeper queues and
//! the 1 MiB rows on 2 vCPUs (docs/design/27-nbd-qd1.md). By default ([`ReaderWindow::Auto`])
//! the window is [`DEFAULT_READER_WINDOW_US`] on a machine of at least
//! [`READER_WINDOW_MIN_CORES`] cores and 0 below, and the hand-offs park at once.
//!
//! A spinner pays only where a core would otherwise be idle: readers spin only while they
//! hold a slot ([`super::reader_slots`]: at most half the cores spin at once, in the process
//! and on the machine, and none while more connections are in transmission than there are
//! slots); otherwise they block at once, as with no window.
//!
//! Everything a blocking read means is kept: end of stream (the client left, or the
//! server's graceful stop shut the read side) and an error make the socket readable, so
//! the window ends and the read reports them as it would have; the read after the window
//! keeps the socket's own timeouts.

use std::io::Read;
use std::os::unix::io::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flashpipe_base::wait::{WaitPolicyError, Waited};
use flashpipe_base::{WaitPolicy, Waiter};

use super::reader_slots::{self, SlotHolder, SpinSlots};
use super::NbdStream;

/// The reader window a machine of at least [`READER_WINDOW_MIN_CORES`] cores gets by
/// default, in microseconds: it covers a queue-depth-1 client's turn-around (fio's 4 KiB
/// requests: 10-30 us) many times over, and an idle connection gives its core back after it.
pub const DEFAULT_READER_WINDOW_US: u32 = 200;

/// Cores a machine needs for the default window: with one core a spinner only delays the
/// client it waits for.
pub const READER_WINDOW_MIN_CORES: usize = 2;

/// How long a connection's reader polls its socket before it blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ReaderWindow {
    /// [`DEFAULT_READER_WINDOW_US`] on a machine of at least [`READER_WINDOW_MIN_CORES`]
    /// cores, else 0.
    #[default]
    Auto,
    /// This window (0: block at once).
    Fixed(WaitPolicy),
}

impl ReaderWindow {
    /// The window on a machine of `cores` cores.
    pub fn for_cores(self, cores: usize) -> WaitPolicy {
        match self {
            ReaderWindow::Fixed(window) => window,
            ReaderWindow::Auto if cores >= READER_WINDOW_MIN_CORES => {
                WaitPolicy::spin_us(DEFAULT_READER_WINDOW_US)
            }
            ReaderWindow::Auto => WaitPolicy::PARK,
        }
    }

    /// The window on this machine.
    pub fn for_this_machine(self) -> WaitPolicy {
        self.for_cores(reader_slots::cores())
    }

    /// `auto` or a whole number of microseconds, 0 to `flashpipe_base::wait::MAX_SPIN_US`.
    pub fn parse(text: &str) -> Result<ReaderWindow, ReaderWindowError> {
        if text.trim() == "auto" {
            return Ok(ReaderWindow::Auto);
        }
        WaitPolicy::parse(text)
            .map(ReaderWindow::Fixed)
            .map_err(|reason| ReaderWindowError { reason })
    }
}

impl std::str::FromStr for ReaderWindow {
    type Err = ReaderWindowError;

    fn from_str(text: &str) -> Result<ReaderWindow, ReaderWindowError> {
        ReaderWindow::parse(text)
    }
}

impl std::fmt::Display for ReaderWindow {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReaderWindow::Auto => write!(formatter, "auto"),
            ReaderWindow::Fixed(window) => write!(formatter, "{window}"),
        }
    }
}

/// A reader window refused: not `auto`, not a number, or too long.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}; or \"auto\" for {DEFAULT_READER_WINDOW_US} on {READER_WINDOW_MIN_CORES} cores or more")]
pub struct ReaderWindowError {
    /// Why the number was refused.
    pub reason: WaitPolicyError,
}

/// Reads a connection's stream, polling its socket first while the window is on and the
/// reader holds a slot.
pub struct SpinningReader<'a> {
    stream: &'a mut Box<dyn NbdStream>,
    waiter: Waiter,
    slot: SlotHolder,
    /// Whether the last wait for bytes ended within the window (a spin would have caught
    /// it): only then does the next wait spin.
    last_wait_fit: bool,
}

impl<'a> SpinningReader<'a> {
    /// A reader of `stream` that polls for `window` before blocking, while it holds one
    /// of `slots`; it counts as a connection in transmission until dropped.
    pub fn new(
        stream: &'a mut Box<dyn NbdStream>,
        window: WaitPolicy,
        slots: &Arc<SpinSlots>,
    ) -> SpinningReader<'a> {
        SpinningReader {
            stream,
            waiter: Waiter::new(window),
            slot: SlotHolder::new(slots),
            last_wait_fit: true,
        }
    }

    /// Spins through the window, then reads; a window that passed empty gives the slot
    /// back and turns spinning off until a wait fits again.
    fn spin_then_read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let socket = self.stream.raw_fd();
        // The park is the blocking read below.
        let ((), waited) = self
            .waiter
            .wait(|| readable_now(socket).then_some(()), || ());
        if waited == Waited::Parked {
            self.slot.release();
            self.last_wait_fit = false;
        }
        self.stream.read(buffer)
    }

    /// Reads at once (blocking), noting whether the wait would have fit the window.
    fn timed_read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let started = Instant::now();
        let read = self.stream.read(buffer);
        let window = Duration::from_micros(u64::from(self.waiter.policy().window_us()));
        self.last_wait_fit = started.elapsed() <= window;
        read
    }
}

impl Read for SpinningReader<'_> {
    /// With a window, a wait spins only while the waits before it fit the window (a client
    /// at queue depth 1); a client whose requests come further apart than the window (1 MiB
    /// replies, a paused client) is read with one blocking `recv` a request, timed, so a
    /// spin starts again as soon as one wait fits.
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        if self.waiter.policy().parks_at_once() || buffer.is_empty() {
            return self.stream.read(buffer);
        }
        let socket = self.stream.raw_fd();
        if self.last_wait_fit && !client_on_this_cpu(socket) && self.slot.may_spin() {
            return self.spin_then_read(buffer);
        }
        self.slot.release();
        self.timed_read(buffer)
    }
}

/// Whether the client's last packet was taken in on the CPU this thread runs on: TCP
/// records that CPU (`SO_INCOMING_CPU`), and over loopback it is the CPU the client sent
/// from. A reader spinning there would hold the very CPU the client needs to send its next
/// request, so it blocks instead (the two then hand the CPU back and forth, the fast case
/// of docs/design/27-nbd-qd1.md). Unknown (a Unix socket, TLS's pump, an error) reads as no.
fn client_on_this_cpu(socket: RawFd) -> bool {
    let mut cpu: libc::c_int = -1;
    let mut length = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `cpu` and `length` are valid for writes for the call's duration and
    // `length` is the size of `cpu`; `socket` is the open descriptor of the stream the
    // reader borrows mutably.
    let result = unsafe {
        libc::getsockopt(
            socket,
            libc::SOL_SOCKET,
            libc::SO_INCOMING_CPU,
            std::ptr::addr_of_mut!(cpu).cast(),
            &mut length,
        )
    };
    if result != 0 || cpu < 0 {
        return false;
    }
    // SAFETY: no arguments; it returns this thread's CPU or -1.
    let here = unsafe { libc::sched_getcpu() };
    here == cpu
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
            SpinningReader::new(&mut server, WaitPolicy::spin_us(window_us), &one_slot());
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
                SpinningReader::new(&mut server, WaitPolicy::spin_us(spin_us), &one_slot());
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
        let mut reader = SpinningReader::new(&mut server, WaitPolicy::spin_us(10_000), &one_slot());
        let mut bytes = [0u8; 16];
        assert_eq!(reader.read(&mut bytes).expect("read"), 0);
        stopper.join().expect("stopper");
    }

    #[test]
    fn a_reader_holds_its_slot_while_windows_catch_requests_and_gives_it_back_when_idle() {
        let (mut server, mut client) = pair();
        let slots = one_slot();
        let mut reader = SpinningReader::new(&mut server, WaitPolicy::spin_us(10_000), &slots);
        let mut bytes = [0u8; 16];
        for request in [&b"first"[..], b"second"] {
            client.write_all(request).expect("send");
            assert_eq!(reader.read(&mut bytes).expect("read"), request.len());
            assert!(
                reader.slot.holds(),
                "a window that caught a request keeps the slot"
            );
            assert!(slots.try_take().is_none(), "held across reads");
        }
    }

    #[test]
    fn an_empty_window_gives_the_slot_back_before_blocking() {
        let (mut server, client) = pair();
        let slots = one_slot();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(60));
            let mut client = client;
            client.write_all(b"late").expect("send");
            client
        });
        let mut reader = SpinningReader::new(&mut server, WaitPolicy::spin_us(5_000), &slots);
        let mut bytes = [0u8; 16];
        assert_eq!(reader.read(&mut bytes).expect("read"), 4);
        assert!(
            !reader.slot.holds(),
            "the window passed empty: the slot went back"
        );
        assert!(!reader.last_wait_fit, "and the next wait does not spin");
        let mut client = sender.join().expect("sender");
        client.write_all(b"soon").expect("send");
        assert_eq!(reader.read(&mut bytes).expect("read"), 4);
        assert!(!reader.slot.holds(), "a blocking read takes no slot");
        assert!(
            reader.last_wait_fit,
            "a wait within the window turns spinning on"
        );
        client.write_all(b"next").expect("send");
        assert_eq!(reader.read(&mut bytes).expect("read"), 4);
        assert!(reader.slot.holds(), "spinning again");
    }

    #[test]
    fn waits_longer_than_the_window_keep_the_reader_blocking() {
        let (mut server, mut client) = pair();
        let slots = one_slot();
        let mut reader = SpinningReader::new(&mut server, WaitPolicy::spin_us(100), &slots);
        reader.last_wait_fit = false;
        let mut bytes = [0u8; 16];
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            client.write_all(b"slow").expect("send");
            client
        });
        assert_eq!(reader.read(&mut bytes).expect("read"), 4);
        assert!(!reader.last_wait_fit, "a 20 ms wait does not fit 100 us");
        assert!(!reader.slot.holds(), "no slot taken");
        drop(sender.join());
    }

    #[test]
    fn the_automatic_window_needs_two_cores_and_text_names_every_setting() {
        assert_eq!(ReaderWindow::Auto.for_cores(1), WaitPolicy::PARK);
        assert_eq!(
            ReaderWindow::Auto.for_cores(2),
            WaitPolicy::spin_us(DEFAULT_READER_WINDOW_US)
        );
        let fixed = ReaderWindow::Fixed(WaitPolicy::PARK);
        assert_eq!(fixed.for_cores(64), WaitPolicy::PARK);
        assert_eq!(ReaderWindow::parse("auto"), Ok(ReaderWindow::Auto));
        assert_eq!(
            ReaderWindow::parse("50"),
            Ok(ReaderWindow::Fixed(WaitPolicy::spin_us(50)))
        );
        for text in ["auto".to_string(), "0".to_string(), "200".to_string()] {
            assert_eq!(ReaderWindow::parse(&text).unwrap().to_string(), text);
        }
        for hostile in ["10001", "-1", "soon", "", "18446744073709551616", "Auto"] {
            let error = ReaderWindow::parse(hostile).unwrap_err().to_string();
            assert!(error.contains("\"auto\""), "{hostile}: {error}");
        }
        assert!(ReaderWindow::parse("10001")
            .unwrap_err()
            .to_string()
            .contains("at most 10000"));
    }

    /// Pins this thread to `cpu`; false where the machine or the sandbox does not allow it.
    fn pin_to(cpu: usize) -> bool {
        // SAFETY: `set` is a valid, zeroed CPU set for the calls' duration.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) == 0
        }
    }

    #[test]
    fn a_tcp_client_sending_from_the_readers_cpu_is_seen_there_and_a_unix_one_never() {
        let (unix_server, mut unix_client) = pair();
        unix_client.write_all(b"x").expect("send");
        assert!(
            !client_on_this_cpu(unix_server.raw_fd()),
            "unknown on a Unix socket"
        );
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().expect("accept");
        let socket = std::os::unix::io::AsRawFd::as_raw_fd(&server);
        let cores = reader_slots::cores();
        let pinned = std::thread::spawn(move || {
            if !pin_to(0) {
                return None;
            }
            client.write_all(b"request").expect("send");
            let here = client_on_this_cpu(socket);
            let elsewhere = cores >= 2 && pin_to(1) && client_on_this_cpu(socket);
            Some((here, elsewhere))
        });
        if let Some((here, elsewhere)) = pinned.join().expect("pinned thread") {
            assert!(here, "sent from CPU 0, looked at from CPU 0");
            assert!(!elsewhere, "looked at from CPU 1");
        }
        drop(server);
    }

    #[test]
    fn a_reader_without_a_slot_blocks_and_still_reads() {
        let (mut server, mut client) = pair();
        let slots = one_slot();
        let _held = slots.try_take().expect("the only slot");
        client.write_all(b"queued").expect("send");
        let mut reader = SpinningReader::new(&mut server, WaitPolicy::spin_us(10_000), &slots);
        let mut bytes = [0u8; 16];
        let read = reader.read(&mut bytes).expect("read");
        assert_eq!(&bytes[..read], b"queued");
    }
}
