//! Fault plans: which faults strike which node at which step of a run, drawn from a seed.
//!
//! A step is the campaign's own unit of progress (an operation issued, an event run): the
//! plan only orders faults, so the same plan fits any driver. Faults come sorted by step,
//! ties in the order drawn.

use flashpipe_base::SplitMix64;

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The whole world crashes (power lost): what no flush covered may be lost, then the
    /// system restarts and recovers.
    Crash,
    /// One node restarts: its unflushed changes revert, its connections reset.
    RestartNode {
        /// The node.
        node: usize,
    },
    /// One node's live connection is partitioned (messages lost silently).
    Partition {
        /// The node.
        node: usize,
    },
    /// One node goes down for a number of steps, then comes back.
    Outage {
        /// The node.
        node: usize,
        /// How many steps it stays down.
        duration_steps: u64,
    },
    /// One device becomes slower by a factor for the rest of the run.
    SlowDevice {
        /// The node (or device).
        node: usize,
        /// How many times slower it gets.
        factor: u32,
    },
    /// One device starts failing a share of its transfers for a number of steps.
    FailingDevice {
        /// The node (or device).
        node: usize,
        /// Chance in parts per million that a transfer fails.
        failure_ppm: u32,
        /// How many steps it keeps failing.
        duration_steps: u64,
    },
}

/// A fault at a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// The step it strikes at.
    pub at_step: u64,
    /// What strikes.
    pub kind: FaultKind,
}

/// How many faults of each kind a plan draws, over how many steps and nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultPlanConfig {
    /// Faults strike at steps below this.
    pub horizon_steps: u64,
    /// Nodes a fault may name (at least one when any node fault is asked for).
    pub node_count: usize,
    /// Most whole-world crashes.
    pub crashes_max: u32,
    /// Most node restarts.
    pub node_restarts_max: u32,
    /// Most partitions.
    pub partitions_max: u32,
    /// Most outages.
    pub outages_max: u32,
    /// Most slowed devices.
    pub slow_devices_max: u32,
    /// Most failing spells.
    pub failing_devices_max: u32,
}

/// The faults of one run, sorted by step.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FaultPlan {
    faults: Vec<Fault>,
}

impl FaultPlan {
    /// Draws a plan: for each kind, a count up to its maximum, then a step and a node
    /// for each fault.
    ///
    /// # Panics
    /// When node faults are asked for over no node, or the horizon is zero.
    pub fn draw(config: &FaultPlanConfig, generator: &mut SplitMix64) -> FaultPlan {
        assert!(config.horizon_steps > 0, "a fault plan needs a horizon");
        let node_faults = config.node_restarts_max
            + config.partitions_max
            + config.outages_max
            + config.slow_devices_max
            + config.failing_devices_max;
        assert!(
            node_faults == 0 || config.node_count > 0,
            "node faults need a node"
        );
        let mut faults = Vec::new();
        let draw_count = |maximum: u32, generator: &mut SplitMix64| -> u32 {
            generator.below(u64::from(maximum) + 1) as u32
        };
        let kinds: [(u32, u8); 6] = [
            (config.crashes_max, 0),
            (config.node_restarts_max, 1),
            (config.partitions_max, 2),
            (config.outages_max, 3),
            (config.slow_devices_max, 4),
            (config.failing_devices_max, 5),
        ];
        for (maximum, code) in kinds {
            for _ in 0..draw_count(maximum, generator) {
                let at_step = generator.below(config.horizon_steps);
                let node = if config.node_count == 0 {
                    0
                } else {
                    generator.index_below(config.node_count)
                };
                let kind = match code {
                    0 => FaultKind::Crash,
                    1 => FaultKind::RestartNode { node },
                    2 => FaultKind::Partition { node },
                    3 => FaultKind::Outage {
                        node,
                        duration_steps: 1 + generator.below(config.horizon_steps / 8 + 1),
                    },
                    4 => FaultKind::SlowDevice {
                        node,
                        factor: 2 + generator.below(30) as u32,
                    },
                    _ => FaultKind::FailingDevice {
                        node,
                        failure_ppm: 1_000 + generator.below(200_000) as u32,
                        duration_steps: 1 + generator.below(config.horizon_steps / 8 + 1),
                    },
                };
                faults.push(Fault { at_step, kind });
            }
        }
        faults.sort_by_key(|fault| fault.at_step);
        FaultPlan { faults }
    }

    /// A plan from faults given by hand (sorted here).
    pub fn from_faults(mut faults: Vec<Fault>) -> FaultPlan {
        faults.sort_by_key(|fault| fault.at_step);
        FaultPlan { faults }
    }

    /// Every fault, by step.
    pub fn faults(&self) -> &[Fault] {
        &self.faults
    }

    /// The faults striking at `step`.
    pub fn at(&self, step: u64) -> impl Iterator<Item = &Fault> {
        let start = self.faults.partition_point(|fault| fault.at_step < step);
        self.faults[start..]
            .iter()
            .take_while(move |fault| fault.at_step == step)
    }

    /// How many faults of the plan are whole-world crashes.
    pub fn crash_count(&self) -> usize {
        self.faults
            .iter()
            .filter(|fault| fault.kind == FaultKind::Crash)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> FaultPlanConfig {
        FaultPlanConfig {
            horizon_steps: 1_000,
            node_count: 3,
            crashes_max: 2,
            node_restarts_max: 3,
            partitions_max: 3,
            outages_max: 2,
            slow_devices_max: 2,
            failing_devices_max: 2,
        }
    }

    #[test]
    fn a_plan_is_a_function_of_its_seed() {
        let first = FaultPlan::draw(&config(), &mut SplitMix64::new(11));
        let again = FaultPlan::draw(&config(), &mut SplitMix64::new(11));
        assert_eq!(first, again);
        let differs =
            (12..20).any(|seed| FaultPlan::draw(&config(), &mut SplitMix64::new(seed)) != first);
        assert!(differs);
    }

    #[test]
    fn faults_are_sorted_in_range_and_found_by_step() {
        for seed in 0..50 {
            let plan = FaultPlan::draw(&config(), &mut SplitMix64::new(seed));
            assert!(plan.crash_count() <= 2);
            let mut last_step = 0;
            for fault in plan.faults() {
                assert!(fault.at_step >= last_step && fault.at_step < 1_000);
                last_step = fault.at_step;
                assert!(plan.at(fault.at_step).any(|found| found == fault));
                match fault.kind {
                    FaultKind::Crash => {}
                    FaultKind::RestartNode { node }
                    | FaultKind::Partition { node }
                    | FaultKind::Outage { node, .. }
                    | FaultKind::SlowDevice { node, .. }
                    | FaultKind::FailingDevice { node, .. } => assert!(node < 3),
                }
            }
        }
    }

    #[test]
    fn a_plan_by_hand_is_sorted() {
        let plan = FaultPlan::from_faults(vec![
            Fault {
                at_step: 9,
                kind: FaultKind::Crash,
            },
            Fault {
                at_step: 2,
                kind: FaultKind::Partition { node: 1 },
            },
        ]);
        assert_eq!(plan.faults()[0].at_step, 2);
        assert_eq!(plan.at(9).count(), 1);
        assert_eq!(plan.at(5).count(), 0);
    }
}
