//! How a Python `Store` reaches its store, as the CLI's commands do: through the store's
//! running `flashpipe serve` when one answers on its socket
//! (`flashpipe_client::server_socket_path`), the server checked to be run by the store
//! file's owner (or root) and to hold this store; otherwise the store opened in this
//! process (its lock held until `close()`), and when that finds the store locked and a
//! server has come up meanwhile, through that server.

use std::path::Path;

use flashpipe_client::{
    server_socket_path, Client, ClientTransport, ConnectError, ConnectOptions, ServerExpectation,
};
use flashpipe_engine::EngineClient;
use flashpipe_store::{LockWait, RunningStore, StoreAccess, StoreLockError, StoreOpenError};

use crate::error::StoreError;
use crate::served_region::RegionReads;

/// Commands in flight at most on the engine's client in this process.
const IN_PROCESS_OUTSTANDING: usize = 16;

/// A session's way to its store.
pub enum Session {
    /// The store opened in this process, with a client of its engine.
    InProcess {
        /// The client (dropped before the store closes).
        client: EngineClient,
        /// The store, its engine and its lock.
        store: RunningStore,
    },
    /// A client of the server holding the store.
    Served {
        /// The connection.
        client: Client,
        /// Large reads into this process's memory, on a connection of their own.
        regions: RegionReads,
    },
}

/// Runs `$body` with `$transport` bound to the session's transport (`&mut` the engine's
/// client or the served client): one generic code, monomorphised for each.
macro_rules! with_transport {
    ($session:expr, |$transport:ident| $body:expr) => {
        match $session {
            $crate::session::Session::InProcess {
                client: $transport, ..
            } => $body,
            $crate::session::Session::Served {
                client: $transport, ..
            } => $body,
        }
    };
}
pub(crate) use with_transport;

impl Session {
    /// Opens a session on the store file `store_file` (see the module's documentation);
    /// without `shared_memory` a served session stays on the socket (no mapping, no
    /// rings, no regions).
    pub fn open(
        store_file: &Path,
        read_only: bool,
        shared_memory: bool,
    ) -> Result<Session, StoreError> {
        if let Some(served) = live_server(store_file, shared_memory)? {
            return Ok(served);
        }
        let access = if read_only {
            StoreAccess::ReadOnly
        } else {
            StoreAccess::ReadWrite
        };
        let store = match RunningStore::open(store_file, access, LockWait::Fail) {
            Ok(store) => store,
            Err(error @ StoreOpenError::Lock(StoreLockError::Held { .. })) => {
                return match live_server(store_file, shared_memory)? {
                    Some(served) => Ok(served),
                    None => Err(error.into()),
                };
            }
            Err(error) => return Err(error.into()),
        };
        let client = store.client(IN_PROCESS_OUTSTANDING);
        Ok(Session::InProcess { client, store })
    }

    /// "in process" or "served": how the session reaches its store.
    pub fn way(&self) -> &'static str {
        match self {
            Session::InProcess { .. } => "in process",
            Session::Served { .. } => "served",
        }
    }

    /// True when reads come back by reference (a server's mapped shared memory).
    pub fn by_reference(&self) -> bool {
        match self {
            Session::InProcess { .. } => false,
            Session::Served { client, .. } => client.is_mapped(),
        }
    }

    /// The served client, where the session goes through a server.
    pub fn served(&mut self) -> Option<&mut Client> {
        match self {
            Session::InProcess { .. } => None,
            Session::Served { client, .. } => Some(client),
        }
    }

    /// The served session's reads into regions, where the session goes through a server.
    pub fn region_reads(&mut self) -> Option<&mut RegionReads> {
        match self {
            Session::InProcess { .. } => None,
            Session::Served { regions, .. } => Some(regions),
        }
    }

    /// Ends the session: in this process the store commits and closes (read-only: closes
    /// without writing); through a server the connection is closed (every change made
    /// through it was flushed already).
    pub fn close(self) -> Result<(), StoreError> {
        match self {
            Session::InProcess { client, store } => {
                drop(client);
                store.close()?;
                Ok(())
            }
            Session::Served { client, regions } => {
                drop(regions);
                drop(client);
                Ok(())
            }
        }
    }
}

/// A session through the server of `store_file`, when one answers on its socket;
/// `Ok(None)` when there is no socket or a stale one nobody answers on. A server that
/// answers but may not be used (another user's, another store's, its client limit) is
/// an error: the store is in its hands. Without `shared_memory` the connection maps
/// nothing and takes no rings, and large reads are not read into regions.
fn live_server(store_file: &Path, shared_memory: bool) -> Result<Option<Session>, StoreError> {
    let socket = server_socket_path(store_file);
    if !socket.exists() {
        return Ok(None);
    }
    let expect = server_expectation(store_file)?;
    let options = ConnectOptions {
        expect: Some(expect.clone()),
        map_memory: shared_memory,
        client_name: format!("python (pid {})", std::process::id()),
        transport: if shared_memory {
            ClientTransport::RingsWhenMapped
        } else {
            ClientTransport::Socket
        },
        ..ConnectOptions::default()
    };
    match Client::connect(&socket, options) {
        Ok(client) => Ok(Some(Session::Served {
            client,
            regions: if shared_memory {
                RegionReads::new(socket, expect)
            } else {
                RegionReads::unavailable(socket, expect)
            },
        })),
        Err(ConnectError::Connect { source, .. })
            if source.kind() != std::io::ErrorKind::PermissionDenied =>
        {
            Ok(None)
        }
        Err(source) => Err(StoreError::Connect {
            store: store_file.display().to_string(),
            source,
        }),
    }
}

/// Who must run the server of `store_file` and which store it must hold
/// (`flashpipe_store::server_facts`, as the CLI checks).
fn server_expectation(store_file: &Path) -> Result<ServerExpectation, StoreError> {
    let facts = flashpipe_store::server_facts(store_file).map_err(|source| StoreError::Local {
        what: format!("cannot read the store file {}", store_file.display()),
        source,
    })?;
    Ok(ServerExpectation {
        owner_uid: facts.owner_uid,
        store_identity: facts.store_identity,
    })
}
