//! The shared-memory frame ring: records in order across wrap-around, full and closed
//! rings, hostile headers and indices refused, a producer and a consumer on two threads
//! (the producer waking the consumer only when it parked), and a round trip with a child
//! process (this test binary run again with [`CHILD_SOCKET_VARIABLE`] set) over two rings.

mod child;

use child::{fds_from_parent, start_child_side, ChildSide};

use flashpipe_base::SplitMix64;
use flashpipe_shm::ring::{attach_received_ring, RING_HEADER_BYTES};
use flashpipe_shm::{send_with_fds, MapAccess, SharedMapping};
use flashpipe_shm::{FrameRing, FrameRingError, PushOutcome, RingWait};

const CHILD_SOCKET_VARIABLE: &str = "FLASHPIPE_FRAME_RING_CHILD_SOCKET";
const CAPACITY_BYTES: usize = 4096;
const ROUND_TRIPS: usize = 2000;

fn second_handle(ring: &FrameRing) -> FrameRing {
    let fd = ring.as_fd().try_clone_to_owned().unwrap();
    attach_received_ring(fd, ring.region_size_bytes()).unwrap()
}

fn drawn_record(generator: &mut SplitMix64, max_length_bytes: usize) -> Vec<u8> {
    let length_bytes = (generator.next_u64() % (max_length_bytes as u64 + 1)) as usize;
    (0..length_bytes)
        .map(|_| generator.next_u64() as u8)
        .collect()
}

fn push_waiting(ring: &mut FrameRing, record: &[u8]) {
    while ring.try_push(record).unwrap() == PushOutcome::Full {
        std::thread::yield_now();
    }
}

#[test]
fn records_come_out_in_order_across_wrap_around() {
    let mut producer = FrameRing::create(CAPACITY_BYTES).unwrap();
    let mut consumer = second_handle(&producer);
    let mut generator = SplitMix64::new(7);
    for round in 0..500 {
        let record = drawn_record(&mut generator, 1000);
        assert_eq!(producer.try_push(&record).unwrap(), PushOutcome::Pushed);
        let popped = consumer.pop(RingWait::NoWait).unwrap();
        assert_eq!(popped.as_deref(), Some(record.as_slice()), "round {round}");
    }
    assert_eq!(consumer.pop(RingWait::NoWait).unwrap(), None);
}

#[test]
fn a_full_ring_refuses_without_writing_and_a_large_record_is_refused() {
    let mut producer = FrameRing::create(CAPACITY_BYTES).unwrap();
    let mut consumer = second_handle(&producer);
    let record = vec![9u8; 1000];
    for _ in 0..4 {
        assert_eq!(producer.try_push(&record).unwrap(), PushOutcome::Pushed);
    }
    assert_eq!(producer.try_push(&record).unwrap(), PushOutcome::Full);
    assert_eq!(producer.counters().pushes_full, 1);
    let too_large = vec![0u8; producer.max_record_bytes() + 1];
    assert!(matches!(
        producer.try_push(&too_large),
        Err(FrameRingError::RecordTooLarge { .. })
    ));
    let whole = vec![1u8; producer.max_record_bytes()];
    for _ in 0..4 {
        assert_eq!(
            consumer.pop(RingWait::NoWait).unwrap(),
            Some(record.clone())
        );
    }
    assert_eq!(producer.try_push(&whole).unwrap(), PushOutcome::Pushed);
    assert_eq!(consumer.pop(RingWait::NoWait).unwrap(), Some(whole));
}

#[test]
fn a_closed_ring_refuses_pushes_and_drains_then_ends() {
    let mut producer = FrameRing::create(CAPACITY_BYTES).unwrap();
    let mut consumer = second_handle(&producer);
    producer.try_push(b"last").unwrap();
    consumer.close();
    assert!(producer.is_closed());
    assert!(matches!(
        producer.try_push(b"more"),
        Err(FrameRingError::Closed { .. })
    ));
    assert_eq!(
        consumer.pop(RingWait::DEFAULT).unwrap().as_deref(),
        Some(&b"last"[..])
    );
    assert_eq!(consumer.pop(RingWait::DEFAULT).unwrap(), None);
}

#[test]
fn bad_capacities_and_foreign_regions_are_refused() {
    for capacity_bytes in [0, 1000, 2048, 3 * 4096, 1 << 31] {
        assert!(matches!(
            FrameRing::create(capacity_bytes),
            Err(FrameRingError::CapacityInvalid { .. })
        ));
    }
    let memory = flashpipe_shm::SharedMemory::create("not-a-ring", 2 * 4096).unwrap();
    let fd = memory.as_fd().try_clone_to_owned().unwrap();
    let error = attach_received_ring(fd, 2 * 4096).unwrap_err();
    assert!(matches!(error, FrameRingError::NotARing { .. }), "{error}");
    let ring = FrameRing::create(CAPACITY_BYTES).unwrap();
    let fd = ring.as_fd().try_clone_to_owned().unwrap();
    let read_only = SharedMapping::map(fd, ring.region_size_bytes(), MapAccess::ReadOnly).unwrap();
    assert!(matches!(
        FrameRing::attach(read_only),
        Err(FrameRingError::NotARing { .. })
    ));
}

