//! The flash node process: `flashpipe cluster node --cluster FILE --node ID --image DIR`.
//!
//! Threads: the router thread ([`crate::router_loop`]: the router core, the output stages,
//! the device); the accept loop of `flashpipe-net` on the node's address, whose connection
//! threads check the hello and then read frames; a writer thread per connection; a dialer
//! thread per lower-id neighbour (the lower id listens, the higher dials, and redials with
//! backoff when the link is lost), which reads its link's frames while it is up.
//!
//! With `link = "shm"` the node listens on its Unix socket instead of TCP ([`crate::shm_node`]): the same hello and
//! key proof, then the rings' set-up; the router thread reads and writes the rings itself,
//! and the connection and dialer threads only watch the socket for the link's end.
//!
//! Checks at start: the description file (whole), the node named in it, the address
//! (loopback only), the image folder (a folder, or one to create in an existing folder),
//! the image (opened if it exists, so a restarted node serves what it had; else created).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use flashpipe_base::wait::WaitPolicy;
use flashpipe_cluster::arbiter::RequestCosts;
use flashpipe_cluster::description::{ClusterDescription, LinkKind};
use flashpipe_cluster::router::{Port, Router, RouterConfigError};
use flashpipe_cluster::wire::WireLimits;
use flashpipe_flash::{FlashArray, FlashConfig, FlashError, FlashOptions, StorageMode};
use flashpipe_net::{Accepted, Admitted, Limits, Listener, Protocol, Server};
use flashpipe_shm::{SharedMemoryError, DEFAULT_DOORBELL_WINDOW_US};

use flashpipe_cluster_host::loaded::{self, LoadError};
use flashpipe_cluster_host::shm_setup::SetupError;
use flashpipe_cluster_host::stream::SetupStream;

use crate::auth::{prove_key, ClusterKey, End, ProofError};
use crate::bell::NodeBell;
use crate::conn::{self, HELLO_TIMEOUT};
use crate::hello::{Hello, Refusal, Role};
use crate::link::Link;
pub use crate::router_loop::NodeSummary;
use crate::router_loop::RouterLoop;

/// Controller tags of a node's router (requests in flight through it).
pub const NODE_TAGS: u32 = 64;
/// Requests a node holds per host while no tag is free.
pub const NODE_QUEUE_LIMIT: u32 = 64;
/// Connections a node serves at once.
pub const NODE_CONNECTIONS: usize = 32;
/// The longest wait between two dials of a lost link.
pub const REDIAL_MAX: Duration = Duration::from_secs(1);

/// The node's flow-control sizes: tokens per link channel, the credit batch, frames per
/// stage queue. Both ends of a link must use the same window. [`NodeLimits::default`] is
/// what the node process runs with; tests shrink them to reach the corners quickly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLimits {
    /// Tokens per virtual channel on a link.
    pub link_window: u32,
    /// Tokens a receiver gives back at once (all of them when its input goes idle).
    pub credit_batch: u32,
    /// Frames an output stage holds per channel and input.
    pub stage_frames: usize,
}

impl Default for NodeLimits {
    fn default() -> NodeLimits {
        NodeLimits {
            link_window: 16,
            credit_batch: 4,
            stage_frames: 64,
        }
    }
}

/// Why a node (or a host) could not start.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The description, its key or a node's address (the loader's own errors).
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The image folder is unusable.
    #[error("image folder {path}: {detail}")]
    ImageFolder {
        /// The folder.
        path: String,
        /// Why.
        detail: String,
    },
    /// The image could not be created or opened.
    #[error("device image {path}: {error}")]
    Image {
        /// The image.
        path: String,
        /// Why.
        error: FlashError,
    },
    /// The image holds another device than the preset's shape.
    #[error("device image {path} holds {devices} devices; a node's image holds one (another node's image, or one made by `flashpipe sim`?)")]
    ImageShape {
        /// The image.
        path: String,
        /// Devices in it.
        devices: u32,
    },
    /// The router could not be configured.
    #[error("node {node}: {error}")]
    Router {
        /// The node.
        node: u32,
        /// Why.
        error: RouterConfigError,
    },
    /// The listening socket could not be bound.
    #[error("cannot listen on {address}: {detail} (is another node already using it?)")]
    Bind {
        /// The address.
        address: String,
        /// Why.
        detail: String,
    },
    /// A thread could not be started.
    #[error("cannot start the node's threads: {0}")]
    Thread(std::io::Error),
    /// The image could not be synced at the stop.
    #[error("the device image could not be synced at the stop: {0}")]
    Sync(FlashError),
    /// `FLASHPIPE_SPIN_US` is not a valid window.
    #[error("FLASHPIPE_SPIN_US: {0}")]
    SpinWindow(flashpipe_base::wait::WaitPolicyError),
    /// The node's doorbell could not be made.
    #[error("cannot make the node's doorbell: {0}")]
    Doorbell(SharedMemoryError),
    /// The Unix socket of a shared-memory node could not be set up.
    #[error(transparent)]
    Socket(#[from] SetupError),
    /// The router thread panicked (a bug); the image keeps what its journal holds.
    #[error("the node's router thread failed; the image keeps every acknowledged operation (its journal)")]
    RouterFailed,
}

