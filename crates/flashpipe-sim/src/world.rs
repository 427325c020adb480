//! The world: one virtual clock, generator streams drawn from one seed, and the
//! components (disk sets, flash arrays, networks) that keep their own typed event queues
//! and register here.
//!
//! [`World::step`] runs the component whose next event is earliest, ties broken by
//! component id (registration order), and moves the clock to that event's time first. A
//! component runs its due events itself, with no virtual call per event, so a hot event
//! loop (the flash array's packed heap) keeps its speed.

use std::cell::RefCell;
use std::rc::Rc;

use flashpipe_base::{Clock, SplitMix64, VirtualClock};

/// Something with its own events that lives in a [`World`].
pub trait Component {
    /// The component's name, for reports.
    fn name(&self) -> &'static str;
    /// The time of its earliest pending event, or `None` when it has none.
    fn next_due_ns(&self) -> Option<u64>;
    /// Runs every event due at or before `now_ns` (the world's clock already shows it).
    fn run_due(&mut self, now_ns: u64);
}

/// A component shared with its driver (which submits to it between steps).
impl<C: Component> Component for Rc<RefCell<C>> {
    fn name(&self) -> &'static str {
        self.borrow().name()
    }

    fn next_due_ns(&self) -> Option<u64> {
        self.borrow().next_due_ns()
    }

    fn run_due(&mut self, now_ns: u64) {
        self.borrow_mut().run_due(now_ns);
    }
}

/// A component's place in its world (registration order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ComponentId(pub usize);

/// One simulated world.
pub struct World {
    seed: u64,
    clock: VirtualClock,
    streams: SplitMix64,
    components: Vec<Box<dyn Component>>,
    steps: u64,
}

impl std::fmt::Debug for World {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("World")
            .field("seed", &self.seed)
            .field("now_ns", &self.clock.now_ns())
            .field("components", &self.components.len())
            .field("steps", &self.steps)
            .finish()
    }
}

impl World {
    /// An empty world at virtual time zero whose every random choice derives from `seed`.
    pub fn new(seed: u64) -> World {
        World {
            seed,
            clock: VirtualClock::new(),
            streams: SplitMix64::new(seed),
            components: Vec::new(),
            steps: 0,
        }
    }

    /// The seed the world was made with.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The world's clock; components built on a clone share it.
    pub fn clock(&self) -> &VirtualClock {
        &self.clock
    }

    /// The current virtual time.
    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// A fresh generator stream for a component, the next one drawn from the world seed:
    /// streams depend only on the seed and the order they are asked for.
    pub fn stream(&mut self) -> SplitMix64 {
        SplitMix64::new(self.streams.next_u64())
    }

    /// The next seed drawn from the world seed (for a component that seeds itself).
    pub fn draw_seed(&mut self) -> u64 {
        self.streams.next_u64()
    }

    /// Adds a component; it runs from the next step on.
    pub fn register(&mut self, component: Box<dyn Component>) -> ComponentId {
        self.components.push(component);
        ComponentId(self.components.len() - 1)
    }

    /// Registered components.
    pub fn component_count(&self) -> usize {
        self.components.len()
    }

