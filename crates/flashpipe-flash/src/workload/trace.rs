//! Trace files: blkparse text output, DiskSim ASCII (time unit chosen) and the
//! five-column nanosecond form MQSim reads, parsed and checked line by line.
//!
//! Every format skips blank lines and comment lines (first non-blank character `#`).
//! Every bad line is refused with its 1-based number and the field. A trace without one
//! request is refused too, naming its first line that is not blank or a comment (a
//! blkparse trace skips the events that are not queued reads, writes or discards). Arrival times that go
//! backwards are refused with the line number unless [`TraceOptions::sort`] asks for a
//! stable sort by arrival. A trace whose arrival times are implausible for the unit it was
//! read in (a span over [`PLAUSIBLE_TRACE_SPAN_SECONDS_MAX`], or a mean interarrival time
//! under [`PLAUSIBLE_MEAN_INTERARRIVAL_NS_MIN`]) is refused unless
//! [`TraceOptions::allow_implausible`]: a nanosecond trace read as milliseconds is the usual
//! cause. Formats are specified in docs/flash-model.md, "Trace formats".

mod reader;

pub use reader::{TraceReader, TraceSummary, MAX_TRACE_LINE_BYTES};

use super::{
    AccessKind, TraceRequest, MAX_REQUEST_BYTES, MAX_TRACE_ARRIVAL_SECONDS, MAX_TRACE_OFFSET_BYTES,
    MAX_TRACE_REQUESTS,
};

/// Longest span (last arrival minus first) a trace may have without
/// [`TraceOptions::allow_implausible`]: one day.
pub const PLAUSIBLE_TRACE_SPAN_SECONDS_MAX: f64 = 86_400.0;
/// Shortest mean interarrival time a trace of two or more requests may have without
/// [`TraceOptions::allow_implausible`]: 10 ns (no host issues 100 million requests a second).
pub const PLAUSIBLE_MEAN_INTERARRIVAL_NS_MIN: f64 = 10.0;

/// A trace line that could not be read, or a trace refused as a whole (its line is then
/// the line of the request that breaks the rule).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}:{line}: {message}")]
pub struct TraceError {
    /// File name.
    pub source_name: String,
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// The trace formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum TraceFormat {
    /// blkparse's default text output; queue (`Q`) events become requests.
    Blkparse,
    /// DiskSim ASCII: `time device block size_blocks flags`, time in [`TraceOptions::time_unit`].
    Disksim,
    /// `time_ns device lba size_sectors type` (type 0 write, 1 read): MQSim's ASCII trace
    /// with its time unit set to nanoseconds.
    AsciiNanoseconds,
}

/// The unit of DiskSim's time field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum TraceTimeUnit {
    /// Milliseconds (DiskSim's own unit).
    Milliseconds,
    /// Microseconds.
    Microseconds,
    /// Nanoseconds.
    Nanoseconds,
}

impl TraceTimeUnit {
    fn per_second(self) -> f64 {
        match self {
            TraceTimeUnit::Milliseconds => 1e3,
            TraceTimeUnit::Microseconds => 1e6,
            TraceTimeUnit::Nanoseconds => 1e9,
        }
    }

    /// The unit's symbol (`ms`, `us`, `ns`).
    pub fn symbol(self) -> &'static str {
        match self {
            TraceTimeUnit::Milliseconds => "ms",
            TraceTimeUnit::Microseconds => "us",
            TraceTimeUnit::Nanoseconds => "ns",
        }
    }
}

/// How a trace is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TraceOptions {
    /// Unit of DiskSim's time field (other formats fix their own).
    pub time_unit: TraceTimeUnit,
    /// Sort requests by arrival (stable) instead of refusing times that go backwards.
    pub sort: bool,
    /// Accept spans over a day and mean interarrival times under 10 ns.
    pub allow_implausible: bool,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            time_unit: TraceTimeUnit::Milliseconds,
            sort: false,
            allow_implausible: false,
        }
    }
}

