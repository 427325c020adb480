//! Workloads and the device-layer runner: keeps a device's queue full for a fixed time
//! and measures every request on the device's own clock.

use flashpipe_device::{BlockDevice, BufferPool, DeviceError, IoBuf, Request, SplitMix64};
use serde::Serialize;

pub use crate::pattern::Pattern;

/// One workload: a pattern, a request size and a queue depth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Workload {
    /// Access pattern.
    pub pattern: Pattern,
    /// Bytes per request.
    pub request_size_bytes: u32,
    /// Requests kept in flight.
    pub queue_depth: u32,
}

impl Workload {
    /// A name like `rand-read 4KiB QD32`.
    pub fn label(&self) -> String {
        format!(
            "{} {} QD{}",
            self.pattern.short_name(),
            human_request_size(self.request_size_bytes),
            self.queue_depth
        )
    }
}

fn human_request_size(size_bytes: u32) -> String {
    if size_bytes >= 1 << 20 && size_bytes % (1 << 20) == 0 {
        format!("{}MiB", size_bytes >> 20)
    } else {
        format!("{}KiB", size_bytes >> 10)
    }
}

/// What one run of a workload measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Figures {
    /// Throughput in MB/s (10^6 bytes per second).
    pub mb_per_s: f64,
    /// Requests per second.
    pub iops: f64,
    /// Mean latency from submission to reaping, in microseconds.
    pub latency_us_mean: f64,
    /// 99th percentile latency, in microseconds.
    pub latency_us_p99: f64,
    /// Requests completed.
    pub requests: u64,
}

/// Figures of rounds of equal duration as one: rates and the 99th percentile averaged,
/// the mean latency weighted by requests.
pub fn combine_rounds(rounds: &[Figures]) -> Figures {
    assert!(!rounds.is_empty(), "at least one round ran");
    let count = rounds.len() as f64;
    let requests: u64 = rounds.iter().map(|round| round.requests).sum();
    let weighted_latency_us: f64 = rounds
        .iter()
        .map(|round| round.latency_us_mean * round.requests as f64)
        .sum();
    Figures {
        mb_per_s: rounds.iter().map(|round| round.mb_per_s).sum::<f64>() / count,
        iops: rounds.iter().map(|round| round.iops).sum::<f64>() / count,
        latency_us_mean: weighted_latency_us / requests.max(1) as f64,
        latency_us_p99: rounds.iter().map(|round| round.latency_us_p99).sum::<f64>() / count,
        requests,
    }
}

/// Raw counts of one device-layer run.
struct Tally {
    bytes: u64,
    elapsed_ns: u64,
    latencies_ns: Vec<u64>,
}

impl Tally {
    fn figures(mut self) -> Figures {
        let requests = self.latencies_ns.len() as u64;
        let elapsed_s = (self.elapsed_ns.max(1)) as f64 / 1e9;
        let latency_ns_sum: u64 = self.latencies_ns.iter().sum();
        let latency_ns_mean = latency_ns_sum as f64 / requests.max(1) as f64;
        Figures {
            mb_per_s: self.bytes as f64 / elapsed_s / 1e6,
            iops: requests as f64 / elapsed_s,
            latency_us_mean: latency_ns_mean / 1e3,
            latency_us_p99: percentile_ns(&mut self.latencies_ns, 0.99) as f64 / 1e3,
            requests,
        }
    }
}

/// The `fraction` percentile (nearest rank) of `values`; 0 when empty.
pub fn percentile_ns(values: &mut [u64], fraction: f64) -> u64 {
    if values.is_empty() {
        return 0;
    }
    let rank = ((fraction * values.len() as f64).ceil() as usize).clamp(1, values.len());
    *values.select_nth_unstable(rank - 1).1
}

/// Where the next request goes.
struct OffsetSource {
    sequential: bool,
    blocks_per_request: u64,
    request_slots: u64,
    next_slot: u64,
    generator: SplitMix64,
}

impl OffsetSource {
    fn next_first_block(&mut self) -> u64 {
        let slot = if self.sequential {
            let slot = self.next_slot;
            self.next_slot = (self.next_slot + 1) % self.request_slots;
            slot
        } else {
            self.generator.below(self.request_slots)
        };
        slot * self.blocks_per_request
    }
}

/// Submits requests of one workload and remembers when each tag went out.
struct Issuer {
    workload: Workload,
    offsets: OffsetSource,
    submitted_at_ns: Vec<u64>,
}

impl Issuer {
    fn submit(
        &mut self,
        device: &mut dyn BlockDevice,
        tag: u64,
        buffer: IoBuf,
        now_ns: u64,
    ) -> Result<(), String> {
        let first_block = self.offsets.next_first_block();
        let request = if self.workload.pattern.is_read() {
            Request::read(tag, first_block, buffer)
        } else {
            Request::write(tag, first_block, buffer)
        };
        self.submitted_at_ns[tag as usize] = now_ns;
        device
            .submit(request)
            .map_err(|rejected| rejected.error.to_string())
    }
}

