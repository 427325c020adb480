//! The warn line a bad frame in a shared-memory ring leaves: it names the peer (its role,
//! id and process) and the reason, and says only that link is closed. Alone in its test
//! binary because it installs the process's log subscriber.

mod common;
mod shm_peer;

use std::io::Write;
use std::sync::{Arc, Mutex};

use flashpipe_cluster_node::hello::Role;
use shm_peer::{first_of_two_shm_nodes, open_peer};

/// Log lines written into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_bad_frame_in_a_ring_is_logged_with_the_peer_and_the_reason() {
    let captured = Captured::default();
    let writer = captured.clone();
    tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();
    let (_root, loaded, node) = first_of_two_shm_nodes("cluster-node-shm-bad-frame-log");
    let mut neighbour = open_peer(&loaded, 0, Role::Node, 1);
    neighbour.send(&[0xff; 32]);
    assert!(neighbour.next_frame().is_none(), "the link is closed");
    node.stopper().stop();
    node.wait().expect("every tag is free at the stop");
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let line = log
        .lines()
        .find(|line| line.contains("closing this shared-memory link only"))
        .unwrap_or_else(|| panic!("no warn line for the bad frame in:\n{log}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(
        line.contains("node 1 (pid "),
        "the line names the peer: {line}"
    );
    assert!(
        line.contains("bad frame"),
        "the line names the reason: {line}"
    );
}
