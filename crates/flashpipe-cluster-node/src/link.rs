//! What the router thread holds for a connected port: a TCP [`Connection`] (a reader and a
//! writer thread beside it) or a [`RingLink`], a shared-memory link the router thread reads
//! and writes itself (docs/design/25-cluster-shm.md, step 3).
//!
//! A ring link's input ring carries the peer's frames as one byte stream (the encoding of
//! TCP, cut into records of at most a quarter of the ring), decoded here with the same
//! frame limits; a bad frame or a corrupt ring ends the link with a log line naming the
//! peer and the reason. Outbound frames go into the peer's input ring without waiting, and
//! the peer's doorbell is rung; what does not fit comes back to the router as a TCP
//! writer's full channel does (the port's pending slot, the same stall clock). The Unix
//! socket of the set-up stays open: its hang-up (the peer ended, or killed) is the link
//! down, through the same close path as TCP. Closing a ring link closes both rings, so the
//! peer sees it at once, and shuts the socket.

use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use flashpipe_cluster::wire::{self, Frame, WireLimits, HEADER_BYTES};
use flashpipe_cluster_host::shm_setup::LinkRings;
use flashpipe_cluster_host::shm_stream::socket_hung_up;
use flashpipe_shm::ring_stream::stream_record_bytes;
use flashpipe_shm::{Doorbell, FrameRing, PushOutcome, RingWait};

use crate::conn::{Connection, Inbound};

/// How often an idle ring link's socket is looked at for a hang-up.
const HANGUP_CHECK: Duration = Duration::from_millis(1);

/// What one look at a link's input found.
pub(crate) enum Received {
    /// A frame, decoded and checked.
    Frame(Frame),
    /// Nothing now.
    Empty,
    /// The link ended; why, in words.
    Closed(String),
}

/// A connected port's link.
pub(crate) enum Link {
    /// Over TCP: frames through the reader's and the writer's channels.
    Tcp(Connection),
    /// Over shared memory: frames through the rings (boxed: its buffers and handles make
    /// it several times a connection's size).
    Ring(Box<RingLink>),
}

impl Link {
    /// Who is at the other end, in words (for logs).
    pub fn peer(&self) -> &str {
        match self {
            Link::Tcp(connection) => &connection.peer,
            Link::Ring(link) => &link.peer,
        }
    }

    /// The next frame, without waiting.
    pub fn try_recv(&mut self) -> Received {
        match self {
            Link::Tcp(connection) => match connection.inbound.try_recv() {
                Ok(Inbound::Frame(frame)) => Received::Frame(frame),
                Ok(Inbound::Closed(reason)) => Received::Closed(reason),
                Err(std::sync::mpsc::TryRecvError::Empty) => Received::Empty,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    Received::Closed("its reader ended".to_string())
                }
            },
            Link::Ring(link) => link.try_recv(),
        }
    }

    /// Hands encoded bytes on without waiting; what does not fit comes back. `Err(None)`:
    /// the link's output is gone.
    pub fn try_send(&mut self, bytes: Vec<u8>) -> Result<(), Option<Vec<u8>>> {
        match self {
            Link::Tcp(connection) => connection.try_send(bytes),
            Link::Ring(link) => link.try_send(bytes),
        }
    }

    /// Whether a ring link has something to take (the router's poll before it parks); a
    /// TCP connection's reader rings the node's doorbell instead.
    pub fn has_input(&self) -> bool {
        match self {
            Link::Tcp(_) => false,
            Link::Ring(link) => link.input.has_input(),
        }
    }

    /// Whether a ring link's output has room again for a frame that did not fit (the
    /// consumer took enough that the ring is no longer crowded; it also rings the node's
    /// doorbell then, which a park sees); a TCP connection's writer channel is not
    /// looked at (false).
    pub fn has_room(&self) -> bool {
        match self {
            Link::Tcp(_) => false,
            Link::Ring(link) => !link.output.is_crowded(),
        }
    }

    /// Ends the link both ways.
    pub fn close(&mut self) {
        match self {
            Link::Tcp(connection) => connection.close(),
            Link::Ring(link) => link.close(),
        }
    }
}

/// A shared-memory link as the router thread drives it.
pub(crate) struct RingLink {
    peer: String,
    input: FrameRing,
    output: FrameRing,
    peer_doorbell: Doorbell,
    socket: UnixStream,
    limits: WireLimits,
    /// Stream bytes taken from the input ring and not yet decoded, from `start`.
    bytes: Vec<u8>,
    start: usize,
    record: Vec<u8>,
    checked_at: Instant,
}

