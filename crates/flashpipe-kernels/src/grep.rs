//! Line-based search (grep): a literal (`memchr::memmem`) or a regular expression
//! (`regex::bytes`, multi-line mode so `^`/`$` mean line start/end).
//!
//! Parallel over chunks: each chunk searches the complete lines inside it in one pass over the
//! buffer, and hands the partial lines at its edges (at most `max_line_bytes` each) to the in-order
//! reducer, which joins them with the neighbouring chunk's edge into the line that straddles the
//! boundary and tests it. So a match spanning a chunk boundary is found, and line numbers are exact.

use std::sync::Arc;

use memchr::memmem;
use regex::bytes::{Regex, RegexBuilder};

use crate::api::{
    Chunk, ChunkMapper, ChunkPart, FileInfo, FileJob, Kernel, LineMatch, OutputSink, PartReducer,
    Summary,
};
use crate::error::{KernelError, KernelErrorKind, OptionsError};
use crate::options::{
    KernelOptions, OptionSpec, MAX_COMPILED_PATTERN_BYTES, MAX_LINE_BYTES_LIMIT, MAX_MATCHES_LIMIT,
    MAX_PATTERN_BYTES,
};

/// Options of grep.
pub const GREP_OPTIONS: &[OptionSpec] = &[
    OptionSpec::required(
        "pattern",
        "what to search for (a regular expression unless literal=true)",
    ),
    OptionSpec::optional("literal", "false", "true: pattern is a fixed string"),
    OptionSpec::optional(
        "ignore_case",
        "false",
        "true: case-insensitive (regular expressions only)",
    ),
    OptionSpec::optional(
        "max_line_bytes",
        "1M",
        "longest line carried across a chunk boundary",
    ),
    OptionSpec::optional(
        "max_matches",
        "1000",
        "matching lines kept in the summary (all are counted)",
    ),
];

/// Longest line text kept in a [`LineMatch`].
const KEPT_LINE_BYTES: usize = 200;

/// How lines are tested.
#[derive(Debug, Clone)]
pub enum LineMatcher {
    /// A fixed string.
    Literal(Box<memmem::Finder<'static>>),
    /// A regular expression.
    Pattern(Regex),
}

impl LineMatcher {
    /// Where the first match at or after `from` starts and ends in `haystack`.
    fn find_from(&self, haystack: &[u8], from: usize) -> Option<(usize, usize)> {
        match self {
            LineMatcher::Literal(finder) => finder
                .find(&haystack[from..])
                .map(|start| (from + start, from + start + finder.needle().len())),
            LineMatcher::Pattern(regex) => regex
                .find_at(haystack, from)
                .map(|found| (found.start(), found.end())),
        }
    }

    /// Whether one line (without its newline) matches on its own.
    pub fn line_matches(&self, line: &[u8]) -> bool {
        match self {
            LineMatcher::Literal(finder) => finder.find(line).is_some(),
            LineMatcher::Pattern(regex) => regex.is_match(line),
        }
    }

    /// The matching lines among the complete lines of `lines` (which ends just after a newline):
    /// (index of the line within `lines`, offset of its first byte).
    fn matching_lines(&self, lines: &[u8]) -> Vec<(u64, usize)> {
        let mut found = Vec::new();
        let mut search_from = 0;
        let mut counted_up_to = 0;
        let mut line_index = 0u64;
        while search_from < lines.len() {
            let Some((match_start, match_end)) = self.find_from(lines, search_from) else {
                break;
            };
            if match_start >= lines.len() {
                break;
            }
            let line_start =
                memchr::memrchr(b'\n', &lines[..match_start]).map_or(0, |newline| newline + 1);
            let line_end = memchr::memchr(b'\n', &lines[match_start..])
                .map_or(lines.len(), |newline| match_start + newline);
            let line_start = line_start.max(search_from);
            line_index +=
                memchr::memchr_iter(b'\n', &lines[counted_up_to..line_start]).count() as u64;
            counted_up_to = line_start;
            let within_line = match_end <= line_end;
            if within_line || self.line_matches(&lines[line_start..line_end]) {
                found.push((line_index, line_start));
            }
            search_from = line_end + 1;
        }
        found
    }
}

/// Grep over each file.
pub struct GrepKernel {
    matcher: LineMatcher,
    max_line_bytes: usize,
    max_matches: usize,
}

impl GrepKernel {
    /// A kernel with this matcher and limits.
    pub fn new(matcher: LineMatcher, max_line_bytes: usize, max_matches: usize) -> Self {
        Self {
            matcher,
            max_line_bytes,
            max_matches,
        }
    }

