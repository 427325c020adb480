//! Tests of the accept loop over loopback TCP and a Unix socket: the connection limit,
//! the absolute handshake deadline and the graceful stop.

use super::*;
use std::io::{Read, Write};
use std::sync::mpsc;

/// Echoes one byte back per byte read until the client closes or a read fails; reports
/// how each connection ended, and each refusal.
/// Over TCP, a first byte 0 ends the handshake (any other first byte does not).
struct Echo {
    ends: Mutex<mpsc::Sender<String>>,
    refusals: Mutex<mpsc::Sender<(usize, usize)>>,
    expired: Mutex<mpsc::Sender<u64>>,
}

impl Protocol for Echo {
    fn serve(&self, connection: Accepted, admitted: Admitted) {
        let end = match connection {
            Accepted::Tcp(mut stream) => {
                let mut first = [1u8; 1];
                if stream.peek(&mut first).is_ok() && first[0] == 0 {
                    assert!(admitted.handshake_done(), "done within the deadline");
                }
                echo_until_end(&mut stream)
            }
            Accepted::Unix(mut stream) => format!("unix {}", echo_until_end(&mut stream)),
        };
        let _ = self.ends.lock().unwrap().send(end);
    }

    fn refused(&self, _connection: &Accepted, open: usize, limit: usize) {
        let _ = self.refusals.lock().unwrap().send((open, limit));
    }

    fn handshake_expired(&self, _connection: &Accepted, id: u64) {
        let _ = self.expired.lock().unwrap().send(id);
    }
}

fn echo_until_end(stream: &mut (impl Read + Write)) -> String {
    let mut byte = [0u8; 1];
    loop {
        match stream.read(&mut byte) {
            Ok(0) => return "closed".to_string(),
            Ok(_) => {
                if stream.write_all(&byte).is_err() {
                    return "write failed".to_string();
                }
            }
            Err(error) => return format!("error {:?}", error.kind()),
        }
    }
}

type Started = (
    Server,
    SocketAddr,
    mpsc::Receiver<String>,
    mpsc::Receiver<(usize, usize)>,
    mpsc::Receiver<u64>,
);

/// What an echo server's connections report: how each ended, refusals, expired handshakes.
type Reports = (
    mpsc::Receiver<String>,
    mpsc::Receiver<(usize, usize)>,
    mpsc::Receiver<u64>,
);

fn start(limits: Limits) -> Started {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let (server, (ends, refusals, expired)) = start_echo(Listener::Tcp(listener), limits);
    (server, address, ends, refusals, expired)
}

/// An echo server on `listener`, and what its connections report.
fn start_echo(listener: Listener, limits: Limits) -> (Server, Reports) {
    let (end_sender, ends) = mpsc::channel();
    let (refusal_sender, refusals) = mpsc::channel();
    let (expired_sender, expired) = mpsc::channel();
    let protocol = Arc::new(Echo {
        ends: Mutex::new(end_sender),
        refusals: Mutex::new(refusal_sender),
        expired: Mutex::new(expired_sender),
    });
    let server = Server::start(vec![listener], limits, protocol, "test").unwrap();
    (server, (ends, refusals, expired))
}

/// How the next connection ended.
fn next_end(ends: &mpsc::Receiver<String>) -> String {
    ends.recv_timeout(Duration::from_secs(10)).unwrap()
}

fn echo(stream: &mut TcpStream, byte: u8) -> u8 {
    stream.write_all(&[byte]).unwrap();
    let mut back = [0u8; 1];
    stream.read_exact(&mut back).unwrap();
    back[0]
}

const NO_DEADLINE: Limits = Limits {
    max_connections: 2,
    handshake_deadline: None,
};

#[test]
fn a_connection_past_the_limit_is_closed_and_reported() {
    let (mut server, address, _ends, refusals, _expired) = start(NO_DEADLINE);
    let mut first = TcpStream::connect(address).unwrap();
    let mut second = TcpStream::connect(address).unwrap();
    assert_eq!(echo(&mut first, 1), 1);
    assert_eq!(echo(&mut second, 2), 2);
    assert_eq!(server.open_connections(), 2);
    let mut third = TcpStream::connect(address).unwrap();
    assert_eq!(
        refusals.recv_timeout(Duration::from_secs(10)).unwrap(),
        (2, 2)
    );
    let mut rest = Vec::new();
    assert_eq!(third.read_to_end(&mut rest).unwrap_or(0), 0);
    server.stop();
    assert_eq!(server.open_connections(), 0);
}

