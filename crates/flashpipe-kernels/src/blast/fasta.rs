//! FASTA read as a stream of chunks: records may straddle any chunk boundary (a header, a line,
//! a line ending split anywhere). A record is a `>` line (its identifier is the first word, as
//! BLAST's tabular output prints it) and the sequence lines after it, up to the next `>` line.
//! Letters are nucleotide IUPAC codes in either case (`U` read as `T`, `X` as `N`); spaces,
//! tabs and carriage returns inside sequence lines are skipped; anything else (a digit, a
//! punctuation mark, a NUL byte) is refused with its offset. Headers and sequences are bounded:
//! a longer one is an error that names the limit to raise, so no input can make the reader grow
//! without end.

use crate::blast::alphabet::CODE_OF_BYTE;
use crate::blast::alphabet::NOT_A_LETTER;

/// Longest header line kept (the identifier is its first word): 64 KiB.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// What is wrong with a FASTA input, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct FastaError {
    /// Offset of the offending byte in the input.
    pub offset_bytes: u64,
    /// What is wrong and what to do.
    pub reason: String,
}

/// One record: its identifier and its letters as blastna codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FastaRecord<'a> {
    /// The first word of the header (without the `>`).
    pub name: &'a str,
    /// The sequence, coded.
    pub codes: &'a [u8],
    /// Offset of the record's `>` in the input.
    pub offset_bytes: u64,
    /// Records read so far, this one included.
    pub records_read: u64,
    /// Letters read so far, this record's included.
    pub letters_read: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing read yet but blank lines.
    Start,
    /// Inside a header line.
    Header,
    /// At the start of a line inside a record's sequence.
    SequenceLineStart,
    /// Inside a sequence line.
    Sequence,
}

/// A streaming FASTA reader.
#[derive(Debug)]
pub struct FastaReader {
    state: State,
    header: Vec<u8>,
    codes: Vec<u8>,
    record_offset_bytes: u64,
    max_sequence_letters: usize,
    next_offset_bytes: u64,
    record_count: u64,
    letter_count: u64,
}

impl FastaReader {
    /// A reader refusing sequences longer than `max_sequence_letters`.
    pub fn new(max_sequence_letters: usize) -> Self {
        assert!(max_sequence_letters > 0, "a positive sequence limit");
        Self {
            state: State::Start,
            header: Vec::new(),
            codes: Vec::new(),
            record_offset_bytes: 0,
            max_sequence_letters,
            next_offset_bytes: 0,
            record_count: 0,
            letter_count: 0,
        }
    }

    /// Records completed so far.
    pub fn record_count(&self) -> u64 {
        self.record_count
    }

    /// Letters in the records completed so far.
    pub fn letter_count(&self) -> u64 {
        self.letter_count
    }

