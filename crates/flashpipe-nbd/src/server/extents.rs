//! The allocation map of one export (`base:allocation`): which blocks hold data and
//! which are holes (never written, or trimmed), as a bounded set of data ranges.
//!
//! Invariants: ranges are disjoint, non-empty, not adjacent (neighbours merge), inside
//! the export, and there are at most `range_limit` of them. When a change would exceed
//! the limit, the map errs towards "data": a trim is not recorded (its range keeps
//! reporting data) and a write that would start a new range joins its nearer neighbour
//! (the gap between them reports data). Reporting data where there is a hole is always
//! correct by the specification ("the block is allocated or the server could not
//! otherwise determine its status"); the reverse never happens.

use std::collections::BTreeMap;
use std::ops::Bound;

/// The default bound on data ranges per export (each costs a B-tree entry, ~48 bytes).
pub const DEFAULT_EXTENT_RANGE_LIMIT: usize = 65_536;

/// One run of blocks with the same allocation status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocationRun {
    /// Blocks in the run.
    pub block_count: u64,
    /// True for a hole (never written or trimmed), false for data.
    pub is_hole: bool,
}

/// Data ranges of an export, in blocks.
#[derive(Debug, Clone)]
pub struct ExtentMap {
    /// start block -> end block (exclusive) of each data range.
    data_ranges: BTreeMap<u64, u64>,
    block_count: u64,
    range_limit: usize,
}

impl ExtentMap {
    /// A map of `block_count` blocks, all holes (a fresh RAM disk, a fresh flash device).
    pub fn all_holes(block_count: u64, range_limit: usize) -> ExtentMap {
        assert!(range_limit >= 1, "an extent map holds at least one range");
        ExtentMap {
            data_ranges: BTreeMap::new(),
            block_count,
            range_limit,
        }
    }

    /// A map of `block_count` blocks, all data (a device whose contents are unknown).
    pub fn all_data(block_count: u64, range_limit: usize) -> ExtentMap {
        let mut map = ExtentMap::all_holes(block_count, range_limit);
        if block_count > 0 {
            map.data_ranges.insert(0, block_count);
        }
        map
    }

    /// How many data ranges the map holds.
    pub fn range_count(&self) -> usize {
        self.data_ranges.len()
    }

    /// Records that blocks `start..end` hold data.
    pub fn mark_data(&mut self, start: u64, end: u64) {
        let end = end.min(self.block_count);
        if start >= end {
            return;
        }
        let (mut merged_start, mut merged_end) = (start, end);
        let overlapping = self.ranges_touching(start, end);
        for (range_start, range_end) in overlapping {
            self.data_ranges.remove(&range_start);
            merged_start = merged_start.min(range_start);
            merged_end = merged_end.max(range_end);
        }
        if self.data_ranges.len() >= self.range_limit {
            (merged_start, merged_end) = self.join_nearer_neighbour(merged_start, merged_end);
        }
        self.data_ranges.insert(merged_start, merged_end);
        self.check_bounds();
    }

    /// Records that blocks `start..end` are a hole (trimmed, or zeroed by a trim).
    pub fn mark_hole(&mut self, start: u64, end: u64) {
        let end = end.min(self.block_count);
        if start >= end {
            return;
        }
        let overlapping = self.ranges_overlapping(start, end);
        let pieces_left = overlapping
            .iter()
            .map(|&(range_start, range_end)| {
                u64::from(range_start < start) + u64::from(range_end > end)
            })
            .sum::<u64>() as usize;
        if self.data_ranges.len() - overlapping.len() + pieces_left > self.range_limit {
            return;
        }
        for (range_start, range_end) in overlapping {
            self.data_ranges.remove(&range_start);
            if range_start < start {
                self.data_ranges.insert(range_start, start);
            }
            if range_end > end {
                self.data_ranges.insert(end, range_end);
            }
        }
        self.check_bounds();
    }

    /// The runs covering blocks `start..end` (clipped to the export), in order, at most
    /// `run_limit` of them (the last may then end before `end`); consecutive runs differ.
    pub fn runs(&self, start: u64, end: u64, run_limit: usize) -> Vec<AllocationRun> {
        let end = end.min(self.block_count);
        let mut runs: Vec<AllocationRun> = Vec::new();
        let mut cursor = start;
        let push = |runs: &mut Vec<AllocationRun>, block_count: u64, is_hole: bool| match runs
            .last_mut()
        {
            Some(last) if last.is_hole == is_hole => last.block_count += block_count,
            _ => runs.push(AllocationRun {
                block_count,
                is_hole,
            }),
        };
        let first_key = self
            .data_ranges
            .range(..=start)
            .next_back()
            .map_or(start, |(&range_start, _)| range_start);
        for (&range_start, &range_end) in self.data_ranges.range(first_key..end) {
            if cursor >= end || runs.len() >= run_limit {
                break;
            }
            if range_end <= cursor {
                continue;
            }
            if range_start > cursor {
                push(&mut runs, range_start - cursor, true);
                cursor = range_start;
                if runs.len() >= run_limit {
                    break;
                }
            }
            let data_end = range_end.min(end);
            push(&mut runs, data_end - cursor, false);
            cursor = data_end;
        }
        if cursor < end && runs.len() < run_limit {
            push(&mut runs, end - cursor, true);
        }
        runs
    }

