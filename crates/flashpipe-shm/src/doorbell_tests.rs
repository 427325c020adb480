//! The doorbell: an exhaustive model of its park protocol (no interleaving of a producer
//! and a consumer loses a wake, and the model does find the lost wake of a wrong order),
//! hostile regions refused, and a stress test of three producer threads (each with its
//! own mapping of the page and its own ring) waking one consumer that parks at once.

use std::collections::HashSet;
use std::sync::mpsc;
use std::time::Duration;

use flashpipe_base::wait::WaitPolicy;

use super::{Doorbell, DOORBELL_BYTES};
use crate::ring::attach_received_ring;
use crate::{FrameRing, PushOutcome, SharedMemory};

/// One step of the consumer's park, in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Step {
    /// `s = sequence`.
    LoadSequence,
    /// `sleeping = 1`.
    AnnounceSleep,
    /// Poll the input: a record ends the wait.
    Poll,
    /// `FUTEX_WAIT(sequence, s)`: returns at once when they differ, else blocks.
    FutexWait,
}

/// The shared words and both sides' program counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ModelState {
    head: u32,
    sequence: u32,
    sleeping: u32,
    seen: u32,
    /// Index into the consumer's steps; `steps.len()` is "after the futex call".
    consumer_step: usize,
    blocked: bool,
    got: bool,
    /// 0 publish, 1 bump, 2 look and wake, 3 done.
    producer_step: u8,
}

/// Explores every interleaving of one producer push and one consumer whose park runs
/// `steps`; returns the number of reachable states where the producer is done and the
/// consumer sleeps for ever (a lost wake).
fn lost_wakes(steps: &[Step]) -> usize {
    let start = ModelState {
        head: 0,
        sequence: 0,
        sleeping: 0,
        seen: 0,
        consumer_step: 0,
        blocked: false,
        got: false,
        producer_step: 0,
    };
    let mut seen_states = HashSet::new();
    let mut pending = vec![start];
    let mut lost = 0;
    while let Some(state) = pending.pop() {
        if !seen_states.insert(state) {
            continue;
        }
        if state.producer_step == 3 && state.blocked {
            lost += 1;
        }
        if state.producer_step < 3 {
            let mut next = state;
            match state.producer_step {
                0 => next.head = 1,
                1 => next.sequence += 1,
                _ => {
                    if state.sleeping == 1 && state.blocked {
                        next.blocked = false;
                        next.consumer_step = steps.len();
                    }
                }
            }
            next.producer_step += 1;
            pending.push(next);
        }
        if !state.got && !state.blocked {
            pending.push(consumer_step(state, steps));
        }
    }
    lost
}

fn consumer_step(state: ModelState, steps: &[Step]) -> ModelState {
    let mut next = state;
    if state.consumer_step == steps.len() {
        // After the futex call: `sleeping = 0`, one more poll, else park again.
        next.sleeping = 0;
        next.got = state.head == 1;
        next.consumer_step = 0;
        return next;
    }
    next.consumer_step += 1;
    match steps[state.consumer_step] {
        Step::LoadSequence => next.seen = state.sequence,
        Step::AnnounceSleep => next.sleeping = 1,
        Step::Poll => {
            if state.head == 1 {
                next.got = true;
                next.sleeping = 0;
            }
        }
        Step::FutexWait => next.blocked = state.sequence == state.seen,
    }
    next
}

#[test]
fn model_the_doorbell_park_loses_no_wake_in_any_interleaving() {
    let doorbell_order = [
        Step::LoadSequence,
        Step::AnnounceSleep,
        Step::Poll,
        Step::FutexWait,
    ];
    assert_eq!(lost_wakes(&doorbell_order), 0);
}

#[test]
fn model_finds_the_lost_wake_of_a_sequence_read_after_the_last_poll() {
    let wrong_order = [
        Step::Poll,
        Step::LoadSequence,
        Step::AnnounceSleep,
        Step::FutexWait,
    ];
    assert!(lost_wakes(&wrong_order) > 0);
}

