//! The ECC outcome model (count the wrong bytes of each codeword against t = 6) and the
//! real RS(255,243) decoder give the same outcome: seeded random error patterns with at
//! most and more than 6 symbol errors per codeword, on a minflash page, and whole arrays
//! read in both modes. A decoder's "corrected" counts only when it gave back what was
//! programmed: when more than 6 errors make it land on another codeword (a
//! miscorrection), it lost the data just as the model says.
//!
//! Seeded: `FLASHPIPE_SEEDS=N` runs N patterns per case (default 300); a failure names its
//! seed.

mod common;

use common::{acks_of, config_of};
use flashpipe_device::SplitMix64;
use flashpipe_flash::ecc::{DecodeOutcome, EccMode, PageCodec, CODEWORD_PARITY_BYTES};
use flashpipe_flash::{
    AckStatus, FlashAddress, FlashArray, FlashCommand, FlashConfig, FlashOptions, StorageMode,
};

fn pattern_count() -> u64 {
    std::env::var("FLASHPIPE_SEEDS")
        .ok()
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(300)
}

/// The minflash page: 8192 data + 40 host spare bytes, 448 spare bytes in all.
fn minflash_codec() -> PageCodec {
    let config = FlashConfig::preset("minflash").unwrap();
    let message = (config.geometry.page_data_bytes + config.host_spare_bytes()) as usize;
    PageCodec::new(message, config.raw_page_bytes())
}

fn random_page(codec: &PageCodec, generator: &mut SplitMix64) -> Vec<u8> {
    let layout = codec.layout();
    let message: Vec<u8> = (0..layout.message_bytes)
        .map(|_| generator.next_u64() as u8)
        .collect();
    let mut raw = vec![0u8; layout.raw_bytes];
    codec.encode(&message, &mut raw);
    raw
}

/// `count` distinct bytes of codeword `codeword` (message or parity), each with a
/// nonzero random mask.
fn symbol_errors(
    codec: &PageCodec,
    codeword: usize,
    count: usize,
    generator: &mut SplitMix64,
) -> Vec<(usize, u8)> {
    let mut bytes: Vec<usize> = (0..codec.layout().raw_bytes)
        .filter(|&byte| codec.codeword_of_byte(byte) == Some(codeword))
        .collect();
    let count = count.min(bytes.len());
    for picked in 0..count {
        let chosen = picked + generator.below((bytes.len() - picked) as u64) as usize;
        bytes.swap(picked, chosen);
    }
    bytes[..count]
        .iter()
        .map(|&byte| (byte, 1 + generator.below(255) as u8))
        .collect()
}

/// The decoder's verdict on `raw` with `flips` applied: corrected (and how many symbols)
/// only when it gave back the programmed message.
fn decoder_outcome(codec: &PageCodec, raw: &[u8], flips: &[(usize, u8)]) -> DecodeOutcome {
    let mut received = raw.to_vec();
    for &(byte, mask) in flips {
        received[byte] ^= mask;
    }
    let message_bytes = codec.layout().message_bytes;
    match codec.decode_all(&mut received) {
        DecodeOutcome::Corrected { symbols }
            if received[..message_bytes] == raw[..message_bytes] =>
        {
            DecodeOutcome::Corrected { symbols }
        }
        _ => DecodeOutcome::Uncorrectable,
    }
}

fn check_pattern(codec: &PageCodec, raw: &[u8], flips: &[(usize, u8)], seed: u64) {
    let model = codec.judge_flips(flips).outcome;
    let decoder = decoder_outcome(codec, raw, flips);
    assert_eq!(model, decoder, "seed {seed}: flips {flips:?}");
}

#[test]
fn symbol_errors_up_to_six_and_beyond_agree_per_codeword() {
    let codec = minflash_codec();
    let codewords = codec.layout().codeword_count as u64;
    let mut miscorrections = 0u32;
    for seed in 0..pattern_count() {
        let mut generator = SplitMix64::new(seed);
        let raw = random_page(&codec, &mut generator);
        let codeword = generator.below(codewords) as usize;
        let count = generator.below(2 * CODEWORD_PARITY_BYTES as u64 + 1) as usize;
        let flips = symbol_errors(&codec, codeword, count, &mut generator);
        check_pattern(&codec, &raw, &flips, seed);
        let expected_correctable = count <= 6;
        assert_eq!(
            matches!(
                codec.judge_flips(&flips).outcome,
                DecodeOutcome::Corrected { .. }
            ),
            expected_correctable,
            "seed {seed}: {count} symbol errors"
        );
        let mut received = raw.clone();
        for &(byte, mask) in &flips {
            received[byte] ^= mask;
        }
        if count > 6 && codec.decode_all(&mut received) != DecodeOutcome::Uncorrectable {
            miscorrections += 1;
        }
    }
    assert!(
        u64::from(miscorrections) * 20 <= pattern_count(),
        "{miscorrections} miscorrections: more than a bounded-distance decoder makes"
    );
}

