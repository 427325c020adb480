//! The memory side of the benchmark: this machine's `memcpy` bandwidth, and sequential
//! throughput of RAM disks striped over 1, 2 and 4 members through the device layer.

use std::time::Instant;

use flashpipe_array::{CompletionOrder, StripedDevice};
use flashpipe_device::{BlockDevice, RamDisk};

/// Block size of the RAM disks.
const RAM_BLOCK_SIZE_BYTES: u32 = 4096;

/// Copies of the buffer timed to find the best `memcpy` bandwidth.
const MEMCPY_REPETITIONS: usize = 5;

/// Best-of-several `memcpy` bandwidth in GB/s (10^9 bytes copied per second) over two
/// buffers of `size_bytes`.
pub fn memcpy_gb_per_s(size_bytes: usize) -> f64 {
    let source = vec![0x3Cu8; size_bytes];
    let mut destination = vec![0u8; size_bytes];
    destination.copy_from_slice(&source);
    let mut best_ns = u128::MAX;
    for _ in 0..MEMCPY_REPETITIONS {
        let started = Instant::now();
        destination.copy_from_slice(std::hint::black_box(&source));
        std::hint::black_box(&mut destination);
        best_ns = best_ns.min(started.elapsed().as_nanos().max(1));
    }
    assert_eq!(destination[size_bytes / 2], 0x3C, "the copy arrived");
    size_bytes as f64 / best_ns as f64
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
    fn memcpy_bandwidth_is_positive() {
        assert!(memcpy_gb_per_s(1 << 20) > 0.0);
    }

    #[test]
    fn ram_stripes_have_the_asked_capacity() {
        for member_count in [1, 2, 4] {
            let stripe = ram_stripe(member_count, 8 << 20, 1 << 20, 4).unwrap();
            assert_eq!(stripe.info().size_bytes(), 8 << 20);
        }
    }
}
