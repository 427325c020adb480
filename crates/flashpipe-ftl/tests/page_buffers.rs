//! The FTL's page buffers come from the array's free list and go back to it (reads once
//! copied out, collection copies once programmed, erased blocks): after many rounds of
//! overwrites, collection and erases every logical page reads exactly its last write and
//! pages never written read zeros, never the bytes of a buffer's earlier page.

mod support;

use flashpipe_device::{run_one, IoBuf, Operation};
use flashpipe_flash::pool::PAGE_POOL_LIMIT;
use flashpipe_flash::FlashArray;

/// The byte written to `logical` in `round` (never 0, so a page never written is told
/// apart).
fn byte_of(round: u64, logical: u64) -> u8 {
    1 + ((round * 61 + logical * 7) % 255) as u8
}

/// Reads one page into a buffer filled with 0x5A first, so the read must set every byte.
fn read_page(ftl: &mut flashpipe_ftl::Ftl, logical: u64, page: usize) -> IoBuf {
    let mut buffer = IoBuf::zeroed(page);
    buffer.fill(0x5A);
    run_one(
        ftl,
        Operation::Read {
            first_block: logical,
            buffer,
        },
    )
    .expect("read")
    .buffer
    .expect("buffer")
}

#[test]
fn reads_after_buffer_reuse_return_the_last_write_or_zeros() {
    let mut ftl = support::small_ftl(16);
    let block_count = ftl.info().block_count;
    let page = ftl.info().block_size_bytes as usize;
    let written = |logical: u64| logical % 5 != 4;
    let rounds = 8;
    for round in 0..rounds {
        for logical in (0..block_count).filter(|&logical| written(logical)) {
            support::fill_page(&mut ftl, logical, byte_of(round, logical));
        }
        for logical in (0..block_count).step_by(7) {
            read_page(&mut ftl, logical, page);
        }
    }
    ftl.check_invariants().expect("invariants");
    assert!(ftl.stats().gc_victims > 0, "the rounds need collection");
    for logical in 0..block_count {
        let data = read_page(&mut ftl, logical, page);
        let expected = if written(logical) {
            byte_of(rounds - 1, logical)
        } else {
            0
        };
        assert!(
            data.iter().all(|&byte| byte == expected),
            "logical page {logical}: expected every byte {expected}"
        );
    }
    let backend = ftl.into_backend();
    let array = backend
        .into_any()
        .downcast::<FlashArray>()
        .expect("the backend is the array");
    let free = array.free_page_buffers();
    assert!(
        free > 0 && free <= PAGE_POOL_LIMIT,
        "{free} buffers on the free list"
    );
}
