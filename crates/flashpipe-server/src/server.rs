//! The server: binding the socket, accepting clients within the limit, stopping
//! gracefully, and the counters.
//!
//! Accepting runs on `flashpipe-net`'s accept loop (the one the NBD server runs on):
//! the loop reads the client's `SO_PEERCRED` before any byte, and the store protocol's
//! `admit` applies the access rule and the per-user share there; the loop's own
//! connection limit is left off (the admission table holds the limits, with eviction of
//! silent connections: see `admission`); the loop's handshake deadline, absolute from
//! the accept, closes a client that sends no hello in time, after `admission` wrote it
//! the typed refusal.

use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use flashpipe_net::{Accepted, Admitted, PeerInfo};

use flashpipe_engine::command::{read_files_max_bytes, READ_FILES_MAX_COUNT};
use flashpipe_protocol::{
    send_frame, ErrorCode, Frame, RemoteError, ServerLimits, SharedRegion, MAX_BODY_BYTES,
};
use flashpipe_store::{RunningStore, StoreAccess, StoreCloseError};

use crate::access::{bind_private, AllowedGroup, PeerCredentials};
use crate::config::ServerConfig;
use crate::connection::serve_connection;
use crate::state::{Counters, ServerState};

/// Bytes a request frame may carry beyond its write data (name, offsets, a read-files
/// list of names).
const REQUEST_OVERHEAD_BYTES: u32 = 2 << 20;

/// Why a server could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A live server already answers on the socket.
    #[error("a server already listens on {path}; stop it first")]
    AlreadyServing {
        /// The socket.
        path: PathBuf,
    },
    /// Something other than a socket lies at the socket's path.
    #[error("{path} exists and is not a socket; refusing to replace it")]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// The socket could not be bound, or a stale one removed.
    #[error("cannot listen on {path}: {source}")]
    Bind {
        /// The socket.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A limit of the configuration is out of range.
    #[error("server setting {field} = {value} is out of range ({rule})")]
    BadConfig {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The rule.
        rule: &'static str,
    },
    /// The accepting thread could not be started.
    #[error("cannot start the accepting thread: {0}")]
    Thread(std::io::Error),
    /// The spill or kernel data folder is unusable.
    #[error(transparent)]
    KernelPaths(#[from] crate::kernel_paths::KernelPathsError),
    /// Closing the store (final flush, unmount) failed.
    #[error("closing the store: {0}")]
    Close(#[from] StoreCloseError),
}

/// A server's running totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerCounters {
    /// Clients connected now.
    pub clients_now: usize,
    /// Clients admitted since start.
    pub clients_total: u64,
    /// Connections refused at the client limit.
    pub clients_refused: u64,
    /// Frames received.
    pub frames_received: u64,
    /// Frames sent.
    pub frames_sent: u64,
    /// Bytes of frames sent.
    pub bytes_sent: u64,
    /// Requests refused (limits, grants, stopping) or failed before the engine.
    pub requests_refused: u64,
    /// Connections ended by a malformed frame.
    pub malformed_frames: u64,
    /// Bytes all clients' requests hold in flight now.
    pub bytes_in_flight: u64,
}

/// What a server did, returned when it stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeReport {
    /// The counters at the end.
    pub counters: ServerCounters,
}

/// Stops a server from another thread (a signal handler's thread).
#[derive(Clone)]
pub struct StopHandle {
    state: Arc<ServerState>,
    accepting: flashpipe_net::AcceptStopper,
}

impl StopHandle {
    /// Asks the server to stop: no new clients or requests; `run_until_stopped` then
    /// finishes what is in flight, closes the store and returns.
    pub fn stop(&self) {
        if self.state.stopping.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::info!("stop requested");
        // Wakes the accepting thread blocked in accept() (a connection to the socket,
        // then a shutdown of the listening socket, which works even when its path is
        // gone); it sees the flag and ends.
        self.accepting.stop_accepting();
    }
}

/// A running server.
pub struct Server {
    state: Arc<ServerState>,
    /// Shared with kernel runs while they go on (they hold it only for their run).
    store: Option<Arc<RunningStore>>,
    /// The accept loop, the handshake deadline and the connections it serves
    /// (`flashpipe-net`).
    runtime: flashpipe_net::Server,
}

