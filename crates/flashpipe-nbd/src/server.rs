//! The NBD server: exports of any [`flashpipe_device::BlockDevice`] over TCP and Unix
//! sockets (doc/proto.md of the NBD project; what is implemented: docs/nbd.md).
//!
//! Threads: one device worker per export (it owns the device, which a connection's
//! reader may borrow to serve a request on its own thread when the worker is free;
//! `worker`), one accept loop per listener (`flashpipe_net::accept`, which applies the
//! connection limit and the handshake deadline), and per connection a reader (handshake,
//! then requests, and the replies of what it served itself) and a writer (replies of
//! what the worker served). Connections, requests in flight per connection and options per
//! handshake are bounded by [`ServerLimits`]. A connection that breaks the protocol is
//! dropped; nothing else is affected.
//!
//! Listening beyond loopback needs TLS required ([`tls::TlsMode::Required`]) or
//! `allow_non_loopback` (the CLI's `--insecure`): without TLS such a server is readable
//! and writable by anyone who reaches it. TLS (`NBD_OPT_STARTTLS`): the `tls` module.
//!
//! Shutdown ([`NbdServer::shutdown`]): accept loops stop, every connection's read side
//! is shut (the runtime's graceful stop) so its reader ends after answering what is in flight (the specification's
//! "wait for inflight requests"), workers flush their devices once more and hand them
//! back.

pub mod buffers;
pub mod core;
pub mod export;
pub mod extents;
pub mod handshake;
pub mod reader_slots;
pub mod replies;
pub mod spin_read;
pub mod tls;
pub mod transmission;
pub mod worker;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use flashpipe_net::{Accepted, Admitted, Listener, Protocol};

use flashpipe_base::WaitPolicy;
use flashpipe_device::BlockDevice;
use thiserror::Error;

use buffers::BufferRecycler;
use export::ExportHandle;
pub use export::{parse_export_spec, Export, ExportDeviceSpec, ExportSpecError, InitialAllocation};
use handshake::{ExportTable, HandshakeEnd, StartTls};
use reader_slots::SpinSlots;
pub use spin_read::ReaderWindow;
use spin_read::SpinningReader;
use tls::{TlsMode, TlsSettings};
use transmission::{TransmissionEnd, TransmissionSetup};
use worker::{DeviceWorker, SharedWorker, WorkerCell};

/// Bytes the reader of a connection reads ahead (requests are 28 bytes; larger write
/// payloads bypass the buffer).
const REQUEST_READ_BUFFER_BYTES: usize = 64 * 1024;

/// Bounds on what clients may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Connections open at once, over all listeners; more are closed at accept.
    pub max_connections: usize,
    /// Requests in flight per connection; the reader stops reading beyond it.
    pub max_requests_per_connection: usize,
    /// Options per handshake; more end the connection.
    pub max_options_per_handshake: usize,
    /// Seconds a client may stay silent during the handshake before it is dropped (a
    /// connection slot is not held by a client that never negotiates); 0: no limit.
    pub handshake_timeout_seconds: u64,
    /// Seconds one reply write may wait for a client that does not read before the
    /// connection is dropped (so neither a connection slot nor shutdown waits forever);
    /// 0: no limit.
    pub reply_timeout_seconds: u64,
}

impl Default for ServerLimits {
    fn default() -> ServerLimits {
        ServerLimits {
            max_connections: 64,
            max_requests_per_connection: 128,
            max_options_per_handshake: 256,
            handshake_timeout_seconds: 30,
            reply_timeout_seconds: 60,
        }
    }
}

