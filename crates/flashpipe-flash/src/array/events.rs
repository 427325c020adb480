//! The array's event queue: events packed into one `u128` each (time, then scheduling
//! order, then kind and slot) on a binary heap, and the loop that runs them in virtual
//! time. The packing keeps the hot loop free of allocation and virtual calls; the order
//! (time, then sequence) is the one every simulator of the project keeps, so runs are
//! bit-identical to the array's figures.

use super::*;

/// Bits of a packed event for its sequence number, its kind and its slot.
const EVENT_SEQUENCE_BITS: u32 = 36;
const EVENT_KIND_BITS: u32 = 3;
const EVENT_SLOT_BITS: u32 = 64 - EVENT_SEQUENCE_BITS - EVENT_KIND_BITS;

/// Packs an event into one integer ordered by time, then scheduling order (FIFO).
fn pack_event(at_ns: u64, sequence: u64, kind: EventKind, slot_index: u32) -> u128 {
    assert!(
        sequence < 1 << EVENT_SEQUENCE_BITS,
        "event sequence overflow"
    );
    assert!(
        u64::from(slot_index) < 1 << EVENT_SLOT_BITS,
        "too many requests in flight"
    );
    let low = sequence << (EVENT_KIND_BITS + EVENT_SLOT_BITS)
        | (kind as u64) << EVENT_SLOT_BITS
        | u64::from(slot_index);
    u128::from(at_ns) << 64 | u128::from(low)
}

fn unpack_event(packed: u128) -> (u64, EventKind, u32) {
    let low = packed as u64;
    let kind = match (low >> EVENT_SLOT_BITS) & ((1 << EVENT_KIND_BITS) - 1) {
        0 => EventKind::Arrive,
        1 => EventKind::BusDone,
        2 => EventKind::ArrayDone,
        3 => EventKind::DecodeDone,
        4 => EventKind::Complete,
        _ => EventKind::BusFree,
    };
    (
        (packed >> 64) as u64,
        kind,
        (low & ((1 << EVENT_SLOT_BITS) - 1)) as u32,
    )
}

/// What an event ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum EventKind {
    /// The slot reached its device.
    Arrive = 0,
    /// The slot's bus work ended on its channel.
    BusDone = 1,
    /// The slot's array operation ended on its die.
    ArrayDone = 2,
    /// The slot's read left the ECC decoder (the controller tag is released).
    DecodeDone = 3,
    /// The slot is acknowledged to its host.
    Complete = 4,
    /// The bus overhead after a transfer ended: the channel (in the slot field) is free.
    BusFree = 5,
}

impl FlashArray {
    #[inline]
    pub(super) fn schedule(&mut self, at_ns: u64, kind: EventKind, slot_index: u32) {
        assert!(
            at_ns >= self.now_ns(),
            "events are never scheduled in the past"
        );
        self.event_sequence += 1;
        self.events.push(Reverse(pack_event(
            at_ns,
            self.event_sequence,
            kind,
            slot_index,
        )));
    }

    /// Moves every ack ready now into `acks` without advancing time.
    pub fn poll_acks(&mut self, acks: &mut Vec<Ack>) -> usize {
        let now_ns = self.now_ns();
        self.run_events_until(now_ns);
        self.take_ready(acks)
    }

    /// Advances virtual time until at least one ack is ready; returns how many it moved,
    /// 0 only when nothing is in flight.
    pub fn wait_acks(&mut self, acks: &mut Vec<Ack>) -> usize {
        loop {
            let moved = self.poll_acks(acks);
            if moved > 0 {
                return moved;
            }
            let Some(next_ns) = self.next_event_ns() else {
                return 0;
            };
            self.clock.advance_to(next_ns);
        }
    }

    /// Advances virtual time to `instant_ns`, running every event up to it (acks that
    /// become ready wait for the next poll).
    pub fn run_until(&mut self, instant_ns: u64) {
        if instant_ns <= self.now_ns() {
            return;
        }
        while let Some(next_ns) = self.next_event_ns() {
            if next_ns > instant_ns {
                break;
            }
            self.clock.advance_to(next_ns);
            self.run_events_until(next_ns);
        }
        self.clock.advance_to(instant_ns);
    }