impl Server {
    /// Takes the running store (its lock stays held), binds the socket (refusing a live
    /// one, removing a stale one) and starts accepting clients.
    pub fn start(store: RunningStore, mut config: ServerConfig) -> Result<Server, ServeError> {
        check_config(&config)?;
        let kernel_paths = crate::kernel_paths::KernelPaths::new(
            config.spill_dir.as_deref(),
            config.kernel_data_dir.as_deref(),
        )?;
        if config.store_identity.is_none() {
            config.store_identity = store.identity.map(|identity| identity.0);
        }
        let listener = bind(&config.socket_path, config.access.group.as_ref())?;
        let engine_config = store.engine_config;
        let limits = ServerLimits {
            max_body_bytes: MAX_BODY_BYTES.min(
                config
                    .max_write_bytes
                    .saturating_add(REQUEST_OVERHEAD_BYTES),
            ),
            max_write_bytes: config.max_write_bytes,
            max_read_bytes: engine_config.max_read_bytes as u64,
            max_read_files_count: READ_FILES_MAX_COUNT as u32,
            max_read_files_bytes: read_files_max_bytes(engine_config.max_read_bytes as u64),
            max_in_flight_per_client: config.max_in_flight_per_client as u32,
            max_bytes_in_flight_per_client: config.max_bytes_in_flight_per_client,
            max_read_handles_per_client: config.max_read_handles_per_client as u32,
        };
        let read_pool =
            Some(store.engine.read_pool()).filter(|pool| pool.shared_memory().is_some());
        if read_pool.is_none() {
            tracing::info!("the engine's read pool is not in shared memory: every client gets the copying path");
        }
        let read_region = read_pool.as_ref().map(|pool| SharedRegion {
            slot_count: pool.buffer_count(),
            slot_size_bytes: pool.buffer_size_bytes() as u64,
        });
        let store = Arc::new(store);
        let admission = crate::admission::Admission::new(
            config.max_clients,
            config.clients_per_uid(),
            std::time::Duration::from_millis(config.handshake_timeout_ms),
        );
        let state = Arc::new(ServerState {
            kernel_runs: crate::kernel_runs::KernelRuns::new(
                Arc::downgrade(&store),
                config.max_kernel_runs,
            ),
            read_handles_now: Arc::new(AtomicUsize::new(0)),
            device_time_is_virtual: store.clock.is_virtual(),
            read_only: store.access() == StoreAccess::ReadOnly,
            read_pool,
            read_region,
            commands: store.engine.command_sender(),
            config,
            limits,
            stopping: AtomicBool::new(false),
            bytes_in_flight: AtomicU64::new(0),
            clients_now: AtomicUsize::new(0),
            admission,
            kernel_paths,
            device_watch: crate::device_watch::DeviceWatch::new(Arc::downgrade(&store)),
            counters: Counters::default(),
        });
        let listeners = vec![flashpipe_net::Listener::Unix {
            listener,
            path: state.config.socket_path.clone(),
        }];
        // The admission table holds the client limits (evicting silent connections to
        // make room), so the loop's own connection limit is off.
        let limits = flashpipe_net::Limits {
            max_connections: usize::MAX,
            handshake_deadline: Some(std::time::Duration::from_millis(
                state.config.handshake_timeout_ms,
            )),
        };
        let protocol = Arc::new(StoreProtocol {
            state: Arc::clone(&state),
        });
        let runtime = match flashpipe_net::Server::start(listeners, limits, protocol, "flashpipe") {
            Ok(runtime) => runtime,
            Err(error) => {
                state.stopping.store(true, Ordering::Release);
                return Err(ServeError::Thread(error));
            }
        };
        tracing::info!(socket = %state.config.socket_path.display(), "serving");
        Ok(Server {
            state,
            store: Some(store),
            runtime,
        })
    }

    /// Where the server listens.
    pub fn socket_path(&self) -> &Path {
        &self.state.config.socket_path
    }