impl RingLink {
    /// The router's end of a link whose set-up passed over `socket`.
    pub fn new(rings: LinkRings, socket: UnixStream, peer: String, limits: WireLimits) -> RingLink {
        RingLink {
            peer,
            input: rings.input,
            output: rings.output,
            peer_doorbell: rings.peer_doorbell,
            socket,
            limits,
            bytes: Vec::with_capacity(limits.max_frame_bytes()),
            start: 0,
            record: Vec::new(),
            checked_at: Instant::now(),
        }
    }

    fn try_recv(&mut self) -> Received {
        loop {
            match self.decode_buffered() {
                Ok(Some(frame)) => return Received::Frame(frame),
                Ok(None) => {}
                Err(reason) => return self.bad(reason),
            }
            let crowded = self.input.is_crowded();
            match self.input.pop_into(RingWait::NoWait, &mut self.record) {
                Ok(true) => {
                    if crowded {
                        self.peer_doorbell.ring();
                    }
                    self.take_record();
                }
                Ok(false) if self.input.is_closed() => return self.closed_drained(),
                Ok(false) => return self.empty(),
                Err(error) => return self.bad(format!("bad ring: {error}")),
            }
        }
    }

    /// Appends the popped record to the undecoded bytes (dropping what is decoded).
    fn take_record(&mut self) {
        if self.start == self.bytes.len() {
            self.bytes.clear();
            self.start = 0;
        } else if self.start > 0 {
            self.bytes.drain(..self.start);
            self.start = 0;
        }
        self.bytes.extend_from_slice(&self.record);
    }

    /// The next whole frame among the undecoded bytes, if one is there.
    fn decode_buffered(&mut self) -> Result<Option<Frame>, String> {
        let pending = &self.bytes[self.start..];
        if pending.len() < HEADER_BYTES {
            return Ok(None);
        }
        let length = wire::frame_length(pending, self.limits)
            .map_err(|error| format!("bad frame: {error}"))?;
        if pending.len() < length {
            return Ok(None);
        }
        let (frame, used) = wire::decode(&pending[..length], self.limits)
            .map_err(|error| format!("bad frame: {error}"))?;
        self.start += used;
        Ok(Some(frame))
    }

    /// The input ring is closed: what it held is taken (a record pushed just before the
    /// close is popped here), then the link is down.
    fn closed_drained(&mut self) -> Received {
        match self.input.pop_into(RingWait::NoWait, &mut self.record) {
            Ok(true) => {
                self.take_record();
                self.try_recv_after_close()
            }
            Ok(false) if self.start < self.bytes.len() => {
                Received::Closed("the peer closed the link in the middle of a frame".to_string())
            }
            Ok(false) => Received::Closed("the peer closed the link".to_string()),
            Err(error) => self.bad(format!("bad ring: {error}")),
        }
    }

    fn try_recv_after_close(&mut self) -> Received {
        match self.decode_buffered() {
            Ok(Some(frame)) => Received::Frame(frame),
            Ok(None) => self.closed_drained(),
            Err(reason) => self.bad(reason),
        }
    }

    /// Nothing pending: looks at the socket for a hang-up, at most every [`HANGUP_CHECK`].
    fn empty(&mut self) -> Received {
        if self.checked_at.elapsed() < HANGUP_CHECK {
            return Received::Empty;
        }
        self.checked_at = Instant::now();
        if socket_hung_up(&self.socket) {
            return Received::Closed("the peer's socket hung up".to_string());
        }
        Received::Empty
    }

    fn bad(&self, reason: String) -> Received {
        tracing::warn!(peer = %self.peer, "closing this shared-memory link only: {reason}");
        Received::Closed(reason)
    }

    fn try_send(&mut self, bytes: Vec<u8>) -> Result<(), Option<Vec<u8>>> {
        let piece = stream_record_bytes(&self.output).max(1);
        let mut sent = 0;
        let mut gone = false;
        while sent < bytes.len() {
            let end = (sent + piece).min(bytes.len());
            match self.output.try_push(&bytes[sent..end]) {
                Ok(PushOutcome::Pushed) => sent = end,
                Ok(PushOutcome::Full) => break,
                Err(_) => {
                    gone = true;
                    break;
                }
            }
        }
        if sent > 0 {
            self.peer_doorbell.ring();
        }
        if gone {
            return Err(None);
        }
        if sent == bytes.len() {
            return Ok(());
        }
        Err(Some(bytes[sent..].to_vec()))
    }