    /// A component's name.
    ///
    /// # Panics
    /// When `id` is not of this world.
    pub fn component_name(&self, id: ComponentId) -> &'static str {
        self.components[id.0].name()
    }

    /// Steps run so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The earliest due time over every component, with the component.
    pub fn next_due(&self) -> Option<(u64, ComponentId)> {
        self.components
            .iter()
            .enumerate()
            .filter_map(|(index, component)| {
                component
                    .next_due_ns()
                    .map(|due_ns| (due_ns, ComponentId(index)))
            })
            .min()
    }

    /// Runs the component with the earliest event (moving the clock to it, never back);
    /// false when no component has an event.
    pub fn step(&mut self) -> bool {
        let Some((due_ns, id)) = self.next_due() else {
            return false;
        };
        if due_ns > self.clock.now_ns() {
            self.clock.advance_to(due_ns);
        }
        let now_ns = self.clock.now_ns();
        self.components[id.0].run_due(now_ns);
        self.steps += 1;
        true
    }

    /// Steps while the earliest event is due at or before `instant_ns`, then moves the
    /// clock to `instant_ns`.
    pub fn run_until(&mut self, instant_ns: u64) {
        while self
            .next_due()
            .is_some_and(|(due_ns, _)| due_ns <= instant_ns)
        {
            self.step();
        }
        if instant_ns > self.clock.now_ns() {
            self.clock.advance_to(instant_ns);
        }
    }

    /// Steps until no component has an event, or `step_limit` steps ran; returns whether
    /// the world went idle.
    pub fn run_until_idle(&mut self, step_limit: u64) -> bool {
        for _ in 0..step_limit {
            if !self.step() {
                return true;
            }
        }
        self.next_due().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::Timeline;

    /// What the tickers ran: (time, component name, value).
    type Journal = Rc<RefCell<Vec<(u64, String, u32)>>>;

    /// A component that logs its events into a shared journal.
    struct Ticker {
        name: &'static str,
        timeline: Timeline<u32>,
        journal: Journal,
    }

    impl Component for Ticker {
        fn name(&self) -> &'static str {
            self.name
        }

        fn next_due_ns(&self) -> Option<u64> {
            self.timeline.next_due_ns()
        }

        fn run_due(&mut self, now_ns: u64) {
            while let Some((_, value)) = self.timeline.pop_due() {
                self.journal
                    .borrow_mut()
                    .push((now_ns, self.name.to_string(), value));
            }
        }
    }

    fn ticker(
        world: &World,
        name: &'static str,
        events: &[(u64, u32)],
        journal: &Journal,
    ) -> Box<Ticker> {
        let mut timeline = Timeline::with_clock(world.clock().clone());
        for &(at_ns, value) in events {
            timeline.schedule(at_ns, value);
        }
        Box::new(Ticker {
            name,
            timeline,
            journal: Rc::clone(journal),
        })
    }

    #[test]
    fn the_earliest_component_runs_first_and_ties_go_to_the_first_registered() {
        let journal: Journal = Rc::new(RefCell::new(Vec::new()));
        let mut world = World::new(7);
        let disks = ticker(&world, "disks", &[(10, 1), (30, 2)], &journal);
        let network = ticker(&world, "network", &[(10, 3), (20, 4)], &journal);
        let disks_id = world.register(disks);
        world.register(network);
        assert_eq!(world.component_name(disks_id), "disks");
        assert!(world.run_until_idle(100));
        let names: Vec<_> = journal
            .borrow()
            .iter()
            .map(|(at_ns, name, value)| (*at_ns, name.clone(), *value))
            .collect();
        assert_eq!(
            names,
            [
                (10, "disks".to_string(), 1),
                (10, "network".to_string(), 3),
                (20, "network".to_string(), 4),
                (30, "disks".to_string(), 2),
            ]
        );
        assert_eq!(world.now_ns(), 30);
        assert_eq!(world.steps(), 4);
    }

    #[test]
    fn run_until_stops_before_later_events_and_moves_the_clock() {
        let journal: Journal = Rc::new(RefCell::new(Vec::new()));
        let mut world = World::new(1);
        let component = ticker(&world, "one", &[(5, 1), (50, 2)], &journal);
        world.register(component);
        world.run_until(20);
        assert_eq!(journal.borrow().len(), 1);
        assert_eq!(world.now_ns(), 20);
        assert_eq!(world.next_due().map(|(due_ns, _)| due_ns), Some(50));
    }

    #[test]
    fn streams_depend_on_the_seed_and_the_order_alone() {
        let mut first = World::new(42);
        let mut second = World::new(42);
        let mut other = World::new(43);
        let a: Vec<u64> = (0..3).map(|_| first.stream().next_u64()).collect();
        let b: Vec<u64> = (0..3).map(|_| second.stream().next_u64()).collect();
        let c: Vec<u64> = (0..3).map(|_| other.stream().next_u64()).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a[0], a[1]);
    }

    #[test]
    fn a_shared_component_stays_in_its_drivers_hands() {
        let journal: Journal = Rc::new(RefCell::new(Vec::new()));
        let mut world = World::new(2);
        let shared = Rc::new(RefCell::new(*ticker(&world, "shared", &[(7, 1)], &journal)));
        world.register(Box::new(Rc::clone(&shared)));
        world.run_until_idle(10);
        shared.borrow_mut().timeline.schedule(9, 2);
        assert!(world.run_until_idle(10));
        assert_eq!(journal.borrow().len(), 2);
        assert_eq!(world.now_ns(), 9);
    }
}
