//! `FrameRing::has_input`, the look a consumer of several rings takes before it parks on
//! one doorbell: false on an empty open ring, true with a record pending (seen through the
//! producer's own mapping), false again once it is popped, and true for good once either
//! side closes the ring.

use flashpipe_shm::{attach_received_ring, FrameRing, PushOutcome, RingWait};

#[test]
fn has_input_sees_a_pending_record_and_a_close() {
    let mut consumer = FrameRing::create(4096).unwrap();
    let fd = consumer.as_fd().try_clone_to_owned().unwrap();
    let mut producer = attach_received_ring(fd, consumer.region_size_bytes()).unwrap();
    assert!(!consumer.has_input());
    assert_eq!(producer.try_push(b"frame").unwrap(), PushOutcome::Pushed);
    assert!(consumer.has_input());
    assert_eq!(
        consumer.pop(RingWait::NoWait).unwrap().as_deref(),
        Some(&b"frame"[..])
    );
    assert!(!consumer.has_input());
    producer.close();
    assert!(consumer.has_input(), "a closed ring ends a wait");
    assert_eq!(consumer.pop(RingWait::NoWait).unwrap(), None);
}
