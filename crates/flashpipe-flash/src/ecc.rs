//! Reed-Solomon RS(255,243) ECC over stored pages, as minFlash's controller uses it.
//!
//! A page's protected message is its data followed by the host's spare bytes. It is cut
//! into codewords of up to 243 bytes (the last one shortened); each gets 12 parity bytes,
//! stored after the message in the spare area. Twelve parity symbols correct up to 6
//! symbol (byte) errors per codeword; more are reported uncorrectable.
//!
//! The code itself comes from the `reed-solomon` crate (GF(2^8), Berlekamp-Massey,
//! Chien search, Forney), which decodes errors at unknown positions, not only erasures,
//! and checks its own output. It is small and unmaintained since 2018 but exact; the
//! maintained crates we could find (`reed-solomon-erasure`, `reed-solomon-simd`,
//! `reed-solomon-novelpoly`) correct erasures only, which is not what flash needs.

use reed_solomon::{Decoder, Encoder};

/// Message bytes per full codeword.
pub const CODEWORD_DATA_BYTES: usize = 243;
/// Parity bytes per codeword.
pub const CODEWORD_PARITY_BYTES: usize = 12;
/// Symbol errors one codeword can correct.
pub const CORRECTABLE_SYMBOLS_PER_CODEWORD: usize = CODEWORD_PARITY_BYTES / 2;

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

/// Encoder and decoder for one page layout.
pub struct PageCodec {
    layout: PageLayout,
    encoder: Encoder,
    decoder: Decoder,
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
            encoder: Encoder::new(CODEWORD_PARITY_BYTES),
            decoder: Decoder::new(CODEWORD_PARITY_BYTES),
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
        raw[message.len()..].fill(0xFF);
        for index in 0..self.layout.codeword_count {
            let encoded = self.encoder.encode(&message[self.message_range(index)]);
            raw[self.parity_range(index)].copy_from_slice(encoded.ecc());
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
            codeword[..message_length].copy_from_slice(&raw[message_range.clone()]);
            codeword[message_length..length].copy_from_slice(&raw[self.parity_range(index)]);
            match self.decoder.correct_err_count(&codeword[..length], None) {
                Ok((corrected, fixed)) => {
                    if fixed > CORRECTABLE_SYMBOLS_PER_CODEWORD {
                        return DecodeOutcome::Uncorrectable;
                    }
                    raw[message_range].copy_from_slice(corrected.data());
                    let parity_range = self.parity_range(index);
                    raw[parity_range].copy_from_slice(corrected.ecc());
                    symbols += fixed as u32;
                }
                Err(_) => return DecodeOutcome::Uncorrectable,
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
