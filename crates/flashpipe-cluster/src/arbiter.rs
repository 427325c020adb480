//! Arbiters: which input goes next when several wait.
//!
//! The paper's router has a rotating-priority (round-robin) arbiter on every datapath
//! (request, write data, read data, ack): [`RoundRobin`]. Beyond the paper, [`Weighted`]
//! is deficit round robin over inputs with weights and request costs ([`RequestCosts`]:
//! a 4 KiB write costs as much as 10 reads, as ReFlex weighs them), so a host sending
//! writes cannot take more than its share from hosts sending reads. With every weight and
//! cost 1 it is the paper's rotating priority.

use flashpipe_flash::CommandKind;

/// What a request costs an input's share, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestCosts {
    /// A page read.
    pub read: u32,
    /// A page write.
    pub write: u32,
    /// A block erase.
    pub erase: u32,
}

impl RequestCosts {
    /// ReFlex's weighing: a write costs 10 reads; an erase as much as a write.
    pub const REFLEX: RequestCosts = RequestCosts {
        read: 1,
        write: 10,
        erase: 10,
    };

    /// Every request costs the same (the paper's arbiters).
    pub const UNIT: RequestCosts = RequestCosts {
        read: 1,
        write: 1,
        erase: 1,
    };

    /// The cost of one request.
    pub fn of(&self, kind: CommandKind) -> u32 {
        match kind {
            CommandKind::Read => self.read,
            CommandKind::Write => self.write,
            CommandKind::Erase => self.erase,
        }
    }

    /// The most any request costs.
    pub fn max(&self) -> u32 {
        self.read.max(self.write).max(self.erase)
    }
}

/// Rotating priority: the input after the last one served has the highest priority.
#[derive(Debug, Clone)]
pub struct RoundRobin {
    inputs: usize,
    next: usize,
}

impl RoundRobin {
    /// An arbiter over `inputs` inputs (at least one).
    pub fn new(inputs: usize) -> RoundRobin {
        assert!(inputs > 0, "an arbiter needs an input");
        RoundRobin { inputs, next: 0 }
    }

    /// Inputs.
    pub fn inputs(&self) -> usize {
        self.inputs
    }

    /// Picks among the inputs whose `ready` is true; the winner gets the lowest priority next.
    pub fn pick(&mut self, ready: &[bool]) -> Option<usize> {
        assert_eq!(ready.len(), self.inputs, "one flag per input");
        let winner = (0..self.inputs)
            .map(|offset| (self.next + offset) % self.inputs)
            .find(|&input| ready[input])?;
        self.next = (winner + 1) % self.inputs;
        Some(winner)
    }
}

/// Deficit round robin: each input earns `weight x quantum` credit per turn and spends the
/// cost of what it sends; an idle input keeps no credit.
#[derive(Debug, Clone)]
pub struct Weighted {
    weights: Vec<u32>,
    deficits: Vec<u64>,
    /// Whether the current input has been given its quantum this turn.
    topped_up: bool,
    current: usize,
    quantum: u64,
}

impl Weighted {
    /// An arbiter over inputs with these weights (each at least 1); `max_cost` is the most
    /// one request may cost, which sets the quantum so a turn always serves something.
    pub fn new(weights: Vec<u32>, max_cost: u32) -> Weighted {
        assert!(!weights.is_empty(), "an arbiter needs an input");
        assert!(
            weights.iter().all(|&weight| weight > 0),
            "weights are at least 1"
        );
        assert!(max_cost > 0, "costs are at least 1");
        Weighted {
            deficits: vec![0; weights.len()],
            weights,
            topped_up: false,
            current: 0,
            quantum: u64::from(max_cost),
        }
    }

    /// Inputs.
    pub fn inputs(&self) -> usize {
        self.weights.len()
    }

    /// Picks among the inputs; `heads[i]` is the cost of input `i`'s next request, `None`
    /// if it has none. The winner is charged its cost.
    pub fn pick(&mut self, heads: &[Option<u32>]) -> Option<usize> {
        assert_eq!(heads.len(), self.inputs(), "one head per input");
        if heads.iter().all(Option::is_none) {
            return None;
        }
        // Each input reaches any cost within two of its turns (the quantum is the most a
        // request costs), so two rounds always find a winner.
        for _ in 0..=2 * self.inputs() {
            let input = self.current;
            match heads[input] {
                None => {
                    self.deficits[input] = 0;
                    self.end_turn();
                }
                Some(cost) => {
                    assert!(u64::from(cost) <= self.quantum, "cost over the maximum");
                    if !self.topped_up {
                        self.deficits[input] += u64::from(self.weights[input]) * self.quantum;
                        self.topped_up = true;
                    }
                    if self.deficits[input] >= u64::from(cost) {
                        self.deficits[input] -= u64::from(cost);
                        return Some(input);
                    }
                    self.end_turn();
                }
            }
        }
        unreachable!("deficit round robin serves a waiting input within two rounds")
    }

