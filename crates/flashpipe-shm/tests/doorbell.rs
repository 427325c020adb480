//! The doorbell across two processes: a parent and a child (this test binary run again
//! with [`CHILD_SOCKET_VARIABLE`] set) play ping-pong, each parking at once on its own
//! doorbell (window 0, so nearly every wait parks and every reply is a cross-process
//! wake), the child answering alternately on two reply rings the parent polls together.
//! A lost wake would leave both asleep: the parent's side runs under a deadline that turns
//! it into a failure.

mod child;

use child::{fds_from_parent, start_child_side, ChildSide};
use std::sync::mpsc;
use std::time::Duration;

use flashpipe_base::wait::WaitPolicy;
use flashpipe_shm::ring::{attach_received_ring, RING_HEADER_BYTES};
use flashpipe_shm::{send_with_fds, Doorbell};
use flashpipe_shm::{FrameRing, PushOutcome, RingWait};

const CHILD_SOCKET_VARIABLE: &str = "FLASHPIPE_DOORBELL_CHILD_SOCKET";
const CAPACITY_BYTES: usize = 4096;
const ROUND_TRIPS: u64 = 5000;

fn push_waiting(ring: &mut FrameRing, record: &[u8]) {
    while ring.try_push(record).unwrap() == PushOutcome::Full {
        std::thread::yield_now();
    }
}

/// Pops one record from the first of `rings` that has one.
fn pop_any(rings: &mut [FrameRing], record: &mut Vec<u8>) -> Option<usize> {
    rings
        .iter_mut()
        .position(|ring| ring.pop_into(RingWait::NoWait, record).unwrap())
}

#[test]
fn two_processes_wake_each_other_through_doorbells_without_a_lost_wake() {
    let requests = FrameRing::create(CAPACITY_BYTES).unwrap();
    let replies_a = FrameRing::create(CAPACITY_BYTES).unwrap();
    let replies_b = FrameRing::create(CAPACITY_BYTES).unwrap();
    let parent_doorbell = Doorbell::create("parent-doorbell").unwrap();
    let child_doorbell = Doorbell::create("child-doorbell").unwrap();
    let ChildSide {
        stream, mut child, ..
    } = start_child_side(CHILD_SOCKET_VARIABLE);
    send_with_fds(
        &stream,
        b"rings",
        &[
            requests.as_fd(),
            replies_a.as_fd(),
            replies_b.as_fd(),
            parent_doorbell.as_fd(),
            child_doorbell.as_fd(),
        ],
    )
    .unwrap();
    let mut parent_doorbell = parent_doorbell;
    let mut child_doorbell = child_doorbell;
    let (done, finished) = mpsc::channel();
    let parent = std::thread::spawn(move || {
        let mut requests = requests;
        let mut replies = [replies_a, replies_b];
        let mut record = Vec::new();
        for number in 0..ROUND_TRIPS {
            push_waiting(&mut requests, &number.to_le_bytes());
            child_doorbell.ring();
            let ring = parent_doorbell
                .wait(WaitPolicy::PARK, None, || {
                    pop_any(&mut replies, &mut record)
                })
                .expect("a wait without a timeout ends with a record");
            assert_eq!(ring, (number % 2) as usize, "the reply came on its ring");
            let reply = u64::from_le_bytes(record.as_slice().try_into().unwrap());
            assert_eq!(reply, number + 1, "round trip {number}");
        }
        requests.close();
        child_doorbell.ring();
        done.send(parent_doorbell.counters()).unwrap();
    });
    let Ok(counters) = finished.recv_timeout(Duration::from_secs(120)) else {
        child.kill().unwrap();
        panic!("no ping-pong end within 120 s: a wake was lost");
    };
    parent.join().unwrap();
    assert!(child.wait().unwrap().success(), "the child failed");
    assert!(counters.parks > 0, "the parent parked");
}

/// The child's side: answers request `n` with `n + 1`, on reply ring `n % 2`, until the
/// requests close.
#[test]
fn child_side() {
    let Some((_stream, [requests_fd, reply_a_fd, reply_b_fd, parent_fd, child_fd])) =
        fds_from_parent(CHILD_SOCKET_VARIABLE)
    else {
        return;
    };
    let region_size_bytes = RING_HEADER_BYTES + CAPACITY_BYTES;
    let mut requests = attach_received_ring(requests_fd, region_size_bytes).unwrap();
    let mut replies = [
        attach_received_ring(reply_a_fd, region_size_bytes).unwrap(),
        attach_received_ring(reply_b_fd, region_size_bytes).unwrap(),
    ];
    let mut parent_doorbell = Doorbell::attach(parent_fd).unwrap();
    let mut child_doorbell = Doorbell::attach(child_fd).unwrap();
    let mut record = Vec::new();
    loop {
        let came = child_doorbell
            .wait(WaitPolicy::PARK, None, || {
                let closed = requests.is_closed();
                if requests.pop_into(RingWait::NoWait, &mut record).unwrap() {
                    return Some(true);
                }
                closed.then_some(false)
            })
            .expect("a wait without a timeout ends");
        if !came {
            return;
        }
        let number = u64::from_le_bytes(record.as_slice().try_into().unwrap());
        push_waiting(
            &mut replies[(number % 2) as usize],
            &(number + 1).to_le_bytes(),
        );
        parent_doorbell.ring();
    }
}