    /// Reads the next bytes of the input (which start at `offset_bytes`, right after the
    /// previous ones), calling `on_record` for every record they complete.
    pub fn feed<E>(
        &mut self,
        offset_bytes: u64,
        data: &[u8],
        on_record: &mut dyn FnMut(&FastaRecord<'_>) -> Result<(), E>,
    ) -> Result<(), FeedError<E>> {
        assert_eq!(offset_bytes, self.next_offset_bytes, "input read in order");
        self.next_offset_bytes += data.len() as u64;
        let mut index = 0;
        while index < data.len() {
            let here = offset_bytes + index as u64;
            match self.state {
                State::Start => {
                    let byte = data[index];
                    index += 1;
                    match byte {
                        b'>' => self.begin_record(here),
                        b'\n' | b'\r' | b' ' | b'\t' => {}
                        _ => {
                            return Err(FeedError::Format(FastaError {
                                offset_bytes: here,
                                reason: "not FASTA: the first record must start with '>'".into(),
                            }))
                        }
                    }
                }
                State::Header => {
                    let rest = &data[index..];
                    let line_end = memchr::memchr(b'\n', rest);
                    let piece = &rest[..line_end.unwrap_or(rest.len())];
                    if self.header.len() + piece.len() > MAX_HEADER_BYTES {
                        return Err(FeedError::Format(FastaError {
                            offset_bytes: self.record_offset_bytes,
                            reason: format!(
                                "header line longer than {MAX_HEADER_BYTES} bytes (not FASTA?)"
                            ),
                        }));
                    }
                    self.header.extend_from_slice(piece);
                    index += piece.len();
                    if line_end.is_some() {
                        index += 1;
                        self.state = State::SequenceLineStart;
                    }
                }
                State::SequenceLineStart => {
                    if data[index] == b'>' {
                        self.end_record(on_record)?;
                        self.begin_record(here);
                        index += 1;
                    } else {
                        self.state = State::Sequence;
                    }
                }
                State::Sequence => {
                    let rest = &data[index..];
                    let line_end = memchr::memchr(b'\n', rest);
                    let piece = &rest[..line_end.unwrap_or(rest.len())];
                    self.append_letters(here, piece)?;
                    index += piece.len();
                    if line_end.is_some() {
                        index += 1;
                        self.state = State::SequenceLineStart;
                    }
                }
            }
        }
        Ok(())
    }

    /// Ends the input: completes the last record (an input with none is an error).
    pub fn finish<E>(
        &mut self,
        on_record: &mut dyn FnMut(&FastaRecord<'_>) -> Result<(), E>,
    ) -> Result<(), FeedError<E>> {
        if self.state == State::Start {
            return Err(FeedError::Format(FastaError {
                offset_bytes: self.next_offset_bytes,
                reason: "no FASTA record (empty input)".into(),
            }));
        }
        self.end_record(on_record)?;
        self.state = State::Start;
        Ok(())
    }

    fn begin_record(&mut self, offset_bytes: u64) {
        self.header.clear();
        self.codes.clear();
        self.record_offset_bytes = offset_bytes;
        self.state = State::Header;
    }

    fn append_letters<E>(&mut self, offset_bytes: u64, piece: &[u8]) -> Result<(), FeedError<E>> {
        if self.codes.len() + piece.len() > self.max_sequence_letters
            && self.codes.len() + count_letters(piece) > self.max_sequence_letters
        {
            return Err(FeedError::Format(FastaError {
                offset_bytes: self.record_offset_bytes,
                reason: format!(
                    "sequence longer than {} letters (raise max_sequence)",
                    self.max_sequence_letters
                ),
            }));
        }
        for (position, &byte) in piece.iter().enumerate() {
            let code = CODE_OF_BYTE[byte as usize];
            if code != NOT_A_LETTER {
                self.codes.push(code);
            } else if !matches!(byte, b'\r' | b' ' | b'\t') {
                return Err(FeedError::Format(FastaError {
                    offset_bytes: offset_bytes + position as u64,
                    reason: format!(
                        "not a nucleotide letter (byte 0x{byte:02x}) in a sequence line; \
                         FASTA of IUPAC nucleotide codes expected"
                    ),
                }));
            }
        }
        Ok(())
    }

    fn end_record<E>(
        &mut self,
        on_record: &mut dyn FnMut(&FastaRecord<'_>) -> Result<(), E>,
    ) -> Result<(), FeedError<E>> {
        let header = trim_line_end(&self.header);
        let name_bytes = header
            .split(|byte| byte.is_ascii_whitespace())
            .find(|word| !word.is_empty())
            .unwrap_or(&[]);
        let name = std::str::from_utf8(name_bytes).map_err(|_| {
            FeedError::Format(FastaError {
                offset_bytes: self.record_offset_bytes,
                reason: "the record's identifier is not UTF-8 text".into(),
            })
        })?;
        if name.is_empty() {
            return Err(FeedError::Format(FastaError {
                offset_bytes: self.record_offset_bytes,
                reason: "a record without an identifier after '>'".into(),
            }));
        }
        if self.codes.is_empty() {
            return Err(FeedError::Format(FastaError {
                offset_bytes: self.record_offset_bytes,
                reason: format!("record {name} has no sequence"),
            }));
        }
        self.record_count += 1;
        self.letter_count += self.codes.len() as u64;
        let record = FastaRecord {
            name,
            codes: &self.codes,
            offset_bytes: self.record_offset_bytes,
            records_read: self.record_count,
            letters_read: self.letter_count,
        };
        on_record(&record).map_err(FeedError::Record)
    }
}

fn count_letters(piece: &[u8]) -> usize {
    piece
        .iter()
        .filter(|&&byte| CODE_OF_BYTE[byte as usize] != NOT_A_LETTER)
        .count()
}

fn trim_line_end(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// A failure while feeding: the input is not FASTA, or the record callback failed.
#[derive(Debug)]
pub enum FeedError<E> {
    /// The input is not FASTA of nucleotides.
    Format(FastaError),
    /// The callback's own error.
    Record(E),
}

/// Reads a whole FASTA text (the query file), calling `on_record` for each record.
pub fn read_all(
    bytes: &[u8],
    max_sequence_letters: usize,
    on_record: &mut dyn FnMut(&FastaRecord<'_>),
) -> Result<(), FastaError> {
    let mut reader = FastaReader::new(max_sequence_letters);
    let mut callback = |record: &FastaRecord<'_>| -> Result<(), ()> {
        on_record(record);
        Ok(())
    };
    let unwrap = |error: FeedError<()>| match error {
        FeedError::Format(error) => error,
        FeedError::Record(()) => unreachable!("the callback never fails"),
    };
    reader.feed(0, bytes, &mut callback).map_err(unwrap)?;
    reader.finish(&mut callback).map_err(unwrap)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(text: &[u8], chunk_bytes: usize) -> Result<Vec<(String, Vec<u8>, u64)>, FastaError> {
        let mut reader = FastaReader::new(1000);
        let mut seen = Vec::new();
        let mut callback = |record: &FastaRecord<'_>| -> Result<(), ()> {
            seen.push((
                record.name.to_string(),
                record.codes.to_vec(),
                record.offset_bytes,
            ));
            Ok(())
        };
        let unwrap = |error: FeedError<()>| match error {
            FeedError::Format(error) => error,
            FeedError::Record(()) => unreachable!(),
        };
        for (index, piece) in text.chunks(chunk_bytes.max(1)).enumerate() {
            reader
                .feed((index * chunk_bytes) as u64, piece, &mut callback)
                .map_err(unwrap)?;
        }
        reader.finish(&mut callback).map_err(unwrap)?;
        Ok(seen)
    }

    #[test]
    fn records_straddling_every_chunk_boundary_read_the_same() {
        let text = b"\n>one first record\r\nACGTN\r\nacgu\n>two\nRYKM\nWSBDHVX\n\n>three x\nA";
        let whole = records(text, text.len()).expect("FASTA");
        assert_eq!(whole.len(), 3);
        assert_eq!(whole[0].0, "one");
        assert_eq!(whole[0].1, vec![0, 1, 2, 3, 14, 0, 1, 2, 3]);
        assert_eq!(whole[0].2, 1);
        assert_eq!(whole[1].1.len(), 11);
        assert_eq!(
            whole[2],
            ("three".to_string(), vec![0], text.len() as u64 - 10)
        );
        for chunk_bytes in 1..=text.len() {
            assert_eq!(
                records(text, chunk_bytes).expect("FASTA"),
                whole,
                "{chunk_bytes}"
            );
        }
    }

    #[test]
    fn hostile_inputs_are_refused_with_offsets() {
        let cases: &[(&[u8], &str, u64)] = &[
            (b"", "empty input", 0),
            (b"\n\n", "empty input", 2),
            (b"ACGT\n", "must start with '>'", 0),
            (b"\x00\x01binary", "must start with '>'", 0),
            (b">a\nAC1T\n", "byte 0x31", 5),
            (b">a\nAC\x00T\n", "byte 0x00", 5),
            (b">a\n>b\nAC\n", "no sequence", 0),
            (b">\nACGT\n", "without an identifier", 0),
            (b">a\nACGT\n>b\n", "record b has no sequence", 8),
        ];
        for &(text, expected, offset) in cases {
            for chunk_bytes in [1, 3, 1000] {
                let error = records(text, chunk_bytes).expect_err("refused");
                assert!(
                    error.reason.contains(expected),
                    "{}: {}",
                    expected,
                    error.reason
                );
                assert_eq!(error.offset_bytes, offset, "{expected}");
            }
        }
        let long = [b">a\n".as_slice(), &[b'A'; 1001]].concat();
        let error = records(&long, 7).expect_err("too long");
        assert!(
            error.reason.contains("raise max_sequence"),
            "{}",
            error.reason
        );
        let header = [b">".as_slice(), &vec![b'h'; MAX_HEADER_BYTES + 1]].concat();
        let error = records(&header, 4096).expect_err("header too long");
        assert!(
            error.reason.contains("header line longer"),
            "{}",
            error.reason
        );
    }
}
