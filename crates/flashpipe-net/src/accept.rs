//! The accept loop a server runs on each of its listeners, and the connections it
//! holds open: one thread per listener accepts, applies the connection limit (a
//! connection past it is closed at once, after the protocol's `refused` hook), sets the
//! handshake deadline (a read timeout the protocol lifts when its handshake is done),
//! reads the peer ([`PeerInfo`]: `SO_PEERCRED` or the address, before any byte is read)
//! and asks [`Protocol::admit`] (access checks and per-user shares; a refusal closes the
//! connection), then serves each admitted connection on its own thread through
//! [`Protocol::serve`].
//!
//! A graceful stop ([`Server::stop`]) stops accepting (each blocked accept is woken by a
//! connection to its own listener, which is closed unread, and by shutting the listening
//! socket, which ends the accept even when a Unix socket's path is gone), then shuts the
//! read side of every open connection, so each connection's reader ends after answering
//! what it has in flight, and joins every connection thread. [`AcceptStopper`] asks for
//! the first half from another thread (a signal handler's).
//!
//! What a listener may bind to (loopback only unless allowed) is the server's policy,
//! checked before it hands its listeners over.

use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::peer::PeerInfo;
use deadline::HandshakeClock;

/// A bound listener.
#[derive(Debug)]
pub enum Listener {
    /// A TCP listener.
    Tcp(TcpListener),
    /// A Unix socket listener and its path (a stop connects to it to wake the loop).
    Unix {
        /// The listener.
        listener: UnixListener,
        /// Where it is bound.
        path: PathBuf,
    },
}

/// An accepted connection.
#[derive(Debug)]
pub enum Accepted {
    /// Over TCP.
    Tcp(TcpStream),
    /// Over a Unix socket.
    Unix(UnixStream),
}

impl Accepted {
    fn try_clone(&self) -> io::Result<Accepted> {
        Ok(match self {
            Accepted::Tcp(stream) => Accepted::Tcp(stream.try_clone()?),
            Accepted::Unix(stream) => Accepted::Unix(stream.try_clone()?),
        })
    }

    fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Accepted::Tcp(stream) => stream.shutdown(how),
            Accepted::Unix(stream) => stream.shutdown(how),
        }
    }
}

impl Listener {
    fn accept(&self) -> io::Result<Accepted> {
        match self {
            Listener::Tcp(listener) => listener.accept().map(|(stream, _)| Accepted::Tcp(stream)),
            Listener::Unix { listener, .. } => {
                listener.accept().map(|(stream, _)| Accepted::Unix(stream))
            }
        }
    }

    /// What a stop connects to, and a second descriptor of the listening socket to shut,
    /// to wake a blocked accept.
    fn wake_target(&self) -> WakeTarget {
        let address = match self {
            Listener::Tcp(listener) => match listener.local_addr() {
                Ok(mut address) => {
                    if address.ip().is_unspecified() {
                        address.set_ip(match address {
                            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
                        });
                    }
                    WakeAddress::Tcp(address)
                }
                Err(_) => WakeAddress::Nothing,
            },
            Listener::Unix { path, .. } => WakeAddress::Unix(path.clone()),
        };
        let listening = match self {
            Listener::Tcp(listener) => listener.try_clone().map(OwnedFd::from),
            Listener::Unix { listener, .. } => listener.try_clone().map(OwnedFd::from),
        };
        WakeTarget {
            address,
            listening: listening.ok(),
        }
    }
}

enum WakeAddress {
    Tcp(SocketAddr),
    Unix(PathBuf),
    Nothing,
}

struct WakeTarget {
    address: WakeAddress,
    /// The listening socket (a second descriptor of it), shut at a stop.
    listening: Option<OwnedFd>,
}

impl WakeTarget {
    fn wake(&self) {
        // The connection only wakes the accept loop, which sees the stop and ends; a
        // failure leaves a loop that ended already, or one the shutdown below wakes.
        match &self.address {
            WakeAddress::Tcp(address) => drop(TcpStream::connect(address)),
            WakeAddress::Unix(path) => drop(UnixStream::connect(path)),
            WakeAddress::Nothing => {}
        }
        if let Some(listening) = &self.listening {
            // SAFETY: shutdown(2) on a descriptor owned by `listening`, open as long as
            // it is borrowed; it changes no memory. It ends a blocked accept(2) on the
            // same socket even when a Unix socket's path no longer leads to it.
            let _ = unsafe { libc::shutdown(listening.as_raw_fd(), libc::SHUT_RDWR) };
        }
    }
}

/// Bounds the accept loop applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once, over all listeners; more are closed at accept.
    pub max_connections: usize,
    /// How long a connection may take from its accept to the end of its handshake
    /// ([`Admitted::handshake_done`]); past it the protocol's
    /// [`Protocol::handshake_expired`] runs and the connection is shut both ways.
    /// `None`: no limit.
    pub handshake_deadline: Option<Duration>,
}