#[test]
fn a_ring_with_nobody_parked_makes_no_system_call() {
    let mut doorbell = Doorbell::create("doorbell-test").unwrap();
    assert!(!doorbell.ring());
    assert_eq!(doorbell.counters().wakes, 0);
}

#[test]
fn a_region_smaller_than_a_doorbell_is_refused() {
    let small = SharedMemory::create("small", DOORBELL_BYTES / 2).unwrap();
    let fd = small.as_fd().try_clone_to_owned().unwrap();
    assert!(Doorbell::attach(fd).is_err());
}

#[test]
fn a_wait_that_times_out_with_nothing_returns_none() {
    let mut doorbell = Doorbell::create("doorbell-timeout").unwrap();
    let came: Option<()> = doorbell.wait(WaitPolicy::PARK, Some(2_000), || None);
    assert_eq!(came, None);
    assert!(doorbell.counters().parks >= 1);
}

const PRODUCERS: usize = 3;
const RECORDS_PER_PRODUCER: u64 = 20_000;
const RING_CAPACITY_BYTES: usize = 4096;

#[test]
fn stress_three_producers_wake_one_parking_consumer_without_a_lost_wake() {
    let mut consumer_doorbell = Doorbell::create("doorbell-stress").unwrap();
    let mut producer_rings = Vec::new();
    let mut consumer_rings = Vec::new();
    for _ in 0..PRODUCERS {
        let ring = FrameRing::create(RING_CAPACITY_BYTES).unwrap();
        let fd = ring.as_fd().try_clone_to_owned().unwrap();
        consumer_rings.push(attach_received_ring(fd, ring.region_size_bytes()).unwrap());
        producer_rings.push(ring);
    }
    let producers: Vec<_> = producer_rings
        .into_iter()
        .map(|mut ring| {
            let fd = consumer_doorbell.as_fd().try_clone_to_owned().unwrap();
            let mut doorbell = Doorbell::attach(fd).unwrap();
            std::thread::spawn(move || {
                for number in 0..RECORDS_PER_PRODUCER {
                    while ring.try_push(&number.to_le_bytes()).unwrap() == PushOutcome::Full {
                        std::thread::yield_now();
                    }
                    doorbell.ring();
                }
                ring.close();
                doorbell.ring();
                doorbell.counters().wakes
            })
        })
        .collect();
    let (done, finished) = mpsc::channel();
    let consumer = std::thread::spawn(move || {
        let mut next_numbers = [0u64; PRODUCERS];
        let mut record = Vec::new();
        loop {
            let all_closed = consumer_doorbell.wait(WaitPolicy::PARK, None, || {
                let mut progress = false;
                let mut closed = 0;
                for (index, ring) in consumer_rings.iter_mut().enumerate() {
                    // Closed before draining: every push came before the close.
                    let was_closed = ring.is_closed();
                    while ring.pop_into(crate::RingWait::NoWait, &mut record).unwrap() {
                        let number = u64::from_le_bytes(record.as_slice().try_into().unwrap());
                        assert_eq!(number, next_numbers[index], "records in order");
                        next_numbers[index] += 1;
                        progress = true;
                    }
                    closed += usize::from(was_closed);
                }
                (progress || closed == PRODUCERS).then_some(closed == PRODUCERS)
            });
            if all_closed == Some(true) {
                break;
            }
        }
        done.send((next_numbers, consumer_doorbell.counters()))
            .unwrap();
    });
    let (next_numbers, counters) = finished
        .recv_timeout(Duration::from_secs(120))
        .expect("the consumer finished within 120 s (a lost wake leaves it asleep)");
    consumer.join().unwrap();
    let wakes: u64 = producers.into_iter().map(|p| p.join().unwrap()).sum();
    assert_eq!(next_numbers, [RECORDS_PER_PRODUCER; PRODUCERS]);
    assert!(counters.parks > 0, "the consumer parked at least once");
    assert!(wakes > 0, "a producer woke the parked consumer");
}