    /// A handle that stops the server from another thread.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            state: Arc::clone(&self.state),
            accepting: self.runtime.stopper(),
        }
    }

    /// The running totals.
    pub fn counters(&self) -> ServerCounters {
        let counters = &self.state.counters;
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        ServerCounters {
            clients_now: self.state.clients_now.load(Ordering::Relaxed),
            clients_total: load(&counters.clients_total),
            clients_refused: load(&counters.clients_refused),
            frames_received: load(&counters.frames_received),
            frames_sent: load(&counters.frames_sent),
            bytes_sent: load(&counters.bytes_sent),
            requests_refused: load(&counters.requests_refused),
            malformed_frames: load(&counters.malformed_frames),
            bytes_in_flight: self.state.bytes_in_flight.load(Ordering::Relaxed),
        }
    }

    /// Blocks until stopped ([`StopHandle::stop`]): stops accepting, ends every
    /// client's reading, finishes the commands in flight and sends their answers, closes
    /// the store (final flush, unmount) and removes the socket.
    pub fn run_until_stopped(mut self) -> Result<ServeReport, ServeError> {
        if !self.runtime.join_accepting() {
            tracing::error!("the accepting thread panicked");
        }
        self.finish()
    }

    /// Ends every connection's reading, waits for their answers, closes the store and
    /// removes the socket.
    fn finish(&mut self) -> Result<ServeReport, ServeError> {
        // Shuts every connection's read side and joins every connection thread.
        self.runtime.stop();
        self.state.kernel_runs.cancel_all_and_join();
        self.state.kernel_paths.remove_owned();
        let counters = self.counters();
        let closed = match self.store.take().map(Arc::try_unwrap) {
            Some(Ok(store)) => store.close(),
            Some(Err(_)) => {
                tracing::error!("a kernel run still holds the store; it closes when that run ends");
                Ok(())
            }
            None => Ok(()),
        };
        if let Err(error) = std::fs::remove_file(&self.state.config.socket_path) {
            tracing::warn!(socket = %self.state.config.socket_path.display(), %error, "cannot remove the socket");
        }
        closed?;
        tracing::info!(
            clients_total = counters.clients_total,
            "stopped; store closed"
        );
        Ok(ServeReport { counters })
    }
}

impl Drop for Server {
    /// A server dropped without `run_until_stopped` stops the same way.
    fn drop(&mut self) {
        if self.store.is_none() {
            return;
        }
        self.stop_handle().stop();
        self.runtime.join_accepting();
        if let Err(error) = self.finish() {
            tracing::error!(%error, "stopping the dropped server");
        }
    }
}

fn check_config(config: &ServerConfig) -> Result<(), ServeError> {
    let positive = [
        ("max_clients", config.max_clients as u64),
        ("max_clients_per_uid", config.clients_per_uid() as u64),
        ("handshake_timeout_ms", config.handshake_timeout_ms),
        (
            "max_in_flight_per_client",
            config.max_in_flight_per_client as u64,
        ),
        (
            "max_bytes_in_flight_per_client",
            config.max_bytes_in_flight_per_client,
        ),
        ("max_bytes_in_flight", config.max_bytes_in_flight),
        (
            "max_read_handles_per_client",
            config.max_read_handles_per_client as u64,
        ),
        ("max_read_handles", config.max_read_handles as u64),
        ("max_kernel_runs", config.max_kernel_runs as u64),
        ("max_write_bytes", u64::from(config.max_write_bytes)),
        (
            "write_slots_per_client",
            u64::from(config.write_slots_per_client),
        ),
    ];
    for (field, value) in positive {
        if value == 0 {
            return Err(ServeError::BadConfig {
                field,
                value,
                rule: "must be at least 1",
            });
        }
    }
    let ring_bytes = config.ring_capacity_bytes as usize;
    let ring_limits =
        flashpipe_shm::ring::MIN_RING_CAPACITY_BYTES..=flashpipe_shm::ring::MAX_RING_CAPACITY_BYTES;
    if !ring_bytes.is_power_of_two() || !ring_limits.contains(&ring_bytes) {
        return Err(ServeError::BadConfig {
            field: "ring_capacity_bytes",
            value: u64::from(config.ring_capacity_bytes),
            rule: "a power of two from 4096 to 1 GiB",
        });
    }
    let in_flight = config.max_in_flight_per_client as u64;
    if in_flight > u64::from(u32::MAX) {
        return Err(ServeError::BadConfig {
            field: "max_in_flight_per_client",
            value: in_flight,
            rule: "at most 2^32 - 1",
        });
    }
    let write = u64::from(config.max_write_bytes);
    if write > u64::from(MAX_BODY_BYTES) - u64::from(REQUEST_OVERHEAD_BYTES) {
        return Err(ServeError::BadConfig {
            field: "max_write_bytes",
            value: write,
            rule: "at most 14 MiB (the protocol's frame limit less room for the request)",
        });
    }
    Ok(())
}

/// Binds the socket: refuses one a live server answers on, removes a stale one; the
/// socket is 0600 (0660 and the group's with `group`) from its first moment.
fn bind(path: &Path, group: Option<&AllowedGroup>) -> Result<UnixListener, ServeError> {
    if let Ok(metadata) = std::fs::symlink_metadata(path) {
        if !metadata.file_type().is_socket() {
            return Err(ServeError::NotASocket {
                path: path.to_path_buf(),
            });
        }
        if UnixStream::connect(path).is_ok() {
            return Err(ServeError::AlreadyServing {
                path: path.to_path_buf(),
            });
        }
        tracing::info!(socket = %path.display(), "removing a stale socket");
        std::fs::remove_file(path).map_err(|source| ServeError::Bind {
            path: path.to_path_buf(),
            source,
        })?;
    }
    bind_private(path, group).map_err(|source| ServeError::Bind {
        path: path.to_path_buf(),
        source,
    })
}

