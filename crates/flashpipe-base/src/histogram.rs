//! The one latency histogram: bounded memory whatever the number of values recorded.
//!
//! A run in virtual time records few distinct latencies (a page read costs the same
//! nanoseconds each time it meets an idle die), so [`LatencyHistogram`] keeps every
//! distinct value exactly, with its count, while there are at most
//! [`EXACT_DISTINCT_VALUES_MAX`] of them: percentiles are then the nearest-rank values a
//! sorted list of every latency would give, digit for digit. Past that bound (a long open-loop
//! replay whose queueing makes every latency distinct) it spills into an HDR histogram
//! (the `hdrhistogram` crate, [`SIGNIFICANT_DIGITS`] significant digits: a value is
//! reported as its bucket's middle, within 0.05% of what was recorded), whose size grows with the logarithm of the
//! largest value, not with the count. Count, sum, smallest and largest stay exact in both
//! modes, so means and maxima never move.
//!
//! Why not `hdrhistogram` alone: its buckets would shift the documented virtual-time
//! percentiles (125.00 us read as 125.06 us) that the exact mode keeps.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

/// Distinct values kept exactly before the histogram spills into buckets.
pub const EXACT_DISTINCT_VALUES_MAX: usize = 65_536;
/// Significant decimal digits of a bucketed value (3: buckets 0.1% wide).
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// Latencies (any `u64` unit; nanoseconds by convention) in bounded memory.
#[derive(Debug, Clone, Default)]
pub struct LatencyHistogram {
    exact: BTreeMap<u64, u64>,
    spilled: Option<Histogram<u64>>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl PartialEq for LatencyHistogram {
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count
            && self.sum == other.sum
            && self.min == other.min
            && self.max == other.max
            && self.iter().eq(other.iter())
    }
}

fn new_buckets() -> Histogram<u64> {
    let mut buckets = Histogram::new(SIGNIFICANT_DIGITS)
        .expect("3 significant digits is within hdrhistogram's 0..=5");
    buckets.auto(true);
    buckets
}

impl LatencyHistogram {
    /// Records one value.
    pub fn record(&mut self, value: u64) {
        self.record_n(value, 1);
    }

    /// Records `count` equal values.
    pub fn record_n(&mut self, value: u64, count: u64) {
        if count == 0 {
            return;
        }
        self.min = if self.count == 0 {
            value
        } else {
            self.min.min(value)
        };
        self.max = self.max.max(value);
        self.count += count;
        self.sum += u128::from(value) * u128::from(count);
        match &mut self.spilled {
            Some(buckets) => buckets
                .record_n(value, count)
                .expect("an auto-resizing histogram takes any u64"),
            None => {
                *self.exact.entry(value).or_insert(0) += count;
                if self.exact.len() > EXACT_DISTINCT_VALUES_MAX {
                    self.spill();
                }
            }
        }
    }

    fn spill(&mut self) {
        let mut buckets = new_buckets();
        for (&value, &count) in &self.exact {
            buckets
                .record_n(value, count)
                .expect("an auto-resizing histogram takes any u64");
        }
        self.exact = BTreeMap::new();
        self.spilled = Some(buckets);
    }