/// Where and how to listen.
#[derive(Debug, Clone, Default)]
pub struct ServerConfig {
    /// A TCP address (port 0 picks a free port).
    pub tcp_address: Option<SocketAddr>,
    /// A Unix socket path (must not exist).
    pub unix_socket_path: Option<PathBuf>,
    /// Allow a TCP address beyond loopback without TLS required (`--insecure`).
    pub allow_non_loopback: bool,
    /// TLS (`NBD_OPT_STARTTLS`), when configured.
    pub tls: Option<TlsSettings>,
    /// The limits.
    pub limits: ServerLimits,
    /// Log (a `tracing` event) each connection refused or ended for a reason other than
    /// the client leaving.
    pub log_connections: bool,
    /// The hand-off spin: how long the device workers and reply writers poll their queues
    /// before parking (`flashpipe_base::wait`; `nbd serve --spin-us`); the default parks
    /// at once.
    pub spin: WaitPolicy,
    /// How long each connection's reader polls its socket for the next request before it
    /// blocks, while it holds a spin slot (`spin_read`; `nbd serve --reader-window-us`);
    /// the default ([`ReaderWindow::Auto`]) is 200 us on a machine of two cores or more.
    pub reader_window: ReaderWindow,
}

/// Why the server would not start.
#[derive(Debug, Error)]
pub enum ServerStartError {
    /// Nothing to listen on.
    #[error("give a TCP address or a Unix socket path to listen on")]
    NoListener,
    /// No exports.
    #[error("give at least one export")]
    NoExports,
    /// Two exports with one name.
    #[error("two exports are named `{name}`")]
    DuplicateExport {
        /// The name.
        name: String,
    },
    /// A bad export name.
    #[error("export name `{name}` {detail}")]
    BadExportName {
        /// The name.
        name: String,
        /// What is wrong.
        detail: String,
    },
    /// A non-loopback address without `allow_non_loopback`.
    #[error("refusing to listen on {address}: beyond loopback without TLS required; configure TLS (required) or pass --insecure to allow it")]
    NotLoopback {
        /// The address.
        address: SocketAddr,
    },
    /// Binding failed.
    #[error("cannot listen on {endpoint}: {source}")]
    Bind {
        /// The address or path.
        endpoint: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A thread would not start.
    #[error("cannot start the {what} thread: {source}")]
    Thread {
        /// Which thread.
        what: String,
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// A connected byte stream the server can serve: TCP or Unix.
pub trait NbdStream: Read + Write + Send + 'static {
    /// A second handle to the same connection (for the writer thread).
    fn try_clone_stream(&self) -> std::io::Result<Box<dyn NbdStream>>;
    /// Shuts down one or both directions.
    fn shutdown_stream(&self, how: Shutdown) -> std::io::Result<()>;
    /// The peer, for logs.
    fn peer_name(&self) -> String;
    /// Limits each write's wait (`None`: no limit).
    fn set_write_limit(&self, limit: Option<std::time::Duration>) -> std::io::Result<()>;
    /// Switches non-blocking mode (the TLS pump polls the socket).
    fn set_nonblocking_stream(&self, nonblocking: bool) -> std::io::Result<()>;
    /// The file descriptor, for `poll`.
    fn raw_fd(&self) -> std::os::unix::io::RawFd;
}

/// [`NbdStream`] for a standard socket type, whose inherent methods of the same names do
/// the work; `peer_name` is the expression given, over the socket named.
macro_rules! nbd_stream_for {
    ($socket_type:ty, |$socket:ident| $peer_name:expr) => {
        impl NbdStream for $socket_type {
            fn try_clone_stream(&self) -> std::io::Result<Box<dyn NbdStream>> {
                Ok(Box::new(self.try_clone()?))
            }
            fn shutdown_stream(&self, how: Shutdown) -> std::io::Result<()> {
                self.shutdown(how)
            }
            fn peer_name(&self) -> String {
                let $socket = self;
                $peer_name
            }
            fn set_write_limit(&self, limit: Option<std::time::Duration>) -> std::io::Result<()> {
                self.set_write_timeout(limit)
            }
            fn set_nonblocking_stream(&self, nonblocking: bool) -> std::io::Result<()> {
                self.set_nonblocking(nonblocking)
            }
            fn raw_fd(&self) -> std::os::unix::io::RawFd {
                std::os::unix::io::AsRawFd::as_raw_fd(self)
            }
        }
    };
}

nbd_stream_for!(TcpStream, |socket| socket
    .peer_addr()
    .map_or_else(|_| "tcp peer".to_string(), |address| address.to_string()));
nbd_stream_for!(UnixStream, |_socket| "unix socket peer".to_string());

/// A device worker's thread, which hands the device back when it ends.
type WorkerThread = JoinHandle<Option<Box<dyn BlockDevice>>>;

/// A connection's write side that shuts the whole connection when a write fails (a
/// client that stopped reading, or left), so its reader ends too.
struct ClosingWriter {
    stream: Box<dyn NbdStream>,
}

impl ClosingWriter {
    fn closing_on_error<T>(&self, result: std::io::Result<T>) -> std::io::Result<T> {
        if result.is_err() {
            // Already closed is as good as closed by us.
            let _ = self.stream.shutdown_stream(Shutdown::Both);
        }
        result
    }
}

impl Write for ClosingWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let result = self.stream.write(bytes);
        self.closing_on_error(result)
    }
    fn write_vectored(&mut self, slices: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        let result = self.stream.write_vectored(slices);
        self.closing_on_error(result)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let result = self.stream.flush();
        self.closing_on_error(result)
    }
}