    /// The virtual time of the next pending event, if any.
    pub fn next_event_ns(&self) -> Option<u64> {
        self.events
            .peek()
            .map(|&Reverse(packed)| (packed >> 64) as u64)
    }

    /// Runs until every accepted request is acknowledged, collecting the acks.
    pub fn run_until_idle(&mut self, acks: &mut Vec<Ack>) {
        while self.total_in_flight() > 0 && self.wait_acks(acks) > 0 {}
    }

    #[inline]
    pub(super) fn take_ready(&mut self, acks: &mut Vec<Ack>) -> usize {
        let count = self.ready.len();
        if count > 0 {
            // Every operation acknowledged now is in the journal before its ack is seen.
            self.store.write_journal();
        }
        for ack in &self.ready {
            let host = &mut self.hosts[ack.host as usize];
            assert!(
                host.in_flight > 0,
                "an ack for a host with nothing in flight"
            );
            host.in_flight -= 1;
        }
        acks.append(&mut self.ready);
        count
    }

    #[inline]
    pub(super) fn run_events_until(&mut self, limit_ns: u64) {
        while let Some(&Reverse(packed)) = self.events.peek() {
            let (at_ns, kind, slot_index) = unpack_event(packed);
            if at_ns > limit_ns {
                break;
            }
            self.events.pop();
            match kind {
                EventKind::Arrive => self.arrive(slot_index),
                EventKind::BusDone => self.bus_done(slot_index),
                EventKind::ArrayDone => self.array_done(slot_index),
                EventKind::DecodeDone => self.decode_done(slot_index),
                EventKind::Complete => self.complete(slot_index),
                EventKind::BusFree => self.bus_free(slot_index),
            }
        }
    }
}

impl flashpipe_sim::Component for FlashArray {
    fn name(&self) -> &'static str {
        "flash array"
    }

    fn next_due_ns(&self) -> Option<u64> {
        self.next_event_ns()
    }

    /// Runs the events due by `now_ns` (moving the array's clock there first when it is
    /// not the world's); acks that become ready wait for the next poll.
    fn run_due(&mut self, now_ns: u64) {
        if now_ns > self.now_ns() {
            self.clock.advance_to(now_ns);
        }
        self.run_events_until(now_ns);
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;
    use crate::interface::FlashCommand;

    fn array() -> FlashArray {
        let mut config = FlashConfig::preset("rad").expect("the rad preset");
        config.geometry.channels = 2;
        config.geometry.ways = 2;
        config.geometry.blocks_per_plane = 8;
        config.geometry.pages_per_block = 8;
        config.reliability.factory_bad_block_fraction = 0.0;
        config.reliability.grown_bad_probability_at_rated = 0.0;
        let options = FlashOptions {
            seed: 5,
            host_queue_depth: 64,
            ..FlashOptions::default()
        };
        FlashArray::new(config, options).expect("an array")
    }

    fn submit_reads(array: &mut FlashArray) {
        for tag in 0..24u64 {
            let address = FlashAddress {
                device: 0,
                bus: (tag % 2) as u32,
                chip: (tag / 2 % 2) as u32,
                block: 1,
                page: 0,
            };
            array
                .submit(FlashRequest {
                    tag,
                    host: 0,
                    command: FlashCommand::ReadPage { address },
                })
                .expect("room for the read");
        }
    }

    fn instants(acks: &[Ack]) -> Vec<(u64, u64)> {
        acks.iter().map(|ack| (ack.tag, ack.completed_ns)).collect()
    }

    #[test]
    fn an_array_stepped_by_a_world_acks_at_the_instants_it_acks_alone() {
        let mut alone = array();
        submit_reads(&mut alone);
        let mut expected = Vec::new();
        alone.run_until_idle(&mut expected);

        let mut world = flashpipe_sim::World::new(1);
        let shared = Rc::new(RefCell::new(array()));
        let id = world.register(Box::new(Rc::clone(&shared)));
        assert_eq!(world.component_name(id), "flash array");
        submit_reads(&mut shared.borrow_mut());
        assert!(world.run_until_idle(1_000_000));
        let mut acks = Vec::new();
        shared.borrow_mut().poll_acks(&mut acks);
        assert_eq!(instants(&acks), instants(&expected));
        assert_eq!(world.now_ns(), shared.borrow().now_ns());
    }
}