    /// Builds from options.
    pub fn from_options(options: &KernelOptions) -> Result<Arc<dyn Kernel>, OptionsError> {
        let pattern = options.text("pattern")?;
        if pattern.is_empty() || pattern.len() > MAX_PATTERN_BYTES {
            return Err(OptionsError::BadValue {
                key: "pattern".into(),
                value: pattern.chars().take(64).collect(),
                reason: format!(
                    "{} bytes: must be 1 to {MAX_PATTERN_BYTES} bytes",
                    pattern.len()
                ),
            });
        }
        let ignore_case = options.boolean("ignore_case")?;
        let matcher = if options.boolean("literal")? {
            if ignore_case {
                return Err(OptionsError::BadValue {
                    key: "ignore_case".into(),
                    value: "true".into(),
                    reason: "only with regular expressions (use literal=false and (?i))".into(),
                });
            }
            LineMatcher::Literal(Box::new(
                memmem::Finder::new(pattern.as_bytes()).into_owned(),
            ))
        } else {
            let regex = RegexBuilder::new(pattern)
                .multi_line(true)
                .case_insensitive(ignore_case)
                .size_limit(MAX_COMPILED_PATTERN_BYTES)
                .build()
                .map_err(|error| OptionsError::BadValue {
                    key: "pattern".into(),
                    value: pattern.into(),
                    reason: error.to_string(),
                })?;
            LineMatcher::Pattern(regex)
        };
        let max_line_bytes = options.integer("max_line_bytes", 1, MAX_LINE_BYTES_LIMIT)? as usize;
        let max_matches = options.integer("max_matches", 0, MAX_MATCHES_LIMIT)? as usize;
        Ok(Arc::new(Arc::new(Self::new(
            matcher,
            max_line_bytes,
            max_matches,
        ))))
    }
}

/// The result of searching one chunk.
struct GrepPartial {
    /// Bytes before the first newline, including it (the whole chunk when it has no newline).
    head: Vec<u8>,
    /// Whether the chunk has a newline (otherwise `head` is all of it and the line goes on).
    has_newline: bool,
    /// Matches among the complete lines after the head: (line index after the head, file offset, text).
    interior_matches: Vec<(u64, u64, String)>,
    /// Complete lines after the head.
    interior_line_count: u64,
    /// Bytes after the last newline.
    tail: Vec<u8>,
}

fn kept_text(line: &[u8]) -> String {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    String::from_utf8_lossy(&line[..line.len().min(KEPT_LINE_BYTES)]).into_owned()
}

struct GrepMapper {
    kernel: Arc<GrepKernel>,
}

impl ChunkMapper for GrepMapper {
    fn map_chunk(&self, chunk: &Chunk<'_>) -> Result<ChunkPart, KernelError> {
        let data = chunk.data;
        let limit_bytes = self.kernel.max_line_bytes;
        let too_long = |offset_bytes| {
            chunk.error_at(offset_bytes, KernelErrorKind::LineTooLong { limit_bytes })
        };
        let (Some(first_newline), Some(last_newline)) =
            (memchr::memchr(b'\n', data), memchr::memrchr(b'\n', data))
        else {
            if data.len() > limit_bytes {
                return Err(too_long(chunk.offset_bytes));
            }
            let partial = GrepPartial {
                head: data.to_vec(),
                has_newline: false,
                interior_matches: Vec::new(),
                interior_line_count: 0,
                tail: Vec::new(),
            };
            return Ok(ChunkPart::new(chunk, partial));
        };
        if first_newline > limit_bytes {
            return Err(too_long(chunk.offset_bytes));
        }
        if data.len() - last_newline - 1 > limit_bytes {
            return Err(too_long(chunk.offset_bytes + last_newline as u64 + 1));
        }
        let interior = &data[first_newline + 1..=last_newline];
        let interior_offset_bytes = chunk.offset_bytes + first_newline as u64 + 1;
        let interior_matches = self
            .kernel
            .matcher
            .matching_lines(interior)
            .into_iter()
            .map(|(line_index, line_start)| {
                let line_length = memchr::memchr(b'\n', &interior[line_start..])
                    .expect("interior ends with a newline");
                let text = kept_text(&interior[line_start..line_start + line_length]);
                (line_index, interior_offset_bytes + line_start as u64, text)
            })
            .collect();
        let partial = GrepPartial {
            head: data[..=first_newline].to_vec(),
            has_newline: true,
            interior_matches,
            interior_line_count: memchr::memchr_iter(b'\n', interior).count() as u64,
            tail: data[last_newline + 1..].to_vec(),
        };
        Ok(ChunkPart::new(chunk, partial))
    }
}

struct GrepReducer {
    kernel: Arc<GrepKernel>,
    file: FileInfo,
    carry: Vec<u8>,
    carry_offset_bytes: u64,
    completed_line_count: u64,
    matching_line_count: u64,
    matches: Vec<LineMatch>,
}

impl GrepReducer {
    fn record(&mut self, line_number: u64, line_offset_bytes: u64, line: String) {
        self.matching_line_count += 1;
        if self.matches.len() < self.kernel.max_matches {
            self.matches.push(LineMatch {
                line_number,
                line_offset_bytes,
                line,
            });
        }
    }

