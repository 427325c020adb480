//! A store session: the way every CLI store command talks to a store, either through the
//! engine in this process (the store opened here, its lock held by this command) or
//! through `flashpipe serve`, the server that holds the store, as one of its clients.
//!
//! [`StoreSession::open`] looks for a live server first (a socket at
//! `flashpipe_client::server_socket_path(STORE)` that accepts a connection); without one
//! it opens the store here as before. When opening here finds the store locked and a server
//! has come up meanwhile, it goes through that server. With `-v` the command says on
//! standard error which way it went.
//!
//! The commands are written once, generic over [`StoreTransport`] (the command set's
//! `flashpipe_api::Transport`, which the engine's client and the server's both are), and
//! run over the session's with [`with_transport`]; errors keep their kind
//! ([`SessionError::is_not_found`], [`SessionError::is_exists`]) so the commands' messages
//! and hints are the same both ways.
//!
//! What ending a command means differs: in this process a failed command closes the store
//! without committing (the store keeps its last commit); through a server the command's
//! changes since its start are visible to the server's other clients at once, and a flush
//! by any of them commits them. So a command through a server undoes what it can on
//! failure (a put removes its temporaries) and never flushes a failed change; docs/serve.md
//! says what a concurrent client can see.

mod transport;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flashpipe_api::CodedError;
use flashpipe_client::{
    server_socket_path, Client, ClientError, ClientTransport, ClockKind, ConnectError,
    ConnectOptions, ErrorCode, ServerExpectation,
};
use flashpipe_device::{Clock, RealClock};
use flashpipe_engine::{EngineClient, EngineError};
use flashpipe_store::store::StoreOpenError;
use flashpipe_store::store_config::{DeviceSpec, StoreConfig};
use flashpipe_store::store_lock::LockWait;
use flashpipe_store::StoreAccess;

use crate::error_kind::{ErrorKind, Failure};
use crate::store_cmd::OpenStore;
pub use transport::{
    drain, file_exists, read_file, rename_file, write_file, SessionResult, StoreTransport,
    TRANSFER_CHUNK_BYTES, TRANSFER_IN_FLIGHT,
};

/// Set to `0` to make CLI commands use the server's copying path (data in the frames)
/// instead of mapping its shared memory, to compare the two.
pub const MAP_MEMORY_VARIABLE: &str = "FLASHPIPE_MAP_MEMORY";

/// Set to `0` to keep a mapping CLI command's frames on the socket instead of the
/// shared-memory rings, to compare the two.
pub const FRAME_RINGS_VARIABLE: &str = "FLASHPIPE_FRAME_RINGS";

/// Runs `$body` with `$transport` bound to the session's way to its store (`&mut` the
/// engine's client in this process, or the server's client): the same generic code,
/// monomorphised for each, with no dynamic dispatch on its path.
macro_rules! with_transport {
    ($session:expr, |$transport:ident| $body:expr) => {
        match $session.transport() {
            $crate::session::SessionTransport::InProcess($transport) => $body,
            $crate::session::SessionTransport::Served($transport) => $body,
        }
    };
}
pub(crate) use with_transport;

/// The session's transport, borrowed (see [`with_transport`]).
pub enum SessionTransport<'a> {
    /// The client of the engine in this process.
    InProcess(&'a mut EngineClient),
    /// The client of the server holding the store.
    Served(&'a mut Client),
}

/// Why a store operation of a session failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The engine in this process refused or failed the command.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Reading the local source of a put failed.
    #[error("reading the source: {0}")]
    Source(std::io::Error),
    /// Writing the local destination of a get or cat failed.
    #[error("writing the destination: {0}")]
    Sink(std::io::Error),
    /// The server refused or failed the command, or the connection to it broke.
    #[error(transparent)]
    Served(#[from] ClientError),
    /// Through a server, another client changed or replaced the file while this command
    /// read it in several requests: what was read mixes versions and is not kept.
    #[error("{name} changed while it was being read (another client of the server wrote, replaced or removed it); read it again")]
    ChangedWhileRead {
        /// The file.
        name: String,
    },
}

impl SessionError {
    /// The command set's code of the store's refusal, where the store refused.
    fn code(&self) -> Option<ErrorCode> {
        match self {
            SessionError::Engine(error) => Some(error.code()),
            SessionError::Served(error) => error.remote().map(|remote| remote.code),
            _ => None,
        }
    }

    /// True when the error says a named file does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(ErrorCode::NotFound)
    }

    /// True when the error says a target name exists already.
    pub fn is_exists(&self) -> bool {
        self.code() == Some(ErrorCode::Exists)
    }
}

/// How a session reaches its store.
enum SessionKind {
    /// The store opened in this process, with a client of its engine.
    InProcess {
        store: OpenStore,
        client: EngineClient,
    },
    /// A client of the server holding the store.
    Served {
        client: Client,
        clock_is_virtual: bool,
    },
}

