//! Small writes kept until their file's sync. A write shorter than half a chunk is not sent
//! to the store at once: its bytes join the file's staged extents, merged with the ones they
//! overlap or touch (the newer bytes win), and go to the store as one write per extent at the
//! next command that waits for the writes in flight (fsync, close, read, stat, truncate,
//! rename, a listing: `State::drain`), before a large write to the same file, when the
//! staged bytes or extents pass their bounds, or when the oldest has waited
//! [`STAGED_MOST_AGE_NS`] (the committer's tick). So a redo log's run of 512-byte appends
//! between two fsyncs reaches the store as one write, and a page rewritten many times before
//! a sync (Aria's index pages under `mariadb-install-db`: 5,084 writes to 20 pages) is sent
//! once: a file system that writes every write out of place (the flash-aware layout: block =
//! one flash page) programs each page once per sync instead of once per write, as a kernel
//! page cache lets a local file system do.
//!
//! Durability is unchanged: nothing a write sends is committed before the file's fsync or
//! close (or the committer's commit after a close), and every one of those drains the
//! staged writes first; a write failure found when they are sent is kept for the file's
//! next fsync or close, as for a write that fails in flight.

use std::collections::BTreeMap;

/// Most bytes kept staged over all files; past it every staged extent is sent.
pub const STAGED_MOST_BYTES: usize = 8 << 20;

/// Most staged extents over all files; past it every staged extent is sent.
pub const STAGED_MOST_EXTENTS: usize = 4096;

/// Longest a staged write waits for a command that sends it (5 s, as ext4 commits its
/// journal every 5 s).
pub const STAGED_MOST_AGE_NS: u64 = 5_000_000_000;

/// One file's staged bytes: its name and extents by offset, no two overlapping or touching.
struct StagedFile {
    name: String,
    extents: BTreeMap<u64, Vec<u8>>,
}

/// The staged writes of every file.
#[derive(Default)]
pub struct Staged {
    files: BTreeMap<u64, StagedFile>,
    bytes: usize,
    extents: usize,
    /// When the oldest staged write was kept (ns since the epoch).
    oldest_ns: Option<u64>,
}

/// An extent to send: file inode and name, offset, bytes.
pub type StagedExtent = (u64, String, u64, Vec<u8>);

impl Staged {
    /// Keeps `data` for `offset_bytes` of file `inode` (`name`), merged with the extents it
    /// overlaps or touches; `now_ns` dates it when nothing was staged.
    pub fn keep(
        &mut self,
        (inode, name): (u64, &str),
        offset_bytes: u64,
        data: &[u8],
        now_ns: u64,
    ) {
        if data.is_empty() {
            return;
        }
        self.oldest_ns.get_or_insert(now_ns);
        let file = self.files.entry(inode).or_insert_with(|| StagedFile {
            name: name.to_string(),
            extents: BTreeMap::new(),
        });
        let end = offset_bytes + data.len() as u64;
        let touching: Vec<u64> = file
            .extents
            .range(..=end)
            .rev()
            .take_while(|(&start, bytes)| start + bytes.len() as u64 >= offset_bytes)
            .map(|(&start, _)| start)
            .collect();
        if let [only] = touching[..] {
            if only <= offset_bytes {
                self.write_into(inode, only, offset_bytes, data);
                return;
            }
        }
        let mut start = offset_bytes;
        let mut stop = end;
        for &at in &touching {
            start = start.min(at);
            stop = stop.max(at + file.extents[&at].len() as u64);
        }
        let mut merged = vec![0u8; (stop - start) as usize];
        for at in touching {
            let old = file.extents.remove(&at).expect("listed above");
            self.bytes -= old.len();
            self.extents -= 1;
            let from = (at - start) as usize;
            merged[from..from + old.len()].copy_from_slice(&old);
        }
        let from = (offset_bytes - start) as usize;
        merged[from..from + data.len()].copy_from_slice(data);
        self.bytes += merged.len();
        self.extents += 1;
        file.extents.insert(start, merged);
    }

    /// Writes `data` for `offset_bytes` into file `inode`'s extent at `start` (which starts
    /// at or before it and reaches it), growing the extent in place: a run of appends costs
    /// its bytes, not a copy of the extent each.
    fn write_into(&mut self, inode: u64, start: u64, offset_bytes: u64, data: &[u8]) {
        let extent = self
            .files
            .get_mut(&inode)
            .and_then(|file| file.extents.get_mut(&start))
            .expect("the extent was found above");
        let from = (offset_bytes - start) as usize;
        let stop = from + data.len();
        if extent.len() < stop {
            self.bytes += stop - extent.len();
            extent.resize(stop, 0);
        }
        extent[from..stop].copy_from_slice(data);
    }

    /// Whether the staged writes passed a bound and are all to be sent.
    pub fn over_bounds(&self) -> bool {
        self.bytes > STAGED_MOST_BYTES || self.extents > STAGED_MOST_EXTENTS
    }

    /// Whether the oldest staged write has waited its longest at `now_ns`.
    pub fn due(&self, now_ns: u64) -> bool {
        self.oldest_ns
            .is_some_and(|oldest| now_ns.saturating_sub(oldest) >= STAGED_MOST_AGE_NS)
    }