    fn test_carried_line(&mut self) {
        let line = std::mem::take(&mut self.carry);
        if self.kernel.matcher.line_matches(&line) {
            self.record(
                self.completed_line_count + 1,
                self.carry_offset_bytes,
                kept_text(&line),
            );
        }
    }
}

impl PartReducer for GrepReducer {
    fn reduce_part(
        &mut self,
        part: ChunkPart,
        _sink: &mut dyn OutputSink,
    ) -> Result<(), KernelError> {
        let part_end_bytes = part.offset_bytes + part.length_bytes as u64;
        let partial: GrepPartial = part.into_partial(&self.file)?;
        let limit_bytes = self.kernel.max_line_bytes;
        if self.carry.len() + partial.head.len() > limit_bytes + 1 {
            return Err(self.file.error_at(
                self.carry_offset_bytes,
                KernelErrorKind::LineTooLong { limit_bytes },
            ));
        }
        if !partial.has_newline {
            self.carry.extend_from_slice(&partial.head);
            return Ok(());
        }
        self.carry
            .extend_from_slice(&partial.head[..partial.head.len() - 1]);
        self.test_carried_line();
        self.completed_line_count += 1;
        for (line_index, line_offset_bytes, text) in partial.interior_matches {
            self.record(
                self.completed_line_count + line_index + 1,
                line_offset_bytes,
                text,
            );
        }
        self.completed_line_count += partial.interior_line_count;
        self.carry_offset_bytes = part_end_bytes - partial.tail.len() as u64;
        self.carry = partial.tail;
        Ok(())
    }

    fn finish(mut self: Box<Self>, _sink: &mut dyn OutputSink) -> Result<Summary, KernelError> {
        if !self.carry.is_empty() {
            self.test_carried_line();
        }
        Ok(Summary::Matches {
            matching_line_count: self.matching_line_count,
            matches: self.matches,
        })
    }
}

impl Kernel for Arc<GrepKernel> {
    fn name(&self) -> &'static str {
        "grep"
    }

    fn start_file(&self, file: &FileInfo) -> Result<FileJob, KernelError> {
        Ok(FileJob::Parallel {
            mapper: Arc::new(GrepMapper {
                kernel: Arc::clone(self),
            }),
            reducer: Box::new(GrepReducer {
                kernel: Arc::clone(self),
                file: file.clone(),
                carry: Vec::new(),
                carry_offset_bytes: 0,
                completed_line_count: 0,
                matching_line_count: 0,
                matches: Vec::new(),
            }),
        })
    }
}
