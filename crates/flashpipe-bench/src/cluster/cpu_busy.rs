//! How busy the machine's CPUs were while a part ran, from `/proc/stat`'s first line
//! (all CPUs together): the row's "CPU-bound" note is printed when they were nearly always
//! busy, not merely when there are fewer CPUs than processes (a row bound by its device
//! leaves CPUs idle and gets no note).

/// CPUs busier than this over a part make its rows "CPU-bound".
pub const CPU_BOUND_BUSY_FRACTION: f64 = 0.90;

/// One reading of the machine's CPU time counters (clock ticks since boot).
#[derive(Debug, Clone, Copy)]
pub struct CpuTimes {
    busy_ticks: u64,
    idle_ticks: u64,
}

impl CpuTimes {
    /// Reads `/proc/stat` now; `None` where it cannot be read or parsed.
    pub fn now() -> Option<CpuTimes> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        parse_cpu_line(text.lines().next()?)
    }

    /// The fraction of CPU time that was busy between `self` and `later` (0 to 1), or
    /// `None` when no time passed.
    pub fn busy_fraction_until(&self, later: &CpuTimes) -> Option<f64> {
        let busy = later.busy_ticks.saturating_sub(self.busy_ticks);
        let idle = later.idle_ticks.saturating_sub(self.idle_ticks);
        let total = busy + idle;
        (total > 0).then(|| busy as f64 / total as f64)
    }
}

/// Parses `cpu  user nice system idle iowait irq softirq steal ...`: idle and iowait are
/// idle, the rest busy (guest time is already inside user).
fn parse_cpu_line(line: &str) -> Option<CpuTimes> {
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let values: Vec<u64> = fields
        .take(8)
        .map(|field| field.parse().ok())
        .collect::<Option<_>>()?;
    if values.len() < 5 {
        return None;
    }
    let idle_ticks = values[3].checked_add(values[4])?;
    let total_ticks = values
        .iter()
        .try_fold(0u64, |total, &value| total.checked_add(value))?;
    let busy_ticks = total_ticks.checked_sub(idle_ticks)?;
    Some(CpuTimes {
        busy_ticks,
        idle_ticks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_fraction_counts_iowait_as_idle() {
        let before = parse_cpu_line("cpu  100 0 50 800 50 0 0 0 0 0").unwrap();
        let after = parse_cpu_line("cpu  190 0 50 805 55 0 0 0 0 0").unwrap();
        let busy = before.busy_fraction_until(&after).unwrap();
        assert!((busy - 0.9).abs() < 1e-9, "{busy}");
        assert_eq!(before.busy_fraction_until(&before), None);
    }

    #[test]
    fn hostile_lines_are_refused() {
        let overflowing = format!("cpu {} {} 1 1 1", u64::MAX, u64::MAX);
        for line in [
            "",
            "cpu0 1 2 3 4 5",
            "cpu 1 2 x 4 5",
            "cpu 1 2 3",
            "intr 5",
            &overflowing,
        ] {
            assert!(parse_cpu_line(line).is_none(), "{line:?}");
        }
    }
}