    /// Adds every value of `other` (a spilled `other` adds its buckets' values; count,
    /// sum, smallest and largest stay exact).
    pub fn merge(&mut self, other: &LatencyHistogram) {
        if other.count == 0 {
            return;
        }
        let min = if self.count == 0 {
            other.min
        } else {
            self.min.min(other.min)
        };
        let (count, sum, max) = (
            self.count + other.count,
            self.sum + other.sum,
            self.max.max(other.max),
        );
        for (value, value_count) in other.iter() {
            self.record_n(value, value_count);
        }
        (self.count, self.sum, self.min, self.max) = (count, sum, min, max);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Sum of every value (exact).
    pub fn sum(&self) -> u128 {
        self.sum
    }

    /// Mean (exact sum over count); 0 when empty.
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// Smallest value (exact); 0 when empty.
    pub fn min(&self) -> u64 {
        self.min
    }

    /// Largest value (exact); 0 when empty.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Whether every value is still kept exactly.
    pub fn is_exact(&self) -> bool {
        self.spilled.is_none()
    }

    /// Distinct values (exact) or buckets in use (spilled): what the memory holds.
    pub fn entries(&self) -> usize {
        match &self.spilled {
            Some(buckets) => buckets.iter_recorded().count(),
            None => self.exact.len(),
        }
    }

    /// The nearest-rank percentile: the value at rank `ceil(count x fraction)` (at least 1)
    /// of the sorted values; exact while [`Self::is_exact`], else within 0.05% and never
    /// outside the smallest and largest values. 0 when empty.
    pub fn percentile(&self, fraction: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((self.count as f64 * fraction).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (value, count) in self.iter() {
            seen += count;
            if seen >= rank {
                return value.clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// `(value, count)` in ascending order: every distinct value (exact), or each bucket's
    /// middle value (spilled: within 0.05% of every value the bucket holds).
    pub fn iter(&self) -> Box<dyn Iterator<Item = (u64, u64)> + '_> {
        match &self.spilled {
            Some(buckets) => Box::new(buckets.iter_recorded().map(|bucket| {
                (
                    buckets.median_equivalent(bucket.value_iterated_to()),
                    bucket.count_at_value(),
                )
            })),
            None => Box::new(self.exact.iter().map(|(&value, &count)| (value, count))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank_exactly() {
        let mut histogram = LatencyHistogram::default();
        (1..=1000u64)
            .rev()
            .for_each(|value| histogram.record(value * 1000));
        assert!(histogram.is_exact());
        assert_eq!(histogram.count(), 1000);
        assert_eq!(histogram.percentile(0.5), 500_000);
        assert_eq!(histogram.percentile(0.99), 990_000);
        assert_eq!(histogram.percentile(0.999), 999_000);
        assert_eq!(histogram.max(), 1_000_000);
        assert_eq!(histogram.min(), 1000);
        assert_eq!(histogram.mean(), 500_500.0);
    }

    #[test]
    fn many_distinct_values_spill_into_bounded_buckets_within_a_thousandth() {
        let mut histogram = LatencyHistogram::default();
        let values: Vec<u64> = (0..1_000_000u64)
            .map(|index| 1_000_000 + index * 37)
            .collect();
        values
            .iter()
            .rev()
            .for_each(|&value| histogram.record(value));
        assert!(!histogram.is_exact());
        assert!(
            histogram.entries() < 10_000,
            "{} buckets",
            histogram.entries()
        );
        assert_eq!(histogram.count(), values.len() as u64);
        assert_eq!(histogram.min(), values[0]);
        assert_eq!(histogram.max(), *values.last().unwrap());
        let exact_sum: u128 = values.iter().map(|&value| u128::from(value)).sum();
        assert_eq!(histogram.sum(), exact_sum);
        for fraction in [0.001, 0.5, 0.99, 0.999, 1.0] {
            let rank = ((values.len() as f64 * fraction).ceil() as usize).clamp(1, values.len());
            let exact = values[rank - 1] as f64;
            let reported = histogram.percentile(fraction) as f64;
            assert!(
                (reported - exact).abs() <= exact / 1000.0,
                "p{fraction}: {reported} against {exact}"
            );
        }
    }

    #[test]
    fn merging_keeps_count_sum_and_extremes_exact() {
        let mut left = LatencyHistogram::default();
        let mut right = LatencyHistogram::default();
        (0..100_000u64).for_each(|value| left.record(value * 3 + 1));
        [7u64, 7, 9].iter().for_each(|&value| right.record(value));
        let mut merged = right.clone();
        merged.merge(&left);
        assert_eq!(merged.count(), left.count() + right.count());
        assert_eq!(merged.sum(), left.sum() + right.sum());
        assert_eq!(merged.min(), 1);
        assert_eq!(merged.max(), 99_999 * 3 + 1);
        let mut exact = LatencyHistogram::default();
        exact.merge(&right);
        assert_eq!(exact, right);
        assert_eq!(LatencyHistogram::default().percentile(0.5), 0);
    }
}