/// State shared by the accept loops and connections.
struct Shared {
    exports: Vec<Arc<ExportHandle>>,
    /// Each export's worker state, in the order of `exports`.
    workers: Vec<SharedWorker>,
    buffers: Arc<BufferRecycler>,
    /// The hand-off spin of the workers and writers.
    spin: WaitPolicy,
    /// Each connection's reader window (`spin_read`), resolved for this machine.
    reader_window: WaitPolicy,
    /// Readers spinning on their sockets at once, at most (`reader_slots`).
    spin_slots: Arc<SpinSlots>,
    tls: Option<TlsSettings>,
    limits: ServerLimits,
    log_connections: bool,
    shutting_down: AtomicBool,
}

/// The NBD protocol as the runtime's accept loop serves it.
struct NbdProtocol {
    shared: Arc<Shared>,
}

impl Protocol for NbdProtocol {
    fn serve(&self, connection: Accepted, admitted: Admitted) {
        let stream: Box<dyn NbdStream> = match connection {
            Accepted::Tcp(stream) => {
                // Replies are small and latency-bound; a failure to set it is harmless.
                let _ = stream.set_nodelay(true);
                Box::new(stream)
            }
            Accepted::Unix(stream) => Box::new(stream),
        };
        serve_connection(&self.shared, stream, &admitted);
    }

    fn handshake_expired(&self, connection: &Accepted, _id: u64) {
        if !self.shared.log_connections {
            return;
        }
        let peer = match connection {
            Accepted::Tcp(stream) => stream.peer_name(),
            Accepted::Unix(stream) => stream.peer_name(),
        };
        let limit_s = self.shared.limits.handshake_timeout_seconds;
        tracing::info!(%peer, "nbd: closing a connection that finished no handshake within {limit_s} s, the handshake time limit");
    }

    fn refused(&self, connection: &Accepted, open: usize, limit: usize) {
        if !self.shared.log_connections {
            return;
        }
        let peer = match connection {
            Accepted::Tcp(stream) => stream.peer_name(),
            Accepted::Unix(stream) => stream.peer_name(),
        };
        tracing::warn!(
            %peer,
            open,
            limit,
            "nbd: refused a connection: as many connections open as the limit"
        );
    }
}

/// A running server.
pub struct NbdServer {
    shared: Arc<Shared>,
    tcp_address: Option<SocketAddr>,
    unix_socket_path: Option<PathBuf>,
    /// The accept loops and the open connections.
    runtime: flashpipe_net::Server,
    worker_threads: Vec<(String, WorkerThread)>,
}