/// A parsed trace: its requests in arrival order and what the parser skipped or moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedTrace {
    /// Requests, by arrival time.
    pub requests: Vec<TraceRequest>,
    /// The 1-based line each request came from.
    pub lines: Vec<usize>,
    /// Comment lines skipped.
    pub comment_lines: u64,
    /// Requests whose arrival time was earlier than the one before (moved by `sort`).
    pub out_of_order_requests: u64,
}

/// Parses `text` (named `source_name` in errors) in `format`, into memory (at most
/// [`MAX_TRACE_REQUESTS`] requests); [`TraceReader`] reads the same formats one request at
/// a time.
pub fn parse_trace(
    text: &str,
    source_name: &str,
    format: TraceFormat,
    options: &TraceOptions,
) -> Result<ParsedTrace, TraceError> {
    let mut reader = TraceReader::new(
        text.as_bytes(),
        source_name,
        format,
        options,
        MAX_TRACE_REQUESTS as u64,
    );
    let mut requests = Vec::new();
    let mut lines = Vec::new();
    for item in reader.by_ref() {
        let (request, line) = item?;
        requests.push(request);
        lines.push(line);
    }
    let summary = reader.finish_without_plausibility()?;
    let mut trace = ParsedTrace {
        requests,
        lines,
        comment_lines: summary.comment_lines,
        out_of_order_requests: summary.out_of_order_requests,
    };
    if options.sort && trace.out_of_order_requests > 0 {
        let mut pairs: Vec<(TraceRequest, usize)> =
            trace.requests.into_iter().zip(trace.lines).collect();
        pairs.sort_by_key(|(request, _)| request.arrival_ns);
        (trace.requests, trace.lines) = pairs.into_iter().unzip();
    }
    if format == TraceFormat::Blkparse && options.sort {
        rebase_to_first_arrival(&mut trace.requests);
    }
    if !options.allow_implausible {
        let count = trace.requests.len();
        let sorted = TraceSummary {
            first_arrival_ns: trace.requests[0].arrival_ns,
            last_arrival_ns: trace.requests[count - 1].arrival_ns,
            last_request_line: trace.lines[count - 1],
            ..summary
        };
        check_plausible(&sorted, source_name, format, options)?;
    }
    Ok(trace)
}

/// The error of a trace without one request: it names the first line that was read and
/// skipped (a blkparse event that is not a queued read, write or discard), or says that
/// the trace holds only blank and comment lines.
pub(crate) fn no_requests(
    source_name: &str,
    format: TraceFormat,
    first_skipped_line: Option<usize>,
    line_count: usize,
) -> TraceError {
    let (line, message) = match first_skipped_line {
        Some(line) => (
            line,
            match format {
                TraceFormat::Blkparse => "the trace holds no request: this line, the first that is not blank or a comment, is not a queue (Q) event of a read, write or discard (R, W or D), nor is any other; give blkparse's text output of a traced device".to_string(),
                _ => "the trace holds no request, and this line is the first that is not one".to_string(),
            },
        ),
        None => (
            line_count.max(1),
            "the trace holds no request (only blank or comment lines); a replay needs at least one".to_string(),
        ),
    };
    TraceError {
        source_name: source_name.to_string(),
        line,
        message,
    }
}

/// Parses blkparse's default text output: queue (`Q`) events become requests
/// (`dev cpu seq time pid Q rwbs sector + count [process]`); `R` reads, `W` writes, `D`
/// discards (trims); other actions, blank lines, comments and the closing summary are
/// skipped. Times are rebased to the first request. Arrival order and plausibility are
/// checked as [`parse_trace`] with default options does, except that implausible
/// times are accepted.
pub fn parse_blkparse(text: &str, source_name: &str) -> Result<Vec<TraceRequest>, TraceError> {
    let options = TraceOptions {
        allow_implausible: true,
        ..TraceOptions::default()
    };
    Ok(parse_trace(text, source_name, TraceFormat::Blkparse, &options)?.requests)
}