/// One command's way to its store (see the module's documentation).
pub struct StoreSession {
    kind: SessionKind,
}

/// How to open a session: the store file, the access the command needs, `--wait`, `-v`.
#[derive(Debug, Clone)]
pub struct SessionRequest<'a> {
    /// The store file.
    pub store_file: &'a Path,
    /// Read-only commands share the store with other readers when opened here.
    pub access: StoreAccess,
    /// Wait for another command using the store instead of failing.
    pub wait: LockWait,
    /// Say on standard error which way the command reaches the store.
    pub verbose: bool,
}

impl StoreSession {
    /// Opens a session on the store (see the module's documentation for the order).
    pub fn open(request: &SessionRequest<'_>) -> Result<StoreSession, Box<dyn std::error::Error>> {
        if let Some(server) = LiveServer::find(request.store_file)? {
            return Ok(StoreSession::served(server, request));
        }
        let store = match OpenStore::open_with(request.store_file, request.access, request.wait) {
            Ok(store) => store,
            Err(error) if is_lock_held(&*error) => match LiveServer::find(request.store_file)? {
                Some(server) => return Ok(StoreSession::served(server, request)),
                None => return Err(error),
            },
            Err(error) => return Err(error),
        };
        if request.verbose {
            eprintln!(
                "flashpipe: {} opened in this process (no server holds it)",
                request.store_file.display()
            );
        }
        let client = store.client(2 * TRANSFER_IN_FLIGHT);
        Ok(StoreSession {
            kind: SessionKind::InProcess { store, client },
        })
    }

    fn served(server: LiveServer, request: &SessionRequest<'_>) -> StoreSession {
        if request.verbose {
            eprintln!("flashpipe: {}", server.describe());
        }
        let clock_is_virtual = match server.client.server_info().store_clock {
            Some(clock) => clock == ClockKind::Virtual,
            None => store_clock_is_virtual(request.store_file),
        };
        StoreSession {
            kind: SessionKind::Served {
                client: server.client,
                clock_is_virtual,
            },
        }
    }

    /// The session's way to its store; generic code runs over it with [`with_transport`].
    pub fn transport(&mut self) -> SessionTransport<'_> {
        match &mut self.kind {
            SessionKind::InProcess { client, .. } => SessionTransport::InProcess(client),
            SessionKind::Served { client, .. } => SessionTransport::Served(client),
        }
    }

    /// The clock transfers are timed with: the store's devices' (virtual on emulated
    /// flash) in this process, the wall clock through a server.
    pub fn clock(&self) -> Arc<dyn Clock> {
        match &self.kind {
            SessionKind::InProcess { store, .. } => Arc::clone(&store.clock),
            SessionKind::Served { .. } => Arc::new(RealClock::new()),
        }
    }

    /// Whether file times (`modified_clock_ns`) count simulated device time.
    pub fn clock_is_virtual(&self) -> bool {
        match &self.kind {
            SessionKind::InProcess { store, .. } => store.clock.is_virtual(),
            SessionKind::Served {
                clock_is_virtual, ..
            } => *clock_is_virtual,
        }
    }

    /// Ends the command: in this process commits and closes on success, closes without
    /// committing on failure; through a server nothing more is sent (a successful
    /// changing command has flushed already, a failed one must not).
    pub fn finish<T>(
        self,
        result: Result<T, Box<dyn std::error::Error>>,
    ) -> Result<T, Box<dyn std::error::Error>> {
        match self.kind {
            SessionKind::InProcess { store, client } => {
                drop(client);
                store.finish(result)
            }
            SessionKind::Served { .. } => result,
        }
    }
}

/// A session taken apart, for a command that must own its way to the store (`mount` hands
/// it to the file system's thread): the store opened here with its engine's client, or
/// the server's client.
pub enum SessionParts {
    /// The store opened in this process; close it with `OpenStore::finish` after the
    /// client is dropped.
    InProcess {
        /// The open store.
        store: OpenStore,
        /// Its engine's client.
        client: EngineClient,
    },
    /// A client of the server holding the store.
    Served {
        /// The client.
        client: Client,
    },
}

impl StoreSession {
    /// The session's parts (see [`SessionParts`]).
    pub fn into_parts(self) -> SessionParts {
        match self.kind {
            SessionKind::InProcess { store, client } => SessionParts::InProcess { store, client },
            SessionKind::Served { client, .. } => SessionParts::Served { client },
        }
    }
}

/// A server answering on a store's socket, connected.
pub struct LiveServer {
    /// The connection (handshake done).
    pub client: Client,
    /// The socket it answers on.
    pub socket: PathBuf,
}

