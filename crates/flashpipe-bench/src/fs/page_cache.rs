//! Dropping the operating system's page cache (`sync`, then `echo 3 >
//! /proc/sys/vm/drop_caches`), shared by `bench fs` (before each buffered read of an
//! ordinary file) and `bench kernels` (before each side's cold run), with what happened
//! said in words for the reports.

use std::process::Command;

/// The file the kernel reads the cache-dropping request from.
const DROP_CACHES_PATH: &str = "/proc/sys/vm/drop_caches";

/// What one attempt to drop the page cache did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageCacheDrop {
    /// Dirty pages written back, then clean pages, dentries and inodes dropped.
    Dropped,
    /// The caller asked not to (a `--quick` run).
    NotAsked,
    /// The kernel refused (not root, or a read-only `/proc`): the reason, in words.
    Refused(String),
}

impl PageCacheDrop {
    /// Why the cache was not dropped, or `None` when it was.
    pub fn reason_not_dropped(&self) -> Option<String> {
        match self {
            PageCacheDrop::Dropped => None,
            PageCacheDrop::NotAsked => Some("--quick runs never drop it".to_string()),
            PageCacheDrop::Refused(reason) => Some(reason.clone()),
        }
    }
}

/// Writes dirty pages back (`sync`) and drops the page cache when `wanted`.
pub fn drop_page_cache_if(wanted: bool) -> PageCacheDrop {
    if !wanted {
        return PageCacheDrop::NotAsked;
    }
    let _ = Command::new("sync").status();
    match std::fs::write(DROP_CACHES_PATH, "3\n") {
        Ok(()) => PageCacheDrop::Dropped,
        Err(error) => PageCacheDrop::Refused(format!(
            "writing 3 to {DROP_CACHES_PATH} failed ({error}; dropping the page cache needs root)"
        )),
    }
}