/// Parses a DiskSim ASCII trace with times in milliseconds: `arrival_ms device block
/// size_blocks flags` per line, 512-byte blocks, flag bit 0 set for reads (see
/// [`parse_blkparse`] for what else is checked).
pub fn parse_disksim(text: &str, source_name: &str) -> Result<Vec<TraceRequest>, TraceError> {
    let options = TraceOptions {
        allow_implausible: true,
        ..TraceOptions::default()
    };
    Ok(parse_trace(text, source_name, TraceFormat::Disksim, &options)?.requests)
}

fn rebase_to_first_arrival(requests: &mut [TraceRequest]) {
    let Some(first_ns) = requests.first().map(|request| request.arrival_ns) else {
        return;
    };
    for request in requests {
        request.arrival_ns -= first_ns;
    }
}

/// Refuses a span over a day or a mean interarrival time under 10 ns (`summary` of a
/// trace in arrival order: its first and last arrivals, the last request's line).
pub(crate) fn check_plausible(
    summary: &TraceSummary,
    source_name: &str,
    format: TraceFormat,
    options: &TraceOptions,
) -> Result<(), TraceError> {
    let count = summary.requests;
    if count < 2 {
        return Ok(());
    }
    let span_ns = summary.last_arrival_ns - summary.first_arrival_ns;
    let unit = match format {
        TraceFormat::Blkparse => "s".to_string(),
        TraceFormat::Disksim => options.time_unit.symbol().to_string(),
        TraceFormat::AsciiNanoseconds => "ns".to_string(),
    };
    let refuse = |message: String| TraceError {
        source_name: source_name.to_string(),
        line: summary.last_request_line,
        message,
    };
    let span_seconds = span_ns as f64 / 1e9;
    if span_seconds > PLAUSIBLE_TRACE_SPAN_SECONDS_MAX {
        return Err(refuse(format!(
            "the trace spans {span_seconds:.0} s with times read in {unit}: above the \
             plausible {PLAUSIBLE_TRACE_SPAN_SECONDS_MAX} s (one day); check the time unit \
             (--time-unit) or pass --allow-implausible"
        )));
    }
    let mean_interarrival_ns = span_ns as f64 / (count - 1) as f64;
    if mean_interarrival_ns < PLAUSIBLE_MEAN_INTERARRIVAL_NS_MIN {
        return Err(refuse(format!(
            "{count} requests arrive {mean_interarrival_ns:.2} ns apart on average with times \
             read in {unit}: below the plausible {PLAUSIBLE_MEAN_INTERARRIVAL_NS_MIN} ns; check \
             the time unit (--time-unit) or pass --allow-implausible"
        )));
    }
    Ok(())
}

