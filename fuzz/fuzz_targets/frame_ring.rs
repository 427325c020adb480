//! Fuzzes the shared-memory FrameRing (#14; crates/flashpipe-device/src/shared_memory/ring.rs,
//! docs/serve.md) against a hostile peer in the same process: a producer and a consumer
//! handle on one ring, and a third read-write mapping of its page through which the input
//! scribbles on the header (head, tail, parked and closed words) and the data area between
//! pushes and pops. Every pop and push returns a record, nothing, or an error naming the
//! ring, never a panic or an access outside the mapping; a popped record is never longer
//! than the ring's largest record.
#![no_main]

use flashpipe_shm::ring::{attach_received_ring, RING_HEADER_BYTES};
use flashpipe_shm::{FrameRing, RingWait};
use flashpipe_shm::{MapAccess, SharedMapping};
use libfuzzer_sys::fuzz_target;

const CAPACITY_BYTES: usize = 4096;
/// Offsets of the header words a peer writes (docs of ring.rs): head, tail, parked, closed.
const HEADER_WORD_OFFSETS: [usize; 4] = [64, 128, 192, 256];

fuzz_target!(|input: &[u8]| {
    let mut producer = FrameRing::create(CAPACITY_BYTES).expect("a ring of 4 KiB");
    let consumer_fd = producer.as_fd().try_clone_to_owned().expect("dup");
    let mut consumer =
        attach_received_ring(consumer_fd, producer.region_size_bytes()).expect("attach");
    let hostile_fd = producer.as_fd().try_clone_to_owned().expect("dup");
    let mut hostile = SharedMapping::map(
        hostile_fd,
        producer.region_size_bytes(),
        MapAccess::ReadWrite,
    )
    .expect("map");
    let max_record_bytes = consumer.max_record_bytes();
    let mut reused_record = Vec::new();
    let mut operations = input;
    while let Some((&operation, rest)) = operations.split_first() {
        operations = rest;
        match operation % 5 {
            0 => {
                let length = take_u16(&mut operations) as usize % (max_record_bytes + 64);
                let record = vec![operation; length];
                let _ = producer.try_push(&record);
            }
            1 => {
                if let Ok(Some(record)) = consumer.pop(RingWait::NoWait) {
                    assert!(record.len() <= max_record_bytes);
                }
            }
            2 => {
                let word = HEADER_WORD_OFFSETS[operation as usize / 5 % 4];
                let value = take_u64(&mut operations);
                if let Ok(bytes) = hostile.bytes_mut(word, 8) {
                    bytes.copy_from_slice(&value.to_le_bytes());
                }
            }
            3 => {
                let offset = take_u16(&mut operations) as usize % CAPACITY_BYTES;
                let value = take_u64(&mut operations);
                if let Ok(bytes) = hostile.bytes_mut(RING_HEADER_BYTES + offset, 4) {
                    bytes.copy_from_slice(&value.to_le_bytes()[..4]);
                }
            }
            _ => {
                if let Ok(true) = consumer.pop_into(RingWait::NoWait, &mut reused_record) {
                    assert!(reused_record.len() <= max_record_bytes);
                }
            }
        }
    }
    let _ = (
        producer.counters(),
        consumer.counters(),
        consumer.is_closed(),
    );
});

fn take_u16(bytes: &mut &[u8]) -> u16 {
    let mut value = [0u8; 2];
    let count = bytes.len().min(2);
    value[..count].copy_from_slice(&bytes[..count]);
    *bytes = &bytes[count..];
    u16::from_le_bytes(value)
}

fn take_u64(bytes: &mut &[u8]) -> u64 {
    let mut value = [0u8; 8];
    let count = bytes.len().min(8);
    value[..count].copy_from_slice(&bytes[..count]);
    *bytes = &bytes[count..];
    u64::from_le_bytes(value)
}