const DEADLINE: Limits = Limits {
    max_connections: 4,
    handshake_deadline: Some(Duration::from_millis(200)),
};

#[test]
fn a_silent_client_meets_the_handshake_deadline() {
    let (mut server, address, ends, _refusals, expired) = start(DEADLINE);
    let mut silent = TcpStream::connect(address).unwrap();
    assert_eq!(expired.recv_timeout(Duration::from_secs(10)).unwrap(), 1);
    assert_eq!(next_end(&ends), "closed");
    let mut rest = Vec::new();
    assert_eq!(
        silent.read_to_end(&mut rest).unwrap_or(0),
        0,
        "shut both ways"
    );
    server.stop();
}

#[test]
fn a_client_trickling_bytes_is_closed_at_the_same_deadline() {
    let (mut server, address, ends, _refusals, expired) = start(DEADLINE);
    let mut trickling = TcpStream::connect(address).unwrap();
    // One byte every 20 ms (at most 500 of them): each read is quick, the handshake never
    // ends; the deadline counts from the accept, not from the last byte.
    let mut sent = 0;
    while expired.try_recv().is_err() && trickling.write_all(&[1]).is_ok() {
        sent += 1;
        assert!(sent < 500, "still open after {sent} bytes, 20 ms apart");
        std::thread::sleep(Duration::from_millis(20));
    }
    let end = ends.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(end == "closed" || end == "write failed", "{end}");
    server.stop();
}

#[test]
fn a_finished_handshake_outlives_the_deadline() {
    let (mut server, address, ends, _refusals, expired) = start(DEADLINE);
    let mut client = TcpStream::connect(address).unwrap();
    assert_eq!(echo(&mut client, 0), 0, "the hello byte ends the handshake");
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(echo(&mut client, 9), 9, "served past the deadline");
    assert!(expired.try_recv().is_err());
    drop(client);
    assert_eq!(next_end(&ends), "closed");
    server.stop();
}

#[test]
fn stop_ends_accepting_and_every_connection_after_its_reader_ends() {
    let (mut server, address, ends, _refusals, _expired) = start(NO_DEADLINE);
    let mut client = TcpStream::connect(address).unwrap();
    assert_eq!(echo(&mut client, 7), 7);
    server.stop();
    assert!(server.is_stopping());
    assert_eq!(next_end(&ends), "closed");
    assert_eq!(server.open_connections(), 0);
    // Nobody accepts any more: a connection may still be queued by the kernel until the
    // listener is dropped with the joined loop, but it is never served.
    if let Ok(mut late) = TcpStream::connect(address) {
        late.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let _ = late.write_all(&[1]);
        let mut back = [0u8; 1];
        assert!(!matches!(late.read(&mut back), Ok(1)));
    }
}

#[test]
fn a_unix_listener_serves_and_stops() {
    let (path, listener) = unix_listener("accept");
    let unix = Listener::Unix {
        listener,
        path: path.clone(),
    };
    let (mut server, (ends, _refusals, _expired)) = start_echo(unix, NO_DEADLINE);
    let mut client = UnixStream::connect(&path).unwrap();
    client.write_all(&[9]).unwrap();
    let mut back = [0u8; 1];
    client.read_exact(&mut back).unwrap();
    assert_eq!(back[0], 9);
    server.stop();
    assert_eq!(
        ends.recv_timeout(Duration::from_secs(10)).unwrap(),
        "unix closed"
    );
    let _ = std::fs::remove_dir_all(path.parent().expect("the socket's folder"));
}

/// Admits only connections whose peer's uid is `allowed_uid`; reports each peer and each
/// served id.
struct Gate {
    allowed_uid: u32,
    peers: Mutex<mpsc::Sender<(u64, PeerInfo)>>,
    served: Mutex<mpsc::Sender<u64>>,
}