/// The protocol a [`Server`] serves.
pub trait Protocol: Send + Sync + 'static {
    /// Serves an admitted connection (`admitted.id()`: ids grow from 1, unique within the
    /// server), on the connection's own thread, until it ends; it calls
    /// [`Admitted::handshake_done`] once the client has identified itself.
    fn serve(&self, connection: Accepted, admitted: Admitted);
    /// A connection closed at accept because `open` connections reached `limit` (a
    /// log line, typically).
    fn refused(&self, connection: &Accepted, open: usize, limit: usize);
    /// Whether connection `id`, whose peer is `peer` (or the error reading it), may be
    /// served; called on the accept thread before any of its bytes is read. On false the
    /// connection is closed (the protocol may first write its refusal). Default: yes.
    fn admit(&self, connection: &Accepted, peer: &io::Result<PeerInfo>, id: u64) -> bool {
        let _ = (connection, peer, id);
        true
    }
    /// Admitted connection `id` is closed unserved: its thread could not be started.
    /// Default: nothing.
    fn not_served(&self, id: u64, error: &io::Error) {
        let _ = (id, error);
    }
    /// Connection `id` finished no handshake within the deadline: called on the deadline
    /// thread just before the runtime shuts the connection (the protocol may write its
    /// refusal, with a short write limit, and log). Default: nothing.
    fn handshake_expired(&self, connection: &Accepted, id: u64) {
        let _ = (connection, id);
    }
    /// An accept failed (the loop goes on). Default: nothing.
    fn accept_failed(&self, error: &io::Error) {
        let _ = error;
    }
}

/// An open connection: a handle to shut its read side at a stop (or both sides at its
/// handshake deadline), its thread, and where its handshake stands.
struct OpenConnection {
    reading: Accepted,
    thread: Option<JoinHandle<()>>,
    handshake: HandshakeClock,
}

struct Inner {
    limits: Limits,
    protocol: Arc<dyn Protocol>,
    thread_prefix: String,
    stopping: AtomicBool,
    open: AtomicUsize,
    next_id: AtomicU64,
    connections: Mutex<HashMap<u64, OpenConnection>>,
    /// Wakes the deadline thread: a connection added, or a stop.
    connections_changed: Condvar,
    /// One per listener, in order.
    wakes: Vec<WakeTarget>,
}

impl Inner {
    fn stop_accepting(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.connections_changed.notify_all();
        for wake in &self.wakes {
            wake.wake();
        }
    }
}

impl Inner {
    fn connections(&self) -> MutexGuard<'_, HashMap<u64, OpenConnection>> {
        self.connections
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

/// Accept loops over a server's listeners and the connections they opened.
pub struct Server {
    inner: Arc<Inner>,
    accept_threads: Vec<JoinHandle<()>>,
    /// Closes connections past their handshake deadline (`deadline`); none without one.
    deadline_thread: Option<JoinHandle<()>>,
}

/// Asks a [`Server`]'s accept loops to end, from any thread, without waiting for them.
#[derive(Clone)]
pub struct AcceptStopper {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for AcceptStopper {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("AcceptStopper")
            .field("stopping", &self.inner.stopping.load(Ordering::SeqCst))
            .finish()
    }
}

impl AcceptStopper {
    /// Marks the server stopping and wakes every accept loop, which then ends; open
    /// connections go on. [`Server::join_accepting`] waits for the loops.
    pub fn stop_accepting(&self) {
        self.inner.stop_accepting();
    }
}

impl std::fmt::Debug for Server {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Server")
            .field("open", &self.open_connections())
            .finish()
    }
}

impl Server {
    /// Starts one accept thread per listener (named `{thread_prefix}-accept-N`;
    /// connection threads `{thread_prefix}-conn-ID`).
    pub fn start(
        listeners: Vec<Listener>,
        limits: Limits,
        protocol: Arc<dyn Protocol>,
        thread_prefix: &str,
    ) -> io::Result<Server> {
        let inner = Arc::new(Inner {
            limits,
            protocol,
            thread_prefix: thread_prefix.to_string(),
            stopping: AtomicBool::new(false),
            open: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            connections: Mutex::new(HashMap::new()),
            connections_changed: Condvar::new(),
            wakes: listeners.iter().map(Listener::wake_target).collect(),
        });
        let mut server = Server {
            inner: Arc::clone(&inner),
            accept_threads: Vec::new(),
            deadline_thread: None,
        };
        if limits.handshake_deadline.is_some() {
            let deadline_inner = Arc::clone(&inner);
            let spawned = std::thread::Builder::new()
                .name(format!("{thread_prefix}-handshakes"))
                .spawn(move || deadline::close_late_handshakes(&deadline_inner));
            server.deadline_thread = Some(spawned?);
        }
        for (index, listener) in listeners.into_iter().enumerate() {
            let loop_inner = Arc::clone(&inner);
            let spawned = std::thread::Builder::new()
                .name(format!("{thread_prefix}-accept-{index}"))
                .spawn(move || accept_loop(&loop_inner, &listener));
            match spawned {
                Ok(thread) => server.accept_threads.push(thread),
                Err(error) => {
                    server.stop();
                    return Err(error);
                }
            }
        }
        Ok(server)
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.inner.open.load(Ordering::SeqCst)
    }