pub use flashpipe_cluster_host::loaded::LoadedDescription;

/// Reads and checks a description file ([`flashpipe_cluster_host::loaded::load_description`]).
pub fn load_description(path: &Path) -> Result<LoadedDescription, NodeError> {
    Ok(loaded::load_description(path)?)
}

/// Resolves a node's address; refuses one that is not loopback.
pub fn node_address(description: &ClusterDescription, node: u32) -> Result<SocketAddr, NodeError> {
    Ok(loaded::node_address(description, node)?)
}

/// How to run a node.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// The description file.
    pub description: PathBuf,
    /// Which node.
    pub node: u32,
    /// The folder of the node's image (the description's `image` names the file in it).
    pub image_folder: PathBuf,
    /// How long the router polls its inputs before it parks; `None`: `FLASHPIPE_SPIN_US`,
    /// else the link kind's default ([`router_wait_policy`]).
    pub spin: Option<WaitPolicy>,
}

/// What a started node reports in its readiness line.
#[derive(Debug, Clone)]
pub struct NodeReady {
    /// The node id (and device id).
    pub node: u32,
    /// Its address in the description (where it listens over TCP; with `link = "shm"` it
    /// only names the node, which listens on [`NodeReady::socket`]).
    pub address: SocketAddr,
    /// Its Unix socket, with `link = "shm"`.
    pub socket: Option<PathBuf>,
    /// Its device preset.
    pub preset: String,
    /// Its image file.
    pub image: PathBuf,
    /// Whether the image existed (a restart) or was created.
    pub image_reopened: bool,
    /// Neighbour node ids, by link.
    pub neighbours: Vec<u32>,
    /// The attached host, if any.
    pub host: Option<u32>,
}

/// A running node.
pub struct RunningNode {
    ready: NodeReady,
    stopping: Arc<AtomicBool>,
    bell: Arc<NodeBell>,
    router: JoinHandle<Result<NodeSummary, FlashError>>,
    server: Server,
    dialers: Vec<JoinHandle<()>>,
}

/// Stops a node from another thread (a signal's).
#[derive(Clone)]
pub struct NodeStopper {
    stopping: Arc<AtomicBool>,
    bell: Arc<NodeBell>,
}

impl NodeStopper {
    /// Asks the node to stop; [`RunningNode::wait`] returns once it has.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.bell.ring();
    }
}

