//! The event queue: events ordered by virtual time, ties broken by the order they were
//! scheduled in (a sequence number), so two runs of one seed pop events in one order.

use std::collections::BTreeMap;

use flashpipe_base::{Clock, VirtualClock};

/// Events keyed by (time in nanoseconds, sequence number).
#[derive(Debug, Clone)]
pub struct EventQueue<E> {
    events: BTreeMap<(u64, u64), E>,
    next_sequence: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue::new()
    }
}

impl<E> EventQueue<E> {
    /// An empty queue whose first event gets sequence number 0.
    pub fn new() -> EventQueue<E> {
        EventQueue {
            events: BTreeMap::new(),
            next_sequence: 0,
        }
    }

    /// Schedules `event` at `at_ns`; returns its sequence number. Events at one instant
    /// pop in the order they were scheduled.
    pub fn schedule(&mut self, at_ns: u64, event: E) -> u64 {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        let previous = self.events.insert((at_ns, sequence), event);
        assert!(previous.is_none(), "sequence numbers are unique");
        sequence
    }

    /// The sequence number the next scheduled event will get.
    pub fn next_sequence(&self) -> u64 {
        self.next_sequence
    }

    /// The time of the earliest event.
    pub fn next_due_ns(&self) -> Option<u64> {
        self.events.first_key_value().map(|(&(at_ns, _), _)| at_ns)
    }

    /// Removes and returns the earliest event with its time.
    pub fn pop_first(&mut self) -> Option<(u64, E)> {
        self.events
            .pop_first()
            .map(|((at_ns, _), event)| (at_ns, event))
    }

    /// Removes and returns the earliest event if it is due at or before `now_ns`.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<(u64, E)> {
        if self.next_due_ns()? > now_ns {
            return None;
        }
        self.pop_first()
    }

    /// Drops every pending event (sequence numbers keep counting).
    pub fn clear(&mut self) {
        self.events.clear();
    }

    /// Pending events.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

/// An event queue with the virtual clock it moves: popping an event moves the clock to
/// its time. Clones of [`Timeline::clock`] see every move.
#[derive(Debug, Clone)]
pub struct Timeline<E> {
    clock: VirtualClock,
    queue: EventQueue<E>,
}

impl<E> Default for Timeline<E> {
    fn default() -> Self {
        Timeline::new()
    }
}

impl<E> Timeline<E> {
    /// An empty timeline at virtual time zero, with a clock of its own.
    pub fn new() -> Timeline<E> {
        Timeline::with_clock(VirtualClock::new())
    }

    /// An empty timeline on a shared clock (a world's), which it moves forward only.
    pub fn with_clock(clock: VirtualClock) -> Timeline<E> {
        Timeline {
            clock,
            queue: EventQueue::new(),
        }
    }

    /// The clock this timeline moves.
    pub fn clock(&self) -> &VirtualClock {
        &self.clock
    }

    /// The current virtual time.
    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// Schedules `event` at `at_ns` (an instant in the past runs at the next pop, without
    /// moving the clock back); returns its sequence number.
    pub fn schedule(&mut self, at_ns: u64, event: E) -> u64 {
        self.queue.schedule(at_ns, event)
    }

    /// Schedules `event` `delay_ns` from now.
    pub fn schedule_after(&mut self, delay_ns: u64, event: E) -> u64 {
        let at_ns = self.now_ns().saturating_add(delay_ns);
        self.queue.schedule(at_ns, event)
    }

    /// The sequence number the next scheduled event will get.
    pub fn next_sequence(&self) -> u64 {
        self.queue.next_sequence()
    }

    /// The time of the earliest event.
    pub fn next_due_ns(&self) -> Option<u64> {
        self.queue.next_due_ns()
    }

    /// Pops the earliest event and moves the clock to its time (never back).
    pub fn pop_next(&mut self) -> Option<(u64, E)> {
        let (at_ns, event) = self.queue.pop_first()?;
        if at_ns > self.clock.now_ns() {
            self.clock.advance_to(at_ns);
        }
        Some((at_ns, event))
    }

    /// Pops the earliest event if it is due by the current time (the clock stays).
    pub fn pop_due(&mut self) -> Option<(u64, E)> {
        let now_ns = self.clock.now_ns();
        self.queue.pop_due(now_ns)
    }

    /// Drops every pending event.
    pub fn clear(&mut self) {
        self.queue.clear();
    }

    /// Pending events.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_pop_by_time_then_by_scheduling_order() {
        let mut queue = EventQueue::new();
        queue.schedule(30, "late");
        queue.schedule(10, "first at 10");
        queue.schedule(10, "second at 10");
        queue.schedule(20, "middle");
        let order: Vec<_> = std::iter::from_fn(|| queue.pop_first()).collect();
        assert_eq!(
            order,
            [
                (10, "first at 10"),
                (10, "second at 10"),
                (20, "middle"),
                (30, "late")
            ]
        );
        assert!(queue.is_empty());
    }

    #[test]
    fn pop_due_leaves_future_events() {
        let mut queue = EventQueue::new();
        queue.schedule(5, 'a');
        queue.schedule(15, 'b');
        assert_eq!(queue.pop_due(10), Some((5, 'a')));
        assert_eq!(queue.pop_due(10), None);
        assert_eq!(queue.next_due_ns(), Some(15));
        assert_eq!(queue.len(), 1);
    }

    #[test]
    fn sequence_numbers_keep_counting_after_a_clear() {
        let mut queue = EventQueue::new();
        assert_eq!(queue.schedule(1, ()), 0);
        assert_eq!(queue.next_sequence(), 1);
        queue.clear();
        assert_eq!(queue.schedule(1, ()), 1);
    }

    #[test]
    fn a_timeline_moves_its_shared_clock_forward_only() {
        let clock = VirtualClock::new();
        let mut timeline = Timeline::with_clock(clock.clone());
        timeline.schedule(100, 'x');
        timeline.schedule_after(40, 'y');
        assert_eq!(timeline.pop_due(), None);
        assert_eq!(timeline.pop_next(), Some((40, 'y')));
        assert_eq!(clock.now_ns(), 40);
        clock.advance_to(200);
        assert_eq!(timeline.pop_due(), Some((100, 'x')));
        timeline.schedule(150, 'z');
        assert_eq!(timeline.pop_next(), Some((150, 'z')));
        assert_eq!(
            clock.now_ns(),
            200,
            "an overdue event never moves time back"
        );
    }
}
