//! Tests of the shared-memory link set-up: the message's golden bytes and every refusal,
//! a whole exchange over a socket pair (records through both rings, each doorbell rung),
//! hostile offers (wrong message, wrong descriptor count, a ring smaller than announced,
//! a peer that closes), the socket folder's checks, and the peer rule.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::thread;

use flashpipe_shm::{PushOutcome, RingWait, SharedMemory};

use super::*;

/// The offer of 64 KiB rings, byte by byte (docs/cluster-wire.md).
const GOLDEN_OFFER: [u8; SETUP_BYTES] = [
    0x46, 0x50, 0x53, 0x48, 0x4d, 0x00, 0x00, 0x01, // FPSHM, 0, 0, version 1
    0x00, 0x00, 0x01, 0x00, // ring_bytes 65536
    0x00, 0x00, 0x00, 0x00, // reserved
];

#[test]
fn golden_bytes_encode_and_decode() {
    assert_eq!(encode_setup(DEFAULT_LINK_RING_BYTES), GOLDEN_OFFER);
    assert_eq!(decode_setup(&GOLDEN_OFFER).unwrap(), 65536);
}

#[test]
fn every_bad_message_is_refused_by_name() {
    let edit = |at: usize, value: u8| {
        let mut bytes = GOLDEN_OFFER;
        bytes[at] = value;
        decode_setup(&bytes).unwrap_err().to_string()
    };
    assert!(edit(0, b'X').contains("does not start with FPSHM"));
    assert!(edit(7, 2).contains("version 2"));
    assert!(edit(8, 1).contains("not a power of two"));
    assert!(edit(15, 1).contains("reserved bytes"));
    let small = encode_setup(1024);
    assert!(decode_setup(&small)
        .unwrap_err()
        .to_string()
        .contains("ring size 1024"));
    let huge = encode_setup(1 << 31);
    assert!(decode_setup(&huge).is_err());
}

fn doorbell() -> Doorbell {
    Doorbell::create("flashpipe-test-doorbell").unwrap()
}

#[test]
fn an_exchange_hands_over_both_rings_and_both_doorbells() {
    let (accepting, connecting) = UnixStream::pair().unwrap();
    let connector = thread::spawn(move || {
        let own = doorbell();
        let mut rings = accept_offer(&connecting, &own).unwrap();
        assert_eq!(
            rings.output.try_push(b"to the node").unwrap(),
            PushOutcome::Pushed
        );
        rings.peer_doorbell.ring();
        let reply = rings.input.pop(RingWait::DEFAULT).unwrap();
        assert_eq!(reply.as_deref(), Some(&b"to the connector"[..]));
        own.counters()
    });
    let own = doorbell();
    let mut rings = offer_rings(&accepting, DEFAULT_LINK_RING_BYTES, &own).unwrap();
    assert_eq!(rings.input.capacity_bytes(), 65536);
    let record = rings.input.pop(RingWait::DEFAULT).unwrap();
    assert_eq!(record.as_deref(), Some(&b"to the node"[..]));
    assert_eq!(
        rings.output.try_push(b"to the connector").unwrap(),
        PushOutcome::Pushed
    );
    rings.peer_doorbell.ring();
    connector.join().unwrap();
}

#[test]
fn a_wrong_offer_is_refused_and_nothing_is_answered() {
    let cases: [(Vec<u8>, usize, &str); 3] = [
        (
            b"GET / HTTP/1.1\r\n".to_vec(),
            3,
            "does not start with FPSHM",
        ),
        (GOLDEN_OFFER.to_vec(), 2, "with 2 descriptors, not 3"),
        (GOLDEN_OFFER.to_vec(), 0, "with 0 descriptors, not 3"),
    ];
    for (bytes, fds, expected) in cases {
        let (accepting, connecting) = UnixStream::pair().unwrap();
        let rings: Vec<FrameRing> = (0..2).map(|_| FrameRing::create(65536).unwrap()).collect();
        let bell = doorbell();
        let all = [rings[0].as_fd(), rings[1].as_fd(), bell.as_fd()];
        send_with_fds(&accepting, &bytes, &all[..fds]).unwrap();
        let message = match accept_offer(&connecting, &doorbell()) {
            Ok(_) => panic!("{expected}: accepted"),
            Err(error) => error.to_string(),
        };
        assert!(message.contains(expected), "{message} lacks {expected}");
        drop(connecting);
        let mut rest = Vec::new();
        let mut reader = &accepting;
        reader.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "{expected}: nothing answered");
    }
}

