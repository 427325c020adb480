//! A server over a RAM-disk store in a scratch folder, for the server's tests.

#![allow(dead_code)]

use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use flashpipe_client::{
    Client, ClientError, ClientTransport, ConnectOptions, ErrorCode, TransportExt,
};
use flashpipe_device::BufferPool;
use flashpipe_device::RamDisk;
use flashpipe_engine::{EngineConfig, PoolMemory};
use flashpipe_fs::{Filesystem, FormatOptions};
use flashpipe_protocol::{
    decode_body, decode_header, encode_frame, Frame, Hello, Request, Response, RingsOpened,
    HEADER_BYTES, MAX_BODY_BYTES,
};
use flashpipe_server::{Server, ServerConfig};
use flashpipe_shm::{receive_with_fds, send_with_fds};
use flashpipe_store::RunningStore;
use flashpipe_testkit::scratch::ScratchFolder;

/// A server of a fresh RAM-disk store, its socket in its own scratch folder.
pub struct TestServer {
    pub server: Server,
    /// The engine's read pool (its free count shows what clients hold).
    pub read_pool: BufferPool,
    pub socket: PathBuf,
    _folder: ScratchFolder,
}

/// A RAM-disk store (32 MiB, 4 KiB blocks) with its engine running, its read pool in
/// shared memory (so clients may map it).
pub fn ram_store() -> RunningStore {
    let disk = RamDisk::new("ram0", 4096, 8192, 32).expect("RAM disk");
    let filesystem = Filesystem::format(
        Box::new(disk),
        &FormatOptions {
            fs_block_size_bytes: 4096,
            store_identity: None,
        },
    )
    .expect("format");
    let config = EngineConfig {
        read_pool_memory: PoolMemory::Shared,
        read_buffer_count: 16,
        ..EngineConfig::default()
    };
    let store = RunningStore::start(filesystem, config);
    assert!(
        store.engine.shared_read_pool_refusal().is_none(),
        "memfd refused"
    );
    store
}

/// Starts a server of a fresh RAM store; `adjust` changes its configuration.
pub fn start_server(name: &str, adjust: impl FnOnce(&mut ServerConfig)) -> TestServer {
    let folder = ScratchFolder::new(name);
    let socket = folder.path().join("serve.sock");
    let mut config = ServerConfig {
        socket_path: socket.clone(),
        store_description: format!("RAM store of test {name}"),
        ..ServerConfig::default()
    };
    adjust(&mut config);
    let store = ram_store();
    let read_pool = store.engine.read_pool();
    let server = Server::start(store, config).expect("server started");
    TestServer {
        server,
        read_pool,
        socket,
        _folder: folder,
    }
}

/// Names the transport of the clients [`connect`] makes: `socket` keeps every frame
/// on the socket; unset or anything else moves a mapping client's frames into rings
/// (the default). Run the suites both ways to cover both transports.
pub const TRANSPORT_VARIABLE: &str = "FLASHPIPE_TEST_TRANSPORT";

/// The transport [`TRANSPORT_VARIABLE`] names.
pub fn test_transport() -> ClientTransport {
    match std::env::var(TRANSPORT_VARIABLE).as_deref() {
        Ok("socket") => ClientTransport::Socket,
        _ => ClientTransport::RingsWhenMapped,
    }
}

/// Connects on the copying path (`map_memory` false) or by reference (through rings
/// unless [`TRANSPORT_VARIABLE`] says `socket`).
pub fn connect(socket: &std::path::Path, map_memory: bool) -> Client {
    connect_with(socket, map_memory, test_transport())
}

/// The error code a server answered with; panics on a local error.
pub fn remote_code(error: &ClientError) -> ErrorCode {
    error
        .remote()
        .unwrap_or_else(|| panic!("a server error, not {error}"))
        .code
}

/// The names of the files in the store, as the server lists them.
pub fn listed_names(client: &mut Client) -> Vec<String> {
    client
        .list()
        .expect("list")
        .into_iter()
        .map(|stat| stat.name)
        .collect()
}

/// Connects with the transport given.
pub fn connect_with(
    socket: &std::path::Path,
    map_memory: bool,
    transport: ClientTransport,
) -> Client {
    Client::connect(
        socket,
        ConnectOptions {
            map_memory,
            client_name: "test client".to_string(),
            transport,
            ..ConnectOptions::default()
        },
    )
    .expect("connected")
}

/// Bytes that differ by `seed` and position.
pub fn pattern(length: usize, seed: u64) -> Vec<u8> {
    (0..length)
        .map(|index| {
            ((index as u64)
                .wrapping_mul(31)
                .wrapping_add(seed.wrapping_mul(131))
                % 251) as u8
        })
        .collect()
}

/// Waits (yielding, no wall-clock bound) until `condition` holds.
pub fn wait_until(mut condition: impl FnMut() -> bool) {
    while !condition() {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Shakes hands by hand as `client_name`, speaking `version` only and mapping memory, and
/// opens rings: the socket, the rings-opened answer and the descriptors that came with it.
pub fn open_rings_by_hand(
    path: &std::path::Path,
    version: u16,
    client_name: &str,
) -> (UnixStream, RingsOpened, Vec<OwnedFd>) {
    let socket = UnixStream::connect(path).expect("connect");
    let hello = Frame::Hello(Hello {
        min_version: version,
        max_version: version,
        map_memory: true,
        client_name: client_name.to_string(),
    });
    send_with_fds(&socket, &encode_frame(&hello), &[]).expect("hello sent");
    let (welcome, _) = receive_frame_with_fds(&socket);
    assert!(matches!(welcome, Frame::Welcome(_)), "{welcome:?}");
    let open = Frame::Request {
        request_id: 1,
        request: Request::OpenRings,
    };
    send_with_fds(&socket, &encode_frame(&open), &[]).expect("open-rings sent");
    let (answer, fds) = receive_frame_with_fds(&socket);
    let Frame::Response {
        response: Response::RingsOpened(rings),
        ..
    } = answer
    else {
        panic!("open-rings answered {answer:?}")
    };
    (socket, rings, fds)
}

/// Receives one frame from the socket with the descriptors passed beside its header.
pub fn receive_frame_with_fds(socket: &UnixStream) -> (Frame, Vec<OwnedFd>) {
    let mut header = [0u8; HEADER_BYTES];
    let mut filled = 0;
    let mut fds = Vec::new();
    while filled < HEADER_BYTES {
        let (count, mut came) = receive_with_fds(socket, &mut header[filled..], 4).expect("recv");
        assert!(count > 0, "the server closed the connection");
        fds.append(&mut came);
        filled += count;
    }
    let decoded = decode_header(&header, MAX_BODY_BYTES).expect("header");
    let mut body = vec![0u8; decoded.body_length_bytes as usize];
    let mut reading = socket;
    reading.read_exact(&mut body).expect("body");
    let frame = decode_body(&decoded, &body).expect("frame");
    (frame, fds)
}

/// Connects without a client and sends a hello offering `versions`, named `client_name`;
/// the socket, its welcome not read yet.
pub fn raw_hello(
    socket: &std::path::Path,
    versions: std::ops::RangeInclusive<u16>,
    map_memory: bool,
    client_name: &str,
) -> UnixStream {
    let mut raw = UnixStream::connect(socket).expect("raw connect");
    let hello = Frame::Hello(Hello {
        min_version: *versions.start(),
        max_version: *versions.end(),
        map_memory,
        client_name: client_name.into(),
    });
    std::io::Write::write_all(&mut raw, &encode_frame(&hello)).expect("hello");
    raw
}
