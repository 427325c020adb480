//! The raw side of `flashpipe ftl fs`: the flash array driven page by page in
//! sequence, no FTL and no file system, the ceiling the stack is compared with.

use super::{mib_per_s, LatencyFigures, Plan, Progress, RawFigures};
use crate::error::{internal, BenchError, BenchErrorKind};
use crate::BenchResult;
use flashpipe_device::SplitMix64;
use flashpipe_flash::{
    Ack, AckStatus, FlashAddress, FlashArray, FlashCommand, FlashOptions, FlashRequest, SubmitError,
};

/// The raw array: timing only (contents do not change the timing).
fn raw_array(plan: &Plan) -> BenchResult<FlashArray> {
    Ok(FlashArray::new(
        plan.config.clone(),
        FlashOptions::timing_only(plan.seed),
    )?)
}

/// The pages a sequential transfer of `page_count` pages visits: consecutive pages on
/// consecutive channels, then ways, so every die is busy; factory bad blocks skipped.
fn sequential_addresses(array: &FlashArray, page_count: u64) -> Vec<FlashAddress> {
    let geometry = &array.config().geometry;
    let channels = geometry.devices * geometry.channels;
    let dies = channels * geometry.ways * geometry.dies;
    let good_blocks: Vec<Vec<u32>> = (0..dies)
        .map(|die| {
            let blocks_per_chip = geometry.dies * geometry.planes * geometry.blocks_per_plane;
            (0..blocks_per_chip)
                .filter(|&block| {
                    !array.is_factory_bad(die_address(geometry.channels, die, block, 0))
                })
                .collect()
        })
        .collect();
    (0..page_count)
        .map(|index| {
            let die = (index % u64::from(dies)) as u32;
            let slot = index / u64::from(dies);
            let block_slot = (slot / u64::from(geometry.pages_per_block)) as usize;
            let page = (slot % u64::from(geometry.pages_per_block)) as u32;
            let block = good_blocks[die as usize][block_slot];
            die_address(geometry.channels, die, block, page)
        })
        .collect()
}

/// Die `die` counted channel first (die 0 on channel 0, die 1 on channel 1, ...).
fn die_address(channels: u32, die: u32, block: u32, page: u32) -> FlashAddress {
    FlashAddress {
        device: 0,
        bus: die % channels,
        chip: die / channels,
        block,
        page,
    }
}

/// Runs `commands` with the queue kept full; returns the acks' completion times.
fn run_raw(array: &mut FlashArray, commands: Vec<FlashCommand>) -> Result<Vec<Ack>, BenchError> {
    let mut acks = Vec::with_capacity(commands.len());
    let mut pending = commands.into_iter().enumerate();
    let mut held: Option<FlashRequest> = None;
    let total = pending.len();
    while acks.len() < total {
        loop {
            let request = match held.take() {
                Some(request) => request,
                None => match pending.next() {
                    Some((index, command)) => FlashRequest {
                        tag: index as u64,
                        host: 0,
                        command,
                    },
                    None => break,
                },
            };
            match array.submit(request) {
                Ok(()) => {}
                Err(SubmitError::QueueFull { request, .. }) => {
                    held = Some(*request);
                    break;
                }
                Err(error) => {
                    return Err(internal(format!(
                        "the raw array refused a request: {error}"
                    )))
                }
            }
        }
        if array.wait_acks(&mut acks) == 0 {
            return Err(internal("the raw array stopped with requests outstanding"));
        }
    }
    if let Some(failed) = acks.iter().find(|ack| !ack.status.is_ok()) {
        let status = match &failed.status {
            AckStatus::Uncorrectable => "an uncorrectable read".to_string(),
            AckStatus::BadBlock => "a bad block".to_string(),
            AckStatus::RuleViolation(rule) => rule.to_string(),
            AckStatus::Ok { .. } => "no error".to_string(),
        };
        return Err(BenchError::new(
            BenchErrorKind::Io(std::io::ErrorKind::Other),
            format!("raw request {} failed: {status}", failed.tag),
        ));
    }
    Ok(acks)
}

fn raw_page_count(plan: &Plan) -> u64 {
    plan.size_bytes / u64::from(plan.config.geometry.page_data_bytes)
}

pub(super) fn raw_operation_count(plan: &Plan) -> u64 {
    2 * raw_page_count(plan) + u64::from(plan.random_reads)
}

pub(super) fn measure_raw(plan: &Plan) -> BenchResult<RawFigures> {
    let mut array = raw_array(plan)?;
    let page_count = raw_page_count(plan);
    let addresses = sequential_addresses(&array, page_count);
    let page_bytes = u64::from(plan.config.geometry.page_data_bytes);
    let writes = addresses
        .iter()
        .map(|&address| FlashCommand::WritePage {
            address,
            data: Vec::new(),
            spare: Vec::new(),
        })
        .collect();
    let started_ns = array.now_ns();
    let write_acks = run_raw(&mut array, writes)?;
    let write_ns = array.now_ns() - started_ns;
    let write_progress = Progress::from_acks(&write_acks, started_ns, page_bytes);
    let reads = addresses
        .iter()
        .map(|&address| FlashCommand::ReadPage { address })
        .collect();
    let started_ns = array.now_ns();
    let read_acks = run_raw(&mut array, reads)?;
    let read_ns = array.now_ns() - started_ns;
    let read_progress = Progress::from_acks(&read_acks, started_ns, page_bytes);
    let mut generator = SplitMix64::new(plan.seed ^ 0x5eed);
    let mut latencies_ns = Vec::with_capacity(plan.random_reads as usize);
    for _ in 0..plan.random_reads {
        let address = addresses[generator.below(page_count) as usize];
        let acks = run_raw(&mut array, vec![FlashCommand::ReadPage { address }])?;
        latencies_ns.push(acks[0].completed_ns - acks[0].submitted_ns);
    }
    Ok(RawFigures {
        sequential_write_mib_per_s: mib_per_s(page_count * page_bytes, write_ns),
        sequential_read_mib_per_s: mib_per_s(page_count * page_bytes, read_ns),
        page_read: LatencyFigures::from_ns(&latencies_ns),
        write_progress,
        read_progress,
    })
}
