//! A simulated node served by the real server's transmission core, seen from the
//! network's side: a request cut across two messages, the real server's refusals, a
//! failing device's error, and bytes that cannot be framed.

use super::*;

fn node_network(structured_replies: bool) -> (SimNetwork, usize, u64) {
    let network = SimNetwork::new(7);
    let node = network
        .add_node(SimNodeConfig {
            name: "node0".to_string(),
            size_bytes: 1 << 20,
            structured_replies,
            maximum_payload_bytes: 1 << 20,
            link: SimLinkConfig::reliable(),
        })
        .expect("node");
    let (connection, _export) = network.connect_now(node).expect("connect");
    (network, node, connection)
}

fn request(command: u16, flags: u16, cookie: u64, offset_bytes: u64, length_bytes: u32) -> Vec<u8> {
    wire::RequestHeader::new(flags, command, cookie, offset_bytes, length_bytes).to_bytes()
}

/// Runs every event; returns the reply messages delivered on `connection` and whether
/// it was lost.
fn settle(network: &SimNetwork, node: usize, connection: u64) -> (Vec<Vec<u8>>, bool) {
    while network.run_next_event() {}
    let mut replies = Vec::new();
    let mut lost = false;
    for delivery in network.take_deliveries(node) {
        match delivery {
            Delivery::Reply {
                connection: on,
                bytes,
            } if on == connection => replies.push(bytes),
            Delivery::Lost { connection: on, .. } if on == connection => lost = true,
            _ => {}
        }
    }
    (replies, lost)
}

fn simple(error: u32, cookie: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    wire::encode_simple_reply(&mut bytes, error, cookie);
    bytes
}

#[test]
fn a_write_cut_across_two_messages_is_joined_and_reads_back() {
    let (network, node, connection) = node_network(false);
    let mut write = request(wire::CMD_WRITE, 0, 1, 4096, 512);
    write.extend_from_slice(&[0x6b; 512]);
    let rest = write.split_off(100);
    network.send_to_node(node, connection, write);
    network.send_to_node(node, connection, rest);
    let (replies, lost) = settle(&network, node, connection);
    assert!(!lost);
    assert_eq!(replies, vec![simple(0, 1)]);
    network.send_to_node(node, connection, request(wire::CMD_READ, 0, 2, 4096, 512));
    let (replies, _) = settle(&network, node, connection);
    let mut expected = simple(0, 2);
    expected.extend_from_slice(&[0x6b; 512]);
    assert_eq!(replies, vec![expected]);
    assert_eq!(network.requests_served(node), 2);
}

#[test]
fn a_node_refuses_what_the_real_server_refuses() {
    let (network, node, connection) = node_network(false);
    let mut bytes = request(wire::CMD_WRITE, 0, 1, 1 << 20, 512);
    bytes.extend_from_slice(&[1; 512]);
    bytes.extend(request(wire::CMD_READ, 0, 2, 3, 512));
    bytes.extend(request(wire::CMD_TRIM, wire::CMD_FLAG_DF, 3, 0, 512));
    network.send_to_node(node, connection, bytes);
    let (mut replies, lost) = settle(&network, node, connection);
    assert!(!lost, "refusals leave the connection usable");
    replies.sort_by_key(|reply| reply[8..16].to_vec());
    assert_eq!(
        replies,
        vec![
            simple(wire::NBD_ENOSPC, 1),
            simple(wire::NBD_EINVAL, 2),
            simple(wire::NBD_EINVAL, 3)
        ]
    );
}

#[test]
fn a_failing_device_is_answered_by_the_core_s_error_path() {
    let (network, node, connection) = node_network(true);
    network.set_failure_probability(node, 1.0);
    network.send_to_node(node, connection, request(wire::CMD_FLUSH, 0, 5, 0, 0));
    let (replies, lost) = settle(&network, node, connection);
    assert!(!lost);
    let mut expected = Vec::new();
    wire::encode_chunk_error(&mut expected, 5, wire::NBD_EIO, "");
    assert_eq!(replies.len(), 1);
    let reply = &replies[0];
    assert_eq!(&reply[..16], &expected[..16], "an error chunk for cookie 5");
    assert_eq!(&reply[20..24], &wire::NBD_EIO.to_be_bytes()[..]);
    let message = String::from_utf8_lossy(&reply[26..]);
    assert!(message.contains("simulated device failure"), "{message}");
    assert_eq!(network.counters().requests_failed, 1);
}

#[test]
fn bytes_that_cannot_be_framed_end_the_connection() {
    let (network, node, connection) = node_network(false);
    let mut bytes = request(wire::CMD_FLUSH, 0, 1, 0, 0);
    bytes[0] ^= 0x80;
    network.send_to_node(node, connection, bytes);
    let (replies, lost) = settle(&network, node, connection);
    assert!(replies.is_empty());
    assert!(lost);
}
