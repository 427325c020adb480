//! The FTL's tunables ([`FtlOptions`]) and the victim policy of garbage collection.
//!
//! Invariants: options are checked once, at format and mount (`mount::check_options`),
//! and never change while the FTL runs.

/// How garbage collection picks its victim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VictimPolicy {
    /// The sealed block with the fewest valid pages.
    Greedy,
    /// The block maximizing age x (1 - u) / 2u (Rosenblum and Ousterhout's LFS cleaner).
    CostBenefit,
}

/// Tunables of an FTL.
#[derive(Debug, Clone, PartialEq)]
pub struct FtlOptions {
    /// Name in errors and reports.
    pub name: String,
    /// Share of the usable pages held back from the host (0.07 = 7 %).
    pub over_provisioning: f64,
    /// Victim selection.
    pub victim_policy: VictimPolicy,
    /// Host pages written between checkpoints (0: only when the log block fills).
    pub checkpoint_interval_pages: u64,
    /// Static wear leveling moves cold data when max - min erase count exceeds this.
    pub static_wear_leveling_spread: Option<u32>,
    /// Host requests in flight.
    pub queue_depth: u32,
    /// Victims collected at once.
    pub gc_parallel_victims: u32,
    /// Check the map against the block table after every collected block and panic on
    /// a difference (tests).
    pub check_after_collection: bool,
    /// K: the most garbage-collection migrations one host page write may be held for
    /// (collection pacing, [`crate::pacing`]); None sizes K from the geometry and the
    /// over-provisioning at format and mount; Some(0) turns pacing off (no bound: host
    /// writes then wait only when the free blocks outside the reserve run out).
    pub gc_migrations_per_host_page_max: Option<u32>,
    /// Pacing charges host pages while free blocks are below the host floor (the
    /// reserve) plus this many; 1 costs the least write amplification (docs/ftl.md).
    pub gc_pacing_headroom_blocks: u32,
    /// Panic when a host page waits past the bound (tests); the count of such waits is
    /// in [`crate::FtlStats::host_write_wait_bound_exceeded`] either way.
    pub check_host_write_wait_bound: bool,
}

impl Default for FtlOptions {
    fn default() -> Self {
        FtlOptions {
            name: "ftl".to_string(),
            over_provisioning: 0.1,
            victim_policy: VictimPolicy::Greedy,
            checkpoint_interval_pages: 4096,
            static_wear_leveling_spread: Some(64),
            queue_depth: 64,
            gc_parallel_victims: 2,
            check_after_collection: false,
            gc_migrations_per_host_page_max: None,
            gc_pacing_headroom_blocks: 1,
            check_host_write_wait_bound: false,
        }
    }
}