/// Buffers for one run: from `pool` when given (registered with the device), else heap.
fn take_buffers(workload: &Workload, pool: Option<&BufferPool>) -> Result<Vec<IoBuf>, String> {
    (0..workload.queue_depth)
        .map(|_| {
            let mut buffer = match pool {
                Some(pool) => pool.try_take().map_err(|error| error.to_string())?,
                None => IoBuf::zeroed(workload.request_size_bytes as usize),
            };
            buffer.set_len(workload.request_size_bytes as usize);
            buffer.fill(0xA5);
            Ok(buffer)
        })
        .collect()
}

/// Runs `workload` on `device` for `runtime_ns` of the device's clock (or, with
/// `total_requests`, for exactly that many requests) and measures every request.
pub fn run_on_device(
    device: &mut dyn BlockDevice,
    workload: &Workload,
    runtime_ns: u64,
    total_requests: Option<u64>,
    pool: Option<&BufferPool>,
) -> Result<Figures, String> {
    assert_eq!(device.in_flight(), 0, "a workload starts on an idle device");
    let block_size_bytes = u64::from(device.info().block_size_bytes);
    let blocks_per_request = u64::from(workload.request_size_bytes) / block_size_bytes;
    assert!(blocks_per_request > 0 && workload.queue_depth <= device.info().queue_depth);
    let offsets = OffsetSource {
        sequential: workload.pattern.is_sequential(),
        blocks_per_request,
        request_slots: device.info().block_count / blocks_per_request,
        next_slot: 0,
        generator: SplitMix64::new(0xF1A5_4B1E),
    };
    let clock = device.clock();
    let mut issuer = Issuer {
        workload: *workload,
        offsets,
        submitted_at_ns: vec![0u64; workload.queue_depth as usize],
    };
    let mut tally = Tally {
        bytes: 0,
        elapsed_ns: 0,
        latencies_ns: Vec::with_capacity(1 << 16),
    };
    let buffers = take_buffers(workload, pool)?;
    let started_ns = clock.now_ns();
    let deadline_ns = started_ns.saturating_add(runtime_ns);
    let mut requests_left = total_requests.unwrap_or(u64::MAX);
    for (tag, buffer) in buffers.into_iter().enumerate() {
        if requests_left == 0 {
            break;
        }
        requests_left -= 1;
        issuer.submit(device, tag as u64, buffer, clock.now_ns())?;
    }
    let mut completions = Vec::with_capacity(workload.queue_depth as usize);
    let mut last_ns = started_ns;
    while device.in_flight() > 0 {
        device
            .wait_completions(&mut completions)
            .map_err(|error: DeviceError| error.to_string())?;
        last_ns = clock.now_ns();
        for completion in completions.drain(..) {
            completion.status.map_err(|error| error.to_string())?;
            let buffer = completion
                .buffer
                .expect("reads and writes hand their buffer back");
            let started = issuer.submitted_at_ns[completion.tag as usize];
            tally.latencies_ns.push(last_ns - started);
            tally.bytes += buffer.len() as u64;
            if last_ns < deadline_ns && requests_left > 0 {
                requests_left -= 1;
                issuer.submit(device, completion.tag, buffer, last_ns)?;
            }
        }
    }
    tally.elapsed_ns = last_ns - started_ns;
    Ok(tally.figures())
}

#[cfg(test)]
mod tests {
    use super::*;
    use flashpipe_device::RamDisk;

    #[test]
    fn percentile_takes_the_nearest_rank() {
        let check = |values: &[u64], fraction: f64, expected: u64| {
            let mut values = values.to_vec();
            assert_eq!(percentile_ns(&mut values, fraction), expected, "{values:?}");
        };
        check(&[], 0.99, 0);
        check(&[5], 0.99, 5);
        check(&(1..=100).collect::<Vec<_>>(), 0.99, 99);
        check(&(1..=1000).rev().collect::<Vec<_>>(), 0.99, 990);
    }

    #[test]
    fn rounds_combine_into_averages() {
        let round = |mb_per_s, latency_us_mean, requests| Figures {
            mb_per_s,
            iops: mb_per_s * 10.0,
            latency_us_mean,
            latency_us_p99: latency_us_mean * 3.0,
            requests,
        };
        let combined = combine_rounds(&[round(100.0, 10.0, 300), round(200.0, 20.0, 100)]);
        assert_eq!(combined.mb_per_s, 150.0);
        assert_eq!(combined.iops, 1500.0);
        assert_eq!(combined.latency_us_mean, 12.5);
        assert_eq!(combined.latency_us_p99, 45.0);
        assert_eq!(combined.requests, 400);
    }

    #[test]
    fn a_fixed_number_of_requests_is_measured_on_a_ram_disk() {
        let mut device = RamDisk::new("ram0", 4096, 256, 8).unwrap();
        for pattern in [
            Pattern::SequentialWrite,
            Pattern::SequentialRead,
            Pattern::RandomRead,
            Pattern::RandomWrite,
        ] {
            let workload = Workload {
                pattern,
                request_size_bytes: 8192,
                queue_depth: 8,
            };
            let figures =
                run_on_device(&mut device, &workload, u64::MAX / 2, Some(100), None).unwrap();
            assert_eq!(figures.requests, 100, "{}", workload.label());
        }
    }
}
