//! Counters of an FTL: write amplification, collection work, wear, failures, latencies.

/// What an FTL has done since it was formatted or mounted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FtlStats {
    /// Pages the host wrote.
    pub host_pages_written: u64,
    /// Valid pages garbage collection copied.
    pub gc_pages_copied: u64,
    /// Of those, pages moved inside their die by the flash's copy-back command (no data
    /// on the bus).
    pub gc_copy_backs: u64,
    /// Log pages (trim and copy records) programmed.
    pub log_pages_written: u64,
    /// Checkpoint pages programmed.
    pub checkpoint_pages_written: u64,
    /// Checkpoints completed.
    pub checkpoints_written: u64,
    /// Blocks collected (victims chosen by the policy).
    pub gc_victims: u64,
    /// Blocks moved by static wear leveling.
    pub static_wear_leveling_moves: u64,
    /// Block erases.
    pub erases: u64,
    /// Virtual time during which collection had work in progress.
    pub gc_busy_ns: u64,
    /// Host pages that waited for collection (held by pacing or out of free pages).
    pub host_write_stalls: u64,
    /// Of those, host pages held by pacing until the migrations owed were done.
    pub gc_pacing_holds: u64,
    /// Victims whose copies needed more migrations per host page than the quota K.
    pub gc_pacing_rate_capped: u64,
    /// Longest wait of one host page write for collection (virtual).
    pub host_write_wait_ns_max: u64,
    /// Total wait of host page writes for collection (virtual).
    pub host_write_wait_ns_total: u64,
    /// Host page waits longer than the bound ([`crate::Ftl::host_write_wait_bound_ns`]).
    pub host_write_wait_bound_exceeded: u64,
    /// Programs that failed and were issued again elsewhere.
    pub programs_reissued: u64,
    /// Blocks retired after a failed program or erase.
    pub grown_bad_blocks: u64,
    /// Reads the ECC could not correct.
    pub uncorrectable_reads: u64,
    /// Logical pages copied by reference.
    pub pages_copied_by_reference: u64,
    /// Host reads completed.
    pub host_reads: u64,
    /// Sum of host read latencies (virtual).
    pub host_read_latency_ns_total: u64,
    /// Host writes, trims and copies completed.
    pub host_mutations: u64,
    /// Sum of their latencies (virtual).
    pub host_mutation_latency_ns_total: u64,
    /// Free blocks now.
    pub free_blocks: u32,
    /// Retired blocks now (factory and grown bad).
    pub retired_blocks: u32,
    /// Fewest erases of a good block.
    pub erase_count_min: u32,
    /// Mean erases of a good block.
    pub erase_count_mean: f64,
    /// Most erases of a good block.
    pub erase_count_max: u32,
}

impl FtlStats {
    pub(crate) fn record_host_latency(&mut self, read: bool, latency_ns: u64) {
        if read {
            self.host_reads += 1;
            self.host_read_latency_ns_total += latency_ns;
        } else {
            self.host_mutations += 1;
            self.host_mutation_latency_ns_total += latency_ns;
        }
    }

    /// (host + collection programs) / host programs; 1.0 before any write.
    pub fn write_amplification(&self) -> f64 {
        if self.host_pages_written == 0 {
            return 1.0;
        }
        (self.host_pages_written + self.gc_pages_copied) as f64 / self.host_pages_written as f64
    }

    /// Like [`FtlStats::write_amplification`], counting log and checkpoint pages too.
    pub fn write_amplification_with_metadata(&self) -> f64 {
        if self.host_pages_written == 0 {
            return 1.0;
        }
        (self.host_pages_written
            + self.gc_pages_copied
            + self.log_pages_written
            + self.checkpoint_pages_written) as f64
            / self.host_pages_written as f64
    }

    /// The counters gained since `earlier` (wear figures are taken from `self`).
    pub fn since(&self, earlier: &FtlStats) -> FtlStats {
        FtlStats {
            host_pages_written: self.host_pages_written - earlier.host_pages_written,
            gc_pages_copied: self.gc_pages_copied - earlier.gc_pages_copied,
            gc_copy_backs: self.gc_copy_backs - earlier.gc_copy_backs,
            log_pages_written: self.log_pages_written - earlier.log_pages_written,
            checkpoint_pages_written: self.checkpoint_pages_written
                - earlier.checkpoint_pages_written,
            checkpoints_written: self.checkpoints_written - earlier.checkpoints_written,
            gc_victims: self.gc_victims - earlier.gc_victims,
            static_wear_leveling_moves: self.static_wear_leveling_moves
                - earlier.static_wear_leveling_moves,
            erases: self.erases - earlier.erases,
            gc_busy_ns: self.gc_busy_ns - earlier.gc_busy_ns,
            host_write_stalls: self.host_write_stalls - earlier.host_write_stalls,
            gc_pacing_holds: self.gc_pacing_holds - earlier.gc_pacing_holds,
            gc_pacing_rate_capped: self.gc_pacing_rate_capped - earlier.gc_pacing_rate_capped,
            host_write_wait_bound_exceeded: self.host_write_wait_bound_exceeded
                - earlier.host_write_wait_bound_exceeded,
            host_write_wait_ns_total: self.host_write_wait_ns_total
                - earlier.host_write_wait_ns_total,
            programs_reissued: self.programs_reissued - earlier.programs_reissued,
            uncorrectable_reads: self.uncorrectable_reads - earlier.uncorrectable_reads,
            pages_copied_by_reference: self.pages_copied_by_reference
                - earlier.pages_copied_by_reference,
            host_reads: self.host_reads - earlier.host_reads,
            host_read_latency_ns_total: self.host_read_latency_ns_total
                - earlier.host_read_latency_ns_total,
            host_mutations: self.host_mutations - earlier.host_mutations,
            host_mutation_latency_ns_total: self.host_mutation_latency_ns_total
                - earlier.host_mutation_latency_ns_total,
            ..self.clone()
        }
    }
}