fn image_folder(path: &Path) -> Result<(), NodeError> {
    let folder_error = |detail: &str| NodeError::ImageFolder {
        path: path.display().to_string(),
        detail: detail.to_string(),
    };
    match std::fs::metadata(path) {
        Ok(metadata) if metadata.is_dir() => Ok(()),
        Ok(_) => Err(folder_error("it is not a folder")),
        Err(_) => {
            let parent = path
                .parent()
                .filter(|parent| !parent.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            if !parent.is_dir() {
                return Err(folder_error(
                    "it does not exist and neither does the folder it would be made in",
                ));
            }
            match std::fs::create_dir(path) {
                // Another node of the same cluster, started at the same time, made it.
                Err(error)
                    if error.kind() == std::io::ErrorKind::AlreadyExists && path.is_dir() =>
                {
                    Ok(())
                }
                made => made.map_err(|error| folder_error(&error.to_string())),
            }
        }
    }
}

fn open_device(
    config: FlashConfig,
    image: &Path,
    node: u32,
    host_count: u32,
) -> Result<(FlashArray, bool), NodeError> {
    let image_error = |error: FlashError| NodeError::Image {
        path: image.display().to_string(),
        error,
    };
    if image.exists() {
        let array = FlashArray::open(image, host_count, NODE_TAGS).map_err(image_error)?;
        let devices = array.config().geometry.devices;
        if devices != 1 {
            return Err(NodeError::ImageShape {
                path: image.display().to_string(),
                devices,
            });
        }
        return Ok((array, true));
    }
    let mut config = config;
    config.geometry.devices = 1;
    let options = FlashOptions {
        seed: u64::from(node) + 1,
        storage: StorageMode::File(image.to_path_buf()),
        host_count,
        host_queue_depth: NODE_TAGS,
    };
    let mut array = FlashArray::new(config, options).map_err(image_error)?;
    array.sync().map_err(image_error)?;
    Ok((array, false))
}

/// What the accept, connection and dialer threads share.
pub(crate) struct Shared {
    pub node: u32,
    pub crc: u32,
    pub limits: WireLimits,
    key: Option<ClusterKey>,
    host: Option<u32>,
    neighbours: Vec<u32>,
    pub stopping: Arc<AtomicBool>,
    pub bell: Arc<NodeBell>,
    pub attach: SyncSender<(Port, Link)>,
}

impl Shared {
    fn ring(&self) -> impl Fn() + Send + Clone + 'static {
        let bell = Arc::clone(&self.bell);
        move || bell.ring()
    }

    pub fn hello(&self, refusal: Option<Refusal>) -> Hello {
        Hello {
            role: Role::Node,
            refusal,
            id: self.node,
            description_crc: self.crc,
        }
    }

    /// Hands a connection whose hello passed to the router, then reads it until it ends.
    fn run_connection(&self, port: Port, stream: TcpStream, peer: String) -> String {
        let (connection, half) = match conn::open(stream, peer, self.ring()) {
            Ok(opened) => opened,
            Err(error) => return format!("cannot start its writer: {error}"),
        };
        if self.attach.send((port, Link::Tcp(connection))).is_err() {
            return "the node is stopping".to_string();
        }
        (self.ring())();
        conn::run_reader(half, self.limits)
    }

    /// The key proof with the peer `them`, when the cluster has a key.
    pub fn prove_key(&self, stream: &mut impl SetupStream, them: End) -> Result<(), ProofError> {
        let me = End {
            role: Role::Node,
            id: self.node,
        };
        match &self.key {
            Some(key) => prove_key(stream, key, me, them, self.crc),
            None => Ok(()),
        }
    }

    /// Which port an opening hello may use, or why not.
    pub fn port_for(&self, hello: &Hello) -> Result<Port, Refusal> {
        if hello.refusal.is_some() {
            return Err(Refusal::BadHello);
        }
        if hello.description_crc != self.crc {
            return Err(Refusal::DescriptionMismatch);
        }
        match hello.role {
            Role::Host if self.host == Some(hello.id) => Ok(Port::Host),
            Role::Node if hello.id > self.node => self
                .neighbours
                .iter()
                .position(|&id| id == hello.id)
                .map(Port::Link)
                .ok_or(Refusal::NotExpected),
            _ => Err(Refusal::NotExpected),
        }
    }
}

struct NodeProtocol {
    shared: Arc<Shared>,
}

/// The accepting side's opening over either socket: the peer's hello, the answer (a
/// refusal when the hello may not use a port), the key proof. The port and the peer's
/// hello when all passed; else `None`, logged.
pub(crate) fn open_accepted(
    shared: &Shared,
    stream: &mut impl SetupStream,
    peer: &str,
) -> Option<(Port, Hello)> {
    let opening = match conn::read_hello(stream) {
        Ok(hello) => shared.port_for(&hello).map(|port| (port, hello)),
        Err(conn::HelloExchangeError::Hello(error)) => {
            tracing::warn!(peer = %peer, "refused a connection: {error}");
            Err(Refusal::BadHello)
        }
        Err(error) => {
            tracing::warn!(peer = %peer, "closed a connection: {error}");
            return None;
        }
    };
    let (port, hello) = match opening {
        Ok(opened) => opened,
        Err(refusal) => {
            tracing::warn!(peer = %peer, "refused a connection: {refusal}");
            let _ = conn::send_hello(stream, &shared.hello(Some(refusal)));
            return None;
        }
    };
    conn::send_hello(stream, &shared.hello(None)).ok()?;
    let them = End {
        role: hello.role,
        id: hello.id,
    };
    if let Err(error) = shared.prove_key(stream, them) {
        tracing::warn!(peer = %peer, "refused a connection: {error}");
        return None;
    }
    Some((port, hello))
}

