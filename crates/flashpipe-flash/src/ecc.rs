//! Reed-Solomon RS(255,243) ECC over stored pages, as minFlash's controller uses it.
//!
//! A page's protected message is its data followed by the host's spare bytes. It is cut
//! into codewords of up to 243 bytes (the last one shortened); each gets 12 parity bytes,
//! stored after the message in the spare area. Twelve parity symbols correct up to 6
//! symbol (byte) errors per codeword; more are reported uncorrectable.
//!
//! Two ways to judge a read, chosen by [`EccMode`]; both write the same parity:
//! - [`EccMode::OutcomeModel`] (the default): the array injected the bit flips itself, so
//!   it knows which bytes of which codeword are wrong. A codeword with at most 6 wrong
//!   bytes decodes to what was programmed, one with more does not: the outcome is exact
//!   without decoding, and a read costs nothing beyond counting.
//! - [`EccMode::Decoder`]: the real decoder of [`reed_solomon`] runs on every codeword a
//!   flip touched, as a controller would. It differs from the model only where a
//!   bounded-distance decoder lands on another codeword (more than 6 errors that look like
//!   6 or fewer: it then returns wrong data as corrected, about once in 10^3 such
//!   codewords); the property test in `tests/ecc_model_matches_decoder.rs` checks that
//!   they agree everywhere else.
//!
//! The codec ([`reed_solomon`], over the field of [`galois`]) is written here: the
//! maintained crates correct erasures only, and the parity must stay byte for byte what
//! images written with the `reed-solomon` 0.2 crate hold (its module doc says more).

pub mod galois;
pub mod reed_solomon;

use self::reed_solomon::{Encoder, LOCKSTEP_CODEWORDS};

/// Message bytes per full codeword.
pub const CODEWORD_DATA_BYTES: usize = 243;
/// Parity bytes per codeword.
pub const CODEWORD_PARITY_BYTES: usize = reed_solomon::PARITY_BYTES;
/// Symbol errors one codeword can correct.
pub const CORRECTABLE_SYMBOLS_PER_CODEWORD: usize = CODEWORD_PARITY_BYTES / 2;

/// How reads are judged (both write the same parity, so an image reads the same in both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EccMode {
    /// Count the wrong bytes per codeword against t = 6 (exact; no decoding).
    #[default]
    OutcomeModel,
    /// Run the Reed-Solomon decoder on every codeword a flip touched.
    Decoder,
}

impl EccMode {
    /// The mode named `text` (`model` or `decoder`).
    pub fn parse(text: &str) -> Option<EccMode> {
        match text {
            "model" => Some(EccMode::OutcomeModel),
            "decoder" => Some(EccMode::Decoder),
            _ => None,
        }
    }

    /// The name [`EccMode::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            EccMode::OutcomeModel => "model",
            EccMode::Decoder => "decoder",
        }
    }
}

/// The layout of one page's codewords inside its raw bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLayout {
    /// Data plus host spare bytes.
    pub message_bytes: usize,
    /// Codewords protecting the message.
    pub codeword_count: usize,
    /// Raw bytes of a page (data plus the whole spare area).
    pub raw_bytes: usize,
}

/// The outcome of decoding one page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeOutcome {
    /// Every codeword decoded; `symbols` errors were corrected in all.
    Corrected {
        /// Symbols corrected across the page.
        symbols: u32,
    },
    /// At least one codeword had more errors than the code corrects.
    Uncorrectable,
}

/// What the outcome model says about a read with known bit flips.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlipJudgement {
    /// Corrected (with the wrong bytes counted) or uncorrectable.
    pub outcome: DecodeOutcome,
    /// Bits that differ from what was programmed (flips of one bit twice cancel).
    pub wrong_bits: u32,
}

/// Encoder and decoder for one page layout.
pub struct PageCodec {
    layout: PageLayout,
    encoder: Encoder,
}

impl PageCodec {
    /// A codec for pages whose message is `message_bytes` long inside `raw_bytes`.
    pub fn new(message_bytes: usize, raw_bytes: usize) -> PageCodec {
        let codeword_count = message_bytes.div_ceil(CODEWORD_DATA_BYTES);
        assert!(
            message_bytes + codeword_count * CODEWORD_PARITY_BYTES <= raw_bytes,
            "the spare area must hold the parity"
        );
        PageCodec {
            layout: PageLayout {
                message_bytes,
                codeword_count,
                raw_bytes,
            },
            encoder: Encoder::new(),
        }
    }

    /// The page layout.
    pub fn layout(&self) -> PageLayout {
        self.layout
    }

    /// The message range of codeword `index`.
    fn message_range(&self, index: usize) -> std::ops::Range<usize> {
        let start = index * CODEWORD_DATA_BYTES;
        start..(start + CODEWORD_DATA_BYTES).min(self.layout.message_bytes)
    }

    /// The parity range of codeword `index`.
    fn parity_range(&self, index: usize) -> std::ops::Range<usize> {
        let start = self.layout.message_bytes + index * CODEWORD_PARITY_BYTES;
        start..start + CODEWORD_PARITY_BYTES
    }

