//! What each emulated flash export's FTL did while `flashpipe nbd serve` ran: one line per
//! export when the server stops (a JSON object of its own under `--json`). Counters start
//! when the export is opened (the FTL's counters since it was formatted or mounted), so a
//! benchmark that wants one phase's flash work restarts the server around that phase.
//!
//! The same `flash_counters` object and line describe a store in the flash-aware layout
//! at the stop of the process that held it (`flashpipe mount`, `flashpipe serve`:
//! [`flash_aware_counters`]), from `flashpipe_store::flash_activity`: the keys that mean
//! the same (`pages_programmed`, `erases`, `gc_pages_copied`) are named the same.

use std::io::Write;
use std::sync::{Arc, Mutex};

use flashpipe_device::paced::LagReport;
use flashpipe_ftl::FtlStats;
use flashpipe_store::flash_activity::FlashActivity;

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
            write_json_line(&object);
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

/// The `flash_counters` object and the text line of what one process did to the flash of
/// the store `store` in the flash-aware layout (`pacing` as [`pacing_object`] says).
pub(crate) fn flash_aware_counters(
    store: &str,
    activity: &FlashActivity,
) -> (serde_json::Value, String) {
    let object = serde_json::json!({
        "event": "flash_counters",
        "store": store,
        "layout": "flash-aware",
        "pages_read": activity.pages_read,
        "pages_programmed": activity.pages_programmed,
        "erases": activity.erases,
        "gc_pages_copied": activity.pages_moved,
        "commits": activity.commits,
        "refused_programs": activity.refused_programs,
        "pacing": activity.pacing.as_ref().map(pacing_object),
    });
    let pacing = match &activity.pacing {
        Some(lags) => format!(
            "; paced in real time: {} completions released {:.1} us late on average (p99 {:.1} us, most {:.1} us), {} more than {:.0} us late",
            lags.released,
            lags.lag_ns_mean / 1000.0,
            micros(lags.lag_ns_p99),
            micros(lags.lag_ns_max),
            lags.warnings,
            micros(lags.lag_warning_ns),
        ),
        None => String::new(),
    };
    let text = format!(
        "store {store}: flash: {} pages read, {} pages programmed, {} erases, {} pages moved by collection, {} commits, {} programs refused{pacing}",
        activity.pages_read,
        activity.pages_programmed,
        activity.erases,
        activity.pages_moved,
        activity.commits,
        activity.refused_programs,
    );
    (object, text)
}

/// The pacing's lags as JSON, in microseconds.
fn pacing_object(lags: &LagReport) -> serde_json::Value {
    serde_json::json!({
        "released": lags.released,
        "lag_us_mean": lags.lag_ns_mean / 1000.0,
        "lag_us_p99": micros(lags.lag_ns_p99),
        "lag_us_max": micros(lags.lag_ns_max),
        "late": lags.warnings,
        "late_threshold_us": micros(lags.lag_warning_ns),
    })
}

fn micros(nanoseconds: u64) -> f64 {
    nanoseconds as f64 / 1000.0
}

/// One JSON object as a line of its own on standard error.
pub(crate) fn write_json_line(object: &serde_json::Value) {
    let _ = writeln!(std::io::stderr().lock(), "{object}");
}

/// Every page the FTL programmed: host pages, collection's moves, log and checkpoint pages.
fn pages_programmed(stats: &FtlStats) -> u64 {
    stats.host_pages_written
        + stats.gc_pages_copied
        + stats.log_pages_written
        + stats.checkpoint_pages_written
}
