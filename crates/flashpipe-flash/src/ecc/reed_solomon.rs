//! One RS(255,243) codeword over GF(2^8): a table-driven systematic encoder and an
//! errors-at-unknown-positions decoder (syndromes, Berlekamp-Massey, Chien search, Forney).
//!
//! The code is the one minFlash's controller uses and the `reed-solomon` 0.2 crate
//! computed: generator `g(x) = (x - alpha^0)(x - alpha^1)...(x - alpha^11)` over the field
//! of [`super::galois`], the message's first byte the highest-degree coefficient, the 12
//! parity bytes `m(x) x^12 mod g(x)` after it. Shortened codewords (fewer than 243 message
//! bytes) are the full code with leading zero bytes left out.
//!
//! Why written here: the maintained Reed-Solomon crates (`reed-solomon-erasure`,
//! `reed-solomon-simd`, `reed-solomon-novelpoly`) are erasure codes over shards, which
//! recover lost shards at known positions; flash needs errors at unknown positions
//! corrected inside each codeword, and its parity must stay byte for byte what images
//! already hold. The only crate that decoded errors (`reed-solomon` 0.2) is unmaintained
//! since 2018 and its byte-at-a-time encoder took two thirds of a put's time.
//!
//! Encoding is linear, so it runs eight message bytes per step like a sliced CRC: with the
//! remainder's top eight coefficients `r_k` and the next eight bytes `b_k`,
//! `R' = R_low x^8 + sum_k (r_k + b_k) (x^(19 - k) mod g)`, each term one lookup of a
//! 256-entry table of 12-byte vectors kept in a `u128` (coefficient of x^11 in the top
//! byte). Several codewords advance in lockstep so their lookups overlap.

use super::galois::{alpha_power, divide, multiply, EXPONENTS, LOGARITHMS};

/// Parity bytes (and roots of the generator) per codeword.
pub const PARITY_BYTES: usize = 12;
/// Bytes of a full codeword.
pub const CODEWORD_BYTES: usize = 255;
/// Errors a codeword can correct.
pub const CORRECTABLE_ERRORS: usize = PARITY_BYTES / 2;
/// Message bytes consumed per table step.
const SLICE_BYTES: usize = 8;
/// Codewords encoded in lockstep by [`Encoder::parity_of_several`].
pub const LOCKSTEP_CODEWORDS: usize = 4;

/// Why a codeword could not be corrected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Uncorrectable;

/// The systematic encoder: parity of a message, eight bytes per table step.
pub struct Encoder {
    /// `tables[k][c]` = `c * (x^(19 - k) mod g(x))`, packed with x^11's coefficient on top.
    tables: Box<[[u128; 256]; SLICE_BYTES]>,
}

impl Default for Encoder {
    fn default() -> Self {
        Encoder::new()
    }
}

/// The generator polynomial's coefficients below its leading 1, x^11's first.
fn generator_low_coefficients() -> [u8; PARITY_BYTES] {
    // Coefficients highest degree first; starts as the constant polynomial 1.
    let mut generator = vec![1u8];
    for root_power in 0..PARITY_BYTES {
        let root = alpha_power(root_power);
        let mut next = vec![0u8; generator.len() + 1];
        for (index, &coefficient) in generator.iter().enumerate() {
            next[index] ^= coefficient;
            next[index + 1] ^= multiply(coefficient, root);
        }
        generator = next;
    }
    assert_eq!(generator[0], 1, "the generator is monic");
    let mut low = [0u8; PARITY_BYTES];
    low.copy_from_slice(&generator[1..]);
    low
}

fn pack(coefficients: &[u8; PARITY_BYTES]) -> u128 {
    let mut bytes = [0u8; 16];
    bytes[..PARITY_BYTES].copy_from_slice(coefficients);
    u128::from_be_bytes(bytes)
}

fn unpack(register: u128) -> [u8; PARITY_BYTES] {
    let mut parity = [0u8; PARITY_BYTES];
    parity.copy_from_slice(&register.to_be_bytes()[..PARITY_BYTES]);
    parity
}

