//! The state of one replay: arrivals admitted, the wait queue behind the outstanding
//! bound, requests in flight, and the results gathered as completions come.
//!
//! Memory does not grow with the trace: requests come from two passes over the source
//! (one cursor admits arrivals and only counts those waiting, the other takes them when
//! they are issued, in the same order), latencies go to bounded histograms and
//! throughput to a fixed number of fine intervals.

use std::collections::HashMap;
use std::iter::Peekable;

use flashpipe_device::{Completion, Operation, Request};
use flashpipe_flash::workload::{AccessKind, TraceRequest};

use super::pages::{BufferShelf, PageBitmap, PageLayout};
use super::report::{summarize, CollectionSummary, KindLatencies, ReplayReport};
use super::throughput::ThroughputRecorder;
use super::{ReplayLoop, ReplayOptions, RequestPass};

/// A request issued and not completed.
#[derive(Debug, Clone, Copy)]
pub(super) struct Outstanding {
    pub(super) kind: AccessKind,
    /// Where its latency starts: arrival (open loop) or issue (closed loop).
    pub(super) latency_from_ns: u64,
    pub(super) length_bytes: u64,
    /// A read of never-written pages only: answered with zeros, flash untouched.
    pub(super) zero_filled: bool,
}

/// The state of one replay: arrivals, the wait queue, requests in flight, results.
pub(super) struct Run<'a> {
    /// Open loop: the cursor that admits arrivals (counted in `waiting`).
    arrivals: Option<Peekable<RequestPass<'a>>>,
    /// The cursor that takes requests as they are issued (in arrival order).
    issues: Peekable<RequestPass<'a>>,
    /// Requests seen by the admitting cursor (open loop) or issued (closed loop).
    pub(super) requests_seen: u64,
    /// Arrival of the latest request seen, as read.
    last_arrival_read_ns: u64,
    next_tag: u64,
    /// The issuing pass ended before the admitting one: the source changed between passes.
    pub(super) source_changed: bool,
    pub(super) layout: PageLayout,
    pub(super) open_loop: bool,
    pub(super) bound: usize,
    pub(super) speed: f64,
    pub(super) start_ns: u64,
    pub(super) first_arrival_ns: u64,
    /// Arrived (open loop) and not yet issued.
    pub(super) waiting: u64,
    pub(super) in_flight: HashMap<u64, Outstanding>,
    pub(super) buffers: BufferShelf,
    pub(super) written: PageBitmap,
    pub(super) latencies: KindLatencies,
    pub(super) failed: [u64; 3],
    pub(super) bytes: [u64; 3],
    pub(super) rejected: u64,
    pub(super) unwritten_read_requests: u64,
    pub(super) unwritten_read_pages: u64,
    pub(super) zero_filled_reads: u64,
    pub(super) wrapped_requests: u64,
    pub(super) partial_page_requests: u64,
    pub(super) bound_hits: u64,
    pub(super) bound_wait_ns_total: u64,
    pub(super) outstanding_max: usize,
    pub(super) last_completion_ns: u64,
    pub(super) throughput: ThroughputRecorder,
}

fn kind_index(kind: AccessKind) -> usize {
    match kind {
        AccessKind::Read => 0,
        AccessKind::Write => 1,
        AccessKind::Trim => 2,
    }
}

