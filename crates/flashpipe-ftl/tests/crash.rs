//! Model-based crash test: random writes, trims, copies by reference and flushes against
//! a plain model, power cut at random instants (requests in flight lost, programs torn,
//! erases interrupted), mount, compare every logical page.
//!
//! `FLASHPIPE_SEED=n` replays one seed; `FLASHPIPE_SEEDS=n` runs n seeds (default 300).

mod support;

use std::collections::HashMap;

use flashpipe_device::{run_batch, BlockDevice, Completion, IoBuf, Operation, Request, SplitMix64};
use flashpipe_ftl::{FlashBackend, Ftl, FtlOptions, PowerCutFlash};

/// A copy's (source, destination, count).
type CopyRange = (u64, u64, u64);

/// One operation of a batch and the values it gives each logical page it changes.
struct Pending {
    changes: Vec<(u64, u64)>,
}

fn page_of(token: u64, page_bytes: usize) -> IoBuf {
    let mut buffer = IoBuf::zeroed(page_bytes);
    if token != 0 {
        for chunk in buffer.chunks_mut(8) {
            chunk.copy_from_slice(&token.to_le_bytes());
        }
    }
    buffer
}

fn token_of(page: &[u8]) -> Result<u64, String> {
    let first = u64::from_le_bytes(page[..8].try_into().expect("8 bytes"));
    if page
        .chunks(8)
        .any(|chunk| u64::from_le_bytes(chunk.try_into().expect("8 bytes")) != first)
    {
        return Err(format!("a page mixes data (first token {first})"));
    }
    Ok(first)
}

struct Harness {
    ftl: Option<Ftl>,
    options: FtlOptions,
    model: Vec<u64>,
    generator: SplitMix64,
    next_token: u64,
    page_bytes: usize,
    crashes: u32,
}

impl Harness {
    fn ftl(&mut self) -> &mut Ftl {
        self.ftl.as_mut().expect("mounted")
    }

    /// Picks a batch of operations on disjoint logical pages.
    fn build_batch(&mut self) -> Vec<(Request, Option<CopyRange>, Pending)> {
        let logical = self.model.len() as u64;
        let mut used: Vec<(u64, u64)> = Vec::new();
        let mut batch = Vec::new();
        let size = 1 + self.generator.below(6);
        for index in 0..size {
            let tag = index;
            let choice = self.generator.below(100);
            let count = 1 + self.generator.below(6);
            let first = self.generator.below(logical - count);
            let overlaps = |used: &Vec<(u64, u64)>, start: u64, length: u64| {
                used.iter().any(|&(other, other_length)| {
                    start < other + other_length && other < start + length
                })
            };
            if choice < 55 {
                if overlaps(&used, first, count) {
                    continue;
                }
                used.push((first, count));
                let tokens: Vec<u64> = (0..count)
                    .map(|_| {
                        self.next_token += 1;
                        self.next_token
                    })
                    .collect();
                let mut buffer = IoBuf::zeroed(count as usize * self.page_bytes);
                for (page, token) in tokens.iter().enumerate() {
                    let bytes = page_of(*token, self.page_bytes);
                    buffer[page * self.page_bytes..(page + 1) * self.page_bytes]
                        .copy_from_slice(&bytes);
                }
                let changes = tokens
                    .iter()
                    .enumerate()
                    .map(|(page, &token)| (first + page as u64, token))
                    .collect();
                batch.push((
                    Request::write(tag, first, buffer),
                    None,
                    Pending { changes },
                ));
            } else if choice < 70 {
                if overlaps(&used, first, count) {
                    continue;
                }
                used.push((first, count));
                let changes = (first..first + count).map(|page| (page, 0)).collect();
                batch.push((Request::trim(tag, first, count), None, Pending { changes }));
            } else if choice < 95 {
                let destination = if self.generator.chance(0.3) {
                    // Overlapping ranges (memmove).
                    (first + self.generator.below(2 * count)).saturating_sub(count)
                } else {
                    self.generator.below(logical - count)
                };
                let destination = destination.min(logical - count);
                if overlaps(&used, first, count) || overlaps(&used, destination, count) {
                    continue;
                }
                used.push((first, count));
                used.push((destination, count));
                let changes = (0..count)
                    .map(|page| (destination + page, self.model[(first + page) as usize]))
                    .collect();
                batch.push((
                    Request::flush(tag),
                    Some((first, destination, count)),
                    Pending { changes },
                ));
            } else {
                batch.push((
                    Request::flush(tag),
                    None,
                    Pending {
                        changes: Vec::new(),
                    },
                ));
            }
        }
        batch
    }