impl Protocol for NodeProtocol {
    fn serve(&self, connection: Accepted, admitted: Admitted) {
        let mut stream = match connection {
            Accepted::Tcp(stream) => stream,
            Accepted::Unix(stream) => {
                return crate::shm_node::serve(&self.shared, stream, &admitted)
            }
        };
        // Frames are small and a link carries many per round trip: without NODELAY an ack
        // written after a request waits out the peer's delayed ACK (40 ms on Linux).
        let _ = stream.set_nodelay(true);
        let peer = stream.peer_addr().map_or_else(
            |_| "an unknown peer".to_string(),
            |address| address.to_string(),
        );
        let shared = &self.shared;
        let Some((port, hello)) = open_accepted(shared, &mut stream, &peer) else {
            return;
        };
        if !admitted.handshake_done() {
            return;
        }
        let peer = format!("{} {} at {peer}", hello.role.name(), hello.id);
        let reason = shared.run_connection(port, stream, peer.clone());
        tracing::debug!(peer = %peer, "connection ended: {reason}");
    }

    fn refused(&self, _connection: &Accepted, open: usize, limit: usize) {
        tracing::warn!("refused a connection: {open} open, the limit is {limit}");
    }
}

/// Where a dialer reaches its neighbour.
#[derive(Debug, Clone)]
enum DialTarget {
    /// Its TCP address.
    Tcp(SocketAddr),
    /// Its Unix socket (a shared-memory link).
    Shm(PathBuf),
}

/// One dial and, when it opened, the link's life; the reason it ended, or why it did
/// not open (`Err`).
fn dial_and_run(
    shared: &Shared,
    link: usize,
    neighbour: u32,
    target: &DialTarget,
) -> Result<String, String> {
    match target {
        DialTarget::Tcp(address) => {
            let stream = dial_once(shared, neighbour, *address)?;
            let peer = format!("node {neighbour} at {address}");
            Ok(shared.run_connection(Port::Link(link), stream, peer))
        }
        DialTarget::Shm(path) => crate::shm_node::dial_and_run(shared, link, neighbour, path),
    }
}

/// Dials the lower-id neighbour on `link` until the node stops, redialing with backoff.
fn dial(shared: Arc<Shared>, link: usize, neighbour: u32, target: DialTarget) {
    let mut backoff = Duration::from_millis(20);
    while !shared.stopping.load(Ordering::SeqCst) {
        match dial_and_run(&shared, link, neighbour, &target) {
            Ok(reason) => {
                backoff = Duration::from_millis(20);
                if !shared.stopping.load(Ordering::SeqCst) {
                    tracing::warn!("link to node {neighbour} lost: {reason}; dialing again");
                }
            }
            Err(reason) => tracing::debug!("cannot reach node {neighbour}: {reason}"),
        }
        let until = std::time::Instant::now() + backoff;
        while std::time::Instant::now() < until && !shared.stopping.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10));
        }
        backoff = (backoff * 2).min(REDIAL_MAX);
    }
}

fn dial_once(shared: &Shared, neighbour: u32, address: SocketAddr) -> Result<TcpStream, String> {
    let mut stream =
        TcpStream::connect_timeout(&address, HELLO_TIMEOUT).map_err(|error| error.to_string())?;
    let _ = stream.set_nodelay(true);
    open_dialed(shared, &mut stream, neighbour, &address.to_string())?;
    Ok(stream)
}