impl Protocol for Gate {
    fn serve(&self, connection: Accepted, admitted: Admitted) {
        let _ = self.served.lock().unwrap().send(admitted.id());
        if let Accepted::Unix(mut stream) = connection {
            let _ = echo_until_end(&mut stream);
        }
    }

    fn refused(&self, _connection: &Accepted, _open: usize, _limit: usize) {}

    fn admit(&self, connection: &Accepted, peer: &io::Result<PeerInfo>, id: u64) -> bool {
        let peer = *peer.as_ref().unwrap();
        let _ = self.peers.lock().unwrap().send((id, peer));
        let allowed = matches!(peer, PeerInfo::Unix { uid, .. } if uid == self.allowed_uid);
        if !allowed {
            if let Accepted::Unix(stream) = connection {
                let _ = (&*stream).write_all(b"refused");
            }
        }
        allowed
    }
}

/// A listener on `socket` in the folder `flashpipe-net-{name}-{pid}` under the temporary
/// folder: the socket's path and the listener.
fn unix_listener(name: &str) -> (PathBuf, UnixListener) {
    let directory =
        std::env::temp_dir().join(format!("flashpipe-net-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let path = directory.join("socket");
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).unwrap();
    (path, listener)
}

fn unix_gate(name: &str, allowed_uid: u32) -> (Server, PathBuf, Gated) {
    let (path, listener) = unix_listener(name);
    let (peer_sender, peers) = mpsc::channel();
    let (served_sender, served) = mpsc::channel();
    let protocol = Arc::new(Gate {
        allowed_uid,
        peers: Mutex::new(peer_sender),
        served: Mutex::new(served_sender),
    });
    let listeners = vec![Listener::Unix {
        listener,
        path: path.clone(),
    }];
    let server = Server::start(listeners, NO_DEADLINE, protocol, "test").unwrap();
    (server, path, (peers, served))
}

type Gated = (mpsc::Receiver<(u64, PeerInfo)>, mpsc::Receiver<u64>);

fn own_uid() -> u32 {
    // SAFETY: geteuid takes no argument and cannot fail.
    unsafe { libc::geteuid() }
}

fn own_gid() -> u32 {
    // SAFETY: getegid takes no argument and cannot fail.
    unsafe { libc::getegid() }
}

#[test]
fn admit_sees_the_kernels_credentials_before_any_byte_and_can_refuse() {
    let uid = own_uid();
    let (mut server, path, (peers, served)) = unix_gate("admit", uid.wrapping_add(1));
    let mut refused = UnixStream::connect(&path).unwrap();
    let (id, peer) = peers.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(id, 1, "ids grow from 1");
    assert_eq!(
        peer,
        PeerInfo::Unix {
            pid: std::process::id() as i32,
            uid,
            gid: own_gid(),
        }
    );
    let mut answer = Vec::new();
    refused.read_to_end(&mut answer).unwrap();
    assert_eq!(answer, b"refused", "the refusal is written, then the close");
    assert!(
        served.try_recv().is_err(),
        "a refused connection is not served"
    );
    assert_eq!(server.open_connections(), 0);
    server.stop();
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[test]
fn an_admitted_connection_is_served_with_its_id() {
    let (mut server, path, (peers, served)) = unix_gate("served", own_uid());
    let mut client = UnixStream::connect(&path).unwrap();
    client.write_all(&[5]).unwrap();
    let mut back = [0u8; 1];
    client.read_exact(&mut back).unwrap();
    assert_eq!(back[0], 5);
    let (admitted, _) = peers.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(
        served.recv_timeout(Duration::from_secs(10)).unwrap(),
        admitted
    );
    server.stop();
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[test]
fn a_stopper_ends_accepting_even_when_the_socket_path_is_gone() {
    let (mut server, path, _gated) = unix_gate("gone", own_uid());
    std::fs::remove_file(&path).unwrap();
    let stopper = server.stopper();
    let stopping = std::thread::spawn(move || stopper.stop_accepting());
    stopping.join().unwrap();
    assert!(server.join_accepting(), "the accept loop ended cleanly");
    assert!(server.is_stopping());
    server.stop();
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}