impl std::fmt::Debug for NbdServer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("NbdServer")
            .field("tcp_address", &self.tcp_address)
            .field("unix_socket_path", &self.unix_socket_path)
            .finish()
    }
}

impl NbdServer {
    /// Binds the listeners, starts one worker per export and the accept loops.
    pub fn start(
        config: ServerConfig,
        exports: Vec<Export>,
    ) -> Result<NbdServer, ServerStartError> {
        check_start(&config, &exports)?;
        let tcp_listener = bind_tcp(&config)?;
        let unix_listener = bind_unix(&config)?;
        let buffers = Arc::new(BufferRecycler::new(buffers::DEFAULT_MAX_KEPT_BYTES));
        let mut handles = Vec::new();
        let mut workers = Vec::new();
        let mut worker_threads = Vec::new();
        for export in exports {
            let (handle, worker, worker_thread) = start_worker(export, &buffers, config.spin)?;
            worker_threads.push((handle.name.clone(), worker_thread));
            handles.push(handle);
            workers.push(worker);
        }
        let shared = Arc::new(Shared {
            exports: handles,
            workers,
            buffers,
            spin: config.spin,
            reader_window: config.reader_window.for_this_machine(),
            spin_slots: SpinSlots::for_this_process(),
            tls: config.tls.clone(),
            limits: config.limits,
            log_connections: config.log_connections,
            shutting_down: AtomicBool::new(false),
        });
        let tcp_address = tcp_listener
            .as_ref()
            .and_then(|listener| listener.local_addr().ok());
        let unix_socket_path = unix_listener.as_ref().and(config.unix_socket_path.clone());
        let mut listeners = Vec::new();
        if let Some(listener) = tcp_listener {
            listeners.push(Listener::Tcp(listener));
        }
        if let (Some(listener), Some(path)) = (unix_listener, &unix_socket_path) {
            listeners.push(Listener::Unix {
                listener,
                path: path.clone(),
            });
        }
        let limits = flashpipe_net::Limits {
            max_connections: config.limits.max_connections,
            handshake_deadline: handshake_limit(&config.limits),
        };
        let protocol = Arc::new(NbdProtocol {
            shared: Arc::clone(&shared),
        });
        let runtime =
            flashpipe_net::Server::start(listeners, limits, protocol, "nbd").map_err(|source| {
                ServerStartError::Thread {
                    what: "nbd-accept".to_string(),
                    source,
                }
            })?;
        Ok(NbdServer {
            shared,
            tcp_address,
            unix_socket_path,
            runtime,
            worker_threads,
        })
    }

    /// The TCP address bound (with the port chosen when 0 was asked).
    pub fn tcp_address(&self) -> Option<SocketAddr> {
        self.tcp_address
    }

    /// The Unix socket path.
    pub fn unix_socket_path(&self) -> Option<&Path> {
        self.unix_socket_path.as_deref()
    }

    /// The NBD URIs clients use for `export_name`, one per listener (`nbds` with TLS).
    pub fn uris(&self, export_name: &str) -> Vec<String> {
        let mut uris = Vec::new();
        let scheme = if self.shared.tls.is_some() {
            "nbds"
        } else {
            "nbd"
        };
        if let Some(address) = self.tcp_address {
            uris.push(format!("{scheme}://{address}/{export_name}"));
        }
        if let Some(path) = &self.unix_socket_path {
            uris.push(format!(
                "{scheme}+unix:///{export_name}?socket={}",
                path.display()
            ));
        }
        uris
    }

    /// Each connection's reader window, as resolved for this machine at start.
    pub fn reader_window(&self) -> WaitPolicy {
        self.shared.reader_window
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.runtime.open_connections()
    }

