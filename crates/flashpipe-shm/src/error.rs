//! [`SharedMemoryError`]: every way creating, checking or mapping a shared region fails,
//! each naming the region and, where one applies, the limit.

/// Why a shared-memory region could not be created, mapped or accessed. `region` is the
/// region's name (`memfd:<name>` as the kernel reports it, or the file descriptor number
/// when the kernel reports none).
#[derive(Debug, thiserror::Error)]
pub enum SharedMemoryError {
    /// The name cannot be a memfd name (too long, or holding a NUL byte).
    #[error(
        "shared memory name {name:?} refused: {reason} (at most {max_name_bytes} bytes, no NUL)"
    )]
    NameInvalid {
        /// The name asked for.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
        /// Longest name the kernel accepts.
        max_name_bytes: usize,
    },
    /// The size is zero or above the limit.
    #[error("shared memory region {region:?} of {size_bytes} bytes refused: a region holds 1 to {max_size_bytes} bytes")]
    SizeInvalid {
        /// The region.
        region: String,
        /// The size asked for (saturated at `usize::MAX` when it overflowed).
        size_bytes: usize,
        /// Largest region accepted ([`super::MAX_SHARED_MEMORY_BYTES`]).
        max_size_bytes: usize,
    },
    /// A system call on the region failed.
    #[error("shared memory region {region:?}: {operation} failed: {source}")]
    System {
        /// The region.
        region: String,
        /// The call (`memfd_create`, `ftruncate`, `fallocate`, `F_ADD_SEALS`, `fstat`,
        /// `F_GET_SEALS`, `mmap`).
        operation: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The received region is smaller than the mapper expects.
    #[error("shared memory region {region:?} holds {actual_bytes} bytes, fewer than the {expected_bytes} bytes expected")]
    TooSmall {
        /// The region.
        region: String,
        /// Its size as `fstat` reports it.
        actual_bytes: u64,
        /// The size the mapper asked to map.
        expected_bytes: usize,
    },
    /// The received region lacks seals that keep its owner from shrinking it under the
    /// mapper (a shrunk region raises SIGBUS on access).
    #[error("shared memory region {region:?} has seals {present_seals:#x}, lacking {missing_seals:#x} (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL are required)")]
    SealsMissing {
        /// The region.
        region: String,
        /// The seals it carries (`F_GET_SEALS`).
        present_seals: i32,
        /// The required seals it lacks.
        missing_seals: i32,
    },
    /// A window reaches outside the region.
    #[error("window of {length_bytes} bytes at offset {offset_bytes} is outside shared memory region {region:?} of {size_bytes} bytes")]
    OutOfBounds {
        /// The region.
        region: String,
        /// Where the window starts.
        offset_bytes: usize,
        /// Its length.
        length_bytes: usize,
        /// The region's mapped size (the limit).
        size_bytes: usize,
    },
    /// Writable bytes asked of a read-only mapping.
    #[error("shared memory region {region:?} is mapped read-only: its bytes cannot be written")]
    ReadOnly {
        /// The region.
        region: String,
    },
}

impl SharedMemoryError {
    /// A failed system call on `region`, with the thread's last OS error.
    pub(crate) fn last_os_error(region: &str, operation: &'static str) -> SharedMemoryError {
        SharedMemoryError::System {
            region: region.to_string(),
            operation,
            source: std::io::Error::last_os_error(),
        }
    }
}
