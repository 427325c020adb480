//! RAD Fig. 4(a) measured again through the host FTL: the 1 x 1 package
//! brought to a steady state (filled sequentially, then overwritten at random pages twice
//! over), then 512-sector sequential requests one at a time replayed through the FTL
//! (`flashpipe_ftl::replay`), so each written page also pays for the garbage collection
//! it causes, as in DiskSim's SSD model. One row set per over-provisioning share.

use flashpipe_device::SplitMix64;
use flashpipe_flash::workload::{AccessKind, TraceRequest};
use flashpipe_ftl::replay::{FtlReplay, ReplayLoop, ReplayOptions, ReplayReport};
use flashpipe_ftl::FtlOptions;

use super::{rad_config, Row, MEBIBYTE};
use crate::error::internal;
use crate::BenchResult;

/// Erase blocks of the package in this experiment (the preset's 2048 would only make the
/// fill longer: collection's cost depends on the shares, not the size).
const PACKAGE_BLOCKS: u32 = 256;
/// Over-provisioning shares measured (DiskSim's SSD model leaves its own to the user).
const OVER_PROVISIONING_SHARES: [f64; 5] = [0.07, 0.15, 0.25, 0.35, 0.5];
/// Measured requests of 512 sectors (64 pages) each, per kind.
const MEASURED_REQUESTS: u64 = 64;
const REQUEST_BYTES: u64 = 512 * 512;
/// The preset's spare area holds the ECC parity and 20 bytes more; the FTL's page record
/// needs 36, so the package gets 32 spare bytes more (the preset's page transfer time is
/// a fixed figure, so timing does not change).
const FTL_SPARE_BYTES_ADDED: u32 = 32;

/// The rows: write and read bandwidth and write amplification per over-provisioning share.
pub(super) fn rad_fig4_ftl(seed: u64) -> BenchResult<Vec<Row>> {
    const PAPER_READ_1X1: f64 = 24.61;
    const PAPER_WRITE_1X1: f64 = 7.54;
    let mut rows = Vec::new();
    for over_provisioning in OVER_PROVISIONING_SHARES {
        let (write, read) = steady_state_reports(over_provisioning, seed)?;
        let percent = format!("{:.0}%", over_provisioning * 100.0);
        let x = over_provisioning * 100.0;
        // (what, measured, paper's, unit, series)
        for (what, measured, paper, unit, series) in [
            (
                "1x1 write through the FTL, steady state",
                bandwidth_mebibytes(&write, write.writes.bytes),
                Some(PAPER_WRITE_1X1),
                "MiB/s",
                "write through the FTL",
            ),
            (
                "1x1 read through the FTL, steady state",
                bandwidth_mebibytes(&read, read.reads.bytes),
                Some(PAPER_READ_1X1),
                "MiB/s",
                "read through the FTL",
            ),
            (
                "write amplification of those writes",
                write.collection.write_amplification,
                None,
                "x",
                "write amplification",
            ),
        ] {
            rows.push(
                Row::new(
                    "RAD Fig.4(a) FTL",
                    format!("{what}, OP {percent}"),
                    measured,
                    paper,
                    unit,
                )
                .at(series, x, percent.clone()),
            );
        }
    }
    Ok(rows)
}

fn bandwidth_mebibytes(report: &ReplayReport, bytes: u64) -> f64 {
    bytes as f64 / (report.elapsed_ns as f64 / 1e9) / MEBIBYTE
}

/// The measured write and read replays on a package in steady state.
fn steady_state_reports(
    over_provisioning: f64,
    seed: u64,
) -> BenchResult<(ReplayReport, ReplayReport)> {
    let mut config = rad_config(1)?;
    config.geometry.blocks_per_plane = PACKAGE_BLOCKS;
    config.geometry.page_spare_bytes += FTL_SPARE_BYTES_ADDED;
    let options = FtlOptions {
        name: "rad-1x1".to_string(),
        over_provisioning,
        checkpoint_interval_pages: 0,
        ..FtlOptions::default()
    };
    let mut replay = FtlReplay::format(config, seed, options)?;
    let pages = replay.ftl().info().block_count;
    let page_bytes = u64::from(replay.ftl().info().block_size_bytes);
    let fast = ReplayOptions {
        replay_loop: ReplayLoop::Closed { queue_depth: 4 },
        ..ReplayOptions::default()
    };
    let one_at_a_time = ReplayOptions {
        replay_loop: ReplayLoop::Closed { queue_depth: 1 },
        ..ReplayOptions::default()
    };
    let pages_per_request = REQUEST_BYTES / page_bytes;
    let fill: Vec<TraceRequest> = (0..pages / pages_per_request)
        .map(|index| sequential(AccessKind::Write, index))
        .collect();
    replay.run(&fill, &fast)?;
    let mut generator = SplitMix64::new(seed);
    let overwrites: Vec<TraceRequest> = (0..2 * pages)
        .map(|_| TraceRequest {
            arrival_ns: 0,
            kind: AccessKind::Write,
            offset_bytes: generator.below(pages) * page_bytes,
            length_bytes: page_bytes,
        })
        .collect();
    replay.run(&overwrites, &fast)?;
    let measured = |kind| -> Vec<TraceRequest> {
        (0..MEASURED_REQUESTS)
            .map(|index| sequential(kind, index))
            .collect()
    };
    let write = replay.run(&measured(AccessKind::Write), &one_at_a_time)?;
    let read = replay.run(&measured(AccessKind::Read), &one_at_a_time)?;
    if write.failed_writes() > 0 {
        return Err(internal(format!(
            "RAD Fig. 4 through the FTL: {} writes failed",
            write.failed_writes()
        ))
        .into());
    }
    Ok((write, read))
}

/// The `index`-th 512-sector request from logical byte 0.
fn sequential(kind: AccessKind, index: u64) -> TraceRequest {
    TraceRequest {
        arrival_ns: 0,
        kind,
        offset_bytes: index * REQUEST_BYTES,
        length_bytes: REQUEST_BYTES,
    }
}
