//! Completed bytes over time in fixed memory: [`FINE_INTERVALS`] intervals whose width
//! doubles (neighbours merged) whenever a completion falls past the last, then gathered
//! into [`THROUGHPUT_BUCKETS`] equal intervals over the run once its length is known. A
//! completion lands in the report's interval of its fine interval's start, so an
//! interval's bytes are exact to within one fine width (at most 1/32768 of the run, a
//! third of a percent of one of the report's intervals).

use super::THROUGHPUT_BUCKETS;

/// Fine intervals kept while the run goes on.
pub(super) const FINE_INTERVALS: usize = 1 << 16;
/// Width of a fine interval at the start of a run.
const FIRST_FINE_WIDTH_NS: u64 = 1024;

/// Bytes completed per fine interval since `start_ns`.
pub(super) struct ThroughputRecorder {
    start_ns: u64,
    width_ns: u64,
    bytes: Vec<u64>,
}

impl ThroughputRecorder {
    pub(super) fn new(start_ns: u64) -> ThroughputRecorder {
        ThroughputRecorder {
            start_ns,
            width_ns: FIRST_FINE_WIDTH_NS,
            bytes: vec![0; FINE_INTERVALS],
        }
    }

    /// Counts `bytes` completed at `at_ns` (not before the start).
    pub(super) fn record(&mut self, at_ns: u64, bytes: u64) {
        let offset_ns = at_ns - self.start_ns;
        while offset_ns / self.width_ns >= FINE_INTERVALS as u64 {
            self.widen();
        }
        self.bytes[(offset_ns / self.width_ns) as usize] += bytes;
    }

    fn widen(&mut self) {
        for index in 0..FINE_INTERVALS / 2 {
            self.bytes[index] = self.bytes[2 * index] + self.bytes[2 * index + 1];
        }
        self.bytes[FINE_INTERVALS / 2..].fill(0);
        self.width_ns *= 2;
    }

    /// The bytes of [`THROUGHPUT_BUCKETS`] equal intervals covering `elapsed_ns`, and
    /// their width.
    pub(super) fn intervals(&self, elapsed_ns: u64) -> (Vec<u64>, u64) {
        let interval_ns = elapsed_ns.div_ceil(THROUGHPUT_BUCKETS).max(1);
        let mut buckets = vec![0u64; THROUGHPUT_BUCKETS as usize];
        for (index, &bytes) in self.bytes.iter().enumerate() {
            let bucket = (index as u64 * self.width_ns / interval_ns).min(THROUGHPUT_BUCKETS - 1);
            buckets[bucket as usize] += bytes;
        }
        let total: u64 = self.bytes.iter().sum();
        assert_eq!(
            buckets.iter().sum::<u64>(),
            total,
            "gathering intervals keeps every byte"
        );
        (buckets, interval_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widening_keeps_every_byte_and_places_it_within_one_fine_width() {
        let mut recorder = ThroughputRecorder::new(1_000);
        let completions: Vec<(u64, u64)> = (0..100_000u64)
            .map(|index| (1_000 + index * 977, 4096))
            .collect();
        completions
            .iter()
            .for_each(|&(at_ns, bytes)| recorder.record(at_ns, bytes));
        let elapsed_ns = completions.last().unwrap().0 - 1_000;
        let (buckets, interval_ns) = recorder.intervals(elapsed_ns);
        assert_eq!(buckets.iter().sum::<u64>(), 100_000 * 4096);
        let mut exact = vec![0u64; THROUGHPUT_BUCKETS as usize];
        for &(at_ns, bytes) in &completions {
            exact[((at_ns - 1_000) / interval_ns).min(THROUGHPUT_BUCKETS - 1) as usize] += bytes;
        }
        let per_width = 4096 * (recorder.width_ns / 977 + 1);
        for (ours, exact) in buckets.iter().zip(&exact) {
            assert!(ours.abs_diff(*exact) <= per_width, "{ours} against {exact}");
        }
    }
}
