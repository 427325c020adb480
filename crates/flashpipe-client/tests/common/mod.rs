//! What the client's tests share: the limits the servers they play announce.

use flashpipe_protocol::{ServerLimits, MAX_BODY_BYTES};

/// The small limits a played server announces in its welcome.
pub fn played_limits() -> ServerLimits {
    ServerLimits {
        max_body_bytes: MAX_BODY_BYTES,
        max_write_bytes: 4096,
        max_read_bytes: 4096,
        max_read_files_count: 1,
        max_read_files_bytes: 4096,
        max_in_flight_per_client: 4,
        max_bytes_in_flight_per_client: 1 << 20,
        max_read_handles_per_client: 1,
    }
}
