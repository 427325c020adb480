//! Helpers shared by the kernel tests: run a kernel over in-memory data with many chunkings,
//! worker counts and map orders, and insist the result never depends on them.

#![allow(dead_code)]

use flashpipe_kernels::api::{Kernel, Summary};
use flashpipe_kernels::driver::{run_on_bytes, DrivePlan, MapOrder};
use flashpipe_kernels::error::KernelError;

/// Chunk sizes every kernel is driven with (plus the whole input as one chunk).
pub const CHUNK_SIZES_BYTES: &[usize] = &[1, 3, 7, 8, 13, 64, 1000, 4096];

/// Runs once with one plan.
pub fn run_once(
    kernel: &dyn Kernel,
    data: &[u8],
    plan: DrivePlan,
) -> Result<(Vec<u8>, Summary), KernelError> {
    let mut output = Vec::new();
    let summary = run_on_bytes(kernel, "input.bin", data, plan, &mut output)?;
    Ok((output, summary))
}

/// Runs with every chunking / worker count / order (chunk size 1 only for inputs up to 4 KiB) and
/// returns the common result, or the first error.
pub fn run_all_ways(kernel: &dyn Kernel, data: &[u8]) -> Result<(Vec<u8>, Summary), KernelError> {
    let whole = run_once(kernel, data, DrivePlan::single(data.len().max(1)))?;
    for &chunk_size_bytes in CHUNK_SIZES_BYTES {
        if chunk_size_bytes < 8 && data.len() > 4096 {
            continue;
        }
        for (worker_count, map_order) in [(1, MapOrder::Forward), (3, MapOrder::Reverse)] {
            let plan = DrivePlan {
                chunk_size_bytes,
                worker_count,
                map_order,
            };
            let result = run_once(kernel, data, plan)?;
            assert!(
                result == whole,
                "kernel {} gives a different result with {plan:?}",
                kernel.name()
            );
        }
    }
    Ok(whole)
}

/// Decodes hexadecimal test vectors.
pub fn hex(text: &str) -> Vec<u8> {
    flashpipe_kernels::options::decode_hex(text).expect("valid hex in test vector")
}

/// The shared data folder, or `None` (with a message) where it is absent.
pub fn shared_data(folder: &str) -> Option<std::path::PathBuf> {
    flashpipe_kernels::shared_data::optional_shared_folder(env!("CARGO_MANIFEST_DIR"), folder)
}