fn fields_of(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// One blkparse line: a request (absolute time), nothing (skipped), or what is wrong.
pub(crate) fn parse_blkparse_line(line: &str) -> Result<Option<TraceRequest>, String> {
    let fields = fields_of(line);
    let first = fields[0];
    if !is_device_number(first) {
        if line.starts_with("CPU")
            || line.starts_with("Total")
            || line.starts_with(' ')
            || line.starts_with('\t')
        {
            return Ok(None);
        }
        return Err(format!("not a blkparse event line: {}", quoted(line)));
    }
    if fields.len() < 7 {
        return Err(format!(
            "expected at least 7 fields, found {}",
            fields.len()
        ));
    }
    if fields[5] != "Q" {
        return Ok(None);
    }
    let rwbs = fields[6];
    let kind = if rwbs.contains('D') {
        AccessKind::Trim
    } else if rwbs.contains('R') {
        AccessKind::Read
    } else if rwbs.contains('W') {
        AccessKind::Write
    } else {
        return Ok(None);
    };
    let seconds = parse_trace_time(fields[3], "time", 1.0, "s")?;
    if fields.len() < 10 || fields[8] != "+" {
        return Err("expected `sector + count` after the RWBS field".to_string());
    }
    let sector = parse_trace_integer(fields[7], "sector")?;
    let count = parse_trace_integer(fields[9], "sector count")?;
    sectors_to_request(
        seconds_to_ns(seconds),
        kind,
        (sector, count),
        &BLKPARSE_FIELDS,
    )
    .map(Some)
}

fn is_device_number(field: &str) -> bool {
    field
        .split_once(',')
        .is_some_and(|(major, minor)| major.parse::<u32>().is_ok() && minor.parse::<u32>().is_ok())
}

pub(crate) fn parse_disksim_line(
    line: &str,
    unit: TraceTimeUnit,
) -> Result<Option<TraceRequest>, String> {
    let fields = fields_of(line);
    if fields.len() != 5 {
        return Err(format!(
            "expected 5 fields (time device block size flags), found {}",
            fields.len()
        ));
    }
    let time = parse_trace_time(fields[0], "arrival time", unit.per_second(), unit.symbol())?;
    let seconds = time / unit.per_second();
    parse_trace_integer(fields[1], "device")?;
    let block = parse_trace_integer(fields[2], "block")?;
    let size = parse_trace_integer(fields[3], "size")?;
    let flags = parse_trace_integer(fields[4], "flags")?;
    let kind = if flags & 1 == 1 {
        AccessKind::Read
    } else {
        AccessKind::Write
    };
    sectors_to_request(seconds_to_ns(seconds), kind, (block, size), &DISKSIM_FIELDS).map(Some)
}

pub(crate) fn parse_ascii_nanoseconds_line(line: &str) -> Result<Option<TraceRequest>, String> {
    let fields = fields_of(line);
    if fields.len() != 5 {
        return Err(format!(
            "expected 5 fields (time_ns device lba size_sectors type), found {}",
            fields.len()
        ));
    }
    let arrival_ns = parse_trace_integer(fields[0], "time_ns")?;
    let limit_ns = seconds_to_ns(MAX_TRACE_ARRIVAL_SECONDS);
    if arrival_ns > limit_ns {
        return Err(format!(
            "field `time_ns` {arrival_ns}: above the limit of {limit_ns} ns (30 days)"
        ));
    }
    parse_trace_integer(fields[1], "device")?;
    let sector = parse_trace_integer(fields[2], "lba")?;
    let count = parse_trace_integer(fields[3], "size_sectors")?;
    let kind = match fields[4] {
        "0" => AccessKind::Write,
        "1" => AccessKind::Read,
        other => {
            return Err(format!(
                "field `type` {}: must be 0 (write) or 1 (read)",
                quoted(other)
            ))
        }
    };
    sectors_to_request(arrival_ns, kind, (sector, count), &ASCII_NANOSECOND_FIELDS).map(Some)
}

/// Checks one trace request against the trace limits: offset, length and arrival time.
pub fn check_trace_request(request: &TraceRequest) -> Result<(), String> {
    if request.length_bytes > MAX_REQUEST_BYTES {
        return Err(format!(
            "request of {} bytes: above the limit of {MAX_REQUEST_BYTES} bytes (256 MiB)",
            request.length_bytes
        ));
    }
    if request.offset_bytes > MAX_TRACE_OFFSET_BYTES {
        return Err(format!(
            "offset {} bytes: above the limit of {MAX_TRACE_OFFSET_BYTES} bytes (1 PiB)",
            request.offset_bytes
        ));
    }
    if request.arrival_ns > seconds_to_ns(MAX_TRACE_ARRIVAL_SECONDS) {
        return Err(format!(
            "arrival {} ns: above the limit of {MAX_TRACE_ARRIVAL_SECONDS} s (30 days)",
            request.arrival_ns
        ));
    }
    Ok(())
}

/// A time of a trace in a unit of `per_second` to the second (named `symbol`): a finite,
/// non-negative decimal number of at most [`MAX_TRACE_ARRIVAL_SECONDS`].
fn parse_trace_time(text: &str, field: &str, per_second: f64, symbol: &str) -> Result<f64, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| format!("field `{field}` {}: not a number", quoted(text)))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!(
            "field `{field}` {}: not a finite non-negative number",
            quoted(text)
        ));
    }
    let limit = MAX_TRACE_ARRIVAL_SECONDS * per_second;
    if value > limit {
        return Err(format!(
            "field `{field}` {}: above the limit of {limit} {symbol} (30 days)",
            quoted(text)
        ));
    }
    Ok(value)
}

