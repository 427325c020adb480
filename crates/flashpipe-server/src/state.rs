//! What every connection of a server shares: the configuration, the engine's command
//! sender, the bytes in flight of all clients, the stop flag and the counters.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use flashpipe_device::BufferPool;
use flashpipe_engine::CommandSender;
use flashpipe_protocol::{ServerLimits, SharedRegion};

use crate::config::ServerConfig;

/// The state shared by the accepting thread and every connection.
pub(crate) struct ServerState {
    pub(crate) config: ServerConfig,
    pub(crate) commands: CommandSender,
    pub(crate) limits: ServerLimits,
    /// The engine's read pool when it lives in shared memory (data by reference is
    /// offered only then), and its layout as the welcome tells it.
    pub(crate) read_pool: Option<BufferPool>,
    pub(crate) read_region: Option<SharedRegion>,
    pub(crate) stopping: AtomicBool,
    pub(crate) bytes_in_flight: AtomicU64,
    pub(crate) clients_now: AtomicUsize,
    /// Every connection's place: limits per server and per user, handshake deadlines.
    pub(crate) admission: crate::admission::Admission,
    /// The store's device images, examined before each request that writes.
    pub(crate) device_watch: crate::device_watch::DeviceWatch,
    /// The spill and kernel data folders of kernel runs (clients name no host path).
    pub(crate) kernel_paths: crate::kernel_paths::KernelPaths,
    pub(crate) counters: Counters,
    /// Kernel runs going on, server-wide (issue #14).
    pub(crate) kernel_runs: crate::kernel_runs::KernelRuns,
    /// Read handles held and reserved by all clients together (each client's `Mapped`
    /// counts its own here too), bounded by `config.max_read_handles`.
    pub(crate) read_handles_now: Arc<AtomicUsize>,
    /// True when the store's clock is simulated device time (kernel runs' summaries say so).
    pub(crate) device_time_is_virtual: bool,
    /// Whether the store is held read-only (told to clients in the welcome).
    pub(crate) read_only: bool,
}

/// Running totals, read by [`crate::Server::counters`].
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) clients_total: AtomicU64,
    pub(crate) clients_refused: AtomicU64,
    pub(crate) frames_received: AtomicU64,
    pub(crate) frames_sent: AtomicU64,
    pub(crate) bytes_sent: AtomicU64,
    pub(crate) requests_refused: AtomicU64,
    pub(crate) malformed_frames: AtomicU64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, amount: u64) {
        counter.fetch_add(amount, Ordering::Relaxed);
    }
}

impl ServerState {
    /// Takes `bytes` of the server-wide budget, or says it would exceed it.
    pub(crate) fn try_take_bytes(&self, bytes: u64) -> bool {
        let limit = self.config.max_bytes_in_flight;
        self.bytes_in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|total| *total <= limit)
            })
            .is_ok()
    }

    /// Gives back `bytes` of the server-wide budget.
    pub(crate) fn give_back_bytes(&self, bytes: u64) {
        let before = self.bytes_in_flight.fetch_sub(bytes, Ordering::AcqRel);
        assert!(before >= bytes, "server bytes in flight went below zero");
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }
}
