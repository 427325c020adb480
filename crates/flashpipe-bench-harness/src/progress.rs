//! A phase spinner on standard error for the experiments that run longer than about a
//! second (`bench`, `ftl`, `sim`, `fsck` of large stores).
//!
//! The spinner names the phase being measured ("measuring sequential read", "replaying
//! trace"). It draws only when standard error is a terminal (indicatif's standard-error
//! target hides itself otherwise), so pipes, files and tests that capture standard error
//! see nothing of it, and it is cleared when the work ends, also on an early return or an
//! error (on drop). Results still go to standard output only, untouched.
//!
//! The spinner running is also known process-wide, so code deep in an experiment names
//! its phase with [`set_phase`] and prints a line on standard error with [`note`]
//! (which lifts the spinner off its line while printing) without a handle passed down.

use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often the spinner redraws itself while a phase runs.
const SPINNER_TICK_INTERVAL_MS: u64 = 120;

/// The spinner running now, if any, with the phase it names: [`set_phase`],
/// [`set_count`] and [`note`] reach it.
static CURRENT_SPINNER: Mutex<Option<RunningSpinner>> = Mutex::new(None);

/// The running spinner and its phase (kept so that a count can follow it).
#[derive(Debug, Clone)]
struct RunningSpinner {
    bar: ProgressBar,
    phase: String,
}

/// Runs `action` on the running spinner, if any (a poisoned lock only means a panic
/// elsewhere; the spinner inside is still usable).
fn with_current_spinner(action: impl FnOnce(&mut RunningSpinner)) {
    let mut current = CURRENT_SPINNER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(spinner) = current.as_mut() {
        action(spinner);
    }
}

fn replace_current_spinner(spinner: Option<RunningSpinner>) {
    *CURRENT_SPINNER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = spinner;
}

/// Names the phase now running on the spinner running, if any.
pub fn set_phase(phase: impl Into<String>) {
    let phase = phase.into();
    with_current_spinner(|spinner| {
        spinner.bar.set_message(phase.clone());
        spinner.phase = phase;
    });
}

/// Shows `done` of `total` items after the phase the running spinner names, if any:
/// "write amplification: over-provisioning 7%: 12,000 of 100,000 page writes". The next
/// phase named drops the count.
pub fn set_count(done: u64, total: u64, unit: &str) {
    with_current_spinner(|spinner| {
        spinner
            .bar
            .set_message(counted_message(&spinner.phase, done, total, unit));
    });
}

/// Prints `line` on standard error, lifting the spinner running (if any) off its line
/// while doing so; the text is exactly what `eprintln!` would print.
pub fn note(line: &str) {
    with_spinner_lifted(|| eprintln!("{line}"));
}

/// Prints `line` on standard output, lifting the spinner running (if any) off its line
/// while doing so; the text is exactly what `println!` would print.
pub fn output_line(line: &str) {
    with_spinner_lifted(|| println!("{line}"));
}

/// Runs `print` with the running spinner (if any) lifted off its line.
fn with_spinner_lifted(print: impl FnOnce()) {
    let bar = CURRENT_SPINNER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .as_ref()
        .map(|spinner| spinner.bar.clone());
    match bar {
        Some(bar) => bar.suspend(print),
        None => print(),
    }
}

fn counted_message(phase: &str, done: u64, total: u64, unit: &str) -> String {
    format!(
        "{phase}: {} of {} {unit}",
        thousands(done),
        thousands(total)
    )
}

/// A spinner with a message naming the current phase; cleared when finished or dropped.
/// One runs at a time: starting one replaces the process-wide running spinner.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// Starts a spinner on standard error showing `phase` (hidden when standard error is
    /// not a terminal; a message longer than the terminal's width is cut, not wrapped).
    pub fn spinner(phase: impl Into<String>) -> Self {
        let phase = phase.into();
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template("{spinner} {elapsed:>4} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        bar.set_style(style);
        bar.set_message(phase.clone());
        bar.enable_steady_tick(Duration::from_millis(SPINNER_TICK_INTERVAL_MS));
        replace_current_spinner(Some(RunningSpinner {
            bar: bar.clone(),
            phase,
        }));
        Self { bar }
    }

    /// Names the phase now running.
    pub fn set_message(&self, phase: impl Into<String>) {
        set_phase(phase);
    }

    /// Names the phase now running with `done` of `total` items after it, e.g.
    /// "replaying trace: 12,000 of 100,000 requests".
    pub fn set_counted_message(&self, phase: &str, done: u64, total: u64, unit: &str) {
        set_phase(phase);
        set_count(done, total, unit);
    }

    /// Ends the spinner and clears its line.
    pub fn finish(self) {
        drop(self);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
        replace_current_spinner(None);
    }
}

/// `value` with commas between groups of three digits: 12345 -> "12,345".
pub fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    grouped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits_by_three() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(100_000), "100,000");
        assert_eq!(thousands(12_345_678), "12,345,678");
    }

    #[test]
    fn a_count_follows_its_phase_with_grouped_digits() {
        assert_eq!(
            counted_message("replaying trace", 12_000, 100_000, "requests"),
            "replaying trace: 12,000 of 100,000 requests"
        );
    }

    #[test]
    fn a_spinner_names_its_phase_and_finishes_without_a_terminal() {
        let progress = Progress::spinner("measuring");
        assert_eq!(progress.bar.message(), "measuring");
        progress.set_message("measuring again");
        progress.set_counted_message("replaying trace", 12_000, 100_000, "requests");
        set_phase("a phase named from afar");
        set_count(3, 4, "page writes");
        note("a line on standard error");
        progress.finish();
        set_phase("no spinner: nothing happens");
    }
}