/// The dialing side's opening over either socket: the hello, the neighbour's answer
/// (which must be node `neighbour` of this description), the key proof.
pub(crate) fn open_dialed(
    shared: &Shared,
    stream: &mut impl SetupStream,
    neighbour: u32,
    address: &str,
) -> Result<(), String> {
    conn::send_hello(stream, &shared.hello(None)).map_err(|error| error.to_string())?;
    let reply = conn::read_hello(stream).map_err(|error| error.to_string())?;
    if let Some(refusal) = reply.refusal {
        tracing::warn!("node {neighbour} refused this node's link: {refusal}");
        return Err(refusal.to_string());
    }
    if reply.role != Role::Node || reply.id != neighbour || reply.description_crc != shared.crc {
        let reason = format!(
            "the peer at {address} is not node {neighbour} of this description (it says it is {} {})",
            reply.role.name(),
            reply.id
        );
        tracing::warn!("{reason}");
        return Err(reason);
    }
    let them = End {
        role: Role::Node,
        id: neighbour,
    };
    if let Err(error) = shared.prove_key(stream, them) {
        let reason = format!("node {neighbour} at {address}: {error}");
        tracing::warn!("{reason}");
        return Err(reason);
    }
    Ok(())
}

/// Starts a node: every check first, then the threads.
pub fn start(options: &NodeOptions) -> Result<RunningNode, NodeError> {
    start_with_limits(options, NodeLimits::default())
}

/// How long the router polls its inputs before it parks: the window the caller gave (`cluster
/// node --spin-us`), else `FLASHPIPE_SPIN_US` when set; else, over shared memory, [`DEFAULT_DOORBELL_WINDOW_US`] (docs/design/25-cluster-shm.md,
/// "The one wait strategy"), and over TCP not at all: a TCP frame reaches the router through
/// a reader thread that needs a core, which a polling router on a small machine takes
/// (measured: one hop 371 us polling against 287 us parking at once, docs/benchmarks.md).
fn router_wait_policy(link: LinkKind, given: Option<WaitPolicy>) -> Result<WaitPolicy, NodeError> {
    if let Some(policy) = given {
        return Ok(policy);
    }
    match WaitPolicy::from_environment() {
        Some(policy) => policy.map_err(NodeError::SpinWindow),
        None => Ok(default_router_wait(link)),
    }
}

/// The router's wait without `FLASHPIPE_SPIN_US`: the doorbell window over shared memory,
/// parked at once over TCP.
fn default_router_wait(link: LinkKind) -> WaitPolicy {
    match link {
        LinkKind::Shm => WaitPolicy::spin_us(DEFAULT_DOORBELL_WINDOW_US),
        LinkKind::Tcp => WaitPolicy::spin_us(0),
    }
}

/// The node's listener and how it reaches a neighbour: TCP, or its Unix socket.
fn listen(
    loaded: &LoadedDescription,
    node: u32,
    address: SocketAddr,
) -> Result<Listener, NodeError> {
    if loaded.description.link == LinkKind::Shm {
        return crate::shm_node::listen(&loaded.socket_dir, node);
    }
    let listener = TcpListener::bind(address).map_err(|error| NodeError::Bind {
        address: address.to_string(),
        detail: error.to_string(),
    })?;
    Ok(Listener::Tcp(listener))
}

fn dial_target(loaded: &LoadedDescription, neighbour: u32) -> Result<DialTarget, NodeError> {
    if loaded.description.link == LinkKind::Shm {
        let path = flashpipe_cluster_host::shm_setup::socket_path(&loaded.socket_dir, neighbour);
        return Ok(DialTarget::Shm(path));
    }
    Ok(DialTarget::Tcp(node_address(
        &loaded.description,
        neighbour,
    )?))
}