impl LiveServer {
    /// Connects to the server of `store_file` when one answers on its socket
    /// (`flashpipe_client::server_socket_path`). `Ok(None)`: no socket, or a stale one
    /// nobody answers on. A server that answers but refuses (its client limit) is an
    /// error naming the limit: the store is in its hands.
    pub fn find(store_file: &Path) -> Result<Option<LiveServer>, Box<dyn std::error::Error>> {
        let socket = server_socket_path(store_file);
        if !socket.exists() {
            return Ok(None);
        }
        let options = ConnectOptions {
            expect: Some(server_expectation(store_file)?),
            map_memory: std::env::var(MAP_MEMORY_VARIABLE).as_deref() != Ok("0"),
            client_name: client_name(),
            transport: match std::env::var(FRAME_RINGS_VARIABLE).as_deref() {
                Ok("0") => ClientTransport::Socket,
                _ => ClientTransport::RingsWhenMapped,
            },
            ..ConnectOptions::default()
        };
        match Client::connect(&socket, options) {
            Ok(client) => Ok(Some(LiveServer { client, socket })),
            Err(ConnectError::Connect { source, .. })
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                Err(Failure::new(
                    ErrorKind::Permission,
                    format!(
                        "{} is served by `flashpipe serve` at {}, whose socket this user may not use ({source}); the store's owner may admit a group with `flashpipe serve --allow-group GROUP`",
                        store_file.display(),
                        socket.display()
                    ),
                )
                .into())
            }
            Err(ConnectError::Connect { .. }) => Ok(None),
            Err(error @ (ConnectError::ForeignServer { .. } | ConnectError::OtherStore { .. })) => {
                Err(Failure::context(&error, format!("{}: {error}", store_file.display())).into())
            }
            Err(error) => Err(Failure::context(
                &error,
                format!(
                    "{} is served by `flashpipe serve` at {}: {error}",
                    store_file.display(),
                    socket.display()
                ),
            )
            .into()),
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.client.server_info().server_pid
    }

    /// "through the server at SOCKET (pid N)", for `-v` and errors.
    pub fn describe(&self) -> String {
        format!(
            "through the server at {} (pid {}{})",
            self.socket.display(),
            self.pid(),
            if self.client.is_mapped() {
                ", data by reference"
            } else {
                ", data copied through the socket"
            }
        )
    }

    /// The error for a command that needs the store alone while this server runs.
    pub fn refusal(&self, store_file: &Path, what: &str) -> Box<dyn std::error::Error> {
        Failure::new(
            ErrorKind::StoreInUse,
            format!(
                "{what} needs {} alone, but `flashpipe serve` (pid {}) holds it, serving on {}; stop the server first (kill -TERM {})",
                store_file.display(),
                self.pid(),
                self.socket.display(),
                self.pid()
            ),
        )
        .into()
    }
}

/// What the store file says of the server that may hold it
/// (`flashpipe_store::server_facts`): its owner (besides root) runs it, and it holds the
/// store of the file's identity (any, for a store file that has none yet).
fn server_expectation(store_file: &Path) -> Result<ServerExpectation, Box<dyn std::error::Error>> {
    let facts = flashpipe_store::server_facts(store_file).map_err(|error| {
        format!(
            "cannot read the store file {}: {error}",
            store_file.display()
        )
    })?;
    Ok(ServerExpectation {
        owner_uid: facts.owner_uid,
        store_identity: facts.store_identity,
    })
}

/// What the server's logs call this client: the command line's first words and the pid.
fn client_name() -> String {
    let words: Vec<String> = std::env::args().take(2).collect();
    let program = words
        .first()
        .map(|path| {
            Path::new(path)
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.clone())
        })
        .unwrap_or_else(|| "flashpipe".to_string());
    let command = words.get(1).cloned().unwrap_or_default();
    format!("{program} {command} (pid {})", std::process::id())
}

/// True when opening failed because another process holds the store's lock.
fn is_lock_held(error: &(dyn std::error::Error + 'static)) -> bool {
    matches!(
        error.downcast_ref::<StoreOpenError>(),
        Some(StoreOpenError::Lock(
            flashpipe_store::store_lock::StoreLockError::Held { .. }
        ))
    )
}

/// Whether the store's devices keep virtual time (emulated flash), read from its store
/// file without locking it: then file times count simulated device time. Asked only of a
/// server too old to tell its store's clock in the welcome (protocol version 3); the
/// client library cannot read store files (it depends on no store crate), so this stays
/// here.
fn store_clock_is_virtual(store_file: &Path) -> bool {
    StoreConfig::load(store_file)
        .map(|config| {
            config
                .devices
                .iter()
                .any(|device| matches!(device, DeviceSpec::Flash(_)))
        })
        .unwrap_or(false)
}
