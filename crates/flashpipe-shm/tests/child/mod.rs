//! The second process of the shm tests: this test binary run again, its `child_side` test
//! alone, with the path of a socket to connect to in an environment variable.

#![allow(dead_code)] // each test file uses the helpers it needs

use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::{Child, Command};

/// A running child and the parent's end of its socket.
pub struct ChildSide {
    /// The connected socket.
    pub stream: UnixStream,
    /// The child process.
    pub child: Child,
    /// The folder holding the socket, removed when dropped.
    _folder: tempfile::TempDir,
}

/// Starts this binary's `child_side` test with `variable` naming a fresh socket, and
/// accepts its connection.
pub fn start_child_side(variable: &str) -> ChildSide {
    let folder = tempfile::tempdir().unwrap();
    let socket_path = folder.path().join("child.sock");
    let listener = UnixListener::bind(&socket_path).unwrap();
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["child_side", "--exact", "--nocapture", "--test-threads=1"])
        .env(variable, &socket_path)
        .spawn()
        .unwrap();
    let (stream, _) = listener.accept().unwrap();
    ChildSide {
        stream,
        child,
        _folder: folder,
    }
}

/// In the child, its socket connected; `None` when the test runs as an ordinary test.
pub fn connect_to_parent(variable: &str) -> Option<UnixStream> {
    let socket_path = PathBuf::from(std::env::var_os(variable)?);
    Some(UnixStream::connect(socket_path).unwrap())
}

/// In the child, its socket connected and the `N` descriptors the parent sent first;
/// `None` when the test runs as an ordinary test.
pub fn fds_from_parent<const N: usize>(variable: &str) -> Option<(UnixStream, [OwnedFd; N])> {
    let stream = connect_to_parent(variable)?;
    let mut buffer = [0u8; 8];
    let (_, fds) = flashpipe_shm::receive_with_fds(&stream, &mut buffer, N).unwrap();
    let fds: [OwnedFd; N] = fds.try_into().expect("the descriptors the parent sends");
    Some((stream, fds))
}