    /// Encodes `message` (data then host spare) into a raw page; unused bytes stay 0xFF.
    pub fn encode(&self, message: &[u8], raw: &mut [u8]) {
        assert_eq!(message.len(), self.layout.message_bytes);
        assert_eq!(raw.len(), self.layout.raw_bytes);
        raw[..message.len()].copy_from_slice(message);
        self.encode_in_place(raw);
    }

    /// Encodes a raw page whose message bytes are already in place: fills the parity and
    /// sets every byte after it to 0xFF.
    pub fn encode_in_place(&self, raw: &mut [u8]) {
        assert_eq!(raw.len(), self.layout.raw_bytes);
        let (message, spare) = raw.split_at_mut(self.layout.message_bytes);
        spare.fill(0xFF);
        let full_codewords = self.layout.message_bytes / CODEWORD_DATA_BYTES;
        let lockstep_groups = full_codewords / LOCKSTEP_CODEWORDS;
        for group in 0..lockstep_groups {
            let first = group * LOCKSTEP_CODEWORDS;
            let messages: [&[u8]; LOCKSTEP_CODEWORDS] =
                std::array::from_fn(|lane| &message[self.message_range(first + lane)]);
            let parities = self.encoder.parity_of_several(messages);
            for (lane, parity) in parities.iter().enumerate() {
                let start = (first + lane) * CODEWORD_PARITY_BYTES;
                spare[start..start + CODEWORD_PARITY_BYTES].copy_from_slice(parity);
            }
        }
        for index in lockstep_groups * LOCKSTEP_CODEWORDS..self.layout.codeword_count {
            let parity = self.encoder.parity_of(&message[self.message_range(index)]);
            let start = index * CODEWORD_PARITY_BYTES;
            spare[start..start + CODEWORD_PARITY_BYTES].copy_from_slice(&parity);
        }
    }

    /// The codeword holding raw byte `byte_index`, or None for unused padding.
    pub fn codeword_of_byte(&self, byte_index: usize) -> Option<usize> {
        let layout = self.layout;
        if byte_index < layout.message_bytes {
            return Some(byte_index / CODEWORD_DATA_BYTES);
        }
        let parity_offset = byte_index - layout.message_bytes;
        (parity_offset < layout.codeword_count * CODEWORD_PARITY_BYTES)
            .then_some(parity_offset / CODEWORD_PARITY_BYTES)
    }

    /// The outcome model: judges a read whose only errors are `flips` (raw byte index and
    /// the bit mask flipped there; a byte may appear more than once). A codeword decodes
    /// when at most 6 of its bytes differ from what was programmed; padding bytes belong
    /// to no codeword and do not count.
    pub fn judge_flips(&self, flips: &[(usize, u8)]) -> FlipJudgement {
        let mut net: Vec<(usize, u8)> = flips.to_vec();
        net.sort_unstable_by_key(|&(byte, _)| byte);
        let mut merged: Vec<(usize, u8)> = Vec::with_capacity(net.len());
        for (byte, mask) in net {
            match merged.last_mut() {
                Some((last_byte, last_mask)) if *last_byte == byte => *last_mask ^= mask,
                _ => merged.push((byte, mask)),
            }
        }
        let mut wrong_bits = 0u32;
        let mut per_codeword: Vec<(usize, usize)> = Vec::new();
        for (byte, mask) in merged {
            if mask == 0 {
                continue;
            }
            let Some(codeword) = self.codeword_of_byte(byte) else {
                continue;
            };
            wrong_bits += mask.count_ones();
            match per_codeword
                .iter_mut()
                .find(|(index, _)| *index == codeword)
            {
                Some((_, count)) => *count += 1,
                None => per_codeword.push((codeword, 1)),
            }
        }
        let uncorrectable = per_codeword
            .iter()
            .any(|&(_, count)| count > CORRECTABLE_SYMBOLS_PER_CODEWORD);
        let outcome = if uncorrectable {
            DecodeOutcome::Uncorrectable
        } else {
            let symbols: usize = per_codeword.iter().map(|&(_, count)| count).sum();
            DecodeOutcome::Corrected {
                symbols: symbols as u32,
            }
        };
        FlipJudgement {
            outcome,
            wrong_bits,
        }
    }

    /// Decodes the codewords listed in `touched` (the others are known clean: their
    /// syndromes would be zero) and corrects `raw` in place.
    pub fn decode(&self, raw: &mut [u8], touched: &[usize]) -> DecodeOutcome {
        assert_eq!(raw.len(), self.layout.raw_bytes);
        let mut symbols = 0u32;
        let mut codeword = [0u8; CODEWORD_DATA_BYTES + CODEWORD_PARITY_BYTES];
        for &index in touched {
            let message_range = self.message_range(index);
            let message_length = message_range.len();
            let length = message_length + CODEWORD_PARITY_BYTES;
            let parity_range = self.parity_range(index);
            codeword[..message_length].copy_from_slice(&raw[message_range.clone()]);
            codeword[message_length..length].copy_from_slice(&raw[parity_range.clone()]);
            match reed_solomon::correct(&mut codeword[..length]) {
                Ok(fixed) => {
                    raw[message_range].copy_from_slice(&codeword[..message_length]);
                    raw[parity_range].copy_from_slice(&codeword[message_length..length]);
                    symbols += fixed as u32;
                }
                Err(reed_solomon::Uncorrectable) => return DecodeOutcome::Uncorrectable,
            }
        }
        DecodeOutcome::Corrected { symbols }
    }

