//! Seeds of the simulated campaigns.
//!
//! - `FLASHPIPE_SEED=S` replays one seed.
//! - By default a campaign runs seeds `0..N` (`FLASHPIPE_SEEDS=N` changes `N`), the same
//!   every run, so the suite is reproducible.
//! - `FLASHPIPE_LONG=1` (long mode) starts from a random base seed, printed before the
//!   first run, and runs the long count: each long run explores seeds no earlier run
//!   tried.
//!
//! A failing seed is printed with the line that replays it.

use flashpipe_device::SplitMix64;

/// Names the variable that replays one seed.
pub const SEED_VARIABLE: &str = "FLASHPIPE_SEED";
/// Names the variable that sets how many seeds a campaign runs.
pub const SEED_COUNT_VARIABLE: &str = "FLASHPIPE_SEEDS";
/// Names the variable that asks for long mode (`1`).
pub const LONG_VARIABLE: &str = "FLASHPIPE_LONG";

/// Whether long mode is on (`FLASHPIPE_LONG=1`).
pub fn long_mode() -> bool {
    std::env::var(LONG_VARIABLE).is_ok_and(|value| value.trim() == "1")
}

/// The seed `FLASHPIPE_SEED` names, if set.
///
/// # Panics
/// When it is set to something other than a number (a test's setup error, said plainly).
pub fn replayed_seed() -> Option<u64> {
    let value = std::env::var(SEED_VARIABLE).ok()?;
    match value.trim().parse() {
        Ok(seed) => Some(seed),
        Err(_) => panic!("{SEED_VARIABLE}={value} is not a seed; give a whole number"),
    }
}

/// A seed nobody chose: the wall clock and the process id mixed through [`SplitMix64`].
pub fn random_seed() -> u64 {
    let since_epoch_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos() as u64);
    let mixed = since_epoch_ns ^ u64::from(std::process::id()).rotate_left(32);
    SplitMix64::new(mixed).next_u64()
}

/// The seeds to run: `FLASHPIPE_SEED`, else `0..N` with `N` from `FLASHPIPE_SEEDS` or
/// `default_count`; in long mode, `N` seeds from a random printed base.
pub fn seeds(default_count: u64) -> Vec<u64> {
    seeds_long(default_count, default_count)
}

/// As [`seeds`], with a count of its own for long mode (`long_count`, unless
/// `FLASHPIPE_SEEDS` is set).
pub fn seeds_long(default_count: u64, long_count: u64) -> Vec<u64> {
    let chosen_count: Option<u64> = std::env::var(SEED_COUNT_VARIABLE)
        .ok()
        .and_then(|value| value.trim().parse().ok());
    let request = SeedRequest {
        replayed: replayed_seed(),
        chosen_count,
        long: long_mode(),
    };
    request.seeds(default_count, long_count, || {
        let base = random_seed();
        eprintln!(
            "long mode: {} seeds from base seed {base} ({SEED_VARIABLE}=S replays seed S)",
            chosen_count.unwrap_or(long_count)
        );
        base
    })
}

/// What the environment asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SeedRequest {
    /// `FLASHPIPE_SEED`.
    replayed: Option<u64>,
    /// `FLASHPIPE_SEEDS`.
    chosen_count: Option<u64>,
    /// `FLASHPIPE_LONG=1`.
    long: bool,
}

impl SeedRequest {
    /// The seeds: the replayed one; else, in long mode, a count from `draw_base()`; else
    /// `0..count`.
    fn seeds(
        &self,
        default_count: u64,
        long_count: u64,
        draw_base: impl FnOnce() -> u64,
    ) -> Vec<u64> {
        if let Some(seed) = self.replayed {
            return vec![seed];
        }
        if self.long {
            let count = self.chosen_count.unwrap_or(long_count);
            let base = draw_base();
            return (0..count).map(|offset| base.wrapping_add(offset)).collect();
        }
        (0..self.chosen_count.unwrap_or(default_count)).collect()
    }
}

/// The line that replays `seed`.
pub fn replay_line(seed: u64) -> String {
    format!("seed {seed} failed; replay with {SEED_VARIABLE}={seed}")
}

/// Runs `run_seed` for every seed of [`seeds`]; on a panic, prints how to replay the
/// seed and lets the panic go on.
pub fn run_seeds<T>(default_count: u64, run_seed: impl Fn(u64) -> T) -> Vec<T> {
    run_seed_list(seeds(default_count), run_seed)
}

/// Runs `run_seed` for every seed of [`seeds_long`]; on a panic, as [`run_seeds`].
pub fn run_seeds_long<T>(
    default_count: u64,
    long_count: u64,
    run_seed: impl Fn(u64) -> T,
) -> Vec<T> {
    run_seed_list(seeds_long(default_count, long_count), run_seed)
}

fn run_seed_list<T>(seeds: Vec<u64>, run_seed: impl Fn(u64) -> T) -> Vec<T> {
    seeds
        .into_iter()
        .map(|seed| {
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_seed(seed))) {
                Ok(result) => result,
                Err(panic) => {
                    eprintln!("{}", replay_line(seed));
                    std::panic::resume_unwind(panic);
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_seeds_differ_between_calls() {
        let first = random_seed();
        std::thread::sleep(std::time::Duration::from_millis(1));
        assert_ne!(first, random_seed());
    }

    #[test]
    fn the_replay_line_names_the_variable_and_the_seed() {
        assert_eq!(
            replay_line(42),
            "seed 42 failed; replay with FLASHPIPE_SEED=42"
        );
    }

    #[test]
    fn a_replayed_seed_wins_over_every_other_setting() {
        let request = SeedRequest {
            replayed: Some(77),
            chosen_count: Some(9),
            long: true,
        };
        let seeds = request.seeds(5, 1_000, || panic!("no base is drawn for a replay"));
        assert_eq!(seeds, [77]);
    }

    #[test]
    fn the_default_runs_from_zero_and_long_mode_from_the_drawn_base() {
        let default = SeedRequest {
            replayed: None,
            chosen_count: None,
            long: false,
        };
        assert_eq!(default.seeds(3, 1_000, || panic!("no base")), [0, 1, 2]);
        let chosen = SeedRequest {
            chosen_count: Some(2),
            ..default
        };
        assert_eq!(chosen.seeds(3, 1_000, || panic!("no base")), [0, 1]);
        let long = SeedRequest {
            long: true,
            ..default
        };
        let seeds = long.seeds(3, 4, || u64::MAX - 1);
        assert_eq!(seeds, [u64::MAX - 1, u64::MAX, 0, 1]);
        let long_chosen = SeedRequest {
            long: true,
            chosen_count: Some(2),
            ..default
        };
        assert_eq!(long_chosen.seeds(3, 4, || 10), [10, 11]);
    }
}