    fn close(&mut self) {
        self.input.close();
        self.output.close();
        self.peer_doorbell.ring();
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixStream;

    use flashpipe_cluster::wire::{self, Channel, Credit, Frame, Message, WireLimits};
    use flashpipe_cluster_host::shm_setup::LinkRings;
    use flashpipe_shm::{attach_received_ring, Doorbell, FrameRing, PushOutcome};

    use super::{Link, Received, RingLink};

    /// A ring link whose input the test fills through the peer's mapping, and the peer's
    /// doorbell as the test sees it.
    fn link_with_peer() -> (Link, FrameRing, FrameRing, Doorbell) {
        let input = FrameRing::create(4096).unwrap();
        let output = FrameRing::create(4096).unwrap();
        let peer_writes = attach_received_ring(
            input.as_fd().try_clone_to_owned().unwrap(),
            input.region_size_bytes(),
        )
        .unwrap();
        let peer_reads = attach_received_ring(
            output.as_fd().try_clone_to_owned().unwrap(),
            output.region_size_bytes(),
        )
        .unwrap();
        let peer_bell = Doorbell::create("link-test-bell").unwrap();
        let ours = Doorbell::attach(peer_bell.as_fd().try_clone_to_owned().unwrap()).unwrap();
        let (socket, _other) = UnixStream::pair().unwrap();
        let rings = LinkRings {
            input,
            output,
            peer_doorbell: ours,
        };
        let limits = WireLimits {
            max_page_bytes: 4096,
            max_spare_bytes: 64,
        };
        let link = RingLink::new(rings, socket, "the test".to_string(), limits);
        (
            Link::Ring(Box::new(link)),
            peer_writes,
            peer_reads,
            peer_bell,
        )
    }

    /// `count` Credit frames one after the other, as the stream bytes a peer pushes.
    fn credit_frames(count: usize) -> Vec<u8> {
        let frame = Frame {
            hops: 0,
            message: Message::Credit(Credit {
                channel: Channel::Request,
                count: 1,
            }),
        };
        let limits = WireLimits {
            max_page_bytes: 4096,
            max_spare_bytes: 64,
        };
        let one = wire::encode(&frame, limits).unwrap();
        one.repeat(count)
    }

    #[test]
    fn taking_from_a_crowded_input_rings_the_peer_and_an_uncrowded_one_does_not() {
        let (mut link, mut peer_writes, _peer_reads, peer_bell) = link_with_peer();
        let record = credit_frames(1000 / credit_frames(1).len());
        // three records of about a quarter of the ring: more than half of it is used
        for _ in 0..3 {
            assert_eq!(peer_writes.try_push(&record).unwrap(), PushOutcome::Pushed);
        }
        let before = peer_bell.rings_so_far();
        assert!(matches!(link.try_recv(), Received::Frame(_)));
        assert_eq!(
            peer_bell.rings_so_far().wrapping_sub(before),
            1,
            "the pop from a crowded ring rang the producer once"
        );
        while let Received::Frame(_) = link.try_recv() {}
        let drained = peer_bell.rings_so_far();
        assert_eq!(
            peer_writes.try_push(&credit_frames(1)).unwrap(),
            PushOutcome::Pushed
        );
        assert!(matches!(link.try_recv(), Received::Frame(_)));
        assert_eq!(
            peer_bell.rings_so_far(),
            drained,
            "room to spare rings nobody"
        );
    }

    #[test]
    fn a_full_output_has_room_again_once_the_peer_takes_from_it() {
        let (mut link, _peer_writes, mut peer_reads, _peer_bell) = link_with_peer();
        let frame = vec![0u8; 1016];
        let mut sent = 0;
        while link.try_send(frame.clone()).is_ok() {
            sent += 1;
        }
        assert!(sent >= 2 && !link.has_room(), "a full output is crowded");
        while peer_reads
            .pop(flashpipe_shm::RingWait::NoWait)
            .unwrap()
            .is_some()
        {}
        assert!(link.has_room(), "an emptied output has room");
    }
}
