//! What a server allows: its socket and its limits.

use std::path::PathBuf;

use crate::access::AccessRule;
use flashpipe_base::WaitPolicy;

/// A server's socket and limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Where the server listens.
    pub socket_path: PathBuf,
    /// Clients connected at once; one past it gets an error frame and is closed (after
    /// the oldest connection without a handshake, if any, was closed to make room).
    pub max_clients: usize,
    /// Connections one local user (the uid `SO_PEERCRED` gives) may hold at once;
    /// `None`: half of `max_clients`, at least 1. One past it gets an error frame and is
    /// closed, so one user cannot take every place.
    pub max_clients_per_uid: Option<usize>,
    /// How long (milliseconds) a connection may take to send its hello; one that has not
    /// by then is closed, so silent connections hold their places that long at most.
    pub handshake_timeout_ms: u64,
    /// Requests one client may have in flight.
    pub max_in_flight_per_client: usize,
    /// Bytes one client's requests may hold in flight (write data, read lengths).
    pub max_bytes_in_flight_per_client: u64,
    /// Bytes all clients' requests may hold in flight together.
    pub max_bytes_in_flight: u64,
    /// Read handles (windows of the shared read pool) one client may hold. Each holds
    /// an engine read buffer: clients holding `read_buffer_count` handles together leave
    /// others' reads refused with `ReadBuffersExhausted` until they release some.
    pub max_read_handles_per_client: usize,
    /// Read handles all clients together may hold (a client past it gets
    /// `ServerReadHandles` with the limit, whatever its own count).
    pub max_read_handles: usize,
    /// Kernel runs at once, server-wide (one past it gets `TooManyKernelRuns`).
    pub max_kernel_runs: usize,
    /// Largest write one request may carry.
    pub max_write_bytes: u32,
    /// Slots of each mapping client's write pool (each `max_write_bytes`; the pool is a
    /// memfd whose pages are reserved at connect, 8 MiB per client by default).
    pub write_slots_per_client: u32,
    /// Where kernel runs spill (a sort's runs); `None`: a private folder (mode 0700) the
    /// server makes at start and removes at stop. Clients never name it.
    pub spill_dir: Option<PathBuf>,
    /// The folder kernel runs' input files (`queries=`, `profiles=`) are named relative
    /// to; `None`: clients may name no such file.
    pub kernel_data_dir: Option<PathBuf>,
    /// What the welcome calls the store (its store file, or a description).
    pub store_description: String,
    /// The store's identity, told in the welcome (`None`: the store has none yet).
    pub store_identity: Option<[u8; 16]>,
    /// Who may connect (checked by the peer's credentials before the handshake); the
    /// socket is 0600, or 0660 owned by the rule's group.
    pub access: AccessRule,
    /// How long (wall time) the server's waiting threads poll before they park: a
    /// connection's answering thread waiting for the engine's next answer, and a ring
    /// client's reading thread waiting on its request ring (before the ring's futex).
    /// The default parks at once (a futex wake per answer or frame that finds the thread
    /// parked); a window longer than one command saves that wake at queue depth 1 and
    /// burns a core meanwhile. `flashpipe serve --spin-us`; `flashpipe bench serve
    /// --spin-us` compares windows side by side.
    pub spin: WaitPolicy,
    /// How long one send to a client may block (its socket buffer full because it does
    /// not read its answers) before the client is taken as gone and its connection
    /// closed; bounds how long a graceful stop waits for a stuck client.
    pub send_timeout_ms: u64,
    /// Bytes of the data area of each of a ring client's two frame rings (a power of
    /// two, at least 4096; frames larger than a quarter of it go through in pieces).
    /// The memfds' pages are reserved when the rings open: twice this (and two header
    /// pages) per ring client, 2 MiB by default (#14).
    pub ring_capacity_bytes: u32,
    /// Destination regions (protocol version 6) one client may hold registered at once.
    pub max_regions_per_client: usize,
    /// Bytes of destination regions one client may hold registered at once, all its
    /// regions together (the memory is the client's; the bound keeps the server's
    /// address space and mappings in check).
    pub max_region_bytes_per_client: u64,
}

/// Default of [`ServerConfig::max_regions_per_client`].
pub const DEFAULT_MAX_REGIONS_PER_CLIENT: usize = 8;

/// Default of [`ServerConfig::max_region_bytes_per_client`] (4 GiB).
pub const DEFAULT_MAX_REGION_BYTES_PER_CLIENT: u64 = 4 << 30;

/// Default data area of each frame ring of a ring client (1 MiB).
pub const DEFAULT_RING_CAPACITY_BYTES: u32 = 1 << 20;

/// Default handshake time limit (5 s).
pub const DEFAULT_HANDSHAKE_TIMEOUT_MS: u64 = 5_000;

impl ServerConfig {
    /// Connections one user may hold: `max_clients_per_uid`, or half of `max_clients`
    /// (at least 1).
    pub fn clients_per_uid(&self) -> usize {
        self.max_clients_per_uid
            .unwrap_or((self.max_clients / 2).max(1))
    }
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            socket_path: PathBuf::from("flashpipe.sock"),
            max_clients: 64,
            max_clients_per_uid: None,
            handshake_timeout_ms: DEFAULT_HANDSHAKE_TIMEOUT_MS,
            max_in_flight_per_client: 64,
            max_bytes_in_flight_per_client: 64 << 20,
            max_bytes_in_flight: 512 << 20,
            max_read_handles_per_client: 16,
            max_read_handles: 4096,
            max_kernel_runs: 2,
            max_write_bytes: 1 << 20,
            write_slots_per_client: 8,
            spill_dir: None,
            kernel_data_dir: None,
            store_description: String::new(),
            store_identity: None,
            access: AccessRule::default(),
            spin: WaitPolicy::spin_us(flashpipe_shm::DEFAULT_SERVE_RING_SPIN_US),
            send_timeout_ms: 10_000,
            ring_capacity_bytes: DEFAULT_RING_CAPACITY_BYTES,
            max_regions_per_client: DEFAULT_MAX_REGIONS_PER_CLIENT,
            max_region_bytes_per_client: DEFAULT_MAX_REGION_BYTES_PER_CLIENT,
        }
    }
}
