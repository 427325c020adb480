//! What a store in the flash-aware layout did while one process held it, for that
//! process's stop line (`flashpipe mount`, `flashpipe serve`): the flash device's pages
//! read and programmed and its erases since it was opened, the file system's commits and
//! collection's moves since it was mounted, and the lags of real-time pacing when the
//! device is paced (`realtime = true`, docs/store-file.md).
//!
//! The device fills its part when it is dropped (the store's close); the store fills the
//! file system's part at its close ([`crate::RunningStore::close`]), from the counters
//! each commit record carries (docs/format.md, "Flash-aware layout"). The holder reads
//! the whole after the close, so a benchmark phase's flash work is one process's line.

use std::sync::{Arc, Mutex};

use flashpipe_device::paced::LagReport;
use flashpipe_fs::Filesystem;

/// One process's flash work on a flash-aware store.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlashActivity {
    /// Flash pages read.
    pub pages_read: u64,
    /// Flash pages programmed (data, metadata and commit-ring pages, collection's moves).
    pub pages_programmed: u64,
    /// Erase blocks erased.
    pub erases: u64,
    /// Programs the flash refused (a page not erased or out of order; 0 when sound).
    pub refused_programs: u64,
    /// Live pages the file system's collection moved.
    pub pages_moved: u64,
    /// Commits the file system made.
    pub commits: u64,
    /// How far behind their modeled instants completions were released, when the device
    /// was paced in real time.
    pub pacing: Option<LagReport>,
}

/// The activity shared between the device, the store and the holder that reports it.
pub type FlashActivityHandle = Arc<Mutex<FlashActivity>>;

/// Runs `change` on the activity behind `handle` (a poisoned lock still holds counters
/// worth keeping).
pub fn update(handle: &FlashActivityHandle, change: impl FnOnce(&mut FlashActivity)) {
    let mut activity = match handle.lock() {
        Ok(activity) => activity,
        Err(poisoned) => poisoned.into_inner(),
    };
    change(&mut activity);
}

/// A copy of the activity behind `handle`.
pub fn snapshot(handle: &FlashActivityHandle) -> FlashActivity {
    let mut copy = FlashActivity::default();
    update(handle, |activity| copy = activity.clone());
    copy
}

/// The file system's counters when it was mounted, to subtract at the close.
#[derive(Debug, Clone, Copy)]
pub struct FilesystemMark {
    commit_sequence: u64,
    pages_moved: u64,
}

impl FilesystemMark {
    /// The counters of `filesystem` now; `None` in the ordinary layout.
    pub fn take(filesystem: &Filesystem) -> Option<FilesystemMark> {
        let (totals, _) = filesystem.flash_totals()?;
        Some(FilesystemMark {
            commit_sequence: filesystem.stats().commit_sequence,
            pages_moved: totals.pages_moved,
        })
    }

    /// Records in `handle` the commits and moves of `filesystem` since this mark.
    pub fn record_since(&self, filesystem: &Filesystem, handle: &FlashActivityHandle) {
        let Some(now) = FilesystemMark::take(filesystem) else {
            return;
        };
        update(handle, |activity| {
            activity.commits = now.commit_sequence.saturating_sub(self.commit_sequence);
            activity.pages_moved = now.pages_moved.saturating_sub(self.pages_moved);
        });
    }
}
