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

/// The spinner running now, if any: [`set_phase`] and [`note`] reach it.
static CURRENT_SPINNER: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// The running spinner, if any (a poisoned lock only means a panic elsewhere; the bar
/// inside is still usable).
fn current_spinner() -> Option<ProgressBar> {
    CURRENT_SPINNER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone()
}

fn replace_current_spinner(bar: Option<ProgressBar>) {
    *CURRENT_SPINNER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = bar;
}

/// Names the phase now running on the spinner running, if any.
pub fn set_phase(message: impl Into<String>) {
    if let Some(bar) = current_spinner() {
        bar.set_message(message.into());
    }
}

/// Shows `done` of `total` items of the current phase on the spinner running, if any,
/// e.g. "replaying trace: 12,000 of 100,000 requests".
pub fn set_counted_phase(phase: &str, done: u64, total: u64, unit: &str) {
    if let Some(bar) = current_spinner() {
        bar.set_message(counted_message(phase, done, total, unit));
    }
}

/// Prints `line` on standard error, lifting the spinner running (if any) off its line
/// while doing so; the text is exactly what `eprintln!` would print.
pub fn note(line: &str) {
    match current_spinner() {
        Some(bar) => bar.suspend(|| eprintln!("{line}")),
        None => eprintln!("{line}"),
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
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// Starts a spinner on standard error showing `message` (hidden when standard error
    /// is not a terminal).
    pub fn spinner(message: impl Into<String>) -> Self {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        bar.set_style(style);
        bar.set_message(message.into());
        bar.enable_steady_tick(Duration::from_millis(SPINNER_TICK_INTERVAL_MS));
        replace_current_spinner(Some(bar.clone()));
        Self { bar }
    }

    /// Names the phase now running.
    pub fn set_message(&self, message: impl Into<String>) {
        self.bar.set_message(message.into());
    }

    /// Shows `done` of `total` items of the current phase after its name, e.g.
    /// "replaying trace: 12,000 of 100,000 requests".
    pub fn set_counted_message(&self, phase: &str, done: u64, total: u64, unit: &str) {
        self.bar
            .set_message(counted_message(phase, done, total, unit));
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
    fn a_spinner_finishes_without_a_terminal() {
        let progress = Progress::spinner("measuring");
        progress.set_message("measuring again");
        progress.set_counted_message("replaying trace", 12_000, 100_000, "requests");
        set_phase("a phase named from afar");
        set_counted_phase("replaying trace", 1, 2, "requests");
        note("a line on standard error");
        progress.finish();
        set_phase("no spinner: nothing happens");
    }
}