impl Encoder {
    /// Builds the tables (about 32 KiB).
    pub fn new() -> Encoder {
        let generator = generator_low_coefficients();
        // x^12 mod g, then x^13 ... x^19 mod g by shifting.
        let mut powers = [[0u8; PARITY_BYTES]; SLICE_BYTES];
        let mut current = generator;
        for power in powers.iter_mut() {
            *power = current;
            let top = current[0];
            current.copy_within(1.., 0);
            current[PARITY_BYTES - 1] = 0;
            for (coefficient, &generator_coefficient) in current.iter_mut().zip(&generator) {
                *coefficient ^= multiply(top, generator_coefficient);
            }
        }
        let mut tables = Box::new([[0u128; 256]; SLICE_BYTES]);
        for (slice, table) in tables.iter_mut().enumerate() {
            // Slice k (the k-th byte of a step) multiplies x^(19 - k) = powers[7 - k].
            let power = &powers[SLICE_BYTES - 1 - slice];
            for (value, entry) in table.iter_mut().enumerate() {
                let scaled = power.map(|coefficient| multiply(value as u8, coefficient));
                *entry = pack(&scaled);
            }
        }
        Encoder { tables }
    }

    #[inline(always)]
    fn step_eight(&self, register: u128, chunk: &[u8]) -> u128 {
        let bytes: [u8; SLICE_BYTES] = chunk.try_into().expect("an eight-byte chunk");
        let feedback = (register >> 64) as u64 ^ u64::from_be_bytes(bytes);
        let tables = &self.tables;
        (register << 64)
            ^ tables[0][(feedback >> 56) as usize]
            ^ tables[1][(feedback >> 48) as usize & 0xFF]
            ^ tables[2][(feedback >> 40) as usize & 0xFF]
            ^ tables[3][(feedback >> 32) as usize & 0xFF]
            ^ tables[4][(feedback >> 24) as usize & 0xFF]
            ^ tables[5][(feedback >> 16) as usize & 0xFF]
            ^ tables[6][(feedback >> 8) as usize & 0xFF]
            ^ tables[7][feedback as usize & 0xFF]
    }

    #[inline(always)]
    fn step_one(&self, register: u128, byte: u8) -> u128 {
        let feedback = (register >> 120) as u8 ^ byte;
        (register << 8) ^ self.tables[SLICE_BYTES - 1][feedback as usize]
    }

    /// The 12 parity bytes of `message` (at most 243 bytes).
    pub fn parity_of(&self, message: &[u8]) -> [u8; PARITY_BYTES] {
        assert!(message.len() <= CODEWORD_BYTES - PARITY_BYTES);
        let mut register = 0u128;
        let mut chunks = message.chunks_exact(SLICE_BYTES);
        for chunk in &mut chunks {
            register = self.step_eight(register, chunk);
        }
        for &byte in chunks.remainder() {
            register = self.step_one(register, byte);
        }
        unpack(register)
    }

    /// The parity of several messages of one length, computed in lockstep (independent
    /// lookups overlap in the processor).
    pub fn parity_of_several(
        &self,
        messages: [&[u8]; LOCKSTEP_CODEWORDS],
    ) -> [[u8; PARITY_BYTES]; LOCKSTEP_CODEWORDS] {
        let length = messages[0].len();
        assert!(messages.iter().all(|message| message.len() == length));
        assert!(length <= CODEWORD_BYTES - PARITY_BYTES);
        let mut registers = [0u128; LOCKSTEP_CODEWORDS];
        let whole = length - length % SLICE_BYTES;
        let mut offset = 0;
        while offset < whole {
            for (register, message) in registers.iter_mut().zip(&messages) {
                *register = self.step_eight(*register, &message[offset..offset + SLICE_BYTES]);
            }
            offset += SLICE_BYTES;
        }
        for index in whole..length {
            for (register, message) in registers.iter_mut().zip(&messages) {
                *register = self.step_one(*register, message[index]);
            }
        }
        registers.map(unpack)
    }
}

