//! The memory side of the benchmark: this machine's `memcpy` bandwidth, and sequential
//! throughput of RAM disks striped over 1, 2 and 4 members through the device layer.

use std::time::Instant;

use flashpipe_array::{CompletionOrder, StripedDevice};
use flashpipe_device::{BlockDevice, RamDisk};

/// Block size of the RAM disks.
const RAM_BLOCK_SIZE_BYTES: u32 = 4096;

/// Copies timed per measurement; the best counts.
const MEMCPY_REPETITIONS: usize = 3;

/// Measures `memcpy` bandwidth in GB/s (10^9 bytes copied per second) between two
/// buffers larger than the caches: the best single copy (peak) and the sustained rate
/// over a window as long as a workload (what a workload competes with on a shared
/// machine, where a short copy often gets a whole core and a long run does not).
pub struct MemcpyProbe {
    source: Vec<u8>,
    destination: Vec<u8>,
    request_buffers: Vec<Vec<u8>>,
    best_gb_per_s: f64,
}

/// How a probe copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyShape {
    /// One `memcpy` of the whole buffer (streaming stores on large buffers).
    WholeBuffer,
    /// Request-sized `memcpy`s into a ring of request buffers, as a RAM disk does.
    RequestSized,
}

impl MemcpyProbe {
    /// Two touched buffers of `size_bytes` and `request_count` buffers of
    /// `request_bytes` (at most `size_bytes`).
    pub fn new(size_bytes: usize, request_bytes: usize, request_count: usize) -> MemcpyProbe {
        let size_bytes = size_bytes.max(1);
        let source = vec![0x3Cu8; size_bytes];
        let mut destination = vec![0u8; size_bytes];
        destination.copy_from_slice(&source);
        let request_bytes = request_bytes.clamp(1, size_bytes);
        MemcpyProbe {
            source,
            destination,
            request_buffers: vec![vec![0u8; request_bytes]; request_count.max(1)],
            best_gb_per_s: 0.0,
        }
    }

    /// The best of a few copies now.
    pub fn measure_gb_per_s(&mut self) -> f64 {
        let mut best_ns = u128::MAX;
        for _ in 0..MEMCPY_REPETITIONS {
            let started = Instant::now();
            self.destination
                .copy_from_slice(std::hint::black_box(&self.source));
            std::hint::black_box(&mut self.destination);
            best_ns = best_ns.min(started.elapsed().as_nanos().max(1));
        }
        let middle = self.destination.len() / 2;
        assert_eq!(self.destination[middle], 0x3C, "the copy arrived");
        let gb_per_s = self.source.len() as f64 / best_ns as f64;
        self.best_gb_per_s = self.best_gb_per_s.max(gb_per_s);
        gb_per_s
    }

    /// Copies for `duration_ns` in `shape` and returns the sustained bandwidth over that
    /// window (whole-buffer copies also count toward the best).
    pub fn sustained_gb_per_s(&mut self, duration_ns: u64, shape: CopyShape) -> f64 {
        let started = Instant::now();
        let mut copied_bytes = 0u64;
        while copied_bytes == 0 || (started.elapsed().as_nanos() as u64) < duration_ns {
            copied_bytes += match shape {
                CopyShape::WholeBuffer => self.copy_whole_buffer(),
                CopyShape::RequestSized => self.copy_in_requests(),
            };
        }
        copied_bytes as f64 / started.elapsed().as_nanos().max(1) as f64
    }

    fn copy_whole_buffer(&mut self) -> u64 {
        let copy_started = Instant::now();
        self.destination
            .copy_from_slice(std::hint::black_box(&self.source));
        std::hint::black_box(&mut self.destination);
        let copy_ns = copy_started.elapsed().as_nanos().max(1);
        let gb_per_s = self.source.len() as f64 / copy_ns as f64;
        self.best_gb_per_s = self.best_gb_per_s.max(gb_per_s);
        self.source.len() as u64
    }

    /// Copies the source in request-sized pieces into a ring of request buffers: what a
    /// RAM disk read does, without the device layer.
    fn copy_in_requests(&mut self) -> u64 {
        let request_bytes = self.request_buffers[0].len();
        let ring_length = self.request_buffers.len();
        for (index, piece) in self.source.chunks_exact(request_bytes).enumerate() {
            self.request_buffers[index % ring_length].copy_from_slice(std::hint::black_box(piece));
        }
        std::hint::black_box(&mut self.request_buffers);
        (self.source.len() / request_bytes * request_bytes) as u64
    }

    /// The best bandwidth measured so far (measuring once if never measured).
    pub fn best_gb_per_s(&mut self) -> f64 {
        if self.best_gb_per_s == 0.0 {
            self.measure_gb_per_s();
        }
        self.best_gb_per_s
    }
}

/// A stripe of `member_count` RAM disks holding `total_size_bytes` in all, with one
/// stripe unit per member per request of `request_size_bytes`.
pub fn ram_stripe(
    member_count: u32,
    total_size_bytes: u64,
    request_size_bytes: u32,
    queue_depth: u32,
) -> Result<StripedDevice, String> {
    let member_size_bytes = total_size_bytes / u64::from(member_count);
    let members = (0..member_count)
        .map(|index| {
            RamDisk::new(
                &format!("ram{index}"),
                RAM_BLOCK_SIZE_BYTES,
                member_size_bytes / u64::from(RAM_BLOCK_SIZE_BYTES),
                queue_depth,
            )
            .map(|disk| Box::new(disk) as Box<dyn BlockDevice>)
            .map_err(|error| error.to_string())
        })
        .collect::<Result<Vec<_>, String>>()?;
    stripe(
        &format!("ram-stripe-x{member_count}"),
        members,
        request_size_bytes,
        queue_depth,
    )
}

/// Stripes `members` so that one request of `request_size_bytes` puts one piece on
/// each member.
pub fn stripe(
    name: &str,
    members: Vec<Box<dyn BlockDevice>>,
    request_size_bytes: u32,
    queue_depth: u32,
) -> Result<StripedDevice, String> {
    let stripe_unit_bytes = u64::from(request_size_bytes) / members.len().max(1) as u64;
    StripedDevice::new(
        name,
        members,
        stripe_unit_bytes,
        CompletionOrder::AsCompleted,
        queue_depth,
    )
    .map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memcpy_bandwidth_is_positive_and_the_best_is_kept() {
        let mut probe = MemcpyProbe::new(1 << 20, 64 << 10, 4);
        let first = probe.measure_gb_per_s();
        let second = probe.measure_gb_per_s();
        assert!(first > 0.0 && second > 0.0);
        assert_eq!(probe.best_gb_per_s(), first.max(second));
        for shape in [CopyShape::WholeBuffer, CopyShape::RequestSized] {
            assert!(probe.sustained_gb_per_s(1_000_000, shape) > 0.0);
        }
    }

    #[test]
    fn ram_stripes_have_the_asked_capacity() {
        for member_count in [1, 2, 4] {
            let stripe = ram_stripe(member_count, 8 << 20, 1 << 20, 4).unwrap();
            assert_eq!(stripe.info().size_bytes(), 8 << 20);
        }
    }
}