#[test]
fn indices_and_lengths_a_peer_corrupted_are_refused() {
    let mut producer = FrameRing::create(CAPACITY_BYTES).unwrap();
    let mut consumer = second_handle(&producer);
    let fd = producer.as_fd().try_clone_to_owned().unwrap();
    let mut hostile =
        SharedMapping::map(fd, producer.region_size_bytes(), MapAccess::ReadWrite).unwrap();
    producer.try_push(b"abcd").unwrap();
    // The length prefix claims more than is pending.
    hostile
        .bytes_mut(RING_HEADER_BYTES, 4)
        .unwrap()
        .copy_from_slice(&4000u32.to_le_bytes());
    let error = consumer.pop(RingWait::NoWait).unwrap_err();
    assert!(matches!(error, FrameRingError::Corrupt { .. }), "{error}");
    // The head runs further ahead of the tail than the capacity.
    hostile
        .bytes_mut(64, 8)
        .unwrap()
        .copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(
        consumer.pop(RingWait::NoWait),
        Err(FrameRingError::Corrupt { .. })
    ));
    assert!(matches!(
        producer.try_push(b"x"),
        Err(FrameRingError::Corrupt { .. })
    ));
}

#[test]
fn a_producer_thread_wakes_a_consumer_thread_only_when_it_parked() {
    let seed = 14;
    let producer = FrameRing::create(CAPACITY_BYTES).unwrap();
    let mut consumer = second_handle(&producer);
    let producing = std::thread::spawn(move || {
        let mut producer = producer;
        let mut generator = SplitMix64::new(seed);
        for index in 0..ROUND_TRIPS {
            let record = drawn_record(&mut generator, 700);
            push_waiting(&mut producer, &record);
            if index % 100 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        producer.close();
        producer.counters()
    });
    let mut generator = SplitMix64::new(seed);
    let wait = RingWait::SpinThenPark {
        spin_us: 20,
        park_timeout_us: None,
    };
    for index in 0..ROUND_TRIPS {
        let expected = drawn_record(&mut generator, 700);
        let record = consumer.pop(wait).unwrap();
        assert_eq!(record, Some(expected), "record {index}, seed {seed}");
    }
    assert_eq!(consumer.pop(wait).unwrap(), None);
    let producer_counters = producing.join().unwrap();
    let consumer_counters = consumer.counters();
    assert_eq!(producer_counters.pushes, ROUND_TRIPS as u64);
    assert!(
        producer_counters.wakes_sent <= consumer_counters.parks,
        "{producer_counters:?} {consumer_counters:?}"
    );
}

#[test]
fn a_child_process_answers_over_two_rings() {
    let mut requests = FrameRing::create(CAPACITY_BYTES).unwrap();
    let mut replies = FrameRing::create(CAPACITY_BYTES).unwrap();
    let ChildSide {
        stream, mut child, ..
    } = start_child_side(CHILD_SOCKET_VARIABLE);
    send_with_fds(&stream, b"rings", &[requests.as_fd(), replies.as_fd()]).unwrap();
    let mut generator = SplitMix64::new(3);
    for index in 0..ROUND_TRIPS {
        let record = drawn_record(&mut generator, 200);
        push_waiting(&mut requests, &record);
        let reply = replies
            .pop(RingWait::DEFAULT)
            .unwrap()
            .expect("the child answers");
        let expected: Vec<u8> = record.iter().rev().copied().collect();
        assert_eq!(reply, expected, "round trip {index}");
    }
    requests.close();
    assert!(child.wait().unwrap().success(), "the child failed");
}

/// The child's side: reverses every request into a reply until the requests close.
#[test]
fn child_side() {
    let Some((_stream, [requests_fd, replies_fd])) = fds_from_parent(CHILD_SOCKET_VARIABLE) else {
        return;
    };
    let region_size_bytes = RING_HEADER_BYTES + CAPACITY_BYTES;
    let mut requests = attach_received_ring(requests_fd, region_size_bytes).unwrap();
    let mut replies = attach_received_ring(replies_fd, region_size_bytes).unwrap();
    while let Some(record) = requests.pop(RingWait::DEFAULT).unwrap() {
        let reply: Vec<u8> = record.iter().rev().copied().collect();
        push_waiting(&mut replies, &reply);
    }
}