/// The 12 syndromes `S_j = c(alpha^j)` of a received codeword (all zero: a codeword).
fn syndromes(codeword: &[u8]) -> [u8; PARITY_BYTES] {
    let mut syndromes = [0u8; PARITY_BYTES];
    for (power, syndrome) in syndromes.iter_mut().enumerate() {
        let log_root = power;
        let mut value = 0u8;
        for &byte in codeword {
            value = if value == 0 {
                byte
            } else {
                EXPONENTS[LOGARITHMS[value as usize] as usize + log_root] ^ byte
            };
        }
        *syndrome = value;
    }
    syndromes
}

/// The error locator `Lambda(x)` (lowest degree first, `Lambda_0 = 1`) and its degree.
fn berlekamp_massey(syndromes: &[u8; PARITY_BYTES]) -> ([u8; PARITY_BYTES + 1], usize) {
    let mut locator = [0u8; PARITY_BYTES + 1];
    let mut previous = [0u8; PARITY_BYTES + 1];
    locator[0] = 1;
    previous[0] = 1;
    let mut degree = 0usize;
    let mut shift = 1usize;
    let mut previous_discrepancy = 1u8;
    for step in 0..PARITY_BYTES {
        let mut discrepancy = syndromes[step];
        for index in 1..=degree {
            discrepancy ^= multiply(locator[index], syndromes[step - index]);
        }
        if discrepancy == 0 {
            shift += 1;
            continue;
        }
        let scale = divide(discrepancy, previous_discrepancy);
        let before = locator;
        for index in shift..=PARITY_BYTES {
            locator[index] ^= multiply(scale, previous[index - shift]);
        }
        if 2 * degree <= step {
            degree = step + 1 - degree;
            previous = before;
            previous_discrepancy = discrepancy;
            shift = 1;
        } else {
            shift += 1;
        }
    }
    (locator, degree)
}

fn evaluate(polynomial_low_first: &[u8], point: u8) -> u8 {
    polynomial_low_first
        .iter()
        .rev()
        .fold(0u8, |value, &coefficient| {
            multiply(value, point) ^ coefficient
        })
}

/// Corrects `codeword` (message then 12 parity bytes, at most 255 bytes) in place;
/// returns the number of symbols corrected, or [`Uncorrectable`] when more than 6 symbols
/// are wrong and the decoder notices (as any bounded-distance decoder, it can also land on
/// another codeword; the caller that knows the original tells the two apart).
pub fn correct(codeword: &mut [u8]) -> Result<usize, Uncorrectable> {
    let length = codeword.len();
    assert!((PARITY_BYTES + 1..=CODEWORD_BYTES).contains(&length));
    let syndromes = syndromes(codeword);
    if syndromes.iter().all(|&syndrome| syndrome == 0) {
        return Ok(0);
    }
    let (locator, degree) = berlekamp_massey(&syndromes);
    if degree == 0 || degree > CORRECTABLE_ERRORS || locator[degree] == 0 {
        return Err(Uncorrectable);
    }
    // Chien search over the codeword's own positions: byte i has power length - 1 - i.
    let mut positions = Vec::with_capacity(degree);
    for index in 0..length {
        let power = length - 1 - index;
        let inverse_locator = alpha_power(255 - power % 255);
        if evaluate(&locator[..=degree], inverse_locator) == 0 {
            positions.push(index);
        }
    }
    if positions.len() != degree {
        return Err(Uncorrectable);
    }
    // Omega(x) = S(x) Lambda(x) mod x^12.
    let mut evaluator = [0u8; PARITY_BYTES];
    for (power, slot) in evaluator.iter_mut().enumerate() {
        for index in 0..=power.min(degree) {
            *slot ^= multiply(locator[index], syndromes[power - index]);
        }
    }
    for &index in &positions {
        let power = length - 1 - index;
        let locator_value = alpha_power(power);
        let inverse = alpha_power(255 - power % 255);
        let mut derivative = 0u8;
        for odd in (1..=degree).step_by(2) {
            derivative ^= multiply(locator[odd], alpha_power((255 - power % 255) * (odd - 1)));
        }
        if derivative == 0 {
            return Err(Uncorrectable);
        }
        let magnitude = multiply(
            locator_value,
            divide(evaluate(&evaluator, inverse), derivative),
        );
        if magnitude == 0 {
            return Err(Uncorrectable);
        }
        codeword[index] ^= magnitude;
    }
    if syndromes_of_corrected_are_zero(codeword) {
        Ok(degree)
    } else {
        Err(Uncorrectable)
    }
}