#[test]
fn random_bit_flips_over_several_codewords_agree() {
    let codec = minflash_codec();
    let raw_bits = (codec.layout().raw_bytes * 8) as u64;
    for seed in 0..pattern_count() {
        let mut generator = SplitMix64::new(seed ^ 0xEC0D);
        let raw = random_page(&codec, &mut generator);
        // Up to 400 flips over 34 codewords: from clean pages to many uncorrectable ones,
        // with bits flipped twice (cancelled) now and then.
        let flip_count = generator.below(400);
        let flips: Vec<(usize, u8)> = (0..flip_count)
            .map(|_| {
                let bit = generator.below(raw_bits);
                ((bit / 8) as usize, 1u8 << (bit % 8))
            })
            .collect();
        check_pattern(&codec, &raw, &flips, seed);
    }
}

fn noisy_config() -> FlashConfig {
    let mut config = config_of("minflash", [2, 1, 4, 8]);
    // About 100 flips per 8 KiB page: most pages correctable, some not.
    config.reliability.base_rber = 1.45e-3;
    config
}

fn run_one(array: &mut FlashArray, command: FlashCommand) -> flashpipe_flash::Ack {
    acks_of(array, 1, command).pop().unwrap()
}

/// One read's status and data.
type ReadOutcome = (AckStatus, Vec<u8>);

/// Every page programmed then read three times, in one mode; returns each read's outcome
/// and the data programmed for it.
fn reads_in_mode(mode: EccMode, seed: u64) -> (Vec<ReadOutcome>, Vec<Vec<u8>>) {
    let config = noisy_config();
    let mut array = FlashArray::new(
        config.clone(),
        FlashOptions {
            seed,
            storage: StorageMode::Memory,
            host_count: 1,
            host_queue_depth: 8,
        },
    )
    .unwrap();
    array.set_ecc_mode(mode);
    let mut generator = SplitMix64::new(seed);
    let mut programmed = Vec::new();
    let mut reads = Vec::new();
    let page_bytes = config.geometry.page_data_bytes as usize;
    for bus in 0..2 {
        for page in 0..8 {
            let address = FlashAddress {
                device: 0,
                bus,
                chip: 0,
                block: 1,
                page,
            };
            let data: Vec<u8> = (0..page_bytes)
                .map(|_| generator.next_u64() as u8)
                .collect();
            let ack = run_one(
                &mut array,
                FlashCommand::WritePage {
                    address,
                    data: data.clone(),
                    spare: vec![0x5A; 8],
                },
            );
            assert_eq!(ack.status, AckStatus::CLEAN);
            for _ in 0..3 {
                let ack = run_one(&mut array, FlashCommand::ReadPage { address });
                reads.push((ack.status, ack.data.unwrap()));
                programmed.push(data.clone());
            }
        }
    }
    (reads, programmed)
}

#[test]
fn arrays_read_the_same_in_both_modes() {
    let mut uncorrectable = 0;
    let mut corrected = 0;
    for seed in 0..(pattern_count() / 100).max(2) {
        let (model_reads, programmed) = reads_in_mode(EccMode::OutcomeModel, seed);
        let (decoder_reads, _) = reads_in_mode(EccMode::Decoder, seed);
        for ((model, decoder), data) in model_reads.iter().zip(&decoder_reads).zip(&programmed) {
            let decoder_intact = matches!(decoder.0, AckStatus::Ok { .. }) && decoder.1 == *data;
            match model.0 {
                AckStatus::Ok { .. } => {
                    corrected += 1;
                    assert_eq!(model.0, decoder.0, "seed {seed}: statuses differ");
                    assert_eq!(model.1, *data, "seed {seed}: the model returned other data");
                    assert!(decoder_intact, "seed {seed}: the decoder lost the data");
                }
                _ => {
                    uncorrectable += 1;
                    assert_eq!(model.0, AckStatus::Uncorrectable);
                    assert!(!decoder_intact, "seed {seed}: the decoder corrected it");
                }
            }
        }
    }
    assert!(
        corrected > 0 && uncorrectable > 0,
        "{corrected} / {uncorrectable}"
    );
}