/// [`start`] with other flow-control sizes (every node of a cluster uses the same).
pub fn start_with_limits(
    options: &NodeOptions,
    node_limits: NodeLimits,
) -> Result<RunningNode, NodeError> {
    assert!(
        node_limits.link_window > 0 && node_limits.credit_batch > 0 && node_limits.stage_frames > 0,
        "every flow-control size is at least one"
    );
    let loaded = load_description(&options.description)?;
    let description = &loaded.description;
    let node = options.node;
    let address = node_address(description, node)?;
    let entry = description
        .node(node)
        .expect("node_address found the node")
        .clone();
    image_folder(&options.image_folder)?;
    let image = options.image_folder.join(&entry.image);
    let host_count = (description.hosts.len() as u32).max(1);
    let config = description
        .router_config(node, NODE_TAGS, NODE_QUEUE_LIMIT, RequestCosts::REFLEX)
        .expect("the node is in the description");
    let links = config.links;
    let router = Router::new(config).map_err(|error| NodeError::Router { node, error })?;
    let listener = listen(&loaded, node, address)?;
    let config = description.preset_config(&entry).map_err(|error| {
        NodeError::Load(LoadError::Description {
            path: options.description.display().to_string(),
            error,
        })
    })?;
    let (array, image_reopened) = open_device(config, &image, node, host_count)?;
    let neighbours = description.neighbours(node);
    let host = description.host_on(node).map(|host| host.id);
    let stopping = Arc::new(AtomicBool::new(false));
    let (doorbell, bell) = NodeBell::create().map_err(NodeError::Doorbell)?;
    let bell = Arc::new(bell);
    let (attach, attach_receiver) = sync_channel(NODE_CONNECTIONS);
    if loaded.key.is_none() {
        tracing::warn!(
            "the description names no key_file: links and host connections are not authenticated \
             (any local user who can read the description can connect; docs/cluster.md, \"Key\")"
        );
    }
    let shared = Arc::new(Shared {
        node,
        crc: loaded.crc,
        limits: loaded.limits,
        key: loaded.key.clone(),
        host,
        neighbours: neighbours.clone(),
        stopping: Arc::clone(&stopping),
        bell: Arc::clone(&bell),
        attach,
    });
    let router_loop = RouterLoop {
        router,
        array,
        limits: loaded.limits,
        node_limits,
        links,
        neighbours: neighbours.clone(),
        host,
        attach: attach_receiver,
        doorbell,
        bell: Arc::clone(&bell),
        wait_policy: router_wait_policy(description.link, options.spin)?,
        stopping: Arc::clone(&stopping),
    };
    let router = std::thread::Builder::new()
        .name("cluster-router".to_string())
        .spawn(move || router_loop.run())
        .map_err(NodeError::Thread)?;
    let stopper = NodeStopper {
        stopping: Arc::clone(&stopping),
        bell: Arc::clone(&bell),
    };
    let server = Server::start(
        vec![listener],
        Limits {
            max_connections: NODE_CONNECTIONS,
            handshake_deadline: Some(HELLO_TIMEOUT),
        },
        Arc::new(NodeProtocol {
            shared: Arc::clone(&shared),
        }),
        "cluster-node",
    );
    let server = match server {
        Ok(server) => server,
        Err(error) => {
            stopper.stop();
            let _ = router.join();
            return Err(NodeError::Thread(error));
        }
    };
    let mut dialers = Vec::new();
    for (link, &neighbour) in neighbours.iter().enumerate() {
        if neighbour > node {
            continue;
        }
        let target = dial_target(&loaded, neighbour)?;
        let dial_shared = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name(format!("cluster-dial-{neighbour}"))
            .spawn(move || dial(dial_shared, link, neighbour, target));
        match spawned {
            Ok(thread) => dialers.push(thread),
            Err(error) => {
                stopper.stop();
                return Err(NodeError::Thread(error));
            }
        }
    }
    Ok(RunningNode {
        ready: NodeReady {
            node,
            address,
            socket: (description.link == LinkKind::Shm)
                .then(|| flashpipe_cluster_host::shm_setup::socket_path(&loaded.socket_dir, node)),
            preset: entry.preset.clone(),
            image,
            image_reopened,
            neighbours,
            host,
        },
        stopping,
        bell,
        router,
        server,
        dialers,
    })
}

impl RunningNode {
    /// What the node is.
    pub fn ready(&self) -> &NodeReady {
        &self.ready
    }

    /// A handle that stops the node.
    pub fn stopper(&self) -> NodeStopper {
        NodeStopper {
            stopping: Arc::clone(&self.stopping),
            bell: Arc::clone(&self.bell),
        }
    }

    /// Waits until the node is stopped; then stops accepting, ends every connection and
    /// returns what it did (the image synced).
    pub fn wait(mut self) -> Result<NodeSummary, NodeError> {
        let summary = self.router.join();
        self.server.stop();
        for dialer in self.dialers {
            let _ = dialer.join();
        }
        match summary {
            Ok(result) => result.map_err(NodeError::Sync),
            Err(_) => Err(NodeError::RouterFailed),
        }
    }
}

#[cfg(test)]
mod wait_tests {
    use super::*;

    #[test]
    fn the_router_polls_only_over_shared_memory() {
        assert!(default_router_wait(LinkKind::Tcp).parks_at_once());
        assert_eq!(
            default_router_wait(LinkKind::Shm).window_us(),
            DEFAULT_DOORBELL_WINDOW_US
        );
    }
}
