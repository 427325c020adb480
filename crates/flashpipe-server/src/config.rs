//! What a server allows: its socket and its limits.

use std::path::PathBuf;

/// A server's socket and limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Where the server listens.
    pub socket_path: PathBuf,
    /// Clients connected at once; one past it gets an error frame and is closed.
    pub max_clients: usize,
    /// Requests one client may have in flight.
    pub max_in_flight_per_client: usize,
    /// Bytes one client's requests may hold in flight (write data, read lengths).
    pub max_bytes_in_flight_per_client: u64,
    /// Bytes all clients' requests may hold in flight together.
    pub max_bytes_in_flight: u64,
    /// Read handles (windows of the shared read pool) one client may hold.
    pub max_read_handles_per_client: usize,
    /// Largest write one request may carry.
    pub max_write_bytes: u32,
    /// Slots of each mapping client's write pool.
    pub write_slots_per_client: u32,
    /// What the welcome calls the store (its store file, or a description).
    pub store_description: String,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            socket_path: PathBuf::from("flashpipe.sock"),
            max_clients: 64,
            max_in_flight_per_client: 64,
            max_bytes_in_flight_per_client: 64 << 20,
            max_bytes_in_flight: 512 << 20,
            max_read_handles_per_client: 16,
            max_write_bytes: 1 << 20,
            write_slots_per_client: 16,
            store_description: String::new(),
        }
    }
}