    /// Whether file `inode` has staged bytes.
    pub fn holds(&self, inode: u64) -> bool {
        self.files.contains_key(&inode)
    }

    /// Takes file `inode`'s staged extents, in offset order.
    pub fn take_file(&mut self, inode: u64) -> Vec<StagedExtent> {
        let Some(file) = self.files.remove(&inode) else {
            return Vec::new();
        };
        let taken = self.account_taken(inode, file);
        if self.files.is_empty() {
            self.oldest_ns = None;
        }
        taken
    }

    /// Takes every staged extent, file by file in offset order.
    pub fn take_all(&mut self) -> Vec<StagedExtent> {
        let files = std::mem::take(&mut self.files);
        self.oldest_ns = None;
        files
            .into_iter()
            .flat_map(|(inode, file)| self.account_taken(inode, file))
            .collect()
    }

    fn account_taken(&mut self, inode: u64, file: StagedFile) -> Vec<StagedExtent> {
        let StagedFile { name, extents } = file;
        extents
            .into_iter()
            .map(|(offset, bytes)| {
                self.bytes -= bytes.len();
                self.extents -= 1;
                (inode, name.clone(), offset, bytes)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets_and_bytes(extents: Vec<StagedExtent>) -> Vec<(u64, Vec<u8>)> {
        extents
            .into_iter()
            .map(|(_, _, offset, bytes)| (offset, bytes))
            .collect()
    }

    #[test]
    fn appends_merge_into_one_extent() {
        let mut staged = Staged::default();
        for index in 0..16u64 {
            staged.keep((7, "log"), index * 512, &[index as u8; 512], 1);
        }
        let taken = offsets_and_bytes(staged.take_file(7));
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].0, 0);
        assert_eq!(taken[0].1.len(), 8192);
        assert_eq!(taken[0].1[8191], 15);
        assert!(!staged.holds(7));
        assert_eq!((staged.bytes, staged.extents), (0, 0));
    }

    #[test]
    fn a_long_run_of_appends_grows_one_extent_in_place() {
        let mut staged = Staged::default();
        let count = (STAGED_MOST_BYTES / 512) as u64;
        for index in 0..count {
            staged.keep((7, "log"), index * 512, &[(index % 251) as u8; 512], 1);
        }
        assert_eq!((staged.bytes, staged.extents), (STAGED_MOST_BYTES, 1));
        staged.keep((7, "log"), 100, &[9; 10], 1);
        assert_eq!(staged.bytes, STAGED_MOST_BYTES);
        let taken = offsets_and_bytes(staged.take_file(7));
        assert_eq!(taken[0].1.len(), STAGED_MOST_BYTES);
        assert_eq!(&taken[0].1[100..110], &[9; 10]);
        assert_eq!(taken[0].1[512 * 300], 49);
    }

    #[test]
    fn newer_bytes_win_and_apart_extents_stay_apart() {
        let mut staged = Staged::default();
        staged.keep((1, "f"), 100, &[1; 100], 1);
        staged.keep((1, "f"), 1000, &[2; 10], 1);
        staged.keep((1, "f"), 150, &[3; 100], 1);
        staged.keep((1, "f"), 90, &[4; 20], 1);
        let taken = offsets_and_bytes(staged.take_all());
        let mut expected = vec![4u8; 20];
        expected.extend([1u8; 40]);
        expected.extend([3u8; 100]);
        assert_eq!(taken, vec![(90, expected), (1000, vec![2; 10])]);
    }

    #[test]
    fn one_write_spanning_several_extents_joins_them() {
        let mut staged = Staged::default();
        staged.keep((1, "f"), 0, &[1; 10], 1);
        staged.keep((1, "f"), 20, &[2; 10], 1);
        staged.keep((1, "f"), 40, &[3; 10], 1);
        staged.keep((1, "f"), 5, &[9; 40], 1);
        let taken = offsets_and_bytes(staged.take_all());
        assert_eq!(taken.len(), 1);
        assert_eq!(&taken[0].1[..5], &[1; 5]);
        assert_eq!(&taken[0].1[5..45], &[9; 40]);
        assert_eq!(&taken[0].1[45..], &[3; 5]);
        assert_eq!(staged.extents, 0);
    }

    #[test]
    fn bounds_and_age_say_when_to_send() {
        let mut staged = Staged::default();
        assert!(!staged.due(u64::MAX));
        staged.keep((1, "f"), 0, &[0; 10], 5);
        assert!(!staged.due(5 + STAGED_MOST_AGE_NS - 1));
        assert!(staged.due(5 + STAGED_MOST_AGE_NS));
        assert!(!staged.over_bounds());
        for index in 0..STAGED_MOST_EXTENTS as u64 {
            staged.keep((2, "g"), index * 2, &[1], 6);
        }
        assert!(staged.over_bounds());
        staged.take_all();
        assert!(!staged.due(u64::MAX));
        staged.keep((3, "h"), 0, &vec![0; STAGED_MOST_BYTES + 1], 7);
        assert!(staged.over_bounds());
    }
}