    /// Whether a stop has begun.
    pub fn is_stopping(&self) -> bool {
        self.inner.stopping.load(Ordering::SeqCst)
    }

    /// A handle that stops accepting from another thread.
    pub fn stopper(&self) -> AcceptStopper {
        AcceptStopper {
            inner: Arc::clone(&self.inner),
        }
    }

    /// Stops accepting: every accept loop ends and is joined. Open connections go on.
    pub fn stop_accepting(&mut self) {
        self.inner.stop_accepting();
        self.join_accepting();
    }

    /// Waits until every accept loop has ended (after a stop, by [`AcceptStopper`] or
    /// [`Server::stop_accepting`]); false when one of them panicked.
    pub fn join_accepting(&mut self) -> bool {
        let mut clean = true;
        for thread in self.accept_threads.drain(..) {
            clean &= thread.join().is_ok();
        }
        clean
    }

    /// The graceful stop: stops accepting, shuts the read side of every open
    /// connection (its reader ends after answering what is in flight) and joins every
    /// connection thread.
    pub fn stop(&mut self) {
        self.stop_accepting();
        let connections: Vec<OpenConnection> = self
            .inner
            .connections()
            .drain()
            .map(|(_, open)| open)
            .collect();
        for connection in &connections {
            // A connection already closed by its client refuses the shutdown; harmless.
            let _ = connection.reading.shutdown(Shutdown::Read);
        }
        for mut connection in connections {
            if let Some(thread) = connection.thread.take() {
                // A connection thread that panicked has nothing left to join.
                let _ = thread.join();
            }
        }
        if let Some(thread) = self.deadline_thread.take() {
            if thread.join().is_err() {
                tracing::error!("the handshake deadline thread panicked");
            }
        }
    }
}

fn accept_loop(inner: &Arc<Inner>, listener: &Listener) {
    loop {
        let accepted = listener.accept();
        if inner.stopping.load(Ordering::SeqCst) {
            return;
        }
        let connection = match accepted {
            Ok(connection) => connection,
            Err(error) => {
                inner.protocol.accept_failed(&error);
                continue;
            }
        };
        let open = inner.open.fetch_add(1, Ordering::SeqCst);
        let limit = inner.limits.max_connections;
        if open >= limit {
            inner.open.fetch_sub(1, Ordering::SeqCst);
            inner.protocol.refused(&connection, open, limit);
            continue;
        }
        start_connection(inner, connection);
    }
}

fn start_connection(inner: &Arc<Inner>, connection: Accepted) {
    let id = inner.next_id.fetch_add(1, Ordering::SeqCst);
    let handshake = HandshakeClock::start(inner.limits.handshake_deadline);
    let Ok(reading) = connection.try_clone() else {
        inner.open.fetch_sub(1, Ordering::SeqCst);
        return;
    };
    let peer = PeerInfo::of(&connection);
    if !inner.protocol.admit(&connection, &peer, id) {
        inner.open.fetch_sub(1, Ordering::SeqCst);
        return;
    }
    // Held until the entry is in: a connection that ends at once removes its entry
    // only after it was inserted.
    let mut connections = inner.connections();
    let thread_inner = Arc::clone(inner);
    let admitted = Admitted {
        id,
        inner: Arc::clone(inner),
    };
    let thread = std::thread::Builder::new()
        .name(format!("{}-conn-{id}", inner.thread_prefix))
        .spawn(move || {
            thread_inner.protocol.serve(connection, admitted);
            thread_inner.connections().remove(&id);
            thread_inner.open.fetch_sub(1, Ordering::SeqCst);
        });
    match thread {
        Ok(thread) => {
            connections.insert(
                id,
                OpenConnection {
                    reading,
                    thread: Some(thread),
                    handshake,
                },
            );
            drop(connections);
            inner.connections_changed.notify_all();
        }
        Err(error) => {
            inner.open.fetch_sub(1, Ordering::SeqCst);
            inner.protocol.not_served(id, &error);
        }
    }
}

/// An admitted connection, as its protocol sees it: its id, and the end of its handshake.
pub struct Admitted {
    id: u64,
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Admitted {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Admitted")
            .field("id", &self.id)
            .finish()
    }
}

impl Admitted {
    /// The connection's id (ids grow from 1, unique within the server).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Stops the connection's handshake clock: it is never closed as late from now on.
    /// False when its deadline passed already (the connection is being closed).
    pub fn handshake_done(&self) -> bool {
        deadline::handshake_done(&self.inner, self.id)
    }
}

mod deadline;
#[cfg(test)]
mod tests;
