//! The lines `flashpipe serve --json` and `flashpipe nbd serve --json` print on standard
//! output: one JSON object when the process is ready (its pid, the store and socket it
//! serves, each NBD export with its URIs), and one when it has stopped (the server's
//! counters, each a named field). Without `--json` the text lines are printed instead.

use serde::Serialize;

/// An NBD export and the URIs that reach it.
#[derive(Debug, Clone, Serialize)]
pub struct ExportAddress {
    /// The export's name.
    pub name: String,
    /// `nbd://...`, `nbds://...` and `nbd+unix://...` URIs, as the server listens.
    pub uris: Vec<String>,
}

/// The readiness object.
#[derive(Debug, Serialize)]
pub struct Ready {
    /// Always "ready".
    pub event: &'static str,
    /// Which command: "serve" or "nbd serve".
    pub command: &'static str,
    /// The process id.
    pub pid: u32,
    /// The store served (`serve` with a store).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// The Unix socket clients of the store connect to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket: Option<String>,
    /// True when the store is served read-only (`--read-only`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// The NBD server's TCP address, when it listens on one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nbd_address: Option<String>,
    /// The NBD server's Unix socket, when it listens on one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nbd_socket: Option<String>,
    /// The NBD exports, in the order given.
    pub exports: Vec<ExportAddress>,
}

impl Ready {
    /// A readiness object of `command` for this process, nothing served yet.
    pub fn new(command: &'static str) -> Ready {
        Ready {
            event: "ready",
            command,
            pid: std::process::id(),
            store: None,
            socket: None,
            read_only: None,
            nbd_address: None,
            nbd_socket: None,
            exports: Vec::new(),
        }
    }
}

/// The stop object of `flashpipe serve` with a store.
#[derive(Debug, Serialize)]
pub struct Stopped {
    /// Always "stopped".
    pub event: &'static str,
    /// The store, flushed and unmounted.
    pub store: String,
    /// Clients served.
    pub clients_total: u64,
    /// Clients refused at the client limit.
    pub clients_refused: u64,
    /// Frames received.
    pub frames_received: u64,
    /// Frames sent.
    pub frames_sent: u64,
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Requests refused.
    pub requests_refused: u64,
    /// Connections ended by malformed frames.
    pub malformed_frames: u64,
}

/// One JSON object on one line (the types here hold only strings and numbers, so they
/// always serialize).
pub fn json_line(value: &impl Serialize) -> String {
    serde_json::to_string(value).expect("strings and numbers serialize")
}
