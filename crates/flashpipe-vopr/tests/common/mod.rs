//! What the campaign tests share: a seed's report (or a panic with its failure), the same
//! seed run twice, and a planted bug found within 50 seeds and replayed.

use std::fmt::{Debug, Display};

/// The report of a seed that passed; a panic with the failure, which names the seed.
pub fn report_or_panic<R, F: Display>(result: Result<R, F>) -> R {
    match result {
        Ok(report) => report,
        Err(failure) => panic!("{failure}"),
    }
}

/// Runs `seed` twice (the same history, report for report) and the seed after it (a
/// fingerprint of its own): `run` gives a seed's report and `fingerprint` reads it.
pub fn assert_same_seed_same_history<R: PartialEq + Debug>(
    run: impl Fn(u64) -> R,
    fingerprint: impl Fn(&R) -> u64,
    seed: u64,
) {
    let first = run(seed);
    let second = run(seed);
    assert_eq!(first, second, "seed {seed} ran two histories");
    let other = run(seed.wrapping_add(1));
    assert_ne!(
        fingerprint(&first),
        fingerprint(&other),
        "two seeds, one history"
    );
}

/// Runs seeds 0 to 49 until one fails, as the planted bug `name` must make one; the
/// failure names its seed (`seed_of` reads it) and how to replay it, and that seed run
/// again fails the same way.
pub fn assert_found_within_50_seeds<R, F: Display + Debug + PartialEq>(
    run: impl Fn(u64) -> Result<R, F>,
    seed_of: impl Fn(&F) -> u64,
    name: &str,
) {
    let failure = (0..50)
        .find_map(|seed| run(seed).err())
        .unwrap_or_else(|| panic!("50 seeds and the planted bug ({name}) went unnoticed"));
    eprintln!("planted bug ({name}) found: {failure}");
    let seed = seed_of(&failure);
    let text = failure.to_string();
    assert!(text.contains(&format!("seed {seed} failed")), "{text}");
    assert!(
        text.contains(&format!("FLASHPIPE_SEED={seed} replays")),
        "{text}"
    );
    let Err(replayed) = run(seed) else {
        panic!("a replay of seed {seed} fails again");
    };
    assert_eq!(replayed, failure, "the replay found the same thing");
}