    /// Stops accepting, lets every connection answer what it has in flight, stops the
    /// workers (each flushes its device once more) and hands the devices back by name.
    pub fn shutdown(mut self) -> Vec<(String, Box<dyn BlockDevice>)> {
        self.shared.shutting_down.store(true, Ordering::SeqCst);
        self.runtime.stop();
        for export in &self.shared.exports {
            export
                .jobs
                .lock()
                .unwrap_or_else(|poison| poison.into_inner())
                .take();
        }
        let mut devices = Vec::new();
        for (name, thread) in self.worker_threads.drain(..) {
            if let Ok(Some(device)) = thread.join() {
                devices.push((name, device));
            }
        }
        if let Some(path) = &self.unix_socket_path {
            // The socket file is ours; a failure to remove it leaves only a stale name.
            let _ = std::fs::remove_file(path);
        }
        devices
    }
}

fn check_start(config: &ServerConfig, exports: &[Export]) -> Result<(), ServerStartError> {
    if config.tcp_address.is_none() && config.unix_socket_path.is_none() {
        return Err(ServerStartError::NoListener);
    }
    if exports.is_empty() {
        return Err(ServerStartError::NoExports);
    }
    for (index, export) in exports.iter().enumerate() {
        export::check_export_name(&export.name).map_err(|detail| {
            ServerStartError::BadExportName {
                name: export.name.clone(),
                detail,
            }
        })?;
        if exports[..index]
            .iter()
            .any(|other| other.name == export.name)
        {
            return Err(ServerStartError::DuplicateExport {
                name: export.name.clone(),
            });
        }
    }
    if let Some(address) = config.tcp_address {
        let tls_required = config
            .tls
            .as_ref()
            .is_some_and(|tls| tls.mode == TlsMode::Required);
        if !address.ip().is_loopback() && !config.allow_non_loopback && !tls_required {
            return Err(ServerStartError::NotLoopback { address });
        }
    }
    Ok(())
}

fn bind_tcp(config: &ServerConfig) -> Result<Option<TcpListener>, ServerStartError> {
    config
        .tcp_address
        .map(|address| {
            TcpListener::bind(address).map_err(|source| ServerStartError::Bind {
                endpoint: address.to_string(),
                source,
            })
        })
        .transpose()
}

fn bind_unix(config: &ServerConfig) -> Result<Option<UnixListener>, ServerStartError> {
    config
        .unix_socket_path
        .as_ref()
        .map(|path| {
            UnixListener::bind(path).map_err(|source| ServerStartError::Bind {
                endpoint: path.display().to_string(),
                source,
            })
        })
        .transpose()
}

fn spawn_named<T: Send + 'static>(
    name: &str,
    body: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, ServerStartError> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(body)
        .map_err(|source| ServerStartError::Thread {
            what: name.to_string(),
            source,
        })
}

fn start_worker(
    export: Export,
    buffers: &Arc<BufferRecycler>,
    spin: WaitPolicy,
) -> Result<(Arc<ExportHandle>, SharedWorker, WorkerThread), ServerStartError> {
    let info = export.device.info().clone();
    let extents = Arc::new(Mutex::new(ExportHandle::initial_extents(&export)));
    let (job_sender, job_receiver) = crossbeam_channel::unbounded();
    let handle = Arc::new(ExportHandle {
        name: export.name.clone(),
        description: export.description.clone(),
        size_bytes: info.size_bytes(),
        block_size_bytes: info.block_size_bytes,
        preferred_block_size_bytes: export.device.preferred_block_size_bytes(),
        read_only: export.read_only,
        trim_reads_zeroes: export.trim_reads_zeroes,
        extents: Arc::clone(&extents),
        jobs: Mutex::new(Some(job_sender)),
    });
    let worker: SharedWorker = Arc::new(WorkerCell::new(DeviceWorker::new(
        export.device,
        extents,
        Arc::clone(buffers),
        spin,
    )));
    let thread_worker = Arc::clone(&worker);
    let thread = spawn_named(&format!("nbd-export-{}", export.name), move || {
        DeviceWorker::run(thread_worker, job_receiver)
    })?;
    Ok((handle, worker, thread))
}

