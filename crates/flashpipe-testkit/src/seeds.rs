//! Seeds of the simulated campaigns: `FLASHPIPE_SEED=S` replays one seed,
//! `FLASHPIPE_SEEDS=N` runs seeds 0..N, and a failing seed is printed with the line that
//! replays it.

/// The seeds to run: `FLASHPIPE_SEED`, else `0..FLASHPIPE_SEEDS`, else `0..default_count`.
pub fn seeds(default_count: u64) -> Vec<u64> {
    if let Ok(seed) = std::env::var("FLASHPIPE_SEED") {
        return vec![seed.trim().parse().expect("FLASHPIPE_SEED is a number")];
    }
    let count: u64 = std::env::var("FLASHPIPE_SEEDS")
        .ok()
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(default_count);
    (0..count).collect()
}

/// Runs `run_seed` for every seed of [`seeds`]; on a panic, prints how to replay the
/// seed and lets the panic go on.
pub fn run_seeds<T>(default_count: u64, run_seed: impl Fn(u64) -> T) -> Vec<T> {
    seeds(default_count)
        .into_iter()
        .map(|seed| {
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_seed(seed))) {
                Ok(result) => result,
                Err(panic) => {
                    eprintln!("seed {seed} failed; replay with FLASHPIPE_SEED={seed}");
                    std::panic::resume_unwind(panic);
                }
            }
        })
        .collect()
}
