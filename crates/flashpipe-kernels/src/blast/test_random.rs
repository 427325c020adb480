//! The seeded xorshift generator of the aligners' tests (the gapped programme against its old
//! form, the greedy aligner against the gapped programme).

/// A seeded xorshift generator.
pub struct Random(pub u64);

impl Random {
    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value below `bound`.
    pub fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }
}