impl<'a> Run<'a> {
    /// A run over `issues` and, in the open loop, `arrivals`: two passes over the same
    /// requests in arrival order.
    pub(super) fn new(
        mut issues: Peekable<RequestPass<'a>>,
        arrivals: Option<RequestPass<'a>>,
        options: &ReplayOptions,
        layout: PageLayout,
        start_ns: u64,
    ) -> Run<'a> {
        let open_loop = matches!(options.replay_loop, ReplayLoop::Open { .. });
        assert_eq!(
            open_loop,
            arrivals.is_some(),
            "the open loop, and only it, admits arrivals from a second pass"
        );
        let first_arrival_ns = issues.peek().map_or(0, |request| request.arrival_ns);
        Run {
            arrivals: arrivals.map(Iterator::peekable),
            issues,
            requests_seen: 0,
            last_arrival_read_ns: first_arrival_ns,
            next_tag: 0,
            source_changed: false,
            layout,
            open_loop,
            bound: options.outstanding_bound() as usize,
            speed: options.speed,
            start_ns,
            first_arrival_ns,
            waiting: 0,
            in_flight: HashMap::new(),
            buffers: BufferShelf::default(),
            written: PageBitmap::new(0),
            latencies: KindLatencies::default(),
            failed: [0; 3],
            bytes: [0; 3],
            rejected: 0,
            unwritten_read_requests: 0,
            unwritten_read_pages: 0,
            zero_filled_reads: 0,
            wrapped_requests: 0,
            partial_page_requests: 0,
            bound_hits: 0,
            bound_wait_ns_total: 0,
            outstanding_max: 0,
            last_completion_ns: start_ns,
            throughput: ThroughputRecorder::new(start_ns),
        }
    }

    /// The virtual instant a request read at `arrival_ns` arrives (open loop).
    pub(super) fn arrival_ns(&self, arrival_ns: u64) -> u64 {
        let offset_ns = arrival_ns - self.first_arrival_ns;
        self.start_ns + (offset_ns as f64 / self.speed).round() as u64
    }

    fn seen(&mut self, request: &TraceRequest) {
        assert!(
            request.arrival_ns >= self.last_arrival_read_ns,
            "replay takes requests sorted by arrival only (the parsers sort or refuse)"
        );
        self.last_arrival_read_ns = request.arrival_ns;
        self.requests_seen += 1;
    }

    pub(super) fn admit_arrivals(&mut self, now_ns: u64) {
        let Some(mut arrivals) = self.arrivals.take() else {
            return;
        };
        while let Some(request) =
            arrivals.next_if(|request| self.arrival_ns(request.arrival_ns) <= now_ns)
        {
            if self.in_flight.len() as u64 + self.waiting >= self.bound as u64 {
                self.bound_hits += 1;
            }
            self.seen(&request);
            self.waiting += 1;
        }
        self.arrivals = Some(arrivals);
    }

    /// The next request to hand the FTL now, if the bound allows one.
    pub(super) fn next_to_issue(&mut self, now_ns: u64) -> Option<Request> {
        if self.in_flight.len() >= self.bound {
            return None;
        }
        let request = if self.open_loop {
            if self.waiting == 0 {
                return None;
            }
            let Some(request) = self.issues.next() else {
                self.source_changed = true;
                self.waiting = 0;
                return None;
            };
            self.waiting -= 1;
            request
        } else {
            let request = self.issues.next()?;
            self.seen(&request);
            request
        };
        let arrival_ns = if self.open_loop {
            self.arrival_ns(request.arrival_ns)
        } else {
            self.start_ns
        };
        self.bound_wait_ns_total += now_ns - arrival_ns;
        let tag = self.next_tag;
        self.next_tag += 1;
        let pages = self.layout.pages_of(&request);
        self.wrapped_requests += u64::from(pages.wrapped);
        self.partial_page_requests += u64::from(pages.partial);
        let page_bytes = self.layout.page_bytes as usize;
        let mut zero_filled = false;
        let operation = match request.kind {
            AccessKind::Read => {
                let unwritten = (pages.first..pages.first + pages.count)
                    .filter(|&page| !self.written.get(page))
                    .count() as u64;
                self.unwritten_read_pages += unwritten;
                self.unwritten_read_requests += u64::from(unwritten > 0);
                zero_filled = unwritten == pages.count;
                Operation::Read {
                    first_block: pages.first,
                    buffer: self.buffers.take(pages.count as usize * page_bytes),
                }
            }
            AccessKind::Write => {
                (pages.first..pages.first + pages.count).for_each(|page| self.written.set(page));
                Operation::Write {
                    first_block: pages.first,
                    buffer: self.buffers.take(pages.count as usize * page_bytes),
                }
            }
            AccessKind::Trim => {
                (pages.first..pages.first + pages.count).for_each(|page| self.written.clear(page));
                Operation::Trim {
                    first_block: pages.first,
                    block_count: pages.count,
                }
            }
        };
        let latency_from_ns = if self.open_loop { arrival_ns } else { now_ns };
        self.in_flight.insert(
            tag,
            Outstanding {
                kind: request.kind,
                latency_from_ns,
                length_bytes: request.length_bytes,
                zero_filled,
            },
        );
        self.outstanding_max = self.outstanding_max.max(self.in_flight.len());
        Some(Request { tag, operation })
    }

    pub(super) fn rejected(&mut self, tag: u64, operation: Operation) {
        let outstanding = self
            .in_flight
            .remove(&tag)
            .expect("a refused request was issued");
        self.rejected += 1;
        self.failed[kind_index(outstanding.kind)] += 1;
        if let Operation::Read { buffer, .. } | Operation::Write { buffer, .. } = operation {
            self.buffers.give_back(Some(buffer));
        }
    }

    pub(super) fn completed(&mut self, completion: Completion, now_ns: u64) {
        let outstanding = self
            .in_flight
            .remove(&completion.tag)
            .expect("a completion for an issued request");
        let kind = kind_index(outstanding.kind);
        if outstanding.zero_filled && completion.status.is_ok() {
            // Zeros handed back without flash: no latency of the device's to count.
            self.zero_filled_reads += 1;
            self.last_completion_ns = self.last_completion_ns.max(now_ns);
            self.throughput.record(now_ns, outstanding.length_bytes);
            self.buffers.give_back(completion.buffer);
            return;
        }
        if completion.status.is_err() {
            self.failed[kind] += 1;
        }
        self.bytes[kind] += outstanding.length_bytes;
        let latency_ns = now_ns - outstanding.latency_from_ns;
        match outstanding.kind {
            AccessKind::Read => self.latencies.reads.record(latency_ns),
            AccessKind::Write => self.latencies.writes.record(latency_ns),
            AccessKind::Trim => self.latencies.trims.record(latency_ns),
        }
        self.last_completion_ns = self.last_completion_ns.max(now_ns);
        if outstanding.kind != AccessKind::Trim {
            self.throughput.record(now_ns, outstanding.length_bytes);
        }
        self.buffers.give_back(completion.buffer);
    }

    pub(super) fn outstanding(&self) -> usize {
        self.in_flight.len()
    }

    pub(super) fn finished(&mut self) -> bool {
        self.in_flight.is_empty() && self.waiting == 0 && self.issues.peek().is_none()
    }

    /// The next arrival the loop must wake for (open loop).
    pub(super) fn next_arrival_ns(&mut self) -> Option<u64> {
        let arrival_ns = self.arrivals.as_mut()?.peek()?.arrival_ns;
        Some(self.arrival_ns(arrival_ns))
    }

    pub(super) fn report(
        self,
        collection: CollectionSummary,
        die_utilization: Vec<f64>,
        channel_utilization: Vec<f64>,
        precondition_pages_written: u64,
    ) -> ReplayReport {
        let elapsed_ns = (self.last_completion_ns - self.start_ns).max(1);
        let trace_span_ns = if self.requests_seen == 0 {
            0
        } else {
            self.arrival_ns(self.last_arrival_read_ns) - self.start_ns
        };
        let (throughput_bytes, interval_ns) = self.throughput.intervals(elapsed_ns);
        let summary = |latencies: &flashpipe_base::LatencyHistogram, failed: u64, bytes: u64| {
            summarize(latencies, failed, bytes, elapsed_ns)
        };
        let mut all_latencies = self.latencies.reads.clone();
        all_latencies.merge(&self.latencies.writes);
        all_latencies.merge(&self.latencies.trims);
        let all = summary(
            &all_latencies,
            self.failed.iter().sum(),
            self.bytes.iter().sum(),
        );
        let reads = summary(&self.latencies.reads, self.failed[0], self.bytes[0]);
        let writes = summary(&self.latencies.writes, self.failed[1], self.bytes[1]);
        let trims = summary(&self.latencies.trims, self.failed[2], self.bytes[2]);
        ReplayReport {
            requests: self.requests_seen,
            reads,
            writes,
            trims,
            all,
            rejected_requests: self.rejected,
            unwritten_read_requests: self.unwritten_read_requests,
            unwritten_read_pages: self.unwritten_read_pages,
            zero_filled_reads: self.zero_filled_reads,
            precondition_pages_written,
            wrapped_requests: self.wrapped_requests,
            partial_page_requests: self.partial_page_requests,
            outstanding_bound_hits: self.bound_hits,
            outstanding_bound_wait_us_total: if self.open_loop {
                self.bound_wait_ns_total as f64 / 1000.0
            } else {
                0.0
            },
            outstanding_max: self.outstanding_max as u64,
            elapsed_ns,
            trace_span_ns,
            collection,
            die_utilization,
            channel_utilization,
            logical_pages: self.layout.logical_pages,
            page_bytes: self.layout.page_bytes,
            throughput_bytes,
            throughput_interval_ns: interval_ns,
            latencies_ns: self.latencies,
        }
    }
}
