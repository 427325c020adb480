//! The workload patterns every benchmark and experiment names its work with, defined once:
//! [`Pattern`], which requests a workload issues (sequential or random, reads or writes),
//! and [`DataPattern`], which bytes a file holds (deterministic, so any window read back
//! can be checked), with [`DataPatternReader`] to stream it into a store.

use serde::Serialize;

/// Bytes in a mebibyte: the period of [`DataPattern`].
const MIB: u64 = 1 << 20;

/// The access pattern of a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Sequential reads, wrapping at the end of the device.
    #[value(name = "seq-read")]
    SequentialRead,
    /// Sequential writes, wrapping at the end of the device.
    #[value(name = "seq-write")]
    SequentialWrite,
    /// Uniformly random aligned reads.
    #[value(name = "rand-read")]
    RandomRead,
    /// Uniformly random aligned writes.
    #[value(name = "rand-write")]
    RandomWrite,
}

impl Pattern {
    /// The short name used in tables.
    pub fn short_name(self) -> &'static str {
        match self {
            Pattern::SequentialRead => "seq-read",
            Pattern::SequentialWrite => "seq-write",
            Pattern::RandomRead => "rand-read",
            Pattern::RandomWrite => "rand-write",
        }
    }

    /// fio's `rw=` value.
    pub fn fio_rw(self) -> &'static str {
        match self {
            Pattern::SequentialRead => "read",
            Pattern::SequentialWrite => "write",
            Pattern::RandomRead => "randread",
            Pattern::RandomWrite => "randwrite",
        }
    }

    /// True for reads.
    pub fn is_read(self) -> bool {
        matches!(self, Pattern::SequentialRead | Pattern::RandomRead)
    }

    /// Whether the workload walks the device in order.
    pub fn is_sequential(self) -> bool {
        matches!(self, Pattern::SequentialRead | Pattern::SequentialWrite)
    }
}

/// The data every part writes: a fixed pseudo-random block of 1 MiB whose first eight
/// bytes in each MiB of a file are replaced by a stamp of that MiB's offset, so reads
/// anywhere can be checked cheaply.
pub struct DataPattern {
    block: Vec<u8>,
}

impl Default for DataPattern {
    fn default() -> DataPattern {
        DataPattern::new()
    }
}

impl DataPattern {
    /// The pattern (the same bytes every run).
    pub fn new() -> DataPattern {
        DataPattern::with_seed(0x00f1_a5b0_b1be_ef00)
    }

    /// The pattern drawn from `seed`: the same seed, the same bytes.
    pub fn with_seed(seed: u64) -> DataPattern {
        let mut generator = flashpipe_base::SplitMix64::new(seed);
        let block = (0..MIB / 8)
            .flat_map(|_| generator.next_u64().to_le_bytes())
            .collect();
        DataPattern { block }
    }

    /// The stamp of the MiB at `offset_bytes` (a multiple of 1 MiB).
    pub fn stamp(offset_bytes: u64) -> [u8; 8] {
        (offset_bytes ^ 0x5a5a_0000_0000_0000).to_le_bytes()
    }

    /// Fills `buffer` with the file's bytes from `offset_bytes`.
    pub fn fill(&self, offset_bytes: u64, buffer: &mut [u8]) {
        let mut position = 0;
        while position < buffer.len() {
            let offset = offset_bytes + position as u64;
            let within = (offset % MIB) as usize;
            let length = (MIB as usize - within).min(buffer.len() - position);
            buffer[position..position + length]
                .copy_from_slice(&self.block[within..within + length]);
            let mib_start = offset - within as u64;
            for stamp_index in within..8.min(within + length) {
                buffer[position + stamp_index - within] = Self::stamp(mib_start)[stamp_index];
            }
            position += length;
        }
    }

    /// Whether `bytes` read at `offset_bytes` are the pattern's, every byte compared.
    pub fn matches(&self, offset_bytes: u64, bytes: &[u8]) -> bool {
        let mut expected = vec![0u8; bytes.len()];
        self.fill(offset_bytes, &mut expected);
        expected == bytes
    }

    /// Checks `bytes` read at `offset_bytes` against the pattern (a sample of at most 64
    /// bytes at the start of the read and the stamp of each MiB it covers).
    pub fn check(&self, offset_bytes: u64, bytes: &[u8]) -> Result<(), DataMismatch> {
        let sample_length = bytes.len().min(64);
        let mut expected = vec![0u8; sample_length];
        self.fill(offset_bytes, &mut expected);
        let mut matches = bytes[..sample_length] == expected[..];
        let first_whole_mib = offset_bytes.div_ceil(MIB) * MIB;
        let end = offset_bytes + bytes.len() as u64;
        let mut mib_start = first_whole_mib;
        while matches && mib_start + 8 <= end {
            let at = (mib_start - offset_bytes) as usize;
            matches = bytes[at..at + 8] == Self::stamp(mib_start);
            mib_start += MIB;
        }
        match matches {
            true => Ok(()),
            false => Err(DataMismatch {
                length_bytes: bytes.len(),
                offset_bytes,
            }),
        }
    }
}

/// A `Read` over the first `size_bytes` bytes of the pattern.
pub struct DataPatternReader<'a> {
    pattern: &'a DataPattern,
    position_bytes: u64,
    size_bytes: u64,
}

impl<'a> DataPatternReader<'a> {
    /// Yields `size_bytes` bytes of `pattern`.
    pub fn new(pattern: &'a DataPattern, size_bytes: u64) -> DataPatternReader<'a> {
        DataPatternReader {
            pattern,
            position_bytes: 0,
            size_bytes,
        }
    }
}

impl std::io::Read for DataPatternReader<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let left = self.size_bytes - self.position_bytes;
        let length = (buffer.len() as u64).min(left) as usize;
        self.pattern
            .fill(self.position_bytes, &mut buffer[..length]);
        self.position_bytes += length as u64;
        Ok(length)
    }
}

/// Bytes read back differ from the [`DataPattern`] written there.
#[derive(Debug, thiserror::Error)]
#[error("{length_bytes} bytes read at offset {offset_bytes} differ from what was written")]
pub struct DataMismatch {
    /// How many bytes were read.
    pub length_bytes: usize,
    /// Where in the file they were read.
    pub offset_bytes: u64,
}