#[test]
fn a_ring_smaller_than_announced_or_not_a_ring_is_refused() {
    let (accepting, connecting) = UnixStream::pair().unwrap();
    let small = FrameRing::create(4096).unwrap();
    let bell = doorbell();
    send_with_fds(
        &accepting,
        &GOLDEN_OFFER,
        &[small.as_fd(), small.as_fd(), bell.as_fd()],
    )
    .unwrap();
    assert!(accept_offer(&connecting, &doorbell()).is_err());

    let (accepting, connecting) = UnixStream::pair().unwrap();
    let plain = SharedMemory::create("not-a-ring", 4096 + 65536).unwrap();
    send_with_fds(
        &accepting,
        &GOLDEN_OFFER,
        &[plain.as_fd(), plain.as_fd(), bell.as_fd()],
    )
    .unwrap();
    let message = accept_offer(&connecting, &doorbell())
        .err()
        .expect("refused")
        .to_string();
    assert!(message.contains("link ring"), "{message}");
}

#[test]
fn a_wrong_answer_or_a_closed_peer_is_refused() {
    let (accepting, connecting) = UnixStream::pair().unwrap();
    let peer = thread::spawn(move || {
        let mut offer = [0u8; SETUP_BYTES];
        let (_, _fds) = receive_with_fds(&connecting, &mut offer, OFFER_FDS).unwrap();
        let mut answer = offer;
        answer[8] = 0xff;
        let bell = doorbell();
        send_with_fds(&connecting, &answer, &[bell.as_fd()]).unwrap();
    });
    let message = offer_rings(&accepting, DEFAULT_LINK_RING_BYTES, &doorbell())
        .err()
        .expect("refused")
        .to_string();
    assert!(message.contains("set-up message refused"), "{message}");
    peer.join().unwrap();

    let (accepting, connecting) = UnixStream::pair().unwrap();
    drop(connecting);
    assert!(offer_rings(&accepting, DEFAULT_LINK_RING_BYTES, &doorbell()).is_err());
}

#[test]
fn the_socket_folder_is_made_private_and_an_open_one_is_refused() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("run");
    prepare_socket_dir(&dir).unwrap();
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    prepare_socket_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o750)).unwrap();
    let message = prepare_socket_dir(&dir).unwrap_err().to_string();
    assert!(
        message.contains("mode 750") && message.contains("chmod 700"),
        "{message}"
    );
    let file = base.path().join("file");
    std::fs::write(&file, b"").unwrap();
    assert!(prepare_socket_dir(&file)
        .unwrap_err()
        .to_string()
        .contains("not a folder"));
    let link = base.path().join("link");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    assert!(prepare_socket_dir(&link)
        .unwrap_err()
        .to_string()
        .contains("not a folder"));
    assert_eq!(socket_path(&dir, 3), dir.join("node-3.sock"));
}

#[test]
fn only_the_same_user_or_root_may_connect() {
    assert!(peer_allowed(1000, 1000));
    assert!(peer_allowed(0, 1000));
    assert!(!peer_allowed(65534, 1000));
    let (one, _other) = UnixStream::pair().unwrap();
    let peer = check_peer(&one).unwrap();
    assert_eq!(peer.pid, std::process::id() as i32);
    let refused = SetupError::PeerRefused {
        uid: 65534,
        pid: 42,
        expected: 0,
    };
    assert_eq!(
        refused.to_string(),
        "refused a peer of uid 65534 (pid 42): only uid 0 or root may connect"
    );
}
