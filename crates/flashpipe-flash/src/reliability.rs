//! The error, wear and bad-block model (docs/flash-model.md gives the formulas).
//!
//! Raw bit error rate of a page read:
//! `rber = base + wear_at_rated * (pe / rated)^wear_exponent
//!        + retention_per_hour * hours_since_program * (1 + pe / rated)
//!        + read_disturb_per_read * reads_since_erase`.
//! Bit flips per read are Poisson with mean `rber * raw_bits`. A program or erase fails
//! (the block grows bad) with probability `grown_at_rated * (pe / rated)^grown_exponent`.
//! Factory bad blocks are a seeded hash of the block's index, so they need no storage.

use flashpipe_device::SplitMix64;

use crate::config::FlashReliability;

const NANOSECONDS_PER_HOUR: f64 = 3.6e12;

/// What the model needs to know about a block to rate a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockWear {
    /// Program/erase cycles so far.
    pub pe_cycles: u32,
    /// Reads of any of its pages since its last erase.
    pub reads_since_erase: u32,
    /// Virtual time of its first program since the last erase.
    pub programmed_at_ns: u64,
}

/// The raw bit error rate of a read at `now_ns`.
pub fn raw_bit_error_rate(model: &FlashReliability, wear: BlockWear, now_ns: u64) -> f64 {
    let wear_ratio = f64::from(wear.pe_cycles) / f64::from(model.rated_pe_cycles);
    let hours = now_ns.saturating_sub(wear.programmed_at_ns) as f64 / NANOSECONDS_PER_HOUR;
    let wear_term = if wear.pe_cycles == 0 {
        0.0
    } else {
        model.wear_rber_at_rated * wear_ratio.powf(model.wear_exponent)
    };
    let rate = model.base_rber
        + wear_term
        + model.retention_rber_per_hour * hours * (1.0 + wear_ratio)
        + model.read_disturb_rber_per_read * f64::from(wear.reads_since_erase);
    rate.clamp(0.0, 0.5)
}

/// Probability that a program or erase of a block with `pe_cycles` fails.
pub fn operation_failure_probability(model: &FlashReliability, pe_cycles: u32) -> f64 {
    let wear_ratio = f64::from(pe_cycles) / f64::from(model.rated_pe_cycles);
    (model.grown_bad_probability_at_rated * wear_ratio.powf(model.grown_bad_exponent)).min(1.0)
}

/// Whether block `block_index` (array-wide) shipped bad. Block 0 of every chip is
/// guaranteed good, as ONFI requires; `block_in_way` is the block's index in its chip.
pub fn is_factory_bad(
    model: &FlashReliability,
    seed: u64,
    block_index: u64,
    block_in_way: u32,
) -> bool {
    if block_in_way == 0 || model.factory_bad_block_fraction <= 0.0 {
        return false;
    }
    let mut generator = SplitMix64::new(seed ^ block_index.wrapping_mul(0xA24B_AED4_963E_E407));
    generator.chance(model.factory_bad_block_fraction)
}

/// A Poisson sample with mean `mean` (inversion for small means, a normal approximation
/// above 30, where the difference does not matter for error counts).
pub fn poisson(generator: &mut SplitMix64, mean: f64) -> u32 {
    if mean <= 0.0 {
        return 0;
    }
    if mean > 30.0 {
        let unit_a = unit_interval(generator).max(f64::MIN_POSITIVE);
        let unit_b = unit_interval(generator);
        let normal = (-2.0 * unit_a.ln()).sqrt() * (std::f64::consts::TAU * unit_b).cos();
        return (mean + normal * mean.sqrt()).round().max(0.0) as u32;
    }
    let mut remaining = unit_interval(generator);
    let mut probability = (-mean).exp();
    let mut count = 0u32;
    while remaining > probability && count < 1000 {
        remaining -= probability;
        count += 1;
        probability *= mean / f64::from(count);
    }
    count
}

fn unit_interval(generator: &mut SplitMix64) -> f64 {
    (generator.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FlashConfig;

    #[test]
    fn error_rate_grows_with_wear_retention_and_reads() {
        let model = FlashConfig::preset("minflash").unwrap().reliability;
        let fresh = BlockWear {
            pe_cycles: 0,
            reads_since_erase: 0,
            programmed_at_ns: 0,
        };
        let base = raw_bit_error_rate(&model, fresh, 0);
        let worn = raw_bit_error_rate(
            &model,
            BlockWear {
                pe_cycles: 3000,
                ..fresh
            },
            0,
        );
        let old = raw_bit_error_rate(&model, fresh, 1_000 * 3_600_000_000_000);
        let read = raw_bit_error_rate(
            &model,
            BlockWear {
                reads_since_erase: 100_000,
                ..fresh
            },
            0,
        );
        assert!(base < worn && base < old && base < read);
        assert!(
            operation_failure_probability(&model, 0) < operation_failure_probability(&model, 3000)
        );
    }

    #[test]
    fn poisson_mean_is_close() {
        let mut generator = SplitMix64::new(5);
        for mean in [0.01, 1.0, 5.0, 50.0] {
            let total: u64 = (0..20_000)
                .map(|_| u64::from(poisson(&mut generator, mean)))
                .sum();
            let observed = total as f64 / 20_000.0;
            assert!(
                (observed - mean).abs() < 0.05 * mean + 0.01,
                "{mean}: {observed}"
            );
        }
    }
}
