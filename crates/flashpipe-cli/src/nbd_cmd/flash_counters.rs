//! What each emulated flash export's FTL did while `flashpipe nbd serve` ran: one line per
//! export when the server stops (a JSON object of its own under `--json`). Counters start
//! when the export is opened (the FTL's counters since it was formatted or mounted), so a
//! benchmark that wants one phase's flash work restarts the server around that phase.

use std::io::Write;
use std::sync::{Arc, Mutex};

use flashpipe_ftl::FtlStats;

/// The counters of one flash export, refreshed by its device at each flush and at close.
pub(super) struct FlashCounters {
    /// The export's name.
    pub(super) export: String,
    /// The device's counters (`FlashStoreDevice::stats_handle`).
    pub(super) stats: Arc<Mutex<FtlStats>>,
}

impl FlashCounters {
    /// Writes the export's counters: a JSON line on standard error under `json`, else an
    /// `info` log event. Called after the export's device is closed.
    pub(super) fn report(&self, json: bool) {
        let stats = match self.stats.lock() {
            Ok(stats) => stats.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let pages_programmed = pages_programmed(&stats);
        if json {
            let object = serde_json::json!({
                "event": "flash_counters",
                "export": self.export,
                "host_reads": stats.host_reads,
                "host_mutations": stats.host_mutations,
                "host_pages_written": stats.host_pages_written,
                "gc_pages_copied": stats.gc_pages_copied,
                "gc_copy_backs": stats.gc_copy_backs,
                "log_pages_written": stats.log_pages_written,
                "checkpoint_pages_written": stats.checkpoint_pages_written,
                "pages_programmed": pages_programmed,
                "erases": stats.erases,
                "write_amplification": stats.write_amplification_with_metadata(),
            });
            let _ = writeln!(std::io::stderr().lock(), "{object}");
        } else {
            tracing::info!(
                "nbd: export {}: flash: {} host reads, {} host writes/trims ({} pages), {} pages moved by collection ({} by copy-back), {} log and {} checkpoint pages, {} pages programmed, {} erases, write amplification {:.2}",
                self.export,
                stats.host_reads,
                stats.host_mutations,
                stats.host_pages_written,
                stats.gc_pages_copied,
                stats.gc_copy_backs,
                stats.log_pages_written,
                stats.checkpoint_pages_written,
                pages_programmed,
                stats.erases,
                stats.write_amplification_with_metadata(),
            );
        }
    }
}

/// Every page the FTL programmed: host pages, collection's moves, log and checkpoint pages.
fn pages_programmed(stats: &FtlStats) -> u64 {
    stats.host_pages_written
        + stats.gc_pages_copied
        + stats.log_pages_written
        + stats.checkpoint_pages_written
}
