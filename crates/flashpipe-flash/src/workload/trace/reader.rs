//! A trace read line by line from any reader ([`TraceReader`]): one request at a time,
//! so a replay's memory does not grow with its trace. [`super::parse_trace`] collects the
//! same reader into memory (for `--sort`, which needs every request at once).
//!
//! The reader checks what one line and its predecessor can show: each line's fields and
//! limits, a line at most [`MAX_TRACE_LINE_BYTES`] long and UTF-8, and arrival times that
//! go backwards (refused, or counted when the caller sorts afterwards). What needs the
//! whole trace (no request at all, plausibility) is judged from [`TraceReader::summary`]
//! at the end of a pass.

use std::io::BufRead;

use super::{
    check_plausible, no_requests, parse_ascii_nanoseconds_line, parse_blkparse_line,
    parse_disksim_line, TraceError, TraceFormat, TraceOptions,
};
use crate::workload::TraceRequest;

/// The longest line a trace may have (blkparse's lines, the longest format's, are under
/// 200 bytes with a long process name).
pub const MAX_TRACE_LINE_BYTES: usize = 65_536;

/// What one pass over a trace saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TraceSummary {
    /// Requests read.
    pub requests: u64,
    /// Comment lines skipped.
    pub comment_lines: u64,
    /// Requests whose arrival time was earlier than the one before (only with `sort`).
    pub out_of_order_requests: u64,
    /// The first request's arrival as read (before any rebase).
    pub first_arrival_ns: u64,
    /// The latest arrival read (before any rebase).
    pub last_arrival_ns: u64,
    /// The line of the last request.
    pub last_request_line: usize,
}

/// Requests of a trace, one line at a time.
pub struct TraceReader<R> {
    reader: R,
    source_name: String,
    format: TraceFormat,
    options: TraceOptions,
    rebase: bool,
    request_limit: u64,
    line: String,
    line_count: usize,
    first_skipped_line: Option<usize>,
    summary: TraceSummary,
    failed: bool,
}

impl<R: BufRead> TraceReader<R> {
    /// Reads `reader` (named `source_name` in errors) in `format`. With `options.sort`
    /// arrival times that go backwards are counted, not refused (the caller sorts); a
    /// blkparse trace read without `sort` has its times rebased to the first request as
    /// it goes. More than `request_limit` requests is an error.
    pub fn new(
        reader: R,
        source_name: &str,
        format: TraceFormat,
        options: &TraceOptions,
        request_limit: u64,
    ) -> TraceReader<R> {
        TraceReader {
            reader,
            source_name: source_name.to_string(),
            format,
            options: *options,
            rebase: format == TraceFormat::Blkparse && !options.sort,
            request_limit,
            line: String::new(),
            line_count: 0,
            first_skipped_line: None,
            summary: TraceSummary::default(),
            failed: false,
        }
    }

    /// What the pass has seen so far.
    pub fn summary(&self) -> TraceSummary {
        self.summary
    }

    /// The verdict on the whole trace once the pass is over: no request at all, or (unless
    /// `allow_implausible`) implausible times, is an error.
    pub fn finish(&self) -> Result<TraceSummary, TraceError> {
        let summary = self.finish_without_plausibility()?;
        if !self.options.allow_implausible {
            check_plausible(&summary, &self.source_name, self.format, &self.options)?;
        }
        Ok(summary)
    }

    /// [`Self::finish`] without the plausibility check (for a caller that sorts first).
    pub(crate) fn finish_without_plausibility(&self) -> Result<TraceSummary, TraceError> {
        if self.summary.requests == 0 {
            return Err(no_requests(
                &self.source_name,
                self.format,
                self.first_skipped_line,
                self.line_count,
            ));
        }
        Ok(self.summary)
    }

    fn error(&mut self, line: usize, message: String) -> TraceError {
        self.failed = true;
        TraceError {
            source_name: self.source_name.clone(),
            line,
            message,
        }
    }

    /// Reads the next line into `self.line`; false at the end.
    fn next_line(&mut self) -> Result<bool, TraceError> {
        self.line.clear();
        let limit = MAX_TRACE_LINE_BYTES as u64 + 1;
        let read = std::io::Read::take(&mut self.reader, limit).read_line(&mut self.line);
        let line_number = self.line_count + 1;
        match read {
            Ok(0) => return Ok(false),
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::InvalidData => {
                return Err(self.error(line_number, "not UTF-8 text".to_string()));
            }
            Err(error) => {
                return Err(self.error(line_number, format!("cannot read the trace: {error}")));
            }
        }
        self.line_count = line_number;
        if self.line.ends_with('\n') {
            self.line.pop();
            if self.line.ends_with('\r') {
                self.line.pop();
            }
        } else if self.line.len() > MAX_TRACE_LINE_BYTES {
            return Err(self.error(
                line_number,
                format!("a line longer than {MAX_TRACE_LINE_BYTES} bytes: not a trace line"),
            ));
        }
        Ok(true)
    }

    /// Checks `request`'s place after the one before and counts it.
    fn accept(
        &mut self,
        mut request: TraceRequest,
        line: usize,
    ) -> Result<TraceRequest, TraceError> {
        if self.summary.requests >= self.request_limit {
            let limit = self.request_limit;
            return Err(self.error(
                line,
                format!("more than {limit} requests: the limit of one trace read this way"),
            ));
        }
        if self.summary.requests > 0 && request.arrival_ns < self.summary.last_arrival_ns {
            if !self.options.sort {
                let (arrival, previous, previous_line) = (
                    request.arrival_ns,
                    self.summary.last_arrival_ns,
                    self.summary.last_request_line,
                );
                return Err(self.error(
                    line,
                    format!(
                        "arrival time {arrival} ns goes backwards (line {previous_line} arrived \
                         at {previous} ns); sort the trace or pass --sort"
                    ),
                ));
            }
            self.summary.out_of_order_requests += 1;
        } else {
            self.summary.last_arrival_ns = request.arrival_ns;
            self.summary.last_request_line = line;
        }
        if self.summary.requests == 0 {
            self.summary.first_arrival_ns = request.arrival_ns;
            self.summary.last_arrival_ns = request.arrival_ns;
            self.summary.last_request_line = line;
        }
        self.summary.requests += 1;
        if self.rebase {
            request.arrival_ns -= self.summary.first_arrival_ns;
        }
        Ok(request)
    }

    fn read_request(&mut self) -> Result<Option<(TraceRequest, usize)>, TraceError> {
        while self.next_line()? {
            let line_number = self.line_count;
            let trimmed = self.line.trim_start();
            if trimmed.is_empty() {
                continue;
            }
            if trimmed.starts_with('#') {
                self.summary.comment_lines += 1;
                continue;
            }
            let parsed = match self.format {
                TraceFormat::Blkparse => parse_blkparse_line(&self.line),
                TraceFormat::Disksim => parse_disksim_line(&self.line, self.options.time_unit),
                TraceFormat::AsciiNanoseconds => parse_ascii_nanoseconds_line(&self.line),
            };
            match parsed {
                Err(message) => return Err(self.error(line_number, message)),
                Ok(None) => {
                    self.first_skipped_line.get_or_insert(line_number);
                }
                Ok(Some(request)) => {
                    return self
                        .accept(request, line_number)
                        .map(|request| Some((request, line_number)))
                }
            }
        }
        Ok(None)
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    /// A request and its 1-based line, or the first error (after which the pass ends).
    type Item = Result<(TraceRequest, usize), TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        self.read_request().transpose()
    }
}