    /// Decodes every codeword (for tests and checks of unknown pages).
    pub fn decode_all(&self, raw: &mut [u8]) -> DecodeOutcome {
        let every: Vec<usize> = (0..self.layout.codeword_count).collect();
        self.decode(raw, &every)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flashpipe_device::SplitMix64;

    fn encoded_page(seed: u64) -> (PageCodec, Vec<u8>, Vec<u8>) {
        let codec = PageCodec::new(4096 + 20, 4096 + 224);
        let mut generator = SplitMix64::new(seed);
        let message: Vec<u8> = (0..4116).map(|_| generator.next_u64() as u8).collect();
        let mut raw = vec![0u8; 4320];
        codec.encode(&message, &mut raw);
        (codec, message, raw)
    }

    fn corrupt_symbols(raw: &mut [u8], codec: &PageCodec, codeword: usize, count: usize) {
        let mut positions: Vec<usize> = (0..raw.len())
            .filter(|&byte| codec.codeword_of_byte(byte) == Some(codeword))
            .collect();
        let mut generator = SplitMix64::new(count as u64 + 77);
        for picked in 0..count {
            let chosen = picked + generator.below((positions.len() - picked) as u64) as usize;
            positions.swap(picked, chosen);
            raw[positions[picked]] ^= 1 + generator.below(255) as u8;
        }
    }

    fn check(codeword: usize, symbol_errors: usize, expected: DecodeOutcome) {
        let (codec, message, mut raw) = encoded_page(codeword as u64);
        corrupt_symbols(&mut raw, &codec, codeword, symbol_errors);
        let outcome = codec.decode(&mut raw, &[codeword]);
        assert_eq!(
            outcome, expected,
            "codeword {codeword}, {symbol_errors} errors"
        );
        if matches!(outcome, DecodeOutcome::Corrected { .. }) {
            assert_eq!(&raw[..message.len()], &message[..]);
        }
    }

    #[test]
    fn up_to_six_symbol_errors_are_corrected_seven_are_not() {
        for codeword in [0, 7, 16] {
            check(codeword, 0, DecodeOutcome::Corrected { symbols: 0 });
            check(codeword, 1, DecodeOutcome::Corrected { symbols: 1 });
            check(codeword, 6, DecodeOutcome::Corrected { symbols: 6 });
            check(codeword, 7, DecodeOutcome::Uncorrectable);
        }
    }

    #[test]
    fn encode_in_place_pads_with_ff_and_decodes_clean() {
        let codec = PageCodec::new(100, 200);
        let mut raw = vec![0u8; 200];
        raw[..100].fill(0x42);
        codec.encode_in_place(&mut raw);
        assert!(raw[112..].iter().all(|&byte| byte == 0xFF));
        assert_eq!(
            codec.decode_all(&mut raw),
            DecodeOutcome::Corrected { symbols: 0 }
        );
    }

    #[test]
    fn the_outcome_model_counts_net_wrong_bytes_per_codeword() {
        let (codec, _, _) = encoded_page(1);
        let six: Vec<(usize, u8)> = (0..6).map(|byte| (byte, 1)).collect();
        assert_eq!(
            codec.judge_flips(&six).outcome,
            DecodeOutcome::Corrected { symbols: 6 }
        );
        let mut seven = six.clone();
        seven.push((100, 0x80));
        assert_eq!(
            codec.judge_flips(&seven).outcome,
            DecodeOutcome::Uncorrectable
        );
        let mut cancelled = seven.clone();
        cancelled.push((100, 0x80));
        let judgement = codec.judge_flips(&cancelled);
        assert_eq!(judgement.outcome, DecodeOutcome::Corrected { symbols: 6 });
        assert_eq!(judgement.wrong_bits, 6);
    }

    #[test]
    fn layout_maps_bytes_to_codewords() {
        let (codec, _, _) = encoded_page(1);
        assert_eq!(codec.layout().codeword_count, 17);
        assert_eq!(codec.codeword_of_byte(0), Some(0));
        assert_eq!(codec.codeword_of_byte(243), Some(1));
        assert_eq!(codec.codeword_of_byte(4116), Some(0));
        assert_eq!(codec.codeword_of_byte(4116 + 12 * 17 - 1), Some(16));
        assert_eq!(
            codec.codeword_of_byte(4319),
            Some(16),
            "the page has no padding"
        );
        let padded = PageCodec::new(100, 200);
        assert_eq!(padded.codeword_of_byte(111), Some(0));
        assert_eq!(padded.codeword_of_byte(112), None);
    }
}