    fn run_batch(&mut self, seed: u64) -> Result<(), String> {
        let batch = self.build_batch();
        let mut pending: HashMap<u64, Pending> = HashMap::new();
        for (request, copy, changes) in batch {
            let tag = request.tag;
            match copy {
                Some((source, destination, count)) => self
                    .ftl()
                    .submit_copy(tag, source, destination, count)
                    .map_err(|error| format!("copy refused: {error}"))?,
                None => self
                    .ftl()
                    .submit(request)
                    .map_err(|rejected| format!("submit refused: {rejected}"))?,
            }
            pending.insert(tag, changes);
        }
        let crash_after = if self.generator.chance(0.12) {
            Some(self.generator.below(pending.len() as u64 + 1))
        } else {
            None
        };
        let mut completed = 0u64;
        let mut completions: Vec<Completion> = Vec::new();
        while !pending.is_empty() {
            if crash_after == Some(completed) {
                return self.crash_and_check(seed, &pending);
            }
            completions.clear();
            self.ftl()
                .wait_completions(&mut completions)
                .map_err(|error| format!("wait: {error}"))?;
            for completion in completions.drain(..) {
                completion
                    .status
                    .map_err(|error| format!("request {} failed: {error}", completion.tag))?;
                let done = pending.remove(&completion.tag).expect("a pending tag");
                for (page, token) in done.changes {
                    self.model[page as usize] = token;
                }
                completed += 1;
            }
        }
        if crash_after.is_some() {
            return self.crash_and_check(seed, &pending);
        }
        self.ftl().check_invariants()
    }

    fn crash_and_check(
        &mut self,
        seed: u64,
        pending: &HashMap<u64, Pending>,
    ) -> Result<(), String> {
        self.crashes += 1;
        let backend = self.ftl.take().expect("mounted").into_backend();
        let mut flash: Box<PowerCutFlash> = backend
            .into_any()
            .downcast()
            .map_err(|_| "the backend is a PowerCutFlash".to_string())?;
        flash.cut_power(seed ^ u64::from(self.crashes).wrapping_mul(0x9E37_79B9));
        let (ftl, _report) = Ftl::mount(flash as Box<dyn FlashBackend>, self.options.clone())
            .map_err(|error| format!("mount after crash {}: {error}", self.crashes))?;
        ftl.check_invariants()?;
        self.ftl = Some(ftl);
        let mut allowed: HashMap<u64, Vec<u64>> = HashMap::new();
        for changes in pending.values() {
            for &(page, token) in &changes.changes {
                allowed.entry(page).or_default().push(token);
            }
        }
        self.compare_all(&allowed)
    }

    fn compare_all(&mut self, allowed: &HashMap<u64, Vec<u64>>) -> Result<(), String> {
        let logical = self.model.len() as u64;
        let chunk = 32u64;
        let page_bytes = self.page_bytes;
        for first in (0..logical).step_by(chunk as usize) {
            let count = chunk.min(logical - first);
            let completions = run_batch(
                self.ftl(),
                vec![Operation::Read {
                    first_block: first,
                    buffer: IoBuf::zeroed(count as usize * page_bytes),
                }],
            )
            .map_err(|error| format!("read back: {error}"))?;
            let buffer = completions[0].buffer.as_ref().expect("buffer");
            for index in 0..count {
                let page = first + index;
                let offset = index as usize * page_bytes;
                let found = token_of(&buffer[offset..offset + page_bytes])
                    .map_err(|error| format!("logical {page}: {error}"))?;
                let expected = self.model[page as usize];
                let in_flight = allowed
                    .get(&page)
                    .is_some_and(|tokens| tokens.contains(&found));
                if found != expected && !in_flight {
                    return Err(format!(
                        "after crash {}: logical {page} holds token {found}, expected {expected} (in flight: {:?})",
                        self.crashes,
                        allowed.get(&page)
                    ));
                }
                self.model[page as usize] = found;
            }
        }
        Ok(())
    }
}

fn run_seed(seed: u64, batches: u32) -> Result<u32, String> {
    let mut generator = SplitMix64::new(seed);
    let config = support::sized_config(16, 16, 512);
    let array = PowerCutFlash::new(support::small_array(config, seed));
    let options = FtlOptions {
        name: "ftl-crash".to_string(),
        over_provisioning: 0.1 + generator.below(30) as f64 / 100.0,
        victim_policy: support::drawn_victim_policy(&mut generator),
        checkpoint_interval_pages: 40 + generator.below(400),
        queue_depth: 16,
        check_host_write_wait_bound: true,
        ..FtlOptions::default()
    };
    let ftl = Ftl::format(Box::new(array) as Box<dyn FlashBackend>, options.clone())
        .map_err(|error| format!("format: {error}"))?;
    let logical = ftl.info().block_count as usize;
    let page_bytes = ftl.info().block_size_bytes as usize;
    let mut harness = Harness {
        ftl: Some(ftl),
        options,
        model: vec![0; logical],
        generator,
        next_token: seed << 24,
        page_bytes,
        crashes: 0,
    };
    for _ in 0..batches {
        harness.run_batch(seed)?;
    }
    harness.compare_all(&HashMap::new())?;
    Ok(harness.crashes)
}

fn seeds_from_environment(default_count: u64) -> Vec<u64> {
    if let Some(seed) = std::env::var("FLASHPIPE_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
    {
        return vec![seed];
    }
    let count = std::env::var("FLASHPIPE_SEEDS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(default_count);
    (1..=count).collect()
}

#[test]
fn recovery_rebuilds_every_acknowledged_operation_after_random_power_cuts() {
    let mut total_crashes = 0;
    for seed in seeds_from_environment(300) {
        match run_seed(seed, 100) {
            Ok(crashes) => total_crashes += crashes,
            Err(message) => {
                panic!("seed {seed} failed (replay with FLASHPIPE_SEED={seed}): {message}")
            }
        }
    }
    assert!(total_crashes > 0, "the campaign cut power at least once");
}
