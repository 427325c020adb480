//! A consumer that takes from a crowded ring rings the producer's doorbell
//! (`FrameRing::is_crowded`, `RingReader::with_room_bell`): a producer parked while the ring
//! was full learns at once that there is room. A ring at most half full is not crowded,
//! and taking from it rings nobody.

use std::io::Read;

use flashpipe_shm::ring_stream::stream_record_bytes;
use flashpipe_shm::{attach_received_ring, Doorbell, FrameRing, PushOutcome, RingReader, RingWait};

/// A ring of 4096 data bytes, its producer's mapping, and a doorbell with a second handle.
fn ring_and_bell() -> (FrameRing, FrameRing, Doorbell, Doorbell) {
    let consumer = FrameRing::create(4096).unwrap();
    let fd = consumer.as_fd().try_clone_to_owned().unwrap();
    let producer = attach_received_ring(fd, consumer.region_size_bytes()).unwrap();
    let bell = Doorbell::create("room-bell-test").unwrap();
    let again = Doorbell::attach(bell.as_fd().try_clone_to_owned().unwrap()).unwrap();
    (consumer, producer, bell, again)
}

fn push_pieces(producer: &mut FrameRing, pieces: usize) {
    let piece = vec![7u8; stream_record_bytes(producer) - 8];
    for _ in 0..pieces {
        assert_eq!(producer.try_push(&piece).unwrap(), PushOutcome::Pushed);
    }
}

#[test]
fn taking_from_a_crowded_ring_rings_the_producers_bell() {
    let (consumer, mut producer, bell, again) = ring_and_bell();
    push_pieces(&mut producer, 3);
    assert!(
        consumer.is_crowded() && producer.is_crowded(),
        "three quarters used"
    );
    let before = bell.rings_so_far();
    let mut reader = RingReader::new(consumer, RingWait::NoWait, None).with_room_bell(again);
    let mut buffer = vec![0u8; stream_record_bytes(&producer)];
    let taken = reader.read(&mut buffer).unwrap();
    assert!(taken > 0);
    assert_eq!(
        bell.rings_so_far(),
        before.wrapping_add(1),
        "one ring for the pop"
    );
    assert!(!producer.is_crowded(), "half used is not crowded");
}

#[test]
fn taking_from_a_ring_with_room_rings_nobody() {
    let (consumer, mut producer, bell, again) = ring_and_bell();
    push_pieces(&mut producer, 1);
    assert!(!consumer.is_crowded());
    let before = bell.rings_so_far();
    let mut reader = RingReader::new(consumer, RingWait::NoWait, None).with_room_bell(again);
    let mut buffer = vec![0u8; 4096];
    assert!(reader.read(&mut buffer).unwrap() > 0);
    assert_eq!(bell.rings_so_far(), before);
}