/// The store protocol as `flashpipe-net`'s accept loop serves it.
struct StoreProtocol {
    state: Arc<ServerState>,
}

impl flashpipe_net::Protocol for StoreProtocol {
    fn serve(&self, connection: Accepted, admitted: Admitted) {
        let id = admitted.id();
        // The server listens on its Unix socket alone.
        if let Accepted::Unix(stream) = connection {
            serve_connection(Arc::clone(&self.state), stream, admitted);
        }
        self.state.admission.release(id, &self.state.clients_now);
    }

    /// Writes the late client its typed refusal and frees its place; the runtime then
    /// shuts the connection.
    fn handshake_expired(&self, _connection: &Accepted, id: u64) {
        self.state.admission.expire(id, &self.state.clients_now);
    }

    /// Never called: the loop's own connection limit is off (the admission table holds
    /// the limits).
    fn refused(&self, _connection: &Accepted, _open: usize, _limit: usize) {}

    /// Checks the client's user against the access rule, then gives it a place within
    /// the limits; a refused client gets its error frame and is closed.
    fn admit(&self, connection: &Accepted, peer: &std::io::Result<PeerInfo>, id: u64) -> bool {
        let Accepted::Unix(stream) = connection else {
            return false;
        };
        let Some(uid) = peer_allowed(&self.state, stream, peer) else {
            return false;
        };
        if !take_place(&self.state, stream, id, uid) {
            return false;
        }
        Counters::add(&self.state.counters.clients_total, 1);
        true
    }

    fn not_served(&self, id: u64, error: &std::io::Error) {
        tracing::warn!(%error, "cannot start a connection thread; closing the client");
        self.state.admission.release(id, &self.state.clients_now);
    }

    fn accept_failed(&self, error: &std::io::Error) {
        tracing::warn!(%error, "accept failed");
    }
}

/// Gives a newcomer a place (`admission`: the server's and its user's limits, the
/// oldest silent connection closed to make room), or refuses it with an error frame;
/// true when it has a place.
fn take_place(state: &ServerState, stream: &UnixStream, id: u64, uid: u32) -> bool {
    let admitted = stream.try_clone().map_err(|error| {
        tracing::warn!(%error, "cannot clone a client socket; closing it");
    });
    let Ok(handle) = admitted else {
        return false;
    };
    match state.admission.admit(id, uid, handle, &state.clients_now) {
        Ok(()) => true,
        Err(error) => {
            Counters::add(&state.counters.clients_refused, 1);
            tracing::warn!(uid, code = %error.code, reason = %error.message, "client refused");
            let _ = send_frame(
                stream,
                &Frame::Error {
                    request_id: 0,
                    error,
                },
            );
            false
        }
    }
}

/// Checks the client's user (`SO_PEERCRED`, read by the accept loop before any byte)
/// against the store's access rule; a refused client gets an `AccessDenied` error frame
/// and is closed. Returns the admitted uid.
fn peer_allowed(
    state: &ServerState,
    stream: &UnixStream,
    peer: &std::io::Result<PeerInfo>,
) -> Option<u32> {
    let credentials = match peer {
        Ok(PeerInfo::Unix { pid, uid, gid }) => Ok(PeerCredentials {
            pid: *pid,
            uid: *uid,
            gid: *gid,
        }),
        Ok(PeerInfo::Tcp { .. }) => Err("the connection is not over a Unix socket".to_string()),
        Err(error) => Err(error.to_string()),
    };
    let refusal = match credentials {
        Ok(peer) => match state.config.access.check(&peer) {
            Ok(()) => return Some(peer.uid),
            Err(reason) => {
                tracing::warn!(uid = peer.uid, pid = peer.pid, "client refused: {reason}");
                reason
            }
        },
        Err(error) => {
            tracing::warn!(%error, "client refused: its credentials cannot be read");
            format!("the server cannot read this client's credentials: {error}")
        }
    };
    Counters::add(&state.counters.clients_refused, 1);
    let _ = send_frame(
        stream,
        &Frame::Error {
            request_id: 0,
            error: RemoteError::new(ErrorCode::AccessDenied, refusal),
        },
    );
    let _ = stream.shutdown(std::net::Shutdown::Both);
    None
}
