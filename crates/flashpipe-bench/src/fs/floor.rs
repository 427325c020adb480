//! The floor of a checksummed file system on a RAM disk: one memcpy of a file's bytes plus
//! one CRC32C pass over them, on one core (the calling thread), the shortest of several
//! passes. A file system that copies the bytes once and checksums them once cannot move a
//! file faster than this; `bench fs` prints its write and read times over it.

use std::time::Instant;

use serde::Serialize;

/// Passes timed per size; the shortest counts (the machine's other load only adds time).
const PASSES: u32 = 9;

/// The floor of one file size.
#[derive(Debug, Clone, Serialize)]
pub struct CopyFloor {
    /// File size.
    pub file_size_bytes: u64,
    /// One memcpy plus one CRC32C pass of that many bytes, shortest of [`PASSES`].
    pub floor_us: f64,
}

/// The floor of each size, measured now.
pub fn measure(sizes_bytes: &[u64]) -> Vec<CopyFloor> {
    sizes_bytes
        .iter()
        .map(|&file_size_bytes| CopyFloor {
            file_size_bytes,
            floor_us: floor_us(file_size_bytes as usize),
        })
        .collect()
}

fn floor_us(length_bytes: usize) -> f64 {
    let source: Vec<u8> = (0..length_bytes).map(|index| (index * 131) as u8).collect();
    let mut destination = vec![0xA5u8; length_bytes];
    let mut shortest = f64::INFINITY;
    let mut checksums = 0u32;
    for _ in 0..PASSES {
        let started = Instant::now();
        destination.copy_from_slice(std::hint::black_box(&source));
        checksums ^= crc32c::crc32c(std::hint::black_box(&destination));
        shortest = shortest.min(started.elapsed().as_secs_f64() * 1e6);
    }
    std::hint::black_box(checksums);
    shortest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_gets_a_finite_floor_in_order() {
        let floors = measure(&[4096, 4 << 20]);
        let sizes: Vec<u64> = floors.iter().map(|floor| floor.file_size_bytes).collect();
        assert_eq!(sizes, [4096, 4 << 20]);
        assert!(floors
            .iter()
            .all(|floor| floor.floor_us.is_finite() && floor.floor_us >= 0.0));
    }
}