    fn end_turn(&mut self) {
        self.topped_up = false;
        self.current = (self.current + 1) % self.inputs();
    }
}

/// Jain's fairness index of shares: 1 when all are equal, 1/n when one takes everything.
pub fn jain_index(shares: &[f64]) -> f64 {
    let sum: f64 = shares.iter().sum();
    let squares: f64 = shares.iter().map(|share| share * share).sum();
    if squares == 0.0 {
        return 1.0;
    }
    sum * sum / (shares.len() as f64 * squares)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flashpipe_base::random::SplitMix64;

    #[test]
    fn round_robin_rotates_priority() {
        let mut arbiter = RoundRobin::new(3);
        let all = [true, true, true];
        let picks: Vec<_> = (0..6).map(|_| arbiter.pick(&all).unwrap()).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
        assert_eq!(arbiter.pick(&[false, false, true]), Some(2));
        assert_eq!(arbiter.pick(&[true, false, true]), Some(0));
        assert_eq!(arbiter.pick(&[false; 3]), None);
    }

    /// Serves `rounds` requests to always-backlogged inputs with these weights, each
    /// sending one kind; returns each input's cost served.
    fn serve(weights: &[u32], kinds: &[CommandKind], rounds: usize) -> Vec<f64> {
        let costs = RequestCosts::REFLEX;
        let mut arbiter = Weighted::new(weights.to_vec(), costs.max());
        let mut served = vec![0.0; kinds.len()];
        let heads: Vec<_> = kinds.iter().map(|&kind| Some(costs.of(kind))).collect();
        for _ in 0..rounds {
            let winner = arbiter.pick(&heads).unwrap();
            served[winner] += f64::from(costs.of(kinds[winner]));
        }
        served
    }

    #[test]
    fn equal_weights_share_equally() {
        let served = serve(&[1, 1], &[CommandKind::Read, CommandKind::Read], 100_000);
        assert!(jain_index(&served) >= 0.99, "{served:?}");
    }

    #[test]
    fn a_writer_cannot_exceed_its_share() {
        let kinds = [CommandKind::Write, CommandKind::Read, CommandKind::Read];
        let served = serve(&[1, 1, 1], &kinds, 300_000);
        let total: f64 = served.iter().sum();
        assert!(served[0] / total <= 1.0 / 3.0 + 0.01, "{served:?}");
        assert!(jain_index(&served) >= 0.99, "{served:?}");
    }

    #[test]
    fn weights_set_the_shares() {
        let served = serve(&[3, 1], &[CommandKind::Write, CommandKind::Read], 100_000);
        let share = served[0] / (served[0] + served[1]);
        assert!((share - 0.75).abs() < 0.01, "{served:?}");
    }

    #[test]
    fn random_backlogs_stay_fair_and_never_stall() {
        let costs = RequestCosts::REFLEX;
        let mut arbiter = Weighted::new(vec![1, 1], costs.max());
        let mut random = SplitMix64::new(25);
        let mut served = [0.0f64; 2];
        for _ in 0..200_000 {
            let heads = [
                Some(costs.of(if random.chance(0.5) {
                    CommandKind::Write
                } else {
                    CommandKind::Read
                })),
                Some(costs.of(CommandKind::Read)),
            ];
            let winner = arbiter.pick(&heads).unwrap();
            served[winner] += f64::from(heads[winner].unwrap());
        }
        assert!(jain_index(&served) >= 0.99, "{served:?}");
        let mut lone = Weighted::new(vec![1, 1, 1], costs.max());
        assert_eq!(lone.pick(&[None, None, Some(10)]), Some(2));
        assert_eq!(lone.pick(&[None, None, None]), None);
    }

    #[test]
    fn jain_index_bounds() {
        assert_eq!(jain_index(&[1.0, 1.0, 1.0]), 1.0);
        assert!((jain_index(&[1.0, 0.0]) - 0.5).abs() < 1e-12);
    }
}
