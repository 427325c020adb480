//! A tiny deterministic random generator (SplitMix64) for seeded simulation and tests.
//!
//! Written by hand because it is eight lines and every seeded component (the conformance
//! suite, simulated disks, fault injection) must produce the same sequence forever,
//! independent of any crate's version.

/// SplitMix64's increment, the golden ratio in 64 bits (2^64 / phi, odd). Also the one
/// multiplier for scattering a small index over a large range (a Fibonacci hash), where a
/// figure depends on that exact scatter.
pub const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// A tiny deterministic generator (SplitMix64), stable across versions.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        let mut value = self.state;
        value = (value ^ (value >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        value = (value ^ (value >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        value ^ (value >> 31)
    }

    /// A value in `0..bound` (bound > 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound
    }

    /// An index in `0..bound`, 0 when `bound` is 0 (picking from a slice that may be empty).
    pub fn index_below(&mut self, bound: usize) -> usize {
        (self.next_u64() % bound.max(1) as u64) as usize
    }

    /// The generator of case `case` in a run of cases seeded `first_seed`: each case
    /// replays alone from the pair.
    pub fn for_case(first_seed: u64, case: u64) -> SplitMix64 {
        SplitMix64::new(first_seed ^ case.wrapping_mul(0x2545_F491_4F6C_DD1D))
    }

    /// True with probability `probability` (0.0..=1.0).
    pub fn chance(&mut self, probability: f64) -> bool {
        let unit = (self.next_u64() >> 11) as f64 / ((1u64 << 53) as f64);
        probability > 0.0 && unit < probability
    }

    /// A value in `0..bound` (bound > 1) of a hot/cold draw: with probability `hot_share`
    /// one of the first `hot_fraction` of the values (at least one), otherwise one of the
    /// rest, each part uniformly.
    pub fn hot_cold_below(&mut self, bound: u64, hot_share: f64, hot_fraction: f64) -> u64 {
        let hot = ((bound as f64 * hot_fraction) as u64).max(1);
        if self.chance(hot_share) {
            self.below(hot)
        } else {
            hot + self.below(bound - hot)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SplitMix64;

    #[test]
    fn indices_stay_below_their_bound_and_an_empty_bound_gives_zero() {
        let mut generator = SplitMix64::new(7);
        for bound in [1usize, 2, 5, 1000] {
            for _ in 0..1000 {
                assert!(generator.index_below(bound) < bound);
            }
        }
        assert_eq!(generator.index_below(0), 0);
    }

    #[test]
    fn a_case_replays_alone_and_cases_differ() {
        let draw = |case| SplitMix64::for_case(42, case).next_u64();
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }
}