fn syndromes_of_corrected_are_zero(codeword: &[u8]) -> bool {
    syndromes(codeword).iter().all(|&syndrome| syndrome == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flashpipe_device::SplitMix64;

    /// Parity computed by the `reed-solomon` 0.2.1 crate's `Encoder::new(12)` for the
    /// message `(i * multiplier + offset) mod 256`, i in 0..length: images written before
    /// the crate was replaced carry exactly these bytes.
    const GOLDEN: [(usize, u32, u32, [u8; PARITY_BYTES]); 4] = [
        (
            243,
            7,
            3,
            [
                0xdd, 0x46, 0x2a, 0xb9, 0x15, 0xdf, 0xad, 0x6a, 0xef, 0x5e, 0x54, 0x08,
            ],
        ),
        (
            213,
            31,
            200,
            [
                0xa0, 0xc5, 0x85, 0x4f, 0xdd, 0xdd, 0x8c, 0x8e, 0xa2, 0x41, 0xaf, 0x29,
            ],
        ),
        (
            1,
            1,
            90,
            [
                0x76, 0xde, 0xed, 0x84, 0x53, 0xb8, 0x9b, 0xbf, 0x55, 0x34, 0xe3, 0xd6,
            ],
        ),
        (
            243,
            0,
            255,
            [
                0xfc, 0x30, 0xa9, 0x6c, 0xf6, 0x8f, 0xae, 0xa7, 0x5b, 0xbf, 0x3e, 0x5c,
            ],
        ),
    ];

    fn golden_message(length: usize, multiplier: u32, offset: u32) -> Vec<u8> {
        (0..length as u32)
            .map(|index| (index.wrapping_mul(multiplier).wrapping_add(offset) & 0xFF) as u8)
            .collect()
    }

    #[test]
    fn parity_is_byte_for_byte_what_the_old_crate_wrote() {
        let encoder = Encoder::new();
        for (length, multiplier, offset, expected) in GOLDEN {
            let message = golden_message(length, multiplier, offset);
            assert_eq!(encoder.parity_of(&message), expected, "length {length}");
        }
    }

    #[test]
    fn lockstep_parity_equals_one_at_a_time() {
        let encoder = Encoder::new();
        let mut generator = SplitMix64::new(11);
        for length in [0, 1, 7, 8, 9, 200, 243] {
            let messages: Vec<Vec<u8>> = (0..LOCKSTEP_CODEWORDS)
                .map(|_| (0..length).map(|_| generator.next_u64() as u8).collect())
                .collect();
            let several =
                encoder.parity_of_several([&messages[0], &messages[1], &messages[2], &messages[3]]);
            for (message, parity) in messages.iter().zip(several) {
                assert_eq!(encoder.parity_of(message), parity, "length {length}");
            }
        }
    }

    #[test]
    fn codewords_have_zero_syndromes_and_errors_are_corrected() {
        let encoder = Encoder::new();
        let mut generator = SplitMix64::new(3);
        for length in [1usize, 50, 213, 243] {
            let message: Vec<u8> = (0..length).map(|_| generator.next_u64() as u8).collect();
            let mut codeword = message.clone();
            codeword.extend_from_slice(&encoder.parity_of(&message));
            assert_eq!(correct(&mut codeword.clone()), Ok(0));
            for errors in 1..=CORRECTABLE_ERRORS.min(codeword.len()) {
                let mut received = codeword.clone();
                let mut chosen = Vec::new();
                while chosen.len() < errors {
                    let index = generator.below(received.len() as u64) as usize;
                    if !chosen.contains(&index) {
                        chosen.push(index);
                        received[index] ^= 1 + generator.below(255) as u8;
                    }
                }
                assert_eq!(correct(&mut received), Ok(errors), "length {length}");
                assert_eq!(received, codeword);
            }
        }
    }
}