/// A non-negative integer field of a trace.
fn parse_trace_integer(text: &str, field: &str) -> Result<u64, String> {
    text.parse::<u64>().map_err(|_| {
        format!(
            "field `{field}` {}: not a non-negative integer below 2^64",
            quoted(text)
        )
    })
}

/// The most characters of a trace's text an error quotes.
const QUOTED_CHARACTERS_MAX: usize = 80;

/// `text` in double quotes for an error: at most [`QUOTED_CHARACTERS_MAX`] characters
/// (then `...`), each control character shown as `?` so that a hostile trace cannot
/// drive the terminal.
fn quoted(text: &str) -> String {
    let mut shown: String = text
        .chars()
        .take(QUOTED_CHARACTERS_MAX)
        .map(|character| {
            if character.is_control() {
                '?'
            } else {
                character
            }
        })
        .collect();
    if text.chars().nth(QUOTED_CHARACTERS_MAX).is_some() {
        shown.push_str("...");
    }
    format!("\"{shown}\"")
}

/// Whole nanoseconds of a checked time (at most 30 days, so the product is exact enough
/// and far from overflow).
pub(crate) fn seconds_to_ns(seconds: f64) -> u64 {
    assert!(
        (0.0..=MAX_TRACE_ARRIVAL_SECONDS).contains(&seconds),
        "times are checked before conversion"
    );
    (seconds * 1e9).round() as u64
}

/// The names a trace format gives its position and length fields, for errors.
struct SectorFieldNames {
    position: &'static str,
    count: &'static str,
}

const BLKPARSE_FIELDS: SectorFieldNames = SectorFieldNames {
    position: "sector",
    count: "sector count",
};

const DISKSIM_FIELDS: SectorFieldNames = SectorFieldNames {
    position: "block",
    count: "size",
};

const ASCII_NANOSECOND_FIELDS: SectorFieldNames = SectorFieldNames {
    position: "lba",
    count: "size_sectors",
};

/// A request of `count` 512-byte sectors from `sector`, within the trace limits.
fn sectors_to_request(
    arrival_ns: u64,
    kind: AccessKind,
    (sector, count): (u64, u64),
    names: &SectorFieldNames,
) -> Result<TraceRequest, String> {
    const SECTOR_BYTES: u64 = 512;
    let offset_bytes = sector
        .checked_mul(SECTOR_BYTES)
        .filter(|&offset| offset <= MAX_TRACE_OFFSET_BYTES)
        .ok_or_else(|| {
            format!(
                "field `{}` {sector}: above the limit of {} sectors ({MAX_TRACE_OFFSET_BYTES} bytes, 1 PiB)",
                names.position,
                MAX_TRACE_OFFSET_BYTES / SECTOR_BYTES
            )
        })?;
    let length_bytes = count
        .checked_mul(SECTOR_BYTES)
        .filter(|&length| length <= MAX_REQUEST_BYTES)
        .ok_or_else(|| {
            format!(
                "field `{}` {count}: above the limit of {} sectors ({MAX_REQUEST_BYTES} bytes, 256 MiB)",
                names.count,
                MAX_REQUEST_BYTES / SECTOR_BYTES
            )
        })?;
    let request = TraceRequest {
        arrival_ns,
        kind,
        offset_bytes,
        length_bytes,
    };
    check_trace_request(&request)?;
    Ok(request)
}