/// How long a connection may take from its accept to the end of its handshake
/// (`None`: no limit); the runtime closes it then.
fn handshake_limit(limits: &ServerLimits) -> Option<std::time::Duration> {
    (limits.handshake_timeout_seconds > 0)
        .then(|| std::time::Duration::from_secs(limits.handshake_timeout_seconds))
}

/// One connection: handshake, then transmission; logs how it ended.
fn serve_connection(shared: &Shared, mut stream: Box<dyn NbdStream>, admitted: &Admitted) {
    let peer = stream.peer_name();
    let table = ExportTable {
        exports: &shared.exports,
    };
    let shutting_down = || shared.shutting_down.load(Ordering::SeqCst);
    let reply_limit = (shared.limits.reply_timeout_seconds > 0)
        .then(|| std::time::Duration::from_secs(shared.limits.reply_timeout_seconds));
    let upgrade = |stream: &mut Box<dyn NbdStream>| -> Result<(), String> {
        let Some(settings) = &shared.tls else {
            return Err("TLS is not configured".to_string());
        };
        let socket = stream
            .try_clone_stream()
            .map_err(|error| format!("cannot clone the socket: {error}"))?;
        *stream = tls::upgrade(socket, &settings.rustls_config, reply_limit)?;
        Ok(())
    };
    let start_tls = shared.tls.as_ref().map(|settings| StartTls {
        required: settings.mode == TlsMode::Required,
        upgrade: &upgrade,
    });
    let negotiated = match handshake::negotiate(
        &mut stream,
        table,
        shared.limits.max_options_per_handshake,
        &shutting_down,
        start_tls,
    ) {
        Ok(negotiated) => negotiated,
        Err(end) => {
            if shared.log_connections && !matches!(end, HandshakeEnd::ClientLeft) {
                tracing::info!(%peer, "nbd: connection ended in the handshake: {end}");
            }
            let _ = stream.shutdown_stream(Shutdown::Both);
            return;
        }
    };
    if !admitted.handshake_done() || stream.set_write_limit(reply_limit).is_err() {
        let _ = stream.shutdown_stream(Shutdown::Both);
        return;
    }
    let (Ok(writer), Ok(closer)) = (stream.try_clone_stream(), stream.try_clone_stream()) else {
        return;
    };
    let hard_disconnect = move || {
        // Already closed by the peer is as good as closed by us.
        let _ = closer.shutdown_stream(Shutdown::Both);
    };
    // Requests sent back to back arrive together: read them with few system calls; with
    // a reader window, poll the socket before blocking (`spin_read`).
    let mut reader = std::io::BufReader::with_capacity(
        REQUEST_READ_BUFFER_BYTES,
        SpinningReader::new(&mut stream, shared.reader_window, &shared.spin_slots),
    );
    let worker = shared
        .exports
        .iter()
        .position(|export| Arc::ptr_eq(export, &negotiated.export))
        .map(|index| Arc::clone(&shared.workers[index]));
    let setup = TransmissionSetup {
        negotiated: &negotiated,
        worker,
        request_limit: shared.limits.max_requests_per_connection,
        spin: shared.spin,
        buffers: &shared.buffers,
    };
    let end = transmission::serve_transmission(
        &mut reader,
        Box::new(ClosingWriter { stream: writer }),
        setup,
        &hard_disconnect,
    );
    drop(reader);
    if shared.log_connections
        && matches!(
            end,
            TransmissionEnd::Malformed(_) | TransmissionEnd::WriterGone
        )
    {
        tracing::warn!(
            %peer,
            export = %negotiated.export.name,
            "nbd: connection ended: {end}"
        );
    }
    let _ = stream.shutdown_stream(Shutdown::Both);
}
