//! The state of one replay: arrivals admitted, the wait queue behind the outstanding
//! bound, requests in flight, and the results gathered as completions come.

use std::collections::{HashMap, VecDeque};

use flashpipe_device::{Completion, Operation, Request};
use flashpipe_flash::workload::{AccessKind, TraceRequest};

use super::pages::{BufferShelf, PageBitmap, PageLayout};
use super::report::{summarize, CollectionSummary, KindLatencies, ReplayReport};
use super::{ReplayLoop, ReplayOptions, THROUGHPUT_BUCKETS};

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
    pub(super) requests: &'a [TraceRequest],
    pub(super) layout: PageLayout,
    pub(super) open_loop: bool,
    pub(super) bound: usize,
    pub(super) speed: f64,
    pub(super) start_ns: u64,
    pub(super) first_arrival_ns: u64,
    pub(super) next_index: usize,
    /// Arrived (open loop) or all (closed loop) and not yet issued, with arrival times.
    pub(super) waiting: VecDeque<(usize, u64)>,
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
    pub(super) throughput: Vec<(u64, u64)>,
}

fn kind_index(kind: AccessKind) -> usize {
    match kind {
        AccessKind::Read => 0,
        AccessKind::Write => 1,
        AccessKind::Trim => 2,
    }
}

impl<'a> Run<'a> {
    pub(super) fn new(
        requests: &'a [TraceRequest],
        options: &ReplayOptions,
        layout: PageLayout,
        start_ns: u64,
    ) -> Run<'a> {
        let open_loop = matches!(options.replay_loop, ReplayLoop::Open { .. });
        let mut run = Run {
            requests,
            layout,
            open_loop,
            bound: options.outstanding_bound() as usize,
            speed: options.speed,
            start_ns,
            first_arrival_ns: requests.first().map_or(0, |request| request.arrival_ns),
            next_index: 0,
            waiting: VecDeque::new(),
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
            throughput: Vec::new(),
        };
        if !open_loop {
            run.waiting = (0..requests.len()).map(|index| (index, start_ns)).collect();
            run.next_index = requests.len();
        }
        run
    }

    /// The virtual instant request `index` arrives (open loop).
    pub(super) fn arrival_ns(&self, index: usize) -> u64 {
        let offset_ns = self.requests[index].arrival_ns - self.first_arrival_ns;
        self.start_ns + (offset_ns as f64 / self.speed).round() as u64
    }

    pub(super) fn admit_arrivals(&mut self, now_ns: u64) {
        while self.next_index < self.requests.len() {
            let arrival_ns = self.arrival_ns(self.next_index);
            if arrival_ns > now_ns {
                break;
            }
            if self.in_flight.len() + self.waiting.len() >= self.bound {
                self.bound_hits += 1;
            }
            self.waiting.push_back((self.next_index, arrival_ns));
            self.next_index += 1;
        }
    }

    /// The next request to hand the FTL now, if the bound allows one.
    pub(super) fn next_to_issue(&mut self, now_ns: u64) -> Option<Request> {
        if self.in_flight.len() >= self.bound {
            return None;
        }
        let (index, arrival_ns) = self.waiting.pop_front()?;
        self.bound_wait_ns_total += now_ns - arrival_ns;
        let request = self.requests[index];
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
            index as u64,
            Outstanding {
                kind: request.kind,
                latency_from_ns,
                length_bytes: request.length_bytes,
                zero_filled,
            },
        );
        self.outstanding_max = self.outstanding_max.max(self.in_flight.len());
        Some(Request {
            tag: index as u64,
            operation,
        })
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
            self.throughput.push((now_ns, outstanding.length_bytes));
            self.buffers.give_back(completion.buffer);
            return;
        }
        if completion.status.is_err() {
            self.failed[kind] += 1;
        }
        self.bytes[kind] += outstanding.length_bytes;
        let latency_ns = now_ns - outstanding.latency_from_ns;
        match outstanding.kind {
            AccessKind::Read => self.latencies.reads.push(latency_ns),
            AccessKind::Write => self.latencies.writes.push(latency_ns),
            AccessKind::Trim => self.latencies.trims.push(latency_ns),
        }
        self.last_completion_ns = self.last_completion_ns.max(now_ns);
        if outstanding.kind != AccessKind::Trim {
            self.throughput.push((now_ns, outstanding.length_bytes));
        }
        self.buffers.give_back(completion.buffer);
    }

    pub(super) fn outstanding(&self) -> usize {
        self.in_flight.len()
    }

    pub(super) fn finished(&self) -> bool {
        self.next_index == self.requests.len()
            && self.waiting.is_empty()
            && self.in_flight.is_empty()
    }

    /// The next arrival the loop must wake for (open loop).
    pub(super) fn next_arrival_ns(&self) -> Option<u64> {
        (self.next_index < self.requests.len()).then(|| self.arrival_ns(self.next_index))
    }

    pub(super) fn report(
        mut self,
        collection: CollectionSummary,
        die_utilization: Vec<f64>,
        channel_utilization: Vec<f64>,
        precondition_pages_written: u64,
    ) -> ReplayReport {
        let elapsed_ns = (self.last_completion_ns - self.start_ns).max(1);
        let trace_span_ns = self
            .requests
            .len()
            .checked_sub(1)
            .map_or(0, |last| self.arrival_ns(last) - self.start_ns);
        let interval_ns = elapsed_ns.div_ceil(THROUGHPUT_BUCKETS).max(1);
        let mut throughput_bytes = vec![0u64; THROUGHPUT_BUCKETS as usize];
        for &(at_ns, bytes) in &self.throughput {
            let bucket = ((at_ns - self.start_ns) / interval_ns).min(THROUGHPUT_BUCKETS - 1);
            throughput_bytes[bucket as usize] += bytes;
        }
        let summary = |latencies: &mut Vec<u64>, failed: u64, bytes: u64| {
            summarize(latencies, failed, bytes, elapsed_ns)
        };
        let mut all_latencies: Vec<u64> = [
            &self.latencies.reads,
            &self.latencies.writes,
            &self.latencies.trims,
        ]
        .into_iter()
        .flatten()
        .copied()
        .collect();
        let all = summary(
            &mut all_latencies,
            self.failed.iter().sum(),
            self.bytes.iter().sum(),
        );
        let reads = summary(&mut self.latencies.reads, self.failed[0], self.bytes[0]);
        let writes = summary(&mut self.latencies.writes, self.failed[1], self.bytes[1]);
        let trims = summary(&mut self.latencies.trims, self.failed[2], self.bytes[2]);
        ReplayReport {
            requests: self.requests.len() as u64,
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