    /// Data ranges overlapping `start..end`.
    fn ranges_overlapping(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        self.ranges_near(start, end, false)
    }

    /// Data ranges overlapping or adjacent to `start..end` (they merge with it).
    fn ranges_touching(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        self.ranges_near(start, end, true)
    }

    /// Data ranges overlapping `start..end`, and with `adjacent` also those ending at
    /// `start` or starting at `end`.
    fn ranges_near(&self, start: u64, end: u64, adjacent: bool) -> Vec<(u64, u64)> {
        let first_key = self
            .data_ranges
            .range(..start)
            .next_back()
            .map_or(start, |(&range_start, _)| range_start);
        let last_key = if adjacent {
            Bound::Included(end)
        } else {
            Bound::Excluded(end)
        };
        self.data_ranges
            .range((Bound::Included(first_key), last_key))
            .filter(|(_, &range_end)| range_end > start || (adjacent && range_end == start))
            .map(|(&range_start, &range_end)| (range_start, range_end))
            .collect()
    }

    /// Widens `start..end` over the gap to its nearer neighbouring range, removing that
    /// neighbour, so inserting it keeps the count within the limit.
    fn join_nearer_neighbour(&mut self, start: u64, end: u64) -> (u64, u64) {
        let before = self
            .data_ranges
            .range(..start)
            .next_back()
            .map(|(&range_start, &range_end)| (range_start, range_end));
        let after = self
            .data_ranges
            .range(end..)
            .next()
            .map(|(&range_start, &range_end)| (range_start, range_end));
        let gap_before = before.map(|(_, range_end)| start - range_end);
        let gap_after = after.map(|(range_start, _)| range_start - end);
        match (before, after) {
            (Some((range_start, _)), _) if gap_after.is_none_or(|gap| gap_before <= Some(gap)) => {
                self.data_ranges.remove(&range_start);
                (range_start, end)
            }
            (_, Some((range_start, range_end))) => {
                self.data_ranges.remove(&range_start);
                (start, range_end)
            }
            _ => (start, end),
        }
    }

    fn check_bounds(&self) {
        assert!(
            self.data_ranges.len() <= self.range_limit,
            "extent map holds {} ranges, limit {}",
            self.data_ranges.len(),
            self.range_limit
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hole(block_count: u64) -> AllocationRun {
        AllocationRun {
            block_count,
            is_hole: true,
        }
    }

    fn data(block_count: u64) -> AllocationRun {
        AllocationRun {
            block_count,
            is_hole: false,
        }
    }

    #[test]
    fn writes_and_trims_show_as_runs() {
        let mut map = ExtentMap::all_holes(100, 16);
        assert_eq!(map.runs(0, 100, 10), vec![hole(100)]);
        map.mark_data(10, 20);
        map.mark_data(20, 30);
        assert_eq!(map.range_count(), 1);
        map.mark_hole(15, 18);
        assert_eq!(
            map.runs(0, 100, 10),
            vec![hole(10), data(5), hole(3), data(12), hole(70)]
        );
        assert_eq!(map.runs(12, 16, 10), vec![data(3), hole(1)]);
        assert_eq!(map.runs(0, 100, 2), vec![hole(10), data(5)]);
        let full = ExtentMap::all_data(8, 4);
        assert_eq!(full.runs(0, 8, 4), vec![data(8)]);
    }

    #[test]
    fn the_limit_errs_towards_data() {
        let mut map = ExtentMap::all_holes(100, 2);
        map.mark_data(0, 1);
        map.mark_data(10, 11);
        map.mark_data(50, 51);
        assert_eq!(map.range_count(), 2);
        let expected = vec![data(1), hole(9), data(41), hole(49)];
        assert_eq!(map.runs(0, 100, 10), expected);
        map.mark_hole(20, 21);
        assert_eq!(map.range_count(), 2);
        assert_eq!(map.runs(0, 100, 10), expected);
    }

    proptest! {
        /// Against a per-block model: a block the model says holds data is never reported
        /// as a hole, and below the limit the map is exact.
        #[test]
        fn never_reports_a_hole_over_data(
            operations in proptest::collection::vec((any::<bool>(), 0u64..64, 1u64..16), 0..80),
            range_limit in 1usize..12,
        ) {
            let mut map = ExtentMap::all_holes(64, range_limit);
            let mut exact = ExtentMap::all_holes(64, usize::MAX);
            let mut model = [false; 64];
            for (is_write, start, length) in operations {
                let end = (start + length).min(64);
                if is_write { map.mark_data(start, end); exact.mark_data(start, end); }
                else { map.mark_hole(start, end); exact.mark_hole(start, end); }
                for block in model.iter_mut().take(end as usize).skip(start as usize) {
                    *block = is_write;
                }
                prop_assert!(map.range_count() <= range_limit);
            }
            let mut block = 0u64;
            for run in map.runs(0, 64, usize::MAX) {
                for offset in 0..run.block_count {
                    prop_assert!(!(run.is_hole && model[(block + offset) as usize]));
                }
                block += run.block_count;
            }
            prop_assert_eq!(block, 64);
            let mut block = 0u64;
            for run in exact.runs(0, 64, usize::MAX) {
                for offset in 0..run.block_count {
                    prop_assert_eq!(run.is_hole, !model[(block + offset) as usize]);
                }
                block += run.block_count;
            }
        }
    }
}
