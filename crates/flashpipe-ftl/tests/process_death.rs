//! Process death over a file-backed array: the FTL runs over a flash array kept in a
//! sparse image with `.meta` beside it; after each step of a write workload (host writes,
//! checkpoints that recycle the old checkpoint's blocks, garbage collection) the process
//! "dies" (the FTL and the array are forgotten: nothing unmounted, nothing synced, exactly
//! what `kill -9` leaves in the page cache), and a fresh open and mount must find every
//! write acknowledged before the death.
//!
//! Before the block-table journal (docs/flash-model.md, "Crash atomicity of the image"),
//! the image took programs at once but erases only at the next sync, so a death after a
//! checkpoint had recycled the old checkpoint's block left `no FTL checkpoint found`.

mod support;

use flashpipe_device::{run_batch, IoBuf, Operation, SplitMix64};
use flashpipe_flash::{FlashArray, FlashOptions, StorageMode};
use flashpipe_ftl::{FlashBackend, Ftl};
use flashpipe_testkit::scratch::ScratchFolder;

const PAGE_BYTES: u32 = 4096;

fn page_of(token: u64) -> IoBuf {
    let mut buffer = IoBuf::zeroed(PAGE_BYTES as usize);
    for chunk in buffer.chunks_mut(8) {
        chunk.copy_from_slice(&token.to_le_bytes());
    }
    buffer
}

fn mount(path: &std::path::Path) -> Ftl {
    let array = FlashArray::open(path, 1, 64).expect("the array reopens");
    let (ftl, _report) = Ftl::mount(
        Box::new(array) as Box<dyn FlashBackend>,
        support::test_options(32),
    )
    .unwrap_or_else(|error| panic!("mount after a process death: {error}"));
    ftl
}

fn write_pages(ftl: &mut Ftl, writes: &[(u64, u64)]) {
    let operations = writes
        .iter()
        .map(|&(logical, token)| Operation::Write {
            first_block: logical,
            buffer: page_of(token),
        })
        .collect();
    for completion in run_batch(ftl, operations).expect("the batch runs") {
        completion.status.expect("the write succeeds");
    }
}

fn write_random_pages(
    ftl: &mut Ftl,
    model: &mut [u64],
    generator: &mut SplitMix64,
    next_token: &mut u64,
) {
    let logical_pages = model.len() as u64;
    let mut writes: Vec<(u64, u64)> = (0..1 + generator.below(40))
        .map(|_| {
            *next_token += 1;
            (generator.below(logical_pages), *next_token)
        })
        .collect();
    writes.sort_by_key(|&(logical, _)| logical);
    writes.dedup_by_key(|&mut (logical, _)| logical);
    write_pages(ftl, &writes);
    for &(logical, token) in &writes {
        model[logical as usize] = token;
    }
}

fn check_pages(ftl: &mut Ftl, model: &[u64], step: usize) {
    let operations = (0..model.len() as u64)
        .map(|logical| Operation::Read {
            first_block: logical,
            buffer: IoBuf::zeroed(PAGE_BYTES as usize),
        })
        .collect();
    let completions = run_batch(ftl, operations).expect("the reads run");
    for (logical, completion) in completions.into_iter().enumerate() {
        let buffer = completion.buffer.expect("a read hands its buffer back");
        completion.status.expect("the read succeeds");
        let found = u64::from_le_bytes(buffer[..8].try_into().expect("8 bytes"));
        let expected = model[logical];
        assert_eq!(
            found, expected,
            "logical page {logical} after a death at step {step}"
        );
    }
}

/// Dies after every step of a workload that fills and overwrites the device several
/// times (so checkpoints recycle blocks and garbage collection erases), remounting each
/// time; every acknowledged write must be found, with no flush in between.
#[test]
fn every_acknowledged_write_survives_a_death_after_any_step() {
    die_after_every_step(false);
}

/// As the engine does: each step's writes are followed by a sync of the backing storage
/// (a completed flush), then a checkpoint recycles the old checkpoint's blocks, then the
/// process dies. Before the journal this failed with `no FTL checkpoint found`.
#[test]
fn a_checkpoint_after_a_flush_survives_a_death() {
    die_after_every_step(true);
}

fn die_after_every_step(sync_after_writes: bool) {
    let scratch = ScratchFolder::new(if sync_after_writes {
        "ftl-death-synced"
    } else {
        "ftl-death-unsynced"
    });
    let path = std::path::PathBuf::from(scratch.join("flash.img"));
    let array = FlashArray::new(
        support::small_config(16, 16),
        FlashOptions {
            seed: 3,
            storage: StorageMode::File(path.clone()),
            ..FlashOptions::default()
        },
    )
    .expect("array");
    let mut ftl = Ftl::format(
        Box::new(array) as Box<dyn FlashBackend>,
        support::test_options(32),
    )
    .expect("format");
    ftl.sync_backend_storage().expect("the format is durable");
    let logical_pages = ftl.info().block_count;
    let mut model = vec![0u64; logical_pages as usize];
    let mut generator = SplitMix64::new(11);
    let mut next_token = 1u64;
    for step in 0..60 {
        write_random_pages(&mut ftl, &mut model, &mut generator, &mut next_token);
        if sync_after_writes {
            ftl.sync_backend_storage().expect("the flush is durable");
        }
        if sync_after_writes || step % 3 == 0 {
            ftl.checkpoint_now();
        }
        if sync_after_writes {
            write_random_pages(&mut ftl, &mut model, &mut generator, &mut next_token);
        }
        std::mem::forget(ftl);
        ftl = mount(&path);
        check_pages(&mut ftl, &model, step);
    }
}
